"""warp_gemm's products as PyTorch custom operators (``torch.library.custom_op``, namespace ``warp_gemm``).

Operators (each with a fake implementation for tracing and an autograd formula)::

    warp_gemm::gemm(Tensor a, Tensor b, Tensor? c, float alpha, float beta, bool trans_a, bool trans_b,
                    bool allow_tf32) -> Tensor
        alpha * op(a) @ op(b) + beta * c   (2-D or 3-D operands, batch 1 / missing broadcasts, c broadcasts)
    warp_gemm::linear(Tensor x, Tensor weight, Tensor? bias, str activation, bool save_preact)
                    -> (Tensor y, Tensor z)
        z = x @ weight.T + bias, y = activation(z); x has any number of leading dims. z is returned (to
        be saved for the backward) only when save_preact and activation != "none"; otherwise it is an
        empty tensor of shape (0,); relu and tanh never return it (their derivative follows from y),
        and linear() asks for it only when autograd records the call outside torch.export. activation is "none" or a name of epilogue.ACTIVATIONS.
    warp_gemm::activation_backward(Tensor grad_y, Tensor z, str activation) -> Tensor
        grad_y * activation'(z) (used by linear's backward).

The Python entry points :func:`gemm`, :func:`matmul` and :func:`linear` call these operators, so
``torch.compile(fullgraph=True)`` traces them as single graph nodes (forward and backward) and
``torch.export`` captures them. Operands go to warp_gemm's core as they are (zero-copy); the core
launches on torch's current stream, which keeps CUDA-graph capture working.

Every call into the core goes through the two indirection functions :func:`_core_gemm` and
:func:`_core_linear`.
"""


import threading
from typing import Optional

import torch

from ..families.common import epilogue as _epi

_NS = "warp_gemm"


# --- the indirections into the core -----------------------------------------------------------------
from ..core.execute import run as _run  # noqa: E402 -- the core: validate -> plan -> execute, no autograd


def _core_gemm(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, fname="gemm"):
    """``alpha * op(a) @ op(b) + beta * c`` into ``out`` (or a new tensor) on torch's current stream,
    without autograd; returns the result tensor. ``fname`` names the caller's function in errors."""
    return _run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, None, fname)


def _renamed(e: Exception, fname: str) -> Exception:
    """``e`` (a TypeError/ValueError of the ``warp_gemm::gemm`` operator, which every entry point shares) with
    its message naming ``fname``, the function the caller called; other exceptions as they are."""
    msg = str(e)
    if type(e) in (TypeError, ValueError):
        for prefix in ("warp_gemm::gemm: ", "gemm: "):
            if msg.startswith(prefix):
                return type(e)(f"{fname}: {msg[len(prefix):]}")
    return e


def _core_linear(x2d, weight, bias, activation, out=None, z_out=None):
    """``activation(x2d @ weight.T + bias)`` for a 2-D ``x2d`` (``bias`` None or ``(N,)``, ``activation``
    None or a name of ACTIVATIONS) into ``out`` (or a new tensor); when ``z_out`` is given, the
    pre-activation ``x2d @ weight.T + bias`` is written there too. Returns the result.

    Without ``z_out``: one core call with the activation (fused into the pipelined family's epilogue
    on CUDA; bias read in place as a broadcast row). With ``z_out`` (training with gelu/gelu_tanh/silu):
    the GEMM into z, then one elementwise pass."""
    beta = 1.0 if bias is not None else 0.0
    if z_out is None:
        return _run(x2d, weight, bias, 1.0, beta, False, True, out, False, None, "linear", activation)
    z = _core_gemm(x2d, weight, bias, 1.0, beta, False, True, z_out, False, "linear")
    return _elementwise(out if out is not None else torch.empty_like(z), z, activation)


# --- Warp views of torch tensors and the elementwise passes ------------------------------------------
_streams: dict = {}
_streams_lock = threading.Lock()


