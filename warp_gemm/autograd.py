"""Gradients of :func:`warp_gemm.matmul` / :func:`warp_gemm.gemm` through ``wp.Tape`` and ``torch.autograd``.

Both ecosystems get the same backward, computed by warp_gemm's own tile GEMMs (``trans_a``/``trans_b``
select the transposed reads, so nothing is transposed in memory) and one small Warp kernel that adds a
gradient into its destination, summing over the dimensions the operand was broadcast along. NumPy is
never used. For ``D = alpha * op(A) @ op(B) + beta * C`` with incoming gradient ``dD``::

    d op(A) = alpha * dD @ op(B)^T        dA = d op(A)   (or its transpose when trans_a)
    d op(B) = alpha * op(A)^T @ dD        dB = d op(B)   (or its transpose when trans_b)
    dC      = beta * dD, summed over the dimensions along which C was broadcast

A 2-D operand (or a batch of 1) multiplied against a batch gets the sum of the per-batch gradients.

``wp.Tape``: when ``a``, ``b`` or ``c`` is a ``wp.array`` with ``requires_grad=True`` and a tape is
recording, the forward allocates the result with ``requires_grad=True`` (a caller's ``out`` must have
it already) and records a backward function with ``tape.record_func``. The GEMM kernels themselves are
never recorded (they are forward-only; the tape would warn about each), also not in calls without
``requires_grad`` operands made while a tape records. Gradients *accumulate* into
the existing ``.grad`` arrays, as Warp's kernel adjoints do; on Warp releases with ``retain_grad``
(1.19) the output's gradient is consumed (zeroed) after use unless ``out.retain_grad`` is set, matching
Warp's final-write-wins semantics, so a second ``tape.backward(loss)`` adds the same gradients again.

``torch``: when a tensor operand has ``requires_grad`` and ``torch.is_grad_enabled()``, the call runs
through a ``torch.autograd.Function``: the result has a ``grad_fn`` and gradients equal to those of
``torch.matmul`` / ``torch.addmm``-style expressions. Under ``torch.no_grad()`` nothing is recorded.
The backward is not itself differentiable (``create_graph=True`` through it raises). ``out=`` is refused with
``requires_grad`` inputs, as torch refuses it.

dtypes: float16, bfloat16, float32, float64 all differentiate. Every warp_gemm kernel is built with
``enable_backward=False`` and the backward pass uses only those forward kernels, so bfloat16 -- whose
tile operands Warp 1.14+ rejects in modules with backward code -- works wherever warp_gemm's forward
bfloat16 works (warp-lang >= 1.13). 16-bit gradients accumulate in float32 and are rounded once.
"""

# No `from __future__ import annotations`: Warp reads the kernel's annotations as objects.
import contextlib
import functools
import sys
import threading

import warp as wp

from warp_gemm import _compat
from warp_gemm.core import execute as _core
from warp_gemm.core import launches as _launch
from warp_gemm.core.launches import convert
from warp_gemm.core.operands import describe, wp_view
from warp_gemm.families.common.kernels import WP_DTYPES, acc_dtype_name


# --- Warp's active tape ------------------------------------------------------------------------------
_CTX = _compat.WARP_CONTEXT


def active_tape():
    """The ``wp.Tape`` recording now, or None."""
    rt = getattr(_CTX, "runtime", None)
    return getattr(rt, "tape", None) if rt is not None else None


@contextlib.contextmanager
def _tape_paused():
    """Stop Warp from recording launches and copies on the active tape (if any) inside the block."""
    rt = getattr(_CTX, "runtime", None)
    saved = getattr(rt, "tape", None)
    if saved is None:
        yield
        return
    rt.tape = None
    try:
        yield
    finally:
        rt.tape = saved


#: 1.19+: an output array's gradient is consumed (zeroed) by the adjoint of the kernel that wrote it,
#: unless the array has ``retain_grad=True``.
CONSUMES_OUTPUT_GRAD = hasattr(wp.array, "retain_grad")


