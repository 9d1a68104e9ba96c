"""Round 9 probe (H100): which access pattern reads a row-major (K, N) matrix fastest with the L2 flushed,
for the vector-times-matrix product y = x B (warp_gemm's colsum GEMV; 1x4096x4096 fp16 is 27.5 us cold
against cuBLAS's 20.7, while rowdot reads the same 32 MiB cold in ~21 us).

Triton kernels only (no Warp): the patterns, not the package, are compared.

- ``strips``: a program per column strip of ``BN`` columns walking every row (the package's colsum: 64-byte
  strips, BN = 32 fp16);
- ``rows``: a program per band of ``R`` whole rows (K split), ``BN`` columns per inner step, partial sums
  to a float32 workspace ``(K / R, N)``, then a second kernel sums the bands (the finishing pass);
- torch's ``B.sum(0)`` (the same read, a tuned reduction) and cuBLAS ``x @ B`` for reference.

    python benchmarks/probes/colsum_pattern.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl
import triton.testing as tt


@triton.jit
def _strips(x_ptr, b_ptr, y_ptr, K, N, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rows = k0 + tl.arange(0, BK)
        t = tl.load(b_ptr + rows[:, None] * N + cols[None, :], mask=(rows[:, None] < K) & (cols[None, :] < N), other=0.0)
        x = tl.load(x_ptr + rows, mask=rows < K, other=0.0)
        acc += tl.sum(t.to(tl.float32) * x.to(tl.float32)[:, None], axis=0)
    tl.store(y_ptr + cols, acc.to(y_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def _rows(x_ptr, b_ptr, w_ptr, K, N, R: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    band = tl.program_id(0)
    cb = tl.program_id(1)
    cols = cb * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k0 in range(band * R, band * R + R, BK):
        rows = k0 + tl.arange(0, BK)
        t = tl.load(b_ptr + rows[:, None] * N + cols[None, :], mask=(rows[:, None] < K) & (cols[None, :] < N), other=0.0)
        x = tl.load(x_ptr + rows, mask=rows < K, other=0.0)
        acc += tl.sum(t.to(tl.float32) * x.to(tl.float32)[:, None], axis=0)
    tl.store(w_ptr + band * N + cols, acc, mask=cols < N)


@triton.jit
def _finish(w_ptr, y_ptr, S, N, BN: tl.constexpr):
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for s in range(0, S):
        acc += tl.load(w_ptr + s * N + cols, mask=cols < N, other=0.0)
    tl.store(y_ptr + cols, acc.to(y_ptr.dtype.element_ty), mask=cols < N)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for K, N in ((4096, 4096), (8192, 8192)):
        x = torch.randn(K, device="cuda").half()
        B = torch.randn(K, N, device="cuda").half()
        ref = (x.double() @ B.double())
        y = torch.full((N,), float("nan"), device="cuda", dtype=torch.float16)

        def check(name):
            err = float(((y.double() - ref).norm() / ref.norm()).item())
            assert err < 1e-2, (name, err)
            return err

        variants = {"cublas": lambda: torch.matmul(x, B, out=y), "torch_sum0": lambda: torch.sum(B, 0, out=y)}
        for bn, bk, nw in ((32, 64, 4), (32, 128, 8), (64, 64, 4), (128, 32, 4)):
            def f(bn=bn, bk=bk, nw=nw):
                _strips[(triton.cdiv(N, bn),)](x, B, y, K, N, BN=bn, BK=bk, num_warps=nw)
            variants[f"strips_bn{bn}_bk{bk}_w{nw}"] = f
        for r, bn, bk, nw in ((32, 1024, 8, 4), (32, 2048, 8, 8), (32, 4096, 4, 8), (64, 1024, 8, 4),
                              (16, 2048, 8, 8), (32, 512, 16, 4), (64, 2048, 8, 8), (128, 1024, 16, 8)):
            S = triton.cdiv(K, r)
            w = torch.empty(S, N, device="cuda", dtype=torch.float32)

            def f(r=r, bn=bn, bk=bk, nw=nw, S=S, w=w):
                _rows[(S, triton.cdiv(N, bn))](x, B, w, K, N, R=r, BN=bn, BK=bk, num_warps=nw)
                _finish[(triton.cdiv(N, 1024),)](w, y, S, N, BN=1024, num_warps=4)

            def g(r=r, bn=bn, bk=bk, nw=nw, S=S, w=w):
                _rows[(S, triton.cdiv(N, bn))](x, B, w, K, N, R=r, BN=bn, BK=bk, num_warps=nw)
            variants[f"rows_r{r}_bn{bn}_bk{bk}_w{nw}"] = f
            variants[f"rows_r{r}_bn{bn}_bk{bk}_w{nw}_nofinish"] = g
        for name, fn in variants.items():
            try:
                y.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = check(name) if "nofinish" not in name else None
                if name == "torch_sum0":
                    err = None
                cold = sorted(tt.do_bench(fn, warmup=25, rep=200) * 1e3 for _ in range(3))[1]
                row = {"K": K, "N": N, "variant": name, "cold_us": cold, "err": err}
            except Exception as e:  # noqa: BLE001
                row = {"K": K, "N": N, "variant": name, "error": repr(e)[:200]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"{'K x N':>11} {'variant':<34} {'cold us':>8}")
    for r in rows:
        print(f"{r['K']:>5}x{r['N']:<5} {r['variant']:<34} {r.get('cold_us', float('nan')):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
