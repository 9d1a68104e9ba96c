"""How much of a small warp_gemm call is host time?  (issue #6: 1000^3 and 16x8192x8192)

For each shape: the time per call of a plain Python loop of ``warp_gemm.matmul`` (what a user's loop
sees), the GPU time of the same call replayed from a CUDA graph (no host work), and a cProfile of the
loop's host side (top functions by own time).

    python benchmarks/host_overhead.py --shapes 1000x1000x1000,16x8192x8192 --out results/host.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1000x1000x1000,16x8192x8192,4096x4096x4096")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    import torch

    import warp_gemm

    res = []
    for s in args.shapes.split(","):
        M, N, K = (int(x) for x in s.split("x"))
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        out = torch.empty(M, N, device="cuda", dtype=torch.float16)
        for _ in range(5):
            warp_gemm.matmul(a, b, out=out)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(args.iters):
            warp_gemm.matmul(a, b, out=out)
        host_end = time.perf_counter()
        torch.cuda.synchronize()
        loop = (time.perf_counter() - t) / args.iters
        host = (host_end - t) / args.iters  # host time to enqueue (GPU may lag behind)
        # GPU-only: the same call captured once, replayed
        g = torch.cuda.CUDAGraph()
        s_ = torch.cuda.Stream()
        s_.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s_):
            warp_gemm.matmul(a, b, out=out)
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=s_):
                warp_gemm.matmul(a, b, out=out)
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(args.iters):
            g.replay()
        torch.cuda.synchronize()
        gpu = (time.perf_counter() - t) / args.iters
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(args.iters):
            warp_gemm.matmul(a, b, out=out)
        pr.disable()
        torch.cuda.synchronize()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(14)
        flops = 2 * M * N * K
        row = {"shape": s, "loop_us": loop * 1e6, "host_enqueue_us": host * 1e6, "graph_replay_us": gpu * 1e6,
               "loop_tflops": flops / loop / 1e12, "graph_tflops": flops / gpu / 1e12, "profile": buf.getvalue()}
        res.append(row)
        print(f"{s:18s} loop {loop*1e6:8.1f} us ({row['loop_tflops']:6.1f} TFLOP/s)  host enqueue "
              f"{host*1e6:7.1f} us  graph replay {gpu*1e6:8.1f} us ({row['graph_tflops']:6.1f} TFLOP/s)", flush=True)
    for r in res:
        print(f"--- {r['shape']}\n" + "\n".join(r["profile"].splitlines()[:30]))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
