"""Where the grouped Hopper kernel's time goes on 8 large experts (8192 tokens, K 4096, N 14336, weights (G, N, K)
used as W.T): the dense Hopper kernel on one 8192x14336x4096 product, the grouped kernel on one group of all
8192 rows, on 8 groups of 1024, on 8 uneven groups whose sizes are multiples of 128 (no padded tile rows), and on
8 uneven groups (the suite's split: padded last tile rows), each against F.grouped_mm / cuBLAS on the same
operands; then the uneven split with the grouped order's band of tile rows (``hopper.GROUP_M``, a launch
argument) set to each of ``--group-m``. CUDA-event medians of ``--reps`` calls after 3 warm-ups, in two passes
(A B A B) to show the drift, and the host's microseconds per call before the launch returns (counted in those
timings: the GPU waits for them).

    python benchmarks/probes/grouped_moe8_ladder.py --dtypes float16,bfloat16 --reps 20
"""

from __future__ import annotations

import argparse
import statistics

from warp_gemm.tools.bench.grouped import _time as _event_time


def _time(fn, reps):
    """Median ms of ``fn()`` between CUDA events (the grouped suite's timer)."""
    return _event_time(fn, reps)[0]


def _host_us(fn, reps):
    """Median microseconds the host spends in ``fn()`` on an idle stream (the launch is asynchronous: this is the
    time the CUDA-event timings count before the kernel starts)."""
    import time

    import torch

    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(ts) * 1e6


def main(argv=None) -> int:
    import numpy as np
    import torch
    import torch.nn.functional as F

    import warp_gemm
    from warp_gemm.families.grouped import hopper
    from warp_gemm.tools.bench.grouped import _sizes

    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--group-m", default="4,8,16,32")
    args = ap.parse_args(argv)
    G, T, K, N = 8, 8192, 4096, 14336
    uneven = _sizes(np.random.default_rng(0), G, T, 0)
    r128 = np.maximum(np.round(uneven / 128).astype(int), 1) * 128
    r128[np.argmax(r128)] += T - r128.sum()  # multiples of 128 summing to T
    splits = {"G1": np.array([T]), "even": np.full(G, T // G), "uneven128": r128, "uneven": uneven}
    for name, s in splits.items():
        pad = int((-(-s // 128) * 128).sum())
        print(f"split {name}: {s.tolist()}  computed rows {pad} ({pad / T - 1:+.1%})")
    flops = 2.0 * T * K * N
    print(f"{'dtype':<9} {'case':<10} {'warp_gemm ms':>12} {'TFLOP/s':>8} {'torch ms':>9} {'TFLOP/s':>8}  pass  "
          "host us (warp_gemm, torch)")
    for dt in args.dtypes.split(","):
        tdt = getattr(torch, dt)
        gen = torch.Generator(device="cuda").manual_seed(1)
        x = (torch.randn(T, K, device="cuda", generator=gen) * K ** -0.25).to(tdt)
        w = (torch.randn(G, N, K, device="cuda", generator=gen) * K ** -0.25).to(tdt)
        wt = w.transpose(-2, -1)
        cases = {"dense": (lambda: warp_gemm.matmul(x, wt[0]), lambda: x @ wt[0])}
        for name, s in splits.items():
            offs = torch.tensor(np.cumsum(s), dtype=torch.int32, device="cuda")
            b = wt[: len(s)]
            cases[name] = (lambda o=offs, b=b: warp_gemm.grouped_mm(x, b, offs=o),
                           lambda o=offs, b=b: F.grouped_mm(x, b, offs=o))
            out, ref = cases[name][0](), cases[name][1]()
            err = float((out.double() - ref.double()).norm() / ref.double().norm())
            assert err < 1e-2, (dt, name, err)
        for p in (1, 2):
            for name, (mine, theirs) in cases.items():
                a, b = _time(mine, args.reps), _time(theirs, args.reps)
                ha, hb = _host_us(mine, args.reps), _host_us(theirs, args.reps)
                print(f"{dt:<9} {name:<10} {a:>12.3f} {flops / a / 1e9:>8.1f} {b:>9.3f} {flops / b / 1e9:>8.1f}  {p}"
                      f"     {ha:>6.1f} {hb:>6.1f}", flush=True)
        mine = cases["uneven"][0]
        default = hopper.GROUP_M
        try:
            for gm in (int(v) for v in args.group_m.split(",")):
                hopper.GROUP_M = gm
                a = _time(mine, args.reps)
                print(f"{dt:<9} {'gm' + str(gm):<10} {a:>12.3f} {flops / a / 1e9:>8.1f}", flush=True)
        finally:
            hopper.GROUP_M = default
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
