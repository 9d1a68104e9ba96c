"""Grouped products: :func:`grouped_mm` (mixture-of-experts layers, ``torch.nn.functional.grouped_mm``'s
semantics) and :func:`grouped_matmul` (a list of independent products of any sizes; :func:`grouped_matmul_plan`
for lists multiplied again and again), each one launch of the
grouped kernel family (``warp_gemm/families/grouped``) per operand-layout class. docs/grouped.md.
"""

from __future__ import annotations

import sys


def _torch_all(*xs) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and all(x is None or isinstance(x, torch.Tensor) for x in xs)


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None, allow_tf32: bool = False):
    """Grouped matrix product with ``torch.nn.functional.grouped_mm``'s operand cases and semantics.

    ``offs``: 1-D int32 cumulative group ends (non-decreasing, at most the split extent; groups may be empty),
    on the operands' device. ``G`` is ``offs``'s length, or the batch of 3-D operands::

        mat_a (Mt, K),    mat_b (G, K, N), offs: rows of mat_a       -> (Mt, N)     rows s:e = A[s:e] @ B[g]
        mat_a (G, M, K),  mat_b (K, Nt),   offs: columns of mat_b    -> (M, Nt)     cols s:e = A[g] @ B[:, s:e]
        mat_a (M, Kt),    mat_b (Kt, N),   offs: the shared K        -> (G, M, N)   [g] = A[:, s:e] @ B[s:e]
        mat_a (G, M, K),  mat_b (G, K, N), offs None                 -> (G, M, N)   [g] = A[g] @ B[g]

    with ``s = offs[g - 1]`` (0 for the first group) and ``e = offs[g]``. Rows (columns) after ``offs[-1]`` are
    zeros in the result; K after ``offs[-1]`` is ignored. Any strides (e.g. ``mat_b = W.transpose(-2, -1)`` of
    ``(G, N, K)`` weights, read in place). ``bias``: None, ``(N,)`` / ``(1, N)`` added to every group's result,
    or ``(G, N)``, row g to group g (not with 3-D x 2-D, whose bias is ``(Nt,)``); not added to the zero rows
    after ``offs[-1]``. ``out_dtype``: None (the inputs' dtype) or float32 for 16-bit inputs. dtypes float16,
    bfloat16, float32 (``allow_tf32``: on TF32 tensor cores on CUDA), float64; both operands one dtype. Returns
    the caller's container (torch.Tensor, wp.array, numpy.ndarray; that of ``mat_a``) on its device.

    Errors: TypeError / ValueError naming the shapes and dtypes before anything is launched (``offs`` not int32,
    not 1-D, group counts that disagree, mixed dtypes, devices or containers; ``offs`` values that decrease, are
    negative or run past the operand where ``offs`` is in host memory). ``offs`` in GPU memory is not read by the
    host (no synchronisation): its values are checked on the device, and bad ones make the whole result NaN.

    torch tensors go through the ``warp_gemm::grouped_mm`` custom operator (torch.compile(fullgraph=True),
    autograd: the backward is itself grouped products).
    """
    if _torch_all(mat_a, mat_b, offs, bias):
        from warp_gemm.torch import grouped_ops

        return grouped_ops.grouped_mm(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype, allow_tf32=allow_tf32)
    from warp_gemm.core import grouped as _core

    return _core.grouped_mm(mat_a, mat_b, offs, bias, out_dtype, allow_tf32)


def grouped_matmul(list_a, list_b, *, out=None, allow_tf32: bool = False):
    """``[a @ b for a, b in zip(list_a, list_b)]`` for 2-D matrices of any sizes and layouts (each ``a_i``
    ``(M_i, K_i)``, ``b_i`` ``(K_i, N_i)``), in one launch per class of operand layouts (row-major or
    transposed views: at most four), with the table of products built on the host.

    Every operand has one dtype (float16, bfloat16, float32, float64), container type and device. ``out``: None
    (new results in the operands' container: views of one buffer for torch and NumPy) or a list of ``(M_i,
    N_i)`` arrays with unit column stride, of the operands' dtype (float32 also for 16-bit operands), not
    overlapping the operands. Returns the list of results.

    Gradients: torch tensors (without ``out``) go through the ``warp_gemm::grouped_matmul`` custom operator
    (autograd, torch.compile); ``wp.array`` operands with ``requires_grad`` under a recording ``wp.Tape`` record
    a backward of two grouped launches (``dA_i += dD_i @ B_i^T``, ``dB_i += A_i^T @ dD_i``).
    """
    if out is None and isinstance(list_a, (list, tuple)) and isinstance(list_b, (list, tuple)) and list_a \
            and list_b and _torch_all(list_a[0], list_b[0]):  # (every operand's container is checked later)
        from warp_gemm.torch import grouped_ops

        return grouped_ops.grouped_matmul(list_a, list_b, allow_tf32=allow_tf32)
    from warp_gemm.autograd import active_tape
    from warp_gemm.core import grouped as _core

    tape = active_tape()
    if tape is not None:
        return _grouped_matmul_tape(tape, list_a, list_b, out, allow_tf32)
    return _core.grouped_matmul(list_a, list_b, out, allow_tf32)


