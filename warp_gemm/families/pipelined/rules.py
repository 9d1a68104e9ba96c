"""Pipelined family: when the planner takes it and with which configuration."""

from __future__ import annotations

import functools
from dataclasses import replace

from ... import _compat
from ...config import configs as _config
from ...config import tables
from ...config.configs import PipeConfig
from ...core.options import options
from .launch import applies, has_native_tile_args
from .spec import (
    DMMA_DEFAULT_K,
    PAD_AB,
    PAD_C,
    SIMT_ROWS,
    SIMT_TILE,
    SMEM_LIMIT,
    SWIZZLE_COLS,
    TINY_MIN_BATCH,
    default_spec,
    smem_bytes,
    tiny_batched,
    unfit,
)


def choose_pipe_spec(dev, in_dtype: str, out_dtype: str, tf32: bool, layout: str, epilogue: str, M: int, N: int,
                     K: int, batch: int, activation: str | None = None, forced: PipeConfig | None = None):
    """The pipelined family's kernel for one problem: ``default_spec`` (the measured H100 choices),
    with a configuration's fields applied over it (:func:`pipe_spec`): ``forced`` (``Options.pipe_config``:
    raises ValueError where its kernel does not fit), else on CUDA the tuned winner of the problem's bucket
    (``tables.lookup_pipe``), kept only where its kernel fits (else the default stands). Both lookups are
    memoized, and a repeated call does not plan at all (core/execute.py's call plans)."""
    spec = default_spec(in_dtype, out_dtype, tf32=tf32, layout=layout, epilogue=epilogue, chunk=16,
                                  device_is_cpu=dev.is_cpu, M=M, N=N, batch=batch, K=K,
                                  sm_count=_compat.sm_count(dev) if not dev.is_cpu else 132, activation=activation)
    if forced is not None:
        tuned = pipe_spec(spec, forced, dev.is_cpu)
        if tuned is None:
            raise ValueError(f"pipe_config {forced}: {unfit(_with_pipe_config(spec, forced, dev.is_cpu))} "
                             f"({in_dtype}{' tf32' if tf32 else ''}, layout {layout})")
        return tuned
    if not dev.is_cpu:
        hit = tables.lookup_pipe(dev, in_dtype, layout, M, N, K, batch, tf32)
        if hit is not None:
            return pipe_spec(spec, hit, False) or spec
    return spec


