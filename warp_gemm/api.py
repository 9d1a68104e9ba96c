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
    """``a @ b`` with ``torch.matmul`` semantics, for every container.

    Shapes: ``(M, K) @ (K, N) -> (M, N)``; with a batch dimension on either side,
    ``(B, M, K) @ (B, K, N) -> (B, M, N)``, where a missing or size-1 batch dimension broadcasts.
    Other ranks as ``torch.matmul``: 1-D operands (vector·vector -> shape ``()``, vector·matrix,
    matrix·vector) and any number of broadcast leading dimensions, e.g. ``(B, H, S, D) @ (B, H, D, S)``,
    presented to the 2-D/3-D GEMM as views without copies where the strides allow
    (``core/broadcast.py``); ``out`` then has the result's shape. For ``wp.array`` operands Warp has no
    0-d arrays (a vector·vector product is refused), an operand that needs a broadcast copy is copied by
    Warp (no torch needed), and gradients (``wp.Tape``) cover 2-D and 3-D operands only.
    dtypes: float16, bfloat16, float32, float64 (both operands the same); 16-bit inputs accumulate in
    float32, float64 in float64. The result has the input dtype (or ``out``'s), the caller's container
    type (``wp.array``, ``torch.Tensor``, ``numpy.ndarray``; that of ``a``) and device.
    ``allow_tf32``: float32 products on TF32 tensor cores where the installed Warp offers
    ``precision="tf32"`` (1.19+) and on CUDA; exact float32 otherwise.
    ``config``: a :class:`Config` or its text (``"128x128x64/b256/g8"``) forcing the tiled family's
    configuration; None lets the planner choose.
    Raises ``TypeError``/``ValueError`` before any launch for bad input; ``out`` is then untouched.
    """
    config = _config_arg(config, "matmul")
    if out is None and config is None and _torch_pair(a, b):
        # torch tensors go through the warp_gemm::gemm custom op (torch.compile traces it, torch.export
        # captures it, autograd included; eager calls take a direct path of the same cost)
        from warp_gemm.torch import ops

        return ops.matmul(a, b, allow_tf32=allow_tf32)
    if _rank(a) not in (2, 3) or _rank(b) not in (2, 3):
        return _matmul_nd(a, b, out, allow_tf32, config)
    if _autograd.needs_grad(a, b, None):
        return _autograd.gemm_with_grad(a, b, None, 1.0, 0.0, False, False, out, allow_tf32, config, "matmul")
    return _run(a, b, None, 1.0, 0.0, False, False, out, allow_tf32, config, "matmul")


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
         trans_b: bool = False, out=None, allow_tf32: bool = False, config: Config | None = None):
    """``alpha * op(A) @ op(B) + beta * C`` -- the form of Warp's removed ``wp.matmul``.

    ``op(X)`` is ``X`` or, with ``trans_x``, its transpose (of the last two dimensions). ``c`` has the
    result's shape or broadcasts to it (e.g. a bias of shape ``(N,)``) and the result's dtype; it is
    not read when ``beta == 0`` (BLAS semantics, so NaN in an unread ``c`` does not propagate), and
    ``op(A) @ op(B)`` is not computed when ``alpha == 0`` or K is 0. ``out`` may be ``c`` itself (the
    same memory, shape and strides: ``gemm(a, b, c, beta=1.0, out=c)`` accumulates in place, as
    ``torch.addmm(c, a, b, out=c)``; ``c`` is read through one copy first); any other overlap of ``out``
    with ``a``, ``b`` or ``c`` is refused. Everything else as :func:`matmul`.
    """
    config = _config_arg(config, "gemm")
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
    from warp_gemm.families.common.epilogue import check_activation

    activation = check_activation(activation)
    if _torch_pair(x, weight):
        from warp_gemm.torch import ops

        return ops.linear(x, weight, bias, activation=activation)
    _linear_shapes(x, weight, bias)
    if _rank(x) == 1:  # (in,) -> (1, in), the result back to (out,), as torch's linear
        y = linear(_row(x), weight, bias, activation=activation)
        return y.reshape((y.shape[-1],))
    beta = 1.0 if bias is not None else 0.0
    if _autograd.needs_grad(x, weight, bias):
        return _autograd.linear_with_grad(x, weight, bias, activation)
    return _run(x, weight, bias, 1.0, beta, False, True, None, False, None, "linear", activation)


