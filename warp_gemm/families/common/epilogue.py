"""Activations for fused GEMM epilogues, their derivatives, float64 references and elementwise kernels.

Names: ``None`` (identity), ``"relu"``, ``"gelu"`` (erf form, ``torch.nn.functional.gelu``),
``"gelu_tanh"`` (``gelu(..., approximate="tanh")``), ``"silu"``, ``"tanh"``.

For each name:

- ``activation_func(name, dtype)``: a ``@wp.func`` ``f(x) -> same type``, usable in
  ``wp.tile_map(f, tile)`` on float32 and float64 tiles (the GEMM accumulator) and on scalars in
  ordinary kernels. With ``dtype`` (``wp.float32``/``wp.float64``) it is a function of that concrete
  type, which compiles in ``tile_map`` on every supported Warp; with ``dtype=None`` it is one generic
  ``x: Any`` function, which warp-lang 1.12 and 1.19 compile in ``tile_map`` and 1.7 does not.
  Kernels should pass their accumulator dtype.
- ``activation_grad_func(name, dtype)``: ``f'(z)`` of the *pre-activation* ``z`` (so a backward pass
  needs only ``z``): ``dL/dz = dL/dy * f'(z)``.
- ``reference(name, z)`` / ``reference_grad(name, z)``: numpy float64 (or torch, for a torch tensor in
  its own dtype -- pass float64) implementations for tests.

Derivative conventions match torch's autograd: relu'(0) = 0 (torch: ``grad * (y > 0)``).

Standalone elementwise kernels over 3-D Warp arrays (until the fused epilogue lands, and for the
backward pass): ``apply_activation(dst, src, name)`` writes ``f(src)`` into ``dst`` and
``activation_backward(grad_z, grad_y, z, name)`` writes ``grad_y * f'(z)`` into ``grad_z``. Arrays of
float16/bfloat16/float32 compute in float32, float64 in float64; ``dst`` may be ``src`` (in place).

Warp notes: ``wp.tile_map`` accepts user ``@wp.func`` functions on every release warp_gemm supports
(checked on 1.7.2, 1.12.1, 1.19.0 on the CPU). ``wp.erf`` arrived after 1.7 (``HAS_ERF``); without it
gelu uses a series / continued-fraction erf written here (accurate to a few ulps in float64).
"""

# No `from __future__ import annotations`: Warp reads annotations as objects.
import math
import threading
from typing import Any

import warp as wp

from ... import _compat
from .kernels import WP_DTYPES, acc_dtype_name

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "tanh")

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)  # 0.7978845608028654
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)  # 0.7071067811865476
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)  # 0.3989422804014327
_GELU_C = 0.044715


def check_activation(name):
    """``name`` if it is None or one of :data:`ACTIVATIONS`; ``ValueError`` naming it otherwise."""
    if name is None or (isinstance(name, str) and name in ACTIVATIONS):
        return name
    valid = ", ".join(["None"] + [repr(a) for a in ACTIVATIONS])
    raise ValueError(f"unknown activation {name!r}; valid activations: {valid}")


# --- the Warp functions, one concrete set per dtype --------------------------------------------------------
# Constants of the functions below, as float64 module globals (see _build).
_K_INV_SQRT2 = wp.float64(1.0 / math.sqrt(2.0))
_K_SQRT_2_OVER_PI = wp.float64(_SQRT_2_OVER_PI)
_K_GELU_C = wp.float64(_GELU_C)
_K_GELU_3C = wp.float64(3.0 * _GELU_C)
_K_INV_SQRT_2PI = wp.float64(_INV_SQRT_2PI)
_K_TWO_OVER_SQRT_PI = wp.float64(2.0 / math.sqrt(math.pi))
_K_SQRT_PI = wp.float64(math.sqrt(math.pi))

#: 1.8+ (present in 1.12, absent in 1.7): the ``wp.erf`` builtin; older releases get erf_series below.
HAS_ERF = hasattr(wp, "erf")