def _warp_stream(t: torch.Tensor):
    """The Warp stream wrapping torch's current stream on ``t``'s device (None on the CPU)."""
    if t.device.type != "cuda":
        return None
    import warp as wp

    ts = torch.cuda.current_stream(t.device)
    key = (ts.device.index, ts.cuda_stream)
    with _streams_lock:
        s = _streams.get(key)
        if s is None:
            if len(_streams) >= 64:
                _streams.clear()
            s = _streams[key] = (wp.stream_from_torch(ts), ts)  # keep ts alive: its handle stays unique
    return s[0]


def _wp3d(t: torch.Tensor):
    import warp as wp

    t3 = t.reshape(1, 1, t.numel()) if t.is_contiguous() else None
    if t3 is None:
        raise ValueError("internal: elementwise pass on a non-contiguous tensor")
    return wp.from_torch(t3, requires_grad=False)


def _elementwise(out: torch.Tensor, z: torch.Tensor, activation):
    if out.numel() == 0:
        return out
    _epi.apply_activation(_wp3d(out), _wp3d(z), activation, stream=_warp_stream(z))
    return out


def _act_arg(activation) -> str:
    """The op's string form of an activation name (validated): None -> "none"."""
    _epi.check_activation(activation)
    return "none" if activation is None else activation


def _check(cond, message, kind=ValueError) -> None:
    """``kind(message())`` where ``cond`` is False. A plain bool is checked here: ``torch._check_value`` and its kin
    import ``torch.fx.experimental.symbolic_shapes`` (and sympy) on first use, 0.4 s of an eager first call on the
    development host; symbolic conditions (torch.compile's tracing) go to them."""
    if isinstance(cond, bool):
        if not cond:
            raise kind(message())
        return
    {ValueError: torch._check_value, TypeError: torch._check_type, RuntimeError: torch._check}[kind](cond, message)


def _act_name(arg: str):
    return None if arg == "none" else _epi.check_activation(arg)


# --- shapes (shared by the real and fake implementations) ---------------------------------------------
def _gemm_shape(a, b, c, trans_a, trans_b):
    for name, t in (("a", a), ("b", b)):
        _check(t.dim() in (2, 3), lambda: f"warp_gemm::gemm: {name} has shape {list(t.shape)}; "
               "warp_gemm takes 2-D (M, K) or 3-D batched (B, M, K) operands")
    _check(a.dtype == b.dtype, lambda: f"warp_gemm::gemm: a is {a.dtype} but b is {b.dtype}", TypeError)
    M, K = (a.shape[-1], a.shape[-2]) if trans_a else (a.shape[-2], a.shape[-1])
    K2, N = (b.shape[-1], b.shape[-2]) if trans_b else (b.shape[-2], b.shape[-1])
    _check(K == K2, lambda: f"warp_gemm::gemm: inner dimensions differ ({K} != {K2})")
    nba = a.shape[0] if a.dim() == 3 else None
    nbb = b.shape[0] if b.dim() == 3 else None
    if nba is None and nbb is None:
        return (M, N)
    if nba is None or nba == 1:
        nb = nbb if nbb is not None else nba
    elif nbb is None or nbb == 1:
        nb = nba
    else:
        _check(nba == nbb, lambda: f"warp_gemm::gemm: batch dimensions {nba} and {nbb} do not broadcast")
        nb = nba
    return (nb, M, N)


def _sum_to(t: torch.Tensor, shape) -> torch.Tensor:
    """``t`` summed over the dimensions along which a tensor of ``shape`` was broadcast to ``t``'s shape."""
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    lead = t.dim() - len(shape)
    if lead:
        t = t.sum(dim=tuple(range(lead)))
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and t.shape[i] != 1)
    if dims:
        t = t.sum(dim=dims, keepdim=True)
    return t


# --- warp_gemm::gemm --------------------------------------------------------------------------------
def _gemm_impl(a: torch.Tensor, b: torch.Tensor, c: Optional[torch.Tensor], alpha: float, beta: float,
               trans_a: bool, trans_b: bool, allow_tf32: bool) -> torch.Tensor:
    return _core_gemm(a, b, c, alpha, beta, trans_a, trans_b, None, allow_tf32)


