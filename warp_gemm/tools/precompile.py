"""Build warp_gemm's kernels ahead of time into Warp's kernel cache.

``warp-gemm precompile --arch 80,90 --dtype fp16,bf16,fp32`` compiles the shipped default table's
kernels (plus the heuristic's) so a user's first call loads instead of compiling (a cold MathDx GEMM
compile costs 47-85 s on a 16-core H100 host; a cached load ~0.2 s). Where the release has
``wp.compile_aot_module`` (1.9+) this runs offline, with no GPU; elsewhere it loads each module on the
current CUDA device.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import warp as wp

from warp_gemm import _compat
from warp_gemm.config.configs import Config
from warp_gemm.core import launches
from warp_gemm.families import tiled
from warp_gemm.config import choice
from warp_gemm.config import configs as _config
from warp_gemm.tools import dtypes as _dtypes

def canon_dtype(name: str) -> str:
    """The canonical dtype name of one command-line spelling (:mod:`warp_gemm.tools.dtypes`)."""
    return _dtypes.canon(name)


def jobs_for(dtypes: list[str], layouts: tuple[str, ...] = ("NN",), epilogues: tuple[str, ...] = ("scale",),
             configs: list[_config.Config] | None = None, k_tail: bool = False) -> list[tuple]:
    """(config, dtype, layout, epilogue, tf32, k_tail) for every kernel to build; ``k_tail``: also the
    variants for K not a multiple of the tile depth (KernelSpec.k_tail)."""
    jobs = []
    for dt in dtypes:
        tf32 = dt == "tf32"
        base = "float32" if tf32 else dt
        cfgs = configs or choice.reachable_configs(False, base)
        for cfg in cfgs:
            for lay in layouts:
                # A split-K configuration may launch either kernel: one split, or several.
                for epi in epilogues + (("splitk",) if cfg.split_k != 1 else ()):
                    for kt in (False, True) if k_tail else (False,):
                        jobs.append((str(cfg), base, lay, epi, tf32, kt))
    return jobs








def job_label(job: tuple) -> str:
    if job[0] == "pipelined":
        return job[1].key
    if job[0] in ("gemv", "skinny"):
        return job[1].kernel_key + ("_part" if job[2] else "")
    tf = " tf32" if job[4] else ""
    kt = " k-tail" if len(job) > 5 and job[5] else ""
    return f"tiled {job[0]} {job[1]}{tf} {job[2]} {job[3]}{kt}"








def build_one(job: tuple, archs: list[int] | None, module_dir: str | None = None) -> tuple[tuple, float, str]:
    """Compile one job's kernels (in this process): a registered family's job (its name first; the family says
    which kernels and block sizes) or a tiled family's configuration tuple. Returns (job, seconds, error or "")."""
    from warp_gemm.families import registry
    from warp_gemm.families.tiled import get_kernel, spec_for

    fam = registry.find(job[0])
    if fam is not None and fam.job_kernels is not None:
        _compat.init()
        t = time.perf_counter()
        try:
            for kernel, block in fam.job_kernels(job):
                _compile(kernel, block, archs, module_dir)
            return job, time.perf_counter() - t, ""
        except Exception as e:  # reported per job
            return job, time.perf_counter() - t, f"{type(e).__name__}: {e}"
    cfg_s, dtype, layout, epilogue, tf32, *rest = job
    k_tail = bool(rest and rest[0])
    cfg = _config.Config.parse(cfg_s)
    _compat.init()
    t = time.perf_counter()
    try:
        if dtype == "bfloat16":
            _compat.bf16_dtype()
        spec = spec_for(cfg, dtype, layout, epilogue, tf32, k_tail=k_tail)
        if k_tail and not spec.k_tail:  # no padded tiles here: the plain kernel serves every K
            return job, 0.0, ""
        _compile(get_kernel(spec), cfg.block_dim, archs, module_dir)
        return job, time.perf_counter() - t, ""
    except Exception as e:  # reported per job; one failure must not hide the others
        return job, time.perf_counter() - t, f"{type(e).__name__}: {e}"


