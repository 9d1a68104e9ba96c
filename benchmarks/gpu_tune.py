"""One GPU call: compile every candidate in parallel, tune, time cuBLAS on the same shapes.

    python benchmarks/gpu_tune.py --dtypes fp16,bf16 --out $OUT
    python benchmarks/gpu_tune.py --dtypes fp16 --shapes 16x8192x8192 --configs "16x64x256/b128/s0;16x128x256/b256/s8" \
        --no-persist --rows skinny.jsonl --out $OUT     # a focused sweep: these configs only
    python benchmarks/gpu_tune.py --group "fp16@16x8192x8192@16x64x256/b128/s0;16x128x256/b256/s8" \
        --group "tf32@4096x4096x4096@128x128x32/b256/g4/o2" --no-persist --out $OUT
        # several focused sweeps; every group's kernels are compiled in one parallel pool first

Writes OUT/tune_rows.jsonl (one row per config x shape, as measured), OUT/tuned_sm90.json (winners,
the shipped-table format) and prints a short table of the best warp_gemm config per shape vs torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="fp16,bf16,fp32,tf32,fp64")
    ap.add_argument("--shapes", default="1024x1024x1024,1000x1000x1000,4096x4096x4096,4095x4095x4095,"
                                        "8192x8192x8192,16x8192x8192,4096x11008x4096,8192x8192x64")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rep-ms", type=float, default=60)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--configs", default="", help="';'-separated configurations (default: the candidates)")
    ap.add_argument("--no-persist", action="store_true", help="do not write the winners to the user cache")
    ap.add_argument("--rows", default="tune_rows.jsonl", help="file name of the rows under --out")
    ap.add_argument("--no-torch", action="store_true", help="skip the cuBLAS rows")
    ap.add_argument("--group", action="append", default=[], metavar="DTYPES@SHAPES@CONFIGS",
                    help="a focused sweep (repeatable; replaces --dtypes/--shapes/--configs)")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.getcwd())
    import warp as wp
    from warp_gemm.tools import shapes as S
    from warp_gemm.config import tables
    from warp_gemm.tools import tune
    from warp_gemm.config.configs import Config
    from warp_gemm.tools.precompile import canon_dtype

    def parse_configs(text):
        return [Config.parse(c) for c in text.split(";") if c.strip()] or None

    groups = [(g.split("@")[0].split(","), S.get_set(g.split("@")[1]), parse_configs(g.split("@")[2]))
              for g in args.group] or [(args.dtypes.split(","), S.get_set(args.shapes), parse_configs(args.configs))]
    if len(groups) > 1:  # compile every group's kernels in one pool (a cold compile is ~60 s)
        from warp_gemm.tools.precompile import build_jobs, jobs_for

        t0 = time.time()
        errs = [r for r in build_jobs([j for dts, _, cfgs in groups for j in jobs_for([canon_dtype(d) for d in dts],
                                                                                    configs=cfgs)],
                                      None, args.workers) if r[2]]
        print(f"compiled all groups in {time.time() - t0:.0f}s; errors: {errs}", file=sys.stderr)
    rows_path = os.path.join(args.out, args.rows)
    fh = open(rows_path, "a")

    def on_row(r):
        fh.write(json.dumps(r) + "\n")
        fh.flush()

    t0 = time.time()
    rows = []
    for dts, shapes, configs in groups:
        rows += tune.tune(dts, shapes=shapes, workers=args.workers, configs=configs,
                          persist=not args.no_persist, progress=True, rep_ms=args.rep_ms, on_row=on_row)
        print(f"tune wall {time.time() - t0:.0f}s; {rows[-1]}", file=sys.stderr)
    dev = wp.get_device("cuda")
    import shutil

    if not args.no_persist:
        shutil.copy(tables.user_cache_path(dev), os.path.join(args.out, "tuned_sm90.json"))
    # cuBLAS on the same shapes
    import torch

    tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
           "float64": torch.float64, "tf32": torch.float32}
    base = {}
    from triton.testing import do_bench

    for dt, shapes in [] if args.no_torch else dict.fromkeys(
            (canon_dtype(d), tuple(shs)) for dts, shs, _ in groups for d in dts):
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        for s in shapes:
            a = torch.randn(s.M, s.K, device="cuda").to(tdt[dt])
            b = torch.randn(s.K, s.N, device="cuda").to(tdt[dt])
            ms = do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median")
            base[(dt, s.id)] = s.flops / ms / 1e9
            on_row({"provider": "torch", "dtype": dt, "shape": s.id, "ms": ms, "tflops": base[(dt, s.id)]})
    torch.backends.cuda.matmul.allow_tf32 = False
    best = {}
    for r in rows:
        if r.get("status") == "ok":
            k = (r["dtype"], r["shape"])
            if k not in best or r["tflops"] > best[k][0]:
                best[k] = (r["tflops"], r["config"])
    if args.group:  # focused sweeps: every row, fastest first per shape
        ok = sorted((r for r in rows if r.get("status") == "ok"), key=lambda r: (r["dtype"], r["shape"], -r["tflops"]))
        for r in ok:
            print(f"{r['dtype']:8} {r['shape']:18} {r['config']:26} {r['tflops']:7.1f}")
    print(f"{'dtype':8} {'shape':22} {'best warp_gemm':>14} {'config':22} {'torch':>8}")
    for (dt, sid), (tf, cfg) in sorted(best.items()):
        print(f"{dt:8} {sid:22} {tf:14.1f} {cfg:22} {base.get((dt, sid), 0):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
