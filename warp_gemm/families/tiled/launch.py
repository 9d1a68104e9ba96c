"""Tiled family: its launches for one plan (operand copies, the kernel, the split-K finish)."""

from __future__ import annotations

from ...core import launches as _launches
from ...core.launches import convert, fill
from ...core.operands import raw_view
from ..common.kernels import acc_dtype_name
from .kernel import get_kernel


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """Launch ``plan``'s copies, kernel and split-K finish (in order, here); nothing left to launch after."""
    allocate = env.allocate
    dev = p.A.device
    cfg, spec = plan.cfg, plan.spec
    Av = env.kernel_operand(plan.A, plan.widen, allocate)
    Bv = env.kernel_operand(plan.B, plan.widen, allocate)
    if plan.padded:
        # pad_ab more columns: the kernel's widened tile loads then stay inside the copy, so every one
        # of them takes Warp's vectorized path.
        Av = _tile_padded_copy(Av, (cfg.tm, cfg.tk) if spec.layout_a == "N" else (cfg.tk, cfg.tm), spec.in_dtype,
                               allocate, spec.pad_ab)
        Bv = _tile_padded_copy(Bv, (cfg.tk, cfg.tn) if spec.layout_b == "N" else (cfg.tn, cfg.tk), spec.in_dtype,
                               allocate, spec.pad_ab)
    acc = acc_dtype_name(p.in_dtype)
    c_nb, Cv, alpha_k, Dlaunch = 1, Dk, alpha, Dk
    if plan.workspace is not None:
        # the cached workspace (no allocation: the call can be kept as a plan); zeroed by a recorded
        # launch where the split-K partial sums are added into it
        wshape, zero = plan.workspace
        W = env.workspace(dev, tuple(wshape), acc, "splitk")
        if zero:
            fill(W, acc, 0.0)
        Cv, alpha_k, Dlaunch = W, 1.0, W
    elif plan.use_c:
        if plan.c_into_d:
            convert(Dk, env.c_view(plan.C), plan.out_k, plan.C.dtype)
            c_nb = Dk.shape[0]
        else:
            Cv, c_nb = env.c_in_place_view(plan.C, plan.M, plan.N)
    m_clamp, n_clamp, k_clamp = plan.clamps
    _launches.launch(get_kernel(spec), (p.batch, plan.tiles_m * plan.tiles_n, plan.splits),
                    [Av, Bv, Cv, Dlaunch, alpha_k, beta, plan.k_tiles, plan.k_per_split, plan.tiles_m, plan.tiles_n,
                     max(1, cfg.group_m), Av.shape[0], Bv.shape[0], c_nb, m_clamp, n_clamp, k_clamp],
                    dev, 1 if dev.is_cpu else cfg.block_dim)
    if plan.workspace is not None:
        cfin = None
        if plan.use_c:
            cfin = env.c_view(plan.C)
            if plan.C.dtype != plan.out_k:  # Warp 1.7's float32 temporary: bring C to its dtype first
                convert(Dk, cfin, plan.out_k, plan.C.dtype)
                cfin = Dk
        Wv = raw_view(W.ptr, W.dtype, Dk.shape, W.strides, dev) if plan.padded else W
        _launches.finish_splitk(Dk, Wv, cfin, plan.out_k, acc, alpha, beta)
    return []


def _tile_padded_copy(view, tiles: tuple[int, int], dtype: str, allocate, extra_cols: int = 0):
    """A zero-filled (nb, rows, cols) copy of ``view`` with rows and cols rounded up to ``tiles``
    (and ``extra_cols`` more zero columns)."""
    nb, r, c = view.shape
    rp, cp = -(-r // tiles[0]) * tiles[0], -(-c // tiles[1]) * tiles[1] + extra_cols
    buf = allocate((nb, rp, cp), dtype, zero=True)
    convert(raw_view(buf.ptr, buf.dtype, (nb, r, c), buf.strides, buf.device), view, dtype, dtype)
    return buf


