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


def pipelined_jobs(dtypes: list[str], layouts: tuple[str, ...] = ("NN",),
                   epilogues: tuple[str, ...] = ("scale",)) -> list[tuple]:
    """``("pipelined", PipeSpec)`` for the pipelined family's kernels the planner picks on CUDA: each
    dtype's large- and small-problem configuration (``kernels.pipelined.default_spec``, the H100 table)
    and every configuration of the shipped tuning table's ``|pipe`` groups (applied over the default as
    the planner does: ``families.pipelined.rules.pipe_spec``; other layouts borrow NN's, bfloat16 float16's), per layout
    and epilogue, output in the input dtype. Exact float32: only its large-problem kernel (the SIMT kernel on CUDA
    since round 12; smaller problems stay on the tiled family). Nothing where this Warp cannot run the family."""
    from warp_gemm.config import tables
    from warp_gemm.families.pipelined.rules import pipe_spec
    from warp_gemm.families import pipelined

    if not pipelined.has_native_tile_args():
        return []
    jobs = []
    for dt in dtypes:
        tf32 = dt == "tf32"
        base = "float32" if tf32 else dt
        if tf32 and not _compat.HAS_TF32:
            continue
        exact32 = base == "float32" and not tf32
        for lay in layouts:
            for epi in epilogues:
                # 8192: the large configuration; 1024: the small one (64 output tiles of 128x128); 1536: the
                # 96-row tiles of 16-bit inputs where 128-row tiles waste a wave; 512: their 64x32 tiles for
                # grids under half the SMs; 32 with K 32 / 128: the 32x32 tiles (32- and 64-deep K) of batched
                # 16-bit products of sides 17-32 (pipelined.tiny_batched); 8192 with K 256: 16-bit 128x128 tiles
                # with few K steps (256 threads, pipelined.SHORT_K_STEPS) (kernels/pipelined.py)
                for side, k in ((8192, None), (8192, 256), (1024, None), (1536, None), (512, None), (32, 32),
                                (32, 128)):
                    if exact32 and (side, k) != (8192, None):
                        continue
                    if side == 32 and not pipelined.tiny_batched(base, side, side, k, pipelined.TINY_MIN_BATCH):
                        continue
                    spec = pipelined.default_spec(base, base, tf32=tf32, layout=lay, epilogue=epi, M=side, N=side, K=k)
                    if any(j[1] == spec for j in jobs):
                        continue
                    if pipelined.smem_bytes(spec) <= pipelined.SMEM_LIMIT:
                        jobs.append(("pipelined", spec))
                base_spec = pipelined.default_spec(base, base, tf32=tf32, layout=lay, epilogue=epi)
                for cfg in tables.shipped_pipe_configs(dt):
                    spec = pipe_spec(base_spec, cfg)
                    if spec is not None and not any(j[1] == spec for j in jobs):
                        jobs.append(("pipelined", spec))
    return jobs


def gemv_jobs(dtypes: list[str], epilogues: tuple[str, ...] = ("scale",)) -> list[tuple]:
    """``("gemv", GemvSpec, partial)`` for the GEMV family's CUDA kernels (M == 1 or N == 1): each
    dtype (tf32: the exact float32 kernels, which the planner takes for tf32 calls too), both kinds
    (rowdot and colsum cover every layout; bands is colsum for large matrices), each epilogue, whole-K and
    K-split (the split one with skinny's finishing pass; bands with its own, none where fused: ``gemv.bands_choice``),
    output in the input dtype; none where this Warp cannot build the family."""
    from warp_gemm.families import gemv

    if not gemv.has_native_returns():
        return []
    jobs = []
    for dt in dtypes:
        base = "float32" if dt == "tf32" else dt
        for kind in gemv.KINDS:
            for epi in epilogues:
                if kind == "bands":  # always through its workspace; fused for one matrix, two kernels for batches
                    for fused, groups in dict.fromkeys(gemv.bands_choice(b, 4096, 132) for b in (1, 2)):
                        jobs.append(("gemv", gemv.GemvSpec(base, base, kind, epi, block_dim=gemv.BANDS_BLOCK,
                                                           unroll=gemv.BANDS_UNROLL, fused=fused, band_groups=groups),
                                     True))
                    continue
                for partial in (False, True):
                    # the block sizes choose_spec takes (colsum: two, the split kernel only at the smaller)
                    blocks = [gemv.BLOCK_DIM] if kind == "rowdot" else [gemv.COLSUM_BLOCK] + (
                        [] if partial else [gemv.COLSUM_BLOCK_ONE_WAVE])
                    jobs += [("gemv", gemv.GemvSpec(base, base, kind, epi, block_dim=bd), partial) for bd in blocks]
    return jobs


