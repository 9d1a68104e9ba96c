"""Grouped products through the core: operands -> checks -> the grouped family's launches.

:func:`grouped_mm` (one grouped product, ``offs`` read on the device) and :func:`grouped_matmul` (a list of
independent products, the table built on the host) take any container (torch, wp.array, NumPy) and return
the caller's container on its device. Checks come first and raise ``TypeError`` / ``ValueError`` naming the
shapes and dtypes; nothing is allocated on the device or launched before they pass. On the CPU with
``options().cpu_backend == "host"`` (the package's default) a grouped product is computed group by group
with NumPy instead of the CPU twins of the GPU kernels (the offsets are in host memory there).
"""

from __future__ import annotations

import itertools
import operator
import sys

import numpy as np
import warp as wp

from warp_gemm import _compat
from warp_gemm.core.launches import launch
from warp_gemm.core.lru import LRU
from warp_gemm.core.operands import ITEMSIZE, describe, empty_like_caller, raw_view
from warp_gemm.core.options import options
from warp_gemm.families.common.kernels import WP_DTYPES
from warp_gemm.families.grouped import kernel as _kernel
from warp_gemm.families.grouped import launch as _args
from warp_gemm.families.grouped.spec import GroupedProblem, aligned, problem, typical_sizes

MM = "grouped_mm"
LIST = "grouped_matmul"
_I32, _I64 = wp.int32, wp.int64


def _torch():
    return sys.modules.get("torch")


def _desc(x, name: str, fname: str):
    try:
        return describe(x, name)
    except TypeError as e:
        raise TypeError(f"{fname}: {e}") from None


# --- checks ----------------------------------------------------------------------------------------------------
def out_dtype_name(out_dtype, in_dtype: str, fname: str = MM) -> str:
    """The result's dtype name: ``in_dtype`` when None; else a torch / NumPy / Warp dtype or its name. 16-bit
    inputs may give float32 results; other inputs their own dtype."""
    if out_dtype is None:
        return in_dtype
    name = getattr(out_dtype, "__name__", None) or str(out_dtype)
    name = name.replace("torch.", "")
    name = {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)
    allowed = (in_dtype, "float32") if in_dtype in ("float16", "bfloat16") else (in_dtype,)
    if name not in allowed:
        raise TypeError(f"{fname}: out_dtype {name} is not available for {in_dtype} inputs (allowed: "
                        f"{', '.join(allowed)})")
    return name


def offs_info(offs, fname: str = MM):
    """``(G, device name, host values or None)`` of ``offs``, a 1-D int32 torch tensor, wp.array or NumPy
    array; the values are read only where ``offs`` lies in host memory."""
    torch = _torch()
    if isinstance(offs, np.ndarray):
        dt, ndim, dev = str(offs.dtype), offs.ndim, "cpu"
        host = offs if dt == "int32" and ndim == 1 else None
    elif torch is not None and isinstance(offs, torch.Tensor):
        dt, ndim = str(offs.dtype).replace("torch.", ""), offs.dim()
        if offs.device.type == "cpu":
            dev = "cpu"
        else:
            idx = offs.device.index if offs.device.index is not None else torch.cuda.current_device()
            dev = f"{offs.device.type}:{idx}"
        host = offs.detach().numpy() if dev == "cpu" and dt == "int32" and ndim == 1 else None
    elif isinstance(offs, wp.array):
        dt = {wp.int32: "int32", wp.int64: "int64"}.get(offs.dtype, getattr(offs.dtype, "__name__", str(offs.dtype)))
        ndim, dev = offs.ndim, str(offs.device)
        host = offs.numpy() if offs.device.is_cpu and dt == "int32" and ndim == 1 else None
    else:
        raise TypeError(f"{fname}: offs is a {type(offs).__module__}.{type(offs).__name__}; pass a 1-D int32 "
                        "torch.Tensor, wp.array or numpy.ndarray")
    if dt != "int32":
        raise TypeError(f"{fname}: offs must be int32, got {dt} of shape {list(offs.shape)}")
    if ndim != 1:
        raise ValueError(f"{fname}: offs must be 1-D, got shape {list(offs.shape)}")
    return int(offs.shape[0]), dev, host


def check_offs_values(host, total: int, what: str, fname: str = MM) -> None:
    """ValueError unless ``host`` (group ends) is non-negative, non-decreasing and at most ``total``."""
    if host is None or len(host) == 0:
        return
    v = np.asarray(host, dtype=np.int64)
    if v[0] < 0:
        raise ValueError(f"{fname}: offs starts at {int(v[0])}; group ends must be >= 0")
    d = np.diff(v)
    if (d < 0).any():
        i = int(np.argmax(d < 0))
        raise ValueError(f"{fname}: offs decreases at index {i + 1} ({int(v[i])} then {int(v[i + 1])}); group "
                         "ends must be non-decreasing")
    if v[-1] > total:
        raise ValueError(f"{fname}: offs[-1] = {int(v[-1])} is past the {total} {what} it splits")


_SPLIT_WHAT = {"2d3d": "rows of mat_a", "3d2d": "columns of mat_b", "2d2d": "columns of mat_a (rows of mat_b)"}


