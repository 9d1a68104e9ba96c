"""warp_gemm: GEMM for NVIDIA Warp built from Warp's tile primitives.

``matmul(a, b)`` and ``gemm(a, b, c, alpha=, beta=, trans_a=, trans_b=)`` on ``wp.array``,
``torch.Tensor`` or ``numpy.ndarray`` operands of any shape, in float16, bfloat16, float32 or float64,
on CUDA and CPU.
"""

from __future__ import annotations

__version__ = "0.1.0"

from warp_gemm import _compat
from warp_gemm._compat import WARP_VERSION, UnsupportedWarpError
from warp_gemm.config.configs import Config, PipeConfig, candidate_configs
from warp_gemm.api import gemm, linear, matmul
from warp_gemm.grouped import grouped_matmul, grouped_matmul_plan, grouped_mm
from warp_gemm.core.options import override as options
from warp_gemm.families.pipelined.rules import candidate_pipe_configs
from warp_gemm.tools.precompile import precompile_config
from warp_gemm.tile import tile_gemm_func
from warp_gemm.fused import fused_gemm
from warp_gemm.tools.tune import tune


def init(device: str | None = "cuda") -> None:
    """Initialise Warp and acquire ``device``'s CUDA context, once and thread-safely. Call it in the
    main thread before starting threads that build Warp arrays or call warp_gemm: Warp's own lazy
    initialisation is not thread-safe (docs/reliability.md). A no-op for the context on machines
    without CUDA."""
    _compat.init()
    import warp as wp

    if device is not None and (not str(device).startswith("cuda") or wp.get_cuda_device_count() > 0):
        _compat.init(device)

__all__ = [
    "Config",
    "PipeConfig",
    "UnsupportedWarpError",
    "WARP_VERSION",
    "candidate_configs",
    "candidate_pipe_configs",
    "gemm",
    "grouped_matmul",
    "grouped_matmul_plan",
    "grouped_mm",
    "init",
    "linear",
    "options",
    "matmul",
    "precompile_config",
    "tile_gemm_func",
    "fused_gemm",
    "tune",
]


def __getattr__(name):
    # ``warp_gemm.torch`` (custom ops, Linear) is imported on first use: importing warp_gemm must not
    # import torch. ``warp_gemm.compat`` (the wp.matmul drop-ins) likewise, on first use.
    if name in ("torch", "compat"):
        import importlib

        return importlib.import_module(f"warp_gemm.{name}")
    raise AttributeError(f"module 'warp_gemm' has no attribute {name!r}")
