"""Multiply matrices whose sizes are not multiples of any tile, and check every result.

This is warp_gemm's main job: Warp's own tile GEMM example handles tile multiples only, while
warp_gemm takes any M, N and K. For each shape and dtype this program draws fresh inputs (scaled so
every element of the product has unit variance), multiplies them with ``warp_gemm.matmul``, computes
the same product in float64 with NumPy, and prints the comparison under warp_gemm's tolerance model
(``warp_gemm.tools.tolerance``). It exits with status 1 if any result is out of bounds.

    python examples/02_odd_shapes.py                          # CUDA if available, else CPU
    python examples/02_odd_shapes.py --device cpu --dtype fp32,fp64
    python examples/02_odd_shapes.py --device cpu --backend tiles   # the Warp tile kernels on the CPU
    python examples/02_odd_shapes.py --shapes 1023x1025x1027,7x13x97,3x33x17x65   # BxMxNxK: batched
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

import numpy as np
import warp as wp

import warp_gemm
from warp_gemm.tools import dtypes
from warp_gemm.tools.explain import backend, family
from warp_gemm.tools.reference import to_float64  # bfloat16 wp.arrays: raw bits decoded
from warp_gemm.tools.shapes import get_set
from warp_gemm.tools.tolerance import compare, random_operands

# 1023x1025x1027 sits one below or above a multiple of every tile size in every dimension; the small
# primes leave partial tiles on both edges, 5x1031x1000 is a skinny (decode-style) product, 64x64x3 has
# K below one K tile, and 3x33x17x65 is a batch of three.
DEFAULT_SHAPES = "1023x1025x1027,7x13x97,97x251x7,251x97x13,1021x7x13,5x1031x1000,64x64x3,3x33x17x65"


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--shapes", default=DEFAULT_SHAPES,
                   help="comma-separated MxNxK or BxMxNxK shapes, or set names from warp_gemm.tools.shapes "
                        "such as odd, primes, tiny (default: %(default)s)")
    p.add_argument("--dtype", default=None,
                   help="comma-separated dtypes among fp16, bf16, fp32, fp64 (or float16, ...) "
                        "(default: fp16,fp32 on CUDA, fp32 on CPU)")
    p.add_argument("--backend", choices=("host", "tiles"), default=None,
                   help="CPU products: host (the host BLAS, the default) or tiles (Warp's tile kernels)")
    p.add_argument("--seed", type=int, default=0, help="random seed for the inputs (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        args.shape_list = get_set(args.shapes)
        args.dtype_list = dtypes.parse_list(args.dtype) if args.dtype else None
    except ValueError as e:
        p.error(str(e))
    if "tf32" in (args.dtype_list or []):
        p.error("tf32 is not one of this example's dtypes (see examples/06_benchmark_your_shape.py --allow-tf32)")
    return args


def to_wp(x: np.ndarray, dtype: str, device: str) -> wp.array:
    """A float64 NumPy array as a wp.array of ``dtype`` (bfloat16 goes through float32: NumPy has none)."""
    if dtype == "bfloat16":
        return wp.array(x.astype(np.float32), dtype=wp.bfloat16, device=device)
    return wp.array(x.astype(dtype), device=device)


def main(argv=None) -> int:
    args = parse_args(argv)
    # warp_gemm.options scopes planner switches to a with-block; cpu_backend="tiles" sends CPU products to
    # the Warp tile kernels (the default is the host BLAS).
    scope = warp_gemm.options(cpu_backend=args.backend) if args.backend else contextlib.nullcontext()
    with scope:
        return run(args)


def run(args) -> int:
    device = args.device or default_device()
    dtype_list = args.dtype_list or (["float32"] if device.startswith("cpu") else ["float16", "float32"])
    rng = np.random.default_rng(args.seed)
    wp.init()  # Warp prints its banner here rather than in the middle of the table
    print(f"warp_gemm {warp_gemm.__version__}, warp-lang {warp_gemm.WARP_VERSION}, device {device}")
    print(f"backend: {backend(device)}")
    print("time: one call, synchronized; a kernel's first call includes building or loading it")
    failures = total = 0
    for dtype in dtype_list:
        for s in args.shape_list:
            a, b = random_operands(s.M, s.N, s.K, dtype, rng, batch=s.batch)  # float64, rounded to dtype
            A, B = to_wp(a, dtype, device), to_wp(b, dtype, device)
            fam = family(A, B)  # the kernel family the planner picks for this product (nothing launched)
            t = time.perf_counter()
            D = warp_gemm.matmul(A, B)
            wp.synchronize_device(device)
            ms = (time.perf_counter() - t) * 1e3
            result = compare(to_float64(D), a @ b, dtype)  # a @ b: the float64 ground truth
            total += 1
            failures += not result.ok
            print(f"{s.id:>20} {dtype:>8} {ms:9.1f} ms  {fam:<22} {result}")
    verdict = f"; {failures} FAILED" if failures else ""
    print(f"{total - failures}/{total} results within tolerance{verdict}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
