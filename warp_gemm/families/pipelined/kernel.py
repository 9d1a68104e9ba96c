"""The pipelined family's kernels: the one-tile-per-block K loop (copies S - 1 stages ahead of the product, one
barrier per K step), its persistent variant, the stage copier and the tile_matmul epilogue, built once per spec."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import functools
import threading
import types

import warp as wp

from ... import _compat
from ..common import native
from ..common.kernels import ITEM_BYTES, WP_DTYPES, func_name, grouped_tile
from .snippets import (
    _COMMIT,
    _SK_ZERO,
    _SYNC,
    _WAIT,
    _WAIT_PROXY,
    _ZERO_ACC,
    _copy_snippet,
    _copy_t_snippet,
    _mma_sync_snippet,
    _own_store_snippet,
    _simt_mma_snippet,
    _staged_store_snippet,
    _store_snippet,
    _stub_acc,
    _stub_copy,
    _stub_int,
    _stub_mma,
    _stub_own_store,
    _stub_sk_zero,
    _stub_staged_store,
    _stub_store,
    _wgmma_snippet,
    persistent_tile,
)
from .spec import ER, PipeSpec, _check, native_acc, native_store, staged_store
from .stream_k import _stream_k_kernel

# --- the kernel factory ---------------------------------------------------------------------------------
_factory_lock = threading.Lock()


def get_kernel(spec: PipeSpec):
    """The kernel for ``spec``, built once per process (thread-safe)."""
    with _factory_lock:
        return _build(spec, native_acc(spec), staged_store(spec))


@functools.cache
def _build(spec: PipeSpec, zero_acc_snippet: bool, staged: bool):
    _check(spec)
    k = _parts(spec, zero_acc_snippet, staged)
    # The kernel's compile-time constants and native functions, as closure variables (Warp reads them from the
    # closure; it takes no attributes or tuples there).
    IN, OUT, ACC, TM, TN, TNC, S, TF32 = k.IN, k.OUT, k.ACC, k.TM, k.TN, k.TNC, k.S, k.TF32
    AR, AC, BR, BC, SAR, SBR, ACP, BCP = k.AR, k.AC, k.BR, k.BC, k.SAR, k.SBR, k.ACP, k.BCP
    TRANS_A, TRANS_B, PAD_C, EMPTY = k.TRANS_A, k.TRANS_B, k.PAD_C, k.EMPTY
    OWN, STAGED, ZERO_ACC, STORE = k.OWN, k.STAGED, k.ZERO_ACC, k.STORE
    copy_stage, commit, wait, wait0, wait_prev = k.copy_stage, k.commit, k.wait, k.wait0, k.wait_prev
    mma, own_store, tstore, zero_acc, store, epilogue = k.mma, k.own_store, k.tstore, k.zero_acc, k.store, k.epilogue
    SPLIT, mma_a, mma_b = spec.interleave, k.mma_a, k.mma_b

    def gemm(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        tiles_m: int,
        tiles_n: int,
        group_m: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
        bias: wp.array2d(dtype=OUT),
    ):
        bi, t = wp.tid()
        i, j = grouped_tile(t, tiles_m, tiles_n, group_m)
        m0 = i * TM
        n0 = j * TN
        Ab = A[wp.min(bi, a_nb - 1)]
        Bb = B[wp.min(bi, b_nb - 1)]
        # The shared tiles are made here, in the kernel body, and only passed to the helpers: Warp then
        # allocates them once per block (a tile made inside a wp.func lives for one call).
        # Every element a tile_matmul reads is written by a copy first (zeros past the edges included; the
        # padding columns are never read): uninitialized where Warp allows it (HAS_TILE_EMPTY).
        if wp.static(EMPTY):
            ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
            bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        else:
            ba = wp.tile_zeros(shape=(SAR, ACP), dtype=IN, storage="shared")
            bb = wp.tile_zeros(shape=(SBR, BCP), dtype=IN, storage="shared")
        if wp.static(PAD_C):
            if wp.static(ZERO_ACC):
                acc_s = wp.tile_empty(shape=(TM, TNC), dtype=ACC, storage="shared")
                zero_acc(acc_s)
            else:
                acc_s = wp.tile_zeros(shape=(TM, TNC), dtype=ACC, storage="shared")
            acc = wp.tile_view(acc_s, offset=(0, 0), shape=(TM, TN))
        else:
            # pad_c == 0: Warp's default (register) storage, as in the tiled family's dense kernels; the
            # exact-fp32 and fp64 kernels then fit two or three blocks per SM.
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        # Prologue: K tiles 0 .. S-2 into stages 0 .. S-2, one commit group each (empty past k_tiles, so
        # the group count -- and the wait below -- stays the same).
        for p in range(S - 1):
            if p < k_tiles:
                copy_stage(ba, bb, Ab, Bb, p, p, m0, n0)
            commit(0)
        if wp.static(OWN):
            # One barrier per K step (the SIMT and mma.sync products have none of their own, unlike tile_matmul):
            # wait for K tile k's group (S - 2 younger ones may stay in flight) with a block sync, after which every
            # thread is done with the stage K tile k-1 used, then refill that stage with K tile k + S - 1.
            # Interleaved (spec.interleave): the first half of the product before the copies, the rest after them.
            for k in range(k_tiles):
                wait_prev(0)
                kn = k + S - 1
                if wp.static(SPLIT):
                    mma_a(ba, bb, acc, k % S)
                if kn < k_tiles:
                    copy_stage(ba, bb, Ab, Bb, kn % S, kn, m0, n0)
                commit(0)
                if wp.static(SPLIT):
                    mma_b(ba, bb, acc, k % S)
                else:
                    mma(ba, bb, acc, k % S)
        else:
            # k_tiles is a runtime value on purpose: Warp unrolls short constant-trip loops and then
            # allocates every iteration's tiles in shared memory.
            for k in range(k_tiles):
                # Refill the stage that K tile k-1 used (tile_matmul ended with a block sync) with K tile
                # k + S - 1, then wait for K tile k's group: S - 1 younger groups may stay in flight.
                kn = k + S - 1
                if kn < k_tiles:
                    copy_stage(ba, bb, Ab, Bb, kn % S, kn, m0, n0)
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
        wait0(0)  # no copy outlives the kernel (all groups past k_tiles are empty; cheap)
        if wp.static(STAGED):
            tstore(D[bi], acc, ba, alpha, m0, n0)  # through the A stages (every copy done: wait0's barrier)
        elif wp.static(OWN):
            own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, m0, n0)  # acc: this thread's registers
        elif wp.static(STORE):
            store(D[bi], acc_s, alpha, m0, n0)  # tile_matmul ended with a block sync: acc is complete
        else:
            epilogue(D, C, bias, acc, alpha, beta, bi, c_nb, m0, n0)

    bounds = (spec.block_dim, spec.min_blocks) if spec.min_blocks else None
    if spec.stream_k:
        sk = _stream_k_kernel(spec, copy_stage, (mma, mma_a, mma_b), own_store, commit, wait_prev, wait0)
        return _compat.make_kernel(sk, spec.key, bounds)
    if not spec.persistent:
        return _compat.make_kernel(gemm, spec.key, bounds)
    return _compat.make_kernel(_persistent_kernel(spec, k), spec.key, bounds)



def _parts(spec: PipeSpec, zero_acc_snippet: bool, staged: bool) -> types.SimpleNamespace:
    """What a kernel of ``spec`` is made of: its compile-time constants and its native functions (registered in this
    order, under names unique to ``spec.key``); the ones a variant does not use are None."""
    k = types.SimpleNamespace(mma=None, mma_a=None, mma_b=None, own_store=None, wait_prev=None, tstore=None,
                              zero_acc=None, store=None, epilogue=None)
    k.TM, k.TN, k.S, k.TF32 = spec.tm, spec.tn, spec.stages, spec.tf32
    k.IN, k.OUT, k.ACC = WP_DTYPES[spec.in_dtype], WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    k.TRANS_A, k.TRANS_B = spec.layout_a == "T", spec.layout_b == "T"
    # One stage of A / B as copied (rows x cols) and the shared buffers' shapes.
    (k.AR, k.AC), (k.BR, k.BC) = spec.a_tile(), spec.b_tile()
    k.ACP, k.BCP = spec.stage_cols()
    k.SAR, k.SBR = k.S * k.AR, k.S * k.BR
    k.TNC, k.PAD_C, k.EMPTY = k.TN + spec.pad_c, spec.pad_c > 0, _compat.HAS_TILE_EMPTY
    key, IN, OUT, ACC, TM, TN, TNC, S = spec.key, k.IN, k.OUT, k.ACC, k.TM, k.TN, k.TNC, k.S
    # Stages that hold the transpose of the stored tile (the SIMT kernel's) copy it with _COPY_T.
    XA, XB = spec.transposing_copies()
    a_snip = (_copy_t_snippet(spec, k.AC, k.AR, k.ACP) if XA
              else _copy_snippet(spec, k.AR, k.AC, k.ACP, core=spec.wgmma))
    b_snip = (_copy_t_snippet(spec, k.BC, k.BR, k.BCP) if XB
              else _copy_snippet(spec, k.BR, k.BC, k.BCP, core=spec.wgmma))
    cp_a = native.func(a_snip, key + "_cp_a", _stub_copy(IN, k.SAR, k.ACP))
    cp_b = native.func(b_snip, key + "_cp_b", _stub_copy(IN, k.SBR, k.BCP))
    k.commit = native.func(_COMMIT, key + "_commit", _stub_int())
    k.wait = native.func(native.fill(_WAIT, N=S - 1), key + "_wait", _stub_int())
    k.wait0 = native.func(native.fill(_WAIT, N=0), key + "_wait0", _stub_int())
    k.copy_stage = _stage_copier(spec, cp_a, cp_b)
    # SIMT and mma.sync kernels: the K step's product and the epilogue are snippets over a register accumulator.
    k.OWN = spec.simt or spec.mma > 0 or spec.wgmma
    if k.OWN:
        if spec.wgmma:
            product = _wgmma_snippet(spec)
        else:
            product = _simt_mma_snippet(spec) if spec.simt else _mma_sync_snippet(spec)
        k.mma = native.func(product, key + "_mma", _stub_mma(IN, k.SAR, k.ACP, k.SBR, k.BCP, ACC, TM, TN))
        if spec.interleave:  # the product's two halves (spec.interleave)
            half = _simt_mma_snippet if spec.simt else _mma_sync_snippet
            k.mma_a, k.mma_b = (native.func(half(spec, p), f"{key}_mma{p}",
                                            _stub_mma(IN, k.SAR, k.ACP, k.SBR, k.BCP, ACC, TM, TN)) for p in (0, 1))
        k.own_store = native.func(_own_store_snippet(spec), key + "_sstore", _stub_own_store(OUT, ACC, TM, TN))
        k.wait_prev = native.func(native.fill(_WAIT_PROXY if spec.wgmma else _WAIT, N=S - 2), key + "_waitp",
                                  _stub_int())
    k.STAGED = k.OWN and staged
    if k.STAGED:
        k.tstore = native.func(_staged_store_snippet(spec), key + "_tstore",
                               _stub_staged_store(IN, k.SAR, k.ACP, OUT, ACC, TM, TN))
    k.ZERO_ACC, k.STORE = zero_acc_snippet, native_store(spec)
    if k.ZERO_ACC:
        k.zero_acc = native.func(native.fill(_ZERO_ACC, N16=TM * TNC * ITEM_BYTES[spec.acc_dtype] // 16),
                                 key + "_zero_acc", _stub_acc(ACC, TM, TNC))
    if k.STORE:
        k.store = native.func(_store_snippet(spec), key + "_store", _stub_store(OUT, ACC, TM, TNC))
    elif not k.OWN:
        k.epilogue = _epilogue(spec)
    return k


def _persistent_kernel(spec: PipeSpec, k: types.SimpleNamespace):
    """The persistent kernel of ``spec`` (``spec.persistent`` > 0) from its parts ``k`` (:func:`_parts`)."""
    IN, OUT, ACC, TM, TN, TNC, S, TF32 = k.IN, k.OUT, k.ACC, k.TM, k.TN, k.TNC, k.S, k.TF32
    AR, AC, BR, BC, SAR, SBR, ACP, BCP = k.AR, k.AC, k.BR, k.BC, k.SAR, k.SBR, k.ACP, k.BCP
    TRANS_A, TRANS_B, OWN, STORE = k.TRANS_A, k.TRANS_B, k.OWN, k.STORE
    copy_stage, commit, wait, wait0, wait_prev = k.copy_stage, k.commit, k.wait, k.wait0, k.wait_prev
    mma, own_store, zero_acc, store, epilogue = k.mma, k.own_store, k.zero_acc, k.store, k.epilogue
    key = spec.key
    zero = sync = None
    if OWN:  # simt/mma (a wgmma spec refuses persistent blocks): the register accumulator re-zeroed per tile
        zero = native.func(_SK_ZERO, key + "_skzero", _stub_sk_zero(ACC, TM, TN))
    else:
        sync = native.func(_SYNC, key + "_sync", _stub_int())

    # Persistent: a grid of `grid` blocks; block g takes the output tiles g, g + grid, g + 2 grid, ... (over
    # batch entries and grouped tiles, in that order), their K tiles as one sequence of `iters` steps. The
    # copies run S - 1 steps ahead of the product across tile boundaries, so the next tile's first stages load
    # while this tile's last steps multiply and its epilogue stores (a kernel of one tile per block waits for
    # them after each launch of a block: its prologue). The accumulator is stored and zeroed in place: tile_matmul's
    # shared one by the store/epilogue and the zero-fill snippet; the simt/mma.sync kernels' registers by their own
    # store and _SK_ZERO (the loop stream-K shares, without its split tiles).
    def gemm_persistent(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        tiles_m: int,
        tiles_n: int,
        group_m: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
        bias: wp.array2d(dtype=OUT),
        grid: int,
    ):
        _z, g0 = wp.tid()
        mine = (D.shape[0] * tiles_m * tiles_n - g0 + grid - 1) // grid
        iters = mine * k_tiles
        ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
        bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        if wp.static(OWN):
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        else:
            acc_s = wp.tile_empty(shape=(TM, TNC), dtype=ACC, storage="shared")
            zero_acc(acc_s)
            acc = wp.tile_view(acc_s, offset=(0, 0), shape=(TM, TN))
        for p in range(S - 1):
            if p < iters:
                bp, ip, jp = persistent_tile(g0 + (p // k_tiles) * grid, tiles_m, tiles_n, group_m)
                copy_stage(ba, bb, A[wp.min(bp, a_nb - 1)], B[wp.min(bp, b_nb - 1)], p, p % k_tiles, ip * TM,
                           jp * TN)
            commit(0)
        for it in range(iters):
            if wp.static(OWN):
                wait_prev(0)  # K step it's stage is in, and every thread is done with the stage step it - 1 used
            kn = it + S - 1
            if kn < iters:
                bn, i_n, j_n = persistent_tile(g0 + (kn // k_tiles) * grid, tiles_m, tiles_n, group_m)
                copy_stage(ba, bb, A[wp.min(bn, a_nb - 1)], B[wp.min(bn, b_nb - 1)], kn % S, kn % k_tiles,
                           i_n * TM, j_n * TN)
            commit(0)
            s = it % S
            if wp.static(OWN):
                mma(ba, bb, acc, s)
            else:
                wait(0)
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
            if it % k_tiles == k_tiles - 1:  # the tile's last K step: store it (tile_matmul ended with a block sync)
                bi, i, j = persistent_tile(g0 + (it // k_tiles) * grid, tiles_m, tiles_n, group_m)
                if wp.static(OWN):
                    own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, i * TM, j * TN)  # this thread's
                    zero(acc)
                else:
                    if wp.static(STORE):
                        store(D[bi], acc_s, alpha, i * TM, j * TN)
                    else:
                        epilogue(D, C, bias, acc, alpha, beta, bi, c_nb, i * TM, j * TN)
                    sync(0)  # every thread has read the accumulator
                    zero_acc(acc_s)
        wait0(0)

    return gemm_persistent



def _stage_copier(spec: PipeSpec, cp_a, cp_b):
    """The kernel's ``@wp.func`` ``copy_stage(ba, bb, Ab, Bb, st, kt, m0, n0)``: starts the copies of K
    tile ``kt`` of A and B (the block's rows ``m0`` / columns ``n0``) into stage ``st`` of the shared
    buffers ``ba``/``bb`` (made in the kernel); the caller commits the group."""
    TK = spec.tk
    IN = WP_DTYPES[spec.in_dtype]
    TRANS_A = spec.layout_a == "T"
    TRANS_B = spec.layout_b == "T"
    AR, AC = spec.a_tile()
    BR, BC = spec.b_tile()
    SAR, SBR = spec.stages * AR, spec.stages * BR
    ACP, BCP = spec.stage_cols()

    def copy_stage(ba: wp.tile(dtype=IN, shape=(SAR, ACP), storage="shared"),
                   bb: wp.tile(dtype=IN, shape=(SBR, BCP), storage="shared"),
                   Ab: wp.array2d(dtype=IN), Bb: wp.array2d(dtype=IN), st: int, kt: int, m0: int, n0: int):
        if wp.static(TRANS_A):
            cp_a(ba, st * AR, Ab, kt * TK, m0)
        else:
            cp_a(ba, st * AR, Ab, m0, kt * TK)
        if wp.static(TRANS_B):
            cp_b(bb, st * BR, Bb, n0, kt * TK)
        else:
            cp_b(bb, st * BR, Bb, kt * TK, n0)

    name = func_name(spec.key, "copy_stage")
    copy_stage.__name__ = copy_stage.__qualname__ = name
    return wp.func(copy_stage, name=name)


def _epilogue(spec: PipeSpec):
    """The kernel's ``@wp.func`` ``epilogue(D, C, bias, acc, alpha, beta, bi, c_nb, m0, n0)``:
    ``D = act(alpha * acc + beta * C + bias)`` for the block's output tile, in the accumulator dtype,
    then cast. ``acc`` is the kernel's accumulator, passed by reference (the parameter's annotation
    spells out its shared layout, so that the views below are typed exactly as in the kernel)."""
    TM, TN = spec.tm, spec.tn
    OUT = WP_DTYPES[spec.out_dtype]
    ACC = WP_DTYPES[spec.acc_dtype]
    TNC = TN + spec.pad_c
    ACC_OWNER = spec.pad_c == 0  # pad_c: a view into the wider shared tile; else the (shared) tile itself
    AXPBY = spec.epilogue == "axpby"
    CAST_OUT = spec.out_dtype != spec.acc_dtype
    EPI_CHUNKS = TM > ER and TM % ER == 0
    ER_ = ER if EPI_CHUNKS else TM  # rows per epilogue chunk
    BIAS = spec.bias
    ACT = spec.activation is not None
    if ACT:
        from ..common.epilogue import activation_func

        act = activation_func(spec.activation, WP_DTYPES[spec.acc_dtype])
    else:
        act = None

    def epilogue(D: wp.array3d(dtype=OUT), C: wp.array3d(dtype=OUT), bias: wp.array2d(dtype=OUT),
                 acc: wp.tile(dtype=ACC, shape=(TM, TN), storage="shared", strides=(TNC, 1), owner=ACC_OWNER),
                 alpha: ACC, beta: ACC, bi: int, c_nb: int, m0: int, n0: int):
        # Epilogue in ER-row chunks (register pressure, see ER; tiles of at most ER rows: one chunk):
        # D = act(alpha * acc + beta * C + bias), in the accumulator dtype, then cast. Rows/columns past
        # M/N are dropped by the checked tile_store; C's and bias's are read as zeros by tile_load.
        if wp.static(BIAS):
            brow = wp.tile_astype(wp.tile_load(bias, shape=(1, TN), offset=(0, n0)), ACC)
        for e in range(TM // ER_):
            r0 = m0 + e * ER_
            if wp.static(EPI_CHUNKS):
                r = wp.tile_view(acc, offset=(e * ER_, 0), shape=(ER_, TN)) * alpha
            else:
                r = acc * alpha
            if wp.static(AXPBY):
                c = wp.tile_load(C[wp.min(bi, c_nb - 1)], shape=(ER_, TN), offset=(r0, n0))
                if wp.static(CAST_OUT):
                    r = wp.tile_map(wp.add, r, wp.tile_astype(c, ACC) * beta)
                else:
                    r = wp.tile_map(wp.add, r, c * beta)
            if wp.static(BIAS):
                r = wp.tile_map(wp.add, r, wp.tile_broadcast(brow, shape=(ER_, TN)))
            if wp.static(ACT):
                r = wp.tile_map(act, r)
            if wp.static(CAST_OUT):
                wp.tile_store(D[bi], wp.tile_astype(r, OUT), offset=(r0, n0))
            else:
                wp.tile_store(D[bi], r, offset=(r0, n0))

    name = func_name(spec.key, "epilogue")
    epilogue.__name__ = epilogue.__qualname__ = name
    return wp.func(epilogue, name=name)





















def job_kernels(job: tuple) -> list:
    """``[(kernel, block_dim)]`` of a precompile job ``("pipelined", spec)``."""
    spec = job[1]
    if spec.in_dtype == "bfloat16":
        _compat.bf16_dtype()
    return [(get_kernel(spec), spec.block_dim)]


