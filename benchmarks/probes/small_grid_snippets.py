"""Purpose: time the snippet (mma.sync) defaults of small grids and tiny batched products and the small family's scalar
GEMM ("default"), other mma.sync tiles, and the tile_matmul kernels they replace ("tile_matmul": pipe_snippets=False;
"small-mathdx": the small family on MathDx), each variant's cold first call in a fresh process with an
empty kernel cache, then all of them by CUDA-graph replay in one process beside cuBLAS (torch.matmul).

    python benchmarks/probes/small_grid_snippets.py --out DIR [--workers 14] [--only SUBSTR]

Writes DIR/cold.jsonl (one row per variant: plan, kernel, first-call seconds, check against float64),
DIR/timed.jsonl (graph-replay microseconds) and prints one table.
"""

import argparse
import concurrent.futures as cf
import json
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (case name, dtype, batch, M, N, K): dtype "tf32" is float32 with allow_tf32
CASES = {
    "fp16-64": ("float16", 0, 64, 64, 64),
    "bf16-64": ("bfloat16", 0, 64, 64, 64),
    "fp16-128x4096x4096": ("float16", 0, 128, 4096, 4096),
    "fp16-1024x1024x4096": ("float16", 0, 1024, 1024, 4096),
    "fp16-1536x1536x8192": ("float16", 0, 1536, 1536, 8192),
    "fp16-8192x8192x256": ("float16", 0, 8192, 8192, 256),
    "fp16-4096x32": ("float16", 4096, 32, 32, 32),
    "bf16-4096x32": ("bfloat16", 4096, 32, 32, 32),
    "fp16-4096x32x32x128": ("float16", 4096, 32, 32, 128),
    "fp16-1000x16": ("float16", 1000, 16, 16, 16),
    "bf16-1000x16": ("bfloat16", 1000, 16, 16, 16),
    "fp16-4096x8": ("float16", 4096, 8, 8, 8),
    "fp16-1000": ("float16", 0, 1000, 1000, 1000),
    "fp16-1023x1025x1027": ("float16", 0, 1023, 1025, 1027),
    "fp16-4096": ("float16", 0, 4096, 4096, 4096),
    "tf32-64": ("tf32", 0, 64, 64, 64),
    "tf32-512": ("tf32", 0, 512, 512, 512),
    "tf32-1000": ("tf32", 0, 1000, 1000, 1000),
    "tf32-1023x1025x1027": ("tf32", 0, 1023, 1025, 1027),
    "tf32-1024x1024x4096": ("tf32", 0, 1024, 1024, 4096),
    "tf32-1000x16": ("tf32", 1000, 16, 16, 16),
    "tf32-4096x32": ("tf32", 4096, 32, 32, 32),
    "tf32-4096": ("tf32", 0, 4096, 4096, 4096),
    "fp32-1000x16": ("float32", 1000, 16, 16, 16),
    "fp32-4096x8": ("float32", 4096, 8, 8, 8),
    "fp64-1000x16": ("float64", 1000, 16, 16, 16),
    "fp64-4096x8": ("float64", 4096, 8, 8, 8),
}