def validate(mat_a, mat_b, offs, bias, out_dtype, fname: str = MM):
    """``(problem, A, B, host offs or None, bias Operand or None)`` for a grouped product, or TypeError /
    ValueError naming the shapes and dtypes. Nothing is allocated or launched."""
    A = _desc(mat_a, "mat_a", fname)
    B = _desc(mat_b, "mat_b", fname)
    if A.ndim not in (2, 3) or B.ndim not in (2, 3):
        raise ValueError(f"{fname}: mat_a and mat_b must be 2-D or 3-D; got mat_a {A.dtype}{list(A.shape)}, mat_b "
                         f"{B.dtype}{list(B.shape)}")
    if A.dtype != B.dtype:
        raise TypeError(f"{fname}: mat_a is {A.dtype}{list(A.shape)} but mat_b is {B.dtype}{list(B.shape)}; "
                        "both must have one dtype")
    if A.kind != B.kind:
        raise TypeError(f"{fname}: mat_a is a {A.kind} array and mat_b a {B.kind} array; pass one container type")
    if str(A.device) != str(B.device):
        raise ValueError(f"{fname}: mat_a ({A.dtype}{list(A.shape)}) is on {A.device} and mat_b "
                         f"({B.dtype}{list(B.shape)}) on {B.device}; both must be on one device")
    case = f"{A.ndim}d{B.ndim}d"
    K, K2 = (A.shape[1], B.shape[0]) if case == "2d2d" else (A.shape[-1], B.shape[-2])
    if K != K2:
        raise ValueError(f"{fname}: contraction dimensions differ: mat_a {A.dtype}{list(A.shape)}, mat_b "
                         f"{B.dtype}{list(B.shape)} ({K} != {K2})")
    host = None
    if case == "3d3d":
        if offs is not None:
            raise ValueError(f"{fname}: offs is given, but 3-D x 3-D operands (mat_a {list(A.shape)}, mat_b "
                             f"{list(B.shape)}) take none")
        if A.shape[0] != B.shape[0]:
            raise ValueError(f"{fname}: group counts differ: mat_a {list(A.shape)} has {A.shape[0]}, mat_b "
                             f"{list(B.shape)} has {B.shape[0]}")
        G = A.shape[0]
    else:
        if offs is None:
            raise ValueError(f"{fname}: mat_a {list(A.shape)} and mat_b {list(B.shape)} need offs (a 2-D operand "
                             "is split into groups)")
        G, odev, host = offs_info(offs, fname)
        if odev != str(A.device):
            raise ValueError(f"{fname}: offs is on {odev} but mat_a {list(A.shape)} and mat_b {list(B.shape)} are on "
                             f"{A.device}; put offs on their device")
        three = A if case == "3d2d" else B
        if case in ("2d3d", "3d2d") and three.shape[0] != G:
            raise ValueError(f"{fname}: group counts differ: offs {list(offs.shape)} has {G} groups, "
                             f"{'mat_a' if case == '3d2d' else 'mat_b'} {list(three.shape)} has {three.shape[0]}")
    out_dt = out_dtype_name(out_dtype, A.dtype, fname)
    p = problem(case, G, A.shape, A.strides, B.shape, B.strides, ITEMSIZE[A.dtype], A.dtype, out_dt)
    if case != "3d3d":
        check_offs_values(host, p.total, _SPLIT_WHAT[case], fname)
    Bi = None
    if bias is not None:
        Bi = _desc(bias, "bias", fname)
        if Bi.dtype != out_dt:
            raise TypeError(f"{fname}: bias is {Bi.dtype}{list(Bi.shape)} but the result is {out_dt}; pass a bias "
                            "of the result's dtype")
        if str(Bi.device) != str(A.device) or Bi.kind != A.kind:
            raise ValueError(f"{fname}: bias is a {Bi.kind} array on {Bi.device}; the operands are {A.kind} arrays on "
                             f"{A.device}")
        cols = p.out_shape[-1]
        ok = Bi.shape in ((cols,), (1, cols)) or (case != "3d2d" and Bi.shape == (G, cols))
        if not ok:
            allowed = f"({cols},) or (1, {cols})" + ("" if case == "3d2d" else f" or ({G}, {cols}) (a row per group)")
            raise ValueError(f"{fname}: bias has shape {list(Bi.shape)}; for mat_a {list(A.shape)} and mat_b "
                             f"{list(B.shape)} it must be {allowed}")
    return p, A, B, host, Bi


# --- streams and temporaries ---------------------------------------------------------------------------------------
_streams: dict = {}


def stream_scope(op):
    """Launch scope of a call: torch's current stream for torch CUDA operands (no sync on entry: the launches
    join torch's stream, which keeps them capturable), else the device's scope."""
    if op.kind == "torch" and op.device.is_cuda:
        torch = _torch()
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
    table = raw_view(ptr, _I64, (rows, _kernel.TABLE_COLS), (8 * _kernel.TABLE_COLS, 8), dev)
    status = raw_view(ptr + 8 * rows * _kernel.TABLE_COLS, _I32, (1,), (4,), dev)
    return table, status


def _offs_view(offs, dev):
    """``(Warp int32 view, keep-alive object)`` of validated ``offs``."""
    torch = _torch()
    if isinstance(offs, wp.array):
        return offs, offs
    if torch is not None and isinstance(offs, torch.Tensor):
        return raw_view(offs.data_ptr(), _I32, (offs.shape[0],), (offs.stride(0) * 4,), dev), offs
    a = np.ascontiguousarray(offs)
    return raw_view(a.ctypes.data, _I32, (a.shape[0],), (4,), dev), a


