"""Autotuner: measure every candidate configuration per (dtype, layout, shape bucket) on this GPU and
save the winners in the user's table (:mod:`warp_gemm.config.tables`), which every later call reads.

``warp_gemm.tune(...)`` / ``warp-gemm tune`` compile every candidate of ``candidate_configs`` in
parallel processes (a cold MathDx GEMM compile costs ~60 s, so serial compiles would dominate), then
check each candidate against float64 and time it on each shape in one process by CUDA-graph replay.
It measures through the core (``warp_gemm.core.execute``), not through the public API.
"""

from __future__ import annotations

import sys
import time

from warp_gemm import _compat
from warp_gemm.config.configs import candidate_configs
from warp_gemm.config.tables import bucket, save, user_cache_path

def _time_one(fn, device, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median GPU milliseconds of ``fn`` with CUDA events (Warp's own, so torch is not needed).

    ``fn`` is captured once in a CUDA graph and the replays are timed, so the figure is the GPU's time
    alone. Timed as plain back-to-back calls, a small problem is host-bound: at fp16 1000^3 every
    16-bit candidate measured 31-33 TFLOP/s (~85 us of host time per call), the tuner picked
    64x128x64/o3 by that noise, and the benchmark runner then measured it at 24.8 against 36.9 for
    the shipped 64x64x128 (H100, benchmarks/results/round1-tuning/tune_h100_s3_small.jsonl). Where capture is not
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

    from warp_gemm.tools import shapes as S
    from warp_gemm.core.execute import run

    def gemm(a, b, out=None, config=None, allow_tf32=False):
        return run(a, b, None, 1.0, 0.0, False, False, out, allow_tf32, config, "tune")
    from warp_gemm.tools.precompile import canon_dtype, precompile
    from warp_gemm.tools.tolerance import random_operands

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

    from warp_gemm.tools.tolerance import compare

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

    from warp_gemm.kernels.common import WP_DTYPES

    # float64 draws for float64 operands, so the checked rows are exactly the reference's.
    x = rng.standard_normal(shape, dtype=np.float64 if dtype == "float64" else np.float32)
    x *= max(shape[-1], 1) ** -0.25
    x[: head.shape[0]] = head
    if dtype == "bfloat16":
        from warp_gemm.tools.tolerance import f64_to_bf16_bits

        bits = wp.array(f64_to_bf16_bits(x), dtype=wp.uint16, device=dev)
        arr = wp.empty(shape, dtype=wp.bfloat16, device=dev)
        wp.copy(wp.array(ptr=arr.ptr, dtype=wp.uint16, shape=shape, device=dev, capacity=arr.capacity), bits)
        return arr
    return wp.array(x.astype(dtype), dtype=WP_DTYPES[dtype], device=dev)


def _rows_f64(out, rows: int):
    import numpy as np
    import warp as wp

    if _compat.HAS_BF16 and out.dtype is wp.bfloat16:
        from warp_gemm.tools.tolerance import bf16_bits_to_f64

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


