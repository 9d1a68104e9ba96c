"""Public entry points: :func:`matmul` and :func:`gemm`.

Thin on purpose: a call that needs gradients goes to :mod:`warp_gemm.autograd`, every other one
straight to the core (``core.execute.run``: validate -> plan -> execute; docs/design.md).
"""

from __future__ import annotations

import sys

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
    if out is None and config is None and _torch_pair(a, b):
        # torch tensors go through the warp_gemm::gemm custom op (torch.compile traces it, torch.export
        # captures it, autograd included; eager calls take a direct path of the same cost)
        from warp_gemm.torch import ops

        return ops.matmul(a, b, allow_tf32=allow_tf32)
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
    if out is None and config is None and _torch_pair(a, b) and (c is None or _torch_pair(c, c)):
        from warp_gemm.torch import ops

        return ops.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b, allow_tf32=allow_tf32)
    if _autograd.needs_grad(a, b, c):
        return _autograd.gemm_with_grad(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config,
                                        "gemm")
    return _run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, "gemm")


def linear(x, weight, bias=None, *, activation: str | None = None):
    """``activation(x @ weight.T + bias)``, like ``torch.nn.functional.linear`` plus an activation.

    ``x``: ``(..., in)``; ``weight``: ``(out, in)``; ``bias``: ``(out,)`` or None; ``activation``: None,
    ``"relu"``, ``"gelu"`` (erf), ``"gelu_tanh"``, ``"silu"`` or ``"tanh"`` (an unknown name is a
    ValueError naming it). The bias and the activation are applied in the GEMM's epilogue where the
    family has one (the pipelined family on CUDA), else in one elementwise pass. torch tensors go
    through the ``warp_gemm::linear`` custom op (any leading dimensions, torch.compile, autograd);
    ``wp.array``/NumPy ``x`` may be 2-D or 3-D, with gradients through ``wp.Tape``.
    """
    from warp_gemm.kernels.epilogue import check_activation

    activation = check_activation(activation)
    if _torch_pair(x, weight):
        from warp_gemm.torch import ops

        return ops.linear(x, weight, bias, activation=activation)
    beta = 1.0 if bias is not None else 0.0
    if _autograd.needs_grad(x, weight, bias):
        return _autograd.linear_with_grad(x, weight, bias, activation)
    return _run(x, weight, bias, 1.0, beta, False, True, None, False, None, "linear", activation)


def _torch_pair(a, b) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
