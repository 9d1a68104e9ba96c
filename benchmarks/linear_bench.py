"""``warp_gemm.linear`` with bias + activation against plain ``matmul`` at the same shape (issue 19: the
fused epilogue within 5% of matmul), torch CUDA tensors, median of triton's do_bench, float64-checked.

    python benchmarks/linear_bench.py --shape 4096x4096x4096 --out $OUT/linear.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--activations", default="gelu,relu,silu")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    import torch
    from triton.testing import do_bench

    import warp_gemm
    from warp_gemm.families.common.epilogue import reference

    M, N, K = (int(v) for v in args.shape.split("x"))
    dt = getattr(torch, args.dtype)
    x = torch.randn(M, K, device="cuda", dtype=dt) / K**0.25
    w = torch.randn(N, K, device="cuda", dtype=dt) / K**0.25
    b = torch.randn(N, device="cuda", dtype=dt)
    flops = 2 * M * N * K
    rows = []
    t_mm = do_bench(lambda: warp_gemm.matmul(x, w.T), return_mode="median")
    t_cublas = do_bench(lambda: torch.nn.functional.linear(x, w, b), return_mode="median")
    rows.append({"what": "matmul(x, w.T)", "ms": t_mm, "tflops": flops / t_mm / 1e9})
    rows.append({"what": "torch F.linear + bias (cuBLAS)", "ms": t_cublas, "tflops": flops / t_cublas / 1e9})
    z64 = x[:64].double() @ w.double().T + b.double()
    for act in [a for a in args.activations.split(",") if a]:
        y = warp_gemm.linear(x, w, b, activation=act)
        ref = reference(act, z64)
        err = float((y[:64].double() - ref).norm() / ref.norm())
        t = do_bench(lambda: warp_gemm.linear(x, w, b, activation=act), return_mode="median")
        rows.append({"what": f"linear bias+{act}", "ms": t, "tflops": flops / t / 1e9, "rel_err_rows64": err,
                     "vs_matmul": t / t_mm})
    for r in rows:
        print(f"{r['what']:32} {r['ms']:8.4f} ms {r['tflops']:7.1f} TFLOP/s" +
              (f"  x{r['vs_matmul']:.3f} of matmul  err {r['rel_err_rows64']:.1e}" if "vs_matmul" in r else ""))
    if args.out:
        Path(args.out).write_text(json.dumps({"shape": args.shape, "dtype": args.dtype, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