def _with_pipe_config(spec, cfg: PipeConfig, device_is_cpu: bool):
    fields = cfg.fields()
    # float64 mma.sync over a default of swizzled stages (the 4096^3-class one): the configuration keeps them where
    # its tile has whole 16-element rows and no persistent loop; else padded rows (PAD_AB), as every other snippet's
    sw = bool(cfg.mma and spec.swizzle and not cfg.persistent
              and all(x % SWIZZLE_COLS == 0 for x in (cfg.tm, cfg.tn, cfg.tk)))
    fields.update(swizzle=sw)
    # float64 mma.sync: the default's sm_90 MMA where the K tile holds two or more of them and there is no persistent
    # loop (the default's interleaved K steps), else m16n8k8 (DMMA_DEFAULT_K) where it holds whole ones, else m8n8k4
    # pairs; others: none
    f64mma = bool(cfg.mma and spec.in_dtype == "float64")
    mk = spec.mma_k if f64mma and spec.mma_k and not cfg.persistent and cfg.tk % (2 * spec.mma_k) == 0 else \
        DMMA_DEFAULT_K if f64mma and cfg.tk % DMMA_DEFAULT_K == 0 else 0
    fields.update(mma_k=mk)
    # the default's interleaved K steps where the configuration's kernel takes them (spec.interleave: SIMT or float64
    # mma.sync, not persistent, two steps per K tile); its edge copies for the SIMT and mma.sync kernels
    step = 1 if cfg.simt else max(4, mk)
    il = spec.interleave and not cfg.persistent and (cfg.simt or f64mma) and cfg.tk // step >= 2
    fields.update(interleave=il, edge_copy=spec.edge_copy and bool(cfg.simt or cfg.mma))
    # SIMT: the rows of outputs per thread that the configuration's block takes (tm * tn / block_dim / SIMT_TILE; a
    # count the kernel does not take stays the 8 rows, which the family's check then refuses)
    rows = cfg.tm * cfg.tn // max(1, cfg.block_dim * SIMT_TILE)
    fields.update(simt_rows=rows if cfg.simt and rows in SIMT_ROWS else SIMT_TILE)
    if cfg.simt or cfg.mma:  # snippet products: padded A/B rows (bank-conflict-free), the accumulator in registers
        fields.update(pad_ab=0 if sw else PAD_AB.get(spec.in_dtype, 0), pad_c=0)
    if cfg.wgmma:  # unpadded core-matrix stages, the accumulator in registers
        fields.update(pad_ab=0, pad_c=0)
    if not (cfg.simt or cfg.mma or cfg.wgmma) and (spec.simt or spec.mma or spec.wgmma) and not device_is_cpu:
        # a tile_matmul configuration over a snippet default: tile_matmul's paddings (shared accumulator)
        fields.update(pad_ab=PAD_AB[spec.in_dtype], pad_c=PAD_C[spec.acc_dtype])
        if spec.in_dtype == "float32" and not spec.tf32:  # exact fp32 through tile_matmul: dense, register acc
            fields.update(pad_ab=0, pad_c=0)
    if device_is_cpu:  # one thread per block on the CPU (default_spec's CPU spec); no launch bound
        fields.update(block_dim=spec.block_dim, min_blocks=0)
        # persistent tile_matmul blocks re-zero a shared accumulator: give it one (simt/mma: registers)
        if cfg.persistent and not spec.pad_c and not (cfg.simt or cfg.mma):
            fields.update(pad_c=PAD_C[spec.acc_dtype])
    return replace(spec, **fields)


@functools.lru_cache(maxsize=1024)
def pipe_spec(spec, cfg: PipeConfig, device_is_cpu: bool = False):
    """``spec`` (a ``pipelined.PipeSpec``) with ``cfg``'s tile shape, stages, block size and blocks per SM
    (dtypes, layouts, epilogue, paddings and chunk kept), or None where that kernel does not fit: more
    shared memory than ``SMEM_LIMIT`` or a spec the family refuses (``unfit``). On the
    CPU the block stays ``spec``'s (one thread) and there is no launch bound."""
    out = _with_pipe_config(spec, cfg, device_is_cpu)
    return None if unfit(out) else out


def candidate_pipe_configs(dtype: str, tf32: bool = False) -> list[PipeConfig]:
    """The pipelined family's tuner candidates for ``dtype`` (``config.configs.PIPE_CANDIDATES``: 8-17
    around the measured bests) whose CUDA kernel fits in every layout: shared memory within
    ``SMEM_LIMIT`` with the dtype's default paddings, and the family's checks. Exact float32: the
    SIMT kernel's (the planner's choice for its large problems on CUDA)."""
    out = []
    for cfg in _config.pipe_candidate_list(dtype, tf32):
        if all(pipe_spec(default_spec(dtype, tf32=tf32, layout=lay), cfg) is not None
               for lay in ("NN", "NT", "TN", "TT")):
            out.append(cfg)
    return out


#: Output tiles of 128x128 from which the pipelined family (its small-problem configuration where 128x64 tiles fit
#: in one wave) is chosen over the tiled family's smaller tiles and split-K. fp16 1000^3 (64 tiles): 68.6 TFLOP/s
#: pipelined against 47 tiled; 127x4099x1031 (33 tiles, odd K) ran 4.2 TFLOP/s on the tiled family's element-wise
#: loads. With the 64x32 tiles for grids under half the SMs, 16-bit inputs take the pipelined family from 4 output
#: tiles (256^2): fp16 256^3 8.2 us against 9.7, 384^3 9.5 against 12.5, 500^3 17.5 against 34.8 (staging
#: included), 512^3 10.9 against 18.3 (H100, graph replay). Other dtypes keep 24 (unmeasured below it).
PIPELINED_MIN_TILES = {"float16": 4, "bfloat16": 4, "other": 24}


