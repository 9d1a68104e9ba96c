"""Peeling: a pipelined core plus its last rows / columns on the GEMV or skinny family, when a model says it saves a wave."""

from __future__ import annotations

from dataclasses import replace

from ... import _compat
from ...core.operands import raw_view
from ...core.options import Options
from ...core.problem import Problem
from ..common.kernels import ITEM_BYTES
from ..pipelined.rules import choose_pipe_spec

# The peel's time model (H100, fp16, one block per SM): a 128-deep K step of a 128x128 block takes ~3.3 us
# (4096^3: 846 us for 8 waves of 32 steps, runner), a 96x128 block pipelined.NARROW_COST of that; the GEMV
# family streams its matrix at ~2.5 TB/s (fp16 1x4096x4096 colsum 32 MiB in ~13 us from DRAM), plus ~3 us a
# launch. A peel is kept where the model says it saves over PEEL_MIN_GAIN of the time.
PEEL_STEP_S = 3.3e-6


PEEL_GEMV_BYTES_PER_S = 2.5e12


PEEL_LAUNCH_S = 3e-6


PEEL_MIN_GAIN = 0.02


# Where peeling one side is enough and either would do (4097^3: 33 x 32 = 1056 blocks is 8 waves too), which:
# "row" (a 1 x N GEMV over B) or "col" (an (M - 1) x 1 GEMV over A).
PEEL_FIRST = "row"


# Widest edge peeled (rows or columns past the core's last multiple of 32): 1 the GEMV family, 2..8 skinny.
PEEL_MAX = 8


# The skinny family's edges stream their big operand far slower than a GEMV: fp16 4099^3's three peeled rows
# and 4104^3's eight took ~70 us over 32 MiB of B (H100): ~0.5 TB/s.
PEEL_SKINNY_BYTES_PER_S = 0.5e12