def _contiguous(x, op, fname):
    """A contiguous copy of an operand neither of whose last two dimensions has unit stride."""
    if op.kind == "torch":
        y = x.contiguous()
    elif op.kind == "numpy":
        y = np.ascontiguousarray(x)
    else:
        y = wp.empty(x.shape, dtype=x.dtype, device=x.device)
        wp.copy(y, x)
    return y, _desc(y, "operand", fname)


def _tf32(allow: bool, in_dtype: str, dev, forced_spec) -> bool:
    """TF32 products where asked for, on float32 inputs, with a Warp that has them, on CUDA (or a test's spec)."""
    return bool(allow and in_dtype == "float32" and _compat.HAS_TF32 and (not dev.is_cpu or forced_spec is not None))


# --- one grouped product -------------------------------------------------------------------------------------------
# The torch MoE call (CUDA, 2-D mat_a x 3-D mat_b, no bias) on the Hopper kernel skips the checks, the problem
# description and the rules when a call of the same signature took that kernel before: everything they decide
# follows from the key (each operand's type, shape, strides, dtype and device, offs's too, the addresses' 16-byte
# alignment, out_dtype, allow_tf32 and the options); offs's values are read on the device either way. Host time
# per call (H100 host, 8 experts, bf16 and fp16): 85-95 us kept against 146-149 us through the checks every call
# (F.grouped_mm 27-151 us); the suite's timer counts it in full.
_fast_mm = LRU(64)


class _FastMM:
    __slots__ = ("dev", "op", "p", "shape", "sm", "spec")

    def __init__(self, p, spec, shape, dev, sm, tdev):
        self.p, self.spec, self.shape, self.dev, self.sm = p, spec, shape, dev, sm
        self.op = _TorchRef(dev, tdev)


class _TorchRef:
    """What :func:`stream_scope` and ``empty_like_caller`` read of a torch operand (kind, Warp device, the torch
    device as ``obj.device``), holding no tensor."""

    __slots__ = ("device", "kind", "obj")

    def __init__(self, dev, tdev):
        self.kind, self.device, self.obj = "torch", dev, _TorchDevice(tdev)


class _TorchDevice:
    __slots__ = ("device",)

    def __init__(self, tdev):
        self.device = tdev


def _on_cuda(t) -> bool:
    return t.is_cuda


def _fast_mm_key(mat_a, mat_b, offs, bias, out_dtype, allow_tf32):
    """The fast path's key of a call, or None where the call is not a torch 2-D x 3-D product on CUDA without
    bias."""
    torch = _torch()
    if bias is not None or torch is None:
        return None
    T = torch.Tensor
    if type(mat_a) is not T or type(mat_b) is not T or type(offs) is not T or not _on_cuda(mat_a):
        return None
    if mat_a.dim() != 2 or mat_b.dim() != 3:
        return None
    return (mat_a.shape, mat_a.stride(), mat_a.dtype, mat_a.device, mat_a.data_ptr() % 16, mat_b.shape,
            mat_b.stride(), mat_b.dtype, mat_b.device, mat_b.data_ptr() % 16, offs.shape, offs.stride(),
            offs.dtype, offs.device, out_dtype, bool(allow_tf32), options())


def _fast_mm_run(e: _FastMM, mat_a, mat_b, offs):
    result = empty_like_caller("torch", e.op, e.shape, e.p.out_dtype)
    with stream_scope(e.op):
        o = raw_view(offs.data_ptr(), _I32, (e.p.G,), (offs.stride(0) * 4,), e.dev)
        k, dim, inputs, block = _args.hopper_launch(e.p, e.spec, mat_a.data_ptr(), mat_b.data_ptr(),
                                                    result.data_ptr(), o, e.dev, e.sm)
        launch(k, dim, inputs, e.dev, block)
    return result