# --- dispatch ----------------------------------------------------------------------------------------
def needs_grad(a, b, c):
    """"torch", "tape" or None: whether the call goes through this module (to record a backward, or to keep
    its kernels off a recording tape). Two attribute lookups when neither torch nor a tape is in play."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.is_grad_enabled():
        T = torch.Tensor
        if ((isinstance(a, T) and a.requires_grad) or (isinstance(b, T) and b.requires_grad)
                or (isinstance(c, T) and c.requires_grad)):
            return "torch"
    if active_tape() is not None:
        # Also without requires_grad: the call then runs with the tape paused, so the forward-only GEMM
        # kernels are not recorded (tape.backward would warn about each of them).
        return "tape"
    return None


def gemm_with_grad(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname):
    """``core.execute.run`` plus the recording of its backward (torch graph or Warp tape)."""
    mode = needs_grad(a, b, c)
    if mode == "torch":
        return _torch_gemm(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname)
    if mode == "tape":
        return _tape_gemm(active_tape(), a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config,
                          fname)
    return _core.run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname)


# --- the backward GEMMs, container-agnostic ------------------------------------------------------------
def _ndim(x):
    return len(x.shape)


def _batch(x):
    return x.shape[0] if _ndim(x) == 3 else None


def _gemm_shape(p, q, tp, tq):
    rows = p.shape[-1] if tp else p.shape[-2]
    cols = q.shape[-2] if tq else q.shape[-1]
    nbs = [x.shape[0] for x in (p, q) if _ndim(x) == 3]
    if not nbs:
        return (rows, cols)
    return (max(nbs) if 0 not in nbs else 0, rows, cols)


def _reduced(x, g):
    """Whether ``x``'s gradient sums over a batch: ``g`` (dD) is a batch of > 1 that ``x`` broadcasts over."""
    nb = _batch(g)
    return nb is not None and nb != 1 and (_batch(x) or 1) == 1


def _grad_gemm_a(A, B, g, ta, tb):
    """(p, q, tp, tq) with ``gemm(p, q, trans_a=tp, trans_b=tq)`` = dA / alpha (per batch)."""
    if not ta:
        return g, B, False, not tb  # dD @ op(B)^T
    return B, g, tb, True  # (dD @ op(B)^T)^T = op(B) @ dD^T


def _grad_gemm_b(A, B, g, ta, tb, merge):
    """(p, q, tp, tq) with ``gemm(p, q, trans_a=tp, trans_b=tq)`` = dB / alpha (per batch).

    When B was broadcast over A's batch and A is a plain row-major-mergeable batch (``x @ W`` with a
    3-D ``x``, the nn.Linear case), the batch sum is folded into K: ``A_flat^T @ dD_flat``, one GEMM.
    """
    if not ta and _reduced(B, g):
        af, gf = merge(A), merge(g)
        if af is not None and gf is not None:
            return (af, gf, True, False) if not tb else (gf, af, True, False)
    if not tb:
        return A, g, not ta, False  # op(A)^T @ dD
    return g, A, True, ta  # (op(A)^T @ dD)^T = dD^T @ op(A)


def _merge_strides(shape, strides):
    """(rows, cols, row stride, col stride) of a 3-D batch viewed as one 2-D matrix, or None."""
    nb, r, c = shape
    sb, sr, sc = strides
    if nb * r == 0 or not (nb == 1 or sb == r * sr):
        return None
    return nb * r, c, sr, sc


def _merge_wp(x):
    if not isinstance(x, wp.array) or x.ndim != 3:
        return None
    op = describe(x, "x")
    m = _merge_strides(op.shape, op.strides)
    return None if m is None else wp_view(op, (m[0], m[1]), (m[2], m[3]))


def _merge_torch(x):
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor) or x.dim() != 3:
        return None
    m = _merge_strides(tuple(x.shape), tuple(x.stride()))
    return None if m is None else x.as_strided((m[0], m[1]), (m[2], m[3]))


