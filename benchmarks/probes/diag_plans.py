"""Where does a call's time go? For each case: the plan, host time per call (plain Python loop), GPU
time per call (CUDA events around the loop, and a CUDA-graph replay of one call), the kernels the
call launches with their durations (torch.profiler), and the time spent in Warp's Module.load per
call (a module reloaded on every call would show here).

    python benchmarks/probes/diag_plans.py --warm -j 16      # compile every case, parallel processes
    python benchmarks/probes/diag_plans.py --json out.json   # then time them in one process

Written for the fp16 512^3 anomaly (0.47-0.53 ms per call against cuBLAS's 7 us, rounds 2 and 3).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _graph import replay_us  # noqa: E402

# name: (M, N, K, dtype, container, config or None, options)
CASES = {
    "fp16_512_torch": (512, 512, 512, "float16", "torch", None, {}),
    "fp16_512_wp": (512, 512, 512, "float16", "warp", None, {}),
    "fp16_512_nosplit": (512, 512, 512, "float16", "torch", "64x64x128/b128/g8", {}),
    "fp16_512_split2": (512, 512, 512, "float16", "torch", "64x64x128/b128/g8/s2", {}),
    "fp16_512_pipe": (512, 512, 512, "float16", "torch", None, {"family": "pipelined"}),
    "fp16_256": (256, 256, 256, "float16", "torch", None, {}),
    "fp16_768": (768, 768, 768, "float16", "torch", None, {}),
    "fp16_640_pipe": (640, 640, 640, "float16", "torch", None, {"family": "pipelined"}),
    "fp16_640": (640, 640, 640, "float16", "torch", None, {}),
    "fp32_512": (512, 512, 512, "float32", "torch", None, {}),
    "bf16_512": (512, 512, 512, "bfloat16", "torch", None, {}),
    "fp16_1024": (1024, 1024, 1024, "float16", "torch", None, {}),
    # round 5: where the odd shapes' time goes (staging passes against the GEMM)
    "fp16_4095": (4095, 4095, 4095, "float16", "torch", None, {}),
    "fp16_4096": (4096, 4096, 4096, "float16", "torch", None, {}),
    "fp16_1023odd": (1023, 1025, 1027, "float16", "torch", None, {}),
    "fp16_127odd": (127, 4099, 1031, "float16", "torch", None, {}),
    "fp16_gemv": (1, 4096, 4096, "float16", "torch", None, {}),
    "fp16_gemv_nt": (1, 4096, 4096, "float16", "torch_nt", None, {}),
    # small squares: the tiled family (split-K) against the pipelined family's 64x32 tiles
    "fp16_500": (500, 500, 500, "float16", "torch", None, {}),
    "fp16_500_pipe": (500, 500, 500, "float16", "torch", None, {"family": "pipelined"}),
    "fp16_256_pipe": (256, 256, 256, "float16", "torch", None, {"family": "pipelined"}),
    "fp16_384": (384, 384, 384, "float16", "torch", None, {}),
    "fp16_384_pipe": (384, 384, 384, "float16", "torch", None, {"family": "pipelined"}),
    "fp16_640_pipe": (640, 640, 640, "float16", "torch", None, {"family": "pipelined"}),
}


def make(case):
    import torch

    import warp as wp
    import warp_gemm as wg
    from warp_gemm.config.configs import Config

    M, N, K, dt, cont, cfg, opts = CASES[case]
    tdt = getattr(torch, dt)
    a = torch.randn(M, K, device="cuda", dtype=torch.float32).to(tdt)
    b = torch.randn(K, N, device="cuda", dtype=torch.float32).to(tdt)
    if cont == "torch_nt":  # B stored transposed (a torch Linear weight): layout T
        b = torch.randn(N, K, device="cuda", dtype=torch.float32).to(tdt).t()
    out = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    cfg = Config.parse(cfg) if cfg else None
    if cont == "warp":
        a, b, out = wp.from_torch(a), wp.from_torch(b), wp.from_torch(out)

    def fn():
        with wg.options(**opts):
            return wg.matmul(a, b, out=out, config=cfg, allow_tf32=False)

    def check():
        o = wp.to_torch(out) if cont == "warp" else out
        at = wp.to_torch(a) if cont == "warp" else a
        bt = wp.to_torch(b) if cont == "warp" else b
        ref = at.double() @ bt.double()
        return float(((o.double() - ref).abs().max() / ref.abs().max()).item())

    return fn, check, (a, b, out, cfg, opts)


def plan_text(case, held):
    import warp_gemm as wg
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate

    a, b, out, cfg, opts = held
    with wg.options(**opts) as o:
        p = validate(a, b, None, 1.0, 0.0, False, False, out, "matmul")
        pl = make_plan(p, 1.0, 0.0, False, cfg, o)
    if pl.family == "tiled":
        return f"tiled {pl.cfg} splits={pl.splits} padded={pl.padded} ws={pl.workspace} {pl.spec.key}"
    return f"{pl.family} {pl.family_spec}"


def measure(case):
    import torch

    import warp as wp

    fn, check, held = make(case)
    row = {"case": case, "plan": plan_text(case, held)}
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    row["first_s"] = time.perf_counter() - t0
    row["err"] = check()
    # Module.load time per call in steady state
    try:
        from warp._src.context import Module  # Warp 1.10+
    except Exception:  # noqa: BLE001
        from warp.context import Module
    orig = Module.load
    spent = [0.0, 0]

    def load(self, *a, **k):
        t = time.perf_counter()
        try:
            return orig(self, *a, **k)
        finally:
            spent[0] += time.perf_counter() - t
            spent[1] += 1

    Module.load = load
    n = 200
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    spent[:] = [0.0, 0]
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    e0.record()
    for _ in range(n):
        fn()
    e1.record()
    host = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    row["host_us"] = host * 1e6
    row["events_us"] = e0.elapsed_time(e1) / n * 1e3
    row["load_us_per_call"] = spent[0] / n * 1e6
    row["loads_per_call"] = spent[1] / n
    Module.load = orig
    # pure GPU time: one call captured in a CUDA graph, replayed
    try:
        row["graph_us"] = replay_us(fn, warm=5, rounds=1, reps=n)
    except Exception as e:  # noqa: BLE001
        row["graph_us"] = f"{type(e).__name__}: {e}"[:200]
    # kernels per call
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    ks = []
    for ev in prof.key_averages():
        if ev.device_type.name == "CUDA" or getattr(ev, "device_time_total", 0):
            ks.append((ev.key[:90], ev.count, round(getattr(ev, "device_time_total", 0) / max(ev.count, 1), 2)))
    row["kernels"] = ks
    # cuBLAS for reference
    import torch as _t

    M, N, K, dt, *_ = CASES[case]
    ta = _t.randn(M, K, device="cuda").to(getattr(_t, dt))
    tb = _t.randn(K, N, device="cuda").to(getattr(_t, dt))
    for _ in range(10):
        ta @ tb
    torch.cuda.synchronize()
    e0.record()
    for _ in range(n):
        ta @ tb
    e1.record()
    torch.cuda.synchronize()
    row["torch_us"] = e0.elapsed_time(e1) / n * 1e3
    return row


def measure_rot(case, n_sets):
    """The benchmark runner's way: ``n_sets`` input sets (wp.from_torch views) cycled, one out; host time
    per call, do_bench's median, and how many calls planned anew (core.execute.make_plan)."""
    import torch

    import warp as wp
    import warp_gemm as wg
    from warp_gemm.core import execute

    M, N, K, dt, cont, cfg, opts = CASES[case]
    tdt = getattr(torch, dt)
    sets = [(wp.from_torch(torch.randn(M, K, device="cuda").to(tdt)), wp.from_torch(torch.randn(K, N, device="cuda").to(tdt)))
            for _ in range(n_sets)]
    out = wp.empty((M, N), dtype=sets[0][0].dtype, device="cuda")
    it = [0]

    def fn():
        a, b = sets[it[0] % n_sets]
        it[0] += 1
        wg.matmul(a, b, out=out, allow_tf32=False)

    cnt = [0]
    orig = execute.make_plan

    def mp(*a, **k):
        cnt[0] += 1
        return orig(*a, **k)

    execute.make_plan = mp
    for _ in range(n_sets + 5):
        fn()
    torch.cuda.synchronize()
    cnt[0] = 0
    t = time.perf_counter()
    for _ in range(3 * n_sets):
        fn()
    host = (time.perf_counter() - t) / (3 * n_sets)
    torch.cuda.synchronize()
    loop = (time.perf_counter() - t) / (3 * n_sets)
    planned = cnt[0]
    import triton.testing

    med = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5])
    med = med[0] if isinstance(med, (list, tuple)) else med
    execute.make_plan = orig
    return {"case": f"{case}_rot{n_sets}", "host_us": host * 1e6, "loop_us": loop * 1e6, "planned": planned,
            "do_bench_us": med * 1e3}