def grouped_mm(mat_a, mat_b, offs, bias, out_dtype, allow_tf32: bool = False, spec=None):
    """``warp_gemm.grouped_mm`` into a new result of ``mat_a``'s container type on its device. ``spec``: a kernel
    configuration instead of the rules' (tests)."""
    fk = _fast_mm_key(mat_a, mat_b, offs, bias, out_dtype, allow_tf32) if spec is None else None
    if fk is not None:
        e = _fast_mm.get(fk)
        if e is not None:
            return _fast_mm_run(e, mat_a, mat_b, offs)
    p, A, B, host, Bi = validate(mat_a, mat_b, offs, bias, out_dtype)
    result = empty_like_caller(A.kind, A, p.out_shape, p.out_dtype)
    D = describe(result, "result")
    if D.size == 0:
        return result
    dev = A.device
    if dev.is_cpu and spec is None and options().cpu_backend == "host":
        _host_grouped(p, A, B, host, Bi, result)
        return result
    if p.a.layout == "copy" or p.b.layout == "copy":
        fk = None  # the launch reads a copy made by this call
    if p.a.layout == "copy":
        mat_a, A = _contiguous(mat_a, A, MM)
    if p.b.layout == "copy":
        mat_b, B = _contiguous(mat_b, B, MM)
    p = problem(p.case, p.G, A.shape, A.strides, B.shape, B.strides, ITEMSIZE[A.dtype], p.in_dtype, p.out_dtype)
    from warp_gemm.families.grouped import rules

    tf32 = _tf32(allow_tf32, p.in_dtype, dev, spec)
    hspec = _hopper_spec(p, A, B, dev, allow_tf32, spec)
    if hspec is not None:
        with stream_scope(A):
            o, keep_offs = _offs_view(offs, dev)
            sm = _compat.sm_count(dev)
            k, dim, inputs, block = _args.hopper_launch(p, hspec, A.ptr, B.ptr, D.ptr, o, dev, sm)
            launch(k, dim, inputs, dev, block)
            _bias_pass(p, Bi, D, o, item_out=ITEMSIZE[p.out_dtype], dev=dev)
            del keep_offs
        if fk is not None:
            _fast_mm.put(fk, _FastMM(p, hspec, p.out_shape, dev, sm, mat_a.device))
        return result
    if spec is None:
        tm, tn = typical_sizes(p)
        spec = rules.choose_spec(p.in_dtype, p.out_dtype, tf32, p.a.layout + p.b.layout, dev.is_cpu, tm, tn)
    item, item_out = ITEMSIZE[p.in_dtype], ITEMSIZE[p.out_dtype]
    checked = not (aligned(A.ptr, p.a, item) and aligned(B.ptr, p.b, item))
    rows = p.G + 2
    with stream_scope(A):
        keep, ptr = _scratch(A, rows * _kernel.TABLE_COLS + 1)
        table, status = _table_views(ptr, rows, dev)
        if offs is not None and p.G > 0:
            o, keep_offs = _offs_view(offs, dev)
        else:
            o, keep_offs = raw_view(ptr, _I32, (0,), (4,), dev), None
        k, dim, inputs = _args.table_launch(p, spec, A.ptr, B.ptr, D.ptr, item_out, o, table, status)
        launch(k, dim, inputs, dev, tiled=False)
        blocks = _args.bound(p, spec)
        if blocks > 0:
            k, dim, inputs, block = _args.gemm_launch(spec, checked, table, p.G, status, blocks, dev.is_cpu)
            launch(k, dim, inputs, dev, block)
        _bias_pass(p, Bi, D, o, item_out, dev)
        del keep, keep_offs  # stream-ordered frees: torch's allocator, or Warp's on this stream
    return result


def _hopper_spec(p: GroupedProblem, A, B, dev, allow_tf32: bool, spec):
    """The Hopper grouped kernel's configuration for ``p`` where it applies and the rules take it (``spec`` a
    HopperSpec: that one, or ValueError naming why it cannot run; another ``spec``: None), else None."""
    from warp_gemm.families.grouped import rules
    from warp_gemm.families.grouped._deps import HopperSpec

    forced = isinstance(spec, HopperSpec)
    if spec is not None and not forced:
        return None
    if not forced and (dev.is_cpu or not options().hopper):
        return None
    tf32 = bool(allow_tf32 and p.in_dtype == "float32" and _compat.HAS_TF32)
    why = rules.hopper_reason(p, A.ptr, B.ptr, dev, tf32)
    if forced:
        from warp_gemm.families.grouped.hopper import unfit

        why = why or unfit(spec)
        if not why and (spec.in_dtype, spec.out_dtype, spec.layout_b) != (p.in_dtype, p.out_dtype, p.b.layout):
            why = (f"the spec is {spec.in_dtype} -> {spec.out_dtype}, B layout {spec.layout_b}; the product is "
                   f"{p.in_dtype} -> {p.out_dtype}, B layout {p.b.layout}")
        if why:
            raise ValueError(f"{MM}: cannot run {spec.key} on mat_a {p.in_dtype}{list(A.shape)}, mat_b "
                             f"{list(B.shape)}: {why}")
        return spec
    if why or not rules.use_hopper(p):
        return None
    return rules.hopper_choice(p, _compat.sm_count(dev))


def _bias_pass(p: GroupedProblem, Bi, D, o, item_out: int, dev) -> None:
    """The bias pass over the result (``o``: the offs view) where a bias is given."""
    if Bi is None:
        return
    out3 = raw_view(D.ptr, WP_DTYPES[p.out_dtype], _as3(p.out_shape), _strides3(p.out_shape, item_out), dev)
    k, dim, inputs = _args.bias_launch(p, out3, _bias2(Bi, p.out_shape[-1], dev), o)
    launch(k, dim, inputs, dev, tiled=False)


def _as3(shape):
    return tuple(shape) if len(shape) == 3 else (1, *shape)


def _strides3(shape, item):
    s = _as3(shape)
    return (s[1] * s[2] * item, s[2] * item, item)


def _bias2(Bi, cols: int, dev):
    it = ITEMSIZE[Bi.dtype]
    rows = Bi.shape[0] if len(Bi.shape) == 2 else 1
    rs = Bi.strides[0] * it if len(Bi.shape) == 2 else 0
    return raw_view(Bi.ptr, WP_DTYPES[Bi.dtype], (rows, cols), (rs, Bi.strides[-1] * it), dev)


# --- the CPU's host path ---------------------------------------------------------------------------------------------
def _np_view(op):
    """A float NumPy array with ``op``'s values (a view where the container allows it)."""
    x = op.obj
    if op.kind == "numpy":
        return x
    if op.kind == "torch":
        return (x.float() if op.dtype == "bfloat16" else x).detach().numpy()
    if op.dtype == "bfloat16":
        u16 = wp.array(ptr=x.ptr, dtype=wp.uint16, shape=x.shape, strides=x.strides, capacity=x.capacity,
                       device=x.device).numpy()
        return (u16.astype(np.uint32) << 16).view(np.float32)
    return x.numpy()