def _linear_shapes(x, weight, bias) -> None:
    """``linear``'s shape rules, checked before the GEMM's (whose messages speak of a product): ValueError
    naming ``x``, ``weight`` and ``bias``. Operands that are not arrays are left to validation."""
    if not all(hasattr(t, "shape") for t in (x, weight)):
        return
    ws, xs = list(weight.shape), list(x.shape)
    if len(ws) != 2:
        raise ValueError(f"linear: weight has shape {ws}; expected 2-D (out_features, in_features)")
    if len(xs) not in (1, 2, 3):
        raise ValueError(f"linear: x has shape {xs} (rank {len(xs)}); wp.array and NumPy x may be 1-D "
                         "(in_features,), 2-D (rows, in_features) or 3-D (batch, rows, in_features) "
                         "(torch tensors: any rank)")
    if xs[-1] != ws[1]:
        raise ValueError(f"linear: x has shape {xs} ({xs[-1]} in_features) but weight has shape {ws} "
                         f"({ws[1]} in_features)")
    bs = list(getattr(bias, "shape", ()) or ()) if bias is not None else []
    if len(bs) > 1 or (len(bs) == 1 and bs[0] not in (1, ws[0])):
        raise ValueError(f"linear: bias has shape {bs}; expected ({ws[0]},) for weight of shape {ws}")


