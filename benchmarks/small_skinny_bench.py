"""Small-matrix batched and skinny families (issue 18) against cuBLAS (torch) in the same run.

    python benchmarks/small_skinny_bench.py [--out DIR] [--procs 15] [--only PROBLEM,...]

1. compiles every variant in parallel worker processes (``compile I,J,...``: each builds its kernels
   and launches them once; MathDx kernels take 20-60 s cold, scalar-GEMM ones < 1 s), then
2. in this process, per problem: fresh random inputs (randn * K**-0.25, rounded to the dtype), a
   float64 reference, and for each variant a NaN-prefilled output checked with
   ``tolerance.compare`` before it is timed; a failing variant is reported and not timed.
3. Timing: a CUDA graph of ``REPS`` launches (operand sets rotated so that the inputs do not sit in
   the 50 MB L2 between runs), replayed under ``triton.testing.do_bench`` (median, CUDA events),
   divided by ``REPS``; torch (``torch.bmm``/``torch.matmul``, cuBLAS) captured and timed the same way.

Writes ``small_skinny.json`` (every row) under --out and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# name -> (dtype, M, N, K, batch)
PROBLEMS = {
    "b4096_32_f16": ("float16", 32, 32, 32, 4096),
    "b10000_16_f32": ("float32", 16, 16, 16, 10000),
    "b64_256_f16": ("float16", 256, 256, 256, 64),
    "m16_8192_f16": ("float16", 16, 8192, 8192, 1),
    "m1_4096_f16": ("float16", 1, 4096, 4096, 1),
    "b256_32_f16": ("float16", 32, 32, 32, 256),
    "b1000_16_f32": ("float32", 16, 16, 16, 1000),
    "b512_64_f16": ("float16", 64, 64, 64, 512),
    "n16_8192_f16": ("float16", 8192, 16, 8192, 1),
    "m4_8192_f16": ("float16", 4, 8192, 8192, 1),
}
REPS = 8


def variants(which: str | None = None):
    """The variant list: ``final`` (default; the choices choose_spec/split_pipe_config make, plus the
    padded skinny kernels round 2 meant to measure) or ``sweep`` (round 2's sweep)."""
    which = which or os.environ.get("SMALL_SKINNY_SET", "final")
    if which == "final":
        v = [(p, "auto", ()) for p in PROBLEMS]
        for p in ("m16_8192_f16", "m4_8192_f16"):
            for tgt in (528, 1056):
                v.append((p, "skinny", (16, 128, 128, 128, True, tgt, 8)))
                v.append((p, "skinny", (16, 128, 64, 128, True, tgt, 8)))
        for sp in (4, 8):
            v.append(("n16_8192_f16", "pipesplit", (128, 16, 128, 2, 128, sp)))
            v.append(("m16_8192_f16", "pipesplit", (16, 128, 128, 2, 128, sp)))
            v.append(("m1_4096_f16", "pipesplit", (16, 128, 128, 2, 128, sp)))
        return v
    return _sweep()


def _sweep():
    """(problem, family, params) rows. small: (tile, block_dim, mathdx, per_block[, pad]); skinny: (tm,
    tn, tk, block_dim, mathdx, target_blocks[, pad]); tiled: (tm, tn, tk, block_dim, padded); pipe
    (kernels/pipelined.py, batched): (tm, tn, tk, stages, block_dim); pipesplit (the pipelined kernel
    over K slices viewed as a batch, float32 partial sums, then skinny's finishing pass): (tm, tn, tk,
    stages, block_dim, splits). Round 1 (results/small_skinny/h100_run1.json) swept the unpadded
    small/skinny kernels; this list keeps their best as baselines."""
    v = []
    P = 8  # fp16 A/B pad and fp32 accumulator pad (elements), as kernels/tiled.py
    for p in ("b4096_32_f16", "b256_32_f16"):
        v.append((p, "small", (32, 32, True, 4)))
        v.append((p, "small", (32, 128, True, 1)))
        for bd in (32, 64, 128):
            for pb in (1, 2, 4):
                v.append((p, "small", (32, bd, True, pb, P)))
        for bd in (64, 128):
            v.append((p, "pipe", (32, 32, 32, 2, bd)))
    for p in ("b10000_16_f32", "b1000_16_f32"):
        for pb in (1, 2, 4):
            v.append((p, "small", (16, 32, True, pb)))
            v.append((p, "small", (16, 64, False, pb)))
            v.append((p, "small", (16, 32, True, pb, 4)))
    for p in ("b64_256_f16", "b512_64_f16"):
        v.append((p, "tiled", (64, 64, 64, 128, True)))
        v.append((p, "small", (64, 128, True, 1, P)))
        for st in (2, 3, 4):
            v.append((p, "pipe", (64, 64, 64, st, 128)))
        v.append((p, "pipe", (64, 64, 32, 4, 128)))
        v.append((p, "pipe", (128, 128, 64, 2, 256)))
        v.append((p, "pipe", (64, 128, 64, 3, 128)))
    for p in ("m16_8192_f16", "m4_8192_f16", "n16_8192_f16", "m1_4096_f16"):
        tiles = [(128, 16, 64, 128), (128, 16, 128, 128)] if p[0] == "n" else \
            [(16, 128, 128, 128), (16, 64, 128, 64), (16, 128, 64, 128), (16, 256, 128, 256)]
        for tgt in (528, 1056, 2112):
            for tm, tn, tk, bd in tiles:
                v.append((p, "skinny", (tm, tn, tk, bd, True, tgt, P)))
        ptile = (128, 16, 128) if p[0] == "n" else (16, 128, 128)
        for st in (2, 3, 4):
            for sp in (8, 16, 32):
                v.append((p, "pipesplit", ptile + (st, 128, sp)))
        if p[0] == "m":
            for sp in (8, 16, 32):
                v.append((p, "pipesplit", (16, 256, 64, 4, 128, sp)))
    for tgt in (528, 1056):
        v.append(("m4_8192_f16", "skinny", (4, 128, 128, 128, False, tgt)))
        v.append(("m4_8192_f16", "skinny", (4, 64, 128, 64, False, tgt)))
        v.append(("m1_4096_f16", "skinny", (1, 128, 64, 128, False, tgt)))
        v.append(("m1_4096_f16", "skinny", (1, 128, 128, 128, False, tgt)))
        v.append(("m1_4096_f16", "skinny", (1, 128, 256, 128, False, tgt)))
        v.append(("m1_4096_f16", "skinny", (1, 64, 256, 64, False, tgt)))
    return v


def spec_of(problem, family, params):
    from warp_gemm.families import skinny, small

    dtype = PROBLEMS[problem][0]
    if family == "small":
        t, bd, dx, pb = params[:4]
        pad = params[4] if len(params) > 4 else 0
        return small.SmallSpec(t, t, t, dtype, dtype, "N", "N", "scale", per_block=pb, block_dim=bd, mathdx=dx,
                               pad_ab=pad, pad_c=pad)
    if family == "skinny":
        tm, tn, tk, bd, dx, tgt = params[:6]
        pad = params[6] if len(params) > 6 else 0
        return skinny.SkinnySpec(tm, tn, tk, dtype, dtype, "N", "N", "scale", block_dim=bd, mathdx=dx,
                                 target_blocks=tgt, pad_ab=pad, pad_c=pad)
    if family in ("pipe", "pipesplit"):
        from warp_gemm.families import pipelined

        tm, tn, tk, st, bd = params[:5]
        out = "float32" if family == "pipesplit" else dtype
        return pipelined.PipeSpec(tm, tn, tk, dtype, out, "N", "N", "scale", stages=st, block_dim=bd,
                                  chunk=16, pad_ab=8, pad_c=8)
    from warp_gemm.families import tiled

    tm, tn, tk, bd, padded = params
    pads = tiled.smem_pads(dtype, False) if padded else (0, 0)
    return tiled.KernelSpec(tm, tn, tk, dtype, dtype, "N", "N", "scale", False, *pads), bd


def auto_choice(problem):
    """(family, params) the family entry points choose for ``problem`` on cuda:0."""
    import warp as wp

    from warp_gemm.families import skinny, small

    dtype, M, N, K, batch = PROBLEMS[problem]
    dev = wp.get_device("cuda:0")
    sp = small.choose_spec(dev, dtype, "N", "N", M, N, K, batch, dtype, "scale")
    if sp is not None:
        return "small", (sp.tm, sp.block_dim, sp.mathdx, sp.per_block)
    sk = skinny.choose_spec(dev, dtype, "N", "N", M, N, K, batch, dtype, "scale")
    if sk is not None:
        return "skinny", (sk.tm, sk.tn, sk.tk, sk.block_dim, sk.mathdx, sk.target_blocks)
    cfg = skinny.split_pipe_config(dev, dtype, "N", "N", M, N, K, batch, dtype, "scale")
    if cfg is not None:
        c = cfg["pipe"]
        return "pipesplit", (c["tm"], c["tn"], c["tk"], c["stages"], c["block_dim"], cfg["splits"])
    if max(M, N) <= 64:
        return "pipe", (64, 64, 64, 2, 128)
    return "pipe", (128, 128, 64, 2, 256)  # the best measured for 64 x 256^3 (33.1 us, run 2)


def launches_of(problem, family, params, A, B, D, ws_cache):
    """[(kernel, dim, inputs, block_dim)] for one operand set."""
    import warp as wp

    from warp_gemm.families import skinny, small

    if family == "auto":
        family, params = auto_choice(problem)
    dtype, M, N, K, batch = PROBLEMS[problem]
    spec = spec_of(problem, family, params)
    if family == "small":
        return small.launch_args(spec, A, B, None, D, 1.0, 0.0, M, N, K, batch, batch, batch, 1)
    if family == "skinny":
        shp = skinny.workspace_shape(spec, M, N, K, batch)
        ws = None
        if shp is not None:
            key = (shp[0], shp[1])
            if key not in ws_cache:
                ws_cache[key] = wp.empty(shp[0], dtype=getattr(wp, shp[1]), device=D.device)
            ws = ws_cache[key]
        return skinny.launch_args(spec, A, B, None, D, 1.0, 0.0, M, N, K, batch, batch, batch, 1, workspace=ws)
    if family == "pipe":
        from warp_gemm.families import pipelined

        return [pipelined.launch_args(spec, A, B, None, D, 1.0, 0.0, M, N, K, batch, batch, batch, 1)]
    if family == "pipesplit":
        from warp_gemm.families import pipelined

        sp = params[5]
        assert batch == 1 and K % sp == 0
        ks = K // sp
        it = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]
        # K slice s of A (M, K) and of B (K, N) as batch entry s: strided views, no copies.
        A3 = wp.array(ptr=A.ptr, dtype=A.dtype, shape=(sp, M, ks), strides=(ks * it, K * it, it), device=A.device)
        B3 = wp.array(ptr=B.ptr, dtype=B.dtype, shape=(sp, ks, N), strides=(ks * N * it, N * it, it),
                      device=B.device)
        key = ((sp, M, N), "float32")
        if key not in ws_cache:
            ws_cache[key] = wp.empty((sp, M, N), dtype=wp.float32, device=D.device)
        W = ws_cache[key]
        first = pipelined.launch_args(spec, A3, B3, None, W, 1.0, 0.0, M, N, ks, sp, sp, sp, 1)
        fin = skinny._finish_kernel("float32", dtype)
        return [first, (fin, (1, M, N), [D, W, D, 1.0, 0.0, sp, 1, 1, 0], None)]
    from warp_gemm.families import tiled

    kspec, bd = spec
    tiles_m, tiles_n = -(-M // kspec.tm), -(-N // kspec.tn)
    k_tiles = -(-K // kspec.tk)
    big = 2**30
    inputs = [A, B, D, D, 1.0, 0.0, k_tiles, k_tiles, tiles_m, tiles_n, 8, batch, batch, 1, big, big, big]
    return [(tiled.get_kernel(kspec), (batch, tiles_m * tiles_n, 1), inputs, bd)]


def _launch(ls, stream=None):
    import warp as wp

    for kernel, dim, inputs, bd in ls:
        if bd is None:
            wp.launch(kernel, dim=dim, inputs=inputs, stream=stream)
        else:
            wp.launch_tiled(kernel, dim=dim, inputs=inputs, block_dim=bd, stream=stream)


def _operands(problem, sets, torch, seed):
    dtype, M, N, K, batch = PROBLEMS[problem]
    tdt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(seed)
    s = K ** -0.25
    out = []
    for _ in range(sets):
        a = (torch.randn((batch, M, K), device="cuda", generator=g, dtype=torch.float32) * s).to(tdt)
        b = (torch.randn((batch, K, N), device="cuda", generator=g, dtype=torch.float32) * s).to(tdt)
        d = torch.full((batch, M, N), float("nan"), device="cuda", dtype=tdt)
        out.append((a, b, d))
    return out


def compile_worker(indices):
    import torch
    import warp as wp

    import warp_gemm._compat as compat

    compat.init()
    V = variants()
    for i in indices:
        problem, family, params = V[i]
        if family == "auto":
            family, params = auto_choice(problem)
        t0 = time.time()
        try:
            a, b, d = _operands(problem, 1, torch, 1)[0]
            wdt = getattr(wp, PROBLEMS[problem][0])
            A, B, D = (wp.from_torch(x, dtype=wdt) for x in (a, b, d))
            torch.cuda.synchronize()  # torch filled them on its stream, Warp launches on its own
            _launch(launches_of(problem, family, params, A, B, D, {}))
            wp.synchronize()
            print(f"compiled {i} {problem} {family} {params} in {time.time() - t0:.1f}s", flush=True)
        except Exception as e:  # reported, the timing pass skips it
            print(f"COMPILE FAIL {i} {problem} {family} {params}: {type(e).__name__}: {e}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", nargs="?", default="run")
    ap.add_argument("indices", nargs="?", default="")
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results/small_skinny"))
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    if args.cmd == "compile":
        compile_worker([int(x) for x in args.indices.split(",") if x])
        return
    only = set(args.only.split(",")) if args.only else set(PROBLEMS)
    V = variants()
    todo = [i for i, v in enumerate(V) if v[0] in only]
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "compile.log"), "w")
    t0 = time.time()
    if not args.no_compile:
        # One variant per distinct kernel first (target_blocks / per_block do not change the kernel):
        # spread the distinct kernels over the workers; the rest load from the cache afterwards.
        seen, uniq = set(), []
        for i in todo:
            p, fam, prm = V[i]
            if fam == "auto":
                uniq.append(i)
                continue
            kkey = (PROBLEMS[p][0], fam, prm[:3] + prm[4:] if fam == "small" else
                    prm[:5] + prm[6:] if fam == "skinny" else prm[:5])
            if kkey not in seen:
                seen.add(kkey)
                uniq.append(i)
        # MathDx variants first so that the long compiles start together.
        uniq.sort(key=lambda i: not (V[i][2][2] if V[i][1] == "small" else V[i][2][4] if V[i][1] == "skinny"
                                     else True) if V[i][1] != "auto" else 0)
        groups = [uniq[k::args.procs] for k in range(args.procs)]
        procs = [subprocess.Popen([sys.executable, __file__, "compile", ",".join(map(str, g))], stdout=log,
                                  stderr=subprocess.STDOUT) for g in groups if g]
        for p in procs:
            p.wait()
    compile_s = time.time() - t0
    log.close()
    meta = gpu_meta()
    meta["compile_wall_s"] = round(compile_s, 1)

    def save(rows):  # after every problem, so that a cut-off run keeps what it measured
        with open(os.path.join(args.out, "small_skinny.json"), "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)

    rows = run_timing(V, todo, save)
    save(rows)
    print_table(rows, meta)


def gpu_meta():
    import torch
    import warp as wp

    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "warp": wp.config.version,
            "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "reps_per_graph": REPS}


def run_timing(V, todo, save=lambda rows: None):
    import torch
    import triton.testing
    import warp as wp

    import warp_gemm._compat as compat

    try:
        from warp_gemm.tools.tolerance import compare
    except ImportError:
        from warp_gemm.tolerance import compare

    compat.init()
    dev = wp.get_device("cuda:0")
    ts = torch.cuda.Stream()
    ws_stream = wp.stream_from_torch(ts)
    rows = []
    by_problem = {}
    for i in todo:
        by_problem.setdefault(V[i][0], []).append(i)
    for problem, idx in by_problem.items():
        dtype, M, N, K, batch = PROBLEMS[problem]
        isz = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]
        nbytes = batch * (M * K + K * N + M * N) * isz
        sets = max(2, min(REPS, math.ceil(150e6 / nbytes)))
        while REPS % sets:
            sets += 1
        flops = 2.0 * batch * M * N * K
        with torch.cuda.stream(ts):
            ops = _operands(problem, sets, torch, hash(problem) % 2**31 + int(time.time()))
            ref = torch.matmul(ops[0][0].double(), ops[0][1].double()).cpu().numpy()
            wdt = getattr(wp, dtype)
            wops = [tuple(wp.from_torch(x, dtype=wdt) for x in s) for s in ops]

            # torch / cuBLAS
            def tfn(s):
                if batch == 1:  # the plain 2-D product (cuBLAS gemm, not a batch of one)
                    torch.matmul(s[0][0], s[1][0], out=s[2][0])
                else:
                    torch.bmm(s[0], s[1], out=s[2])

            tfn(ops[0])
            torch.cuda.synchronize()
            tres = compare(ops[0][2].double().cpu().numpy(), ref, dtype)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=ts):
                for r in range(REPS):
                    tfn(ops[r % sets])
            ms = triton.testing.do_bench(g.replay, warmup=25, rep=150, return_mode="median")
            t_us = ms * 1e3 / REPS
            rows.append({"problem": problem, "family": "torch", "params": None, "ok": tres.ok,
                         "rel_fro": tres.rel_fro, "us": t_us, "tflops": flops / t_us / 1e6, "floor_us": nbytes / 3.35e6})
            for i in idx:
                _, family, params = V[i]
                row = {"problem": problem, "family": family, "params": list(params)}
                if family == "auto":
                    row["choice"] = list(map(str, auto_choice(problem)))
                try:
                    cache = {}
                    ls = [launches_of(problem, family, params, *wops[r], cache) for r in range(sets)]
                    for s in ops:
                        s[2].fill_(float("nan"))
                    with wp.ScopedStream(ws_stream):
                        _launch(ls[0])
                    torch.cuda.synchronize()
                    res = compare(ops[0][2].double().cpu().numpy(), ref, dtype)
                    row.update(ok=res.ok, rel_fro=res.rel_fro)
                    if not res.ok:
                        row["error"] = str(res)
                        rows.append(row)
                        continue
                    with wp.ScopedStream(ws_stream), wp.ScopedCapture(device=dev, stream=ws_stream) as cap:
                        for r in range(REPS):
                            _launch(ls[r % sets])
                    graph = cap.graph
                    ms = triton.testing.do_bench(lambda: wp.capture_launch(graph, stream=ws_stream), warmup=25,
                                                 rep=150, return_mode="median")
                    t_us = ms * 1e3 / REPS
                    row.update(us=t_us, tflops=flops / t_us / 1e6, launches=len(ls[0]), grid=[list(x[1]) for x in ls[0]])
                except Exception as e:
                    row.update(ok=False, error=f"{type(e).__name__}: {e}"[:300])
                rows.append(row)
            del ops, wops
            torch.cuda.empty_cache()
            save(rows)
            print(f"timed {problem} ({len(idx)} variants)", flush=True)
    return rows