def _host_grouped(p: GroupedProblem, A, B, host, Bi, result) -> None:
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
    if Bi is not None:
        bv = _np_view(Bi).astype(acc, copy=False).reshape(-1, p.out_shape[-1])
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
    elif dtype == "bfloat16":
        u = np.ascontiguousarray(out, dtype=np.float32).view(np.uint32)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
        wp.copy(wp.array(ptr=result.ptr, dtype=wp.uint16, shape=result.shape, strides=result.strides,
                         capacity=result.capacity, device=result.device), wp.array(bits, dtype=wp.uint16, device="cpu"))
    else:
        result.assign(out.astype(np.dtype(dtype)))


# --- a list of products ----------------------------------------------------------------------------------------------
_DTYPE, _SHAPE = operator.attrgetter("dtype"), operator.attrgetter("shape")


def _columns(xs, name: str):
    """``(first Operand, pointers, shapes (L, 2), element strides (L, 2))`` of a list of 2-D arrays of one
    container type, dtype and device; TypeError / ValueError naming the first that differs."""
    torch = _torch()
    first = _desc(xs[0], f"{name}[0]", LIST)
    kind = first.kind
    if kind == "torch":
        T = torch.Tensor
        # per-tensor reads through map() of the type's own methods: the loop runs in C (a Python comprehension per
        # attribute was most of a 1000-matrix list's host time)
        bad = [] if set(map(type, xs)) == {T} else [i for i, x in enumerate(xs) if not isinstance(x, T)]
        dts = set(map(_DTYPE, xs)) if not bad else set()
        devs = set(map(T.get_device, xs)) if not bad else set()
    elif kind == "warp":
        bad = [i for i, x in enumerate(xs) if not isinstance(x, wp.array)]
        dts = {x.dtype for x in xs} if not bad else set()
        devs = {str(x.device) for x in xs} if not bad else set()
    else:
        bad = [i for i, x in enumerate(xs) if not isinstance(x, np.ndarray)]
        dts = {x.dtype for x in xs} if not bad else set()
        devs = {"cpu"}
    if bad:
        raise TypeError(f"{LIST}: {name}[0] is a {kind} array but {name}[{bad[0]}] is a "
                        f"{type(xs[bad[0]]).__module__}.{type(xs[bad[0]]).__name__}; pass one container type")
    if len(dts) > 1:
        i = next(i for i, x in enumerate(xs) if x.dtype != xs[0].dtype)
        raise TypeError(f"{LIST}: {name}[0] is {first.dtype}{list(first.shape)} but {name}[{i}] is "
                        f"{str(xs[i].dtype).replace('torch.', '')}{list(xs[i].shape)}; every operand must have one "
                        "dtype")
    if len(devs) > 1:
        raise ValueError(f"{LIST}: the {name} operands are on several devices ({sorted(map(str, devs))}); put them "
                         "on one")
    if kind == "torch":
        n = len(xs)
        if set(map(T.dim, xs)) == {2}:
            chain = itertools.chain.from_iterable
            return (first, np.fromiter(map(T.data_ptr, xs), np.int64, n),
                    np.fromiter(chain(map(_SHAPE, xs)), np.int64, 2 * n).reshape(n, 2),
                    np.fromiter(chain(map(T.stride, xs)), np.int64, 2 * n).reshape(n, 2))
        shapes = [tuple(x.shape) for x in xs]
        strides = ptrs = []
    elif kind == "warp":
        it = ITEMSIZE[first.dtype]
        shapes = [tuple(x.shape) for x in xs]
        strides = [tuple(s // it for s in x.strides) for x in xs]
        ptrs = [x.ptr or 0 for x in xs]
    else:
        ops = [_desc(x, f"{name}[{i}]", LIST) for i, x in enumerate(xs)]
        shapes = [o.shape for o in ops]
        strides = [o.strides for o in ops]
        ptrs = [o.ptr for o in ops]
    wrong = [i for i, s in enumerate(shapes) if len(s) != 2]
    if wrong:
        raise ValueError(f"{LIST}: {name}[{wrong[0]}] has shape {list(shapes[wrong[0]])}; every operand must be 2-D")
    return (first, np.array(ptrs, dtype=np.int64), np.array(shapes, dtype=np.int64).reshape(-1, 2),
            np.array(strides, dtype=np.int64).reshape(-1, 2))


def _layouts(shapes: np.ndarray, strides: np.ndarray):
    """``(read through the transpose, stored row stride, either dimension of unit stride)`` per matrix
    (vectorised ``spec.stored``)."""
    r, c = shapes[:, 0], shapes[:, 1]
    sr, sc = strides[:, 0].copy(), strides[:, 1].copy()
    sc[c <= 1] = 1
    one_row = r <= 1
    sr[one_row] = np.where(sc[one_row] == 1, np.maximum(c[one_row], 1), 1)
    n_lay = sc == 1
    t_lay = ~n_lay & (sr == 1)
    ld = np.where(n_lay, np.maximum(np.maximum(sr, c), 1), np.maximum(np.maximum(sc, r), 1))
    return t_lay, ld, n_lay | t_lay


def grouped_matmul(list_a, list_b, out, allow_tf32: bool = False, spec=None, requires_grad: bool = False,
                   separate: bool = False, plan: bool = False):
    """``[a_i @ b_i]`` into ``out`` (a list of ``(M_i, N_i)`` arrays) or new arrays of the operands' container
    (``requires_grad``: new wp.arrays that take gradients; ``separate``: torch results that are not views of one
    buffer); returns the list of results. ``plan``: checks and tables only, returned as a :class:`ListPlan` whose
    calls launch them (no copies of operands: a plan reads them in place)."""
    if not isinstance(list_a, (list, tuple)) or not isinstance(list_b, (list, tuple)):
        raise TypeError(f"{LIST}: list_a and list_b must be lists of 2-D arrays; got {type(list_a).__name__} and "
                        f"{type(list_b).__name__}")
    if len(list_a) != len(list_b):
        raise ValueError(f"{LIST}: {len(list_a)} left operands but {len(list_b)} right operands")
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(list_a)):
        n = len(out) if isinstance(out, (list, tuple)) else "not a list"
        raise ValueError(f"{LIST}: out must be a list of {len(list_a)} arrays; got {type(out).__name__} ({n})")
    if not list_a:
        if plan:
            raise ValueError(f"{LIST}: a plan needs at least one product; list_a and list_b are empty")
        return [] if out is None else list(out)
    key = None
    if spec is None and not plan:
        key = _torch_key(list_a, list_b, out, allow_tf32, requires_grad, separate)
        hit = _cached(key)
        if hit is not None:
            return hit(list_a, list_b, out)
    A0, ap, ash, ast = _columns(list_a, "list_a")
    B0, bp, bsh, bst = _columns(list_b, "list_b")
    if A0.kind != B0.kind:
        raise TypeError(f"{LIST}: list_a holds {A0.kind} arrays and list_b {B0.kind} arrays; pass one container type")
    if A0.dtype != B0.dtype:
        raise TypeError(f"{LIST}: list_a is {A0.dtype} but list_b is {B0.dtype}; every operand must have one dtype")
    if str(A0.device) != str(B0.device):
        raise ValueError(f"{LIST}: list_a is on {A0.device} and list_b on {B0.device}; put them on one device")
    bad = np.nonzero(ash[:, 1] != bsh[:, 0])[0]
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"{LIST}: product {i}: a[{i}] {A0.dtype}{list(ash[i])} @ b[{i}] {list(bsh[i])}: inner "
                         f"dimensions differ ({ash[i, 1]} != {bsh[i, 0]})")
    ta, lda, oka = _layouts(ash, ast)
    tb, ldb, okb = _layouts(bsh, bst)
    fix = np.nonzero(~(oka & okb))[0]
    if len(fix):  # neither dimension of unit stride: contiguous copies of those operands
        if plan:
            i = int(fix[0])
            raise ValueError(f"{LIST}: product {i}: a[{i}] (strides {list(ast[i])}) or b[{i}] (strides "
                             f"{list(bst[i])}) has no unit stride; a plan reads its operands in place, so pass them "
                             "contiguous or transposed")
        la2, lb2 = list(list_a), list(list_b)
        for i in fix.tolist():
            la2[i] = _contiguous(la2[i], A0, LIST)[0]
            lb2[i] = _contiguous(lb2[i], B0, LIST)[0]
        return grouped_matmul(la2, lb2, out, allow_tf32, spec, requires_grad, separate)
    ms, ns, ks = ash[:, 0], bsh[:, 1], ash[:, 1]
    in_dt = A0.dtype
    if out is None and plan:  # the results' addresses are the plan calls'
        results, dp, ldd = None, np.zeros(len(ms), dtype=np.int64), np.maximum(ns, 1)
        out_dt = in_dt
    elif out is None:
        results, dp, ldd = _new_outputs(A0, in_dt, ms, ns, requires_grad, separate)
        out_dt = in_dt
    else:
        D0, dp, dsh, dst = _columns(list(out), "out")
        out_dt = out_dtype_name(D0.dtype, in_dt, LIST)
        if D0.kind != A0.kind or str(D0.device) != str(A0.device):
            raise ValueError(f"{LIST}: out holds {D0.kind} arrays on {D0.device}; the operands are {A0.kind} arrays "
                             f"on {A0.device}")
        wrong = np.nonzero((dsh[:, 0] != ms) | (dsh[:, 1] != ns))[0]
        if len(wrong):
            i = int(wrong[0])
            raise ValueError(f"{LIST}: out[{i}] has shape {list(dsh[i])}; a[{i}] {list(ash[i])} @ b[{i}] "
                             f"{list(bsh[i])} is ({ms[i]}, {ns[i]})")
        unit = (dst[:, 1] == 1) | (dsh[:, 1] <= 1) | (dsh[:, 0] == 0)
        if not unit.all():
            i = int(np.nonzero(~unit)[0][0])
            raise ValueError(f"{LIST}: out[{i}] (shape {list(dsh[i])}, strides {list(dst[i])}) needs unit column "
                             "stride")
        ldd = np.where(dsh[:, 0] > 1, dst[:, 0], np.maximum(dsh[:, 1], 1))
        results = list(out)
    meta = _args.ListMeta(ap, bp, dp, ms, ns, ks, 2 * ta.astype(np.int64) + tb.astype(np.int64), lda, ldb, ldd)
    dev = A0.device
    tf32 = _tf32(allow_tf32, in_dt, dev, spec)
    work = _args.list_tables(meta, in_dt, out_dt, tf32, dev.is_cpu, ITEMSIZE[in_dt], spec)
    if plan:
        return ListPlan(A0, work, ms, ns, results, (list(list_a), list(list_b)))
    _launch_tables(A0, work)
    if key is not None:
        _store(key, _ListTables(work, ms, ns, lda, ldb, ITEMSIZE[in_dt], in_dt, requires_grad, separate))
    return results


