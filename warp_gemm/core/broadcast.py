"""``torch.matmul`` shape semantics on top of a 2-D / 3-D GEMM, as a pure function of shapes and strides.

:func:`matmul_shapes` says how to present both operands of ``torch.matmul(a, b)`` -- any ranks >= 1,
broadcast batch dimensions -- to a GEMM that takes 2-D ``(M, K)`` or 3-D ``(B, M, K)`` operands (a
2-D operand or a batch of 1 broadcasting against the other's batch), without copies wherever the strides
allow, and how to view the GEMM's contiguous result as ``torch.matmul``'s result. It knows nothing of
containers: the caller makes the views (``torch.as_strided`` / ``reshape``, ``numpy.lib.stride_tricks``,
a ``wp.array`` over the same pointer) or the copies it asks for.

Rules (those of torch.matmul):

- 1-D ``a`` of ``(K,)`` is the row ``(1, K)``, and that dimension is removed from the result;
  1-D ``b`` of ``(K,)`` is the column ``(K, 1)``, likewise removed. Both 1-D: the dot product, shape ``()``.
- Otherwise the last two dimensions are the matrices and the leading (batch) dimensions broadcast; the
  result is ``broadcast(batch_a, batch_b) + (M, N)``.

Presentation of each operand (:class:`OperandView`):

- ``"matrix"``: a 2-D view ``(M, K)``, when the operand has no batch dimensions or all of them are 1
  (it broadcasts over the other operand's batch as a 2-D operand).
- ``"fold"``: ``a``'s batch dimensions merged into its rows, ``(B*M, K)``, when ``b`` is a matrix
  (no batch of its own) and the strides allow it: one large GEMM instead of a batch of small ones.
- ``"batch"``: a 3-D view ``(B, M, K)`` with the batch dimensions merged, when the operand has the full
  broadcast batch shape and its batch dimensions' strides merge into one.
- ``copy=True``: no such view exists (the operand is broadcast along some but not all batch
  dimensions, or its batch strides do not merge): the caller materialises
  ``operand.expand(expand_shape)`` contiguously and views it as ``shape`` (C order).

Strides are in elements, as torch reports them; a view's ``strides`` are None exactly when ``copy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod


@dataclass(frozen=True)
class OperandView:
    kind: str  # "matrix", "fold" or "batch"
    shape: tuple  # the 2-D or 3-D shape the GEMM sees
    strides: tuple | None  # element strides of that view of the operand's memory; None when copy
    expand_shape: tuple  # the operand (1-D promoted) broadcast to its full shape, before merging: for a copy

    @property
    def copy(self) -> bool:
        return self.strides is None


@dataclass(frozen=True)
class MatmulShapes:
    a: OperandView
    b: OperandView
    out_shape: tuple  # the GEMM's (contiguous) result: (M', N) or (B, M, N)
    result_shape: tuple  # torch.matmul's result shape; the contiguous out_shape viewed (reshaped) as this
    batch_shape: tuple  # the broadcast batch dimensions


def _merge(shape, strides):
    """The single stride of ``shape``'s dimensions merged into one (C order), or None if their strides
    do not allow it. Dimensions of size 1 do not constrain; an empty extent merges with any stride."""
    if prod(shape) == 0:
        return 0
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    for (n0, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1]


def _broadcast(sa: tuple, sb: tuple, a_shape, b_shape) -> tuple:
    n = max(len(sa), len(sb))
    pa = (1,) * (n - len(sa)) + tuple(sa)
    pb = (1,) * (n - len(sb)) + tuple(sb)
    out = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            raise ValueError(f"matmul: the batch dimensions of a {list(a_shape)} and b {list(b_shape)} do not "
                             f"broadcast ({x} vs {y})")
        out.append(y if x == 1 else x)
    return tuple(out)


def matmul_shapes(a_shape, a_strides, b_shape, b_strides) -> MatmulShapes:
    """How to compute ``torch.matmul(a, b)`` with a 2-D/3-D GEMM (see the module docstring).

    Raises ValueError for 0-D operands, mismatched inner dimensions and batch shapes that do not
    broadcast, with torch's result shape rules otherwise."""
    a_shape, b_shape = tuple(int(n) for n in a_shape), tuple(int(n) for n in b_shape)
    a_strides, b_strides = tuple(int(s) for s in a_strides), tuple(int(s) for s in b_strides)
    if len(a_shape) != len(a_strides) or len(b_shape) != len(b_strides):
        raise ValueError("matmul: each shape needs one stride per dimension")
    if not a_shape or not b_shape:
        raise ValueError(f"matmul: both operands need at least one dimension, got a {list(a_shape)} and "
                         f"b {list(b_shape)}")

    a0, b0 = a_shape, b_shape  # as given, for the messages
    # 1-D operands become a row (a) or a column (b); remember which result dimension to drop.
    drop_m = len(a_shape) == 1
    drop_n = len(b_shape) == 1
    if drop_m:
        a_shape, a_strides = (1,) + a_shape, (0,) + a_strides
    if drop_n:
        b_shape, b_strides = b_shape + (1,), b_strides + (0,)
    M, K = a_shape[-2:]
    K2, N = b_shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: inner dimensions differ: a is {list(a0)} and b is {list(b0)} "
                         f"({K} != {K2})")
    ba, bb = a_shape[:-2], b_shape[:-2]
    batch = _broadcast(ba, bb, a0, b0)
    B = prod(batch)
    a_is_matrix = prod(ba) == 1  # no batch dimensions, or all of them 1: broadcasts as a 2-D operand
    b_is_matrix = prod(bb) == 1

    def matrix(shape, strides):
        return OperandView("matrix", shape[-2:], strides[-2:], tuple(shape))

    def batched(shape, strides, own_batch, rows, cols):
        full = batch + (rows, cols)
        pad = len(batch) - len(own_batch)
        if tuple(own_batch) == batch or (prod(own_batch) == B and pad >= 0):
            # the operand has the whole batch (maybe with extra leading 1s): merge its batch dims
            st = _merge(own_batch, strides[:len(own_batch)])
            if st is not None:
                return OperandView("batch", (B, rows, cols), (st, strides[-2], strides[-1]), full)
        return OperandView("batch", (B, rows, cols), None, full)

    if a_is_matrix and b_is_matrix:
        av, bv = matrix(a_shape, a_strides), matrix(b_shape, b_strides)
        out = (M, N)
    elif b_is_matrix:
        bv = matrix(b_shape, b_strides)
        rows = _merge(ba + (M,), a_strides[:-1]) if tuple(ba) == batch or prod(ba) == B else None
        if rows is not None:
            av = OperandView("fold", (B * M, K), (rows, a_strides[-1]), batch + (M, K))
            out = (B * M, N)
        else:
            av = batched(a_shape, a_strides, ba, M, K)
            out = (B, M, N)
    elif a_is_matrix:
        av = matrix(a_shape, a_strides)
        bv = batched(b_shape, b_strides, bb, K, N)
        out = (B, M, N)
    else:
        av = batched(a_shape, a_strides, ba, M, K)
        bv = batched(b_shape, b_strides, bb, K, N)
        out = (B, M, N)

    result = batch + ((M,) if not drop_m else ()) + ((N,) if not drop_n else ())
    return MatmulShapes(av, bv, out, result, batch)
