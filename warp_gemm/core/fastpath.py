"""The fast path: a repeated call skips validation and planning and replays what an equal earlier call recorded."""

from __future__ import annotations

import functools
import os
import threading

import numpy as np
import warp as wp

from warp_gemm import _compat
from warp_gemm.core import launches
from warp_gemm.core.lru import LRU
from warp_gemm.core.operands import _torch, torch_dtype
from warp_gemm.core.problem import Problem
from warp_gemm.families.common.kernels import WP_DTYPES
from warp_gemm.families.host.call import _HostCall


# --- the fast path: a repeated call skips validation too ---------------------------------------------------
# A call plan's key is built from the validated Problem; building that Problem (describing every operand,
# checking shapes, dtypes, devices and aliasing) was ~70% of a replayed call's host time (cProfile, CPU
# tiles backend, 64^3 torch operands with out: 16 us per call of which validate 11). The outcome of
# validation and planning is a function of what ``_sig`` reads from each container (pointer, shape,
# strides, dtype, device) and of the scalars and options, so a call whose raw signature equals that of
# an earlier call that was validated, planned and kept replays the same launches (on the CPU's BLAS: runs
# the kept non-owning NumPy views, _HostCall). Only plain wp.array, torch.Tensor/Parameter and
# numpy.ndarray operands that validation used as they are (no conj/neg or negative-stride copy) take it;
# subclasses, scalars of other types and every first call take the full path.
class _NewResult:
    """How validate made the result of a call without ``out`` (a plain empty array of the caller's kind)."""

    __slots__ = ("kind", "shape", "dtype", "device", "empty")

    def __init__(self, p: Problem):
        self.kind, self.shape, self.dtype = p.D.kind, tuple(p.D.shape), p.D.dtype
        self.device = p.result.device
        self.empty = None
        if self.kind == "torch":  # bound once: torch.empty with its dtype and device (~0.3 us a call)
            self.empty = functools.partial(_torch().empty, self.shape, dtype=torch_dtype(self.dtype),
                                           device=self.device)

    def allocate(self):
        if self.empty is not None:
            return self.empty()
        if self.kind == "numpy":
            return np.empty(self.shape, dtype=self.dtype)
        return wp.empty(self.shape, dtype=WP_DTYPES[self.dtype], device=self.device)


def _sig(x):
    """What validation and planning read from one operand, cheaply; None: not a fast-path operand."""
    f = _SIGS.get(type(x))
    if f is None:
        f = _sig_of_type(type(x))
    return f(x)


def _sig_wp(x):
    return (x.ptr, x.shape, x.strides, x.dtype, x.device.alias)


def _sig_np(x):
    return (x.__array_interface__["data"][0], x.shape, x.strides, x.dtype, x.flags.writeable)


def _sig_torch(x):
    return (x.data_ptr(), x.shape, x.stride(), x.dtype, x.device, x.is_neg())


def _no_sig(x):
    return None


_SIGS = {wp.array: _sig_wp, np.ndarray: _sig_np}


def _sig_of_type(t):
    """The signature function for operands of type ``t`` (torch's types are known once torch is loaded;
    anything else -- subclasses included -- takes the full path)."""
    torch = _torch()
    if torch is not None and t in (torch.Tensor, torch.nn.Parameter):
        _SIGS[t] = _sig_torch
        return _sig_torch
    if torch is None:
        return _no_sig  # not cached: torch may be imported later
    _SIGS[t] = _no_sig
    return _no_sig



_SCALARS = (float, int)


