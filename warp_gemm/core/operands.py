"""Operands: wp.array, torch.Tensor and numpy.ndarray described uniformly, viewed zero-copy as Warp arrays.

An :class:`Operand` records what warp_gemm needs of an input -- pointer, dtype name, shape, strides in
elements, device -- whatever the container. :func:`layout_view` turns the last two dimensions into a
Warp 3-D view in one of the two layouts the kernels read (``"N"``: unit column stride; ``"T"``: unit
row stride, read through the transpose), copying only when neither dimension has unit stride.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import warp as wp

from warp_gemm import _compat
from warp_gemm.core.lru import LRU
from warp_gemm.families.common.kernels import ITEM_BYTES, WP_DTYPES

SUPPORTED = ("float16", "bfloat16", "float32", "float64")
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}

_NP_NAMES = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


def _torch():
    """torch if the caller has imported it (a tensor cannot exist otherwise); never imports it."""
    return sys.modules.get("torch")


def _wp_dtype_name(dt) -> str | None:
    for name, w in WP_DTYPES.items():
        if dt is w:
            return name
    return None


def torch_dtype(name: str):
    """The torch dtype for a warp_gemm dtype name (torch must be importable)."""
    torch = _torch() or __import__("torch")
    return getattr(torch, name)


_TORCH_NAMES: dict = {}  # torch dtype -> name, filled on first use (torch is never imported here)
_CUDA_DEVICES: dict = {}  # CUDA ordinal -> Warp device


def _torch_dtype_name(dt) -> str | None:
    if not _TORCH_NAMES:
        torch = _torch()
        _TORCH_NAMES.update({torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
                             torch.float64: "float64"})
    return _TORCH_NAMES.get(dt)


_CPU: list = []


def _cpu_device():
    if not _CPU:
        _CPU.append(wp.get_device("cpu"))
    return _CPU[0]


def _cuda_device(idx: int):
    dev = _CUDA_DEVICES.get(idx)
    if dev is None:
        dev = _CUDA_DEVICES[idx] = wp.get_device(f"cuda:{idx}")
    return dev


@dataclass(slots=True)  # (not frozen: a frozen dataclass's __init__ cost ~2 us per operand per call)
class Operand:
    kind: str  # "warp" | "torch" | "numpy"
    obj: Any  # the caller's object (kept alive by the caller for the call)
    dtype: str  # "float16" | "bfloat16" | "float32" | "float64"
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    ptr: int
    device: Any  # wp.context.Device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def span(self) -> tuple[int, int]:
        """[first byte, one past the last byte) that any element occupies."""
        if self.size == 0:
            return (self.ptr, self.ptr)
        hi = sum((n - 1) * s for n, s in zip(self.shape, self.strides))
        return (self.ptr, self.ptr + (hi + 1) * ITEMSIZE[self.dtype])

    def describe(self) -> str:
        return f"{self.kind} {self.dtype}{list(self.shape)} on {self.device}"

    def transposed(self) -> Operand:
        """Swap the last two dimensions (a view)."""
        sh, st = list(self.shape), list(self.strides)
        sh[-1], sh[-2] = sh[-2], sh[-1]
        st[-1], st[-2] = st[-2], st[-1]
        return replace(self, shape=tuple(sh), strides=tuple(st))


def _dtype_error(name: str, dt, x) -> TypeError:
    """Names the container, dtype, shape and device of the rejected operand."""
    kind = type(x).__module__.split(".")[0]
    noun = "tensor" if kind == "torch" else "array"
    dt = str(dt).replace("torch.", "")
    hint = ""
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and not x.dtype.isnative:
        hint = "; this one has non-native byte order: pass x.astype(x.dtype.newbyteorder('='))"
    return TypeError(
        f"{name} is a {kind} {dt}{list(x.shape)} {noun} on {getattr(x, 'device', 'cpu')}; warp_gemm "
        "supports float16, bfloat16, float32 and float64 (integer, bool, complex and fp8 GEMMs are not "
        f"provided){hint}"
    )


def describe(x, name: str) -> Operand:
    """Describe ``x`` (wp.array, torch.Tensor or numpy.ndarray) or raise TypeError naming it (ValueError for a
    torch tensor on a device other than the CPU and CUDA, e.g. ``meta``)."""
    _compat.init()
    torch = _torch()
    if isinstance(x, wp.array):
        dt = _wp_dtype_name(x.dtype)
        if dt is None:
            raise _dtype_error(name, getattr(x.dtype, "__name__", x.dtype), x)
        item = ITEMSIZE[dt]
        strides = tuple(s // item for s in x.strides)
        return Operand("warp", x, dt, tuple(x.shape), strides, int(x.ptr or 0), x.device)
    if torch is not None and isinstance(x, torch.Tensor):
        dt = _torch_dtype_name(x.dtype)
        if dt is None:
            raise _dtype_error(name, x.dtype, x)
        if dt == "bfloat16":
            try:
                _compat.bf16_dtype()  # clear error on Warp without bfloat16
            except TypeError as e:
                raise TypeError(f"{name} is a torch bfloat16{list(x.shape)} tensor on {x.device}: "
                                f"{e}") from None
        if x.device.type == "cuda":
            idx = x.device.index if x.device.index is not None else torch.cuda.current_device()
            dev = _cuda_device(idx)
        elif x.device.type == "cpu":
            dev = wp.get_device("cpu")
        else:
            tdt = str(x.dtype).replace("torch.", "")
            raise ValueError(f"{name} is a torch {tdt}{list(x.shape)} tensor on device {x.device}; "
                             "warp_gemm runs on 'cpu' and 'cuda'")
        if x.is_conj() or x.is_neg():
            x = x.resolve_conj().resolve_neg()
        return Operand("torch", x, dt, tuple(x.shape), tuple(x.stride()), int(x.data_ptr()), dev)
    if isinstance(x, np.ndarray):
        dt = _NP_NAMES.get(x.dtype)
        if dt is None:
            raise _dtype_error(name, x.dtype, x)
        item = x.itemsize
        if not x.flags.c_contiguous and any(s < 0 or s % item for s in x.strides):
            # Negative or unaligned strides cannot be expressed as a Warp array: use a copy.
            x = np.ascontiguousarray(x)
        strides = tuple(s // item for s in x.strides)
        return Operand("numpy", x, dt, x.shape, strides, x.ctypes.data, _cpu_device())
    raise TypeError(
        f"{name} is a {type(x).__module__}.{type(x).__name__}; warp_gemm takes wp.array, torch.Tensor "
        "or numpy.ndarray"
    )


# Views are memoized by (pointer, dtype, shape, strides, device): building a wp.array costs ~15 us of
# host time (three per call: ~20% of a small call after launch replay, cProfile on the CPU backend).
# A view owns nothing and is never mutated, so an equal one can be handed out again.
_VIEWS = LRU(4096)  # three or four per call, for a few hundred operand sets in rotation


def raw_view(ptr: int, dtype, shape: tuple[int, ...], byte_strides: tuple[int, ...], device):
    """A memoized, non-owning Warp array of Warp dtype ``dtype`` at ``ptr`` (strides in bytes). Marked
    ``_wg_view``: _launch.launch may keep it in a recorded launch, since it holds no memory."""
    shape, byte_strides = tuple(shape), tuple(byte_strides)
    key = (ptr, dtype, shape, byte_strides, str(device))
    v = _VIEWS.get(key)
    if v is None:
        item = wp.types.type_size_in_bytes(dtype)
        extent = sum((n - 1) * s for n, s in zip(shape, byte_strides)) + item if all(shape) else item
        v = wp.array(ptr=ptr, dtype=dtype, shape=shape, strides=byte_strides, capacity=extent, device=device)
        v._wg_view = True
        _VIEWS.put(key, v)
    return v


def wp_view(op: Operand, shape: tuple[int, ...], strides: tuple[int, ...]):
    """A Warp array over ``op``'s memory with the given shape and element strides (no copy)."""
    item = ITEMSIZE[op.dtype]
    return raw_view(op.ptr, WP_DTYPES[op.dtype], shape, tuple(s * item for s in strides), op.device)


