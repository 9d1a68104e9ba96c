"""Autotuner: measure every candidate configuration per (dtype, layout, shape bucket) on this GPU and
save the winners in the user's table (:mod:`warp_gemm.config.tables`), which every later call reads.

``warp_gemm.tune(...)`` / ``warp-gemm tune`` compile every candidate in parallel processes (a cold
MathDx GEMM compile costs 20-60 s, so serial compiles would dominate), then check each candidate
against float64 and time it on each shape in one process by CUDA-graph replay. Two families are tuned:
the tiled family (``family="tiled"``, :class:`Config` candidates, ``config=`` forced on each call) and
the pipelined family (``family="pipelined"``, :class:`PipeConfig` candidates: tile shape, stages, block
size, blocks per SM; forced with ``options(family="pipelined", pipe_config=...)``). A third mode,
``family="families"``, tunes the choice *between* the families: every family that plans the problem
(``tables.FAMILY_NAMES``, forced with ``options(family=...)``; one that does not plan it is "n/a") is timed
with its own built-in choices, and the fastest per bucket goes to the ``"...|family"`` groups, which the
planner consults before its rules (``core.plan._plan_family``). All measure through the core call path
(``warp_gemm.core.execute.run``, which ``matmul`` takes after its autograd check).
"""

from __future__ import annotations

import functools
import sys
import time

from warp_gemm import _compat
from warp_gemm.config.configs import Config, PipeConfig, candidate_configs
from warp_gemm.config.tables import (FAMILY, FAMILY_NAMES, PIPE, arch_of, bucket, family_bucket, save,
                                     user_cache_path)


def _time_one(fn, device, warmup_ms: float = 25, rep_ms: float = 100, how: dict | None = None) -> float:
    """Median GPU milliseconds of ``fn`` with CUDA events (Warp's own, so torch is not needed).

    ``fn`` is captured once in a CUDA graph and the replays are timed, so the figure is the GPU's time
    alone. Timed as plain back-to-back calls, a small problem is host-bound: at fp16 1000^3 every
    16-bit candidate measured 31-33 TFLOP/s (~85 us of host time per call), the tuner picked
    64x128x64/o3 by that noise, and the benchmark runner then measured it at 24.8 against 36.9 for
    the shipped 64x64x128 (H100). Where capture is not
    possible, the plain calls are timed; ``how["timing"]`` (when given) says which ("graph" / "calls",
    with the capture's error)."""
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
        mode = "graph"
    except Exception as e:  # capture unsupported here: time the plain calls
        wp.synchronize_device(device)
        mode = f"calls ({type(e).__name__}: {e})"[:200]
    if how is not None:
        how["timing"] = mode
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


FAMILIES = ("tiled", "pipelined", "families")


class NotPlanned(RuntimeError):
    """A forced family that does not plan the problem (the planner fell back to another): not a failure."""


