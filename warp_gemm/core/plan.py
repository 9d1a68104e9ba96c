"""Problem -> Plan: which kernel family, which configuration, which operand transforms, workspaces and
epilogue. Pure: it allocates nothing and launches nothing (``core.execute`` does), so a plan can be
inspected and tested without a GPU.

No product (K == 0 or alpha == 0): ``"fill"``. The CPU's default: ``"host"`` (families/host). Otherwise the
families of ``families.REGISTRY`` are asked in order (:func:`_plan_family`), and the tiled family
(families/tiled) takes what none of them plans.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from warp_gemm import _compat
from warp_gemm.config import tables
from warp_gemm.config.configs import Config
from warp_gemm.core.operands import Operand, _layout, _needs_copy, as3d
from warp_gemm.core.options import Options
from warp_gemm.core.problem import Problem
from warp_gemm.families import registry as families
from warp_gemm.families import tiled
from warp_gemm.families.base import Ctx
from warp_gemm.families.common.kernels import acc_dtype_name
from warp_gemm.families.tiled.rules import NO_CLAMP, c_in_place, plan_tiled


@dataclass(frozen=True)
class Plan:
    """Everything ``core.execute`` needs to run one problem. Operands are the problem's, after the
    layout swap (a column-major ``out`` is computed as ``D^T = op(B)^T @ op(A)^T``)."""

    family: str  # "host" | "tiled" | "pipelined" | "splitpipe" | "small" | "skinny" | "gemv" | "fill"
    A: Operand
    B: Operand
    C: Operand | None
    D: Operand
    M: int
    N: int
    use_c: bool  # beta != 0 and C given
    out_k: str  # dtype the kernels write (the output's, or the accumulator's for a temporary output)
    tmp_out: bool  # the kernels write a temporary, converted into D at the end
    d3: tuple  # D as (shape, element strides), 3-D
    # --- tiled family (None/unused elsewhere) ---
    widen: bool = False  # Warp 1.7: 16-bit operands widened to float32 first
    cfg: Config | None = None
    spec: tiled.KernelSpec | None = None
    padded: bool = False  # A and B copied into zero-padded tile-multiple buffers
    splits: int = 1
    k_per_split: int = 1
    k_tiles: int = 0
    tiles_m: int = 0
    tiles_n: int = 0
    workspace: tuple | None = None  # (shape, zeroed) of the accumulator-dtype workspace
    c_into_d: bool = False  # C first written into the output, which the kernel reads back
    clamps: tuple = (NO_CLAMP, NO_CLAMP, NO_CLAMP)  # m_clamp, n_clamp, k_clamp
    # --- the other device families (pipelined, small, skinny, gemv): their spec; workspace is (shape, dtype)
    family_spec: object = None
    stage: tuple = (False, False)  # A / B copied into a cached buffer with 16-byte aligned rows first
    activation: str | None = None  # applied to the result (families/common/epilogue.py)
    fused_activation: bool = False  # in the kernel's epilogue; else one elementwise pass after it
    # --- pipelined: the last row / column peeled off to the GEMV family (:func:`_peel`) ---
    peel: tuple = (0, 0)  # (rows, columns) peeled, 0..PEEL_MAX each; family_spec covers (M - rows) x (N - cols)
    edge_specs: tuple = (None, None)  # the peeled rows' (rows x N) and columns' spec: gemv one wide, else skinny
    edge_ws: tuple = (None, None)  # their workspaces ((shape, dtype) where K is split, else None)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (max(self.D.shape[0], 1) if self.D.ndim == 3 else 1, self.tiles_m * self.tiles_n, self.splits)


def make_plan(p: Problem, alpha: float, beta: float, allow_tf32: bool, config: Config | None,
              opts: Options, activation: str | None = None) -> Plan:
    """The plan for ``p``: the family first, then that family's decisions."""
    A, B, C, D, M, N = _swap_for_column_major_out(p)
    dev = p.A.device
    use_c = C is not None and beta != 0.0
    (dnb, dr, dc), (_, _, sdc) = as3d(D)
    # Without tile_astype the kernel's output dtype must be its accumulator dtype; a D without unit
    # column stride (after the swap) is written through a temporary.
    acc = acc_dtype_name(p.in_dtype)
    tmp_out = (not _compat.HAS_TILE_ASTYPE and p.out_dtype != acc) or (dc > 1 and sdc != 1)
    out_k = acc if tmp_out and not _compat.HAS_TILE_ASTYPE else p.out_dtype
    base = Plan("fill", A, B, C, D, M, N, use_c, out_k, tmp_out, as3d(D), activation=activation)
    if p.K == 0 or alpha == 0.0:
        return base
    if dev.is_cpu and opts.cpu_backend == "host" and opts.family in (None, "host") and config is None:
        return replace(base, family="host", tmp_out=False, out_k=p.out_dtype)
    if config is None and opts.family != "tiled":
        other = _plan_family(base, p, allow_tf32, opts)
        if other is not None:
            return other
    return plan_tiled(base, p, alpha, allow_tf32, config, opts)


