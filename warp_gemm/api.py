"""Public entry points: :func:`matmul` and :func:`gemm`.

Thin on purpose: a call that needs gradients goes to :mod:`warp_gemm.autograd`, every other one
straight to the core (``core.execute.run``: validate -> plan -> execute; docs/design.md).
"""

from __future__ import annotations

from warp_gemm import autograd as _autograd
from warp_gemm.config.configs import Config
from warp_gemm.core.execute import run as _run


def matmul(a, b, *, out=None, allow_tf32: bool = False, config: Config | None = None):
    """``a @ b`` with ``torch.matmul`` semantics for 2-D and 3-D operands.

    Shapes: ``(M, K) @ (K, N) -> (M, N)``; with a batch dimension on either side,
    ``(B, M, K) @ (B, K, N) -> (B, M, N)``, where a missing or size-1 batch dimension broadcasts.
    dtypes: float16, bfloat16, float32, float64 (both operands the same); 16-bit inputs accumulate in
    float32, float64 in float64. The result has the input dtype (or ``out``'s), the caller's container
    type (``wp.array``, ``torch.Tensor``, ``numpy.ndarray``; that of ``a``) and device.
    ``allow_tf32``: float32 products on TF32 tensor cores where the installed Warp offers
    ``precision="tf32"`` (1.19+) and on CUDA; exact float32 otherwise.
    Raises ``TypeError``/``ValueError`` before any launch for bad input; ``out`` is then untouched.
    """
    if _autograd.needs_grad(a, b, None):
        return _autograd.gemm_with_grad(a, b, None, 1.0, 0.0, False, False, out, allow_tf32, config, "matmul")
    return _run(a, b, None, 1.0, 0.0, False, False, out, allow_tf32, config, "matmul")


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
         trans_b: bool = False, out=None, allow_tf32: bool = False, config: Config | None = None):
    """``alpha * op(A) @ op(B) + beta * C`` -- the form of Warp's removed ``wp.matmul``.

    ``op(X)`` is ``X`` or, with ``trans_x``, its transpose (of the last two dimensions). ``c`` has the
    result's shape or broadcasts to it (e.g. a bias of shape ``(N,)``) and the result's dtype; it is
    not read when ``beta == 0`` (BLAS semantics, so NaN in an unread ``c`` does not propagate), and
    ``op(A) @ op(B)`` is not computed when ``alpha == 0`` or K is 0. ``out`` may not share memory with
    ``a``, ``b`` or ``c``. Everything else as :func:`matmul`.
    """
    if _autograd.needs_grad(a, b, c):
        return _autograd.gemm_with_grad(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config,
                                        "gemm")
    return _run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, "gemm")
