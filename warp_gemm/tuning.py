"""Autotuner: pick the fastest tile configuration per (GPU arch, dtype, layout, shape bucket).

``warp_gemm.tune(...)`` / ``warp-gemm tune`` compile every candidate of :func:`candidate_configs` in
parallel processes (a cold MathDx GEMM compile costs ~60 s, so serial compiles would dominate), time
each candidate on each shape in one process with CUDA events, and persist the winners in a JSON file per
Warp release and GPU under ``~/.cache/warp_gemm`` (``WARP_GEMM_CACHE_DIR`` overrides). Lookups consult
that file first and then the shipped default table measured on an H100 (``data/tuned_sm90.json``).
A corrupt or stale file is ignored with a warning, never a crash.

Shape buckets: ``(ceil(log2 M), ceil(log2 N), ceil(log2 K))`` with M clamped to >= 16 so all skinny
problems share buckets, and the batch folded into M. A lookup takes the nearest tuned bucket within
L1 distance 2 (a factor of 4 in one dimension); further away the heuristic decides.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import threading
import time
import warnings
from importlib import resources
from pathlib import Path

from . import _compat
from ._config import Config, candidate_configs

FORMAT = 1  # bump when the file layout changes; other formats are ignored as stale
_lock = threading.Lock()
_tables: dict[str, dict] = {}  # path -> parsed entries


def bucket(M: int, N: int, K: int, batch: int = 1) -> tuple[int, int, int]:
    m = max(M, 1) * max(batch, 1)
    return (max(4, math.ceil(math.log2(max(m, 16)))), math.ceil(math.log2(max(N, 1))),
            math.ceil(math.log2(max(K, 1))))


def arch_of(device) -> str:
    """``sm90`` etc. for a Warp CUDA device."""
    arch = getattr(device, "arch", None)
    return f"sm{arch}" if arch else "unknown"


def cache_dir() -> Path:
    return Path(os.environ.get("WARP_GEMM_CACHE_DIR", Path.home() / ".cache" / "warp_gemm"))


def user_cache_path(device) -> Path:
    name = "".join(ch if ch.isalnum() else "-" for ch in getattr(device, "name", "gpu")).strip("-")
    return cache_dir() / f"tuned-warp{_compat.WARP_VERSION}-{arch_of(device)}-{name}.json"


def _shipped_path(arch: str) -> Path | None:
    try:
        p = resources.files("warp_gemm") / "data" / f"tuned_{arch}.json"
        return Path(str(p)) if p.is_file() else None
    except (ModuleNotFoundError, FileNotFoundError):
        return None


def _load(path: Path | None) -> dict:
    """Entries of one table file: {"arch|dtype|layout": {"m,n,k": "config"}}; {} if absent/bad."""
    if path is None:
        return {}
    key = str(path)
    with _lock:
        if key in _tables:
            return _tables[key]
        entries: dict = {}
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                if not isinstance(data, dict) or data.get("format") != FORMAT:
                    raise ValueError(f"format {data.get('format') if isinstance(data, dict) else '?'} != {FORMAT}")
                for group, rows in data["entries"].items():
                    entries[group] = {tuple(int(x) for x in b.split(",")): Config.parse(c) for b, c in rows.items()}
            except Exception as e:  # corrupt or stale: ignore, never crash a GEMM call
                warnings.warn(f"warp_gemm: ignoring tuning table {path}: {type(e).__name__}: {e}", stacklevel=3)
                entries = {}
        _tables[key] = entries
        return entries


def _nearest(rows: dict, b: tuple[int, int, int]) -> Config | None:
    best, best_d = None, 3
    for bb, cfg in rows.items():
        d = sum(abs(x - y) for x, y in zip(bb, b))
        if d < best_d:
            best, best_d = cfg, d
    return best


_memo: dict[tuple, Config | None] = {}  # lookup results; cleared whenever a table is saved


def lookup(device, dtype: str, layout: str, M: int, N: int, K: int, batch: int, tf32: bool = False) -> Config | None:
    """The tuned configuration for a problem, or None (then the heuristic decides).

    Memoized per (GPU, dtype, layout, bucket): resolving the table paths costs ~40 us, which matters
    next to a 1000^3 GEMM's ~100 us on an H100."""
    b = bucket(M, N, K, batch)
    key = (getattr(device, "arch", None), getattr(device, "name", None), dtype, layout, b, tf32,
           os.environ.get("WARP_GEMM_CACHE_DIR"))
    try:
        return _memo[key]
    except KeyError:
        pass
    hit = _lookup(device, dtype, layout, b, tf32)
    _memo[key] = hit
    return hit


