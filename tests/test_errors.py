"""Every class of bad input is rejected before any launch, with a message that names what is wrong.

Each row of :data:`CASES` builds fresh operands, calls matmul/gemm, and asserts:

- the exception type;
- that the message contains the shapes / dtypes / devices / types involved (``needles``);
- that every caller array passed in -- above all a NaN-prefilled ``out`` -- is bit-for-bit unchanged
  (a snapshot of the bytes of each array's whole allocation, taken before the call).

``python tests/test_errors.py`` prints the table of docs/reliability.md from the live messages; a test
checks that every case id appears there.
"""

from __future__ import annotations

import ctypes
import pathlib
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
import pytest
import warp as wp

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # conftest, when run as a script
if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))
from conftest import HAS_CUDA, torch  # noqa: E402

import warp_gemm  # noqa: E402
from warp_gemm import _compat  # noqa: E402
from warp_gemm.core import problem as api

DOC = pathlib.Path(__file__).parent.parent / "docs" / "reliability.md"
F32 = np.float32
M, K, N = 4, 5, 6


# --- helpers ----------------------------------------------------------------------------------------
def nan_np(shape, dtype=F32):
    return np.full(shape, np.nan, dtype=dtype)


def rnd(shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def snapshot(x) -> bytes:
    """The bytes of ``x``'s whole allocation (its base for views), copied to the host."""
    if isinstance(x, np.ndarray):
        base = x
        while isinstance(base.base, np.ndarray):
            base = base.base
        if base.flags.c_contiguous or base.flags.f_contiguous:
            return ctypes.string_at(base.ctypes.data, base.nbytes)
        return base.tobytes()
    if torch is not None and isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            return b"meta"
        st = x.untyped_storage()
        return bytes(st.cpu()) if x.device.type != "cpu" else ctypes.string_at(st.data_ptr(), st.nbytes())
    if isinstance(x, wp.array):
        if x.device.is_cpu:
            return ctypes.string_at(x.ptr, x.capacity) if x.ptr else b""
        u8 = wp.array(ptr=x.ptr, dtype=wp.uint8, shape=(x.capacity,), device=x.device)
        return u8.numpy().tobytes()
    return repr(x).encode()


@dataclass
class Case:
    id: str
    exc: type
    needles: list[str]  # substrings the message must contain
    build: Callable[[], tuple[Callable[[], Any], list[Any]]]  # -> (call, arrays to watch)
    what: str = ""  # the bad-input class, for the table
    patch: Callable[[Any], None] | None = None  # monkeypatch setup
    marks: list = field(default_factory=list)


CASES: list[Case] = []


def case(id, exc, needles, what, patch=None, marks=()):
    def deco(fn):
        CASES.append(Case(id, exc, list(needles), fn, what, patch, list(marks)))
        return fn

    return deco


needs_torch = [pytest.mark.skipif(torch is None, reason="torch not installed")]
has_fp8 = torch is not None and hasattr(torch, "float8_e4m3fn")


def mm(a, b, **kw):
    return lambda: warp_gemm.matmul(a, b, **kw)


def gm(a, b, c=None, **kw):
    return lambda: warp_gemm.gemm(a, b, c, **kw)


# --- shapes -------------------------------------------------------------------------------------------
@case("inner-dims", ValueError, ["4x5", "4x6", "5 != 4", "float32"], "inner dimensions differ")
def _():
    a, b, out = rnd((4, 5)), rnd((4, 6)), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("inner-dims-trans", ValueError, ["op(b)", "4x5", "6x4", "5 != 6"], "inner dims differ after trans_b")
def _():
    a, b, out = rnd((4, 5)), rnd((4, 6)), nan_np((4, 4))
    return gm(a, b, trans_b=True, out=out), [out, a, b]


@case("rank-1", ValueError, ["[5]", "rank 1"], "gemm: a is 1-D (matmul takes it, as torch.matmul)")
def _():
    a, b, out = rnd((5,)), rnd((5, 6)), nan_np((6,))
    return gm(a, b, out=out), [out, a, b]


@case("rank-0", ValueError, ["[]", "rank 0"], "a is a 0-d array")
def _():
    a, b, out = np.array(2.0, dtype=F32), rnd((5, 6)), nan_np((5, 6))
    return mm(a, b, out=out), [out, b]


@case("rank-4", ValueError, ["[2, 2, 4, 5]", "rank 4"], "gemm: a is 4-D (matmul takes it, as torch.matmul)")
def _():
    a, b, out = rnd((2, 2, 4, 5)), rnd((5, 6)), nan_np((2, 2, 4, 6))
    return gm(a, b, out=out), [out, a, b]


@case("nd-out-shape", ValueError, ["out has shape [2, 3, 4, 5]", "[2, 3, 4, 6]"], "matmul 4-D: out of the wrong shape")
def _():
    a, b, out = rnd((2, 3, 4, 5)), rnd((5, 6)), nan_np((2, 3, 4, 5))
    return mm(a, b, out=out), [out, a, b]


@case("nd-batch-mismatch", ValueError, ["[2, 3, 4, 5]", "[4, 5, 6]", "do not broadcast"], "matmul 4-D: batch 3 vs 4")
def _():
    a, b, out = rnd((2, 3, 4, 5)), rnd((4, 5, 6)), nan_np((2, 3, 4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("nd-inner-dims", ValueError, ["[5]", "[4, 6]", "5 != 4"], "matmul 1-D a: inner dimensions differ")
def _():
    a, b, out = rnd((5,)), rnd((4, 6)), nan_np((6,))
    return mm(a, b, out=out), [out, a, b]


@case("rank-1-b-torch", ValueError, ["b has shape [5]", "rank 1"], "gemm: b is a 1-D torch tensor", marks=needs_torch)
def _():
    a, b, out = torch.randn(4, 5), torch.randn(5), torch.full((4,), float("nan"))
    return gm(a, b, out=out), [out, a, b]


@case("batch-mismatch", ValueError, ["3 (a: 3x4x5)", "4 (b: 4x5x6)", "do not broadcast"], "batch 3 vs 4")
def _():
    a, b, out = rnd((3, 4, 5)), rnd((4, 5, 6)), nan_np((4, 4, 6))
    return mm(a, b, out=out), [out, a, b]


# --- dtypes -------------------------------------------------------------------------------------------
@case("dtype-mismatch", TypeError, ["float32[4, 5]", "float64[5, 6]"], "a float32, b float64")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6), np.float64), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("dtype-mismatch-torch-16", TypeError, ["float16[4, 5]", "bfloat16[5, 6]"], "a float16, b bfloat16 (torch)",
      marks=needs_torch)
def _():
    a, b = torch.randn(4, 5, dtype=torch.float16), torch.randn(5, 6, dtype=torch.bfloat16)
    out = torch.full((4, 6), float("nan"), dtype=torch.float16)
    return mm(a, b, out=out), [out, a, b]


def _np_dtype_case(dt, label):
    @case(f"numpy-{label}", TypeError, [f"numpy {np.dtype(dt).name}[4, 5]", "float16, bfloat16, float32"],
          f"numpy {np.dtype(dt).name} operands")
    def _():
        a, b, out = np.ones((4, 5), dt), np.ones((5, 6), dt), nan_np((4, 6))
        return mm(a, b, out=out), [out, a, b]


for _dt, _label in [(np.int32, "int32"), (np.int8, "int8"), (np.bool_, "bool"), (np.complex64, "complex64"),
                    (np.longdouble, "longdouble"), (object, "object")]:
    _np_dtype_case(_dt, _label)


def _torch_dtype_case(name, label, ok=True):
    @case(f"torch-{label}", TypeError, [f"torch {name}[4, 5] tensor", "float16, bfloat16, float32"],
          f"torch {name} operands", marks=[pytest.mark.skipif(not ok, reason=f"torch without {name}")])
    def _():
        dt = getattr(torch, name)
        a, b = torch.ones(4, 5).to(dt), torch.ones(5, 6).to(dt)
        out = torch.full((4, 6), float("nan"))
        return mm(a, b, out=out), [out, a, b]


for _name, _label in [("int64", "int64"), ("int32", "int32"), ("bool", "bool"), ("complex64", "complex64"),
                      ("float8_e4m3fn", "fp8-e4m3"), ("float8_e5m2", "fp8-e5m2")]:
    _torch_dtype_case(_name, _label, ok=torch is not None and hasattr(torch, _name))


def _warp_dtype_case(dt, label):
    @case(f"warp-{label}", TypeError, [f"warp {dt.__name__}[4, 5] array on cpu", "float16, bfloat16, float32"],
          f"wp.array of {dt.__name__}")
    def _():
        a, b = wp.zeros((4, 5), dtype=dt, device="cpu"), wp.zeros((5, 6), dtype=dt, device="cpu")
        out = wp.array(nan_np((4, 6)), dtype=wp.float32, device="cpu")
        return mm(a, b, out=out), [out, a, b]


for _dt, _label in [(wp.int32, "int32"), (wp.uint8, "uint8"), (wp.bool, "bool"), (wp.vec3, "vec3")]:
    _warp_dtype_case(_dt, _label)


@case("numpy-big-endian", TypeError, [">f4[4, 5]", "byte order"], "numpy float32 in big-endian byte order")
def _():
    a, b, out = rnd((4, 5)).astype(">f4"), rnd((5, 6)).astype(">f4"), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("mixed-int-float", TypeError, ["b is a numpy int64[5, 6]"], "a float32, b int64")
def _():
    a, b, out = rnd((4, 5)), np.ones((5, 6), np.int64), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


# --- containers ------------------------------------------------------------------------------------------
def _type_case(label, value, where="a"):
    tname = f"{type(value).__module__}.{type(value).__name__}"

    @case(f"type-{where}-{label}", TypeError, [f"{where} is a {tname}", "wp.array, torch.Tensor or numpy.ndarray"],
          f"{where} is a {tname}")
    def _():
        good, out = rnd((5, 5)), nan_np((5, 5))
        if where == "a":
            return mm(value, good, out=out), [out, good]
        if where == "b":
            return mm(good, value, out=out), [out, good]
        if where == "c":
            return gm(good, good, value, beta=1.0, out=out), [out, good]
        return mm(good, good.copy(), out=value), [good]


for _label, _v, _w in [("list", [[1.0, 2.0]], "a"), ("float", 1.5, "a"), ("none", None, "a"), ("str", "abc", "a"),
                       ("np-scalar", np.float32(2.0), "b"), ("tuple", ((1.0,),), "b"), ("list", [[0.0] * 5] * 5, "c"),
                       ("list", [[0.0] * 5] * 5, "out"), ("np-scalar", np.float32(0.0), "out")]:
    _type_case(_label, _v, _w)


# --- out ------------------------------------------------------------------------------------------------
@case("out-shape", ValueError, ["out has shape [4, 5]", "[4, 6]", "4x5 @ 5x6"], "out has the wrong shape")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 5))
    return mm(a, b, out=out), [out, a, b]


