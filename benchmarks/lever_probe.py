"""Where does a Warp tile GEMM's time go, and does occupancy help?  (issue #6 diagnostics)

Builds stand-alone variants of the warp_gemm kernel loop (fp16 in, fp32 accumulate, 4096^3 NN by
default) and times them with CUDA events:

- ``full``  : the production loop (tile_load A, tile_load B, tile_matmul into a shared accumulator);
- ``loads`` : the same loads with no tile_matmul (what the global->shared copies cost alone);
- ``mma``   : A and B loaded once, then tile_matmul k_tiles times (what the MathDx call costs alone);
- ``racc``  : ``tile_matmul(a, b, part, beta=0)`` then ``acc += part`` into a register accumulator.

Each variant may carry ``__launch_bounds__(block_dim, min_blocks)`` (Warp >= 1.19's
``@wp.kernel(launch_bounds=...)``) so that two or more blocks share an SM when their shared memory
allows; one block's loads then overlap another's MMAs, which the synchronous tile API cannot do
inside a block. Kernels are compiled in parallel processes first (a cold MathDx compile is ~60 s).

    python benchmarks/lever_probe.py --workers 16 --out results/lever_probe.json
"""

# No `from __future__ import annotations`: Warp evaluates kernel annotations from the closure.

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (mode, tm, tn, tk, block_dim, min_blocks[, pad_a, pad_b, pad_c]) -- min_blocks 0: no
# __launch_bounds__; pad_*: extra columns of the shared A, B and accumulator tiles (their leading
# dimension becomes TK+pad_a, TN+pad_b, TN+pad_c; MathDx is told through the tile's strides).
VARIANTS = [
    ("full", 128, 128, 256, 256, 0),
    ("loads", 128, 128, 256, 256, 0),
    ("mma", 128, 128, 256, 256, 0),
    ("full", 128, 128, 64, 256, 0),
    ("full", 128, 128, 64, 256, 2),
    ("loads", 128, 128, 64, 256, 2),
    ("mma", 128, 128, 64, 256, 2),
    ("full", 128, 128, 128, 256, 0),
    ("full", 64, 128, 128, 128, 2),
    ("full", 64, 64, 128, 128, 4),
    ("full", 64, 64, 256, 128, 2),
    ("full", 128, 128, 64, 128, 2),
    ("racc", 128, 128, 128, 256, 0),
    ("full", 128, 64, 128, 128, 2),
    # shared-memory padding against bank conflicts (indices 14-)
    ("mma", 128, 128, 256, 256, 0, 8, 8, 4),
    ("mma", 128, 128, 256, 256, 0, 8, 8, 0),
    ("mma", 128, 128, 256, 256, 0, 0, 0, 4),
    ("full", 128, 128, 256, 256, 0, 8, 8, 4),
    ("full", 128, 128, 64, 256, 2, 8, 8, 4),
    ("full", 128, 128, 64, 128, 2, 8, 8, 4),
    ("mma", 128, 128, 64, 128, 2, 8, 8, 4),
    ("full", 64, 128, 128, 128, 2, 8, 8, 4),
    ("full", 128, 128, 128, 256, 0, 8, 8, 4),
    ("mma", 128, 128, 256, 256, 0, 8, 8, 8),
    # round 3 (indices 24-): combinations, register-prefetch pipelining, other dtypes
    ("full", 128, 128, 64, 256, 2, 8, 8, 8),
    ("full", 128, 128, 128, 256, 0, 8, 8, 8),
    ("full", 128, 256, 64, 256, 0, 8, 8, 4),
    ("full", 256, 128, 64, 256, 0, 8, 8, 4),
    ("pipe", 128, 128, 64, 256, 2, 8, 8, 4),
    ("pipe", 128, 128, 128, 256, 0, 8, 8, 4),
    ("pipe", 128, 128, 256, 256, 0, 8, 8, 4),
    ("full", 128, 128, 64, 256, 0, 8, 8, 4),
    ("full", 128, 128, 32, 256, 0, 0, 0, 0, "fp32"),
    ("full", 128, 128, 32, 256, 2, 4, 4, 4, "fp32"),
    ("full", 128, 128, 64, 256, 0, 4, 4, 4, "fp32"),
    ("full", 64, 64, 64, 128, 0, 4, 4, 4, "fp32"),
    ("full", 128, 128, 32, 256, 2, 4, 4, 4, "tf32"),
    ("full", 128, 128, 64, 256, 0, 4, 4, 4, "tf32"),
    ("full", 64, 64, 32, 128, 0, 0, 0, 0, "fp64"),
    ("full", 64, 64, 32, 128, 0, 2, 2, 2, "fp64"),
    ("full", 128, 64, 32, 256, 0, 2, 2, 2, "fp64"),
    ("full", 128, 128, 32, 256, 0, 2, 2, 2, "fp64"),
    ("full", 64, 64, 64, 128, 0, 2, 2, 2, "fp64"),
    ("full", 64, 64, 32, 128, 0, 1, 1, 1, "fp64"),
    ("full", 128, 128, 32, 256, 2, 1, 1, 1, "fp32"),
    # round 4 (indices 45-): accumulator pad 32 bytes, occupancy with it, fp64/tf32/fp32 pads
    ("full", 128, 128, 64, 256, 0, 8, 8, 8),
    ("full", 128, 128, 32, 256, 2, 8, 8, 8),
    ("full", 64, 128, 64, 128, 3, 8, 8, 8),
    ("full", 128, 128, 32, 256, 2, 4, 4, 8, "tf32"),
    ("full", 128, 128, 32, 256, 0, 4, 4, 8, "tf32"),
    ("full", 64, 128, 32, 128, 3, 4, 4, 8, "tf32"),
    ("full", 128, 128, 32, 256, 2, 4, 4, 8, "fp32"),
    ("full", 64, 64, 64, 128, 0, 4, 4, 8, "fp32"),
    ("full", 64, 64, 32, 128, 0, 4, 4, 4, "fp64"),
    ("full", 64, 64, 32, 128, 0, 2, 2, 4, "fp64"),
    ("full", 128, 128, 32, 256, 0, 2, 2, 4, "fp64"),
    ("full", 128, 128, 32, 256, 0, 4, 4, 4, "fp64"),
    ("full", 128, 64, 32, 128, 0, 2, 2, 4, "fp64"),
    ("full", 64, 64, 32, 64, 0, 2, 2, 4, "fp64"),
    # round 5 (indices 59-): the epilogue's registers and occupancy
    ("full", 128, 128, 64, 256, 2, 8, 8, 8, "fp16", "astype"),
    ("full", 128, 128, 64, 256, 2, 8, 8, 8, "fp16", "chunk"),
    ("full", 128, 128, 64, 256, 0, 8, 8, 8, "fp16", "astype"),
    ("full", 128, 128, 64, 256, 0, 8, 8, 8, "fp16", "chunk"),
    ("full", 128, 128, 256, 256, 0, 8, 8, 8, "fp16", "astype"),
    ("full", 128, 128, 256, 256, 0, 8, 8, 8, "fp16", "chunk"),
    ("full", 128, 128, 128, 256, 0, 4, 4, 8, "tf32", "acc"),
    ("full", 64, 64, 128, 128, 4, 8, 8, 8, "fp16", "chunk"),
    # round 6 (indices 67-): the MathDx call alone (operands already in shared memory) for the
    # shipped float32/tf32/float64 configurations -- is the GEMM itself the wall?
    ("mma", 128, 128, 32, 256, 2, 0, 0, 0, "fp32"),
    ("full", 128, 128, 32, 256, 2, 0, 0, 0, "fp32"),
    ("mma", 128, 128, 32, 256, 2, 4, 4, 8, "fp32"),
    ("mma", 64, 64, 32, 128, 3, 4, 4, 4, "fp64"),
    ("full", 64, 64, 32, 128, 3, 4, 4, 4, "fp64"),
    ("mma", 64, 64, 32, 128, 3, 0, 0, 0, "fp64"),
    ("mma", 128, 128, 32, 256, 2, 4, 4, 8, "tf32"),
    ("full", 128, 128, 32, 256, 2, 4, 4, 8, "tf32"),
]


