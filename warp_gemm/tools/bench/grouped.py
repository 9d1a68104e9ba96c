"""The ``grouped`` benchmark suite: warp_gemm's grouped products against ``F.grouped_mm`` and loops of
``torch.matmul`` (issue 42's target rows, plus shapes beyond them).

    warp-gemm bench --suite grouped                       # every row on CUDA: a table (--json PATH: the rows)
    python -m warp_gemm.tools.bench.grouped --rows moe8 --json rows.json
    python -m warp_gemm.tools.bench.grouped --precompile 90   # build the suite's kernels offline (no GPU)

:func:`grouped_suite` returns one dict per (row, provider): median / p20 / p80 milliseconds from CUDA events
(after warm-up), TFLOP/s of the useful work, and each provider's ratio to warp_gemm. Every provider's result
is checked first on a sample of output rows against a float64 reference; a wrong one is reported "WRONG"
and not timed. Providers: ``warp_gemm`` (``warp_gemm.grouped_mm`` / ``grouped_matmul``; the ``list1000_plan``
row: ``grouped_matmul_plan`` made once, then called), ``F.grouped_mm`` (where torch has it for the dtype and
device), ``loop`` (a Python loop of ``torch.matmul`` over the groups:
its per-call host time counts, as in a real layer), and ``dense`` (one ``torch.matmul`` of the same FLOPs:
the ceiling a grouped kernel is measured against).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Row:
    name: str
    kind: str  # "moe": 2-D x 3-D with offs, weights (G, N, K) used as W.T; "list": independent products
    dtype: str  # float16 / bfloat16 / float32 / tf32
    G: int
    tokens: int = 0
    K: int = 0
    N: int = 0
    empty: int = 0  # experts with no tokens
    lo: int = 0  # list rows: sides drawn in [lo, hi]
    hi: int = 0
    target: str = ""


ROWS = [
    Row("moe8", "moe", "bfloat16", 8, 8192, 4096, 14336, target=">= 0.9x F.grouped_mm"),
    Row("moe64", "moe", "bfloat16", 64, 8192, 4096, 2048, empty=6, target=">= 1.3x F.grouped_mm"),
    Row("moe8_fp16", "moe", "float16", 8, 8192, 4096, 14336, target=">= F.grouped_mm where it runs"),
    Row("moe64_fp16", "moe", "float16", 64, 8192, 4096, 2048, empty=6, target=">= F.grouped_mm where it runs"),
    Row("moe8_fp32", "moe", "float32", 8, 8192, 4096, 14336, target=">= 1.5x loop"),
    Row("moe64_fp32", "moe", "float32", 64, 8192, 4096, 2048, empty=6, target=">= 1.5x loop"),
    Row("moe64_tf32", "moe", "tf32", 64, 8192, 4096, 2048, empty=6),
    Row("moe128", "moe", "bfloat16", 128, 16384, 2048, 1536, empty=10),
    Row("list1000", "list", "float32", 1000, lo=8, hi=128, target=">= 5x loop"),
    Row("list1000_plan", "list", "float32", 1000, lo=8, hi=128, target=">= 5x loop"),
]


def _sizes(rng, G: int, tokens: int, empty: int):
    """Uneven token counts summing to ``tokens``: a multinomial over softmax(0.6 * randn) shares, ``empty``
    experts with none."""
    import numpy as np

    w = np.exp(0.6 * rng.standard_normal(G))
    if empty:
        w[rng.choice(G, empty, replace=False)] = 0.0
    return rng.multinomial(tokens, w / w.sum())


def _time(fn, reps: int, warmup: int = 3):
    """(median, p20, p80) milliseconds of ``fn()`` between CUDA events on the current stream."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    q = lambda f: ts[min(len(ts) - 1, int(f * len(ts)))]
    return statistics.median(ts), q(0.2), q(0.8)


def _rel_err(out, ref) -> float:
    return float((out.double() - ref).norm() / max(ref.norm(), 1e-30))


_BOUND = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-5, "tf32": 5e-3}