def _plan_family(base: Plan, p: Problem, allow_tf32: bool, opts: Options) -> Plan | None:
    """The first family of ``families.REGISTRY`` (planner order) that plans the problem (CUDA; on the CPU backend
    only when ``opts.family`` names it, for tests), else None (the tiled family). Each family's rule is in its
    folder (``rules.py``); docs/design.md lists them in order.

    Before the rules: on CUDA, a family the tuning tables name for the problem's bucket (the ``"...|family"``
    groups, ``warp-gemm tune --family families``; float32 buckets ship) is planned as if forced (``Options.family``),
    where it plans the problem; a table naming ``"tiled"`` sends it to the tiled family."""
    dev = p.A.device
    if (dev.is_cpu and opts.family is None) or base.tmp_out or _compat.WIDEN_16BIT_INPUTS:
        return None
    la, lb = _layout(base.A, False)[0], _layout(base.B, False)[0]
    if "copy" in (la, lb) or any(_needs_copy(op) for op in (base.A, base.B)):
        return None
    M, N, K = base.M, base.N, p.K
    tf32 = bool(allow_tf32 and p.in_dtype == "float32" and _compat.HAS_TF32 and not dev.is_cpu)
    if opts.family is None and opts.pipe_config is None:
        # the tables' '|family' winner for this bucket (user's table, then the shipped one; untuned layouts borrow NN)
        fam = tables.lookup_family(dev, p.in_dtype, la + lb, M, N, K, p.batch, tf32)
        if fam == "tiled":
            return None
        if fam is not None:
            forced = _plan_family(base, p, allow_tf32, replace(opts, family=fam))
            if forced is not None and forced.family == fam:
                return forced
    ctx = Ctx(base=base, p=p, la=la, lb=lb, epi="axpby" if base.use_c else "scale", tf32=tf32,
              c_into_d=base.use_c and not c_in_place(base.C, p.out_dtype, M, N), want=opts.family, opts=opts)
    for fam in families.REGISTRY:
        if fam.plan is not None and opts.family in (None, fam.name):
            planned = fam.plan(ctx)
            if planned is not None:
                return planned
    return None
































def _swap_for_column_major_out(p: Problem):
    """A column-major out (unit row stride): compute D^T = op(B)^T @ op(A)^T into its row-major
    transpose, so the kernel's stores stay coalesced."""
    A, B, C, D, M, N = p.A, p.B, p.C, p.D, p.M, p.N
    (_, dr, dc), (_, sdr, sdc) = as3d(D)
    if dc > 1 and sdc != 1 and (sdr == 1 or dr == 1):
        A, B, D = p.B.transposed(), p.A.transposed(), D.transposed()
        C = C.transposed() if C is not None and C.ndim >= 2 else C
        if C is not None and C.ndim == 1:  # a (N,) bias becomes a column: (N, 1)
            C = replace(C, shape=(C.shape[0], 1), strides=(C.strides[0], 0))
        M, N = N, M
    return A, B, C, D, M, N










