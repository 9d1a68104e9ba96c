"""``warp_gemm.gemm``: ``alpha * op(A) @ op(B) + beta * C``, the form of Warp's removed ``wp.matmul``.

Walks through the BLAS-style arguments on wp.arrays, checking each result against NumPy in float64:

1. ``alpha`` and ``beta`` with a full ``C`` of the result's shape;
2. ``trans_a`` / ``trans_b``: operands stored transposed, read in place without a copy;
3. a bias of shape ``(N,)`` that broadcasts over the rows (``beta=1``);
4. ``beta=0``: ``C`` is not read at all, so NaN in it does not reach the result (BLAS semantics);
5. ``alpha=0``: no product is computed; the result is ``beta * C``.

    python examples/04_gemm_alpha_beta.py
    python examples/04_gemm_alpha_beta.py --device cpu --m 65 --n 33 --k 129 --dtype float64
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import warp as wp

import warp_gemm
from warp_gemm.tools.dtypes import storage_arg
from warp_gemm.tools.explain import backend
from warp_gemm.tools.reference import to_float64  # bfloat16 wp.arrays: raw bits decoded
from warp_gemm.tools.tolerance import compare, round_to


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--backend", choices=("host", "tiles"), default=None,
                   help="CPU products: host (the host BLAS, the default) or tiles (Warp's tile kernels)")
    p.add_argument("--m", type=int, default=300,
                   help="rows of op(A) and of the result (default: %(default)s)")
    p.add_argument("--n", type=int, default=200,
                   help="columns of op(B) and of the result (default: %(default)s)")
    p.add_argument("--k", type=int, default=257, help="the inner dimension (default: %(default)s)")
    p.add_argument("--dtype", default="float32", type=storage_arg,
                   help="fp16, bf16, fp32, fp64 (or float16, ...); default: %(default)s")
    return p.parse_args(argv)


def to_wp(x: np.ndarray, dtype: str, device: str) -> wp.array:
    """A float64 NumPy array as a wp.array of ``dtype`` (bfloat16 goes through float32: NumPy has none)."""
    if dtype == "bfloat16":
        return wp.array(x.astype(np.float32), dtype=wp.bfloat16, device=device)
    return wp.array(x.astype(dtype), device=device)


def main(argv=None) -> int:
    args = parse_args(argv)
    # cpu_backend="tiles" sends CPU products to the Warp tile kernels (the default is the host BLAS)
    with warp_gemm.options(**({"cpu_backend": args.backend} if args.backend else {})):
        return run(args)


def run(args) -> int:
    wp.init()
    device = args.device or default_device()
    print(f"backend: {backend(device)}")
    M, N, K, dt = args.m, args.n, args.k, args.dtype
    rng = np.random.default_rng(0)

    def rand(*shape, scale=K**-0.25):
        # Rounded to the dtype up front, so the float64 references see exactly what the GPU sees.
        return round_to(rng.standard_normal(shape) * scale, dt)

    a, b, c, bias = rand(M, K), rand(K, N), rand(M, N, scale=1.0), rand(N, scale=1.0)
    A, B, C, BIAS = (to_wp(x, dt, device) for x in (a, b, c, bias))
    # The same operands stored transposed: At is (K, M), Bt is (N, K).
    At, Bt = to_wp(np.ascontiguousarray(a.T), dt, device), to_wp(np.ascontiguousarray(b.T), dt, device)
    print(f"op(A) {M}x{K}, op(B) {K}x{N}, C {M}x{N}, bias ({N},); {dt} on {device}")

    ok = True

    def check(what, D, ref):
        nonlocal ok
        result = compare(to_float64(D), ref, dt)
        ok &= result.ok
        print(f"  {what:<44} {result}")

    # 1. alpha and beta.
    check("gemm(A, B, C, alpha=0.5, beta=-2.0)", warp_gemm.gemm(A, B, C, alpha=0.5, beta=-2.0),
          0.5 * (a @ b) - 2.0 * c)

    # 2. Transposed storage: op(X) = X.T, read in place.
    check("gemm(At, B, trans_a=True)", warp_gemm.gemm(At, B, trans_a=True), a @ b)
    check("gemm(A, Bt, trans_b=True)", warp_gemm.gemm(A, Bt, trans_b=True), a @ b)
    check("gemm(At, Bt, C, beta=1, trans_a=, trans_b=)",
          warp_gemm.gemm(At, Bt, C, beta=1.0, trans_a=True, trans_b=True), a @ b + c)

    # 3. A bias of shape (N,) broadcasts over the M rows, like NumPy: A @ B + bias.
    check("gemm(A, B, bias, beta=1.0)", warp_gemm.gemm(A, B, BIAS, beta=1.0), a @ b + bias)

    # 4. beta = 0: C is never read, so NaN in it cannot propagate (0 * NaN would be NaN).
    C_nan = to_wp(np.full((M, N), np.nan), dt, device)
    check("gemm(A, B, C_nan, beta=0.0)", warp_gemm.gemm(A, B, C_nan, beta=0.0), a @ b)

    # 5. alpha = 0: the product is skipped; D = beta * C.
    check("gemm(A, B, C, alpha=0.0, beta=3.0)", warp_gemm.gemm(A, B, C, alpha=0.0, beta=3.0), 3.0 * c)

    # And into a preallocated out (out may not overlap A, B or C: warp_gemm does not work in place).
    out = wp.empty((M, N), dtype=A.dtype, device=device)
    warp_gemm.gemm(A, B, C, alpha=2.0, beta=1.0, out=out)
    check("gemm(A, B, C, alpha=2, beta=1, out=out)", out, 2.0 * (a @ b) + c)

    print("all results within tolerance" if ok else "SOME RESULTS OUT OF TOLERANCE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