#: 16-bit products of 1-3 output tiles whose K is at most this take the pipelined family too (its 64x32
#: small-grid tiles): 1.6-2.9x faster than the tiled family, e.g. fp16 64^3 20.7 -> 7.8 us, 128^3 17.5 -> 7.1,
#: 100x200x300 36.3 -> 12.6, 64x64x1024 36.7 -> 12.5 (cuBLAS 6.1 / 5.7 / 8.2 / 7.6); at 48x80x4000 the tiled
#: family's split-K stays ahead (38.6 against 42.3 us). H100, runner (benchmarks/results/h100-small/).
PIPELINED_FEW_TILES_MAX_K = 2048


def pipelined_min_tiles(dtype: str, K: int, snippet: bool = False) -> int:
    """The fewest 128x128 output tiles for which the planner's rules take the pipelined family (unforced): one where K
    is at most PIPELINED_FEW_TILES_MAX_K for 16-bit inputs and where ``snippet`` (on CUDA with
    ``Options.pipe_snippets``: tf32 on the mma.sync kernel, exact float32 on SIMT, float64 on DMMA). Below 24 tiles
    the tiled family's kernels of those dtypes are tile_matmul ones (21-25 s cold compile, H100) where the snippet
    kernels compile in seconds; the 16-bit K limit is borrowed, not measured for them: grids of a few tiles with a
    longer K keep the tiled family's split-K."""
    if K <= PIPELINED_FEW_TILES_MAX_K and (snippet or dtype in ("float16", "bfloat16")):
        return 1
    return PIPELINED_MIN_TILES.get(dtype, PIPELINED_MIN_TILES["other"])






def tiny_takes(ctx) -> bool:
    """Batched 16-bit products of 17-32 output sides with 16-byte-aligned rows: the 32x32 tiles here beat the
    small family's (``tiny_batched``; with tile_matmul's 32x32 kernel, 4096 x 32^3 20.2 us cold L2 against 27.2 on
    MathDx, H100; the mma.sync tiles that the snippets now put there are not timed)."""
    from ...core.operands import _max_chunk

    p, b = ctx.p, ctx.base
    return (ctx.want is None and not ctx.dev.is_cpu and tiny_batched(p.in_dtype, b.M, b.N, p.K, p.batch)
            and min(_max_chunk(b.A), _max_chunk(b.B)) >= 16 and applies(ctx.dev, p.in_dtype, False, 16, ctx.la + ctx.lb))


