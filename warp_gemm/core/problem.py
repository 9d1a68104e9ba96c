"""Operands -> a validated :class:`Problem`: shapes, dtypes, devices, aliasing, the output.

``validate`` checks everything a call can get wrong before anything is launched or allocated on the
device (so a bad call writes nothing) and raises ``TypeError``/``ValueError`` naming the operands'
shapes and dtypes. It allocates only the caller's new result, in the caller's container type.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from warp_gemm import _compat
from warp_gemm.core.operands import Operand, copy_operand, describe, empty_like_caller, overlaps, same_memory


@dataclass
class Problem:
    A: Operand  # op(A), as a (possibly transposed) view
    B: Operand
    C: Operand | None
    D: Operand  # the output (caller's out or a new array)
    result: Any  # what the caller gets back
    M: int
    N: int
    K: int
    batch: int  # launch batch (1 for 2-D results)
    in_dtype: str
    out_dtype: str


def _shape_str(op: Operand) -> str:
    return "x".join(map(str, op.shape)) if op.shape else "scalar"


def _describe(x, name: str, fname: str) -> Operand:
    try:
        return describe(x, name)
    except TypeError as e:
        raise TypeError(f"{fname}: {e}") from None
    except ValueError as e:
        raise ValueError(f"{fname}: {e}") from None


#: The operands' names in messages, per entry point (the parameter names the caller used).
_NAMES = {"linear": ("x", "weight", "bias", "out"),
          "compat.matmul": ("a", "b", "c", "d"), "compat.batched_matmul": ("a", "b", "c", "d")}


def operand_names(fname: str) -> tuple[str, str, str, str]:
    """(a, b, c, out) as the function ``fname`` calls them."""
    return _NAMES.get(fname, ("a", "b", "c", "out"))


def _real(v, name: str, fname: str) -> float:
    """``float(v)`` for a real scalar; strings, complex values and arrays are refused, not coerced."""
    if type(v) is float:  # the common case, without the ABC checks below (a huge int must still raise)
        return v
    bad = isinstance(v, (str, bytes, bytearray))
    bad |= isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real)
    if not bad and getattr(getattr(v, "dtype", None), "kind", "") != "c":
        try:
            return float(v)
        except OverflowError:
            raise ValueError(f"{fname}: {name} ({type(v).__name__}) is too large for a float") from None
        except (TypeError, ValueError, RuntimeError):
            pass
    raise TypeError(f"{fname}: {name} must be a real number, got {type(v).__name__}")


def _op_name(name: str, fname: str) -> str:
    """How a transposed operand reads in ``fname``'s messages: ``op(b)``, or ``weight.T`` for linear."""
    return f"{name}.T" if fname == "linear" else f"op({name})"