def grouped_matmul_plan(list_a, list_b, *, out=None, allow_tf32: bool = False):
    """:func:`grouped_matmul` for lists of operands that are multiplied again and again (the same bodies every
    step of a simulation): the checks and the tables of products are made once, and each call of the returned
    plan (``plan()``) launches the products, returning the results (new arrays each call, or ``out``).

    The plan reads its operands in place at each call: their values may change between calls, their storage,
    shapes and strides may not (it holds references to them). No gradients (no ``wp.Tape`` recording, no
    autograd); operands with no unit stride in either dimension raise ValueError (they would be copied). Errors
    as :func:`grouped_matmul`'s, when the plan is made.
    """
    from warp_gemm.autograd import active_tape
    from warp_gemm.core import grouped as _core

    torch = sys.modules.get("torch")
    xs = list(list_a) + list(list_b) if isinstance(list_a, (list, tuple)) and isinstance(list_b, (list, tuple)) else []
    grad = torch is not None and torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in xs)
    if grad or (active_tape() is not None and any(getattr(x, "requires_grad", False) for x in xs)):
        raise ValueError("grouped_matmul_plan: an operand requires a gradient, and a plan records none; use "
                         "grouped_matmul (autograd, wp.Tape), or make the plan under torch.no_grad() / outside the tape")
    return _core.grouped_matmul(list_a, list_b, out, allow_tf32, plan=True)


# --- wp.Tape -----------------------------------------------------------------------------------------------------
# The forward runs with the tape paused (the grouped kernel is forward-only) and records one backward function:
# dA_i += dD_i @ B_i^T and dB_i += A_i^T @ dD_i, each list one grouped launch into temporaries of the accumulation
# dtype, then added into the .grad arrays (one small launch per array). As for matmul, an output's gradient is
# consumed (zeroed) after use where Warp does so (retain_grad, 1.19+) unless the output retains it.
def _grouped_matmul_tape(tape, list_a, list_b, out, allow_tf32: bool):
    import warp as wp

    from warp_gemm import autograd as _ag
    from warp_gemm.core import grouped as _core
    from warp_gemm.families.common.kernels import WP_DTYPES, acc_dtype_name

    need_a = [isinstance(x, wp.array) and x.requires_grad for x in list_a]
    need_b = [isinstance(x, wp.array) and x.requires_grad for x in list_b]
    if not (any(need_a) or any(need_b)):
        with _ag._tape_paused():
            return _core.grouped_matmul(list_a, list_b, out, allow_tf32)
    if out is not None and not all(isinstance(d, wp.array) and d.requires_grad for d in out):
        raise ValueError("grouped_matmul: an operand has requires_grad=True and a wp.Tape is recording, but out is "
                         "not a list of wp.arrays with requires_grad=True, so no gradient could flow back through "
                         "it; allocate them with requires_grad=True (or leave out=None)")
    with _ag._tape_paused():
        results = _core.grouped_matmul(list_a, list_b, out, allow_tf32, requires_grad=True)
    a, b = list(list_a), list(list_b)
    names = {v: k for k, v in WP_DTYPES.items()}

    def backward():
        dev = results[0].device
        with _ag._tape_paused(), wp.ScopedDevice(dev):
            acc = WP_DTYPES[acc_dtype_name(names[a[0].dtype])]
            grads = [d.grad for d in results]
            for need, xs, left in ((need_a, a, True), (need_b, b, False)):
                idx = [i for i, n in enumerate(need) if n and xs[i].size]
                if not idx:
                    continue
                tmp = [wp.empty(xs[i].shape, dtype=acc, device=dev) for i in idx]
                if left:  # dA_i = dD_i @ B_i^T
                    _core.grouped_matmul([_cast(grads[i], a[i].dtype) for i in idx], [b[i].transpose() for i in idx],
                                         tmp, allow_tf32)
                else:  # dB_i = A_i^T @ dD_i
                    _core.grouped_matmul([a[i].transpose() for i in idx], [_cast(grads[i], b[i].dtype) for i in idx],
                                         tmp, allow_tf32)
                for i, t in zip(idx, tmp):
                    _ag.accumulate(xs[i].grad, t)
            if _ag.CONSUMES_OUTPUT_GRAD:
                for d in results:
                    if d.size and not getattr(d, "retain_grad", False):
                        d.grad.zero_()

    # (the tape keeps these arrays' gradients; empty arrays have none to keep)
    arrays = [x for x, n in zip(a + b, need_a + need_b) if n and x.size] + [r for r in results if r.size]
    tape.record_func(backward, arrays=arrays)
    return results


def _cast(g, dtype):
    """``g`` in ``dtype`` (a new array where it differs: a product takes one dtype)."""
    import warp as wp

    from warp_gemm.core.launches import convert
    from warp_gemm.families.common.kernels import WP_DTYPES

    if g.dtype == dtype:
        return g
    names = {v: k for k, v in WP_DTYPES.items()}
    y = wp.empty(g.shape, dtype=dtype, device=g.device)
    convert(y.reshape((1, *g.shape)), g.reshape((1, *g.shape)), names[dtype], names[g.dtype])
    return y