def _build(T):
    """The forward and derivative functions of every activation with parameters annotated ``T``: a
    concrete float type, or ``typing.Any`` for generic functions (the bodies use only ``type(x)``).

    ``wp.tile_map`` on warp-lang 1.7 does not resolve a generic user function (its code refers to
    ``wp::Any`` and fails to compile); 1.12 and 1.19 accept both. Constants that are not exact in
    float32 are module-level ``wp.float64`` values converted with ``type(x)(...)``: on warp-lang 1.7 a float literal inside a function (``T(0.7071067811865476)``) and
    a value captured from this closure are both rounded to float32 first (float64 gelu then lost
    8e-8); a module global keeps every bit on 1.7 and 1.19."""

    if HAS_ERF:
        @wp.func
        def erf_(x: T):
            return wp.erf(x)
    else:
        @wp.func
        def erf_(x: T):
            # |x| < 2.5: erf(y) = 2/sqrt(pi) exp(-y^2) sum_n (2y^2)^n y / (1*3*...*(2n+1)) (positive terms);
            # else 1 - erfc(y), erfc by its continued fraction (40 terms): relative error of erfc
            # <= 6e-14 (float64), set by exp(-y^2); erf's error a few ulps.
            y = wp.abs(x)
            r = type(x)(0.0)
            if y < type(x)(2.5):
                t = y
                acc = y
                y2 = type(x)(2.0) * y * y
                for n in range(1, 128):
                    t = t * y2 / type(x)(2 * n + 1)
                    acc = acc + t
                    if t < acc * type(x)(1.0e-17):
                        break
                r = type(x)(_K_TWO_OVER_SQRT_PI) * wp.exp(-y * y) * acc
            else:
                f = y
                for k in range(40, 0, -1):
                    f = y + type(x)(0.5) * type(x)(k) / f
                r = type(x)(1.0) - wp.exp(-y * y) / (type(x)(_K_SQRT_PI) * f)
            if x < type(x)(0.0):
                r = -r
            return r

    @wp.func
    def act_identity(x: T):
        return x

    @wp.func
    def act_relu(x: T):
        return wp.max(x, type(x)(0.0))

    @wp.func
    def act_gelu(x: T):
        # 0.5 * x * (1 + erf(x / sqrt(2)))
        return type(x)(0.5) * x * (type(x)(1.0) + erf_(x * type(x)(_K_INV_SQRT2)))

    @wp.func
    def act_gelu_tanh(x: T):
        # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        u = type(x)(_K_SQRT_2_OVER_PI) * (x + type(x)(_K_GELU_C) * x * x * x)
        return type(x)(0.5) * x * (type(x)(1.0) + wp.tanh(u))

    @wp.func
    def act_silu(x: T):
        # x * sigmoid(x); exp(-x) overflows to inf for very negative x, giving -0 (the limit), not NaN. A reciprocal
        # and a product rather than a division: the fused suite's persistent silu kernel (tn=128) 121 -> 116 registers
        # (ptxas 13.0, sm_90a, offline build).
        return x * (type(x)(1.0) / (type(x)(1.0) + wp.exp(-x)))

    @wp.func
    def act_tanh(x: T):
        return wp.tanh(x)

    # derivatives, as functions of the pre-activation z
    @wp.func
    def grad_identity(z: T):
        return type(z)(1.0)

    @wp.func
    def grad_relu(z: T):
        if z > type(z)(0.0):
            return type(z)(1.0)
        return type(z)(0.0)

    @wp.func
    def grad_gelu(z: T):
        # Phi(z) + z * phi(z)
        cdf = type(z)(0.5) * (type(z)(1.0) + erf_(z * type(z)(_K_INV_SQRT2)))
        pdf = type(z)(_K_INV_SQRT_2PI) * wp.exp(type(z)(-0.5) * z * z)
        return cdf + z * pdf

    @wp.func
    def grad_gelu_tanh(z: T):
        u = type(z)(_K_SQRT_2_OVER_PI) * (z + type(z)(_K_GELU_C) * z * z * z)
        t = wp.tanh(u)
        du = type(z)(_K_SQRT_2_OVER_PI) * (type(z)(1.0) + type(z)(_K_GELU_3C) * z * z)  # 3 * 0.044715
        return type(z)(0.5) * (type(z)(1.0) + t) + type(z)(0.5) * z * (type(z)(1.0) - t * t) * du

    @wp.func
    def grad_silu(z: T):
        s = type(z)(1.0) / (type(z)(1.0) + wp.exp(-z))
        return s * (type(z)(1.0) + z * (type(z)(1.0) - s))

    @wp.func
    def grad_tanh(z: T):
        t = wp.tanh(z)
        return type(z)(1.0) - t * t

    fwd = {None: act_identity, "relu": act_relu, "gelu": act_gelu, "gelu_tanh": act_gelu_tanh,
           "silu": act_silu, "tanh": act_tanh}
    grad = {None: grad_identity, "relu": grad_relu, "gelu": grad_gelu, "gelu_tanh": grad_gelu_tanh,
            "silu": grad_silu, "tanh": grad_tanh}
    return fwd, grad