def tune(dtypes: list[str], shapes=None, device: str = "cuda", workers: int | None = None,
         configs: list | None = None, persist: bool = True, progress: bool = True,
         rep_ms: float = 100, on_row=None, family: str = "tiled") -> list[dict]:
    """Time every candidate on every shape; persist the per-bucket winners. Returns all rows.

    ``dtypes``: names or aliases (fp16, bf16, fp32, tf32, fp64). ``shapes``: :class:`Shape` list
    (default: the benchmark square, odd, skinny and transformer sets for the tiled family, ``tune-pipe``
    for the pipelined one; a batched shape is timed batched). Layout NN.

    ``family="tiled"``: the tiled family's :class:`Config` candidates (``candidate_configs``), winners in
    the groups ``"sm90|float16|NN"``. ``family="pipelined"``: the pipelined family's :class:`PipeConfig`
    candidates (``families.pipelined.rules.candidate_pipe_configs``; exact fp32: the SIMT kernel's), each timed through the same
    call path with the family and the configuration forced (``options(family="pipelined",
    pipe_config=...)``), winners in the groups ``"sm90|float16|NN|pipe"`` of the same file.
    ``family="families"``: the kernel families of ``tables.FAMILY_NAMES`` as candidates, each forced on each
    shape (default shapes ``tune-family``: small, batched, skinny and GEMV products), winners -- the fastest
    family per bucket, batches apart from single products (``tables.family_bucket``) -- in the groups
    ``"sm90|float16|NN|family"``. Their kernels are compiled first by one forced call per (shape, dtype,
    family) in parallel processes.
    ``configs``: restrict the candidates (Config / PipeConfig objects or their text; family names).
    """
    import numpy as np
    import warp as wp

    from warp_gemm.tools import shapes as S
    from warp_gemm.tools.precompile import canon_dtype
    from warp_gemm.tools.tolerance import random_operands

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    pipe = family == "pipelined"
    fams = family == "families"
    _compat.init()
    dev = wp.get_device(device)
    if dev.is_cpu:
        raise ValueError("tuning is for CUDA devices; the CPU uses one configuration")
    shapes = shapes or (S.TUNE_PIPE if pipe else S.TUNE_FAMILY if fams else
                        S.BENCH_SQUARE + S.BENCH_ODD + S.BENCH_SKINNY + S.BENCH_TRANSFORMER)
    dts = [canon_dtype(d) for d in dtypes]
    cands = {dt: _candidates(family, dt, configs) for dt in dts}
    t0 = time.perf_counter()
    # (config text, dtype) -> why it cannot be timed; the families' warm-up only fills the kernel cache
    bad = _warm_families(shapes, cands, workers, progress) if fams else _compile(family, cands, workers, progress)
    compile_s = time.perf_counter() - t0
    rows: list[dict] = []
    rng = np.random.default_rng()
    total = sum(len(c) for c in cands.values()) * len(shapes)
    done = 0
    for dt in dts:
        base = "float32" if dt == "tf32" else dt
        tf32 = dt == "tf32"
        for s in shapes:
            a64, b64 = random_operands(min(s.M, 64), s.N, s.K, base, rng)  # check rows: 64 of M (batch 0)
            lead = (s.batch,) if s.batch else ()
            A = _device_operand(rng, lead + (s.M, s.K), base, dev, a64)
            B = _device_operand(rng, lead + (s.K, s.N), base, dev, b64)
            out = wp.empty(lead + (s.M, s.N), dtype=A.dtype, device=dev)
            ref = a64 @ b64
            for cfg in cands[dt]:
                done += 1
                row = {"arch": arch_of(dev), "gpu": dev.name, "family": family, "dtype": dt, "layout": "NN",
                       "shape": s.id, "M": s.M, "N": s.N, "K": s.K, "batch": s.batch, "config": str(cfg),
                       "warp": _compat.WARP_VERSION}
                if (str(cfg), dt) in bad:
                    rows.append({**row, "status": "compile-error", "error": bad[(str(cfg), dt)]})
                else:
                    if fams:
                        call, check = _family_call(A, B, out, cfg, tf32), _family_check(A, B, out, cfg, tf32)
                    else:
                        call = _pipe_call(A, B, out, cfg, tf32) if pipe else _tiled_call(A, B, out, cfg, tf32)
                        check = _pipe_check(A, B, out, cfg, tf32) if pipe else None
                    rows.append({**row, **_measure(call, out, base, tf32, s, ref, dev, rep_ms, check)})
                if on_row is not None:
                    on_row(rows[-1])
                if progress:
                    r = rows[-1]
                    print(f"[{done}/{total}] {dt} {s.id} {cfg}: "
                          f"{r.get('tflops', 0):.1f} TFLOP/s {r['status']}", file=sys.stderr)
    winners = _winners(rows)
    rows.append({"family": family, "compile_s": compile_s, "jobs": sum(len(c) for c in cands.values()),
                 "compile_errors": sorted(map(list, bad))})
    if persist:
        save(user_cache_path(dev), winners, {"compile_s": compile_s})
    return rows


def _candidates(family: str, dt: str, configs) -> list:
    """The configurations to time for ``dt`` ("tf32" for float32 with tf32)."""
    base = "float32" if dt == "tf32" else dt
    if family == "families":
        for name in configs or ():
            if name not in FAMILY_NAMES:
                raise ValueError(f"unknown kernel family {name!r} (one of {', '.join(FAMILY_NAMES)})")
        return list(configs) if configs else list(FAMILY_NAMES)
    if family == "tiled":
        return [Config.parse(c) if isinstance(c, str) else c for c in configs] if configs else \
            candidate_configs("cuda", base)
    from warp_gemm.families.pipelined.rules import candidate_pipe_configs

    if configs:
        return [PipeConfig.parse(c) if isinstance(c, str) else c for c in configs]
    return candidate_pipe_configs(base, dt == "tf32")