def _fast_key(a, b, c, out, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation):
    """``(key, stream)`` of a call that may take the fast path, or None."""
    if not (opts.record_launches and _compat.HAS_RECORD_CMD) or type(alpha) not in _SCALARS \
            or type(beta) not in _SCALARS or type(trans_a) is not bool or type(trans_b) is not bool:
        return None
    sa, sb = _sig(a), _sig(b)
    if sa is None or sb is None:
        return None
    sc = so = None
    if c is not None and (sc := _sig(c)) is None:
        return None
    if out is not None and (so := _sig(out)) is None:
        return None
    if type(a) is np.ndarray:
        return _key_tuple(sa, sb, sc, so, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation,
                          None), None
    if type(a) is wp.array:
        dev = a.device
        if dev.is_cpu:
            stream = None
        elif type(b) is wp.array and (out is None or type(out) is wp.array):
            stream = dev.stream
            if stream is None:  # a context another thread is still initialising: the full path waits
                return None
        else:
            return None  # mixed containers: the full path decides the stream
        handle = None if stream is None else stream.cuda_stream
    elif (dev := sa[4]).type == "cuda":  # a torch tensor's device, read by _sig_torch
        stream = _torch_stream(dev.index)
        if stream is None:
            return None
        handle = stream.cuda_stream
    else:
        stream = handle = None
    return _key_tuple(sa, sb, sc, so, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation,
                      handle), stream


def _key_tuple(sa, sb, sc, so, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation, handle):
    return ("fast", sa, sb, sc, so, alpha, beta, trans_a, trans_b, bool(allow_tf32), config, opts, activation,
            _cache_dir_env(), handle, threading.get_ident())


# The tuning-cache directory variable, read without os.environ.get's per-call key encoding (~1 us on the
# H100 host): CPython's os.environ keeps its encoded items in ``_data`` (updated by every assignment
# through os.environ, monkeypatch.setenv included); elsewhere the plain lookup.
_ENV_DATA = getattr(os.environ, "_data", None)


_ENV_KEY = os.environ.encodekey("WARP_GEMM_CACHE_DIR") if hasattr(os.environ, "encodekey") else None


def _cache_dir_env():
    if _ENV_DATA is not None and _ENV_KEY is not None:
        return _ENV_DATA.get(_ENV_KEY)
    return os.environ.get("WARP_GEMM_CACHE_DIR")


def _torch_stream(index: int):
    """The Warp stream over torch's current stream on CUDA device ``index`` where the full path has made
    one (``_warp_stream``), else None: the first call on a stream takes the full path, which also
    initialises Warp (a Warp stream cannot be made before Warp is)."""
    return _streams.peek((index, _torch()._C._cuda_getCurrentRawStream(index)))


# --- re-bound plans: new operands of a planned shape (core/rebind.py) ---------------------------------------
def _extent(x, sig):
    """``(lowest, past highest)`` byte address of operand ``x`` (``sig`` its signature), or None: empty, or a
    negative stride."""
    span = _span(x, sig)
    return None if span is None else (sig[0], sig[0] + span)


# (container type, shape, strides, dtype) -> bytes from an operand's lowest address to past its highest (None: empty
# or a negative stride): the same for every call on operands of one layout, so computed once per layout.
_SPANS: dict = {}


def _span(x, sig):
    k = (type(x), sig[1], sig[2], sig[3])
    span = _SPANS.get(k, False)
    if span is not False:
        return span
    item = _itemsize(x, sig[3])
    scale = item if type(x) is not wp.array and type(x) is not np.ndarray else 1  # torch strides: elements
    last = 0
    for n, st in zip(sig[1], sig[2]):
        if n == 0 or st < 0:
            last = None
            break
        last += (n - 1) * st
    span = None if last is None else last * scale + item
    if len(_SPANS) >= 4096:
        _SPANS.clear()
    _SPANS[k] = span
    return span


def _itemsize(x, dtype) -> int:
    if type(x) is wp.array:
        return wp.types.type_size_in_bytes(dtype)
    if type(x) is np.ndarray:
        return dtype.itemsize
    return x.element_size()


def align_class(ptr: int) -> int:
    """The largest power of two up to 16 that divides ``ptr``: every alignment rule of the planner and the
    families (copy chunks of 2-16 bytes, 16-byte vector loads, TMA's 16) is decided by it."""
    return min(ptr & -ptr, 16) if ptr else 16


