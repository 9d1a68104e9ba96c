"""Host family: one product on the CPU's BLAS over zero-copy views of the operands, kept by the fast path."""

from __future__ import annotations

import numpy as np
import warp as wp

from ...core.operands import ITEMSIZE, Operand
from ...core.operands import data_ptr as _ptr
from ...core.problem import Problem
from ..common import epilogue


class _HostCall:
    """One product on the CPU's BLAS (families/host/) on zero-copy views of the operands' memory: torch's
    for all-torch calls, NumPy's otherwise (bfloat16 as its raw bits); the problem's own orientation (no
    layout swap: BLAS takes any strides). Kept by the fast path like a call's launches: the views of A,
    B and C are non-owning (``_np_raw``), valid for any later call whose operands have the same
    signature (same memory, shapes, strides, dtypes); the output is viewed per call."""

    __slots__ = ("torch", "A", "B", "C", "D", "alpha", "beta", "in_dtype", "out_dtype", "activation")

    def __init__(self, p: Problem, alpha: float, beta: float, activation):
        ops = (p.A, p.B, p.C)
        self.torch = all(op is None or op.kind == "torch" for op in (*ops, p.D))
        self.A, self.B, self.C = ((None if op is None else (op.shape, op.strides) if self.torch else _np_raw(op))
                                  for op in ops)
        self.D = (p.D.shape, p.D.strides)
        self.alpha, self.beta, self.activation = alpha, beta, activation
        self.in_dtype, self.out_dtype = p.in_dtype, p.out_dtype

    def run(self, a, b, c, out) -> None:
        """The product of this call's operand objects into ``out`` (their memory is what the views
        describe: the fast path's key guarantees it)."""
        from warp_gemm.families import host

        if self.torch:
            A, B, C, D = (None if x is None else x.as_strided(*v) for x, v in ((a, self.A), (b, self.B), (c, self.C),
                                                                               (out, self.D)))
            host.run_torch(A, B, C, D, self.alpha, self.beta)
            if self.activation is not None:
                D.copy_(epilogue.reference(self.activation, D.double()))
            return
        D = _np_out(out, self.D, self.out_dtype)
        host.run_numpy(self.A, self.B, self.C, D, self.alpha, self.beta, self.in_dtype, self.out_dtype)
        _host_activation(D, self.activation, self.out_dtype)


def _np_out(obj, d, dtype: str):
    """A NumPy view of the output object ``obj`` with D's shape and element strides ``d``."""
    shape, strides = d
    if type(obj) is np.ndarray:
        base = obj
    elif dtype != "bfloat16" and type(obj) is wp.array:
        base = obj.numpy()
    else:
        base = None
    item = ITEMSIZE[dtype]
    if base is not None and base.shape == shape and tuple(x // item for x in base.strides) == strides:
        return base
    return _np_raw(Operand("numpy", None, dtype, shape, strides, _ptr(obj), None))


def _host_activation(D, activation, out_dtype: str) -> None:
    """The activation over the NumPy result ``D``: float64 formulas on the CPU, rounded once."""
    from warp_gemm.families import host

    if activation is None:
        return
    if out_dtype == "bfloat16":
        D[...] = host.f32_to_bf16_bits(epilogue.reference(activation, host.bf16_bits_to_f32(D).astype("float64")))
    else:
        D[...] = epilogue.reference(activation, D.astype("float64"))


def _np_raw(op: Operand):
    """A non-owning NumPy array over ``op``'s CPU memory (shape and strides as described)."""
    import ctypes

    dt = np.uint16 if op.dtype == "bfloat16" else np.dtype(op.dtype)
    if op.size == 0:
        return np.empty(op.shape, dt)
    lo, hi = op.span()
    buf = (ctypes.c_char * (hi - lo)).from_address(lo)
    return np.ndarray(op.shape, dt, buffer=buf, strides=tuple(s * ITEMSIZE[op.dtype] for s in op.strides))


