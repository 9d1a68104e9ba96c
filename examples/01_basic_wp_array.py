"""The basics: ``warp_gemm.matmul`` on ``wp.array`` operands.

Creates A (M x K) and B (K x N) as Warp arrays, multiplies them, checks the result against NumPy in
float64, then shows the three other things a first user asks about: writing into a preallocated
``out``, a batched product, and what a shape mismatch raises.

    python examples/01_basic_wp_array.py
    python examples/01_basic_wp_array.py --device cpu --m 300 --n 200 --k 100
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import warp as wp

import warp_gemm
from warp_gemm.tools.explain import backend
from warp_gemm.tools.tolerance import compare


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--backend", choices=("host", "tiles"), default=None,
                   help="CPU products: host (the host BLAS, the default) or tiles (Warp's tile kernels)")
    p.add_argument("--m", type=int, default=1000, help="rows of A and of the result (default: %(default)s)")
    p.add_argument("--n", type=int, default=700, help="columns of B and of the result (default: %(default)s)")
    p.add_argument("--k", type=int, default=500, help="columns of A, rows of B (default: %(default)s)")
    p.add_argument("--batch", type=int, default=4,
                   help="batch size of the batched example (default: %(default)s)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    # cpu_backend="tiles" sends CPU products to the Warp tile kernels (the default is the host BLAS)
    with warp_gemm.options(**({"cpu_backend": args.backend} if args.backend else {})):
        return run(args)


def run(args) -> int:
    wp.init()
    device = args.device or default_device()
    print(f"backend: {backend(device)}")
    M, N, K = args.m, args.n, args.k
    rng = np.random.default_rng(0)
    # Scaled by K**-0.25 so each element of A @ B has unit variance: the scale warp_gemm's tolerance
    # model (warp_gemm.tools.tolerance) states its bounds for.
    s = K**-0.25
    a = (rng.standard_normal((M, K)) * s).astype(np.float32)
    b = (rng.standard_normal((K, N)) * s).astype(np.float32)

    # 1. Two wp.arrays in, a new wp.array out, on the operands' device.
    A = wp.array(a, device=device)
    B = wp.array(b, device=device)
    D = warp_gemm.matmul(A, B)
    print(f"matmul: {A.shape} @ {B.shape} -> {D.shape} {D.dtype.__name__} on {D.device}")
    ok = report("matmul", D.numpy(), a.astype(np.float64) @ b)

    # 2. Into a preallocated output: no allocation per call (what a training loop wants).
    out = wp.empty((M, N), dtype=wp.float32, device=device)
    warp_gemm.matmul(A, B, out=out)
    ok &= report("matmul(out=)", out.numpy(), a.astype(np.float64) @ b)

    # 3. Batched: (batch, M, K) @ (K, N) -- the 2-D operand broadcasts over the batch, as in torch.
    ab = (rng.standard_normal((args.batch, M, K)) * s).astype(np.float32)
    Db = warp_gemm.matmul(wp.array(ab, device=device), B)
    print(f"batched: {ab.shape} @ {B.shape} -> {Db.shape}")
    ok &= report("batched", Db.numpy(), ab.astype(np.float64) @ b)

    # 4. Mistakes are caught before anything runs, with the shapes in the message.
    try:
        warp_gemm.matmul(A, A)
    except ValueError as e:
        print(f"as expected, A @ A raises ValueError: {e}")
    return 0 if ok else 1


def report(what: str, out: np.ndarray, ref: np.ndarray) -> bool:
    result = compare(out, ref, "float32")  # against the float64 product of the same float32 inputs
    print(f"  {what}: {result}")
    return result.ok


if __name__ == "__main__":
    sys.exit(main())