# --- Warp: accumulate (with broadcast reduction) -------------------------------------------------------
_kernel_lock = threading.Lock()


@functools.cache
def _accumulate_kernel(src_dtype, dst_dtype):
    SRC = WP_DTYPES[src_dtype]
    DST = WP_DTYPES[dst_dtype]
    F = wp.float64 if "float64" in (src_dtype, dst_dtype) else wp.float32

    def accumulate(dst: wp.array3d(dtype=DST), src: wp.array3d(dtype=SRC), scale: F, rb: int, ri: int,
                   rj: int):
        # dst[b, i, j] += scale * sum of the src elements that broadcast from it: a dimension where dst
        # has extent 1 and src extent n is summed over (r = n); elsewhere r = 1 and indices coincide.
        b, i, j = wp.tid()
        s = F(0.0)
        for lb in range(rb):
            for li in range(ri):
                for lj in range(rj):
                    s = s + F(src[b + lb, i + li, j + lj])
        dst[b, i, j] = DST(F(dst[b, i, j]) + scale * s)

    return _compat.make_kernel(accumulate, f"wg_grad_accumulate_{src_dtype}_{dst_dtype}")


def _pad3(op):
    n = 3 - op.ndim
    return (1,) * n + tuple(op.shape), (0,) * n + tuple(op.strides)


def accumulate(dst, src, scale=1.0):
    """``dst += scale * src`` summed down to ``dst``'s shape (Warp arrays, any strides, any float dtypes)."""
    D = describe(dst, "grad")
    S = describe(src, "grad")
    if D.size == 0:
        return
    dshape, dstrides = _pad3(D)
    sshape, sstrides = _pad3(S)
    reps = []
    for dn, sn in zip(dshape, sshape):
        if dn == sn:
            reps.append(1)
        elif dn == 1:
            reps.append(sn)
        else:
            raise AssertionError(f"gradient of shape {D.shape} cannot collect one of shape {S.shape}")
    with _kernel_lock:
        k = _accumulate_kernel(S.dtype, D.dtype)
    _launch.launch(k, dshape, [wp_view(D, dshape, dstrides), wp_view(S, sshape, sstrides), float(scale), *reps],
                   D.device)


def _cast_wp(x, dtype):
    """``x`` (2-D/3-D, any container on Warp's devices) as a new contiguous wp.array of ``dtype``."""
    op = describe(x, "x")
    if op.dtype == dtype:
        return x
    shape, strides = _pad3(op)
    tmp = wp.empty(shape, dtype=WP_DTYPES[dtype], device=op.device)
    convert(tmp, wp_view(op, shape, strides), dtype, op.dtype)
    return tmp if op.ndim == 3 else tmp.reshape(tuple(op.shape))


def _promote(d1, d2):
    if d1 == d2:
        return d1
    return "float64" if "float64" in (d1, d2) else "float32"


# --- wp.Tape ---------------------------------------------------------------------------------------------
def _tape_gemm(tape, a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname):
    need = [isinstance(x, wp.array) and x.requires_grad for x in (a, b, c)]
    if not any(need):
        with _tape_paused():
            return _core.run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname)
    if out is None and not isinstance(a, wp.array):
        raise TypeError(f"{fname}: recording gradients on a wp.Tape needs a wp.array result; a is a "
                        f"{type(a).__module__}.{type(a).__name__} (pass a as a wp.array or out=wp.array("
                        "..., requires_grad=True))")
    if out is not None and not (isinstance(out, wp.array) and out.requires_grad):
        from warp_gemm.core.problem import operand_names

        no = operand_names(fname)[3]
        raise ValueError(f"{fname}: an operand has requires_grad=True and a wp.Tape is recording, but {no} "
                         "is not a wp.array with requires_grad=True, so no gradient could flow back "
                         f"through it; allocate {no} with requires_grad=True"
                         + (" (or leave out=None)" if no == "out" else ""))
    with _tape_paused():
        result = _core.run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname)
    if out is None:
        result.requires_grad = True
    if result.size == 0:
        return result
    need = [n and x.size > 0 for n, x in zip(need, (a, b, c))]
    alpha, beta = float(alpha), float(beta)

    def backward():
        with _tape_paused(), wp.ScopedDevice(result.device):
            _tape_backward(a, b, c, result, alpha, beta, trans_a, trans_b, allow_tf32, need)

    arrays = [x for x, n in zip((a, b, c), need) if n] + [result]
    tape.record_func(backward, arrays=arrays)
    return result