M16 = {
    "small": ["pipe/64x32x64/s3/b128/mma", "pipe/32x32x64/s3/b64/mma", "pipe/64x64x64/s3/b128/o4/mma",
              "pipe/64x32x32/s4/b128/mma"],
    "quarter": ["pipe/64x32x64/s3/b128/mma", "pipe/64x64x64/s3/b128/o4/mma"],
    "one_wave": ["pipe/128x64x64/s3/b128/o1/mma", "pipe/64x64x64/s3/b128/o4/mma", "pipe/128x128x64/s3/b128/o1/mma"],
    "narrow": ["pipe/96x128x64/s3/b128/o1/mma", "pipe/128x128x64/s3/b128/o1/mma"],
    "short_k": ["pipe/128x128x64/s3/b128/o1/mma", "pipe/128x128x32/s4/b128/o2/mma", "pipe/128x128x64/s3/b256/o1/mma"],
    "tiny": ["pipe/32x32x32/s2/b64/mma", "pipe/32x32x32/s2/b32/mma", "pipe/32x32x32/s3/b64/mma"],
    "tiny_k": ["pipe/32x32x64/s2/b64/mma", "pipe/32x32x32/s4/b64/mma"],
    "tiny16": ["small-mathdx", "pipe/16x16x16/s2/b32/mma", "pipe/32x32x32/s2/b64/mma"],
}
T32 = {
    "small": ["pipe/64x32x32/s3/b128/mma", "pipe/32x32x32/s3/b64/mma", "pipe/64x64x32/s3/b128/o2/mma",
              "pipe/64x64x64/s2/b128/o2"],  # the last: tile_matmul, the tuning table's former 512^3 / 1000^3 winner
    "mid": ["pipe/64x64x64/s2/b128/o2", "pipe/64x64x32/s3/b128/o2/mma", "pipe/128x64x32/s3/b128/o1/mma", "pipe/64x32x32/s3/b128/mma",
            "pipe/128x128x32/s3/b128/o2/mma"],
    "odd": ["pipe/64x64x32/s3/b128/o2/mma", "pipe/128x64x32/s3/b128/o1/mma", "pipe/96x128x32/s3/b128/o1/mma"],
    "tiny16": ["pipe/16x16x16/s2/b32/mma", "pipe/32x32x32/s2/b64/mma"],
    "tiny": ["pipe/32x32x32/s2/b64/mma"],
}
VARIANTS = {
    "fp16-64": M16["small"], "bf16-64": M16["small"], "fp16-128x4096x4096": M16["quarter"],
    "fp16-1024x1024x4096": M16["one_wave"], "fp16-1536x1536x8192": M16["narrow"], "fp16-8192x8192x256": M16["short_k"],
    "fp16-4096x32": M16["tiny"], "bf16-4096x32": M16["tiny"], "fp16-4096x32x32x128": M16["tiny_k"],
    "fp16-1000x16": M16["tiny16"], "bf16-1000x16": M16["tiny16"], "fp16-4096x8": M16["tiny16"][:2],
    "tf32-64": T32["small"], "tf32-512": T32["small"], "tf32-1000": T32["mid"], "tf32-1023x1025x1027": T32["odd"],
    "tf32-1024x1024x4096": T32["mid"], "tf32-1000x16": T32["tiny16"], "tf32-4096x32": T32["tiny"],
    "fp32-1000x16": ["small-mathdx"], "fp32-4096x8": ["small-mathdx"], "fp64-1000x16": ["small-mathdx"],
    "fp64-4096x8": ["small-mathdx"],
}


def jobs(only: str | None = None) -> list[tuple[str, str]]:
    out = []
    for case in CASES:
        extra = ["small-mathdx"] if "small-mathdx" in VARIANTS.get(case, []) else ["tile_matmul"]
        for v in ["default"] + extra + [x for x in VARIANTS.get(case, []) if x != "small-mathdx"]:
            if only is None or only in f"{case}/{v}":
                out.append((case, v))
    return out


def _setup(cache: str | None):
    import warp as wp

    if cache:
        wp.config.kernel_cache_dir = cache
    wp.config.quiet = True
    wp.init()
    return wp


def _scope(variant: str):
    """The options (and the small family's scalar-GEMM patch) that force ``variant``."""
    import contextlib

    import warp_gemm

    if variant == "default":
        return contextlib.nullcontext()
    if variant == "tile_matmul":  # the configurations before the snippet defaults (tiled family below 24 tf32 tiles)
        return warp_gemm.options(pipe_snippets=False)
    if variant == "small-mathdx":  # the small family on MathDx's tile GEMM
        import dataclasses

        from warp_gemm.families.small import rules as small_rules
        from warp_gemm.families.small.kernel import choose_spec

        def mathdx(*a, **k):
            s = choose_spec(*a, **k)
            return None if s is None else dataclasses.replace(s, mathdx=True)

        @contextlib.contextmanager
        def patched():
            small_rules.choose_spec = mathdx
            try:
                with warp_gemm.options(family="small"):
                    yield
            finally:
                small_rules.choose_spec = choose_spec

        return patched()
    return warp_gemm.options(family="pipelined", pipe_config=variant)