def skinny_jobs(dtypes: list[str], layouts: tuple[str, ...] = ("NN",),
                epilogues: tuple[str, ...] = ("scale",)) -> list[tuple]:
    """The skinny family's CUDA kernels, as the planner picks them: ``("skinny", SkinnySpec, partial)`` for
    small sides 2 and 4 (the family's own problems; side 1 is the GEMV family's, :func:`gemv_jobs`) and 8
    (the pipelined family's peeled edges of 5-8 rows or columns), M or N the small side, whole-K and
    K-split (the split one with its finishing pass);
    and ``("pipelined", PipeSpec)`` for the split-K plan of small M of 5..16 (``skinny.SPLIT_PIPE``'s tiles,
    partial products in the accumulator dtype; A in row-major storage only, as planned). Output in the
    input dtype; tf32 takes the exact float32 kernels (the family has no tf32 ones)."""
    import types

    from warp_gemm.families import pipelined, skinny
    from warp_gemm.families.common.kernels import acc_dtype_name

    cuda = types.SimpleNamespace(is_cpu=False, sm_count=132)
    jobs = []
    for dt in dtypes:
        base = "float32" if dt == "tf32" else dt
        for lay in layouts:
            for epi in epilogues:
                for side in (2, 4, 8):
                    for M, N in ((side, 4096), (4096, side)):
                        spec = skinny.choose_spec(cuda, base, lay[0], lay[1], M, N, 4096, 1, base, epi, max_side=8)
                        if spec is not None:
                            jobs += [("skinny", spec, partial) for partial in (False, True)]
                cfg = skinny.split_pipe_config(cuda, base, lay[0], lay[1], 16, 8192, 8192, 1, base, epi)
                if cfg is None or lay[0] != "N" or not pipelined.has_native_tile_args():
                    continue
                spec = pipelined.PipeSpec(in_dtype=base, out_dtype=acc_dtype_name(base), layout_a=lay[0],
                                          layout_b=lay[1], epilogue="scale", **cfg["pipe"])
                if pipelined.smem_bytes(spec) <= pipelined.SMEM_LIMIT and not pipelined.unfit(spec):
                    jobs.append(("pipelined", spec))
    return list(dict.fromkeys(jobs))


def job_label(job: tuple) -> str:
    if job[0] == "pipelined":
        return job[1].key
    if job[0] == "gemv":
        return job[1].kernel_key + ("_part" if job[2] else "")
    if job[0] == "skinny":
        return job[1].kernel_key + ("_part" if job[2] else "")
    tf = " tf32" if job[4] else ""
    kt = " k-tail" if len(job) > 5 and job[5] else ""
    return f"tiled {job[0]} {job[1]}{tf} {job[2]} {job[3]}{kt}"


def _build_pipelined(spec, archs, module_dir) -> None:
    from warp_gemm.families import pipelined

    if spec.in_dtype == "bfloat16":
        _compat.bf16_dtype()
    kernel = pipelined.get_kernel(spec)
    kernel.module.options["block_dim"] = spec.block_dim
    if archs and _compat.HAS_COMPILE_AOT:
        wp.compile_aot_module(kernel.module, arch=archs, module_dir=module_dir)
    else:
        kernel.module.load(wp.get_device("cuda"), spec.block_dim)