def _row(x):
    """A 1-D ``x`` of ``(n,)`` as the row ``(1, n)``, without a copy."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x[None]
    import warp as wp

    if isinstance(x, wp.array):
        v = wp.array(ptr=x.ptr, dtype=x.dtype, shape=(1, x.shape[0]), strides=(0, x.strides[0]),
                     capacity=x.capacity, device=x.device, requires_grad=x.requires_grad,
                     grad=None if x.grad is None else _row(x.grad))
        v._wg_base = x  # the view owns nothing: keep x alive with it
        return v
    return x


def _config_arg(config, fname: str):
    """``config=`` as a :class:`Config` (its text parsed) or None; TypeError naming the parameter otherwise."""
    if config is None or isinstance(config, Config):
        return config
    if isinstance(config, str):
        return Config.parse(config)
    from warp_gemm.config.configs import PipeConfig

    hint = (" (a pipelined configuration is forced with warp_gemm.options(family='pipelined', pipe_config=...))"
            if isinstance(config, PipeConfig) else "")
    raise TypeError(f"{fname}: config must be a warp_gemm.Config, its text ({Config.FORMAT}) or None, got "
                    f"{type(config).__name__}{hint}")


def _rank(x) -> int:
    shape = getattr(x, "shape", None)
    return len(shape) if shape is not None else 2  # not an array: validation names it


def _matmul_nd(a, b, out, allow_tf32, config):
    """``matmul`` for ranks other than 2/3 (``torch.matmul``'s rules): both operands presented as the
    2-D/3-D views ``core.broadcast.matmul_shapes`` asks for, the product written through a 2-D/3-D view
    of the result (``out``, or a new array of the result's shape in ``a``'s container)."""
    import numpy as np

    from warp_gemm.core.broadcast import matmul_shapes
    from warp_gemm.core.problem import _describe

    if _rank(a) == 0 or _rank(b) == 0 or not all(hasattr(x, "strides") or hasattr(x, "stride") for x in (a, b)):
        return _run(a, b, None, 1.0, 0.0, False, False, out, allow_tf32, config, "matmul")  # its errors
    if _autograd.needs_grad(a, b, None):
        raise ValueError(f"matmul: gradients are computed for 2-D and 3-D operands only (a has shape "
                         f"{list(a.shape)}, b {list(b.shape)}); for other ranks pass torch tensors "
                         "without out (the custom op) or reshape to 2-D/3-D")
    plan = matmul_shapes(a.shape, _describe(a, "a", "matmul").strides, b.shape, _describe(b, "b", "matmul").strides)
    a2, b2 = _present(a, plan.a, row=True), _present(b, plan.b, row=False)
    if out is None:
        out = _new_like(a, plan.result_shape, b)
    elif tuple(out.shape) != tuple(plan.result_shape):
        raise ValueError(f"matmul: out has shape {list(out.shape)}; the result of a {list(a.shape)} @ b "
                         f"{list(b.shape)} has shape {list(plan.result_shape)}")
    view = _reshaped_view(out, plan.out_shape)
    if view is not None:
        _run(a2, b2, None, 1.0, 0.0, False, False, view, allow_tf32, config, "matmul")
        return out
    res = _run(a2, b2, None, 1.0, 0.0, False, False, None, allow_tf32, config, "matmul")
    if isinstance(out, np.ndarray):  # out is not viewable as the GEMM's shape: copy the result in
        out[...] = np.asarray(res).reshape(plan.result_shape)
    else:
        out.copy_(res.reshape(plan.result_shape))
    return out


def _present(x, view, row: bool):
    """``x`` (1-D promoted to a row or a column) broadcast to ``view.expand_shape`` and seen as
    ``view.shape``: a view where the strides allow, else a copy."""
    import numpy as np

    torch = sys.modules.get("torch")
    if isinstance(x, np.ndarray):
        x1 = x[None] if x.ndim == 1 and row else (x[:, None] if x.ndim == 1 else x)
        return np.broadcast_to(x1, view.expand_shape).reshape(view.shape)
    if torch is not None and isinstance(x, torch.Tensor):
        x1 = x.unsqueeze(0) if x.dim() == 1 and row else (x.unsqueeze(-1) if x.dim() == 1 else x)
        return x1.expand(view.expand_shape).reshape(view.shape)
    import warp as wp

    if isinstance(x, wp.array):
        if not view.copy:
            from warp_gemm.core.operands import raw_view

            item = wp.types.type_size_in_bytes(x.dtype)
            v = raw_view(x.ptr, x.dtype, tuple(view.shape), tuple(s * item for s in view.strides), x.device)
            v._wg_base = x  # the view owns nothing: keep x alive with it
            return v
        return _broadcast_copy_wp(x, view, row)
    return x  # not an array: validation names it


def _broadcast_copy_wp(x, view, row: bool):
    """``x`` (a wp.array; 1-D promoted to a row or a column) broadcast to ``view.expand_shape``, copied into
    a new contiguous wp.array by Warp (a stride-0 view copied with ``wp.copy``) and seen as ``view.shape``.
    Warp arrays have at most 4 dimensions, as does ``expand_shape`` for Warp operands."""
    import warp as wp

    shape, strides = tuple(x.shape), tuple(x.strides)
    if len(shape) == 1:  # (K,) as the row (1, K) or the column (K, 1)
        shape, strides = ((1, shape[0]), (0, strides[0])) if row else ((shape[0], 1), (strides[0], 0))
    full = tuple(view.expand_shape)
    lead = len(full) - len(shape)
    shape, strides = (1,) * lead + shape, (0,) * lead + strides
    bstrides = tuple(0 if n == 1 and f != 1 else st for n, f, st in zip(shape, full, strides))
    src = wp.array(ptr=x.ptr, dtype=x.dtype, shape=full, strides=bstrides, capacity=x.capacity, device=x.device)
    src._wg_base = x  # the view owns nothing: keep x alive with it
    dst = wp.empty(full, dtype=x.dtype, device=x.device)
    wp.copy(dst, src)
    return dst.reshape(tuple(view.shape))


def _new_like(a, shape, b):
    """A new array of ``shape`` in ``a``'s container, dtype and device."""
    import numpy as np

    torch = sys.modules.get("torch")
    if isinstance(a, np.ndarray):
        return np.empty(shape, dtype=a.dtype)
    if torch is not None and isinstance(a, torch.Tensor):
        return torch.empty(shape, dtype=a.dtype, device=a.device)
    import warp as wp

    if not shape:
        raise ValueError(f"matmul: a {list(a.shape)} @ b {list(b.shape)} is a scalar, and Warp has no 0-d "
                         "arrays: multiply a (1, K) by a (K, 1) array instead")
    return wp.empty(shape, dtype=a.dtype, device=a.device)


def _reshaped_view(out, shape):
    """``out`` seen as ``shape`` without a copy, or None where its strides do not allow it."""
    import numpy as np

    torch = sys.modules.get("torch")
    if isinstance(out, np.ndarray):
        v = out.view()
        try:
            v.shape = shape
        except AttributeError:
            return None
        return v
    if torch is not None and isinstance(out, torch.Tensor):
        try:
            return out.view(shape)
        except RuntimeError:
            return None
    import warp as wp

    if isinstance(out, wp.array):
        if not out.is_contiguous:
            raise ValueError(f"matmul: out (wp.array {list(out.shape)}) must be contiguous for operands of "
                             "rank other than 2 or 3")
        return out.reshape(shape)
    return out  # not an array: validation names it


def _torch_pair(a, b) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