def name(v) -> str:
    mode, tm, tn, tk, bd, mb, *rest = v
    pads, dt = rest[:3], dtype_of(v)
    p = "_p" + "-".join(map(str, pads)) if pads else ""
    d = "" if dt == "fp16" else f"_{dt}"
    e = "" if epi_of(v) == "acc" else f"_{epi_of(v)}"
    return f"{mode}_{tm}x{tn}x{tk}_b{bd}_o{mb}{p}{d}{e}"


def dtype_of(v) -> str:
    return (list(v[9:10]) or ["fp16"])[0]


def epi_of(v) -> str:
    """Epilogue: "acc" stores the fp32 accumulator tile as is; "astype" scales it by alpha and
    converts the whole tile to the input dtype in registers (as warp_gemm does); "chunk" does the
    same 32 rows at a time (a quarter of the registers)."""
    return (list(v[10:11]) or ["acc"])[0]


def build(v):
    import warp as wp

    mode, TM, TN, TK, BD, MB, *pads = v
    PA, PB, PC = pads[:3] or (0, 0, 0)
    DT = dtype_of(v)
    TF32 = DT == "tf32"
    EPI = epi_of(v)
    EPI_ASTYPE, EPI_CHUNK = EPI == "astype", EPI == "chunk"
    OUTT = wp.float64 if DT == "fp64" else (wp.float16 if EPI != "acc" else wp.float32)
    CH = 32
    # Tile shapes must be closure constants (Warp does not fold TN + PC in the kernel).
    TKA, TNB, TNC = TK + PA, TN + PB, TN + PC
    IN = {"fp16": wp.float16, "fp32": wp.float32, "tf32": wp.float32, "fp64": wp.float64}[DT]
    ACC = wp.float64 if DT == "fp64" else wp.float32
    MODE_FULL, MODE_LOADS, MODE_MMA, MODE_RACC, MODE_PIPE = (
        mode == m for m in ("full", "loads", "mma", "racc", "pipe"))

    def probe(A: wp.array2d(dtype=IN), B: wp.array2d(dtype=IN), D: wp.array2d(dtype=OUTT), k_tiles: int,
              tiles_m: int, tiles_n: int, group_m: int):
        t = wp.tid()
        per_group = group_m * tiles_n
        first_m = (t // per_group) * group_m
        rows = wp.min(tiles_m - first_m, group_m)
        i = first_m + (t % per_group) % rows
        j = (t % per_group) // rows
        if wp.static(MODE_RACC):
            racc = wp.tile_zeros(shape=(TM, TN), dtype=ACC, storage="register")
            part = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        elif wp.static(PC > 0):
            acc_w = wp.tile_zeros(shape=(TM, TNC), dtype=ACC, storage="shared")
            acc = wp.tile_view(acc_w, offset=(0, 0), shape=(TM, TN))
        else:
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        if wp.static(MODE_MMA):
            # Padded operands: load PA/PB extra columns (the neighbour tile's, or zeros at the edge)
            # so the copy stays one vectorized tile_load, and view the TM x TK / TK x TN part.
            if wp.static(PA > 0):
                a0 = wp.tile_view(wp.tile_load(A, shape=(TM, TKA), offset=(i * TM, 0), storage="shared"),
                                  offset=(0, 0), shape=(TM, TK))
            else:
                a0 = wp.tile_load(A, shape=(TM, TK), offset=(i * TM, 0))
            if wp.static(PB > 0):
                b0 = wp.tile_view(wp.tile_load(B, shape=(TK, TNB), offset=(0, j * TN), storage="shared"),
                                  offset=(0, 0), shape=(TK, TN))
            else:
                b0 = wp.tile_load(B, shape=(TK, TN), offset=(0, j * TN))
            for k in range(k_tiles):
                if wp.static(TF32):
                    wp.tile_matmul(a0, b0, acc, precision="tf32")
                else:
                    wp.tile_matmul(a0, b0, acc)
        elif wp.static(MODE_PIPE):
            # Register prefetch: the next K tile's global loads are issued before this step's
            # tile_matmul and consumed after it, so their latency hides behind the MMA.
            a_w = wp.tile_zeros(shape=(TM, TKA), dtype=IN, storage="shared")
            b_w = wp.tile_zeros(shape=(TK, TNB), dtype=IN, storage="shared")
            a_s = wp.tile_view(a_w, offset=(0, 0), shape=(TM, TK))
            b_s = wp.tile_view(b_w, offset=(0, 0), shape=(TK, TN))
            a_r = wp.tile_load(A, shape=(TM, TK), offset=(i * TM, 0), storage="register")
            b_r = wp.tile_load(B, shape=(TK, TN), offset=(0, j * TN), storage="register")
            for k in range(k_tiles):
                wp.tile_assign(a_w, a_r, offset=(0, 0))
                wp.tile_assign(b_w, b_r, offset=(0, 0))
                a_r = wp.tile_load(A, shape=(TM, TK), offset=(i * TM, (k + 1) * TK), storage="register")
                b_r = wp.tile_load(B, shape=(TK, TN), offset=((k + 1) * TK, j * TN), storage="register")
                wp.tile_matmul(a_s, b_s, acc)
        else:
            for k in range(k_tiles):
                if wp.static(PA > 0):
                    a = wp.tile_view(wp.tile_load(A, shape=(TM, TKA), offset=(i * TM, k * TK), storage="shared"),
                                     offset=(0, 0), shape=(TM, TK))
                else:
                    a = wp.tile_load(A, shape=(TM, TK), offset=(i * TM, k * TK))
                if wp.static(PB > 0):
                    b = wp.tile_view(wp.tile_load(B, shape=(TK, TNB), offset=(k * TK, j * TN), storage="shared"),
                                     offset=(0, 0), shape=(TK, TN))
                else:
                    b = wp.tile_load(B, shape=(TK, TN), offset=(k * TK, j * TN))
                if wp.static(MODE_FULL and TF32):
                    wp.tile_matmul(a, b, acc, precision="tf32")
                elif wp.static(MODE_FULL):
                    wp.tile_matmul(a, b, acc)
                if wp.static(MODE_RACC):
                    wp.tile_matmul(a, b, part, alpha=1.0, beta=0.0)
                    racc += part
        if wp.static(MODE_RACC):
            wp.tile_store(D, racc, offset=(i * TM, j * TN))
        elif wp.static(EPI_ASTYPE):
            wp.tile_store(D, wp.tile_astype(acc * ACC(1.0), OUTT), offset=(i * TM, j * TN))
        elif wp.static(EPI_CHUNK):
            for r in range(TM // CH):
                part = wp.tile_view(acc, offset=(r * CH, 0), shape=(CH, TN))
                wp.tile_store(D, wp.tile_astype(part * ACC(1.0), OUTT), offset=(i * TM + r * CH, j * TN))
        else:
            wp.tile_store(D, acc, offset=(i * TM, j * TN))

    probe.__name__ = probe.__qualname__ = "probe_" + name(v)
    kw = dict(module="unique", enable_backward=False, module_options={"enable_backward": False})
    if MB:
        kw["launch_bounds"] = (BD, MB)
    return wp.kernel(probe, **kw)


def median_seconds(fn, reps: int) -> float:
    """Median CUDA-event time of ``fn()`` over ``reps`` calls (each synchronised)."""
    import torch

    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e-3)
    return statistics.median(times)


def compile_one(v):
    import warp as wp

    from warp_gemm import _compat

    _compat.quiet()
    wp.init()
    t = time.perf_counter()
    try:
        k = build(v)
        k.module.load(wp.get_device("cuda:0"), block_dim=v[4])
        return name(v), time.perf_counter() - t, None
    except Exception as e:  # report, keep the others
        return name(v), time.perf_counter() - t, f"{type(e).__name__}: {e}"[:400]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated variant indices")
    ap.add_argument("--out", default="")
    ap.add_argument("--prod", default="", help="also time warp_gemm.matmul (fp16) with these configs, e.g. "
                                               "128x128x64/b256/g8/o2;128x128x256/b256/g8")
    args = ap.parse_args(argv)
    variants = [VARIANTS[int(x)] for x in args.only.split(",")] if args.only else VARIANTS

    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.workers, mp_context=ctx) as ex:
        built = list(ex.map(compile_one, variants))
    print(f"compiled {len(variants)} variants in {time.perf_counter() - t0:.0f} s", flush=True)
    errors = {n: e for n, _, e in built if e}

    import torch
    import warp as wp

    from warp_gemm import _compat

    _compat.quiet()
    wp.init()
    n = args.size
    g = torch.Generator(device="cuda").manual_seed(1)
    TD = {"fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32, "fp64": torch.float64}
    A0 = torch.randn(n, n, device="cuda", dtype=torch.float64, generator=g)
    B0 = torch.randn(n, n, device="cuda", dtype=torch.float64, generator=g)
    ops = {dt: (A0.to(t), B0.to(t)) for dt, t in TD.items()}
    refs = {}
    rows = []
    for v in variants:
        nm = name(v)
        if nm in errors:
            rows.append(dict(variant=nm, error=errors[nm]))
            continue
        mode, tm, tn, tk, bd, mb, *_ = v
        k = build(v)
        A, B = ops[dtype_of(v)]
        if dtype_of(v) not in refs:
            refs[dtype_of(v)] = A.double() @ B.double()
        ref = refs[dtype_of(v)]
        D = torch.full((n, n), float("nan"), device="cuda",
                       dtype=torch.float64 if dtype_of(v) == "fp64" else
                       (torch.float16 if epi_of(v) != "acc" else torch.float32))
        tiles_m, tiles_n = -(-n // tm), -(-n // tn)
        inputs = [wp.from_torch(A), wp.from_torch(B), wp.from_torch(D), -(-n // tk), tiles_m, tiles_n, 8]

        def launch():
            wp.launch_tiled(k, dim=(tiles_m * tiles_n,), inputs=inputs, block_dim=bd,
                            stream=wp.stream_from_torch())

        try:
            launch()
            torch.cuda.synchronize()
            err = None
            if mode in ("full", "racc", "pipe"):
                err = float(((D.double() - ref).abs().max() / ref.abs().max()).item())
            t = median_seconds(launch, args.reps)
            rows.append(dict(variant=nm, seconds=t, tflops=2 * n**3 / t / 1e12, rel_err=err,
                             us_per_k_step=t / (-(-tiles_m * tiles_n // 132)) / -(-n // tk) * 1e6))
        except Exception as e:
            rows.append(dict(variant=nm, error=f"{type(e).__name__}: {e}"[:400]))
    for c in filter(None, args.prod.split(";")):
        import warp_gemm
        from warp_gemm import Config

        A, B = ops["fp16"]
        D = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
        cfg = Config.parse(c)
        warp_gemm.matmul(A, B, out=D, config=cfg)
        torch.cuda.synchronize()
        ref = A.double() @ B.double()
        err = float(((D.double() - ref).abs().max() / ref.abs().max()).item())
        t = median_seconds(lambda: warp_gemm.matmul(A, B, out=D, config=cfg), args.reps)  # noqa: B023
        rows.append(dict(variant=f"warp_gemm {c}", seconds=t, tflops=2 * n**3 / t / 1e12, rel_err=err,
                         us_per_k_step=float("nan")))
    header = dict(device=torch.cuda.get_device_name(), warp=wp.config.version, torch=torch.__version__,
                  size=n, compile_seconds={nm: s for nm, s, _ in built})
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(header=header, rows=rows), f, indent=1)
    print(f"{'variant':32s} {'TFLOP/s':>8s} {'ms':>8s} {'us/kstep/wave':>14s} {'rel_err':>9s}")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']:32s} ERROR {r['error']}")
        else:
            e = f"{r['rel_err']:.1e}" if r["rel_err"] is not None else "-"
            print(f"{r['variant']:32s} {r['tflops']:8.1f} {r['seconds']*1e3:8.3f} {r['us_per_k_step']:14.2f} {e:>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