def template_key(fk: tuple, ops: tuple):
    """``(key, bases, ranges)`` for a re-bound plan of this call (core/rebind.py), or None. ``key``: the fast key
    ``fk`` with each address reduced to its alignment (:func:`align_class`), plus how the operands (``ops``: a,
    b, c, out) relate -- each pair disjoint (0) or the same view (1); any other overlap, an empty operand or a
    negative stride: None. ``bases``: the present operands' lowest addresses, ``ranges`` their byte ranges."""
    if ops[2] is None and ops[3] is None:
        return _template_key2(fk, ops[0], ops[1])
    ext, sigs, stripped = [], [], []
    for x, sig in zip(ops, fk[1:5]):
        if x is None:
            stripped.append(None)
            continue
        span = _span(x, sig)
        if span is None:
            return None
        p = sig[0]
        ext.append((p, p + span))
        sigs.append(sig)
        stripped.append((min(p & -p, 16) if p else 16,) + sig[1:])
    rel = []
    n = len(ext)
    for i in range(n):
        lo, hi = ext[i]
        for j in range(i + 1, n):
            lo2, hi2 = ext[j]
            if hi <= lo2 or hi2 <= lo:
                rel.append(0)
            elif sigs[i] == sigs[j]:
                rel.append(1)
            else:
                return None
    key = ("rebind", *stripped, tuple(rel)) + fk[5:]
    return key, [e[0] for e in ext], ext


def _template_key2(fk: tuple, a, b):
    """:func:`template_key` of a call on ``a`` and ``b`` alone (no ``c``, no ``out``: most calls), the same key
    built without the general loops: 2.25 -> 1.3 us per call on the development host."""
    sa, sb = fk[1], fk[2]
    spa, spb = _span(a, sa), _span(b, sb)
    if spa is None or spb is None:
        return None
    pa, pb = sa[0], sb[0]
    ha, hb = pa + spa, pb + spb
    if ha <= pb or hb <= pa:
        rel = (0,)
    elif sa == sb:
        rel = (1,)
    else:
        return None
    key = ("rebind", (min(pa & -pa, 16) if pa else 16, *sa[1:]), (min(pb & -pb, 16) if pb else 16, *sb[1:]), None,
           None, rel) + fk[5:]
    return key, [pa, pb], [(pa, ha), (pb, hb)]


def _described_in_place(p: Problem, a, b, c, out) -> bool:
    """Whether validation described every operand as the caller's own object (no resolution copy)."""
    return p.A.obj is a and p.B.obj is b and (c is None or (p.C is not None and p.C.obj is c)) and \
        (out is None or p.D.obj is out)


def _replay(entry, stream, a, b, c, out) -> None:
    if type(entry) is _HostCall:
        entry.run(a, b, c, out)
    else:
        launches.replay(entry, stream)


def _keep_fast(fk: tuple, p: Problem, out, cmds: tuple) -> None:
    """Keep ``cmds`` under the fast key: for a call with ``out`` directly; for one without, the recipe of
    its result and, per result address, the launches."""
    if out is not None:
        _fast.put(fk, cmds)
    elif _sig(p.result) is not None:
        _fast.put(fk, _NewResult(p))
        _fast.put((fk, p.D.ptr), cmds)




_fast = LRU(2048)  # the same launches under the calls' raw signatures (see "the fast path" below)


# Warp stream wrappers of torch streams, by (device, CUDA stream handle): wp.stream_from_torch builds and
# registers a new wp.Stream on every call. A cached wrapper keeps its torch stream object alive, so
# the handle cannot be recycled for another stream while it is cached.
_streams = LRU(64)


def _warp_stream(ts):
    key = (ts.device.index, ts.cuda_stream)
    s = _streams.get(key)
    if s is None:
        s = wp.stream_from_torch(ts)
        _streams.put(key, s)
    return s