@case("out-shape-transposed", ValueError, ["out has shape [6, 4]", "[4, 6]"], "out is (N, M) instead of (M, N)")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((6, 4))
    return mm(a, b, out=out), [out, a, b]


@case("out-rank", ValueError, ["out has shape [4, 6]", "[2, 4, 6]", "2x4x5 @ 5x6"], "2-D out for a batched result")
def _():
    a, b, out = rnd((2, 4, 5)), rnd((5, 6)), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("out-int", TypeError, ["out is a numpy int32[4, 6]"], "out of dtype int32")
def _():
    a, b = rnd((4, 5)), rnd((5, 6))
    out = np.full((4, 6), -7, np.int32)
    return mm(a, b, out=out), [out, a, b]


@case("out-bool-torch", TypeError, ["out is a torch bool[4, 6]"], "out a torch bool tensor", marks=needs_torch)
def _():
    a, b, out = torch.randn(4, 5), torch.randn(5, 6), torch.ones(4, 6, dtype=torch.bool)
    return mm(a, b, out=out), [out, a, b]


@case("out-readonly", ValueError, ["out (numpy float32[4, 6] on cpu)", "read-only"], "read-only numpy out")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    out.setflags(write=False)
    return mm(a, b, out=out), [out, a, b]


@case("out-broadcast-numpy", ValueError, ["out (numpy float32[4, 6] on cpu)", "read-only"],
      "out = np.broadcast_to(row, (M, N))")
