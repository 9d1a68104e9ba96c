"""Build warp_gemm kernels in parallel processes so that a later timing run finds them in Warp's kernel cache.

A cold compile of one configuration takes about a minute and uses one core, so a --sweep over dozens of
configurations would spend most of its time compiling, one kernel after another. Each worker here is a
fresh spawned process (no CUDA context survives a fork) that imports warp_gemm and calls
``warp_gemm.precompile_config(config, dtype, device, layout=..., epilogue=..., tf32=...)``; Warp writes
each module to its kernel cache, where the timing process then loads it (~0.2 s instead of ~60 s).

    python -m warp_gemm.tools.bench.compile_parallel --device cuda:0 --dtype fp16,bf16,tf32,fp32 --workers 16
    python -m warp_gemm.tools.bench.compile_parallel --dtype fp16 --configs 0,3 --layouts NN,NT

``warp-gemm bench --sweep --precompile N`` calls :func:`precompile_sweep` before timing.
"""

from __future__ import annotations

import argparse
import inspect
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from warp_gemm.tools import dtypes as _dtypes

# tf32 is float32 data with a TF32 product: its own kernel (precompile_config's tf32=True).


@dataclass(frozen=True)
class Job:
    config: Any  # a warp_gemm.Config (a frozen dataclass, so it pickles) or its str form
    dtype: str  # float16 | bfloat16 | float32 | tf32 | float64
    layout: str = "NN"  # A and B as stored (N) or transposed (T)


@dataclass
class BuildResult:
    config: str
    dtype: str
    layout: str
    seconds: float
    error: str | None = None


def _kwargs_accepted(fn, wanted: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``fn`` takes (the lead's precompile_config may grow or lose some)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return wanted
    return {k: v for k, v in wanted.items() if k in params}


def epilogues_for(config) -> tuple[str, ...]:
    """A split-K configuration (split_k != 1) may launch either the plain kernel or the split-K one, as
    warp_gemm.tools.precompile.jobs_for also builds."""
    return ("scale", "splitk") if getattr(config, "split_k", 1) != 1 else ("scale",)


def build(job: Job, device: str) -> BuildResult:
    """Worker side: compile (or load) one configuration's kernels, which fills Warp's kernel cache."""
    t0 = time.perf_counter()
    try:
        import warp as wp

        if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 replaced config.quiet by a log level
            wp.config.log_level = wp.LOG_WARNING
        else:
            wp.config.quiet = True
        import warp_gemm

        config = warp_gemm.Config.parse(job.config) if isinstance(job.config, str) else job.config
        tf32 = job.dtype == "tf32"
        base = "float32" if tf32 else job.dtype
        for epilogue in epilogues_for(config):
            kw = _kwargs_accepted(warp_gemm.precompile_config,
                                  {"layout": job.layout, "epilogue": epilogue, "tf32": tf32})
            warp_gemm.precompile_config(config, base, device, **kw)
        return BuildResult(str(config), job.dtype, job.layout, time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - report, so the other builds go on
        return BuildResult(str(job.config), job.dtype, job.layout, time.perf_counter() - t0,
                           f"{type(exc).__name__}: {exc}")


def precompile(jobs: list[Job], device: str, workers: int | None = None,
               verbose: bool = True) -> list[BuildResult]:
    """Build every job in ``workers`` spawned processes (default: one per core, at most one per job)."""
    if not jobs:
        return []
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs)))
    t0 = time.perf_counter()
    results: list[BuildResult] = []
    # spawn, not fork: a forked child would inherit the parent's CUDA state, which CUDA does not support.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(build, job, device) for job in jobs]
        for i, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            results.append(r)
            if verbose:
                status = "ok" if r.error is None else f"FAILED {r.error}"
                print(f"# [{i}/{len(jobs)}] {r.config} {r.dtype} {r.layout}: {r.seconds:.1f} s {status}",
                      flush=True)
    if verbose:
        failed = sum(r.error is not None for r in results)
        print(f"# precompiled {len(jobs) - failed}/{len(jobs)} in {time.perf_counter() - t0:.1f} s "
              f"with {workers} processes", flush=True)
    return results


def candidate_jobs(device: str, dtypes: list[str], layouts: list[str] = ("NN",),
                   indices: list[int] | None = None) -> list[Job]:
    """A job per dtype, layout and warp_gemm.candidate_configs(device, dtype) entry (or those at
    ``indices``)."""
    import warp_gemm

    jobs = []
    for dtype in dict.fromkeys(dtypes):
        configs = warp_gemm.candidate_configs(device, "float32" if dtype == "tf32" else dtype)
        picked = configs if indices is None else [configs[i] for i in indices if i < len(configs)]
        jobs.extend(Job(cfg, dtype, layout) for cfg in picked for layout in layouts)
    return jobs


def precompile_sweep(device: str, dtypes: list[str], workers: int,
                     layouts: list[str] = ("NN",)) -> list[BuildResult]:
    """What ``run.py --sweep --precompile N`` runs before timing: every candidate of every dtype."""
    return precompile(candidate_jobs(device, dtypes, layouts), device, workers)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--dtype", default="fp16,bf16,tf32,fp32", help=f"comma-separated: {_dtypes.SPELLINGS}")
    p.add_argument("--layouts", default="NN", help="comma-separated from NN,NT,TN,TT")
    p.add_argument("--configs", help="comma-separated indices into candidate_configs (default: all)")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    args = p.parse_args(argv)
    try:
        dtypes = _dtypes.parse_list(args.dtype)
    except ValueError as exc:
        p.error(str(exc))
    indices = [int(i) for i in args.configs.split(",")] if args.configs else None
    layouts = [s.strip().upper() for s in args.layouts.split(",")]
    results = precompile(candidate_jobs(args.device, dtypes, layouts, indices), args.device, args.workers)
    return 0 if all(r.error is None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
