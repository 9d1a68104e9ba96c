"""The GEMV family's kernels: the product kernel of a spec (rowdot, colsum or bands snippet plus its store), the
bands finishing kernel, and the kernels a precompile job builds."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import dataclasses
import functools
import re

import warp as wp

from ... import _compat
from .. import skinny
from ..common import native
from ..common.kernels import WP_DTYPES, func_name
from .snippets import _BANDS_SUM, _snippet
from .spec import BANDS_FINISH_UNROLL, BANDS_FINISH_WARPS, KINDS, GemvSpec, _factory_lock, _Named


def _finish_warps(spec: GemvSpec) -> int:
    """bands: warps per 32 columns of the finishing kernel (CUDA); 1 on the CPU (threads run one at a time)."""
    return BANDS_FINISH_WARPS if spec.lanes > 1 else 1


def _native_func(spec: GemvSpec):
    """The kernel's snippet as a Warp function: rowdot ``dot(Mat, vec, bm, bv, r, k0, k1, lane)``,
    colsum ``csum(Mat, vec, bm, bv, c0, k0, k1, lane)``, returning the accumulator dtype; bands
    ``band(Mat, vec, W, bm, bv, c, k0, k1, wrow, grp)`` (writes W, returns nothing); bands fused ``fused(Mat, vec, W,
    cnt, D, C, alpha, beta, bm, bv, c, k0, k1, wrow, b, t, S, batch, c_nb, nthr, nfin, grp)`` (writes W, then D)."""
    IN = WP_DTYPES[spec.in_dtype]
    snip = _snippet(spec)
    name = re.sub(r"[^0-9A-Za-z_]", "_", spec.kernel_key + "_native")
    if spec.kind == "bands" and spec.fused:
        ACC, OUT = WP_DTYPES[spec.acc_dtype], WP_DTYPES[spec.out_dtype]

        def fused(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC),
                  cnt: wp.array(dtype=wp.int32), D: wp.array2d(dtype=OUT), C: wp.array2d(dtype=OUT), alpha: ACC,
                  beta: ACC, bm: int, bv: int, c: int, k0: int, k1: int, wrow: int, b: int, t: int, S: int,
                  batch: int, c_nb: int, nthr: int, nfin: int, grp: int): ...

        fused.__name__ = fused.__qualname__ = name
        return wp.func_native(snip)(fused)
    if spec.kind == "bands":
        ACC = WP_DTYPES[spec.acc_dtype]

        def band(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC), bm: int,
                 bv: int, c: int, k0: int, k1: int, wrow: int, grp: int): ...

        band.__name__ = band.__qualname__ = name
        return wp.func_native(snip)(band)
    if spec.acc_dtype == "float64":

        @_Named(name).func_native(snip)
        def f64(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), bm: int, bv: int, i: int, k0: int,
                k1: int, lane: int) -> wp.float64: ...

        return f64

    @_Named(name).func_native(snip)
    def f32(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), bm: int, bv: int, i: int, k0: int, k1: int,
            lane: int) -> wp.float32: ...

    return f32


def _native_sum(spec: GemvSpec):
    """bands' finishing snippet as a Warp function ``bsum(W, b, i, S, batch, lane)`` -> the accumulator dtype."""
    snip = native.fill(_BANDS_SUM, ACC=native.C_TYPES[spec.acc_dtype], NW=_finish_warps(spec), FU=BANDS_FINISH_UNROLL)
    name = re.sub(r"[^0-9A-Za-z_]", "_", spec.kernel_key + "_sum_native")
    ACC = WP_DTYPES[spec.acc_dtype]
    if spec.acc_dtype == "float64":

        @_Named(name).func_native(snip)
        def f64(W: wp.array2d(dtype=ACC), b: int, i: int, S: int, batch: int, lane: int) -> wp.float64: ...

        return f64

    @_Named(name).func_native(snip)
    def f32(W: wp.array2d(dtype=ACC), b: int, i: int, S: int, batch: int, lane: int) -> wp.float32: ...

    return f32


