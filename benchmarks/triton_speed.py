"""Time the Triton reference (warp_gemm.tools.reference.triton_matmul) against torch.matmul on CUDA.

    python benchmarks/triton_speed.py                  # fp16 4096^3, the tutorial's comparison
    python benchmarks/triton_speed.py --shape 8192x8192x8192 --dtype bfloat16

Inputs are random normal (A (M, K), B (K, N), row-major). Each side is timed with
``triton.testing.do_bench`` (median of repeated launches, L2 flushed between them) after a warm-up call
that lets the Triton autotuner pick its configuration for this shape. Prints TFLOP/s of both, the ratio
triton / torch (the target at fp16 4096^3 on an H100 is >= 0.9), the configuration the autotuner
chose, and the largest difference between the two results relative to the result's RMS.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys


def _load_reference():
    """warp_gemm.reference; loaded from its file when the package cannot be imported (``warp_gemm``
    imports Warp, which a GPU box may not have installed; the Triton path needs only torch/triton)."""
    try:
        from warp_gemm.tools import reference

        return reference
    except ImportError:
        path = pathlib.Path(__file__).resolve().parents[1] / "warp_gemm" / "reference.py"
        spec = importlib.util.spec_from_file_location("warp_gemm_reference", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="4096x4096x4096", help="MxNxK (default 4096x4096x4096)")
    p.add_argument("--dtype", default="float16", choices=("float16", "bfloat16", "float32"))
    p.add_argument("--tf32", action="store_true", help="float32 on TF32 tensor cores (both sides)")
    p.add_argument("--rep", type=int, default=200, help="do_bench repetition time in ms (default 200)")
    args = p.parse_args(argv)

    import torch
    from triton.testing import do_bench

    if not torch.cuda.is_available():
        print("triton_speed: needs a CUDA device", file=sys.stderr)
        return 2
    ref = _load_reference()
    M, N, K = (int(x) for x in args.shape.lower().split("x"))
    dtype = getattr(torch, args.dtype)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=dtype)
    b = torch.randn((K, N), device="cuda", dtype=dtype)

    ours = ref.triton_matmul(a, b, allow_tf32=args.tf32)  # warm-up: autotunes for this (M, N, K, dtype)
    theirs = torch.matmul(a, b)
    torch.cuda.synchronize()
    diff = (ours.float() - theirs.float()).abs().max().item() / theirs.float().pow(2).mean().sqrt().item()

    ms_triton = do_bench(lambda: ref.triton_matmul(a, b, allow_tf32=args.tf32), rep=args.rep,
                         return_mode="median")
    ms_torch = do_bench(lambda: torch.matmul(a, b), rep=args.rep, return_mode="median")
    flops = 2.0 * M * N * K

    def tflops(ms: float) -> float:
        return flops / (ms * 1e-3) / 1e12

    kernel = ref._kernels()[(True, False)]
    best = getattr(kernel, "best_config", None)
    print(f"{torch.cuda.get_device_name()}  {args.dtype}{' (tf32)' if args.tf32 else ''}  M={M} N={N} K={K}")
    print(f"triton_matmul : {ms_triton:8.4f} ms  {tflops(ms_triton):7.1f} TFLOP/s   config: {best}")
    print(f"torch.matmul  : {ms_torch:8.4f} ms  {tflops(ms_torch):7.1f} TFLOP/s")
    print(f"ratio triton/torch: {ms_torch / ms_triton:.3f}   max |diff| / rms: {diff:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