# Lists of torch tensors whose dtypes, device, shapes and strides (and those of ``out``) match a list seen before
# reuse its tables: a call reads and compares the signature (one pass per attribute through map()), writes the new
# pointers into a copy of the tables, makes the results and launches (1000 products: 2.6 -> 1.85 ms of host time
# per call on the 2-core development machine, launch stubbed).
_LISTS: dict = {}
_LISTS_MAX = 16


def _torch_key(list_a, list_b, out, allow_tf32: bool, requires_grad: bool, separate: bool):
    """The cache key of a list of products of torch tensors (and ``out``): ``(head, lists)``, head the dtypes,
    device, list length and flags; None where any entry is not a plain torch.Tensor or the dtypes or devices
    differ (the full checks then name the error)."""
    torch = _torch()
    if torch is None:
        return None
    T = torch.Tensor
    xs = (list_a, list_b) if out is None else (list_a, list_b, out)
    for x in xs:
        if set(map(type, x)) != {T}:
            return None
    dts = set(map(_DTYPE, list_a)) | set(map(_DTYPE, list_b))
    devs = set(map(T.get_device, list_a)) | set(map(T.get_device, list_b))
    if len(dts) != 1 or len(devs) != 1:
        return None
    dev = devs.pop()
    odt = None
    if out is not None:
        odts, odevs = set(map(_DTYPE, out)), set(map(T.get_device, out))
        if len(odts) != 1 or odevs != {dev}:
            return None
        odt = odts.pop()
    return (dts.pop(), dev, odt, len(list_a), bool(allow_tf32), requires_grad, separate), xs


