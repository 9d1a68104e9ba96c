"""Cached workspaces: one growing buffer per (device, stream, slot, thread), so a call that needs one can be kept
as a recorded call plan (the same address every time)."""

from __future__ import annotations

import threading

import warp as wp

from warp_gemm import _compat
from warp_gemm.core import launches
from warp_gemm.core.operands import ITEMSIZE, raw_view
from warp_gemm.families.common.kernels import WP_DTYPES

# --- cached workspaces -------------------------------------------------------------------------------------
# One growing buffer per (device, stream, slot, thread): a call whose family needs a workspace gets a
# plan like any other (no allocation per call, the same address each time). Kernels on one stream run
# in order, so one thread's calls on that stream can share it; two threads on one stream cannot (their
# launches interleave: one call's fill, another's GEMM, ...), nor can two threads on the CPU, whose
# kernels run in the calling thread -- hence the thread in the key (and in the call plans' keys). A
# buffer outgrown is kept (never freed: a captured CUDA graph may still name it), so the memory held
# is under twice the largest workspace used, per thread.
_workspaces: dict = {}


_retired: list = []


_ws_lock = threading.Lock()


#: Bytes a staged row is padded to. Rows padded only to 16 bytes (TMA's and the 16-byte copies' rule) start off the
#: 128-byte lines: the Hopper kernel's 256x128 core of fp16 4097^3 (rows of 8208 bytes) ran 349 us where 4096-row
#: operands of the same K take ~270 (H200): each 128-byte box row touched two lines. Rows under 1 KB keep 16.
STAGE_ROW_BYTES = 128


def _staged(views, which, dtype: str, dev):
    """``views`` (A, B) with those ``which`` selects copied into cached buffers whose rows start on 128-byte
    boundaries (16 for rows under 1 KB; same shapes; one launch for both), the others as they are."""
    item = ITEMSIZE[dtype]
    out, jobs = [], []
    for view, slot, on in zip(views, ("stage_a", "stage_b"), which):
        if not on:
            out.append(view)
            continue
        nb, r, c = view.shape
        line = STAGE_ROW_BYTES if c * item >= 8 * STAGE_ROW_BYTES else 16  # short rows: at most 1/8 more bytes
        cp = -(-c * item // line) * line // item
        buf = workspace(dev, (nb, r, cp), dtype, slot)
        jobs.append((buf, view))
        out.append(raw_view(buf.ptr, buf.dtype, (nb, r, c), (r * cp * item, cp * item, item), dev))
    launches.stage(jobs, dtype)  # 16-byte stores (4x the element-per-thread copy's rate, H100)
    return tuple(out)


def _cached_buffer(dev, nbytes: int, slot: str, zeroed: bool = False):
    """This device, current stream, slot and thread's cached buffer (float32 words) of at least ``nbytes``: grown to
    at least twice its old size when too small, the old one kept (see above). ``zeroed``: allocated zero, for the
    slots whose kernels leave them zero (the fused GEMV's counters, stream-K's flags); a slot is always used one
    way."""
    stream = 0 if dev.is_cpu else _stream_handle(dev)
    key = (dev.alias, stream, slot, threading.get_ident())
    with _ws_lock:
        buf = _workspaces.get(key)
        if buf is None or buf.capacity < nbytes:
            if buf is not None:
                _retired.append(buf)
            words = max(nbytes, 2 * (buf.capacity if buf is not None else 0)) // 4
            buf = (wp.zeros if zeroed else wp.empty)(words, dtype=wp.float32, device=dev)
            _workspaces[key] = buf
    return buf


def owns(ptr: int) -> bool:
    """Whether ``ptr`` lies in a cached workspace buffer (current or outgrown: both live for the process)."""
    with _ws_lock:
        bufs = list(_workspaces.values()) + _retired
    return any(b.ptr <= ptr < b.ptr + b.capacity for b in bufs)


def _stream_handle(dev) -> int:
    """The device's current CUDA stream handle, waiting out a context another thread is still setting up (Warp
    publishes the context before its stream: ``_compat.init``)."""
    stream = dev.stream
    if stream is None:
        _compat.init(dev)
        stream = wp.get_stream(dev)
    return stream.cuda_stream


def workspace(dev, shape: tuple, dtype: str, slot: str = "ws"):
    """A Warp array of ``shape``/``dtype`` over this device and current stream's cached workspace
    ``slot`` (one call's temporaries take different slots)."""
    nbytes = max(1, -(-__import__("math").prod(shape) * ITEMSIZE[dtype] // 256) * 256)
    buf = _cached_buffer(dev, nbytes, slot)
    item = ITEMSIZE[dtype]
    strides = tuple(int(__import__("math").prod(shape[i + 1:])) * item for i in range(len(shape)))
    return raw_view(buf.ptr, WP_DTYPES[dtype], tuple(shape), strides, dev)


def _zeroed_ints(dev, n: int, slot: str):
    """``n`` int32 zeros of this device, stream, slot and thread (:func:`_cached_buffer`, allocated zero): the
    kernels that use them (fused GEMV bands, stream-K) leave them zero."""
    buf = _cached_buffer(dev, max(1, -(-n * 4 // 256) * 256), slot, zeroed=True)
    return raw_view(buf.ptr, wp.int32, (n,), (4,), dev)


