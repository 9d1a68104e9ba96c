"""Tiled family: its plan (configuration, split-K, padded copies, edge clamps)."""

from __future__ import annotations

from dataclasses import replace

from ... import _compat
from ...config import choice
from ...config import configs as _config
from ...config.configs import Config
from ...core.operands import Operand, _layout
from ...core.options import Options
from ...core.problem import Problem
from ..common.kernels import ITEM_BYTES, acc_dtype_name
from . import kernel as tiled

NO_CLAMP = 2**30


def plan_tiled(base, p: Problem, alpha: float, allow_tf32: bool, config: Config | None,
                opts: Options):
    dev = p.A.device
    M, N, K = base.M, base.N, p.K
    widen = _compat.WIDEN_16BIT_INPUTS and p.in_dtype in ("float16", "bfloat16")
    in_k = "float32" if widen else p.in_dtype
    acc = acc_dtype_name(p.in_dtype)
    (la, a_aligned), (lb, b_aligned) = _layout(base.A, widen), _layout(base.B, widen)
    tf32 = bool(allow_tf32 and p.in_dtype == "float32" and _compat.HAS_TF32 and not dev.is_cpu)
    cfg = config or choice.choose(dev, p.in_dtype, la + lb, M, N, K, p.batch, tf32)
    pad = (not dev.is_cpu or opts.pad_on_cpu) and M * N * K >= opts.pad_min_work
    padded = pad and bool(M % cfg.tm or N % cfg.tn or K % cfg.tk or not (a_aligned and b_aligned))
    pads = tiled.smem_pads(in_k, dev.is_cpu and not opts.smem_pad_on_cpu, tf32 or opts.smem_pad_on_cpu)
    tiles_m, tiles_n, k_tiles = -(-M // cfg.tm), -(-N // cfg.tn), -(-K // cfg.tk)
    # Automatic splits only on CUDA; an explicit split_k (tests, tuning) is honoured anywhere.
    if dev.is_cpu and cfg.split_k == 0:
        splits = 1
    else:
        splits = _config.split_count(cfg, p.batch * tiles_m * tiles_n, k_tiles, _compat.sm_count(dev))
    k_per_split = -(-k_tiles // splits)
    splits = -(-k_tiles // k_per_split)  # no empty splits
    (dnb, dr, dc), _ = base.d3
    workspace = None
    c_into_d = False
    if splits > 1 or padded:
        # Split-K partial sums meet in a zeroed accumulator-dtype workspace (tile-multiple sized when
        # padded); one finishing pass applies alpha, beta*C and the output dtype.
        epilogue, kernel_out = ("splitk" if splits > 1 else "scale"), acc
        workspace = ((dnb, tiles_m * cfg.tm, tiles_n * cfg.tn) if padded else (dnb, dr, dc), splits > 1)
    else:
        epilogue, kernel_out = ("axpby" if base.use_c else "scale"), base.out_k
        c_into_d = base.use_c and not c_in_place(base.C, base.out_k, M, N)
    k_clamp = NO_CLAMP if padded else k_clamp_for(K, cfg, pads[0], in_k, dev.is_cpu, opts)
    spec = tiled.KernelSpec(cfg.tm, cfg.tn, cfg.tk, in_k, kernel_out, la, lb, epilogue, tf32, *pads,
                            *tiled.occupancy_bound(cfg, dev.is_cpu), k_tail=k_clamp != NO_CLAMP)
    rows_cols = workspace[0][1:] if workspace else (dr, dc)
    m_clamp, n_clamp = edge_clamps(rows_cols, cfg, epilogue, c_into_d or workspace is not None, dev.is_cpu, opts)
    return replace(base, family="tiled", widen=widen, cfg=cfg, spec=spec, padded=bool(padded), splits=splits,
                   k_per_split=k_per_split, k_tiles=k_tiles, tiles_m=tiles_m, tiles_n=tiles_n,
                   workspace=workspace, c_into_d=c_into_d, clamps=(m_clamp, n_clamp, k_clamp))


def c_in_place(C: Operand, out_k: str, M: int, N: int) -> bool:
    """Whether the kernel reads C in place: C has the kernel's dtype, N columns with unit stride, and
    M rows or one row that broadcasts (a bias: read through a zero row stride, no extra pass). Anything
    else (a column bias, a strided view, another dtype) is first written into the output, which the
    kernel then reads back tile by tile before overwriting that same tile."""
    shape = (1,) * (3 - C.ndim) + tuple(C.shape)
    strides = (0,) * (3 - C.ndim) + tuple(C.strides)
    return shape[1] in (1, M) and shape[2] == N and (strides[2] == 1 or N == 1) and C.dtype == out_k


def edge_clamps(rows_cols, cfg: Config, epilogue: str, c_is_d: bool, is_cpu: bool, opts: Options) -> tuple[int, int]:
    """The kernel's ``m_clamp``/``n_clamp``: the last tile row (column) starts at ``M - tm`` (``N - tn``)
    instead of running past the edge, so its loads stay inside the arrays and take Warp's vectorized
    path (a tile not wholly inside its array is copied element by element). fp16 on the H100: 1024^3
    ran in 41 us, 1000x1024x1024 in 74 and 1024x1000x1024 in 78 -- the edge blocks with scalar loads
    finished last.

    The overlapping rows are computed by two blocks and stored twice with the same values, which is
    safe for the plain and axpby epilogues reading a separate C; not for split-K (atomic adds) nor
    when C was first copied into D (one block would read C after the other overwrote it). CUDA only:
    on the CPU backend the copies are scalar either way and the overlap is extra work."""
    rows, cols = rows_cols
    if (is_cpu and not opts.edge_clamp_on_cpu) or epilogue == "splitk" or (epilogue == "axpby" and c_is_d):
        return NO_CLAMP, NO_CLAMP
    return (rows - cfg.tm if rows >= cfg.tm else NO_CLAMP), (cols - cfg.tn if cols >= cfg.tn else NO_CLAMP)


def k_clamp_for(K: int, cfg: Config, pad_ab: int, in_dtype: str, is_cpu: bool, opts: Options) -> int:
    """The kernel's ``k_clamp``: with K not a multiple of ``tk``, the last K tile starts at ``K - tk``
    (in bounds, so Warp copies it with vector loads) and the kernel zeroes its first ``tk - K % tk``
    columns of A / rows of B, which the previous tile already counted. Padded-shared-tile kernels only
    (where the tiles are shared and can be zeroed in place), and only when the overlap is a whole
    number of 16-byte chunks (``tiled.K_CHUNK_BYTES``). fp16 on the H100: the partial last K tile
    cost 13 us of 55 at 1024x1024x1000."""
    chunk = tiled.K_CHUNK_BYTES // ITEM_BYTES[in_dtype]
    r = K % cfg.tk
    if (is_cpu and not opts.edge_clamp_on_cpu) or not pad_ab or K <= cfg.tk or r == 0 or (cfg.tk - r) % chunk:
        return NO_CLAMP
    return K - cfg.tk