def _cached(key):
    """The cached tables of ``key`` (:func:`_torch_key`) whose lists have the same shapes and strides, or None.
    The shapes and strides are compared one by one as they are read (no tuple of the whole list is kept: the
    4000 tuples a key of two lists holds triggered Python's cyclic collector twice a call)."""
    if key is None:
        return None
    head, xs = key
    T = _torch().Tensor
    eq = operator.eq
    for (shapes, strides), entry in _LISTS.get(head, ()):
        # strides None: every matrix of that list was row-major with both sides >= 2, where equal shapes and
        # is_contiguous() mean equal strides (0.05 ms for 1000 tensors against 0.09 ms comparing strides)
        if all(all(map(eq, map(_SHAPE, x), sh))
               and (all(map(T.is_contiguous, x)) if st is None else all(map(eq, map(T.stride, x), st)))
               for x, sh, st in zip(xs, shapes, strides)):
            return entry
    return None


def _store(key, entry) -> None:
    """Caches ``entry`` under ``key``: the shapes and strides of its lists kept as tuples."""
    head, xs = key
    T = _torch().Tensor
    if sum(map(len, _LISTS.values())) >= _LISTS_MAX:
        _LISTS.clear()
    shapes = tuple(tuple(map(tuple, map(_SHAPE, x))) for x in xs)
    strides = tuple(tuple(map(T.stride, x)) for x in xs)
    strides = tuple(None if all(m >= 2 and n >= 2 and s == (n, 1) for (m, n), s in zip(sh, st)) else st
                    for sh, st in zip(shapes, strides))
    _LISTS.setdefault(head, []).append(((shapes, strides), entry))


class _ListTables:
    """The checked tables of a list of products (``list_tables``' rows) for lists of one signature
    (:func:`_torch_key`): a call writes its operands' (and results') pointers into copies of them and launches."""

    def __init__(self, work, ms, ns, lda, ldb, item: int, dtype: str, requires_grad: bool, separate: bool):
        self.ms, self.ns, self.dtype, self.requires_grad, self.separate = ms, ns, dtype, requires_grad, separate
        self.layout = _OutLayout(ms, ns)
        # (spec, table without pointers, n, blocks, row strides 16-byte aligned, sel)
        self.work = []
        for sp, tab, n, blocks, _checked, sel in work:
            tab = tab.copy()
            tab[:n, [_kernel.A_PTR, _kernel.B_PTR, _kernel.D_PTR]] = 0
            ld_ok = bool((((lda[sel] * item) % 16 == 0) & ((ldb[sel] * item) % 16 == 0)).all())
            self.work.append((sp, tab, n, blocks, ld_ok, sel))

    def __call__(self, list_a, list_b, out):
        torch = _torch()
        T = torch.Tensor
        n_all = len(list_a)
        A0 = _desc(list_a[0], "list_a[0]", LIST)
        ap = np.fromiter(map(T.data_ptr, list_a), np.int64, n_all)
        bp = np.fromiter(map(T.data_ptr, list_b), np.int64, n_all)
        if out is None:
            results, dp, _ = _new_outputs(A0, self.dtype, self.ms, self.ns, self.requires_grad, self.separate,
                                          layout=self.layout)
        else:
            results, dp = list(out), np.fromiter(map(T.data_ptr, out), np.int64, n_all)
        work = []
        for sp, tab, n, blocks, ld_ok, sel in self.work:
            tab = tab.copy()
            a, b = ap[sel], bp[sel]
            tab[:n, _kernel.A_PTR] = a
            tab[:n, _kernel.B_PTR] = b
            tab[:n, _kernel.D_PTR] = dp[sel]
            checked = not (ld_ok and not ((a | b) & 15).any())
            work.append((sp, tab, n, blocks, checked, sel))
        _launch_tables(A0, work)
        return results


