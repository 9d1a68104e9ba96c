"""The grouped family's kernels: the group table, the grouped GEMM, the bias pass.

One GEMM launch covers every group. It reads a device-side **group table**, one row per group::

    A pointer, B pointer, D pointer (bytes), M, N, K, lda, ldb, ldd (elements, stored row strides), first tile

written by :func:`table_kernel` from ``offs`` on the device (no host synchronisation) or, for lists of
matrices, by the host. Block ``t`` of the bounded grid finds its group by a binary search over the
``first tile`` column (the last group whose first tile is ``<= t``), its tile inside the group from the
difference, and exits if that tile lies past the group's tiles (the grid is an upper bound computed from
the shapes alone; :func:`grid_bound`). It then builds the group's operand views from the pointers
(``wp.array(ptr=..., shape=(rows, ld))[:, :cols]``: unit column stride, row stride ``ld``) and runs the
pipelined family's K loop on them: the same copy snippets (cp.async with zero fill past the view), the same
product snippets (mma.sync for 16-bit and tf32, the SIMT outer product for exact float32, ``tile_matmul``
for float64) and the same stores. Rows of a view end at the group's last row, so a block never reads or
writes another group's rows.

First tiles, with ``s`` the group's first row / column / K index (``offs[g - 1]``, 0 for the first):
- rows split by ``offs`` (2-D x 3-D): ``(s // TM + g) * tiles_n``. Group ``g``'s ``ceil(M_g / TM)`` tile rows
  fit between ``s // TM + g`` and the next group's ``e // TM + g + 1``, because ``ceil((e - s) / TM) <=
  e // TM - s // TM + 1``; so ``ceil(total_rows / TM) + G + 1`` tile rows bound all of them, with no
  prefix sum and no host read of ``offs``. Columns split (3-D x 2-D) likewise with TN.
- K split (2-D x 2-D) and batches (3-D x 3-D): every group has the same ``tiles_m * tiles_n`` tiles: ``g *
  tiles``.
- lists: the exclusive prefix sum of the groups' tiles, computed on the host (the sizes are known there).

Row ``G`` of the table is the **tail**: the rows (columns) after ``offs[-1]``, a group with K = 0, so the
launch writes zeros there. Row ``G + 1`` is the **error row**: the whole output as one K = 0 group. When
:func:`table_kernel` finds ``offs`` decreasing, negative or past the operand it sets ``status[0]``, and every
block then takes the error row and scales by NaN: the whole output becomes NaN (CUDA cannot raise without a
host synchronisation; host-resident ``offs`` are checked on the host and raise instead).
"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import functools
import threading

import warp as wp

from . import _deps
from ._deps import ITEM_BYTES, WP_DTYPES, PipeSpec, grouped_tile

# table columns
A_PTR, B_PTR, D_PTR, COL_M, COL_N, COL_K, LDA, LDB, LDD, FIRST = range(10)
TABLE_COLS = 10
# how the groups split the operands (table_kernel's `jag`)
JAG_NONE, JAG_M, JAG_N, JAG_K = 0, 1, 2, 3

_lock = threading.Lock()


@functools.cache
def key_of(spec: PipeSpec, checked: bool) -> str:
    return "wg_grouped_" + spec.key + ("_chk" if checked else "")


def get_kernel(spec: PipeSpec, checked: bool):
    """The grouped GEMM kernel for ``spec`` (a pipelined-family configuration whose product is a snippet --
    ``mma`` or ``simt`` -- or ``tile_matmul`` with a shared accumulator and the store snippet), built once per
    process. ``checked``: copies test each group's row alignment at run time and fall back to element copies
    (lists of matrices of any sizes, jagged column offsets); else every operand row must start on a 16-byte
    boundary (the launcher checks the base pointers and strides on the host)."""
    with _lock:
        return _build(spec, bool(checked))


@functools.cache
def _build(spec: PipeSpec, checked: bool):
    _deps.check_pipe_spec(spec)
    TM, TN, TK, S = spec.tm, spec.tn, spec.tk, spec.stages
    IN = WP_DTYPES[spec.in_dtype]
    ACC = WP_DTYPES[spec.acc_dtype]
    TRANS_A = spec.layout_a == "T"
    TRANS_B = spec.layout_b == "T"
    AR, AC = spec.a_tile()
    BR, BC = spec.b_tile()
    ACP, BCP = spec.stage_cols()
    SAR, SBR = S * AR, S * BR
    TNC = TN + spec.pad_c
    OWN = spec.simt or spec.mma > 0
    if not OWN and not (_deps.native_acc(spec) and _deps.native_store(spec)):
        raise ValueError(f"{spec}: the grouped kernel takes mma/simt products, or tile_matmul with a shared "
                         "accumulator of at least 32 rows and the store snippet (pad_c > 0, scale epilogue)")
    key = key_of(spec, checked)
    XA, XB = spec.transposing_copies()
    if XA:
        a_snip = _deps.copy_t_snippet(spec, AC, AR, ACP)
    else:
        a_snip = _deps.copy_snippet(spec, AR, AC, ACP, checked=checked)
    if XB:
        b_snip = _deps.copy_t_snippet(spec, BC, BR, BCP)
    else:
        b_snip = _deps.copy_snippet(spec, BR, BC, BCP, checked=checked)
    native, stub_int = _deps.native, _deps.stub_int
    cp_a = native(a_snip, key + "_cp_a", _deps.stub_copy(IN, SAR, ACP))
    cp_b = native(b_snip, key + "_cp_b", _deps.stub_copy(IN, SBR, BCP))
    commit = native(_deps.COMMIT, key + "_commit", stub_int())
    wait = native(_deps.fill(_deps.WAIT, N=S - 1), key + "_wait", stub_int())
    wait0 = native(_deps.fill(_deps.WAIT, N=0), key + "_wait0", stub_int())
    copy_stage = _deps.stage_copier(spec, cp_a, cp_b)
    OUT = WP_DTYPES[spec.out_dtype]
    STAGED = OWN and _deps.staged_store(spec)
    if OWN:
        product = _deps.simt_mma_snippet(spec) if spec.simt else _deps.mma_sync_snippet(spec)
        mma = native(product, key + "_mma", _deps.stub_mma(IN, SAR, ACP, SBR, BCP, ACC, TM, TN))
        wait_prev = native(_deps.fill(_deps.WAIT, N=S - 2), key + "_waitp", stub_int())
        if STAGED:
            tstore = native(_deps.staged_store_snippet(spec), key + "_tstore",
                            _deps.stub_staged_store(IN, SAR, ACP, OUT, ACC, TM, TN))
        else:
            own_store = native(_deps.own_store_snippet(spec), key + "_sstore", _deps.stub_own_store(OUT, ACC, TM, TN))
    else:
        zero_acc = native(_deps.fill(_deps.ZERO_ACC, N16=TM * TNC * ITEM_BYTES[spec.acc_dtype] // 16), key + "_zero_acc",
                          _deps.stub_acc(ACC, TM, TNC))
        store = native(_deps.store_snippet(spec), key + "_store", _deps.stub_store(OUT, ACC, TM, TNC))
    TF32 = spec.tf32

    def grouped(table: wp.array2d(dtype=wp.int64), n_groups: int, status: wp.array(dtype=wp.int32), alpha: ACC,
                alpha_bad: ACC, group_m: int):
        _z, t = wp.tid()
        g = int(0)
        scale = alpha
        if status[0] != 0:
            g = n_groups + 1  # the error row: the whole output, K = 0, times NaN
            scale = alpha_bad
        else:
            # the last group (of rows 0 .. n_groups: the groups and the tail) whose first tile is <= t
            lo = int(0)
            hi = n_groups
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if int(table[mid, 9]) <= t:
                    lo = mid
                else:
                    hi = mid - 1
            g = lo
        M = int(table[g, 3])
        N = int(table[g, 4])
        K = int(table[g, 5])
        tiles_m = (M + TM - 1) // TM
        tiles_n = (N + TN - 1) // TN
        local = t - int(table[g, 9])
        if local >= tiles_m * tiles_n:
            return  # a gap between groups' tiles (the grid is an upper bound)
        i, j = grouped_tile(local, tiles_m, tiles_n, group_m)
        m0 = i * TM
        n0 = j * TN
        k_tiles = (K + TK - 1) // TK
        # The group's operands as stored: (rows, ld) contiguous, then its first `cols` columns.
        if wp.static(TRANS_A):
            Ag = wp.array(ptr=wp.uint64(table[g, 0]), shape=(K, int(table[g, 6])), dtype=IN)[:, 0:M]
        else:
            Ag = wp.array(ptr=wp.uint64(table[g, 0]), shape=(M, int(table[g, 6])), dtype=IN)[:, 0:K]
        if wp.static(TRANS_B):
            Bg = wp.array(ptr=wp.uint64(table[g, 1]), shape=(N, int(table[g, 7])), dtype=IN)[:, 0:K]
        else:
            Bg = wp.array(ptr=wp.uint64(table[g, 1]), shape=(K, int(table[g, 7])), dtype=IN)[:, 0:N]
        Dg = wp.array(ptr=wp.uint64(table[g, 2]), shape=(M, int(table[g, 8])), dtype=OUT)[:, 0:N]
        ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
        bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        if wp.static(OWN):
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        else:
            acc_s = wp.tile_empty(shape=(TM, TNC), dtype=ACC, storage="shared")
            zero_acc(acc_s)
            acc = wp.tile_view(acc_s, offset=(0, 0), shape=(TM, TN))
        for p in range(S - 1):
            if p < k_tiles:
                copy_stage(ba, bb, Ag, Bg, p, p, m0, n0)
            commit(0)
        if wp.static(OWN):
            # one barrier per K step (pipelined family, _build): wait for K tile k, refill the stage k - 1 used
            for k in range(k_tiles):
                wait_prev(0)
                kn = k + S - 1
                if kn < k_tiles:
                    copy_stage(ba, bb, Ag, Bg, kn % S, kn, m0, n0)
                commit(0)
                mma(ba, bb, acc, k % S)
        else:
            for k in range(k_tiles):
                kn = k + S - 1
                if kn < k_tiles:
                    copy_stage(ba, bb, Ag, Bg, kn % S, kn, m0, n0)
                commit(0)
                wait(0)
                s = k % S
                if wp.static(TRANS_A):
                    a = wp.tile_transpose(wp.tile_view(ba, offset=(s * AR, 0), shape=(AR, AC)))
                else:
                    a = wp.tile_view(ba, offset=(s * AR, 0), shape=(AR, AC))
                if wp.static(TRANS_B):
                    b = wp.tile_transpose(wp.tile_view(bb, offset=(s * BR, 0), shape=(BR, BC)))
                else:
                    b = wp.tile_view(bb, offset=(s * BR, 0), shape=(BR, BC))
                if wp.static(TF32):
                    wp.tile_matmul(a, b, acc, precision="tf32")
                else:
                    wp.tile_matmul(a, b, acc)
        wait0(0)
        if wp.static(STAGED):
            tstore(Dg, acc, ba, scale, m0, n0)
        elif wp.static(OWN):
            own_store(Dg, Dg, acc, scale, scale * ACC(0.0), m0, n0)
        else:
            store(Dg, acc_s, scale, m0, n0)

    bounds = (spec.block_dim, spec.min_blocks) if spec.min_blocks else None
    return _deps._compat.make_kernel(grouped, key, bounds)


# --- the group table ------------------------------------------------------------------------------------
@wp.func
def _first_tile(jag: int, g: int, s: int, TM: int, TN: int, tiles_m: int, tiles_n: int):
    if jag == 1:
        return (s // TM + g) * tiles_n
    if jag == 2:
        return (s // TN + g) * tiles_m
    return g * tiles_m * tiles_n


def _table(offs: wp.array(dtype=wp.int32), G: int, jag: int, total: int,
                 a0: wp.int64, a_gs: wp.int64, a_js: wp.int64, b0: wp.int64, b_gs: wp.int64, b_js: wp.int64,
                 d0: wp.int64, d_gs: wp.int64, d_js: wp.int64, M: int, N: int, K: int, lda: int, ldb: int,
                 ldd: int, TM: int, TN: int, err_rows: int, err_ld: int,
                 table: wp.array2d(dtype=wp.int64), status: wp.array(dtype=wp.int32)):
    """Row ``g`` (one thread each, ``g = 0 .. G + 1``) of the group table. Group ``g`` spans ``[s, e)`` of the
    split dimension (``jag``: 1 rows of A and D, 2 columns of B and D, 3 the K of A and B; 0 none: a batch),
    ``s = offs[g - 1]`` (0 for g = 0), ``e = offs[g]``; its operands start ``g * x_gs + s * x_js`` bytes after
    ``x0``. Row G is the tail ``[offs[G - 1], total)`` with K = 0 (jag 1, 2; empty otherwise), row G + 1 the
    error row (the whole output: ``err_rows`` rows of N columns, K = 0). A thread whose ``[s, e)`` is not inside
    ``[0, total]`` in order sets ``status[0] = 1``."""
    g = wp.tid()
    tiles_m = (M + TM - 1) // TM
    tiles_n = (N + TN - 1) // TN
    if g == G + 1:
        table[g, 0] = a0
        table[g, 1] = b0
        table[g, 2] = d0
        table[g, 3] = wp.int64(err_rows)
        table[g, 4] = wp.int64(N)
        table[g, 5] = wp.int64(0)
        table[g, 6] = wp.int64(lda)
        table[g, 7] = wp.int64(ldb)
        table[g, 8] = wp.int64(err_ld)
        table[g, 9] = wp.int64(0)
        return
    s = int(0)
    e = int(0)
    if jag != 0:
        if g > 0:
            s = int(offs[g - 1])
        if g < G:
            e = int(offs[g])
        else:
            e = total
        if s < 0 or e < s or e > total:
            wp.atomic_max(status, 0, 1)
    m = M
    n = N
    k = K
    if jag == 1:
        m = e - s
    elif jag == 2:
        n = e - s
    elif jag == 3:
        k = e - s
    if g == G:  # the tail: zeros after offs[-1] (rows, columns); nothing for K splits and batches
        k = 0
        if jag == 0 or jag == 3:
            m = 0
            n = 0
    gl = wp.int64(g)
    sl = wp.int64(s)
    table[g, 0] = a0 + gl * a_gs + sl * a_js
    table[g, 1] = b0 + gl * b_gs + sl * b_js
    table[g, 2] = d0 + gl * d_gs + sl * d_js
    table[g, 3] = wp.int64(m)
    table[g, 4] = wp.int64(n)
    table[g, 5] = wp.int64(k)
    table[g, 6] = wp.int64(lda)
    table[g, 7] = wp.int64(ldb)
    table[g, 8] = wp.int64(ldd)
    table[g, 9] = wp.int64(_first_tile(jag, g, s, TM, TN, tiles_m, tiles_n))


@functools.cache
def table_kernel():
    """The group table's kernel (:func:`_table`), built once per process."""
    return _deps._compat.make_kernel(_table, "wg_grouped_table")


