"""The runner's providers: warp_gemm, torch (cuBLAS), Triton, NumPy, and Warp 1.6's wp.matmul where installed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from warp_gemm.tools.shapes import Shape

from .env import DType, _torch, _try_import, _wp, is_cuda, torch_on
from .inputs import Inputs, cycle_calls, out_shape, to_numpy, to_torch, to_warp


class Provider:
    """A GEMM implementation to time. ``available`` is asked once per (device, dtype); ``prepare`` builds a
    callable that multiplies the next input set per call and returns the product."""

    name = "provider"

    def available(self, device: str, dtype: DType) -> tuple[bool, str]:
        return True, ""

    def prepare(self, shape: Shape, dtype: str, tf32: bool, device: str, inputs: Inputs) -> Callable[[], Any]:
        raise NotImplementedError


class WarpGemmProvider(Provider):
    """warp_gemm.matmul on native wp.arrays (the library's own fast path), writing into a preallocated
    ``out`` so that allocation is not timed. ``config`` pins one candidate configuration (--sweep)."""

    def __init__(self, config: Any = None, config_index: int | None = None):
        self.config = config
        self.config_index = config_index  # position in candidate_configs(), to find it again in a child
        self.name = "warp_gemm" if config is None else f"warp_gemm[{config}]"

    def available(self, device, dtype):
        wg = _try_import("warp_gemm")
        if wg is None or not hasattr(wg, "matmul"):
            return False, "warp_gemm.matmul is not importable"
        return True, ""

    def prepare(self, shape, dtype, tf32, device, inputs):
        import warp_gemm

        wp = _wp()
        sets = [(to_warp(a, device), to_warp(b, device)) for a, b in inputs.sets]
        out = wp.empty(out_shape(shape), dtype=sets[0][0].dtype, device=device)
        extra = {} if self.config is None else {"config": self.config}
        return cycle_calls(sets, lambda a, b: warp_gemm.matmul(a, b, out=out, allow_tf32=tf32, **extra))


class TorchProvider(Provider):
    """torch.matmul: cuBLAS(Lt) on CUDA, MKL/OpenBLAS-backed kernels on CPU."""

    name = "torch"

    def available(self, device, dtype):
        if _torch() is None:
            return False, "torch is not installed"
        if not torch_on(device):
            return False, "torch has no CUDA"
        if dtype.tf32 and not is_cuda(device):
            return False, "TF32 is a CUDA tensor-core mode"
        return True, ""

    def prepare(self, shape, dtype, tf32, device, inputs):
        torch = _torch()
        sets = [(to_torch(a, device), to_torch(b, device)) for a, b in inputs.sets]
        out = torch.empty(out_shape(shape), dtype=sets[0][0].dtype, device=device)

        def call(a, b):
            # Set per call: the flag is process-global and other providers run in between.
            torch.backends.cuda.matmul.allow_tf32 = tf32
            return torch.matmul(a, b, out=out)

        return cycle_calls(sets, call)


class TritonProvider(Provider):
    """warp_gemm.tools.reference.triton_matmul: Triton's tutorial-style GEMM, the comparison point that is not
    a vendor library."""

    name = "triton"

    def available(self, device, dtype):
        if not is_cuda(device):
            return False, "Triton needs CUDA"
        if not torch_on(device):
            return False, "Triton needs torch with CUDA"
        ref = _try_import("warp_gemm.reference")
        if ref is None or not hasattr(ref, "triton_matmul"):
            return False, "warp_gemm.tools.reference.triton_matmul is not importable"
        return True, ""

    def prepare(self, shape, dtype, tf32, device, inputs):
        from warp_gemm.tools.reference import triton_matmul

        sets = [(to_torch(a, device), to_torch(b, device)) for a, b in inputs.sets]
        return cycle_calls(sets, lambda a, b: triton_matmul(a, b, allow_tf32=tf32))


class NumpyProvider(Provider):
    """numpy.matmul (BLAS for float32/float64; float16 has no BLAS and is slow)."""

    name = "numpy"

    def available(self, device, dtype):
        if is_cuda(device):
            return False, "numpy runs on the CPU only"
        if dtype.name == "bfloat16":
            return False, "numpy has no bfloat16"
        if dtype.tf32:
            return False, "numpy has no TF32"
        return True, ""

    def prepare(self, shape, dtype, tf32, device, inputs):
        sets = [(to_numpy(a), to_numpy(b)) for a, b in inputs.sets]
        out = np.empty(out_shape(shape), dtype=sets[0][0].dtype)
        return cycle_calls(sets, lambda a, b: np.matmul(a, b, out=out))


class WpMatmulProvider(Provider):
    """The old ``wp.matmul(a, b, c, d, alpha, beta)`` (d = alpha*a@b + beta*c; CUTLASS on CUDA), removed after
    Warp 1.6; batched shapes use its ``wp.batched_matmul`` sibling."""

    name = "wp.matmul"

    def available(self, device, dtype):
        if not hasattr(_wp(), "matmul"):
            return False, f"Warp {_wp().__version__} has no wp.matmul (removed after 1.6)"
        if dtype.name == "bfloat16":
            return False, "wp.matmul has no bfloat16"
        if dtype.tf32:
            return False, "wp.matmul has no plain TF32 mode"
        return True, ""

    def prepare(self, shape, dtype, tf32, device, inputs):
        wp = _wp()
        sets = [(to_warp(a, device), to_warp(b, device)) for a, b in inputs.sets]
        c = wp.zeros(out_shape(shape), dtype=sets[0][0].dtype, device=device)
        d = wp.empty_like(c)
        fn = wp.batched_matmul if shape.batch else wp.matmul

        def call(a, b):
            fn(a, b, c, d, 1.0, 0.0)
            return d

        return cycle_calls(sets, call)


def sweep_providers(device: str, dtype: DType) -> list[Provider]:
    """One warp_gemm provider per candidate configuration of (device, dtype)."""
    import warp_gemm

    configs = warp_gemm.candidate_configs(device, dtype.name)
    return [WarpGemmProvider(cfg, i) for i, cfg in enumerate(configs)]


