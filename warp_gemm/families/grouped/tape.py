"""``wp.Tape`` gradients of :func:`warp_gemm.grouped_matmul` on ``wp.array`` operands.

The forward runs with the tape paused (the grouped kernel is forward-only) and records one backward
function: ``dA_i += dD_i @ B_i^T`` and ``dB_i += A_i^T @ dD_i``, each list one grouped launch into
temporaries of the accumulation dtype, then added into the ``.grad`` arrays (one small launch per array).
As for ``warp_gemm.matmul``, an output's gradient is consumed (zeroed) after use where Warp does so
(``retain_grad``, 1.19+) unless the output retains it.
"""

from __future__ import annotations

import warp as wp

from . import _deps
from .api import LIST_FNAME, grouped_matmul_core

active_tape = _deps.active_tape


def grouped_matmul_tape(tape, list_a, list_b, out, allow_tf32: bool):
    need_a = [isinstance(x, wp.array) and x.requires_grad for x in list_a]
    need_b = [isinstance(x, wp.array) and x.requires_grad for x in list_b]
    if not (any(need_a) or any(need_b)):
        with _deps.tape_paused():
            return grouped_matmul_core(list_a, list_b, out, allow_tf32)
    if out is not None and not all(isinstance(d, wp.array) and d.requires_grad for d in out):
        raise ValueError(f"{LIST_FNAME}: an operand has requires_grad=True and a wp.Tape is recording, but out is "
                         "not a list of wp.arrays with requires_grad=True, so no gradient could flow back through "
                         "it; allocate them with requires_grad=True (or leave out=None)")
    with _deps.tape_paused():
        results = grouped_matmul_core(list_a, list_b, out, allow_tf32, requires_grad=True)
    a, b = list(list_a), list(list_b)

    def backward():
        dev = results[0].device
        with _deps.tape_paused(), wp.ScopedDevice(dev):
            acc = _deps.WP_DTYPES[_deps.acc_dtype_name(_deps.describe(a[0], "a").dtype)]
            grads = [d.grad for d in results]
            ia = [i for i, n in enumerate(need_a) if n and a[i].size]
            ib = [i for i, n in enumerate(need_b) if n and b[i].size]
            if ia:
                tmp = [wp.empty(a[i].shape, dtype=acc, device=dev) for i in ia]
                grouped_matmul_core([_cast(grads[i], a[i].dtype) for i in ia], [b[i].transpose() for i in ia],
                                    tmp, allow_tf32)
                for i, t in zip(ia, tmp):
                    _deps.accumulate(a[i].grad, t)
            if ib:
                tmp = [wp.empty(b[i].shape, dtype=acc, device=dev) for i in ib]
                grouped_matmul_core([a[i].transpose() for i in ib], [_cast(grads[i], b[i].dtype) for i in ib],
                                    tmp, allow_tf32)
                for i, t in zip(ib, tmp):
                    _deps.accumulate(b[i].grad, t)
            if _deps.CONSUMES_OUTPUT_GRAD:
                for d in results:
                    if not getattr(d, "retain_grad", False):
                        d.grad.zero_()

    arrays = [x for x, n in zip(a, need_a) if n] + [x for x, n in zip(b, need_b) if n] + list(results)
    tape.record_func(backward, arrays=arrays)
    return results


def _cast(g, dtype):
    """``g`` in ``dtype`` (a new array when it differs: the products take one dtype)."""
    if g.dtype == dtype:
        return g
    y = wp.empty(g.shape, dtype=dtype, device=g.device)
    name = {v: k for k, v in _deps.WP_DTYPES.items()}
    _deps.convert(y.reshape((1,) + tuple(g.shape)), g.reshape((1,) + tuple(g.shape)), name[dtype], name[g.dtype])
    return y