def grid_bound(jag: int, G: int, total: int, M: int, N: int, TM: int, TN: int) -> int:
    """Blocks of the grouped launch: an upper bound on every group's tiles from the shapes alone (see the
    module docstring), at least the error row's tiles."""
    tm, tn = -(-M // TM), -(-N // TN)
    if jag == JAG_M:
        return (-(-total // TM) + G + 1) * tn
    if jag == JAG_N:
        return (-(-total // TN) + G + 1) * tm
    return G * tm * tn


# --- bias ----------------------------------------------------------------------------------------------
@functools.cache
def bias_kernel(out_dtype: str):
    """``out[b, r, c] += bias[row, c]`` for the rows of ``out`` (``(nb, R, C)``) that belong to a group, ``row``
    the bias row of that group: ``mode`` 0: the batch index ``b``; 1: the group of row ``r`` (``offs``: the first
    ``g`` with ``offs[g] > r``); 2: the group of column ``c``. Rows (columns) after ``offs[-1]`` are left alone.
    A bias of one row (``nbias == 1``) is broadcast over the groups."""
    OUT = WP_DTYPES[out_dtype]
    F = wp.float64 if out_dtype == "float64" else wp.float32

    def add_bias(out: wp.array3d(dtype=OUT), bias: wp.array2d(dtype=OUT), offs: wp.array(dtype=wp.int32), G: int,
                 mode: int):
        b, r, c = wp.tid()
        g = b
        if mode != 0:
            x = r
            if mode == 2:
                x = c
            lo = int(0)
            hi = G
            while lo < hi:  # the first g with offs[g] > x (G: past offs[-1])
                mid = (lo + hi) // 2
                if int(offs[mid]) > x:
                    hi = mid
                else:
                    lo = mid + 1
            g = lo
            if g >= G:
                return
        row = wp.min(g, bias.shape[0] - 1)
        out[b, r, c] = OUT(F(out[b, r, c]) + F(bias[row, c]))

    return _deps._compat.make_kernel(add_bias, f"wg_grouped_bias_{out_dtype}")