def _pipe_job_spec(dt: str, cfg):
    """The kernel the tuner's calls plan for ``cfg`` (NN, "scale", output in the input dtype), or None
    where it does not fit."""
    from warp_gemm.families.pipelined.rules import pipe_spec
    from warp_gemm.families import pipelined

    base = "float32" if dt == "tf32" else dt
    return pipe_spec(pipelined.default_spec(base, base, tf32=dt == "tf32", layout="NN", epilogue="scale"), cfg)


def _compile(family: str, cands: dict, workers, progress) -> dict:
    """Compile every candidate in parallel processes (a cold compile costs 20-60 s) before any timing;
    returns {(config text, dtype): error} for those that failed."""
    from warp_gemm.tools.precompile import build_jobs, precompile

    bad = {}
    if family == "tiled":
        built = []
        for dt, cfgs in cands.items():
            built += precompile([dt], None, workers=workers, configs=cfgs, progress=progress)
        for j, _, err in built:
            if err:
                bad[(j[0], "tf32" if j[4] else j[1])] = err
        return bad
    jobs, owner = [], {}
    for dt, cfgs in cands.items():
        for cfg in cfgs:
            spec = _pipe_job_spec(dt, cfg)
            if spec is None:
                bad[(str(cfg), dt)] = "does not fit (shared memory or the family's checks)"
                continue
            jobs.append(("pipelined", spec))
            owner.setdefault(spec, []).append((str(cfg), dt))
    for job, _, err in build_jobs(jobs, None, workers, progress=progress):
        if err:
            for k in owner[job[1]]:
                bad[k] = err
    return bad


def _shape_text(s) -> str:
    return f"{s.batch}x{s.M}x{s.N}x{s.K}" if s.batch else f"{s.M}x{s.N}x{s.K}"


def _warm_one(shape: str, dt: str, family: str) -> str:
    """(In a spawned process) one call of ``shape`` in ``dt`` with ``family`` forced on CUDA, so that its kernels
    are in Warp's kernel cache before the timing process needs them; returns the error text or ""."""
    try:
        import numpy as np
        import warp as wp

        from warp_gemm.tools.shapes import parse_shape

        _compat.init()
        s, base = parse_shape(shape), "float32" if dt == "tf32" else dt
        dev, rng = wp.get_device("cuda"), np.random.default_rng()
        lead = (s.batch,) if s.batch else ()
        A = _device_operand(rng, lead + (s.M, s.K), base, dev, np.zeros((0, s.K)))
        B = _device_operand(rng, lead + (s.K, s.N), base, dev, np.zeros((0, s.N)))
        out = wp.empty(lead + (s.M, s.N), dtype=A.dtype, device=dev)
        _family_call(A, B, out, family, dt == "tf32")()
        wp.synchronize_device(dev)
        return ""
    except Exception as e:  # a family that does not apply, or a build failure: the timed call reports it
        return f"{type(e).__name__}: {e}"[:300]


def _warm_families(shapes, cands: dict, workers, progress) -> dict:
    """Compile what every (shape, dtype, family) call needs, in parallel processes (a cold compile costs 20-60
    s, and the families' kernels depend on the shape). Marks nothing bad: a family that does not plan a shape
    shows as "n/a" when timed, and a failing build fails there again, with its error."""
    import multiprocessing as mp
    import os
    from concurrent.futures import ProcessPoolExecutor, as_completed

    jobs = [(_shape_text(s), dt, f) for dt, fams in cands.items() for s in shapes for f in fams]
    with ProcessPoolExecutor(workers or min(len(jobs), os.cpu_count() or 1),
                             mp_context=mp.get_context("spawn")) as ex:
        futs = {ex.submit(_warm_one, *j): j for j in jobs}
        for i, f in enumerate(as_completed(futs), 1):
            if progress:
                err = f.result()
                print(f"[{i}/{len(jobs)}] warmed {' '.join(futs[f])}" + (f" ({err[:100]})" if err else ""),
                      file=sys.stderr)
    return {}


