"""Skinny family: when the planner takes it."""

from __future__ import annotations

from dataclasses import replace

from .kernel import choose_spec, workspace_shape


def plan(ctx):
    """One output side of at most 16 (not tf32), where the split-pipe plan did not take it."""
    p, b = ctx.p, ctx.base
    if ctx.tf32:
        return None
    spec = choose_spec(ctx.dev, p.in_dtype, ctx.la, ctx.lb, b.M, b.N, p.K, p.batch, p.out_dtype, ctx.epi)
    if spec is None:
        return None
    return replace(b, family="skinny", family_spec=spec, c_into_d=ctx.c_into_d,
                   workspace=workspace_shape(spec, b.M, b.N, p.K, p.batch))
