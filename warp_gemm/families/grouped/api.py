"""The grouped family's calls without torch's operator layer: validation, results, wp.Tape.

:func:`grouped_mm_core` and :func:`grouped_matmul_core` take any container (torch, wp.array, NumPy) and
return the caller's container; the torch operators (``warp_gemm/torch/grouped_ops.py``) call them, and
``warp_gemm.grouped`` calls them for the other containers.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import warp as wp

from . import _deps
from .launch import run_grouped_matmul, run_grouped_mm
from .spec import out_dtype_name, validate

LIST_FNAME = "grouped_matmul"


def _torch():
    return sys.modules.get("torch")


# --- one grouped product --------------------------------------------------------------------------------------
def grouped_mm_core(mat_a, mat_b, offs, bias, out_dtype, allow_tf32: bool = False, spec=None):
    """``grouped_mm`` (see :func:`warp_gemm.grouped_mm`) into a new result of ``mat_a``'s container type on its
    device. ``spec``: a kernel configuration instead of the rules' (tests)."""
    p, A, B, (G, _dev, host), Bi = validate(mat_a, mat_b, offs, bias, out_dtype)
    result = _deps.empty_like_caller(A.kind, A, p.out_shape, p.out_dtype)
    D = _deps.describe(result, "result")
    return run_grouped_mm(p, A, B, offs, host, Bi, result, D, allow_tf32, spec)


# --- a list of products ------------------------------------------------------------------------------------------
@dataclass
class ListMeta:
    """Columns (NumPy int64) describing a list of products: pointers, sizes, layout code (2 * (A is T) + (B is
    T)), stored row strides in elements."""

    a_ptr: np.ndarray
    b_ptr: np.ndarray
    d_ptr: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    layout: np.ndarray
    lda: np.ndarray
    ldb: np.ndarray
    ldd: np.ndarray


_WP_NAMES = {wp.float16: "float16", wp.float32: "float32", wp.float64: "float64"}
if hasattr(wp, "bfloat16"):
    _WP_NAMES[wp.bfloat16] = "bfloat16"