def _launch_tables(A0, work, tables=None) -> None:
    """The grouped launches of a list's classes (``list_tables``' rows): each host table copied to the device
    (``tables``: device tables already there, one per class), then one launch per class."""
    dev = A0.device
    with stream_scope(A0):
        keeps = []
        for c, (sp, tab, n, blocks, checked, _sel) in enumerate(work):
            if tables is None:
                keep, ptr = _scratch(A0, tab.size, tab)
                keeps.append(keep)
            else:
                ptr = tables[c][1]
            table, status = _table_views(ptr, n + 2, dev)
            k, dim, inputs, block = _args.gemm_launch(sp, checked, table, n, status, blocks, dev.is_cpu)
            launch(k, dim, inputs, dev, block)
        del keeps  # stream-ordered frees: torch's allocator, or Warp's on this stream


class ListPlan:
    """A checked and tabled list of products (``grouped_matmul(..., plan=True)``), launched by each call: the
    operands are read in place at each call (their values may change; their storage, shapes and strides must
    not: the plan holds references to them). With ``out`` the tables are copied to the device once and a call
    is the launches alone; without, a call makes new results (views of one buffer for torch and NumPy, one
    wp.array each) and copies the tables with their addresses."""

    def __init__(self, A0, work, ms, ns, out, operands):
        self._a0, self._work, self._ms, self._ns, self._out, self._operands = A0, work, ms, ns, out, operands
        self._tables = None
        self._layout = _OutLayout(ms, ns)
        if out is not None:
            self._tables = [_scratch(A0, tab.size, tab) for _sp, tab, *_ in work]

    def __call__(self):
        if self._out is not None:
            _launch_tables(self._a0, self._work, self._tables)
            return list(self._out)
        results, dp, _ = _new_outputs(self._a0, self._a0.dtype, self._ms, self._ns, False, False, layout=self._layout)
        work = []
        for sp, tab, n, blocks, checked, sel in self._work:
            tab = tab.copy()
            tab[:n, _kernel.D_PTR] = dp[sel]
            work.append((sp, tab, n, blocks, checked, sel))
        _launch_tables(self._a0, work)
        return results


class _OutLayout:
    """Where new contiguous ``(M_i, N_i)`` results lie in one buffer of ``total`` elements: their shapes, strides and
    offsets as the Python lists ``as_strided`` takes (made once per list signature or plan: their ``tolist`` and
    ``zip`` took 0.1 ms of a 1000-result call)."""

    def __init__(self, ms: np.ndarray, ns: np.ndarray):
        sizes = ms * ns
        self.offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        self.ld = np.maximum(ns, 1)
        self.total = int(sizes.sum())
        self.shapes = list(zip(ms.tolist(), ns.tolist()))
        self.strides = list(zip(self.ld.tolist(), itertools.repeat(1)))
        self.offset_list = self.offsets.tolist()


def _new_outputs(A0, dtype: str, ms: np.ndarray, ns: np.ndarray, requires_grad: bool, separate: bool,
                 layout: _OutLayout | None = None):
    """``(results, pointers, row strides)`` of new ``(M_i, N_i)`` results in ``A0``'s container and device: views
    of one buffer (torch, NumPy), or one array each (wp.array; torch with ``separate``: a custom operator's results
    may not alias each other). ``layout``: ``_OutLayout(ms, ns)`` made before."""
    lay = layout or _OutLayout(ms, ns)
    it = ITEMSIZE[dtype]
    shapes, ld = lay.shapes, lay.ld
    if A0.kind == "torch":
        torch = _torch()
        dt, dv = A0.obj.dtype, A0.obj.device
        if separate:
            res = [torch.empty(s, dtype=dt, device=dv) for s in shapes]
            return res, np.array([r.data_ptr() for r in res], dtype=np.int64), ld
        flat = torch.empty(lay.total, dtype=dt, device=dv)
        # one as_strided view each, called through map(): 0.75 ms for 1000 results against 1.5 ms for
        # split_with_sizes + view, 1.3 ms for a nested tensor's unbind and 0.9 ms for unflatten_dense_tensors
        # (development machine)
        res = list(map(flat.as_strided, shapes, lay.strides, lay.offset_list))
        return res, flat.data_ptr() + lay.offsets * it, ld
    offsets, sizes = lay.offsets, ms * ns
    if A0.kind == "numpy":
        flat = np.empty(int(sizes.sum()), dtype=np.dtype(dtype))
        res = [flat[o:o + n].reshape(s) for o, n, s in zip(offsets.tolist(), sizes.tolist(), shapes)]
        return res, flat.ctypes.data + offsets * it, ld
    wdt = WP_DTYPES[dtype]
    res = [wp.empty(s, dtype=wdt, device=A0.device, requires_grad=requires_grad) for s in shapes]
    return res, np.array([r.ptr or 0 for r in res], dtype=np.int64), ld
