"""Split pipe: a small side of 5..16 as K slices through the pipelined kernel, then the skinny finishing pass."""

from __future__ import annotations

from dataclasses import replace

from ...core.operands import _max_chunk
from ...core.problem import Problem
from ..common.kernels import acc_dtype_name


def _plan_split_pipe(base, p: Problem, la: str, lb: str, epi: str, c_into_d: bool, want):
    """A small side of 5..16 (batch 1): the pipelined kernel over K slices as a batch (zero-copy strided
    views), partial products into the cached workspace, then skinny's finishing pass. 16x8192x8192 fp16
    on the H100: 74.5 us against 139.6 for the skinny family's MathDx tiles and 115 for the tiled
    family; 65.5 us with 4 slices instead of 8 (``skinny._SPLIT_BLOCKS``). Larger M through this plan (small
    grids, 128x64 tiles) measured slower than the pipelined family's 64x32 tiles."""
    import types

    from warp_gemm.families import pipelined, skinny

    dev = p.A.device
    rules_dev = types.SimpleNamespace(is_cpu=False) if dev.is_cpu and want == "splitpipe" else dev
    # Measured and checked on the H100 for a small M with A in row-major storage only: with A stored
    # transposed (layout T) the 16-row pipelined tiles gave wrong products on CUDA (rel. error 0.3,
    # tests/families/test_small_skinny.py::test_split_pipe_composition, xfail there) -- never planned.
    if la != "N" or base.M > base.N:
        return None
    cfg = skinny.split_pipe_config(rules_dev, p.in_dtype, la, lb, base.M, base.N, p.K, p.batch, p.out_dtype, epi)
    if cfg is None:
        return None
    chunk = min(_max_chunk(base.A), _max_chunk(base.B))
    if chunk < 16 or not pipelined.applies(dev, p.in_dtype, False, 16):
        return None
    pipe = dict(cfg["pipe"])
    if dev.is_cpu:
        pipe["block_dim"] = 1
    spec = pipelined.PipeSpec(in_dtype=p.in_dtype, out_dtype=acc_dtype_name(p.in_dtype), layout_a=la, layout_b=lb,
                              epilogue="scale", **pipe)
    if pipelined.smem_bytes(spec) > pipelined.SMEM_LIMIT:  # float64 with 128-deep K tiles: 304 KB
        return None
    s = cfg["splits"]
    return replace(base, family="splitpipe", family_spec=(spec, s), c_into_d=c_into_d,
                   workspace=skinny.split_pipe_workspace_shape(base.M, base.N, s, p.in_dtype))




def plan(ctx):
    """The split-pipe plan where it applies (not tf32)."""
    if ctx.tf32:
        return None
    return _plan_split_pipe(ctx.base, ctx.p, ctx.la, ctx.lb, ctx.epi, ctx.c_into_d, ctx.want)


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """The pipelined kernel over K slices as a batch into the workspace, then skinny's finishing pass."""
    from .. import pipelined, skinny

    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    spec, s = plan.family_spec
    W = env.workspace(p.A.device, *plan.workspace)
    A3, B3 = skinny.split_k_views(Av, Bv, spec.layout_a, spec.layout_b, p.K, s)
    todo = [pipelined.launch_args(spec, A3, B3, None, W, 1.0, 0.0, plan.M, plan.N, p.K // s, s, s, s, 1),
            skinny.finish_launch(Dk, W, Cv, alpha, beta, s, 1, c_nb, spec.out_dtype, p.out_dtype)]
    return [(*args, True) for args in todo]