def _():
    a, b, row = rnd((4, 5)), rnd((5, 6)), nan_np((6,))
    return mm(a, b, out=np.broadcast_to(row, (4, 6))), [row, a, b]


@case("out-expanded-torch", ValueError, ["out (torch float32[4, 6] on cpu, strides [0, 1])", "one address"],
      "out = torch row.expand(M, N) (stride 0)", marks=needs_torch)
def _():
    a, b, row = torch.randn(4, 5), torch.randn(5, 6), torch.full((6,), float("nan"))
    return mm(a, b, out=row.expand(4, 6)), [row, a, b]


@case("out-negative-strides", ValueError, ["out (numpy float32[4, 6] on cpu)", "negative or unaligned strides"],
      "out = x[::-1] (numpy negative strides)")
def _():
    a, b, x = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return mm(a, b, out=x[::-1]), [x, a, b]


@case("out-is-a", ValueError, ["out (numpy float32[5, 5] on cpu) shares memory with a (numpy float32[5, 5]"],
      "out is a (full overlap)")
def _():
    a, b = rnd((5, 5)), rnd((5, 5), seed=1)
    return mm(a, b, out=a), [a, b]


@case("out-view-of-a", ValueError, ["shares memory with a", "float32[4, 6]"],
      "out is a view of a (partial overlap: a = big[:, :6], out = big[:, 4:])")