def plan(ctx):
    """The pipelined family where its copies can be asynchronous and there are enough 128x128 output tiles
    (:func:`pipelined_min_tiles`; exact float32 and float64 on CUDA: from one tile, on the SIMT and DMMA kernels);
    exact float32 only on CUDA's SIMT kernel. Operands
    whose rows are not 16-byte aligned are first staged into aligned copies: fp16 4095^3 ran at 138 TFLOP/s
    staged against 18 with 2-byte synchronous copies, tf32 77 against 46 with 4-byte cp.async (H100)."""
    from ...core.operands import _max_chunk

    p, base, opts, dev, want, tf32 = ctx.p, ctx.base, ctx.opts, ctx.dev, ctx.want, ctx.tf32
    M, N, K = base.M, base.N, p.K
    tiles = p.batch * -(-M // 128) * -(-N // 128)
    exact32 = p.in_dtype == "float32" and not tf32
    # the snippet products as default_spec sees them (warp_gemm.options in force): exact float32 on the SIMT kernel,
    # float64 on the DMMA kernel, every problem size (their small-grid tiles: default_spec)
    snippet = not dev.is_cpu and options().pipe_snippets and base.activation is None
    simt32 = exact32 and snippet
    if exact32 and want is None and not simt32:
        # exact float32 through tile_matmul (MathDx SIMT) is no faster here than in the tiled family (32 against
        # 32.5 TFLOP/s)
        return None
    stage = (_max_chunk(base.A) < 16, _max_chunk(base.B) < 16)
    simt = opts.pipe_config.simt if opts.pipe_config is not None else simt32
    if not applies(dev, p.in_dtype, tf32, 16, ctx.la + ctx.lb, simt):
        return None
    if want is None and tiles < pipelined_min_tiles(p.in_dtype, K,
                                                    snippet and (tf32 or simt32 or p.in_dtype == "float64")):
        return None
    spec = choose_pipe_spec(dev, p.in_dtype, p.out_dtype, tf32, ctx.la + ctx.lb, ctx.epi, M, N, K, p.batch,
                            base.activation, opts.pipe_config)
    if smem_bytes(spec) > SMEM_LIMIT:
        return None
    return replace(base, family="pipelined", family_spec=spec, c_into_d=ctx.c_into_d, stage=stage,
                   fused_activation=base.activation is not None)


def precompile_jobs(dtypes: list[str], layouts: tuple[str, ...] = ("NN",),
                   epilogues: tuple[str, ...] = ("scale",)) -> list[tuple]:
    """``("pipelined", PipeSpec)`` for the pipelined family's kernels the planner picks on CUDA: each
    dtype's large- and small-problem configuration (``spec.default_spec``, the H100 table)
    and every configuration of the shipped tuning table's ``|pipe`` groups (applied over the default as
    the planner does: ``families.pipelined.rules.pipe_spec``; other layouts borrow NN's, bfloat16 float16's), per layout
    and epilogue, output in the input dtype. Exact float32: its SIMT kernels (large, small-grid stream-K, quarter-grid
    32x64 tiles); float64: its DMMA kernels (large, small, quarter). Nothing where this Warp cannot run the family."""
    if not has_native_tile_args():
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
                # configuration where 96-row tiles save a wave (tile_matmul without the snippets); 512: grids
                # under half the SMs; 32 with K 32 / 128: the 32x32 tiles (32- and 64-deep K) of batched 16-bit
                # products of sides 17-32 (tiny_batched) and of tf32 outputs up to 32x32; 8192 with K 256: 16-bit
                # 128x128 tiles with few K steps (pipelined.SHORT_K_STEPS)
                # exact float32 and float64 also at sides 8 less (1000^3-class): their kernels with edge copies
                # (spec.edge_copy, where tiles cross an edge); exact float32 at 8192^3: NN's 128x256 tiles
                for side, k in ((8192, None), (8192, 256), (1024, None), (1536, None), (512, None), (32, 32),
                                (32, 128), (8184, 8184), (1016, 1016), (504, 504), (8192, 8192)):
                    if side in (8184, 1016, 504) and not (exact32 or base == "float64"):
                        continue
                    if (side, k) == (8192, 8192) and not exact32:
                        continue
                    if exact32 and (side, k) not in ((8192, None), (1024, None), (512, None), (8184, 8184),
                                                     (1016, 1016), (504, 504), (8192, 8192)):
                        continue
                    if side == 32 and not (tiny_batched(base, side, side, k, TINY_MIN_BATCH) or tf32):
                        continue
                    spec = default_spec(base, base, tf32=tf32, layout=lay, epilogue=epi, M=side, N=side, K=k)
                    if any(j[1] == spec for j in jobs):
                        continue
                    if smem_bytes(spec) <= SMEM_LIMIT:
                        jobs.append(("pipelined", spec))
                base_spec = default_spec(base, base, tf32=tf32, layout=lay, epilogue=epi)
                for cfg in tables.shipped_pipe_configs(dt):
                    spec = pipe_spec(base_spec, cfg)
                    if spec is not None and not any(j[1] == spec for j in jobs):
                        jobs.append(("pipelined", spec))
    return jobs