def runner_counts(argv):
    """benchmarks/run.py itself (``argv``), counting what the warp_gemm calls did: full-path calls
    (core.execute.make_plan), fresh launches (core.launches._launch_now), replayed call plans, and the
    host time spent in warp_gemm.matmul."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import run as runner

    import warp_gemm
    from warp_gemm.core import execute, launches

    n = {"make_plan": 0, "launch_now": 0, "replay": 0, "calls": 0, "matmul_s": 0.0}

    def wrap(mod, name, key):
        orig = getattr(mod, name)

        def f(*a, **k):
            n[key] += 1
            return orig(*a, **k)

        setattr(mod, name, f)

    wrap(execute, "make_plan", "make_plan")
    wrap(launches, "_launch_now", "launch_now")
    wrap(launches, "replay", "replay")
    orig_mm = warp_gemm.matmul

    def mm(*a, **k):
        t = time.perf_counter()
        try:
            return orig_mm(*a, **k)
        finally:
            n["calls"] += 1
            n["matmul_s"] += time.perf_counter() - t

    warp_gemm.matmul = mm
    rc = runner.main(argv)
    n["host_us_per_call"] = n["matmul_s"] / max(n["calls"], 1) * 1e6
    print("RUNNER_COUNTS", json.dumps(n), flush=True)
    return rc


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--runner":
        return runner_counts(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--case")
    ap.add_argument("-j", type=int, default=16)
    ap.add_argument("--json")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--rot", default="", help="case:n_sets,... measured the runner's way")
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    if args.warm and args.case:
        fn, check, _ = make(args.case)
        fn()
        print(args.case, "err", check())
        return 0
    if args.warm:
        def job(c):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, __file__, "--warm", "--case", c], capture_output=True, text=True)
            return f"{c}: rc={r.returncode} {time.perf_counter() - t:.1f}s {(r.stdout + r.stderr).strip()[-300:]}"

        with ThreadPoolExecutor(args.j) as ex:
            for line in ex.map(job, cases):
                print(line, flush=True)
        return 0
    import warp_gemm as wg

    wg.init("cuda")
    rows = []
    for c in cases:
        try:
            rows.append(measure(c))
        except Exception as e:  # noqa: BLE001
            rows.append({"case": c, "error": f"{type(e).__name__}: {e}"[:300]})
        r = rows[-1]
        print(json.dumps(r), flush=True)
    rot = []
    for item in filter(None, args.rot.split(",")):
        c, n = item.split(":")
        try:
            rot.append(measure_rot(c, int(n)))
        except Exception as e:  # noqa: BLE001
            rot.append({"case": item, "error": f"{type(e).__name__}: {e}"[:300]})
        print(json.dumps(rot[-1]), flush=True)
    rows += rot
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(f"\n{'case':18} {'host':>7} {'events':>7} {'graph':>7} {'torch':>7} {'load':>6} plan")
    for r in rows:
        if "do_bench_us" in r:
            print(f"{r['case']:18} host {r['host_us']:.1f} loop {r['loop_us']:.1f} do_bench {r['do_bench_us']:.1f} "
                  f"planned {r['planned']}")
            continue
        if "error" in r:
            print(f"{r['case']:18} ERROR {r['error'][:100]}")
            continue
        g = r["graph_us"] if isinstance(r["graph_us"], str) else f"{r['graph_us']:.1f}"
        print(f"{r['case']:18} {r['host_us']:7.1f} {r['events_us']:7.1f} {g:>7} {r['torch_us']:7.1f} "
              f"{r['load_us_per_call']:6.1f} {r['plan'][:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