def _tape_backward(a, b, c, result, alpha, beta, trans_a, trans_b, allow_tf32, need):
    g = result.grad
    in_dt = describe(a, "a").dtype
    g_dt = describe(g, "out.grad").dtype
    cdt = _promote(in_dt, g_dt)
    acc = acc_dtype_name(cdt)
    if need[0] or need[1]:
        gc, ac, bc = _cast_wp(g, cdt), _cast_wp(a, cdt), _cast_wp(b, cdt)
        for which in (0, 1):
            if not need[which]:
                continue
            x = (a, b)[which]
            if which == 0:
                p, q, tp, tq = _grad_gemm_a(ac, bc, gc, trans_a, trans_b)
            else:
                p, q, tp, tq = _grad_gemm_b(ac, bc, gc, trans_a, trans_b, _merge_wp)
            tmp = wp.empty(_gemm_shape(p, q, tp, tq), dtype=WP_DTYPES[acc], device=result.device)
            _core.run(p, q, None, alpha, 0.0, tp, tq, tmp, allow_tf32, None, "gemm (backward)")
            accumulate(x.grad, tmp)
    if c is not None and getattr(c, "grad", None) is not None and c.grad.ptr == g.ptr:
        # out is c (an in-place update): one gradient array holds the result's gradient and, after this
        # step, that of c's old value, beta * dD (the result's own is consumed by the step that wrote it)
        accumulate(g, g, beta - 1.0)
        return
    if need[2] and beta != 0.0:
        accumulate(c.grad, g, beta)
    if CONSUMES_OUTPUT_GRAD and not getattr(result, "retain_grad", False):
        g.zero_()


# --- torch.autograd ----------------------------------------------------------------------------------------
def _torch_gemm(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname):
    torch = sys.modules["torch"]
    if out is not None:
        raise RuntimeError(f"{fname}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad (as torch.matmul)")
    if not isinstance(a, torch.Tensor):
        raise TypeError(f"{fname}: recording torch gradients needs a as a torch.Tensor (the result takes "
                        f"a's container type); a is a {type(a).__module__}.{type(a).__name__}")
    return _torch_function().apply(a, b, c, alpha, beta, bool(trans_a), bool(trans_b), allow_tf32, config,
                                   fname)


def _sum_to(t, shape):
    """``t`` summed over the leading / size-1 dimensions it has beyond ``shape``."""
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    if len(shape) == 0:
        return t.sum()
    if t.dim() < len(shape):
        t = t.reshape((1,) * (len(shape) - t.dim()) + tuple(t.shape))
    return t.sum_to_size(shape)


