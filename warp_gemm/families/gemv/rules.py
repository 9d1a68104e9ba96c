"""GEMV family: when the planner takes it."""

from __future__ import annotations

from dataclasses import replace

from .spec import choose_spec, workspace_shape


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