_gemm_op = torch.library.custom_op(f"{_NS}::gemm", _gemm_impl, mutates_args=())


@_gemm_op.register_fake
def _gemm_fake(a, b, c, alpha, beta, trans_a, trans_b, allow_tf32):
    return a.new_empty(_gemm_shape(a, b, c, trans_a, trans_b))


def _gemm_setup(ctx, inputs, output):
    a, b, c, alpha, beta, trans_a, trans_b, allow_tf32 = inputs
    ctx.save_for_backward(a, b)
    ctx.c_shape = None if c is None else tuple(c.shape)
    ctx.args = (alpha, beta, trans_a, trans_b, allow_tf32)


def _gemm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    alpha, beta, trans_a, trans_b, tf32 = ctx.args
    need_a, need_b, need_c = ctx.needs_input_grad[:3]
    op = torch.ops.warp_gemm.gemm
    da = db = dc = None
    if need_a:
        # d op(a) = alpha * grad @ op(b)^T; da is its transpose when trans_a
        if trans_a:
            da = op(b, grad, None, alpha, 0.0, trans_b, True, tf32)
        else:
            da = op(grad, b, None, alpha, 0.0, False, not trans_b, tf32)
        da = _sum_to(da, a.shape)
    if need_b:
        # d op(b) = alpha * op(a)^T @ grad; db is its transpose when trans_b
        if trans_b:
            db = op(grad, a, None, alpha, 0.0, True, trans_a, tf32)
        else:
            db = op(a, grad, None, alpha, 0.0, not trans_a, False, tf32)
        db = _sum_to(db, b.shape)
    if need_c and ctx.c_shape is not None:
        dc = _sum_to(grad * beta, ctx.c_shape)
    return da, db, dc, None, None, None, None, None


_gemm_op.register_autograd(_gemm_backward, setup_context=_gemm_setup)


