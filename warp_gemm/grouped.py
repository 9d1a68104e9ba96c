"""Grouped products: :func:`grouped_mm` (mixture-of-experts layers, ``torch.nn.functional.grouped_mm``'s
semantics) and :func:`grouped_matmul` (a list of independent products of any sizes), each one launch of the
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
    from warp_gemm.families.grouped.api import grouped_mm_core

    return grouped_mm_core(mat_a, mat_b, offs, bias, out_dtype, allow_tf32)


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
            and _torch_all(*list_a, *list_b):
        from warp_gemm.torch import grouped_ops

        return grouped_ops.grouped_matmul(list_a, list_b, allow_tf32=allow_tf32)
    from warp_gemm.families.grouped import api, tape

    t = tape.active_tape()
    if t is not None:
        return tape.grouped_matmul_tape(t, list_a, list_b, out, allow_tf32)
    return api.grouped_matmul_core(list_a, list_b, out, allow_tf32)