def _():
    big, b = rnd((4, 10)), rnd((6, 6), seed=1)
    return mm(big[:, :6], b, out=big[:, 4:]), [big, b]


@case("out-is-b", ValueError, ["shares memory with b (numpy float32[5, 5]"], "out is b")
def _():
    a, b = rnd((5, 5)), rnd((5, 5), seed=1)
    return mm(a, b, out=b), [a, b]


@case("out-is-b-transposed", ValueError, ["shares memory with b"], "out is b.T (trans_b)")
def _():
    a, b = rnd((5, 5)), rnd((5, 5), seed=1)
    return gm(a, b, trans_b=True, out=b.T), [a, b]


@case("out-is-c-transposed", ValueError, ["shares memory with c (numpy float32[5, 5]", "not another view"],
      "out is c.T (same memory, other strides; out = c itself is an in-place gemm)")
def _():
    a, b, c = rnd((5, 5)), rnd((5, 5), seed=1), rnd((5, 5), seed=2)
    return gm(a, b, c, beta=1.0, out=c.T), [a, b, c]


@case("out-overlaps-c", ValueError, ["shares memory with c (numpy float32[4, 6]", "not another view"],
      "out and c overlap in part (c = big[:, :6], out = big[:, 2:])")
def _():
    a, b, big = rnd((4, 5)), rnd((5, 6)), rnd((4, 8), seed=2)
    return gm(a, b, big[:, :6], beta=1.0, out=big[:, 2:]), [a, b, big]


@case("out-contains-c", ValueError, ["shares memory with c (numpy float32[6]"], "c = out[0] (a bias row inside out)")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return gm(a, b, out[0], beta=1.0, out=out), [a, b, out]


@case("out-is-a-torch-view", ValueError, ["shares memory with a (torch float32"], "torch: out a slice of a",
      marks=needs_torch)
def _():
    big, b = torch.randn(8, 6), torch.randn(6, 6)
    return mm(big[:6], b, out=big[2:]), [big, b]


@case("out-is-a-warp-view", ValueError, ["shares memory with a (warp float32"], "wp.array: out a slice of a")
def _():
    big = wp.array(rnd((8, 6)), dtype=wp.float32, device="cpu")
    b = wp.array(rnd((6, 6)), dtype=wp.float32, device="cpu")
    return mm(big[0:6], b, out=big[2:8]), [big, b]