def get_kernel(spec: GemvSpec, partial: bool = False):
    """The kernel for ``spec`` (``partial``: the K-split variant that writes partial sums into the
    workspace), built once per process (thread-safe)."""
    with _factory_lock:
        # colsum's block is its column strip; the fused bands' finish reads its block size
        keep = (spec.kind == "colsum" and spec.lanes > 1) or (spec.kind == "bands" and (spec.fused or
                                                                                         spec.band_groups > 1))
        return _build(dataclasses.replace(spec, block_dim=spec.block_dim if keep else 0, target_warps=0), partial)


def bands_finish_kernel(spec: GemvSpec):
    """bands: the kernel that sums the bands' partial sums and applies the epilogue (thread-safe, cached)."""
    with _factory_lock:
        return _build_sum(dataclasses.replace(spec, block_dim=0, target_warps=0))


def kernels(spec: GemvSpec, partial: bool = False) -> list:
    """Every kernel a launch of ``spec`` may use: the GEMV kernel, and with ``partial`` skinny's
    finishing pass (for ``warp-gemm precompile``); bands: its two kernels."""
    if spec.kind == "bands":
        return [get_kernel(spec, True)] if spec.fused else [get_kernel(spec, True), bands_finish_kernel(spec)]
    ks = [get_kernel(spec, partial)]
    if partial:
        ks.append(skinny.finish_kernel(spec.acc_dtype, spec.out_dtype))
    return ks


@functools.cache
def _native_cached(spec: GemvSpec):
    return _native_func(spec)


def _store_func(spec: GemvSpec, name: str, partial: bool):
    """``store(D, C, W, acc, alpha, beta, b, s, batch, c_nb, r)``: one output element -- the partial sum into
    the workspace (``partial``: K split), else the epilogue (alpha, beta * C, the output cast)."""
    OUT, ACC = WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    AXPBY = spec.epilogue == "axpby"
    PARTIAL = partial

    def store(D: wp.array2d(dtype=OUT), C: wp.array2d(dtype=OUT), W: wp.array2d(dtype=ACC), acc: ACC,
              alpha: ACC, beta: ACC, b: int, s: int, batch: int, c_nb: int, r: int):
        if wp.static(PARTIAL):
            W[s * batch + b, r] = acc
        else:
            y = alpha * acc
            if wp.static(AXPBY):
                y = y + beta * ACC(C[wp.min(b, c_nb - 1), r])
            D[b, r] = OUT(y)

    store_name = func_name(name, "store")
    store.__name__ = store.__qualname__ = store_name
    return wp.func(store, name=store_name)


def _band_rows_func(spec: GemvSpec, name: str):
    """bands with row groups: ``rows(t, s, per, K) -> vec4i(c, k0, k1, grp)`` for launch thread ``t`` of band ``s``:
    its block column ``blk`` and row group ``grp`` (``block_dim / band_groups`` threads each), its first column ``c =
    blk * cols + j * chunk`` (j: its place in the group) and its rows ``[k0, k1)``, the grp-th of the band's
    ``band_groups`` contiguous pieces (empty past K). With one group: ``c = t * chunk``, the band's rows."""
    E, RG, COLS = spec.chunk, spec.band_groups, spec.cols
    BD = max(spec.block_dim, 1)
    GT = BD // RG

    def rows(t: int, s: int, per: int, K: int):
        blk = t // BD
        tl = t - blk * BD
        grp = tl // GT
        sub = (per + RG - 1) // RG
        k0 = s * per + grp * sub
        return wp.vec4i(blk * COLS + (tl - grp * GT) * E, k0, wp.min(K, wp.min(s * per + per, k0 + sub)), grp)

    rows_name = func_name(name, "rows")
    rows.__name__ = rows.__qualname__ = rows_name
    return wp.func(rows, name=rows_name)