def print_table(rows, meta):
    print(f"# {meta}")
    best = {}
    torch_us = {}
    for r in rows:
        if r["family"] == "torch":
            torch_us[r["problem"]] = r["us"]
        elif r.get("ok") and "us" in r:
            if r["problem"] not in best or r["us"] < best[r["problem"]]["us"]:
                best[r["problem"]] = r
    fails = [r for r in rows if not r.get("ok")]
    # per problem and family: best
    fam_best = {}
    for r in rows:
        if r["family"] != "torch" and r.get("ok") and "us" in r:
            prm = r["params"] or [0] * 8
            k = (r["problem"], r["family"], prm[2] if r["family"] == "small" else
                 (prm[4] if r["family"] == "skinny" else True),
                 len(prm) > 4 if r["family"] == "small" else len(prm) > 6)
            if k not in fam_best or r["us"] < fam_best[k]["us"]:
                fam_best[k] = r
    print("problem            family  dx    params                         us      TFLOP/s  torch_us  ratio")
    for (p, fam, dx, _), r in sorted(fam_best.items()):
        tu = torch_us.get(p, float("nan"))
        shown = r.get("choice", r["params"])
        print(f"{p:18s} {fam:9s} {str(dx):5s} {str(shown):30s} {r['us']:7.1f} {r['tflops']:8.2f} "
              f"{tu:8.1f} {tu / r['us']:6.2f}")
    print(f"failures: {len(fails)}")
    for r in fails[:10]:
        print("  FAIL", r["problem"], r["family"], r["params"], r.get("error", "")[:200])


if __name__ == "__main__":
    main()