def _columns(xs, name: str):
    """``(kind, dtype name, device str, pointers, shapes (L, 2), element strides (L, 2))`` of a list of 2-D
    arrays of one container type, dtype and device; TypeError / ValueError naming the first that differs."""
    torch = _torch()
    x0 = xs[0]
    first = _deps.describe(x0, f"{name}[0]") if not isinstance(x0, (list, tuple)) else None
    if first is None:
        raise TypeError(f"{LIST_FNAME}: {name}[0] is a {type(x0).__name__}; pass arrays")
    kind = first.kind
    if kind == "torch":
        if not all(type(x) is torch.Tensor or isinstance(x, torch.Tensor) for x in xs):
            bad = next(i for i, x in enumerate(xs) if not isinstance(x, torch.Tensor))
            raise TypeError(f"{LIST_FNAME}: {name}[0] is a torch tensor but {name}[{bad}] is a "
                            f"{type(xs[bad]).__name__}; pass one container type")
        dts = {x.dtype for x in xs}
        devs = {x.device for x in xs}
        dims = {x.dim() for x in xs}
        ptrs = [x.data_ptr() for x in xs]
        shapes = [tuple(x.shape) for x in xs]
        strides = [x.stride() for x in xs]
    elif kind == "warp":
        if not all(isinstance(x, wp.array) for x in xs):
            bad = next(i for i, x in enumerate(xs) if not isinstance(x, wp.array))
            raise TypeError(f"{LIST_FNAME}: {name}[0] is a wp.array but {name}[{bad}] is a {type(xs[bad]).__name__}; "
                            "pass one container type")
        dts = {x.dtype for x in xs}
        devs = {str(x.device) for x in xs}
        dims = {x.ndim for x in xs}
        ptrs = [x.ptr or 0 for x in xs]
        shapes = [tuple(x.shape) for x in xs]
        it = _deps.ITEMSIZE[first.dtype]
        strides = [tuple(s // it for s in x.strides) for x in xs]
    else:
        ops = []
        for i, x in enumerate(xs):
            if not isinstance(x, np.ndarray):
                raise TypeError(f"{LIST_FNAME}: {name}[0] is a numpy array but {name}[{i}] is a "
                                f"{type(x).__name__}; pass one container type")
            ops.append(_deps.describe(x, f"{name}[{i}]"))
        dts = {o.dtype for o in ops}
        devs = {"cpu"}
        dims = {o.ndim for o in ops}
        ptrs = [o.ptr for o in ops]
        shapes = [o.shape for o in ops]
        strides = [o.strides for o in ops]
    if len(dts) > 1:
        i = next(i for i, x in enumerate(xs) if x.dtype != x0.dtype)
        raise TypeError(f"{LIST_FNAME}: {name}[0] is {first.dtype}{list(first.shape)} but {name}[{i}] is "
                        f"{str(xs[i].dtype).replace('torch.', '')}{list(xs[i].shape)}; every operand must have one dtype")
    if len(devs) > 1:
        raise ValueError(f"{LIST_FNAME}: the {name} operands are on several devices ({sorted(map(str, devs))}); "
                         "put them on one")
    if dims != {2}:
        i = next(i for i, s in enumerate(shapes) if len(s) != 2)
        raise ValueError(f"{LIST_FNAME}: {name}[{i}] has shape {list(shapes[i])}; every operand must be 2-D")
    return (first, np.array(ptrs, dtype=np.int64), np.array(shapes, dtype=np.int64).reshape(-1, 2),
            np.array(strides, dtype=np.int64).reshape(-1, 2))


def _layouts(shapes: np.ndarray, strides: np.ndarray):
    """``(is_T, ld, ok)`` per matrix: read through the transpose (unit row stride), the stored row stride, and
    whether either dimension has unit stride."""
    r, c = shapes[:, 0], shapes[:, 1]
    sr, sc = strides[:, 0].copy(), strides[:, 1].copy()
    sc[c <= 1] = 1
    one_row = r <= 1
    sr[one_row] = np.where(sc[one_row] == 1, np.maximum(c[one_row], 1), 1)
    n_lay = sc == 1
    t_lay = ~n_lay & (sr == 1)
    ld = np.where(n_lay, np.maximum(np.maximum(sr, c), 1), np.maximum(np.maximum(sc, r), 1))
    return t_lay, ld, n_lay | t_lay


def grouped_matmul_core(list_a, list_b, out, allow_tf32: bool = False, spec=None, requires_grad: bool = False):
    """``[a_i @ b_i]`` into ``out`` (a list of ``(M_i, N_i)`` arrays of one dtype) or new arrays of the
    operands' container; returns the list of results."""
    if not isinstance(list_a, (list, tuple)) or not isinstance(list_b, (list, tuple)):
        raise TypeError(f"{LIST_FNAME}: list_a and list_b must be lists of 2-D arrays; got "
                        f"{type(list_a).__name__} and {type(list_b).__name__}")
    if len(list_a) != len(list_b):
        raise ValueError(f"{LIST_FNAME}: {len(list_a)} left operands but {len(list_b)} right operands")
    if out is not None and (not isinstance(out, (list, tuple)) or len(out) != len(list_a)):
        raise ValueError(f"{LIST_FNAME}: out must be a list of {len(list_a)} arrays; got "
                         f"{type(out).__name__} of {len(out) if isinstance(out, (list, tuple)) else '?'}")
    if not list_a:
        return [] if out is None else list(out)
    A0, ap, ash, ast = _columns(list_a, "list_a")
    B0, bp, bsh, bst = _columns(list_b, "list_b")
    if A0.kind != B0.kind:
        raise TypeError(f"{LIST_FNAME}: list_a holds {A0.kind} arrays and list_b {B0.kind} arrays; pass one "
                        "container type")
    if A0.dtype != B0.dtype:
        raise TypeError(f"{LIST_FNAME}: list_a is {A0.dtype} but list_b is {B0.dtype}; every operand must have "
                        "one dtype")
    if str(A0.device) != str(B0.device):
        raise ValueError(f"{LIST_FNAME}: list_a is on {A0.device} and list_b on {B0.device}; put them on one device")
    bad = np.nonzero(ash[:, 1] != bsh[:, 0])[0]
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"{LIST_FNAME}: product {i}: a {A0.dtype}{list(ash[i])} @ b {list(bsh[i])}: inner "
                         f"dimensions differ ({ash[i, 1]} != {bsh[i, 0]})")
    ta, lda, oka = _layouts(ash, ast)
    tb, ldb, okb = _layouts(bsh, bst)
    fix = np.nonzero(~(oka & okb))[0]
    if len(fix):  # neither dimension with unit stride: contiguous copies of those operands
        la2, lb2 = list(list_a), list(list_b)
        for i in fix:
            for lst, ops in ((la2, "a"), (lb2, "b")):
                x = lst[i]
                lst[i] = x.contiguous() if A0.kind == "torch" else (np.ascontiguousarray(x) if A0.kind == "numpy"
                                                                     else wp.clone(x))
        return grouped_matmul_core(la2, lb2, out, allow_tf32, spec, requires_grad)
    ms, ns, ks = ash[:, 0], bsh[:, 1], ash[:, 1]
    in_dt = A0.dtype
    if out is None:
        results, dp, ldd = _new_outputs(A0, in_dt, ms, ns, requires_grad)
        out_dt = in_dt
    else:
        D0, dp, dsh, dst = _columns(list(out), "out")
        out_dt = out_dtype_name(D0.dtype, in_dt, LIST_FNAME)
        if D0.kind != A0.kind or str(D0.device) != str(A0.device):
            raise ValueError(f"{LIST_FNAME}: out holds {D0.kind} arrays on {D0.device}; the operands are {A0.kind} "
                             f"arrays on {A0.device}")
        wrong = np.nonzero((dsh[:, 0] != ms) | (dsh[:, 1] != ns))[0]
        if len(wrong):
            i = int(wrong[0])
            raise ValueError(f"{LIST_FNAME}: out[{i}] has shape {list(dsh[i])}; a[{i}] {list(ash[i])} @ b[{i}] "
                             f"{list(bsh[i])} is ({ms[i]}, {ns[i]})")
        unit = (dst[:, 1] == 1) | (dsh[:, 1] <= 1)
        if not unit.all():
            i = int(np.nonzero(~unit)[0][0])
            raise ValueError(f"{LIST_FNAME}: out[{i}] ({list(dsh[i])}, strides {list(dst[i])}) needs unit column "
                             "stride")
        ldd = np.where(dsh[:, 0] > 1, dst[:, 0], np.maximum(dsh[:, 1], 1))
        results = list(out)
    meta = ListMeta(ap, bp, dp, ms, ns, ks, 2 * ta.astype(np.int64) + tb.astype(np.int64), lda, ldb, ldd)
    run_grouped_matmul(meta, A0.device, A0, in_dt, out_dt, allow_tf32, spec)
    return results


def _new_outputs(A0, dtype: str, ms: np.ndarray, ns: np.ndarray, requires_grad: bool):
    """``(results, pointers, row strides)`` of new ``(M_i, N_i)`` results in ``A0``'s container and device: views
    of one buffer (torch, NumPy), or one wp.array each."""
    sizes = ms * ns
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])) if len(sizes) else np.zeros(0, np.int64)
    it = _deps.ITEMSIZE[dtype]
    total = int(sizes.sum())
    ld = np.maximum(ns, 1)
    if A0.kind == "torch":
        torch = _torch()
        flat = torch.empty(total, dtype=A0.obj.dtype, device=A0.obj.device)
        views = flat.split_with_sizes(sizes.tolist())
        res = [v.view(int(m), int(n)) for v, m, n in zip(views, ms.tolist(), ns.tolist())]
        return res, flat.data_ptr() + offsets * it, ld
    if A0.kind == "numpy":
        flat = np.empty(total, dtype=np.dtype(dtype))
        res = [flat[o:o + s].reshape(m, n) for o, s, m, n in zip(offsets.tolist(), sizes.tolist(), ms.tolist(),
                                                                   ns.tolist())]
        return res, flat.ctypes.data + offsets * it, ld
    wdt = _deps.WP_DTYPES[dtype]
    res = [wp.empty((int(m), int(n)), dtype=wdt, device=A0.device, requires_grad=requires_grad)
           for m, n in zip(ms.tolist(), ns.tolist())]
    return res, np.array([r.ptr or 0 for r in res], dtype=np.int64), ld
