"""TMA tensor maps (``CUtensorMap``) for the Hopper kernels, built by the CUDA driver and kept in device memory.

Warp generates the kernel's signature, so a map cannot be a ``__grid_constant__`` parameter: each map is encoded on
the host by ``cuTensorMapEncodeTiled`` (the driver library through ctypes, no new dependency), copied into a
128-byte device buffer (Warp allocations are at least 256-byte aligned; the driver asks for 64) and prefetched in
the kernel (``prefetch.tensormap``). A buffer is written once, before any launch names it, and never freed or
rewritten (maps dropped from the cache are kept), so the kernels read it without a tensormap-proxy fence. Maps are
cached by (device, pointer, dtype, dims, strides, box): a call on operands seen before costs a dictionary lookup.
"""

from __future__ import annotations

import collections
import ctypes
import threading

import numpy as np
import warp as wp

# CUtensorMapDataType: operands are copied as bits, so float16 and bfloat16 share UINT16 and float32 (tf32) takes
# UINT32 (the out-of-bounds fill, zero, is the zero of each)
_DT_UINT = {2: 1, 4: 2}
_SWIZZLE_128B = 3
# L2 promotion (CUtensorMapL2promotion): 256 bytes, as CUTLASS's sm90 TMA loads use, where a box's 128-byte rows lie
# on 128-byte lines; 128 bytes where they straddle two (fp16 1000^3, rows of 2,000 bytes, H100, kernel time with the
# L2 flushed: 10.34-10.37 us against 10.85-10.88 with 256; no promotion and 64 bytes measured as 128; 1024^3 alike)
_L2_PROMOTION_128B = 2
_L2_PROMOTION_256B = 3
_MAX_MAPS = 4096  # 128 bytes of device memory each

_lock = threading.Lock()
_maps: collections.OrderedDict = collections.OrderedDict()
_retired: list = []  # maps dropped from the lookup, kept alive (see tensor_map)
_encoder = []


def _encode_fn():
    """``cuTensorMapEncodeTiled`` from the driver library (loaded on first use)."""
    if not _encoder:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError:
            lib = ctypes.CDLL("nvcuda.dll")  # Windows
        fn = lib.cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p, u32p, u32p,
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        _encoder.append(fn)
    return _encoder[0]


def promotion(ptr: int, row_stride: int) -> int:
    """The L2 promotion of a map whose rows start at ``ptr`` and every ``row_stride`` bytes: 256 bytes where every row
    starts on a 128-byte line, else 128."""
    return _L2_PROMOTION_256B if (ptr | row_stride) % 128 == 0 else _L2_PROMOTION_128B


def encode(ptr: int, dims: tuple[int, ...], strides: tuple[int, ...], box: tuple[int, ...], item: int = 2) -> bytes:
    """The 128 bytes of a tiled tensor map of ``item``-byte elements (2 or 4): ``dims`` innermost first (elements),
    ``strides`` the byte strides of dims 1.. (multiples of 16), ``box`` the copied box (elements; the innermost 128
    bytes, the 128-byte swizzle's span); L2 promotion by :func:`promotion`. Raises ValueError with the driver's error
    code when the driver refuses."""
    rank = len(dims)
    raw = (ctypes.c_uint8 * 192)()
    p = (ctypes.addressof(raw) + 63) & ~63  # the driver writes the map to a 64-byte aligned address
    err = _encode_fn()(ctypes.c_void_p(p), _DT_UINT[item], rank, ctypes.c_void_p(ptr),
                       (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * (rank - 1))(*strides),
                       (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
                       0, _SWIZZLE_128B, promotion(ptr, strides[0]), 0)
    if err != 0:
        raise ValueError(f"hopper.tma.encode: cuTensorMapEncodeTiled returned CUresult {err} for ptr=0x{ptr:x} "
                         f"dims={dims} strides={strides} box={box}")
    return ctypes.string_at(p, 128)


def tensor_map(view: wp.array, box_rows: int, box_cols: int | None = None) -> int:
    """Device address of the map of a 3-D 16- or 32-bit Warp view ``(nb, rows, cols)`` (unit column stride, row and
    batch strides multiples of 16 bytes) with a ``(box_cols, box_rows, 1)`` box (``box_cols`` default: 128 bytes of
    elements). A batch of one gets a stride covering the rows (the map's strides must be multiples of 16 bytes; a
    broadcast view's stride 0 is not)."""
    item = int(view.strides[2])
    box_cols = 128 // item if box_cols is None else box_cols
    nb, rows, cols = (int(s) for s in view.shape)
    s0, s1 = int(view.strides[0]), int(view.strides[1])
    if nb == 1:
        s0 = s1 * rows
    key = (str(view.device), int(view.ptr), item, (cols, rows, nb), (s1, s0), (box_cols, box_rows, 1))
    with _lock:
        hit = _maps.get(key)
        if hit is not None:
            _maps.move_to_end(key)
            return hit.ptr
    blob = encode(int(view.ptr), (cols, rows, nb), (s1, s0), (box_cols, box_rows, 1), item)
    arr = wp.array(np.frombuffer(blob, dtype=np.uint64).copy(), dtype=wp.uint64, device=view.device)
    # the copy is on Warp's stream of the device; the kernel may run on another (torch's): finish it first
    wp.synchronize_device(view.device)
    with _lock:
        hit = _maps.get(key)
        if hit is not None:
            return hit.ptr
        _maps[key] = arr
        if len(_maps) > _MAX_MAPS:
            # dropped from the lookup but never freed: a kept call plan (core/execute.py) or a captured CUDA graph
            # may still launch with its address; 128 bytes per operand set, as the workspaces are kept
            _retired.append(_maps.popitem(last=False)[1])
        return arr.ptr


def clear() -> None:
    """Drop every cached map from the lookup (kept alive: a kept call plan may still name one)."""
    with _lock:
        _retired.extend(_maps.values())
        _maps.clear()