@functools.cache
def _torch_function():
    import torch

    from warp_gemm.core.operands import torch_dtype

    def acc_of(dt):
        return torch_dtype(acc_dtype_name(str(dt).replace("torch.", "")))

    class WarpGemmFunction(torch.autograd.Function):
        """``alpha * op(a) @ op(b) + beta * c`` by warp_gemm, with warp_gemm's GEMMs in the backward."""

        @staticmethod
        def forward(ctx, a, b, c, alpha, beta, trans_a, trans_b, allow_tf32, config, fname):
            result = _core.run(a, b, c, alpha, beta, trans_a, trans_b, None, allow_tf32, config, fname)
            ops = (a, b, c)
            ctx.save_for_backward(*(x if isinstance(x, torch.Tensor) else None for x in ops))
            ctx.others = tuple(None if isinstance(x, torch.Tensor) else x for x in ops)
            ctx.args = (float(alpha), float(beta), trans_a, trans_b, allow_tf32)
            return result

        @staticmethod
        def backward(ctx, g):
            if torch.is_grad_enabled():
                # create_graph=True: the GEMMs below are not recorded, so a second derivative would be
                # silently missing. Refuse instead.
                raise RuntimeError("warp_gemm: double backward (create_graph=True through matmul/gemm) is "
                                   "not supported; the backward's GEMMs are not themselves differentiable")
            a, b, c = (s if s is not None else o for s, o in zip(ctx.saved_tensors, ctx.others))
            alpha, beta, ta, tb, tf32 = ctx.args
            need = ctx.needs_input_grad[:3]
            grads = [None, None, None]
            g = g.contiguous()
            for which in (0, 1):
                if not need[which]:
                    continue
                x = (a, b)[which]
                if which == 0:
                    p, q, tp, tq = _grad_gemm_a(a, b, g, ta, tb)
                else:
                    p, q, tp, tq = _grad_gemm_b(a, b, g, ta, tb, _merge_torch)
                shape = _gemm_shape(p, q, tp, tq)
                exact = tuple(shape) == tuple(x.shape)
                # A batch sum is taken in the accumulator dtype and rounded once.
                tmp = torch.empty(shape, dtype=x.dtype if exact else acc_of(x.dtype), device=g.device)
                _core.run(p, q, None, alpha, 0.0, tp, tq, tmp, tf32, None, "gemm (backward)")
                grads[which] = tmp if exact else _sum_to(tmp, x.shape).to(x.dtype)
            if need[2]:
                if beta == 0.0:
                    grads[2] = torch.zeros_like(c)
                else:
                    grads[2] = (_sum_to(g.to(acc_of(c.dtype)), c.shape) * beta).to(c.dtype)
            return (*grads, None, None, None, None, None, None, None)

    return WarpGemmFunction


# --- linear: GEMM + bias, then the activation (its derivative recorded on the tape) ----------------------
def linear_with_grad(x, weight, bias, activation):
    """``activation(x @ weight.T + bias)`` with gradients (wp.Tape; torch tensors go through the
    custom op in warp_gemm.torch). The GEMM and bias record as a gemm; the activation records its own
    backward: ``dz += dy * act'(z)``."""
    beta = 1.0 if bias is not None else 0.0
    z = gemm_with_grad(x, weight, bias, 1.0, beta, False, True, None, False, None, "linear")
    if activation is None:
        return z
    tape = active_tape()
    from warp_gemm.families.common import epilogue

    if tape is None or not isinstance(z, wp.array) or not z.requires_grad:
        with _tape_paused():
            return _core.run(x, weight, bias, 1.0, beta, False, True, None, False, None, "linear", activation)
    Z = describe(z, "z")
    shape, strides = _pad3(Z)
    y = wp.empty(z.shape, dtype=z.dtype, device=z.device, requires_grad=True)
    Y = describe(y, "y")
    z3, y3 = wp_view(Z, shape, strides), wp_view(Y, *_pad3(Y))
    with _tape_paused():
        _launch.launch(epilogue.forward_kernel(activation, Z.dtype, Z.dtype), shape, [y3, z3], z.device)

    def backward():
        with _tape_paused(), wp.ScopedDevice(z.device):
            gz = wp.empty(shape, dtype=WP_DTYPES[Z.dtype], device=z.device)
            gy = wp_view(describe(y.grad, "grad"), *_pad3(describe(y.grad, "grad")))
            epilogue.activation_backward(gz, gy, z3, activation)
            accumulate(z.grad, gz.reshape(z.shape) if len(z.shape) != 3 else gz)

    tape.record_func(backward, arrays=[z, y])
    return y