def _operands(case: str, seed: int = 0):
    import numpy as np
    import torch
    import warp as wp

    from warp_gemm.tools.tolerance import random_operands

    dt, batch, M, N, K = CASES[case]
    base = "float32" if dt == "tf32" else dt
    a, b = random_operands(M, N, K, base, np.random.default_rng(seed), batch=batch)
    tdt = getattr(torch, base)
    ta = torch.tensor(a, dtype=tdt, device="cuda")
    tb = torch.tensor(b, dtype=tdt, device="cuda")
    out = torch.full(((batch,) if batch else ()) + (M, N), float("nan"), dtype=tdt, device="cuda")
    return (a @ b, ta, tb, out, wp.from_torch(ta), wp.from_torch(tb), wp.from_torch(out), dt == "tf32", base)


_PLANS = []


def _record_plans():
    from warp_gemm.core import execute

    orig = execute.make_plan

    def rec(*a, **k):
        p = orig(*a, **k)
        _PLANS.append(p)
        return p

    execute.make_plan = rec


def _describe(plan) -> str:
    spec = plan.family_spec if plan.family_spec is not None else plan.spec
    key = getattr(spec, "key", None) or str(spec)
    return f"{plan.family}:{key}"


def run_one(case: str, variant: str, cache: str) -> dict:
    """Cold first call of one variant in this (fresh) process, checked against float64."""
    t0 = time.perf_counter()
    wp = _setup(cache)
    import torch  # noqa: F401

    import warp_gemm
    from warp_gemm.tools.tolerance import compare

    t_import = time.perf_counter() - t0
    _record_plans()
    ref, _, _, tout, wa, wb, wout, tf32, base = _operands(case)
    row = {"case": case, "variant": variant, "import_init_s": round(t_import, 2)}
    try:
        with _scope(variant):
            t1 = time.perf_counter()
            warp_gemm.matmul(wa, wb, out=wout, allow_tf32=tf32)
            wp.synchronize()
            row["first_call_s"] = round(time.perf_counter() - t1, 3)
        got = tout.double().cpu().numpy()
        c = compare(got, ref, base, tf32)
        row.update(ok=c.ok, check=str(c), plan=_describe(_PLANS[-1]) if _PLANS else "?")
    except Exception as e:  # a variant the family refuses: its row says why
        row.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
    return row


