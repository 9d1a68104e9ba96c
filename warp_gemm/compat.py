"""Drop-ins for ``wp.matmul`` and ``wp.batched_matmul``, which Warp removed in 1.7.

Porting is one import::

    from warp_gemm.compat import matmul, batched_matmul   # was: wp.matmul, wp.batched_matmul

    matmul(a, b, c, d, alpha, beta)          # d = alpha * a @ b + beta * c      (2-D wp.arrays)
    batched_matmul(a, b, c, d, alpha, beta)  # the same per batch entry          (3-D wp.arrays)

The signatures are Warp's (``device`` as in the releases that had it), and so are the semantics:

- ``d = alpha * (a @ b) + beta * c`` written into ``d``; ``a`` ``(M, K)``, ``b`` ``(K, N)``, ``c`` and ``d``
  ``(M, N)`` (with a leading batch dimension of one size for ``batched_matmul``); all four of one dtype
  (float16, float32, float64 as before, bfloat16 too where Warp has it) and on one device. ``a`` and ``b``
  may be transposed views (``a.transpose()``), as before; ``c`` and ``d`` may also be strided.
- ``d`` may be ``c`` itself (``matmul(a, b, c, c, 1.0, 1.0)`` accumulates in place), as with CUTLASS.
- ``wp.Tape``: recorded when a tape is active and an operand has ``requires_grad``; the backward adds
  ``alpha * dD @ b.T`` into ``a.grad``, ``alpha * a.T @ dD`` into ``b.grad`` and ``beta * dD`` into
  ``c.grad`` (accumulating, as Warp's adjoints do). ``d`` must then have ``requires_grad=True``.

Differences, each documented in docs/api.md ("Porting from wp.matmul"):

- ``beta == 0`` does not read ``c`` (BLAS semantics, as the CUDA path did; Warp's CPU path read it, so a
  NaN in ``c`` propagated there).
- ``allow_tf32x3_arith`` is accepted and changes nothing: float32 products are exact float32 (3xTF32
  only approximated that accuracy). For TF32 tensor cores use ``warp_gemm.gemm(..., allow_tf32=True)``.
- Bad arguments raise ``TypeError`` (not arrays, dtypes) or ``ValueError`` (shapes, devices, overlaps)
  naming the function and the parameter, where Warp raised ``RuntimeError``; nothing is written then.
- Where ``d`` is ``c`` and a tape records, ``c.grad`` (the same array as ``d.grad``) ends as
  ``beta * dD``, the gradient of ``c``'s old value (Warp added ``beta * dD`` to ``dD`` itself).
"""

from __future__ import annotations

import warp as wp

from warp_gemm import autograd as _autograd
from warp_gemm.core.execute import run as _core_run

__all__ = ["batched_matmul", "matmul"]


def matmul(a, b, c, d, alpha: float = 1.0, beta: float = 0.0, allow_tf32x3_arith: bool = False, device=None) -> None:
    """``d = alpha * (a @ b) + beta * c`` for 2-D ``wp.array`` operands, written into ``d`` (returns None).

    Args:
        a: ``(M, K)``; b: ``(K, N)``; c: ``(M, N)``; d: ``(M, N)``, the output (may be ``c`` itself).
        alpha, beta: the GEMM's scalars.
        allow_tf32x3_arith: accepted for compatibility; float32 products are exact float32 either way.
        device: where the arrays must be (default: ``a``'s device).
    """
    _run("matmul", 2, a, b, c, d, alpha, beta, allow_tf32x3_arith, device)


def batched_matmul(a, b, c, d, alpha: float = 1.0, beta: float = 0.0, allow_tf32x3_arith: bool = False,
                   device=None) -> None:
    """``d[i] = alpha * (a[i] @ b[i]) + beta * c[i]`` for 3-D ``wp.array`` operands, written into ``d``.

    Args:
        a: ``(batch, M, K)``; b: ``(batch, K, N)``; c, d: ``(batch, M, N)`` (``d`` may be ``c`` itself).
        alpha, beta, allow_tf32x3_arith, device: as :func:`matmul`.
    """
    _run("batched_matmul", 3, a, b, c, d, alpha, beta, allow_tf32x3_arith, device)


def _run(fname: str, ndim: int, a, b, c, d, alpha, beta, allow_tf32x3_arith, device) -> None:
    arrays = (("a", a), ("b", b), ("c", c), ("d", d))
    for name, x in arrays:
        if not isinstance(x, wp.array):
            raise TypeError(f"compat.{fname}: {name} must be a wp.array (as Warp's {fname} took), got "
                            f"{type(x).__module__}.{type(x).__name__}")
    for name, x in arrays:
        if x.ndim != ndim:
            raise ValueError(f"compat.{fname}: {name} has shape {list(x.shape)}; {fname} takes {ndim}-D arrays"
                             + (" (batched_matmul takes the 3-D ones)" if fname == "matmul" and x.ndim == 3 else
                                " (matmul takes the 2-D ones)" if ndim == 3 and x.ndim == 2 else ""))
    if not all(x.dtype == a.dtype for _, x in arrays):
        kinds = ", ".join(f"{name} {getattr(x.dtype, '__name__', x.dtype)}" for name, x in arrays)
        raise TypeError(f"compat.{fname}: a, b, c and d must have one dtype, got {kinds}")
    if not isinstance(allow_tf32x3_arith, (bool, int)):
        raise TypeError(f"compat.{fname}: allow_tf32x3_arith must be True or False, got {type(allow_tf32x3_arith).__name__}")
    dev = a.device if device is None else wp.get_device(device)
    off = [f"{name} on {x.device}" for name, x in arrays if x.device != dev]
    if off:
        raise ValueError(f"compat.{fname}: every array must be on {dev}; " + ", ".join(off))
    m, k = a.shape[-2:]
    n = b.shape[-1]
    lead = tuple(a.shape[:-2])
    want = {"b": lead + (k, n), "c": lead + (m, n), "d": lead + (m, n)}
    bad = [f"{name} {list(x.shape)} (expected {list(want[name])})" for name, x in arrays[1:]
           if tuple(x.shape) != want[name]]
    if bad:
        raise ValueError(f"compat.{fname}: a has shape {list(a.shape)}, so " + ", ".join(bad))
    fn = f"compat.{fname}"  # messages from the GEMM's own checks name this function and a, b, c, d
    if _autograd.needs_grad(a, b, c):
        _autograd.gemm_with_grad(a, b, c, alpha, beta, False, False, d, False, None, fn)
    else:
        _core_run(a, b, c, alpha, beta, False, False, d, False, None, fn)
