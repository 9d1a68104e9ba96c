"""Host side of the grouped family: temporaries, the table, the launches, the CPU's host path.

``run_grouped_mm`` (one grouped product, ``offs`` read on the device) and ``run_grouped_matmul`` (a list of
independent products, table built on the host) both end in :func:`_launch_gemm`: one launch of the grouped
kernel per operand-layout class. On the CPU with ``options().cpu_backend == "host"`` (the package's
default) ``run_grouped_mm`` multiplies group by group with NumPy instead (the offsets are in host memory
there, and BLAS is faster than the CPU twins of the GPU kernels).
"""

from __future__ import annotations

import sys

import numpy as np
import warp as wp

from . import _deps
from . import kernel as K
from .rules import GROUP_M, choose_spec
from .spec import FNAME, GroupedProblem, operand_layout

_I32, _I64 = wp.int32, wp.int64


def _torch():
    return sys.modules.get("torch")


# --- streams and temporaries -------------------------------------------------------------------------------
_streams: dict = {}


def stream_scope(op):
    """Launch scope of a call: torch's current stream for torch CUDA operands (no sync on entry: the launch
    joins torch's stream, which keeps it capturable), else the device's scope."""
    torch = _torch()
    if op.kind == "torch" and op.device.is_cuda:
        ts = torch.cuda.current_stream(op.device.ordinal)
        key = (ts.device.index, ts.cuda_stream)
        s = _streams.get(key)
        if s is None:
            if len(_streams) >= 64:
                _streams.clear()
            s = _streams[key] = (wp.stream_from_torch(ts), ts)  # keep ts alive: its handle stays unique
        return wp.ScopedStream(s[0], sync_enter=False)
    return wp.ScopedDevice(op.device)


def _scratch(op, n_int64: int, host: np.ndarray | None = None):
    """``(keep-alive object, device pointer)`` of ``n_int64`` int64s on ``op``'s device, zeroed (or ``host``'s
    values): torch's caching allocator for torch operands (stream-ordered, capturable), else Warp's."""
    torch = _torch()
    if op.kind == "torch" and torch is not None:
        if host is not None:
            t = torch.from_numpy(host.reshape(-1)).to(op.obj.device, non_blocking=True)
        else:
            t = torch.zeros(n_int64, dtype=torch.int64, device=op.obj.device)
        return t, t.data_ptr()
    if host is not None:
        a = wp.array(host.reshape(-1), dtype=_I64, device=op.device)
    else:
        a = wp.zeros(n_int64, dtype=_I64, device=op.device)
    return a, a.ptr


def _table_views(ptr: int, rows: int, dev):
    table = _deps.raw_view(ptr, _I64, (rows, K.TABLE_COLS), (8 * K.TABLE_COLS, 8), dev)
    status = _deps.raw_view(ptr + 8 * rows * K.TABLE_COLS, _I32, (1,), (4,), dev)
    return table, status


def contiguous(x, op):
    """A contiguous copy of ``x`` in its own container (an operand neither of whose last two dimensions has
    unit stride)."""
    if op.kind == "torch":
        return x.contiguous()
    if op.kind == "numpy":
        return np.ascontiguousarray(x)
    y = wp.empty(x.shape, dtype=x.dtype, device=x.device)
    wp.copy(y, x)
    return y


def offs_view(offs, dev):
    """``(Warp int32 view, keep-alive object)`` of the caller's ``offs`` (validated: 1-D int32, on ``dev``, or
    in host memory for the CPU)."""
    torch = _torch()
    if isinstance(offs, wp.array):
        return offs, offs
    if torch is not None and isinstance(offs, torch.Tensor):
        return _deps.raw_view(offs.data_ptr(), _I32, (offs.shape[0],), (offs.stride(0) * 4,), dev), offs
    a = np.ascontiguousarray(offs)
    return _deps.raw_view(a.ctypes.data, _I32, (a.shape[0],), (4,), dev), a


def aligned(op, lay) -> bool:
    """Whether every row of every group of ``op`` starts on a 16-byte boundary (base, stored row stride, batch
    stride, and a split along the stored rows): then the copies skip their run-time check."""
    it = _deps.ITEMSIZE[op.dtype]
    return (op.ptr % 16 == 0 and (lay.ld * it) % 16 == 0 and lay.gs % 16 == 0
            and lay.js in (0, lay.ld * it))