# --- c ---------------------------------------------------------------------------------------------------
@case("c-shape", ValueError, ["c has shape [3, 6]", "result shape [4, 6]"], "c (3, 6) for a (4, 6) result")
def _():
    a, b, c, out = rnd((4, 5)), rnd((5, 6)), rnd((3, 6)), nan_np((4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


@case("c-bias-length", ValueError, ["c has shape [5]", "result shape [4, 6]"], "bias of length K instead of N")
def _():
    a, b, c, out = rnd((4, 5)), rnd((5, 6)), rnd((5,)), nan_np((4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


@case("c-rank", ValueError, ["c has shape [1, 1, 4, 6]", "[4, 6]"], "c of higher rank than the result")
def _():
    a, b, c, out = rnd((4, 5)), rnd((5, 6)), rnd((1, 1, 4, 6)), nan_np((4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


@case("c-batch", ValueError, ["c has shape [3, 4, 6]", "[2, 4, 6]"], "c batch 3 for result batch 2")
def _():
    a, b, c, out = rnd((2, 4, 5)), rnd((2, 5, 6)), rnd((3, 4, 6)), nan_np((2, 4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


@case("c-dtype", TypeError, ["c is float64[4, 6]", "result is float32"], "c float64, result float32")
def _():
    a, b, c, out = rnd((4, 5)), rnd((5, 6)), rnd((4, 6), np.float64), nan_np((4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


@case("c-dtype-vs-out", TypeError, ["c is float16[4, 6]", "result is float32"],
      "float16 inputs, float32 out, float16 c")
def _():
    a, b = rnd((4, 5), np.float16), rnd((5, 6), np.float16)
    c, out = rnd((4, 6), np.float16), nan_np((4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


@case("c-int", TypeError, ["c is a numpy int32[4, 6]"], "c of dtype int32")
def _():
    a, b, c, out = rnd((4, 5)), rnd((5, 6)), np.ones((4, 6), np.int32), nan_np((4, 6))
    return gm(a, b, c, beta=1.0, out=out), [out, a, b, c]


# --- alpha / beta ----------------------------------------------------------------------------------------
def _scalar_case(label, name, value, exc=TypeError, needle=None, shown=None):
    @case(f"{name}-{label}", exc, [f"{name}", needle or type(value).__name__], f"{name}={shown or repr(value)}")
    def _():
        a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
        return gm(a, b, rnd((4, 6), seed=3), out=out, **{name: value}), [out, a, b]


for _label, _name, _v, _e, _n in [
    ("str", "alpha", "2", TypeError, "str"),
    ("None", "beta", None, TypeError, "NoneType"),
    ("complex", "alpha", 1 + 2j, TypeError, "complex"),
    ("np-complex", "beta", np.complex128(1 + 0j), TypeError, "complex128"),
    ("array", "alpha", np.ones(3), TypeError, "ndarray"),
    ("list", "beta", [1.0], TypeError, "list"),
    ("huge-int", "alpha", 10**400, ValueError, "too large"),
]:
    _scalar_case(_label, _name, _v, _e, _n, "10**400" if _label == "huge-int" else None)


# --- devices -------------------------------------------------------------------------------------------
@case("meta-device", ValueError, ["a is a torch float32[2, 2] tensor on device meta", "'cpu' and 'cuda'"],
      "torch tensors on the meta device", marks=needs_torch)
def _():
    a, b = torch.empty(2, 2, device="meta"), torch.empty(2, 2, device="meta")
    return mm(a, b), [a, b]


@case("meta-out", ValueError, ["out is a torch float32[2, 2] tensor on device meta"], "out on the meta device",
      marks=needs_torch)
def _():
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    return mm(a, b, out=torch.empty(2, 2, device="meta")), [a, b]


class FakeCuda:
    """Stands in for a ``wp.context.Device`` other than the CPU (only str/is_cpu/ordinal are read)."""

    is_cpu = False
    is_cuda = True
    ordinal = 0

    def __str__(self):
        return "cuda:0"

    __repr__ = __str__


def _on_fake_cuda(which: str):
    """Monkeypatch api.describe so the operand named ``which`` reports a CUDA device (CPU-only test)."""

    def patch(mp):
        real = api.describe

        def fake(x, name):
            op = real(x, name)
            return replace(op, device=FakeCuda()) if name == which else op

        mp.setattr(api, "describe", fake)

    return patch


for _w, _needles in [("b", ["a is numpy float32[4, 5] on cpu", "b is numpy float32[5, 6] on cuda:0"]),
                     ("c", ["c is numpy float32[4, 6] on cuda:0", "a and b are on cpu"]),
                     ("out", ["out is numpy float32[4, 6] on cuda:0", "operands are on cpu"])]:
    def _mk(w=_w):
        def _():
            a, b, c, out = rnd((4, 5)), rnd((5, 6)), rnd((4, 6)), nan_np((4, 6))
            return gm(a, b, c if w == "c" else None, beta=1.0, out=out), [out, a, b, c]

        return _

    case(f"device-{_w}", ValueError, _needles, f"{_w} on another device (mocked cuda:0)",
         patch=_on_fake_cuda(_w))(_mk())


def _mixed_device(w):
    def _():
        dev = "cuda:0"
        a = torch.randn(4, 5)
        b = torch.randn(5, 6, device=dev if w == "b" else "cpu")
        c = torch.randn(4, 6, device=dev if w == "c" else "cpu")
        out = torch.full((4, 6), float("nan"), device=dev if w == "out" else "cpu")
        return gm(a, b, c if w == "c" else None, beta=1.0, out=out), [out, a, b, c]

    return _


for _w in ("b", "c", "out"):
    case(f"gpu-device-{_w}", ValueError, ["cpu", "cuda:0"], f"torch {_w} on cuda:0, a on cpu (real GPU)",
         marks=needs_torch + [pytest.mark.gpu])(_mixed_device(_w))


# --- the function the caller called, its parameters, config and options ------------------------------------
@case("torch-int32-names-matmul", TypeError, ["matmul: a is a torch int32[4, 5] tensor"],
      "torch int32 operands: the message names matmul, not the operator behind it", marks=needs_torch)
def _():
    a, b = torch.ones(4, 5, dtype=torch.int32), torch.ones(5, 6, dtype=torch.int32)
    return mm(a, b), [a, b]


@case("meta-device-matmul-torch", ValueError, ["matmul: a is a torch float32[2, 3] tensor on device meta"],
      "torch matmul of meta tensors (no out)", marks=needs_torch)
def _():
    a, b = torch.empty(2, 3, device="meta"), torch.empty(3, 2, device="meta")
    return mm(a, b), [a, b]


@case("config-text-bad", ValueError, ["'32x32/b64'", "TMxTNxTK"], "config='32x32/b64' (tile shape of two sides)")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return mm(a, b, out=out, config="32x32/b64"), [out, a, b]


@case("config-type", TypeError, ["gemm: config must be a warp_gemm.Config", "got int"], "config=3")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return gm(a, b, out=out, config=3), [out, a, b]


@case("config-pipe", TypeError, ["matmul: config", "PipeConfig", "pipe_config"], "config=PipeConfig(...)")
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return mm(a, b, out=out, config=warp_gemm.PipeConfig(32, 32, 32)), [out, a, b]


@case("config-parse-field", ValueError, ["'32x32x32/q1'", "unknown field 'q1'", "TMxTNxTK"],
      "Config.parse('32x32x32/q1')")
def _():
    return (lambda: warp_gemm.Config.parse("32x32x32/q1")), []


@case("options-unknown-name", ValueError, ["options: unknown option(s) 'famly'", "family"], "options(famly='tiled')")
def _():
    return (lambda: warp_gemm.options(famly="tiled")), []


@case("options-unknown-family", ValueError, ["options: family", "'fast'", "'pipelined'"], "options(family='fast')")
def _():
    return (lambda: warp_gemm.options(family="fast")), []


@case("options-cpu-backend", ValueError, ["cpu_backend must be 'host' or 'tiles'", "'gpu'"],
      "options(cpu_backend='gpu')")
def _():
    return (lambda: warp_gemm.options(cpu_backend="gpu")), []


@case("options-bool", TypeError, ["options: record_launches must be True or False", "'yes'"],
      "options(record_launches='yes')")
def _():
    return (lambda: warp_gemm.options(record_launches="yes")), []


@case("linear-features-numpy", ValueError, ["linear: x has shape [4, 5]", "weight has shape [3, 4]"],
      "linear: x (4, 5) with weight (3, 4)")
def _():
    x, w = rnd((4, 5)), rnd((3, 4))
    return (lambda: warp_gemm.linear(x, w)), [x, w]


@case("linear-features-torch", ValueError, ["linear: x has shape [4, 5]", "weight has shape [3, 4]"],
      "linear: torch x (4, 5) with weight (3, 4)", marks=needs_torch)
def _():
    x, w = torch.randn(4, 5), torch.randn(3, 4)
    return (lambda: warp_gemm.linear(x, w)), [x, w]


@case("linear-bias-torch", ValueError, ["linear: bias has shape [4]", "expected (3,)"],
      "linear: torch bias of the wrong length", marks=needs_torch)
def _():
    x, w, bias = torch.randn(2, 5), torch.randn(3, 5), torch.randn(4)
    return (lambda: warp_gemm.linear(x, w, bias)), [x, w, bias]


@case("linear-weight-1d", ValueError, ["linear: weight has shape [5]", "2-D"], "linear: 1-D weight")
def _():
    x, w = rnd((5,)), rnd((5,))
    return (lambda: warp_gemm.linear(x, w)), [x, w]


@case("linear-dtype", TypeError, ["linear: x is float32", "weight is float64"], "linear: x float32, weight float64")
def _():
    x, w = rnd((2, 5)), rnd((3, 5), np.float64)
    return (lambda: warp_gemm.linear(x, w)), [x, w]


# --- the installed Warp ---------------------------------------------------------------------------------
@case("warp-unsupported", _compat.UnsupportedWarpError, [f"warp-lang >= {_compat.MIN_RELEASE}", "installed"],
      "Warp older than 1.7 (monkeypatched SUPPORTED=False)", patch=lambda mp: mp.setattr(_compat, "SUPPORTED", False))
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("warp-no-cpu-tiles", _compat.UnsupportedWarpError, [f"warp-lang >= {_compat.MIN_CPU_RELEASE}", "CPU"],
      "Warp without CPU tiles on the CPU (monkeypatched HAS_CPU_TILES=False)",
      patch=lambda mp: mp.setattr(_compat, "HAS_CPU_TILES", False))
def _():
    a, b, out = rnd((4, 5)), rnd((5, 6)), nan_np((4, 6))
    return mm(a, b, out=out), [out, a, b]


@case("warp-no-bf16", TypeError, ["a is a torch bfloat16[4, 5] tensor on cpu", "bfloat16 needs warp-lang >= 1.13"],
      "torch bfloat16 on a Warp without wp.bfloat16 (monkeypatched HAS_BF16=False)",
      patch=lambda mp: mp.setattr(_compat, "HAS_BF16", False), marks=needs_torch)
def _():
    a, b = torch.randn(4, 5, dtype=torch.bfloat16), torch.randn(5, 6, dtype=torch.bfloat16)
    out = torch.full((4, 6), float("nan"), dtype=torch.bfloat16)
    return mm(a, b, out=out), [out, a, b]


# --- the tests -----------------------------------------------------------------------------------------
def _launch_counter(mp):
    """Count every Warp launch made while the bad call runs: there must be none."""
    n = {"n": 0}
    for name in ("launch", "launch_tiled"):
        real = getattr(wp, name)

        def counted(*args, _real=real, **kw):
            n["n"] += 1
            return _real(*args, **kw)

        mp.setattr(wp, name, counted)
    return n


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=c.marks) for c in CASES])
def test_bad_input(case, monkeypatch):
    call, watch = case.build()
    before = [snapshot(x) for x in watch]
    if case.patch:
        case.patch(monkeypatch)
    launches = _launch_counter(monkeypatch)
    with pytest.raises(case.exc) as ei:
        call()
    msg = str(ei.value)
    missing = [n for n in case.needles if n not in msg]
    assert not missing, f"message lacks {missing}: {msg!r}"
    assert launches["n"] == 0, f"{launches['n']} Warp launches before the error"
    for i, (x, b) in enumerate(zip(watch, before)):
        assert snapshot(x) == b, f"argument {i} ({type(x).__name__}) was modified by a rejected call"


def test_case_count_and_doc_table():
    assert len(CASES) >= 25
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    if DOC.exists():
        text = DOC.read_text()
        missing = [i for i in ids if f"`{i}`" not in text]
        assert not missing, f"docs/reliability.md lacks rows for {missing} (regenerate: python tests/test_errors.py)"


def test_valid_scalars_still_accepted():
    """The stricter alpha/beta check must keep accepting every real scalar type."""
    a, b = rnd((4, 5)), rnd((5, 6))
    ref = a.astype(np.float64) @ b
    for v in (2, 2.0, np.float16(2), np.float32(2), np.float64(2), np.int64(2), True, np.array(2.0)) + (
            (torch.tensor(2.0),) if torch is not None else ()):
        got = warp_gemm.gemm(a, b, alpha=v)
        np.testing.assert_allclose(got, float(v) * ref, rtol=1e-5, atol=1e-5)


def test_config_text_is_parsed():
    """``config=`` takes a Config's text as well as the Config."""
    a, b = rnd((4, 5)), rnd((5, 6))
    ref = a.astype(np.float64) @ b
    for cfg in ("32x32x32/b64", warp_gemm.Config.parse("32x32x32/b64")):
        np.testing.assert_allclose(warp_gemm.matmul(a, b, config=cfg), ref, rtol=1e-5, atol=1e-5)


def test_linear_takes_1d_numpy_and_warp_x():
    """A 1-D x is one row, as torch's linear takes it, for every container."""
    rng = np.random.default_rng()
    x, w, bias = (rng.standard_normal(s).astype(F32) for s in ((5,), (3, 5), (3,)))
    ref = w.astype(np.float64) @ x + bias
    y = warp_gemm.linear(x, w, bias)
    assert y.shape == (3,)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    yw = warp_gemm.linear(wp.array(x, device="cpu"), wp.array(w, device="cpu"), wp.array(bias, device="cpu"))
    assert isinstance(yw, wp.array) and yw.shape == (3,)
    np.testing.assert_allclose(yw.numpy(), ref, rtol=1e-5, atol=1e-5)
    if torch is not None:
        yt = warp_gemm.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias))
        assert tuple(yt.shape) == (3,)
        np.testing.assert_allclose(yt.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_writable_views_still_accepted():
    """The out checks refuse read-only / overlapping / negative-stride outs, not ordinary views."""
    a, b = rnd((4, 5)), rnd((5, 6))
    big = nan_np((4, 12))
    warp_gemm.matmul(a, b, out=big[:, ::2])  # strided
    np.testing.assert_allclose(big[:, ::2], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert np.isnan(big[:, 1::2]).all()
    col = nan_np((6, 4)).T  # column-major
    warp_gemm.matmul(a, b, out=col)
    np.testing.assert_allclose(col, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    one = nan_np((1, 6))  # a size-1 dimension may have any stride
    warp_gemm.matmul(a[:1], b, out=np.lib.stride_tricks.as_strided(one, (1, 6), (0, 4)))
    np.testing.assert_allclose(one, a[:1].astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    # Empty outs hold no element, whatever their strides (found by the fuzzer: a (0, 2) view with strides 0).
    a0, b0 = np.zeros((0, 0), np.float16), np.zeros((0, 2), np.float16)
    for empty in (np.full((2, 0), np.nan, np.float16).T, np.zeros((0, 2), np.float16)[::-1],
                  np.lib.stride_tricks.as_strided(np.zeros(1, np.float16), (0, 2), (0, 0))):
        assert warp_gemm.matmul(a0, b0, out=empty) is empty


def _table() -> str:
    """The markdown table of docs/reliability.md, from the live messages (CPU cases; GPU rows noted)."""
    import _pytest.monkeypatch

    rows = ["| id | bad input | raises | sample message |", "|---|---|---|---|"]
    for c in CASES:
        if any(getattr(m, "name", "") == "gpu" for m in c.marks) and not HAS_CUDA:
            rows.append(f"| `{c.id}` | {c.what} | `{c.exc.__name__}` | (GPU only) as `device-{c.id.split('-')[-1]}`, "
                        "with torch tensors and a real cuda:0 |")
            continue
        mp = _pytest.monkeypatch.MonkeyPatch()
        try:
            call, _ = c.build()
            if c.patch:
                c.patch(mp)
            try:
                call()
                msg = "NOT RAISED"
            except Exception as e:  # noqa: BLE001
                msg = str(e)
        except Exception as e:  # noqa: BLE001 - e.g. torch missing
            msg = f"(not built here: {e})"
        finally:
            mp.undo()
        msg = msg.replace("|", "\\|")
        rows.append(f"| `{c.id}` | {c.what} | `{c.exc.__name__}` | {msg} |")
    return "\n".join(rows)


if __name__ == "__main__":
    _compat.init()
    print(_table())