# --- warp_gemm::activation_backward -------------------------------------------------------------------
@torch.library.custom_op(f"{_NS}::activation_backward", mutates_args=())
def _act_bwd_op(grad_y: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    name = _act_name(activation)
    gy = grad_y.contiguous()
    zc = z.contiguous()
    gz = torch.empty_like(zc)
    if gz.numel():
        _epi.activation_backward(_wp3d(gz), _wp3d(gy), _wp3d(zc), name, stream=_warp_stream(zc))
    return gz


@_act_bwd_op.register_fake
def _act_bwd_fake(grad_y, z, activation):
    return torch.empty_like(z, memory_format=torch.contiguous_format)


#: Activations whose derivative is computed from the output y (no pre-activation saved).
_FROM_OUTPUT = ("relu", "tanh")


def _keeps_preact(activation: str, save_preact: bool) -> bool:
    return save_preact and activation not in ("none",) + _FROM_OUTPUT


# --- warp_gemm::linear ----------------------------------------------------------------------------------
def _linear_shapes(x, weight, bias):
    """The result's shape; ValueError (:func:`_check`, also while tracing) naming x, weight and bias."""
    _check(weight.dim() == 2, lambda: f"linear: weight has shape {list(weight.shape)}; expected 2-D "
           "(out_features, in_features)")
    _check(x.dim() >= 1, lambda: "linear: x must have at least one dimension")
    _check(x.shape[-1] == weight.shape[1], lambda: f"linear: x has shape {list(x.shape)} ({x.shape[-1]} "
           f"in_features) but weight has shape {list(weight.shape)} ({weight.shape[1]} in_features)")
    if bias is not None:
        _check(bias.dim() <= 1 and bias.numel() in (1, weight.shape[0]),
               lambda: f"linear: bias has shape {list(bias.shape)}; expected ({weight.shape[0]},) for "
               f"weight of shape {list(weight.shape)}")
    return tuple(x.shape[:-1]) + (weight.shape[0],)


def _linear_forward(x, weight, bias, activation: str, keep_z: bool):
    """(y, z or None) for the op's arguments (activation in the op's string form)."""
    name = _act_name(activation)
    out_shape = _linear_shapes(x, weight, bias)
    x2d = x.reshape(-1, x.shape[-1])
    if keep_z:
        z = torch.empty((x2d.shape[0], weight.shape[0]), dtype=x.dtype, device=x.device)
        y = _core_linear(x2d, weight, bias, name, None, z)
        return y.reshape(out_shape), z.reshape(out_shape)
    return _core_linear(x2d, weight, bias, name).reshape(out_shape), None


def _linear_impl(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
                 save_preact: bool) -> tuple[torch.Tensor, torch.Tensor]:
    y, z = _linear_forward(x, weight, bias, activation, _keeps_preact(activation, save_preact))
    return y, (z if z is not None else x.new_empty((0,)))


_linear_op = torch.library.custom_op(f"{_NS}::linear", _linear_impl, mutates_args=())


@_linear_op.register_fake
def _linear_fake(x, weight, bias, activation, save_preact):
    _act_name(activation)
    out_shape = _linear_shapes(x, weight, bias)
    y = x.new_empty(out_shape)
    z = x.new_empty(out_shape if _keeps_preact(activation, save_preact) else (0,))
    return y, z


def _linear_setup(ctx, inputs, output):
    x, weight, bias, activation, save_preact = inputs
    y, z = output
    ctx.activation = activation
    ctx.has_bias = bias is not None
    ctx.bias_shape = None if bias is None else tuple(bias.shape)
    # relu' and tanh' follow from the output (relu'(z) = [y > 0], tanh'(z) = 1 - y^2); the others need z.
    ctx.save_for_backward(x, weight, bias, y if activation in _FROM_OUTPUT else None, z)


def _linear_backward(ctx, grad_y, grad_z_unused):
    x, weight, bias, y, z = ctx.saved_tensors
    op = torch.ops.warp_gemm.gemm
    act = ctx.activation
    x2d = x.reshape(-1, x.shape[-1])
    gy = grad_y.reshape(-1, weight.shape[0])
    if act in _FROM_OUTPUT:
        y2d = y.reshape(gy.shape)
        gz = gy * (y2d > 0).to(gy.dtype) if act == "relu" else gy * (1 - y2d * y2d)
    elif act != "none":
        if z.numel() != gy.numel():  # not saved (save_preact=False): recompute the pre-activation
            z = op(x2d, weight, bias, 1.0, 1.0 if bias is not None else 0.0, False, True, False)
        gz = torch.ops.warp_gemm.activation_backward(gy, z.reshape(gy.shape), act)
    else:
        gz = gy
    dx = dw = db = None
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    if need_x:
        dx = op(gz, weight, None, 1.0, 0.0, False, False, False).reshape(x.shape)
    if need_w:
        dw = op(gz, x2d, None, 1.0, 0.0, True, False, False)
    if need_b and bias is not None:
        db = gz.sum(0).reshape(ctx.bias_shape)
    return dx, dw, db, None, None


_linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)


# --- Python entry points ----------------------------------------------------------------------------------
#: Eager calls that need no autograd and run under no tracing call the operators' implementations
#: directly, skipping the dispatcher's custom-op machinery (about 15 us per call on the CPU, which is
#: most of a small GEMM's host time). The results are the same; every traced, exported or
#: differentiated call goes through the operators. Set False to always dispatch.
EAGER_FAST_PATH = True

_dispatch_depth = getattr(torch._C, "_len_torch_dispatch_stack", None)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)
_is_compiling = getattr(torch.compiler, "is_compiling", None) or (lambda: False)