def as3d(op: Operand) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(shape, strides) of ``op`` with a batch dimension in front (extent 1 for 2-D operands)."""
    if op.ndim == 2:
        return (1, *op.shape), (0, *op.strides)
    return tuple(op.shape), tuple(op.strides)


def layout_view(op: Operand):
    """A Warp 3-D view of ``op`` that a kernel can read and its layout, or ``(None, "copy")``.

    ``"N"``: the view is (batch, rows, cols) with unit column stride. ``"T"``: the view is the
    transpose, (batch, cols, rows), with unit row stride. Neither (a strided view such as
    ``a[:, ::2]``): the caller makes one contiguous copy, read as ``"N"``.
    """
    (nb, r, c), (sb, sr, sc) = as3d(op)
    if nb == 1:
        sb = r * c
    if c == 1:
        sc = 1
    if r == 1:
        sr = c if sc == 1 else 1
    if sc == 1:
        return wp_view(op, (nb, r, c), (sb, sr, 1)), "N"
    if sr == 1:
        return wp_view(op, (nb, c, r), (sb, sc, 1)), "T"
    return None, "copy"


def overlaps(x: Operand, y: Operand) -> bool:
    if x.size == 0 or y.size == 0 or (x.device is not y.device and str(x.device) != str(y.device)):
        return False
    a0, a1 = x.span()
    b0, b1 = y.span()
    return a0 < b1 and b0 < a1


def same_memory(x: Operand, y: Operand) -> bool:
    """Whether ``x`` and ``y`` are the same elements: same address, shape, strides, dtype and device."""
    return (x.ptr == y.ptr and x.shape == y.shape and x.strides == y.strides and x.dtype == y.dtype
            and (x.device is y.device or str(x.device) == str(y.device)))


def copy_operand(op: Operand):
    """A contiguous copy of ``op``'s elements in its own container, on its device (torch: on torch's current
    stream; Warp: on the device's current stream)."""
    x = op.obj
    if op.kind == "numpy":
        return np.array(x, copy=True, order="C")
    if op.kind == "torch":
        return x.clone(memory_format=_torch().contiguous_format)
    return wp.clone(x, requires_grad=False)


