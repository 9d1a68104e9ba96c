"""Launch arguments of the grouped family's kernels (pure: no allocation, no launch; core/grouped.py launches).

A grouped product is three launches at most: :func:`table_launch` (the group table from ``offs``, one thread
per group), :func:`gemm_launch` (every group's tiles) and, with a bias, :func:`bias_launch`. A list of
products is one :func:`gemm_launch` per operand-layout class over a table :func:`list_tables` builds on the
host.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernel as K
from .rules import GROUP_M, choose_spec
from .spec import GroupedProblem


def output_addressing(p: GroupedProblem, item_out: int) -> dict:
    """How group ``g`` of a new contiguous result of ``p.out_shape`` is addressed: batch step ``d_gs`` and
    split step ``d_js`` (bytes), row stride ``ldd`` (elements), the error row's rows, and the N the table
    kernel takes (the whole width for column splits)."""
    if p.case == "2d3d":
        return dict(d_gs=0, d_js=p.N * item_out, ldd=p.N, err_rows=p.total, n=p.N)
    if p.case == "3d2d":
        return dict(d_gs=0, d_js=item_out, ldd=p.total, err_rows=p.M, n=p.total)
    return dict(d_gs=p.M * p.N * item_out, d_js=0, ldd=p.N, err_rows=p.G * p.M, n=p.N)


def table_launch(p: GroupedProblem, spec, a_ptr: int, b_ptr: int, d_ptr: int, item_out: int, offs, table, status):
    """``(kernel, dim, inputs)`` of the group table's kernel: ``G + 2`` rows (groups, tail, error row) into
    ``table`` (int64 ``(G + 2, 10)``), bad ``offs`` flagged in ``status`` (int32, zeroed)."""
    d = output_addressing(p, item_out)
    inputs = [offs, p.G, p.jag, p.total, a_ptr, p.a.gs, p.a.js, b_ptr, p.b.gs, p.b.js, d_ptr, d["d_gs"], d["d_js"],
              p.M, d["n"], p.K, p.a.ld, p.b.ld, d["ldd"], spec.tm, spec.tn, d["err_rows"], d["ldd"], table, status]
    return K.table_kernel(), (p.G + 2,), inputs


def bound(p: GroupedProblem, spec) -> int:
    """Blocks of ``p``'s GEMM launch (kernel.grid_bound)."""
    n = p.total if p.case == "3d2d" else p.N
    return K.grid_bound(p.jag, p.G, p.total, p.M, n, spec.tm, spec.tn)


def gemm_launch(spec, checked: bool, table, n_groups: int, status, blocks: int, device_is_cpu: bool):
    """``(kernel, dim, inputs, block_dim)`` of the grouped GEMM over ``blocks`` blocks (``n_groups`` groups
    in ``table``, then the tail and the error row)."""
    k = K.get_kernel(spec, checked)
    return k, (1, blocks), [table, n_groups, status, 1.0, float("nan"), GROUP_M], 1 if device_is_cpu else spec.block_dim


def bias_launch(p: GroupedProblem, out3, bias2, offs):
    """``(kernel, dim, inputs)`` of the bias pass: ``out3`` the result seen as ``(nb, R, C)``, ``bias2`` the
    bias as ``(1 or G, C)``."""
    if len(p.out_shape) == 3:
        mode = 0
    else:
        mode = 1 if p.case == "2d3d" else 2
    return K.bias_kernel(p.out_dtype), tuple(out3.shape), [out3, bias2, offs, p.G, mode]


@dataclass
class ListMeta:
    """A list of products as NumPy int64 columns: pointers, sizes, the layout code (2 * (A read through the
    transpose) + (B read through the transpose)) and stored row strides (elements)."""

    a_ptr: np.ndarray
    b_ptr: np.ndarray
    d_ptr: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    layout: np.ndarray
    lda: np.ndarray
    ldb: np.ndarray
    ldd: np.ndarray