def validate(a, b, c, alpha, beta, trans_a, trans_b, out, fname) -> Problem:
    na, nb_, nc, no = operand_names(fname)
    A = _describe(a, na, fname)
    B = _describe(b, nb_, fname)
    for name, op in ((na, A), (nb_, B)):
        if op.ndim not in (2, 3):
            raise ValueError(f"{fname}: {name} has shape {list(op.shape)} (rank {op.ndim}); "
                             "warp_gemm takes 2-D (M, K) or 3-D batched (B, M, K) operands")
    if A.dtype != B.dtype:
        raise TypeError(f"{fname}: {na} is {A.dtype}{list(A.shape)} but {nb_} is {B.dtype}{list(B.shape)}; "
                        "both operands must have the same dtype")
    if A.device is not B.device and str(A.device) != str(B.device):
        raise ValueError(f"{fname}: {na} is {A.describe()} but {nb_} is {B.describe()}; both must be on one device")
    _compat.require_device(A.device)
    if trans_a:
        A = A.transposed()
    if trans_b:
        B = B.transposed()
    M, K = A.shape[-2:]
    K2, N = B.shape[-2:]
    if K != K2:
        ta = _op_name(na, fname) if trans_a else na
        tb = _op_name(nb_, fname) if trans_b else nb_
        raise ValueError(f"{fname}: inner dimensions differ: {ta} is {_shape_str(A)} and {tb} is "
                         f"{_shape_str(B)} ({K} != {K2}) [{A.dtype}]")
    nba = A.shape[0] if A.ndim == 3 else None
    nbb = B.shape[0] if B.ndim == 3 else None
    if nba is not None and nbb is not None and nba != nbb and 1 not in (nba, nbb):
        raise ValueError(f"{fname}: batch dimensions {nba} ({na}: {_shape_str(A)}) and {nbb} "
                         f"({nb_}: {_shape_str(B)}) do not broadcast")
    batched = nba is not None or nbb is not None
    nb = max(nba or 1, nbb or 1)
    shape = (nb, M, N) if batched else (M, N)
    in_dtype = A.dtype

    C = None
    if c is not None:
        C = _describe(c, nc, fname)
        if C.device is not A.device and str(C.device) != str(A.device):
            raise ValueError(f"{fname}: {nc} is {C.describe()} but {na} and {nb_} are on {A.device}")
        if C.ndim > len(shape) or any(cd not in (1, rd) for cd, rd in zip(C.shape[::-1], shape[::-1])):
            raise ValueError(f"{fname}: {nc} has shape {list(C.shape)}, which does not broadcast to the result "
                             f"shape {list(shape)}")

    if out is not None:
        D = _describe(out, no, fname)
        if D.obj is not out and D.size:  # describe() had to copy it (negative or unaligned numpy strides)
            raise ValueError(f"{fname}: {no} ({D.describe()}) has negative or unaligned strides; warp_gemm "
                             "writes out in place and cannot write through such a view")
        if D.kind == "numpy" and not out.flags.writeable:
            raise ValueError(f"{fname}: {no} ({D.describe()}) is a read-only numpy array")
        if D.size and any(n > 1 and st == 0 for n, st in zip(D.shape, D.strides)):
            raise ValueError(f"{fname}: {no} ({D.describe()}, strides {list(D.strides)}) has several elements "
                             "at one address (a broadcast/expanded view); pass a writable array of its own")
        if tuple(D.shape) != shape:
            raise ValueError(f"{fname}: {no} has shape {list(D.shape)}; the result of {_shape_str(A)} @ "
                             f"{_shape_str(B)} has shape {list(shape)}")
        if D.device is not A.device and str(D.device) != str(A.device):
            raise ValueError(f"{fname}: {no} is {D.describe()} but the operands are on {A.device}")
        for name, op in ((na, A), (nb_, B), (nc, C)):
            if op is not None and overlaps(D, op):
                if op is C and same_memory(D, C):
                    continue  # out is exactly c (d = alpha * a @ b + beta * d): C is copied first, below
                why = (f"{no} may be {nc} itself (same memory, shape and strides: an in-place update) but not "
                       f"another view of its memory" if op is C else
                       f"warp_gemm does not write over {na} or {nb_} (pass a separate {no})")
                raise ValueError(f"{fname}: {no} ({D.describe()}) shares memory with {name} ({op.describe()}); "
                                 f"{why}")
        out_dtype = D.dtype
        result = out
    else:
        out_dtype = in_dtype
        D = None
        result = None
    if C is not None and C.dtype != out_dtype:
        raise TypeError(f"{fname}: {nc} is {C.dtype}{list(C.shape)} but the result is {out_dtype}; "
                        f"{nc} must have the result's dtype")
    for name, v in (("alpha", alpha), ("beta", beta)):
        _real(v, name, fname)

    if D is not None and C is not None and D.size and same_memory(D, C) and float(beta) != 0.0:
        # out is c: every family reads C through its own copy, so no kernel reads an element of C that
        # another block (or the split-K finish, the peeled edges, the fused GEMV's later groups) has
        # already overwritten. One extra pass over M x N, on the caller's stream.
        C = describe(copy_operand(C), nc)
    if D is None:
        result = empty_like_caller(A.kind, A, shape, out_dtype)
        D = describe(result, "out")
    return Problem(A, B, C, D, result, M, N, K, nb, in_dtype, out_dtype)