# --- one grouped product -------------------------------------------------------------------------------------
def run_grouped_mm(p: GroupedProblem, A, B, offs, offs_host, bias, result, D, tf32: bool, spec=None):
    """Compute ``p`` into ``D`` (the Operand of ``result``, a new contiguous array of ``p.out_shape``) and add
    ``bias``; returns ``result``. ``offs``: the caller's offsets (None for 3d3d); ``offs_host``: their values
    when they are in host memory. ``spec``: a kernel configuration to use instead of the rules' (tests)."""
    if D.size == 0:
        return result
    if A.device.is_cpu and spec is None and _deps.options().cpu_backend == "host":
        _host_grouped(p, A, B, offs_host, bias, result)
        return result
    if p.a.layout == "copy" or p.b.layout == "copy":  # strided both ways: one contiguous copy
        from .spec import _desc

        if p.a.layout == "copy":
            A = _desc(contiguous(A.obj, A), "mat_a", FNAME)
            p = _relayout(p, a=A)
        if p.b.layout == "copy":
            B = _desc(contiguous(B.obj, B), "mat_b", FNAME)
            p = _relayout(p, b=B)
    tf32 = bool(tf32 and p.in_dtype == "float32" and _deps._compat.HAS_TF32 and (not A.device.is_cpu or spec))
    typical_m = p.M if p.case != "2d3d" else max(1, p.total // max(p.G, 1))
    typical_n = p.N if p.case != "3d2d" else max(1, p.total // max(p.G, 1))
    if spec is None:
        spec = choose_spec(p.in_dtype, p.out_dtype, tf32, p.a.layout + p.b.layout, A.device.is_cpu, typical_m,
                           typical_n)
    checked = not (aligned(A, p.a) and aligned(B, p.b))
    G = p.G
    it_out = _deps.ITEMSIZE[p.out_dtype]
    rows = G + 2
    keep, ptr = _scratch(A, rows * K.TABLE_COLS + 1)
    dev = A.device
    table, status = _table_views(ptr, rows, dev)
    if offs is not None and G > 0:
        o, keep_offs = offs_view(offs, dev)
    else:
        o, keep_offs = _deps.raw_view(ptr, _I32, (0,), (4,), dev), None
    M, N, Kd = p.M, p.N, p.K
    if p.case == "2d3d":
        d_gs, d_js, ldd, err_rows = 0, p.N * it_out, p.N, p.total
    elif p.case == "3d2d":
        N = p.total
        d_gs, d_js, ldd, err_rows = 0, it_out, p.total, p.M
    else:
        d_gs, d_js, ldd, err_rows = p.M * p.N * it_out, 0, p.N, G * p.M
    with stream_scope(A):
        _deps.launch(K.table_kernel(), (rows,),
                     [o, G, p.jag, p.total, A.ptr, p.a.gs, p.a.js, B.ptr, p.b.gs, p.b.js, D.ptr, d_gs, d_js,
                      M, N, Kd, p.a.ld, p.b.ld, ldd, spec.tm, spec.tn, err_rows, ldd, table, status], dev,
                     tiled=False)
        bound = K.grid_bound(p.jag, G, p.total, M, N, spec.tm, spec.tn)
        _launch_gemm(spec, checked, table, G, status, bound, dev)
        if bias is not None:
            _add_bias(p, bias, D, offs, o, dev)
        del keep, keep_offs  # stream-ordered frees: torch's allocator, or Warp's on this stream
    return result


def _relayout(p: GroupedProblem, a=None, b=None) -> GroupedProblem:
    from dataclasses import replace

    split_a = {"2d3d": "rows", "3d2d": "batch", "2d2d": "cols", "3d3d": "batch"}[p.case]
    split_b = {"2d3d": "batch", "3d2d": "cols", "2d2d": "rows", "3d3d": "batch"}[p.case]
    if a is not None:
        p = replace(p, a=operand_layout(a, split_a))
    if b is not None:
        p = replace(p, b=operand_layout(b, split_b))
    return p


def _launch_gemm(spec, checked: bool, table, n_groups: int, status, bound: int, dev) -> None:
    if bound <= 0:
        return
    k = K.get_kernel(spec, checked)
    block = 1 if dev.is_cpu else spec.block_dim
    nan = float("nan")
    _deps.launch(k, (1, bound), [table, n_groups, status, 1.0, nan, GROUP_M], dev, block)


def _add_bias(p: GroupedProblem, bias, D, offs, o, dev) -> None:
    it = _deps.ITEMSIZE[bias.dtype]
    cols = p.out_shape[-1]
    nb_rows = bias.shape[0] if len(bias.shape) == 2 else 1
    col_stride = bias.strides[-1] * it
    row_stride = bias.strides[0] * it if len(bias.shape) == 2 else 0
    bview = _deps.raw_view(bias.ptr, _deps.WP_DTYPES[bias.dtype], (nb_rows, cols), (row_stride, col_stride), dev)
    ito = _deps.ITEMSIZE[p.out_dtype]
    if len(p.out_shape) == 3:
        nb, r, c = p.out_shape
        mode = 0
    else:
        nb, (r, c) = 1, p.out_shape
        mode = 1 if p.case == "2d3d" else 2
    oview = _deps.raw_view(D.ptr, _deps.WP_DTYPES[p.out_dtype], (nb, r, c), (r * c * ito, c * ito, ito), dev)
    _deps.launch(K.bias_kernel(p.out_dtype), (nb, r, c), [oview, bview, o, p.G, mode], dev, tiled=False)


# --- the CPU's host path ---------------------------------------------------------------------------------------
def _np_view(op):
    """A float NumPy array with ``op``'s values (a view where the container allows it)."""
    x = op.obj
    if op.kind == "numpy":
        return x
    if op.kind == "torch":
        return (x.float() if op.dtype == "bfloat16" else x).detach().numpy()
    if op.dtype == "bfloat16":
        raw = x.numpy().view(np.uint16).astype(np.uint32) << 16
        return raw.view(np.float32)
    return x.numpy()


def _host_grouped(p: GroupedProblem, A, B, host, bias, result) -> None:
    """``p`` on the CPU, group by group with NumPy in the accumulation dtype, written into ``result``."""
    acc = np.float64 if p.in_dtype == "float64" else np.float32
    a = _np_view(A).astype(acc, copy=False)
    b = _np_view(B).astype(acc, copy=False)
    out = np.zeros(p.out_shape, dtype=acc)
    ends = [int(v) for v in host] if host is not None else []
    starts = [0] + ends[:-1]
    if p.case == "2d3d":
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[s:e] = a[s:e] @ b[g]
    elif p.case == "3d2d":
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[:, s:e] = a[g] @ b[:, s:e]
    elif p.case == "2d2d":
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[g] = a[:, s:e] @ b[s:e]
    else:
        out[...] = np.matmul(a, b)
    if bias is not None:
        bv = _np_view(bias).astype(acc, copy=False).reshape(-1, p.out_shape[-1])
        if p.case == "2d3d":
            for g, (s, e) in enumerate(zip(starts, ends)):
                out[s:e] += bv[min(g, len(bv) - 1)]
        elif p.case == "3d2d":
            end = ends[-1] if ends else 0
            out[:, :end] += bv[0, :end]
        else:
            out += bv[:, None, :] if len(bv) > 1 else bv[0]
    _store_host(result, out, p.out_dtype)


def _store_host(result, out: np.ndarray, dtype: str) -> None:
    torch = _torch()
    if isinstance(result, np.ndarray):
        result[...] = out.astype(result.dtype)
    elif torch is not None and isinstance(result, torch.Tensor):
        result.copy_(torch.from_numpy(out))
    else:
        if dtype == "bfloat16":
            f = out.astype(np.float32)
            u = f.view(np.uint32)
            u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
            result.assign(wp.array(u, dtype=wp.uint16, device="cpu").view(wp.bfloat16))
        else:
            result.assign(out.astype(np.dtype(dtype)))


# --- a list of independent products -----------------------------------------------------------------------------
def run_grouped_matmul(meta, dev, kind_op, in_dtype: str, out_dtype: str, tf32: bool, spec=None) -> None:
    """``D_i = A_i @ B_i`` for every product of ``meta`` (:class:`ListMeta`: NumPy columns of pointers, sizes,
    layouts and row strides, validated). One launch of the grouped kernel per class of operand layouts (NN, NT,
    TN, TT present); the table is built on the host with NumPy and copied to the device once per class.
    ``kind_op``: an Operand whose container and device hold the temporaries."""
    live = (meta.m > 0) & (meta.n > 0)
    tf32 = bool(tf32 and in_dtype == "float32" and _deps._compat.HAS_TF32 and (not dev.is_cpu or spec))
    it = _deps.ITEMSIZE[in_dtype]
    keeps = []
    with stream_scope(kind_op):
        for code, layout in enumerate(("NN", "NT", "TN", "TT")):
            sel = np.nonzero(live & (meta.layout == code))[0]
            n = len(sel)
            if n == 0:
                continue
            ms, ns, ks = meta.m[sel], meta.n[sel], meta.k[sel]
            sp = spec or choose_spec(in_dtype, out_dtype, tf32, layout, dev.is_cpu, int(np.median(ms)),
                                     int(np.median(ns)))
            tiles = (-(-ms // sp.tm)) * (-(-ns // sp.tn))
            tab = np.zeros((n + 3, K.TABLE_COLS), dtype=np.int64)  # + the tail, the error row, the status word
            tab[:n, K.A_PTR] = meta.a_ptr[sel]
            tab[:n, K.B_PTR] = meta.b_ptr[sel]
            tab[:n, K.D_PTR] = meta.d_ptr[sel]
            tab[:n, K.COL_M] = ms
            tab[:n, K.COL_N] = ns
            tab[:n, K.COL_K] = ks
            tab[:n, K.LDA] = meta.lda[sel]
            tab[:n, K.LDB] = meta.ldb[sel]
            tab[:n, K.LDD] = meta.ldd[sel]
            csum = np.cumsum(tiles)
            tab[1:n, K.FIRST] = csum[:-1]
            total = int(csum[-1])
            tab[n, K.FIRST] = total  # the tail: no tiles
            ok = ((meta.a_ptr[sel] % 16 == 0) & (meta.b_ptr[sel] % 16 == 0) & ((meta.lda[sel] * it) % 16 == 0)
                  & ((meta.ldb[sel] * it) % 16 == 0))
            keep, ptr = _scratch(kind_op, tab.size, tab)
            keeps.append(keep)
            table, status = _table_views(ptr, n + 2, dev)
            _launch_gemm(sp, not bool(ok.all()), table, n, status, total, dev)
        del keeps  # stream-ordered frees: torch's allocator, or Warp's on this stream