def _lookup(device, dtype: str, layout: str, b: tuple[int, int, int], tf32: bool) -> Config | None:
    arch = arch_of(device)
    dt = "tf32" if tf32 else dtype
    # bfloat16 borrows float16's winners where it has none of its own: the two measured within 2%
    # of each other on every tuned shape (H100, Warp 1.19).
    dts = (dt, "float16") if dt == "bfloat16" else (dt,)
    for table in (_load(user_cache_path(device)), _load(_shipped_path(arch))):
        for d in dts:
            for lay in (layout, "NN"):  # untuned layouts borrow the NN winner of the bucket
                rows = table.get(f"{arch}|{d}|{lay}")
                if rows:
                    hit = _nearest(rows, b)
                    if hit is not None:
                        return hit
    return None


def shipped_configs(dtype: str) -> list[Config]:
    """Every configuration in the shipped tables for ``dtype`` (for tests and precompile)."""
    out = set()
    data_dir = resources.files("warp_gemm") / "data"
    try:
        files = [Path(str(p)) for p in data_dir.iterdir() if p.name.startswith("tuned_")]
    except (FileNotFoundError, NotADirectoryError):
        files = []
    for f in files:
        for group, rows in _load(f).items():
            if group.split("|")[1] in (dtype, "tf32" if dtype == "float32" else dtype,
                                       "float16" if dtype == "bfloat16" else dtype):
                out.update(rows.values())
    return sorted(out)