@functools.cache
def _build(spec: GemvSpec, partial: bool):
    if spec.kind not in KINDS or spec.epilogue not in ("scale", "axpby"):
        raise ValueError(f"bad gemv spec {spec}")
    IN, OUT, ACC = WP_DTYPES[spec.in_dtype], WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    G, COLS = spec.group, spec.cols
    native = _native_cached(spec)
    name = spec.kernel_key + ("_part" if partial else "")
    if spec.kind == "bands" and spec.fused:
        rows = _band_rows_func(spec, name)

        def bands_fused(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC),
                        cnt: wp.array(dtype=wp.int32), C: wp.array2d(dtype=OUT), D: wp.array2d(dtype=OUT), alpha: ACC,
                        beta: ACC, per: int, batch: int, m_nb: int, v_nb: int, c_nb: int, nfin: int):
            b, s, t = wp.tid()
            r = rows(t, s, per, Mat.shape[1])  # (c, k0, k1, grp)
            native(Mat, vec, W, cnt, D, C, alpha, beta, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), r[0], r[1], r[2],
                   s * batch + b, b, t, W.shape[0] // batch, batch, c_nb, cnt.shape[0] // (2 * batch), nfin, r[3])

        return _compat.make_kernel(bands_fused, name)
    if spec.kind == "bands":
        E, RG = spec.chunk, spec.band_groups
        rows = _band_rows_func(spec, name)

        def bands(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC), per: int,
                  batch: int, m_nb: int, v_nb: int):
            # t last: consecutive threads take consecutive 16-byte chunks of a row
            b, s, t = wp.tid()
            if wp.static(RG == 1):  # (built without its block size: c = t * E, the whole band)
                k0 = s * per
                native(Mat, vec, W, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), t * E, k0,
                       wp.min(Mat.shape[1], k0 + per), s * batch + b, 0)
            else:
                r = rows(t, s, per, Mat.shape[1])  # (c, k0, k1, grp)
                native(Mat, vec, W, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), r[0], r[1], r[2], s * batch + b, r[3])

        return _compat.make_kernel(bands, name)

    store = _store_func(spec, name, partial)
    # The two kinds differ only in which Mat dimension runs along K and in a group's outputs: rowdot one
    # (every lane holds the warp's total; lane 0 stores it), colsum a strip of COLS (thread j stores j).
    ROWDOT = spec.kind == "rowdot"
    PER_GROUP = 1 if ROWDOT else COLS

    def gemv(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), C: wp.array2d(dtype=OUT),
             D: wp.array2d(dtype=OUT), W: wp.array2d(dtype=ACC), alpha: ACC, beta: ACC, per: int,
             batch: int, m_nb: int, v_nb: int, c_nb: int):
        # t last: Warp's fastest-varying index, so a group's threads (a warp's lanes, a block) are consecutive t
        b, s, t = wp.tid()
        g = t // G
        lane = t - g * G
        k0 = s * per
        if wp.static(ROWDOT):
            k1 = wp.min(Mat.shape[2], k0 + per)
            outs = Mat.shape[1]
        else:
            k1 = wp.min(Mat.shape[1], k0 + per)
            outs = Mat.shape[2]
        acc = native(Mat, vec, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), g * PER_GROUP, k0, k1, lane)
        r = g * PER_GROUP + lane
        if lane < PER_GROUP and r < outs:
            store(D, C, W, acc, alpha, beta, b, s, batch, c_nb, r)

    return _compat.make_kernel(gemv, name)


@functools.cache
def _build_sum(spec: GemvSpec):
    OUT, ACC = WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    FB = 32 * _finish_warps(spec)
    native = _native_sum(spec)
    name = spec.kernel_key + "_sum"
    store = _store_func(spec, name, False)  # the epilogue, as the unsplit kernels apply it

    def bands_sum(W: wp.array2d(dtype=ACC), C: wp.array2d(dtype=OUT), D: wp.array2d(dtype=OUT), alpha: ACC,
                  beta: ACC, S: int, batch: int, c_nb: int):
        b, t = wp.tid()
        g = t // FB
        lane = t - g * FB
        acc = native(W, b, g * 32, S, batch, lane)
        r = g * 32 + lane
        if lane < 32 and r < D.shape[1]:
            store(D, C, W, acc, alpha, beta, b, 0, batch, c_nb, r)

    return _compat.make_kernel(bands_sum, name)







def job_kernels(job: tuple) -> list:
    """``[(kernel, block_dim)]`` of a precompile job ``("gemv", spec, partial)``: plain kernels, each module keyed by
    its launch's block size (the finishing pass: Warp's default 256; the bands finish: BANDS_FINISH_WARPS warps)."""
    spec, partial = job[1], job[2]
    if spec.in_dtype == "bfloat16":
        _compat.bf16_dtype()
    finish = 32 * BANDS_FINISH_WARPS if spec.kind == "bands" else 256
    return [(k, spec.block_dim if n == 0 else finish) for n, k in enumerate(kernels(spec, partial))]