def _compile(kernel, block_dim: int, archs: list[int] | None, module_dir: str | None) -> None:
    """Build one kernel's module for ``block_dim``: offline for ``archs`` where Warp can, else on the CUDA device."""
    kernel.module.options["block_dim"] = block_dim
    if archs and _compat.HAS_COMPILE_AOT:
        wp.compile_aot_module(kernel.module, arch=archs, module_dir=module_dir)
    else:
        kernel.module.load(wp.get_device("cuda"), block_dim)


def precompile(dtypes: list[str], archs: list[int] | None, workers: int | None = None,
               layouts: tuple[str, ...] = ("NN",), epilogues: tuple[str, ...] = ("scale",),
               module_dir: str | None = None, configs=None, progress: bool = True, k_tail: bool = False,
               families: tuple[str, ...] = ("tiled", "pipelined", "gemv", "skinny")) -> list[tuple]:
    """Compile every job of ``families`` in parallel processes; returns [(job, seconds, error)]."""
    dts = [canon_dtype(d) for d in dtypes]
    jobs = jobs_for(dts, layouts, epilogues, configs, k_tail) if "tiled" in families else []
    if configs is None:
        from warp_gemm.families import registry

        for fam in registry.REGISTRY:
            if fam.jobs is not None and fam.name in families:
                jobs += fam.jobs(dts, layouts, epilogues)
    return build_jobs(jobs, archs, workers, module_dir, progress)


def build_jobs(jobs: list[tuple], archs: list[int] | None, workers: int | None = None,
               module_dir: str | None = None, progress: bool = True) -> list[tuple]:
    """Compile the :func:`jobs_for` tuples (duplicates once) in parallel processes."""
    import multiprocessing as mp

    jobs = list(dict.fromkeys(jobs))
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    results = []
    bar = _progress(len(jobs), "compiling", progress)
    if workers <= 1:
        for j in jobs:
            results.append(build_one(j, archs, module_dir))
            bar(results[-1])
    else:
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            futs = [ex.submit(build_one, j, archs, module_dir) for j in jobs]
            for f in as_completed(futs):
                results.append(f.result())
                bar(results[-1])
    return results


def _progress(total: int, what: str, enabled: bool):
    try:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=what, disable=not enabled, file=sys.stderr)

        def step(res):
            bar.update(1)
            bar.set_postfix_str(f"{job_label(res[0])} {res[1]:.0f}s{' ERR' if res[2] else ''}")
            if bar.n == total:
                bar.close()

        return step
    except ImportError:
        done = [0]

        def step(res):
            done[0] += 1
            if enabled:
                print(f"[{done[0]}/{total}] {what} {job_label(res[0])} {res[1]:.1f}s {res[2]}", file=sys.stderr)

        return step


def precompile_config(config: Config | str, dtype: str, device: str = "cuda", layout: str = "NN",
                      epilogue: str = "scale", tf32: bool = False) -> float:
    """Build (or load from Warp's kernel cache) one GEMM kernel; returns the seconds it took."""
    import time

    _compat.init()
    cfg = Config.parse(config) if isinstance(config, str) else config
    kernel = tiled.get_kernel(tiled.spec_for(cfg, dtype, layout, epilogue, tf32,
                                          device_is_cpu=wp.get_device(device).is_cpu))
    dev = wp.get_device(device)
    t = time.perf_counter()
    if dev.is_cpu:
        kernel.module.load(dev)
    elif _compat.HAS_LOAD_BLOCK_DIM:
        # (the same one-thread-at-a-time first load as a launch; see core.launches.first_load)
        launches.first_load(kernel, dev, cfg.block_dim, lambda: kernel.module.load(dev, block_dim=cfg.block_dim))
    else:
        kernel.module.load(dev)
    return time.perf_counter() - t