# --- tuning -------------------------------------------------------------------------------------------
def _time_one(fn, device, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median GPU milliseconds of ``fn`` with CUDA events (Warp's own, so torch is not needed).

    ``fn`` is captured once in a CUDA graph and the replays are timed, so the figure is the GPU's time
    alone. Timed as plain back-to-back calls, a small problem is host-bound: at fp16 1000^3 every
    16-bit candidate measured 31-33 TFLOP/s (~85 us of host time per call), the tuner picked
    64x128x64/o3 by that noise, and the benchmark runner then measured it at 24.8 against 36.9 for
    the shipped 64x64x128 (H100, benchmarks/results/tune_h100_s3_small.jsonl). Where capture is not
    possible, the plain calls are timed."""
    import warp as wp

    fn()
    wp.synchronize_device(device)
    try:
        with wp.ScopedCapture(device=device) as cap:
            fn()
        graph = cap.graph
        fn = functools.partial(wp.capture_launch, graph)
        fn()
        wp.synchronize_device(device)
    except Exception:  # capture unsupported here: time the plain calls
        wp.synchronize_device(device)
    e0, e1 = wp.Event(device, enable_timing=True), wp.Event(device, enable_timing=True)
    wp.record_event(e0)
    fn()
    wp.record_event(e1)
    wp.synchronize_device(device)
    est = max(wp.get_event_elapsed_time(e0, e1), 1e-3)
    for _ in range(max(1, int(warmup_ms / est))):
        fn()
    times = []
    for _ in range(max(5, int(rep_ms / est))):
        a, b = wp.Event(device, enable_timing=True), wp.Event(device, enable_timing=True)
        wp.record_event(a)
        fn()
        wp.record_event(b)
        times.append((a, b))
    wp.synchronize_device(device)
    ms = sorted(wp.get_event_elapsed_time(a, b) for a, b in times)
    return ms[len(ms) // 2]


def tune(dtypes: list[str], shapes=None, device: str = "cuda", workers: int | None = None,
         configs: list[Config] | None = None, persist: bool = True, progress: bool = True,
         rep_ms: float = 100, on_row=None) -> list[dict]:
    """Time every candidate on every shape; persist the per-bucket winners. Returns all rows.

    ``dtypes``: names or aliases (fp16, bf16, fp32, tf32, fp64). ``shapes``: :class:`Shape` list
    (default: the benchmark square, odd, skinny and transformer sets). Layout NN.
    """
    import numpy as np
    import warp as wp

    from . import shapes as S
    from .api import gemm
    from .precompile import canon_dtype, precompile
    from .tolerance import random_operands

    _compat.init()
    dev = wp.get_device(device)
    if dev.is_cpu:
        raise ValueError("tuning is for CUDA devices; the CPU uses one configuration")
    shapes = shapes or (S.BENCH_SQUARE + S.BENCH_ODD + S.BENCH_SKINNY + S.BENCH_TRANSFORMER)
    dts = [canon_dtype(d) for d in dtypes]
    t0 = time.perf_counter()
    built = []
    for dt in dts:  # every candidate, compiled in parallel processes before any timing
        base = "float32" if dt == "tf32" else dt
        built += precompile([dt], None, workers=workers, configs=configs or candidate_configs("cuda", base),
                            progress=progress)
    bad = {(j[0], "tf32" if j[4] else j[1]) for j, _, err in built if err}
    compile_s = time.perf_counter() - t0
    rows: list[dict] = []
    rng = np.random.default_rng()
    total = sum(len(configs or candidate_configs("cuda", "float32" if d == "tf32" else d)) for d in dts) * len(shapes)
    done = 0
    for dt in dts:
        base = "float32" if dt == "tf32" else dt
        for s in shapes:
            a64, b64 = random_operands(min(s.M, 64), s.N, s.K, base, rng)  # check rows: 64 of M
            A = _device_operand(rng, (s.M, s.K), base, dev, a64)
            B = _device_operand(rng, (s.K, s.N), base, dev, b64)
            out = wp.empty((s.M, s.N), dtype=A.dtype, device=dev)
            for cfg in configs or candidate_configs("cuda", base):
                done += 1
                row = {"arch": arch_of(dev), "gpu": dev.name, "dtype": dt, "layout": "NN", "shape": s.id,
                       "M": s.M, "N": s.N, "K": s.K, "config": str(cfg), "warp": _compat.WARP_VERSION}
                if (str(cfg), dt) in bad:
                    rows.append({**row, "status": "compile-error"})
                else:
                    rows.append({**row, **_measure(gemm, A, B, out, cfg, dt, base, s, a64 @ b64, dev, rep_ms)})
                if on_row is not None:
                    on_row(rows[-1])
                if progress:
                    r = rows[-1]
                    print(f"[{done}/{total}] {dt} {s.id} {cfg}: "
                          f"{r.get('tflops', 0):.1f} TFLOP/s {r['status']}", file=sys.stderr)
    winners = _winners(rows)
    rows.append({"compile_s": compile_s, "jobs": len(built), "compile_errors": sorted(map(list, bad))})
    if persist:
        save(user_cache_path(dev), winners, {"compile_s": compile_s})
    return rows


def _measure(gemm, A, B, out, cfg, dt, base, s, ref_rows, dev, rep_ms) -> dict:
    """Check one configuration on the problem's first rows, then time it: a status dict."""
    import warp as wp

    from .tolerance import compare

    def run():
        gemm(A, B, out=out, config=cfg, allow_tf32=dt == "tf32")

    try:
        out.fill_(float("nan"))  # a config that writes nothing must not pass on stale data
        run()
        wp.synchronize_device(dev)
        cmp = compare(_rows_f64(out, ref_rows.shape[0]), ref_rows, base, tf32=dt == "tf32")
        if not cmp.ok:
            return {"status": "WRONG", "error": str(cmp)}
        ms = _time_one(run, dev, rep_ms=rep_ms)
        return {"status": "ok", "ms": ms, "tflops": s.flops / ms / 1e9}
    except Exception as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}"[:300]}


def _device_operand(rng, shape, dtype, dev, head):
    """A random device array whose leading rows are ``head`` (float64, for the correctness check)."""
    import numpy as np
    import warp as wp

    from ._kernels import WP_DTYPES

    # float64 draws for float64 operands, so the checked rows are exactly the reference's.
    x = rng.standard_normal(shape, dtype=np.float64 if dtype == "float64" else np.float32)
    x *= max(shape[-1], 1) ** -0.25
    x[: head.shape[0]] = head
    if dtype == "bfloat16":
        from .tolerance import f64_to_bf16_bits

        bits = wp.array(f64_to_bf16_bits(x), dtype=wp.uint16, device=dev)
        arr = wp.empty(shape, dtype=wp.bfloat16, device=dev)
        wp.copy(wp.array(ptr=arr.ptr, dtype=wp.uint16, shape=shape, device=dev, capacity=arr.capacity), bits)
        return arr
    return wp.array(x.astype(dtype), dtype=WP_DTYPES[dtype], device=dev)


def _rows_f64(out, rows: int):
    import numpy as np
    import warp as wp

    if _compat.HAS_BF16 and out.dtype is wp.bfloat16:
        from .tolerance import bf16_bits_to_f64

        u16 = wp.array(ptr=out.ptr, dtype=wp.uint16, shape=out.shape, device=out.device, capacity=out.capacity)
        return bf16_bits_to_f64(u16.numpy()[:rows])
    return out.numpy()[:rows].astype(np.float64)


def _winners(rows: list[dict]) -> dict:
    """Per (arch|dtype|layout, bucket): the configuration with the best mean speed *relative to the
    fastest candidate on each shape* of the bucket (a shape a configuration failed on counts 0).

    Taking the single fastest row instead let one shape decide for its whole bucket: at 1024^3 (host
    bound, every candidate within 5%) 256x128x64 won by 0.1 TFLOP/s and then ran 1000^3 fp16 at 9.7
    against 12.9 for the runner-up (H100 benchmark runner, 2026-11-21)."""
    speed: dict[tuple[str, str], dict[str, dict[str, float]]] = {}  # (group, bucket) -> shape -> cfg -> tflops
    for r in rows:
        if r.get("status") != "ok":
            continue
        group = f"{r['arch']}|{r['dtype']}|{r['layout']}"
        b = ",".join(map(str, bucket(r["M"], r["N"], r["K"])))
        per_cfg = speed.setdefault((group, b), {}).setdefault(f"{r['M']}x{r['N']}x{r['K']}", {})
        per_cfg[r["config"]] = max(r["tflops"], per_cfg.get(r["config"], 0.0))
    out: dict[str, dict[str, str]] = {}
    for (group, b), shapes in speed.items():
        configs = sorted({c for per_cfg in shapes.values() for c in per_cfg})
        score = {c: sum(per_cfg.get(c, 0.0) / max(per_cfg.values()) for per_cfg in shapes.values()) / len(shapes)
                 for c in configs}
        out.setdefault(group, {})[b] = max(configs, key=lambda c: (score[c], c))
    return out


def save(path: Path, entries: dict, meta: dict | None = None) -> None:
    """Merge ``entries`` into the table at ``path`` (atomic replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("format") == FORMAT:
                old = data["entries"]
        except Exception:
            old = {}
    for g, rows in entries.items():
        old.setdefault(g, {}).update(rows)
    data = {"format": FORMAT, "warp": _compat.WARP_VERSION, "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
            **(meta or {}), "entries": old}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
    with _lock:
        _tables.pop(str(path), None)
        _memo.clear()
        from . import api  # recorded call plans may hold the old choice

        api._plans.clear()