def time_all(todo: list[tuple[str, str]], cache: str) -> list[dict]:
    """Every variant that passed its cold check, by CUDA-graph replay in this process, and cuBLAS per case."""
    wp = _setup(cache)
    import torch

    import warp_gemm
    from warp_gemm.tools.tolerance import compare
    from warp_gemm.tools.tune import _time_one

    _record_plans()
    rows = []
    by_case: dict = {}
    for case, variant in todo:
        by_case.setdefault(case, []).append(variant)
    for case, variants in by_case.items():
        ref, ta, tb, tout, wa, wb, wout, tf32, base = _operands(case, seed=1)
        _, batch, M, N, K = CASES[case]
        flop = 2.0 * max(batch, 1) * M * N * K
        for variant in variants:
            row = {"case": case, "variant": variant}
            try:
                with _scope(variant):
                    tout.fill_(float("nan"))
                    warp_gemm.matmul(wa, wb, out=wout, allow_tf32=tf32)
                    wp.synchronize()
                    row["plan"] = _describe(_PLANS[-1])
                    row["ok"] = compare(tout.double().cpu().numpy(), ref, base, tf32).ok
                    ms = _time_one(lambda a=wa, b=wb, o=wout, t=tf32: warp_gemm.matmul(a, b, out=o, allow_tf32=t), "cuda:0")
                row.update(us=round(ms * 1e3, 2), tflops=round(flop / ms / 1e9, 2))
            except Exception as e:
                row.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
            rows.append(row)
            print(json.dumps(row), flush=True)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        mm = torch.bmm if batch else torch.mm
        mm(ta, tb, out=tout)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            mm(ta, tb, out=tout)
        g.replay()
        torch.cuda.synchronize()
        n = 20
        ts = []
        for _ in range(5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(n):
                g.replay()
            e1.record()
            torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) / n)
        ms = sorted(ts)[len(ts) // 2]
        row = {"case": case, "variant": "cublas", "us": round(ms * 1e3, 2), "tflops": round(flop / ms / 1e9, 2),
               "ok": compare(tout.double().cpu().numpy(), ref, base, tf32).ok}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="probe_out")
    ap.add_argument("--workers", type=int, default=14)
    ap.add_argument("--only", default=None)
    ap.add_argument("--one", nargs=3, metavar=("CASE", "VARIANT", "CACHE"))
    ap.add_argument("--time", nargs=2, metavar=("TODO_JSON", "CACHE"))
    ap.add_argument("--skip-cold", action="store_true", help="time only (caches already warm)")
    args = ap.parse_args()
    if args.one:
        print("ROW " + json.dumps(run_one(*args.one)), flush=True)
        return 0
    if args.time:
        todo = [tuple(x) for x in json.loads(pathlib.Path(args.time[0]).read_text())]
        for r in time_all(todo, args.time[1]):
            print("ROW " + json.dumps(r), flush=True)
        return 0
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shared = pathlib.Path("/tmp/sgs_cache/shared")
    todo = jobs(args.only)
    cold = []
    if not args.skip_cold:
        shutil.rmtree("/tmp/sgs_cache", ignore_errors=True)
        shared.mkdir(parents=True)

        def one(i_job):
            i, (case, variant) = i_job
            cache = f"/tmp/sgs_cache/{i}"
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, __file__, "--one", case, variant, cache], capture_output=True,
                               text=True, timeout=400, check=False)
            rows = [json.loads(ln[4:]) for ln in p.stdout.splitlines() if ln.startswith("ROW ")]
            row = rows[0] if rows else {"case": case, "variant": variant, "ok": False,
                                        "error": (p.stderr or p.stdout)[-400:]}
            row["process_s"] = round(time.perf_counter() - t0, 2)
            return row, cache

        with cf.ThreadPoolExecutor(args.workers) as ex:
            # the tile_matmul (MathDx) variants first: they take the longest to compile
            order = sorted(enumerate(todo), key=lambda ij: ij[1][1] not in ("tile_matmul", "small-mathdx"))
            for row, cache in ex.map(one, order):
                cold.append(row)
                print("COLD " + json.dumps(row), flush=True)
                subprocess.run(f"cp -rn {cache}/. {shared}/", shell=True, check=False)
        (out / "cold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cold))
    ok = [(r["case"], r["variant"]) for r in cold if r.get("ok")] if cold else todo
    (out / "todo.json").write_text(json.dumps(ok))
    p = subprocess.run([sys.executable, __file__, "--time", str(out / "todo.json"), str(shared)], capture_output=True,
                       text=True, timeout=500, check=False)
    timed = [json.loads(ln[4:]) for ln in p.stdout.splitlines() if ln.startswith("ROW ")]
    (out / "timed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in timed))
    (out / "time_stderr.txt").write_text(p.stderr[-20000:])
    cold_by = {(r["case"], r["variant"]): r for r in cold}
    print(f"{'case':22s} {'variant':34s} {'us':>8s} {'TF/s':>7s} {'cold s':>7s} ok  plan")
    for r in timed:
        c = cold_by.get((r["case"], r["variant"]), {})
        print(f"{r['case']:22s} {r['variant']:34s} {r.get('us', float('nan')):8.2f} {r.get('tflops', 0):7.2f} "
              f"{c.get('first_call_s', float('nan')):7.2f} {str(r.get('ok'))[0]}  {r.get('plan', r.get('error', ''))[:90]}")
    for r in cold:
        if not r.get("ok"):
            print("FAILED", r["case"], r["variant"], r.get("error", r.get("check", ""))[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
