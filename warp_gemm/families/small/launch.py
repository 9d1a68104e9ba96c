"""Small family: its launches for one plan."""

from __future__ import annotations

from .kernel import launch_args


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """``[(kernel, dim, inputs, block_dim, tiled)]`` for ``plan``."""
    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    ws = env.workspace(p.A.device, *plan.workspace) if plan.workspace else None
    todo = launch_args(plan.family_spec, Av, Bv, Cv, Dk, alpha, beta, plan.M, plan.N, p.K, p.batch, Av.shape[0],
                       Bv.shape[0], c_nb, workspace=ws)
    return [(*args, True) for args in todo]
