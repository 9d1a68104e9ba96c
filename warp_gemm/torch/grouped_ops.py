"""The grouped products as PyTorch custom operators (namespace ``warp_gemm``)::

    warp_gemm::grouped_mm(Tensor mat_a, Tensor mat_b, Tensor? offs, Tensor? bias, ScalarType? out_dtype,
                          bool allow_tf32) -> Tensor
        torch.nn.functional.grouped_mm's four operand cases (warp_gemm.grouped_mm)
    warp_gemm::grouped_matmul(Tensor[] a, Tensor[] b, bool allow_tf32) -> Tensor[]
        [a_i @ b_i for each i] (warp_gemm.grouped_matmul)

Each has a fake implementation (shapes from the operands and ``offs``'s length alone, so
``torch.compile(fullgraph=True)`` traces it as one graph node) and an autograd formula whose backward is
itself grouped products (the grouped_mm cases are closed under the backward: a 2-D x 3-D product's
gradients are a 2-D x 3-D and a 2-D x 2-D product with the same ``offs``, and so on).
"""


import operator

import torch

from ..core import grouped as _core

_NS = "warp_gemm"


# --- shapes (the real and fake implementations share them) ---------------------------------------------------
def _mm_shape(a, b, offs):
    _check(a.dim() in (2, 3) and b.dim() in (2, 3),
           lambda: f"warp_gemm::grouped_mm: mat_a {list(a.shape)} and mat_b {list(b.shape)} must be 2-D or 3-D",
           RuntimeError)
    if a.dim() == 2 and b.dim() == 3:
        return (a.shape[0], b.shape[2])
    if a.dim() == 3 and b.dim() == 2:
        return (a.shape[1], b.shape[1])
    if a.dim() == 2:
        _check(offs is not None, lambda: "warp_gemm::grouped_mm: 2-D x 2-D operands need offs", RuntimeError)
        return (offs.shape[0], a.shape[0], b.shape[1])
    return (a.shape[0], a.shape[1], b.shape[2])


# --- warp_gemm::grouped_mm --------------------------------------------------------------------------------------
def _mm_impl(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: torch.Tensor | None, bias: torch.Tensor | None,
             out_dtype: torch.dtype | None, allow_tf32: bool) -> torch.Tensor:
    return _core.grouped_mm(mat_a, mat_b, offs, bias, out_dtype, allow_tf32)


_mm_op = torch.library.custom_op(f"{_NS}::grouped_mm", _mm_impl, mutates_args=())


@_mm_op.register_fake
def _mm_fake(mat_a, mat_b, offs, bias, out_dtype, allow_tf32):
    return mat_a.new_empty(_mm_shape(mat_a, mat_b, offs), dtype=out_dtype or mat_a.dtype)


def _mm_setup(ctx, inputs, output):
    mat_a, mat_b, offs, bias, _out_dtype, allow_tf32 = inputs
    ctx.save_for_backward(mat_a, mat_b, offs)
    ctx.bias_shape = None if bias is None else tuple(bias.shape)
    ctx.tf32 = allow_tf32


def _t(x):
    return x.transpose(-2, -1)


def _mm_backward(ctx, grad):
    a, b, offs = ctx.saved_tensors
    op = torch.ops.warp_gemm.grouped_mm
    tf32 = ctx.tf32
    g = grad.to(a.dtype)
    need_a, need_b, _, need_bias = ctx.needs_input_grad[:4]
    da = db = dbias = None
    case = f"{a.dim()}d{b.dim()}d"
    if case == "2d3d":  # Y[s:e] = A[s:e] @ B[g]
        da = op(g, _t(b), offs, None, None, tf32) if need_a else None  # dY[s:e] @ B[g]^T
        db = op(_t(a), g, offs, None, None, tf32) if need_b else None  # A[s:e]^T @ dY[s:e] (K split)
    elif case == "3d2d":  # Y[:, s:e] = A[g] @ B[:, s:e]
        da = op(g, _t(b), offs, None, None, tf32) if need_a else None  # dY[:, s:e] @ B[:, s:e]^T (K split)
        db = op(_t(a), g, offs, None, None, tf32) if need_b else None  # A[g]^T @ dY[:, s:e]
    elif case == "2d2d":  # Y[g] = A[:, s:e] @ B[s:e]
        da = op(g, _t(b), offs, None, None, tf32) if need_a else None  # dY[g] @ B[s:e]^T -> columns s:e
        db = op(_t(a), g, offs, None, None, tf32) if need_b else None  # A[:, s:e]^T @ dY[g] -> rows s:e
    else:
        da = op(g, _t(b), None, None, None, tf32) if need_a else None
        db = op(_t(a), g, None, None, None, tf32) if need_b else None
    if need_bias and ctx.bias_shape is not None:
        dbias = _bias_grad(grad, offs, case, ctx.bias_shape)
    return da, db, None, dbias, None, None


