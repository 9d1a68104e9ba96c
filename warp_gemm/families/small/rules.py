"""Small family: when the planner takes it."""

from __future__ import annotations

from dataclasses import replace

from ..pipelined.rules import tiny_takes
from .kernel import choose_spec


def plan(ctx):
    """Batched products (not tf32) whose outputs fit the family's tiles, unless the pipelined family's 32x32
    tiles take them (``pipelined.rules.tiny_takes``)."""
    p, b = ctx.p, ctx.base
    if p.batch <= 1 or ctx.tf32 or tiny_takes(ctx):
        return None
    spec = choose_spec(ctx.dev, p.in_dtype, ctx.la, ctx.lb, b.M, b.N, p.K, p.batch, p.out_dtype, ctx.epi)
    return None if spec is None else replace(b, family="small", family_spec=spec, c_into_d=ctx.c_into_d)
