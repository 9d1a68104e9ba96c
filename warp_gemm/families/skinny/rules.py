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


def precompile_jobs(dtypes: list[str], layouts: tuple[str, ...] = ("NN",),
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