def _bias_grad(grad, offs, case, shape):
    """The bias's gradient: the sums of ``grad`` over the rows (columns) each bias row was added to (rows after
    ``offs[-1]`` got no bias), without reading ``offs`` on the host."""
    acc = torch.float64 if grad.dtype == torch.float64 else torch.float32
    gf = grad.to(acc)
    per_group = len(shape) == 2 and shape[0] > 1
    if case == "2d3d":
        rows = torch.arange(gf.shape[0], device=gf.device, dtype=torch.int32)
        grp = torch.searchsorted(offs, rows, right=True)  # the group of each row (G: after offs[-1])
        sums = torch.zeros((offs.shape[0] + 1, gf.shape[1]), dtype=acc, device=gf.device)
        sums.index_add_(0, grp.to(torch.int64), gf)
        sums = sums[:-1]
        out = sums if per_group else sums.sum(0)
    elif case == "3d2d":
        end = offs[-1] if offs.shape[0] else torch.zeros((), dtype=torch.int32, device=gf.device)
        cols = torch.arange(gf.shape[1], device=gf.device)
        out = gf.sum(0) * (cols < end).to(acc)
    else:
        out = gf.sum(1) if per_group else gf.sum((0, 1))
    return out.reshape(shape).to(grad.dtype)


_mm_op.register_autograd(_mm_backward, setup_context=_mm_setup)


# --- warp_gemm::grouped_matmul -----------------------------------------------------------------------------------
def _mat_impl(a: list[torch.Tensor], b: list[torch.Tensor], allow_tf32: bool) -> list[torch.Tensor]:
    return _core.grouped_matmul(list(a), list(b), None, allow_tf32, separate=True)


_mat_op = torch.library.custom_op(f"{_NS}::grouped_matmul", _mat_impl, mutates_args=())


@_mat_op.register_fake
def _mat_fake(a, b, allow_tf32):
    _check(len(a) == len(b), lambda: f"warp_gemm::grouped_matmul: {len(a)} left and {len(b)} right operands",
           RuntimeError)
    return [x.new_empty((x.shape[0], y.shape[1])) for x, y in zip(a, b)]


def _mat_setup(ctx, inputs, output):
    a, b, allow_tf32 = inputs
    ctx.save_for_backward(*a, *b)
    ctx.n = len(a)
    ctx.tf32 = allow_tf32


def _mat_backward(ctx, grads):
    saved = ctx.saved_tensors
    a, b = saved[:ctx.n], saved[ctx.n:]
    g = [gi if gi is not None else torch.zeros((x.shape[0], y.shape[1]), dtype=x.dtype, device=x.device)
         for gi, x, y in zip(grads, a, b)]
    g = [gi.to(x.dtype) for gi, x in zip(g, a)]
    op = torch.ops.warp_gemm.grouped_matmul
    need_a, need_b = ctx.needs_input_grad[:2]
    da = op(g, [y.T for y in b], ctx.tf32) if need_a else None
    db = op([x.T for x in a], g, ctx.tf32) if need_b else None
    return da, db, None


_mat_op.register_autograd(_mat_backward, setup_context=_mat_setup)


# --- entry points -------------------------------------------------------------------------------------------------
# Eager calls with nothing to record skip the dispatcher (ops.py: _direct, EAGER_FAST_PATH).
from .ops import _check, _direct

_REQUIRES_GRAD = operator.attrgetter("requires_grad")


def _direct_list(ts: list) -> bool:
    """:func:`_direct` for the tensors of two operand lists, read through map() (a Python loop over 2000 tensors
    took 0.3 ms of a 1000-product call's host time)."""
    if not _direct() or set(map(type, ts)) - {torch.Tensor}:
        return False
    return not (torch.is_grad_enabled() and any(map(_REQUIRES_GRAD, ts)))


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None, allow_tf32: bool = False) -> torch.Tensor:
    """:func:`warp_gemm.grouped_mm` on torch tensors through the ``warp_gemm::grouped_mm`` operator."""
    if _direct(mat_a, mat_b, offs, bias):
        return _mm_impl(mat_a, mat_b, offs, bias, out_dtype, bool(allow_tf32))
    return torch.ops.warp_gemm.grouped_mm(mat_a, mat_b, offs, bias, out_dtype, bool(allow_tf32))


def grouped_matmul(list_a, list_b, *, allow_tf32: bool = False) -> list[torch.Tensor]:
    """:func:`warp_gemm.grouped_matmul` on torch tensors through the ``warp_gemm::grouped_matmul`` operator."""
    a, b = list(list_a), list(list_b)
    if _direct_list(a + b):  # (results may be views of one buffer here: no operator to forbid it)
        return _core.grouped_matmul(a, b, None, bool(allow_tf32))
    return list(torch.ops.warp_gemm.grouped_matmul(a, b, bool(allow_tf32)))