_FLOAT_TYPES = {"float32": wp.float32, "float64": wp.float64}
_funcs = {}
_funcs_lock = threading.Lock()


def _float_type(dtype):
    if isinstance(dtype, str):
        if dtype not in _FLOAT_TYPES:
            raise TypeError(f"activation functions exist for float32 and float64 (the accumulators), not {dtype}")
        return _FLOAT_TYPES[dtype]
    for t in _FLOAT_TYPES.values():
        if dtype is t:
            return t
    raise TypeError(f"activation functions exist for wp.float32 and wp.float64 (the accumulators), not {dtype}")


def _sets(dtype):
    T = Any if dtype is None else _float_type(dtype)
    with _funcs_lock:
        if T not in _funcs:
            _funcs[T] = _build(T)
        return _funcs[T]


def activation_func(name, dtype=None):
    """The ``@wp.func`` ``f(x)`` of activation ``name`` (identity for None). ``dtype`` (wp.float32 /
    wp.float64 or their names): a function of that concrete type, for ``wp.tile_map`` on a tile of that
    dtype on every supported Warp; None: one generic function (``x: Any``), which ``wp.tile_map``
    compiles on warp-lang 1.12 and 1.19 but not on 1.7."""
    return _sets(dtype)[0][check_activation(name)]


def activation_grad_func(name, dtype=None):
    """The ``@wp.func`` ``f'(z)`` of activation ``name`` (1 for None), as a function of the
    pre-activation ``z``; ``dtype`` as for :func:`activation_func`."""
    return _sets(dtype)[1][check_activation(name)]


# --- float64 references --------------------------------------------------------------------------------
def _is_torch(z) -> bool:
    return type(z).__module__.startswith("torch")


def reference(name, z):
    """``f(z)`` in float64 numpy (numpy/scalar input) or in torch (tensor input, its own dtype)."""
    name = check_activation(name)
    if _is_torch(z):
        import torch

        F = torch.nn.functional
        return {None: lambda t: t.clone(), "relu": torch.relu, "gelu": F.gelu,
                "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
                "tanh": torch.tanh}[name](z)
    import numpy as np

    z = np.asarray(z, dtype=np.float64)
    if name is None:
        return z.copy()
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "gelu":
        return 0.5 * z * (1.0 + _erf(z * _INV_SQRT_2))
    if name == "gelu_tanh":
        return 0.5 * z * (1.0 + np.tanh(_SQRT_2_OVER_PI * (z + _GELU_C * z ** 3)))
    if name == "silu":
        return z * _sigmoid(z)
    return np.tanh(z)


def reference_grad(name, z):
    """``f'(z)`` in float64 numpy (numpy/scalar input) or in torch (tensor input, its own dtype)."""
    name = check_activation(name)
    if _is_torch(z):
        import torch

        if name is None:
            return torch.ones_like(z)
        if name == "relu":
            return (z > 0).to(z.dtype)
        if name == "gelu":
            return 0.5 * (1.0 + torch.erf(z * _INV_SQRT_2)) + z * _INV_SQRT_2PI * torch.exp(-0.5 * z * z)
        if name == "gelu_tanh":
            t = torch.tanh(_SQRT_2_OVER_PI * (z + _GELU_C * z ** 3))
            return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * _GELU_C * z * z)
        if name == "silu":
            s = torch.sigmoid(z)
            return s * (1.0 + z * (1.0 - s))
        return 1.0 - torch.tanh(z) ** 2
    import numpy as np

    z = np.asarray(z, dtype=np.float64)
    if name is None:
        return np.ones_like(z)
    if name == "relu":
        return (z > 0).astype(np.float64)
    if name == "gelu":
        return 0.5 * (1.0 + _erf(z * _INV_SQRT_2)) + z * _INV_SQRT_2PI * np.exp(-0.5 * z * z)
    if name == "gelu_tanh":
        t = np.tanh(_SQRT_2_OVER_PI * (z + _GELU_C * z ** 3))
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3 * _GELU_C * z * z)
    if name == "silu":
        s = _sigmoid(z)
        return s * (1.0 + z * (1.0 - s))
    return 1.0 - np.tanh(z) ** 2


