"""Per-call time of small products in a plain Python loop -- what a user's loop sees -- for warp_gemm
(torch tensors, wp.arrays, and the torch custom op) against ``torch.matmul`` in the same run.

    python benchmarks/host_loop.py --out $OUT/host_loop.json

Cases (issue 18/19 targets): fp32 64^3, fp16 256^3, fp32 batched 1000 x 16^3. The loop synchronizes once
at the end; below ~2^27 multiply-adds the GPU finishes each product before the host has issued the next
call, so the per-call time is the host time.

``ratio_to_torch`` is the median over ``--pairs`` pairs of (warp_gemm's loop time / torch's), the two loops
of a pair timed back to back (the host's speed drifts by up to 2x over a minute on the GPU machine: loops timed a
minute apart read 1.05-1.64 for the same code). The per-call times are each side's best loop.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CASES = [("fp32", 0, 64, 64, 64), ("fp16", 0, 256, 256, 256), ("fp32", 1000, 16, 16, 16)]


def _loop(fn, iters: int) -> float:
    import torch

    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / iters)
    return best * 1e6


def _paired(ref, fn, iters: int, pairs: int) -> tuple[float, float, float]:
    """``(ref_us, fn_us, ratio)``: each side's best per-call time over ``pairs`` loops, and the median over the
    pairs of fn's loop time over ref's, the two loops of a pair timed back to back (ref first in even pairs, fn
    first in odd ones)."""
    import torch

    for f in (ref, fn):
        for _ in range(20):
            f()
    torch.cuda.synchronize()

    def once(f) -> float:
        t = time.perf_counter()
        for _ in range(iters):
            f()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / iters * 1e6

    times = []
    for r in range(pairs):
        if r % 2:
            b = once(fn)
            a = once(ref)
        else:
            a = once(ref)
            b = once(fn)
        times.append((a, b))
    ratios = sorted(b / a for a, b in times)
    return min(a for a, _ in times), min(b for _, b in times), ratios[len(ratios) // 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    import torch
    import warp as wp

    import warp_gemm

    warp_gemm.init("cuda:0")  # (wp.from_torch below needs Warp initialised)
    try:
        import warp_gemm.torch as wgt
    except Exception:  # noqa: BLE001
        wgt = None
    rows = []
    for dt, batch, M, N, K in CASES:
        tdt = torch.float16 if dt == "fp16" else torch.float32
        shp = (batch,) if batch else ()
        a = torch.randn(*shp, M, K, device="cuda", dtype=tdt)
        b = torch.randn(*shp, K, N, device="cuda", dtype=tdt)
        out = torch.empty(*shp, M, N, device="cuda", dtype=tdt)
        wa, wb, wo = wp.from_torch(a), wp.from_torch(b), wp.from_torch(out)
        res = {"case": f"{dt} {batch + 0 or ''}{'x' if batch else ''}{M}x{N}x{K}"}
        res["torch_us"], res["warp_gemm_torch_us"], res["ratio_to_torch"] = _paired(
            lambda: torch.matmul(a, b, out=out), lambda: warp_gemm.matmul(a, b, out=out), args.iters, args.pairs)
        res["warp_gemm_torch_new_out_us"] = _loop(lambda: warp_gemm.matmul(a, b), args.iters)
        res["warp_gemm_wp_us"] = _loop(lambda: warp_gemm.matmul(wa, wb, out=wo), args.iters)
        if wgt is not None:
            res["custom_op_us"] = _loop(lambda: wgt.matmul(a, b), args.iters)
        ref = torch.matmul(a.double(), b.double())
        got = warp_gemm.matmul(a, b).double()
        res["rel_err"] = float((got - ref).norm() / ref.norm())
        res["ratio_of_bests"] = res["warp_gemm_torch_us"] / res["torch_us"]
        rows.append(res)
        print(json.dumps(res), flush=True)
    print(f"{'case':22} {'torch':>8} {'wg(out)':>8} {'wg(new)':>8} {'wg(wp)':>8} {'op':>8}  ratio (paired; of bests)")
    for r in rows:
        print(f"{r['case']:22} {r['torch_us']:8.1f} {r['warp_gemm_torch_us']:8.1f} "
              f"{r['warp_gemm_torch_new_out_us']:8.1f} {r['warp_gemm_wp_us']:8.1f} "
              f"{r.get('custom_op_us', float('nan')):8.1f}  {r['ratio_to_torch']:.2f} ({r['ratio_of_bests']:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
