"""GEMV family: when the planner takes it."""

from __future__ import annotations

from dataclasses import replace

from .spec import (
    BANDS_BLOCK,
    BANDS_UNROLL,
    BLOCK_DIM,
    COLSUM_BLOCK,
    COLSUM_BLOCK_ONE_WAVE,
    KINDS,
    GemvSpec,
    bands_choice,
    choose_spec,
    has_native_returns,
    workspace_shape,
)


def plan(ctx):
    """A smaller output side of exactly 1 (tf32 too: the exact float32 GEMV loses nothing). The product is
    bandwidth-bound: 16-byte loads and warp shuffles, no tiles, where the skinny family's 1x128 tiles took 31 us
    for fp16 1x4096x4096 (cold L2, H100; cuBLAS 20.7)."""
    p, b = ctx.p, ctx.base
    if min(b.M, b.N) != 1:
        return None
    spec = choose_spec(ctx.dev, p.in_dtype, ctx.la, ctx.lb, b.M, b.N, p.K, p.batch, p.out_dtype, ctx.epi)
    if spec is None:
        return None
    return replace(b, family="gemv", family_spec=spec, c_into_d=ctx.c_into_d,
                   workspace=workspace_shape(spec, b.M, b.N, p.K, p.batch))


def precompile_jobs(dtypes: list[str], epilogues: tuple[str, ...] = ("scale",)) -> list[tuple]:
    """``("gemv", GemvSpec, partial)`` for the GEMV family's CUDA kernels (M == 1 or N == 1): each
    dtype (tf32: the exact float32 kernels, which the planner takes for tf32 calls too), both kinds
    (rowdot and colsum cover every layout; bands is colsum for large matrices), each epilogue, whole-K and
    K-split (the split one with skinny's finishing pass; bands with its own, none where fused: ``bands_choice``),
    output in the input dtype; none where this Warp cannot build the family."""
    if not has_native_returns():
        return []
    jobs = []
    for dt in dtypes:
        base = "float32" if dt == "tf32" else dt
        for kind in KINDS:
            for epi in epilogues:
                if kind == "bands":  # always through its workspace; fused for one matrix, two kernels for batches
                    for fused, groups in dict.fromkeys(bands_choice(b, 4096, 132) for b in (1, 2)):
                        jobs.append(("gemv", GemvSpec(base, base, kind, epi, block_dim=BANDS_BLOCK,
                                                           unroll=BANDS_UNROLL, fused=fused, band_groups=groups),
                                     True))
                    continue
                for partial in (False, True):
                    # the block sizes choose_spec takes (colsum: two, the split kernel only at the smaller)
                    blocks = [BLOCK_DIM] if kind == "rowdot" else [COLSUM_BLOCK] + (
                        [] if partial else [COLSUM_BLOCK_ONE_WAVE])
                    jobs += [("gemv", GemvSpec(base, base, kind, epi, block_dim=bd), partial) for bd in blocks]
    return jobs