def _moe(row: Row, rng, reps: int, device: str):
    import numpy as np
    import torch
    import torch.nn.functional as F

    import warp_gemm

    tf32 = row.dtype == "tf32"
    tdt = getattr(torch, "float32" if tf32 else row.dtype)
    sizes = _sizes(rng, row.G, row.tokens, row.empty)
    ends = np.cumsum(sizes)
    offs = torch.tensor(ends, dtype=torch.int32, device=device)
    gen = torch.Generator(device=device).manual_seed(int(rng.integers(2**31)))
    x = (torch.randn(row.tokens, row.K, device=device, generator=gen) * row.K ** -0.25).to(tdt)
    w = (torch.randn(row.G, row.N, row.K, device=device, generator=gen) * row.K ** -0.25).to(tdt)
    wt = w.transpose(-2, -1)  # (G, K, N) views of (G, N, K) weights
    flops = 2.0 * row.tokens * row.K * row.N
    starts = np.concatenate(([0], ends[:-1]))
    # the float64 reference of a sample of rows: up to 4 from each non-empty group
    picks = [(g, np.arange(s, e)[:: max(1, (e - s) // 4)][:4]) for g, (s, e) in enumerate(zip(starts, ends)) if e > s]
    pick = np.concatenate([p for _, p in picks])
    ref = torch.cat([x[torch.as_tensor(p, device=device)].double() @ wt[g].double() for g, p in picks])
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32

    def loop():
        outs = [x[int(s):int(e)] @ wt[g] for g, (s, e) in enumerate(zip(starts, ends))]
        return torch.cat(outs)

    xd, wd = x, wt[0]
    providers = {
        "warp_gemm": lambda: warp_gemm.grouped_mm(x, wt, offs=offs, allow_tf32=tf32),
        "F.grouped_mm": (lambda: F.grouped_mm(x, wt, offs=offs)) if hasattr(F, "grouped_mm") else None,
        "loop": loop,
        "dense": lambda: xd @ wd,
    }
    rows = []
    try:
        for name, fn in providers.items():
            rec = dict(row=row.name, dtype=row.dtype, G=row.G, tokens=row.tokens, K=row.K, N=row.N, provider=name,
                       target=row.target)
            if fn is None:
                rows.append(dict(rec, status="n/a"))
                continue
            try:
                out = fn()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a provider that refuses the dtype is reported, not fatal
                rows.append(dict(rec, status=f"n/a: {type(e).__name__}: {str(e)[:80]}"))
                continue
            if name != "dense":
                err = _rel_err(out[torch.as_tensor(pick, device=device)], ref)
                if not math.isfinite(err) or err > _BOUND[row.dtype]:
                    rows.append(dict(rec, status=f"WRONG (rel. error {err:.1e})"))
                    continue
                rec["rel_err"] = err
            del out
            med, p20, p80 = _time(fn, reps)
            rows.append(dict(rec, status="ok", ms=med, p20=p20, p80=p80, tflops=flops / med / 1e9))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return rows


def _list(row: Row, rng, reps: int, device: str):
    import torch

    import warp_gemm

    tdt = getattr(torch, row.dtype)
    dims = rng.integers(row.lo, row.hi + 1, (row.G, 3))
    a = [torch.randn(int(m), int(k), device=device, dtype=tdt) * int(k) ** -0.25 for m, k, _ in dims]
    b = [torch.randn(int(k), int(n), device=device, dtype=tdt) * int(k) ** -0.25 for _, k, n in dims]
    flops = float(sum(2 * int(m) * int(k) * int(n) for m, k, n in dims))
    torch.backends.cuda.matmul.allow_tf32 = False
    # list1000_plan: grouped_matmul_plan made once, each timed call one plan() (new results each call)
    mine = warp_gemm.grouped_matmul_plan(a, b) if row.name.endswith("_plan") else (lambda: warp_gemm.grouped_matmul(a, b))
    providers = {"warp_gemm": mine, "loop": lambda: [x @ y for x, y in zip(a, b)]}
    check = rng.choice(row.G, 16, replace=False)
    rows = []
    for name, fn in providers.items():
        rec = dict(row=row.name, dtype=row.dtype, G=row.G, sides=f"{row.lo}-{row.hi}", provider=name,
                   target=row.target)
        out = fn()
        torch.cuda.synchronize()
        err = max(_rel_err(out[i], a[i].double() @ b[i].double()) for i in check)
        if not math.isfinite(err) or err > _BOUND[row.dtype]:
            rows.append(dict(rec, status=f"WRONG (rel. error {err:.1e})"))
            continue
        med, p20, p80 = _time(fn, reps)
        rows.append(dict(rec, status="ok", rel_err=err, ms=med, p20=p20, p80=p80, tflops=flops / med / 1e9))
    return rows


def grouped_suite(device: str = "cuda", rows: list[str] | None = None, reps: int = 20, seed: int = 0) -> list[dict]:
    """Run the suite's rows (all, or those named) on ``device``; returns the result rows (see the module's
    docstring), each provider's ``vs_warp_gemm`` = its time over warp_gemm's (> 1: warp_gemm is faster)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for row in ROWS:
        if rows and row.name not in rows:
            continue
        res = (_list if row.kind == "list" else _moe)(row, rng, reps, device)
        mine = next((r for r in res if r["provider"] == "warp_gemm" and r.get("ms")), None)
        for r in res:
            if mine and r.get("ms"):
                r["vs_warp_gemm"] = r["ms"] / mine["ms"]
        out.extend(res)
    return out


def header() -> dict:
    import torch
    import warp as wp

    import warp_gemm

    return dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, warp=wp.config.version,
                warp_gemm=warp_gemm.__version__)


def table(rows: list[dict]) -> str:
    lines = [f"{'row':<12} {'dtype':<9} {'provider':<13} {'ms':>9} {'TFLOP/s':>8} {'t/t(wg)':>8}  status / target"]
    for r in rows:
        ms = f"{r['ms']:.3f}" if r.get("ms") else "-"
        tf = f"{r['tflops']:.1f}" if r.get("tflops") else "-"
        vs = f"{r['vs_warp_gemm']:.2f}" if r.get("vs_warp_gemm") else "-"
        note = r["status"] if r["status"] != "ok" else (r["target"] if r["provider"] == "warp_gemm" else "")
        lines.append(f"{r['row']:<12} {r['dtype']:<9} {r['provider']:<13} {ms:>9} {tf:>8} {vs:>8}  {note}")
    return "\n".join(lines)


def precompile(arch: int = 90, jobs: int = 2) -> None:
    """Build the suite's and the CUDA tests' grouped kernels for ``arch`` into Warp's kernel cache, offline
    (``wp.compile_aot_module``; no GPU needed): every dtype, layout class, tile size (small / large groups),
    checked copies or not, and float32 results of 16-bit inputs; on arch 90 also the Hopper grouped kernels
    (sm_90a)."""
    import itertools
    from concurrent.futures import ProcessPoolExecutor

    combos = []
    for dt, lay, checked, side in itertools.product(("float16", "bfloat16", "float32", "tf32", "float64"),
                                                    ("NN", "NT", "TN", "TT"), (False, True), (32, 4096)):
        outs = ("float32", None) if dt in ("float16", "bfloat16") else (None,)
        combos += [(dt, lay, checked, side, o) for o in outs]
    with ProcessPoolExecutor(jobs) as ex:
        for r in ex.map(_build, combos, [arch] * len(combos)):
            print(r, flush=True)
        if arch == 90:  # the Hopper grouped kernels (sm_90a): 16-bit into their own dtype or float32, tf32
            hop = [(dt, out, lb, tiles) for dt, outs in (("float16", ("float16", "float32")),
                                                         ("bfloat16", ("bfloat16", "float32")), ("float32", ("float32",)))
                   for out in outs for lb in (("T",) if dt == "float32" else ("T", "N"))
                   for tiles in ((128, 256), (128, 128))]
            for r in ex.map(_build_hopper, hop):
                print(r, flush=True)


def _build(combo, arch):
    import time

    import warp as wp

    from warp_gemm import _compat
    from warp_gemm.families.grouped import kernel as K
    from warp_gemm.families.grouped import rules

    _compat.init()
    dt, lay, checked, side, out = combo
    base = "float32" if dt == "tf32" else dt
    spec = rules.choose_spec(base, out or base, dt == "tf32", lay, False, side, side)
    t0 = time.time()
    k = K.get_kernel(spec, checked)
    k.module.options["block_dim"] = spec.block_dim
    wp.compile_aot_module(k.module, arch=[arch])
    for plain in (K.table_kernel(), K.bias_kernel(out or base)):
        plain.module.options["block_dim"] = 256
        wp.compile_aot_module(plain.module, arch=[arch])
    return f"{K.key_of(spec, checked)}: {time.time() - t0:.1f} s"


def _build_hopper(combo):
    import time

    import warp as wp

    from warp_gemm import _compat
    from warp_gemm.families.grouped import hopper
    from warp_gemm.families.grouped._deps import HOPPER_STAGES, HopperSpec

    _compat.init()
    dt, out, lb, (bm, bn) = combo
    spec = HopperSpec(dt, out, "N", lb, bm=bm, bn=bn, stages=HOPPER_STAGES[(bm, bn)])
    t0 = time.time()
    k = hopper.get_kernel(spec)
    k.module.options["block_dim"] = spec.block_dim
    old = wp.config.cuda_arch_suffix
    wp.config.cuda_arch_suffix = "a"  # as hopper.load compiles it
    try:
        wp.compile_aot_module(k.module, arch=[90])
    finally:
        wp.config.cuda_arch_suffix = old
    return f"{hopper.key_of(spec)}: {time.time() - t0:.1f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default="", help="write the rows (with a header) to this file")
    ap.add_argument("--precompile", type=int, default=0, metavar="ARCH", help="build the kernels offline and exit")
    ap.add_argument("-j", type=int, default=2, help="processes for --precompile")
    args = ap.parse_args(argv)
    if args.precompile:
        precompile(args.precompile, args.j)
        return 0
    rows = grouped_suite(rows=[r for r in args.rows.split(",") if r] or None, reps=args.reps)
    head = header()
    print(" ".join(f"{k}={v}" for k, v in head.items()))
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(dict(header=head, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