def _sigmoid(z):
    import numpy as np

    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-z))


def _erf(z):
    import numpy as np

    return np.vectorize(math.erf, otypes=[np.float64])(z) if np.ndim(z) else np.float64(math.erf(float(z)))


# --- elementwise kernels ---------------------------------------------------------------------------------
_lock = threading.Lock()
_kernels = {}


def forward_kernel(name, dst_dtype: str, src_dtype: str):
    """The elementwise kernel ``dst[i, j, k] = act(src[i, j, k])`` over 3-D arrays (for launchers that
    record their launches, e.g. core.launches)."""
    return _forward_kernel(name, dst_dtype, src_dtype)


def _forward_kernel(name, dst_dtype: str, src_dtype: str):
    key = ("fwd", name, dst_dtype, src_dtype)
    with _lock:
        k = _kernels.get(key)
        if k is None:
            DST = WP_DTYPES[dst_dtype]
            SRC = WP_DTYPES[src_dtype]
            ACC = WP_DTYPES[acc_dtype_name(src_dtype)]
            f = activation_func(name, ACC)

            def act_kernel(dst: wp.array3d(dtype=DST), src: wp.array3d(dtype=SRC)):
                i, j, k = wp.tid()
                dst[i, j, k] = DST(f(ACC(src[i, j, k])))

            k = _compat.make_kernel(act_kernel, f"wg_act_{name or 'identity'}_{dst_dtype}_{src_dtype}")
            _kernels[key] = k
        return k


def _backward_kernel(name, dtype: str):
    key = ("bwd", name, dtype)
    with _lock:
        k = _kernels.get(key)
        if k is None:
            T = WP_DTYPES[dtype]
            ACC = WP_DTYPES[acc_dtype_name(dtype)]
            g = activation_grad_func(name, ACC)

            def act_grad_kernel(grad_z: wp.array3d(dtype=T), grad_y: wp.array3d(dtype=T), z: wp.array3d(dtype=T)):
                i, j, k = wp.tid()
                grad_z[i, j, k] = T(ACC(grad_y[i, j, k]) * g(ACC(z[i, j, k])))

            k = _compat.make_kernel(act_grad_kernel, f"wg_act_grad_{name or 'identity'}_{dtype}")
            _kernels[key] = k
        return k


def _dtype_name(arr) -> str:
    for n, t in WP_DTYPES.items():
        if arr.dtype == t:
            return n
    raise TypeError(f"unsupported dtype {arr.dtype}; expected one of {sorted(WP_DTYPES)}")


def _check3d(arrs, names):
    shape = tuple(arrs[0].shape)
    for a, n in zip(arrs, names):
        if a.ndim != 3:
            raise ValueError(f"{n} must be a 3-D Warp array, got shape {list(a.shape)}")
        if tuple(a.shape) != shape:
            raise ValueError(f"{n} has shape {list(a.shape)}; expected {list(shape)}")
        if str(a.device) != str(arrs[0].device):
            raise ValueError(f"{n} is on {a.device}; expected {arrs[0].device}")
    return shape


def apply_activation(dst, src, name, stream=None):
    """``dst = f(src)`` elementwise over 3-D Warp arrays of the same shape (``dst`` may be ``src``).
    Launches on ``stream`` if given, else on the device's current stream."""
    name = check_activation(name)
    shape = _check3d([dst, src], ["dst", "src"])
    if 0 in shape:
        return dst
    k = _forward_kernel(name, _dtype_name(dst), _dtype_name(src))
    wp.launch(k, dim=shape, inputs=[dst, src], device=src.device, stream=stream)
    return dst


def activation_backward(grad_z, grad_y, z, name, stream=None):
    """``grad_z = grad_y * f'(z)`` elementwise over 3-D Warp arrays of one shape and dtype
    (``grad_z`` may be ``grad_y``)."""
    name = check_activation(name)
    shape = _check3d([grad_z, grad_y, z], ["grad_z", "grad_y", "z"])
    dts = {_dtype_name(a) for a in (grad_z, grad_y, z)}
    if len(dts) != 1:
        raise TypeError(f"grad_z, grad_y and z must share one dtype, got {sorted(dts)}")
    if 0 in shape:
        return grad_z
    k = _backward_kernel(name, dts.pop())
    wp.launch(k, dim=shape, inputs=[grad_z, grad_y, z], device=z.device, stream=stream)
    return grad_z