LAYOUT_CODES = ("NN", "NT", "TN", "TT")


def list_tables(meta: ListMeta, in_dtype: str, out_dtype: str, tf32: bool, device_is_cpu: bool, item: int,
                spec=None):
    """For each operand-layout class present: ``(spec, table, n, blocks, checked, sel)`` -- the kernel configuration
    (``spec`` or the rules' for the class's median sizes), the host table (int64 ``(n + 3, 10)``: ``n`` products,
    the tail (no tiles), the error row (unused), then a zero status word), the launch's blocks (every product's
    tiles, exactly: the first tiles are their exclusive prefix sum) and whether the copies must check alignment
    at run time, and the indices of the class's products in the list. Products with an empty result are left out."""
    live = (meta.m > 0) & (meta.n > 0)
    out = []
    for code, layout in enumerate(LAYOUT_CODES):
        sel = np.nonzero(live & (meta.layout == code))[0]
        n = len(sel)
        if n == 0:
            continue
        ms, ns = meta.m[sel], meta.n[sel]
        sp = spec or choose_spec(in_dtype, out_dtype, tf32, layout, device_is_cpu, int(np.median(ms)),
                                 int(np.median(ns)))
        tiles = (-(-ms // sp.tm)) * (-(-ns // sp.tn))
        tab = np.zeros((n + 3, K.TABLE_COLS), dtype=np.int64)
        tab[:n, K.A_PTR] = meta.a_ptr[sel]
        tab[:n, K.B_PTR] = meta.b_ptr[sel]
        tab[:n, K.D_PTR] = meta.d_ptr[sel]
        tab[:n, K.COL_M] = ms
        tab[:n, K.COL_N] = ns
        tab[:n, K.COL_K] = meta.k[sel]
        tab[:n, K.LDA] = meta.lda[sel]
        tab[:n, K.LDB] = meta.ldb[sel]
        tab[:n, K.LDD] = meta.ldd[sel]
        csum = np.cumsum(tiles)
        tab[1:n, K.FIRST] = csum[:-1]
        blocks = int(csum[-1])
        tab[n, K.FIRST] = blocks
        ok = ((meta.a_ptr[sel] % 16 == 0) & (meta.b_ptr[sel] % 16 == 0) & ((meta.lda[sel] * item) % 16 == 0)
              & ((meta.ldb[sel] * item) % 16 == 0))
        out.append((sp, tab, n, blocks, not bool(ok.all()), sel))
    return out


def hopper_launch(p: GroupedProblem, spec, a_ptr: int, b_ptr: int, d_ptr: int, offs, device, sm_count: int):
    """``(kernel, dim, inputs, block_dim)`` of the Hopper grouped kernel (hopper.py) for ``p`` (case 2d3d; rules.
    hopper_reason passed) into a new contiguous result at ``d_ptr``; ``offs`` a Warp int32 view of the G group ends."""
    from warp_gemm.core.operands import raw_view

    from ._deps import ITEM_BYTES, WP_DTYPES
    from .hopper import launch_args

    it, io = ITEM_BYTES[p.in_dtype], ITEM_BYTES[p.out_dtype]
    T, N, K, G = p.total, p.N, p.K, p.G
    A = raw_view(a_ptr, WP_DTYPES[p.in_dtype], (1, T, K), (T * p.a.ld * it, p.a.ld * it, it), device)
    b_shape = (G, N, K) if p.b.layout == "T" else (G, K, N)
    B = raw_view(b_ptr, WP_DTYPES[p.in_dtype], b_shape, (p.b.gs if G > 1 else b_shape[1] * p.b.ld * it,
                                                        p.b.ld * it, it), device)
    D = raw_view(d_ptr, WP_DTYPES[p.out_dtype], (1, T, N), (T * N * io, N * io, io), device)
    return launch_args(spec, A, B, D, offs, G, T, N, K, sm_count)