def _build_gemv(spec, partial: bool, archs, module_dir) -> None:
    from warp_gemm.families import gemv

    if spec.in_dtype == "bfloat16":
        _compat.bf16_dtype()
    for n, kernel in enumerate(gemv.kernels(spec, partial)):
        # plain kernels: the module is keyed by the launch's block size (the finishing pass: Warp's default)
        # (bands' finishing kernel: BANDS_FINISH_WARPS warps, the block size launch_args gives it)
        if spec.kind == "bands":
            kernel.module.options["block_dim"] = spec.block_dim if n == 0 else 32 * gemv.BANDS_FINISH_WARPS
        else:
            kernel.module.options["block_dim"] = spec.block_dim if n == 0 else 256
        if archs and _compat.HAS_COMPILE_AOT:
            wp.compile_aot_module(kernel.module, arch=archs, module_dir=module_dir)
        else:
            kernel.module.load(wp.get_device("cuda"), kernel.module.options["block_dim"])


def _build_skinny(spec, partial: bool, archs, module_dir) -> None:
    from warp_gemm.families import skinny

    if spec.in_dtype == "bfloat16":
        _compat.bf16_dtype()
    kernels = [(skinny.get_kernel(spec, partial), spec.block_dim)]
    if partial:  # the finishing pass: a plain kernel at Warp's default block size
        kernels.append((skinny.finish_kernel(spec.acc_dtype, spec.out_dtype), 256))
    for kernel, block in kernels:
        kernel.module.options["block_dim"] = block
        if archs and _compat.HAS_COMPILE_AOT:
            wp.compile_aot_module(kernel.module, arch=archs, module_dir=module_dir)
        else:
            kernel.module.load(wp.get_device("cuda"), block)


def build_one(job: tuple, archs: list[int] | None, module_dir: str | None = None) -> tuple[tuple, float, str]:
    """Compile one kernel (in this process). Returns (job, seconds, error or "")."""
    from warp_gemm.families.tiled import get_kernel, spec_for

    if job[0] in ("pipelined", "gemv", "skinny"):
        _compat.init()
        t = time.perf_counter()
        try:
            if job[0] == "gemv":
                _build_gemv(job[1], job[2], archs, module_dir)
            elif job[0] == "skinny":
                _build_skinny(job[1], job[2], archs, module_dir)
            else:
                _build_pipelined(job[1], archs, module_dir)
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
        kernel = get_kernel(spec)
        kernel.module.options["block_dim"] = cfg.block_dim
        if archs and _compat.HAS_COMPILE_AOT:
            import warp as wp

            wp.compile_aot_module(kernel.module, arch=archs, module_dir=module_dir)
        else:
            import warp as wp

            kernel.module.load(wp.get_device("cuda"), cfg.block_dim)
        return job, time.perf_counter() - t, ""
    except Exception as e:  # reported per job; one failure must not hide the others
        return job, time.perf_counter() - t, f"{type(e).__name__}: {e}"


def precompile(dtypes: list[str], archs: list[int] | None, workers: int | None = None,
               layouts: tuple[str, ...] = ("NN",), epilogues: tuple[str, ...] = ("scale",),
               module_dir: str | None = None, configs=None, progress: bool = True, k_tail: bool = False,
               families: tuple[str, ...] = ("tiled", "pipelined", "gemv", "skinny")) -> list[tuple]:
    """Compile every job of ``families`` in parallel processes; returns [(job, seconds, error)]."""
    dts = [canon_dtype(d) for d in dtypes]
    jobs = jobs_for(dts, layouts, epilogues, configs, k_tail) if "tiled" in families else []
    if "pipelined" in families and configs is None:
        jobs += pipelined_jobs(dts, layouts, epilogues)
    if "gemv" in families and configs is None:
        jobs += gemv_jobs(dts, epilogues)
    if "skinny" in families and configs is None:
        jobs += skinny_jobs(dts, layouts, epilogues)
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
    elif _accepts_block_dim(kernel.module.load):
        # (the same one-thread-at-a-time first load as a launch; see core.launches.first_load)
        launches.first_load(kernel, dev, cfg.block_dim, lambda: kernel.module.load(dev, block_dim=cfg.block_dim))
    else:
        kernel.module.load(dev)
    return time.perf_counter() - t


def _accepts_block_dim(fn) -> bool:
    import inspect

    return "block_dim" in inspect.signature(fn).parameters
