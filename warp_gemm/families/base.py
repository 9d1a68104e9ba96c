"""What a kernel family is to the planner and the executor.

A family is a folder under ``families/`` and one :class:`Family` entry in ``families.REGISTRY`` (planner
order). The planner (``core.plan``) builds one :class:`Ctx` per problem and asks each family's ``plan`` in
turn; the first plan returned wins. The executor (``core.execute``) calls the planned family's ``launches``
with an :class:`Env` (kernel views, cached buffers, the launcher) and launches what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Ctx:
    """One problem as the families' rules see it (after the column-major swap)."""

    base: Any  # core.plan.Plan with the family-independent fields set (family "fill")
    p: Any  # core.problem.Problem
    la: str  # layout the kernels read A in: "N" (row-major) or "T" (its transpose stored row-major)
    lb: str
    epi: str  # "scale" (alpha * A @ B) or "axpby" (+ beta * C)
    tf32: bool  # float32 inputs on tf32 tensor cores
    c_into_d: bool  # C first written into D, which the kernel then reads back
    want: str | None  # Options.family: the one family allowed, or None
    opts: Any  # core.options.Options

    @property
    def dev(self):
        return self.p.A.device


@dataclass(frozen=True)
class Family:
    """``plan(ctx) -> Plan | None``; ``launches(plan, p, Dk, alpha, beta, env) -> [(kernel, dim, inputs,
    block_dim, tiled)]`` launched in order. ``plan`` None: the family is planned by core.plan itself (host,
    the tiled fallback)."""

    name: str
    plan: Callable | None
    launches: Callable | None
    #: ``jobs(dtypes, layouts, epilogues) -> [job]``: the kernels ``warp-gemm precompile`` builds (a job is a tuple
    #: whose first item names the family); ``job_kernels(job) -> [(kernel, block_dim)]``.
    jobs: Callable | None = None
    job_kernels: Callable | None = None


@dataclass(frozen=True)
class Env:
    """What the executor lends a family's ``launches``: kernel views of the operands and cached buffers."""

    views: Callable  # (plan, p, Dk) -> (A, B, C, c_nb) kernel views for the mma / SIMT families
    kernel_operand: Callable  # (Operand, widen, allocate) -> 3-D Warp array the kernels read
    staged: Callable  # ((A, B), (stage_a, stage_b), dtype, dev) -> views with 16-byte aligned rows
    c_kernel_view: Callable  # (plan, Dk) -> (C view or None, c_nb)
    c_view: Callable  # (C) -> C as a broadcasting 3-D view (for the convert kernel)
    c_in_place_view: Callable  # (C, M, N) -> (C view, c_nb) read in place by a kernel
    workspace: Callable  # (dev, shape, dtype, slot="ws") -> cached Warp array
    zeroed_ints: Callable  # (dev, n, slot) -> cached int32 zeros the kernels leave zero
    allocate: Callable  # (shape, dtype, zero=False) -> per-call temporary