def peel_time(full, core, M: int, N: int, K: int, batch: int, rows: int, cols: int, item: int,
              sms: int) -> float | None:
    """The peel's time model (seconds): pipelined spec ``core`` over (M - rows) x (N - cols), in waves of one
    block per SM, plus the edges (the peeled rows stream all of B, K x N; the columns A's core rows) at
    the GEMV or skinny family's rate -- or None where that does not beat ``full`` over M x N by
    ``PEEL_MIN_GAIN``. Only the large configuration's tiles (128x128 and 96x128, one block per SM) are
    modelled; anything else: None."""
    from warp_gemm.families import pipelined

    cost = {(128, 128): 1.0, (96, 128): pipelined.NARROW_COST}
    if any((s.tm, s.tn) not in cost or s.min_blocks > 1 for s in (full, core)):
        return None

    def waves(s, m, n):
        return -(-batch * -(-m // s.tm) * -(-n // s.tn) // sms)

    per_wave = -(-K // 128) * PEEL_STEP_S
    t_full = waves(full, M, N) * cost[(full.tm, full.tn)] * per_wave

    def edge(width, big):  # seconds for one edge: stream its big operand (big x K) once, plus launches
        if not width:
            return 0.0
        rate, launches = (PEEL_GEMV_BYTES_PER_S, 1) if width == 1 else (PEEL_SKINNY_BYTES_PER_S, 2)
        return big * K * item * batch / rate + launches * PEEL_LAUNCH_S

    edges = edge(rows, N) + edge(cols, M - rows)
    t = waves(core, M - rows, N - cols) * cost[(core.tm, core.tn)] * per_wave + edges
    return t if t <= (1 - PEEL_MIN_GAIN) * t_full else None


def _edge_family(width: int):
    """The module that computes a peeled edge of ``width`` rows/columns: the GEMV family for 1, else skinny."""
    from warp_gemm.families import gemv, skinny

    return gemv if width == 1 else skinny


def _edge_spec(dev, p: Problem, la: str, lb: str, M: int, N: int, K: int, epi: str):
    if min(M, N) == 1:
        return _edge_family(1).choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi)
    return _edge_family(2).choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi, max_side=PEEL_MAX)


def _peel(plan, p: Problem, la: str, lb: str, epi: str, tf32: bool, opts: Options):
    """``plan`` with its last output rows and/or columns peeled off, or None where that does not pay. A
    side a little over a multiple of the tile (4097 with 128-row tiles) costs a whole row (column) of
    output tiles whose blocks do a full K loop for a few useful rows: 4097^3 fp16 is 33 x 33 = 1089
    blocks, 9 waves on 132 SMs, against 8 for the 32 x 33 blocks of a 4096 x 4097 core. The peeled rows
    are a ``rows x N`` product over all of B, the columns an ``(M - rows) x cols`` product over A's core
    rows: the GEMV family where one wide (rowdot/colsum), else the skinny family (up to ``PEEL_MAX``), on
    views of the same (possibly staged) operands, launched after the core kernel.

    Where: 16-bit inputs on CUDA whose core and full plans both use the large configuration (128x128 or
    96x128 tiles, one block per SM), no activation (the edge kernels have no fused one), the edge families
    available, a one-wide edge's vector contiguous (the row where A is stored (M, K), the column where B
    is stored (N, K)), and the time model (:func:`peel_time`) saying the core plus the edges save at least
    ``PEEL_MIN_GAIN``. H100, fp16 (cold L2, cuBLAS in the same run):
    4097^3 1025.6 -> 943.8 us (0.99 -> 1.07x cuBLAS), bf16 4097^3 with B stored (N, K) 978.9 -> 892.7
    (1.20 -> 1.32x), 8193x4097x4096 1814.5 -> 1724.8 (1.13 -> 1.19x); 2049^3 with B stored (N, K), both
    sides, 182.6 -> 156.2 (1.04 -> 1.22x); skinny edges: 4099^3 1029.9 -> 999.1 (0.99 -> 1.02x), 4103^3
    1028.6 -> 1007.9. On the CPU backend only with ``Options.peel_on_cpu`` (then every edge of
    1..PEEL_MAX past the CPU twin's 32x32 tiles, no model): how CPU CI runs this path."""
    if plan.activation is not None or opts.pipe_config is not None or tf32 or not opts.peel:
        return None
    edges = _edges(plan, p, la, lb, opts)
    if edges is None:
        return None
    best = _best_peel(plan, p, la + lb, epi, tf32, *edges)
    if best is None:
        return None
    pr, pc, core = best
    return edge_plan(plan, p, la, lb, epi, core, pr, pc)


def _edges(plan, p: Problem, la: str, lb: str, opts: Options):
    """``(rows, cols)`` that could be peeled (each 0..PEEL_MAX, not both 0), or None."""
    M, N, spec = plan.M, plan.N, plan.family_spec
    if p.A.device.is_cpu:
        if not opts.peel_on_cpu:
            return None
        pr, pc = M % spec.tm, N % spec.tn
    else:
        if p.in_dtype not in ("float16", "bfloat16"):
            return None
        pr, pc = M % 32, N % 32
        # A one-wide edge is a GEMV: only where its vector operand is contiguous (the row's: A's last row,
        # layout N; the column's: B's last column, B stored (N, K), layout T). A strided vector costs the
        # GEMV a scalar load per element per output: peeling 4097^3 NN's column took 998 us against 944
        # for its row (H100). Wider edges go to the skinny family.
        pr = 0 if pr == 1 and la != "N" else pr
        pc = 0 if pc == 1 and lb != "T" else pc
    pr = pr if 0 < pr <= PEEL_MAX and M > pr else 0
    pc = pc if 0 < pc <= PEEL_MAX and N > pc else 0
    return (pr, pc) if pr or pc else None


def _best_peel(plan, p: Problem, layout: str, epi: str, tf32: bool, pr: int, pc: int):
    """``(rows, cols, core spec)`` of the peel the model prefers among both sides and each one alone (on the CPU:
    the widest), or None where none fits or pays."""
    from warp_gemm.families import pipelined

    dev = p.A.device
    M, N, K, batch = plan.M, plan.N, p.K, p.batch
    best = None
    one = [(pr, 0), (0, pc)] if PEEL_FIRST == "row" else [(0, pc), (pr, 0)]
    for r, c in dict.fromkeys([(pr, pc)] + one):  # both sides, or one (the model picks; ties: the first)
        if not (r or c):
            continue
        core = choose_pipe_spec(dev, p.in_dtype, p.out_dtype, tf32, layout, epi, M - r, N - c, K, batch)
        if pipelined.smem_bytes(core) > pipelined.SMEM_LIMIT:
            continue
        # CPU: the widest peel (no model); CUDA: the least modelled time
        t = -(r + c) if dev.is_cpu else peel_time(plan.family_spec, core, M, N, K, batch, r, c,
                                                   ITEM_BYTES[p.in_dtype], _compat.sm_count(dev))
        if t is not None and (best is None or t < best[0]):
            best = (t, r, c, core)
    return None if best is None else best[1:]




def plan(ctx):
    """The pipelined family's plan, with its last rows / columns peeled off where :func:`_peel` says it pays."""
    from ..pipelined import rules

    planned = rules.plan(ctx)
    if planned is None:
        return None
    return _peel(planned, ctx.p, ctx.la, ctx.lb, ctx.epi, ctx.tf32, ctx.opts) or planned


def _slice(v, dim: int, start: int, stop: int):
    """A view of Warp array ``v`` restricted to ``[start, stop)`` along ``dim`` (same strides)."""
    if v is None:
        return None
    shape = list(v.shape)
    shape[dim] = stop - start
    return raw_view(v.ptr + start * v.strides[dim], v.dtype, tuple(shape), tuple(v.strides), v.device)


def peeled_launches(plan, p, Av, Bv, Cv, c_nb: int, Dk, alpha: float, beta: float, env, core) -> list:
    """The core ``(M - rows) x (N - cols)`` of the output by ``core(Ac, Bc, Cc, Dc, Mc, Nc)`` (the core family's
    ``[(kernel, dim, inputs, block_dim, tiled)]`` on views of A's core rows, B's core columns, C and D), then the
    peeled last ``rows`` rows (``rows x N``: all of B) and ``cols`` columns (``(M - rows) x cols``: A's core rows)
    by the GEMV family (one wide) or the skinny family: views of the same (possibly staged) operands, C and D; no
    copies (:func:`_peel`). ``plan.family_spec`` names the layouts (``layout_a``, ``layout_b``)."""
    from .. import gemv

    dev = p.A.device
    (pr, pc), M, N, K = plan.peel, plan.M, plan.N, p.K
    la, lb = plan.family_spec.layout_a, plan.family_spec.layout_b
    a_row, b_col = (1 if la == "N" else 2), (2 if lb == "N" else 1)  # A's M dimension, B's N dimension
    Mc, Nc = M - pr, N - pc
    a_nb, b_nb = Av.shape[0], Bv.shape[0]
    Ac, Bc = _slice(Av, a_row, 0, Mc), _slice(Bv, b_col, 0, Nc)

    def out_part(X, r0, r1, c0, c1):
        return None if X is None else _slice(_slice(X, 1, r0, r1), 2, c0, c1)

    todo = list(core(Ac, Bc, out_part(Cv, 0, Mc, 0, Nc), out_part(Dk, 0, Mc, 0, Nc), Mc, Nc))
    edges = (("row", pr, _slice(Av, a_row, Mc, M), Bv, (Mc, M, 0, N), pr, N),  # A's last rows times all of B
             ("col", pc, Ac, _slice(Bv, b_col, Nc, N), (0, Mc, Nc, N), Mc, pc))  # A's core rows times B's last cols
    for (name, width, Ae, Be, box, m, n), spec, ws_shape in zip(edges, plan.edge_specs, plan.edge_ws):
        if not width:
            continue
        fam = _edge_family(width)
        ws = env.workspace(dev, *ws_shape, f"ws_edge_{name}") if ws_shape else None
        extra = gemv.launch.counters(env, dev, spec, m, n, p.batch, f"cnt_edge_{name}") if fam is gemv else {}
        todo += [(*args, fam is not gemv) for args in fam.launch_args(
            spec, Ae, Be, out_part(Cv, *box), out_part(Dk, *box), alpha, beta, m, n, K, p.batch, a_nb, b_nb, c_nb,
            workspace=ws, **extra)]
    return todo


def edge_plan(plan, p: Problem, la: str, lb: str, epi: str, core, pr: int, pc: int):
    """``plan`` with ``core`` (the family's spec over the core) and its last ``pr`` rows / ``pc`` columns peeled to the
    GEMV or skinny family, or None where an edge family does not apply."""
    dev, M, N, K = p.A.device, plan.M, plan.N, p.K
    row = _edge_spec(dev, p, la, lb, pr, N, K, epi) if pr else None
    col = _edge_spec(dev, p, la, lb, M - pr, pc, K, epi) if pc else None
    if (pr and row is None) or (pc and col is None):
        return None
    ws = (_edge_family(pr).workspace_shape(row, pr, N, K, p.batch) if pr else None,
          _edge_family(pc).workspace_shape(col, M - pr, pc, K, p.batch) if pc else None)
    return replace(plan, family_spec=core, peel=(pr, pc), edge_specs=(row, col), edge_ws=ws)


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """The pipelined family's launches for ``plan``; with peeled edges, the core's and then the edges'."""
    from .. import pipelined

    if not any(plan.peel):
        return pipelined.launch.launches(plan, p, Dk, alpha, beta, env)
    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    dev, K = p.A.device, p.K
    a_nb, b_nb = Av.shape[0], Bv.shape[0]

    def core(Ac, Bc, Cc, Dc, Mc, Nc):
        spec = plan.family_spec
        return [(*pipelined.launch_args(spec, Ac, Bc, Cc, Dc, alpha, beta, Mc, Nc, K, p.batch, a_nb, b_nb, c_nb,
                                        **pipelined.launch.stream_k_buffers(env, dev, spec, Mc, Nc, K, p.batch)), True)]

    return peeled_launches(plan, p, Av, Bv, Cv, c_nb, Dk, alpha, beta, env, core)