def _family_call(A, B, out, family: str, tf32: bool):
    """One call through the public path with ``family`` forced (``options(family=...)``)."""
    from warp_gemm.core.execute import run
    from warp_gemm.core.options import override

    def call():
        with override(family=family):
            run(A, B, None, 1.0, 0.0, False, False, out, tf32, None, "tune")

    return call


def _family_check(A, B, out, family: str, tf32: bool):
    """Raises :class:`NotPlanned` unless the call plans ``family`` (a forced family that does not apply falls back
    to another); returns the family and its kernel's key."""
    from warp_gemm.core.options import override
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate

    def check():
        with override(family=family) as opts:
            p = validate(A, B, None, 1.0, 0.0, False, False, out, "tune")
            plan = make_plan(p, 1.0, 0.0, tf32, None, opts)
        if plan.family != family:
            raise NotPlanned(f"{family} does not plan this problem (planned {plan.family})")
        spec = plan.spec if plan.family == "tiled" else plan.family_spec
        return f"{family} {getattr(spec, 'key', spec)}"[:200]

    return check


def _tiled_call(A, B, out, cfg, tf32: bool):
    from warp_gemm.core.execute import run

    def call():
        run(A, B, None, 1.0, 0.0, False, False, out, tf32, cfg, "tune")

    return call


def _pipe_call(A, B, out, cfg, tf32: bool):
    """One call through the public path (``core.execute.run``, as ``matmul`` takes) with the pipelined
    family and ``cfg`` forced."""
    from warp_gemm.core.execute import run
    from warp_gemm.core.options import override

    def call():
        with override(family="pipelined", pipe_config=cfg):
            run(A, B, None, 1.0, 0.0, False, False, out, tf32, None, "tune")

    return call


def _pipe_check(A, B, out, cfg, tf32: bool):
    """Raises unless the call plans the pipelined family with ``cfg``'s fields (no silent fallback to
    the tiled family); returns the kernel's key."""
    from warp_gemm.core.options import override
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate

    def check():
        with override(family="pipelined", pipe_config=cfg) as opts:
            p = validate(A, B, None, 1.0, 0.0, False, False, out, "tune")
            plan = make_plan(p, 1.0, 0.0, tf32, None, opts)
        spec = plan.family_spec
        want = cfg.fields()
        if p.A.device.is_cpu:  # (tests) the CPU twin runs one thread per block, without a launch bound
            want.update(block_dim=1, min_blocks=0)
        if plan.family != "pipelined" or any(getattr(spec, k) != v for k, v in want.items()):
            raise RuntimeError(f"planned {plan.family} {getattr(spec, 'key', spec)}, not the pipelined {cfg}")
        return spec.key

    return check


def _measure(call, out, base: str, tf32: bool, s, ref_rows, dev, rep_ms, check=None) -> dict:
    """Check one configuration on the problem's first rows, then time it: a status dict."""
    import warp as wp

    from warp_gemm.tools.tolerance import compare

    try:
        extra = {"kernel": check()} if check is not None else {}
        out.fill_(float("nan"))  # a config that writes nothing must not pass on stale data
        call()
        wp.synchronize_device(dev)
        cmp = compare(_rows_f64(out, ref_rows.shape[0]), ref_rows, base, tf32=tf32)
        if not cmp.ok:
            return {**extra, "status": "WRONG", "error": str(cmp)}
        ms = _time_one(call, dev, rep_ms=rep_ms, how=extra)
        return {**extra, "status": "ok", "ms": ms, "tflops": s.flops / ms / 1e9}
    except NotPlanned as e:
        return {"status": "n/a", "error": str(e)[:300]}
    except Exception as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}"[:300]}