def empty_like_caller(kind: str, ref: Operand, shape: tuple[int, ...], dtype: str):
    """A new result array of the caller's container type on ``ref``'s device."""
    if kind == "torch":
        torch = _torch()
        tdt = torch_dtype(dtype)
        return torch.empty(shape, dtype=tdt, device=ref.obj.device if ref.kind == "torch" else _torch_device(ref))
    if kind == "numpy":
        return np.empty(shape, dtype=dtype)
    return wp.empty(shape, dtype=WP_DTYPES[dtype], device=ref.device)


def _torch_device(op: Operand):
    return "cpu" if op.device.is_cpu else f"cuda:{op.device.ordinal}"


def _needs_copy(op: Operand) -> bool:
    from warp_gemm.core.operands import layout_view

    return layout_view(op)[0] is None


def _max_chunk(op: Operand, widest: int = 16) -> int:
    """The widest copy chunk (bytes, a power of two up to ``widest``) every row of the kernel's view of ``op`` allows."""
    from warp_gemm.core.operands import layout_view

    view, _ = layout_view(op)
    it = ITEM_BYTES[op.dtype]
    vals = [view.ptr] + [st for st, n in zip(view.strides[:-1], view.shape[:-1]) if n > 1]
    for c in (widest, *(w for w in (16, 8, 4, 2) if w < widest)):
        if c >= it and all(v % c == 0 for v in vals):
            return c
    return it


def _layout(op: Operand, widen: bool) -> tuple[str, bool]:
    """(layout the kernel reads, whether the array it reads has 16-byte aligned rows). A strided operand
    is read from a contiguous copy ("N"); a widened one (Warp 1.7) from a contiguous float32 copy."""
    from warp_gemm.core.operands import layout_view

    view, lay = layout_view(op)
    if view is None:
        (nb, r, c), _ = as3d(op)
        lay, ptr, shape, item = "N", 0, (nb, r, c), ITEM_BYTES[op.dtype]
        strides = (r * c * item, c * item, item)
    else:
        ptr, shape, strides = view.ptr, view.shape, view.strides
    if widen:
        ptr, strides = 0, (shape[1] * shape[2] * 4, shape[2] * 4, 4)
    return lay, not (ptr % 16 or strides[1] % 16 or (shape[0] > 1 and strides[0] % 16))




def data_ptr(x) -> int:
    """The address of a plain ``wp.array``, ``numpy.ndarray`` or torch tensor's first element."""
    if type(x) is wp.array:
        return x.ptr
    return x.__array_interface__["data"][0] if type(x) is np.ndarray else x.data_ptr()