def _direct(*ts) -> bool:
    """Whether this call may bypass the dispatcher: plain tensors (not fake, functional or subclassed),
    no autograd to record, no dispatch mode (make_fx, export, FakeTensorMode, FlopCounterMode, ...), no
    functorch transform and no dynamo tracing."""
    if not EAGER_FAST_PATH or _is_compiling():  # first: dynamo folds it to True and skips the rest
        return False
    if _dispatch_depth is None or _dispatch_depth() or (_functorch_active is not None and _functorch_active()):
        return False
    grad = torch.is_grad_enabled()
    for t in ts:
        if t is not None and (type(t) is not torch.Tensor or (grad and t.requires_grad)):
            return False
    return True


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
         allow_tf32: bool = False) -> torch.Tensor:
    """``alpha * op(a) @ op(b) + beta * c`` on torch tensors through the ``warp_gemm::gemm`` operator
    (traceable by torch.compile / torch.export, differentiable). Shapes as :func:`warp_gemm.gemm`."""
    args = (a, b, c, float(alpha), float(beta), bool(trans_a), bool(trans_b), bool(allow_tf32))
    try:
        if _direct(a, b, c):
            return _gemm_impl(*args)
        return torch.ops.warp_gemm.gemm(*args)
    except (TypeError, ValueError) as e:
        raise _renamed(e, "gemm") from None


def matmul(a, b, *, allow_tf32: bool = False) -> torch.Tensor:
    """``a @ b`` with ``torch.matmul``'s semantics (1-D operands, any number of broadcast batch
    dimensions) through the ``warp_gemm::gemm`` operator. 2-D and 3-D operands go to the operator as
    they are; other ranks are presented as 2-D/3-D views (shapes.matmul_shapes: zero-copy where the
    strides allow, else torch copies the broadcast operand) and the result is viewed back. Gradients
    flow through the views, so broadcast dimensions are summed by torch's own expand backward."""
    tf32 = bool(allow_tf32)
    try:
        if a.dim() in (2, 3) and b.dim() in (2, 3):
            if _direct(a, b):
                return _core_gemm(a, b, None, 1.0, 0.0, False, False, None, tf32, "matmul")
            return torch.ops.warp_gemm.gemm(a, b, None, 1.0, 0.0, False, False, tf32)
        from warp_gemm.core.broadcast import matmul_shapes

        plan = matmul_shapes(a.shape, a.stride(), b.shape, b.stride())
        a2 = (a.unsqueeze(0) if a.dim() == 1 else a).expand(plan.a.expand_shape).reshape(plan.a.shape)
        b2 = (b.unsqueeze(-1) if b.dim() == 1 else b).expand(plan.b.expand_shape).reshape(plan.b.shape)
        return torch.ops.warp_gemm.gemm(a2, b2, None, 1.0, 0.0, False, False, tf32).reshape(plan.result_shape)
    except (TypeError, ValueError) as e:
        raise _renamed(e, "matmul") from None


def _exporting() -> bool:
    f = getattr(torch.compiler, "is_exporting", None)  # torch >= 2.6 (?) ; older: never
    return bool(f()) if f is not None else False


def _wants_grad(*ts) -> bool:
    """Whether linear's pre-activation is worth keeping for a backward: autograd will record the call
    and this is not torch.export (an exported program is most often for inference; its backward, if
    run, recomputes the pre-activation)."""
    return (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in ts)
            and not _exporting())


def linear(x, weight, bias=None, *, activation: Optional[str] = None) -> torch.Tensor:
    """``activation(x @ weight.T + bias)`` like ``torch.nn.functional.linear`` followed by the activation
    (None, "relu", "gelu", "gelu_tanh", "silu", "tanh"); ``x`` may have any number of leading dims.
    An unknown activation raises ValueError naming it."""
    act = _act_arg(activation)
    try:
        if _direct(x, weight, bias):
            return _linear_forward(x, weight, bias, act, False)[0]
        y, _ = torch.ops.warp_gemm.linear(x, weight, bias, act, _wants_grad(x, weight, bias))
    except (TypeError, ValueError) as e:
        raise _renamed(e, "linear") from None
    return y