def _device_operand(rng, shape, dtype, dev, head):
    """A random device array whose leading rows are ``head`` (float64, for the correctness check); a 3-D
    ``shape`` is a batch, ``head`` the first rows of its first entry."""
    import numpy as np
    import warp as wp

    from warp_gemm.families.common.kernels import WP_DTYPES

    # float64 draws for float64 operands, so the checked rows are exactly the reference's.
    x = rng.standard_normal(shape, dtype=np.float64 if dtype == "float64" else np.float32)
    x *= max(shape[-1], 1) ** -0.25
    x.reshape(-1, shape[-1])[: head.shape[0]] = head
    if dtype == "bfloat16":
        from warp_gemm.tools.tolerance import f64_to_bf16_bits

        bits = wp.array(f64_to_bf16_bits(x), dtype=wp.uint16, device=dev)
        arr = wp.empty(shape, dtype=wp.bfloat16, device=dev)
        wp.copy(wp.array(ptr=arr.ptr, dtype=wp.uint16, shape=shape, device=dev, capacity=arr.capacity), bits)
        return arr
    return wp.array(x.astype(dtype), dtype=WP_DTYPES[dtype], device=dev)


def _rows_f64(out, rows: int):
    """The first ``rows`` rows of ``out`` (of its first batch entry when 3-D) as float64; only those rows
    are copied to the host."""
    import numpy as np
    import warp as wp

    v = (out[0] if out.ndim == 3 else out)[:rows]
    if _compat.HAS_BF16 and v.dtype is wp.bfloat16:
        from warp_gemm.tools.tolerance import bf16_bits_to_f64

        u16 = wp.array(ptr=v.ptr, dtype=wp.uint16, shape=v.shape, strides=v.strides, device=v.device,
                       capacity=v.shape[0] * v.strides[0])
        return bf16_bits_to_f64(u16.numpy())
    return v.numpy().astype(np.float64)


#: A '|family' bucket is kept only where its winner runs at this fraction of the fastest family on each of its shapes,
#: on average; below it the bucket's shapes want different families and the rules (core/plan.py) decide.
FAMILY_MIN_SCORE = 0.9


def _winners(rows: list[dict]) -> dict:
    """Per (arch|dtype|layout, bucket): the configuration with the best mean speed *relative to the
    fastest candidate on each shape* of the bucket (a shape a configuration failed on counts 0). Rows of
    the pipelined family (``"family": "pipelined"``) go to the group ``arch|dtype|layout|pipe``, those of the
    family tuner (``"family": "families"``, a family name as the configuration) to ``arch|dtype|layout|family``
    keyed by :func:`~warp_gemm.config.tables.family_bucket`; a batched row's batch is folded into M as the
    lookups do. A '|family' bucket whose winner scores under :data:`FAMILY_MIN_SCORE` is left out.

    Taking the single fastest row instead let one shape decide for its whole bucket: at 1024^3 (host
    bound, every candidate within 5%) 256x128x64 won by 0.1 TFLOP/s and then ran 1000^3 fp16 at 9.7
    against 12.9 for the runner-up (H100 benchmark runner, 2026-11-21)."""
    speed: dict[tuple[str, str], dict[str, dict[str, float]]] = {}  # (group, bucket) -> shape -> cfg -> tflops
    for r in rows:
        if r.get("status") != "ok":
            continue
        fam = r.get("family") == "families"
        group = f"{r['arch']}|{r['dtype']}|{r['layout']}" + (PIPE if r.get("family") == "pipelined" else
                                                             FAMILY if fam else "")
        batch = r.get("batch") or 1
        b = ",".join(map(str, (family_bucket if fam else bucket)(r["M"], r["N"], r["K"], batch)))
        per_cfg = speed.setdefault((group, b), {}).setdefault(f"{batch}x{r['M']}x{r['N']}x{r['K']}", {})
        per_cfg[r["config"]] = max(r["tflops"], per_cfg.get(r["config"], 0.0))
    out: dict[str, dict[str, str]] = {}
    for (group, b), shapes in speed.items():
        configs = sorted({c for per_cfg in shapes.values() for c in per_cfg})
        score = {c: sum(per_cfg.get(c, 0.0) / max(per_cfg.values()) for per_cfg in shapes.values()) / len(shapes)
                 for c in configs}
        best = max(configs, key=lambda c: (score[c], c))
        if group.endswith(FAMILY) and score[best] < FAMILY_MIN_SCORE:
            continue  # its shapes disagree: no one family serves them all, the planner's rules decide
        out.setdefault(group, {})[b] = best
    return out


