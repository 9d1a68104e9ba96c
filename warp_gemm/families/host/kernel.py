"""The host BLAS family: ``D = alpha * A @ B + beta * C`` on the CPU through the BLAS NumPy and torch
already carry (OpenBLAS / MKL / oneDNN), instead of Warp's tile kernels run by one CPU thread.

Why: Warp runs a CPU tile kernel on one thread with a scalar GEMM; on the 2-core test machine fp32
1024^3 ran at 5.9 GFLOP/s against NumPy's 153. This family is the CPU default; the tile kernels stay
selectable (``cpu_backend="tiles"``) as the GPU kernels' CPU twin.

Semantics (the same as the tile kernels'):

- ``A`` (M, K) or (batch, M, K), ``B`` (K, N) or (batch, K, N), already ``op()``-applied views (any
  strides, transposed views included); a batch dimension of size 1 broadcasts. ``D`` is written in
  place and may be any writable view (zero-copy ``wp.array.numpy()``, a NumPy array, a torch CPU
  tensor's ``.numpy()``); it must not overlap ``A``, ``B`` or ``C``.
- ``C`` is ``None`` or broadcasts to ``D``; it is not read when ``beta == 0`` (BLAS: NaN in an unread
  ``C`` does not propagate), and ``A @ B`` is not computed when ``alpha == 0`` or K == 0.
- float16 and bfloat16 inputs accumulate in float32, float64 in float64, float32 in float32; the
  epilogue ``alpha * acc + beta * C`` runs in the accumulator dtype and the result is rounded to the
  output dtype once, as on the GPU.
- bfloat16 has no NumPy dtype: bfloat16 operands and outputs are ``uint16`` arrays of the raw bits
  (what ``wp.array.numpy()`` returns for a bfloat16 array), with ``in_dtype``/``out_dtype``
  ``"bfloat16"``. An ``ml_dtypes.bfloat16`` array is taken as its bits too.

This module imports only NumPy (torch lazily, in :func:`run_torch`), never Warp.
"""

from __future__ import annotations

import math

import numpy as np

#: Calls of :func:`run_numpy` and :func:`run_torch` in this process (a diagnostic: benchmarks and
#: tests use it to see whether ``warp_gemm.matmul`` routed a CPU call here).
calls = {"numpy": 0, "torch": 0}

_NP_DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "bfloat16": np.uint16}


def acc_dtype(in_dtype: str):
    """The NumPy accumulator dtype for an input dtype name: float64 for float64, else float32."""
    return np.float64 if in_dtype == "float64" else np.float32


def dtype_name(x) -> str:
    """The warp_gemm dtype name of a NumPy array (``uint16`` and ``ml_dtypes.bfloat16`` are bfloat16)."""
    name = np.dtype(x.dtype).name
    if name in ("uint16", "bfloat16"):
        return "bfloat16"
    if name in ("float16", "float32", "float64"):
        return name
    raise TypeError(f"host GEMM: unsupported dtype {name}")


# --- bfloat16 bits -----------------------------------------------------------------------------------
def _as_bits(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.uint16:
        if x.dtype.name == "bfloat16" and x.dtype.itemsize == 2:  # ml_dtypes.bfloat16
            return x.view(np.uint16)
        raise TypeError(f"bfloat16 data must be given as uint16 bit patterns, got {x.dtype}")
    return x


def bf16_bits_to_f32(u16) -> np.ndarray:
    """float32 values of bfloat16 bit patterns (``uint16``), exact; the memory layout (C, Fortran or a
    transposed view's) is kept, so a transposed operand stays a BLAS-ready transposed operand."""
    u = _as_bits(u16)
    w = u.astype(np.uint32)  # order="K": same layout as u
    w <<= 16
    return w.view(np.float32)


def f32_to_bf16_bits(f32) -> np.ndarray:
    """bfloat16 bit patterns (``uint16``) of float32 values, rounded to nearest even; overflow rounds to
    +-inf, NaN stays NaN (sign and leading payload kept, quiet bit set)."""
    f = np.asarray(f32, dtype=np.float32)
    u = f.view(np.uint32) if f.ndim else f.reshape(1).view(np.uint32)
    r = u >> 16
    r &= 1
    r += u  # no overflow for non-NaN values: the largest is 0xFF800000 (-inf) + 1
    r += 0x7FFF
    r >>= 16
    out = r.astype(np.uint16)
    nan = np.isnan(f.reshape(u.shape))
    if nan.any():
        out[nan] = ((u[nan] >> 16) | 0x0040).astype(np.uint16)
    return out if f.ndim else out.reshape(())


# --- NumPy ---------------------------------------------------------------------------------------------
def _blas_ready(x: np.ndarray) -> bool:
    """Whether NumPy's matmul hands the last two dimensions of ``x`` to BLAS as they are (its
    ``is_blasable2d`` test: unit stride along one of them, a whole-element stride along the other at
    least as long as the rows). Anything else takes NumPy's scalar loop (numpy/_core/src/umath/
    matmul.c.src), so such operands are copied first."""
    if x.ndim < 2:
        return True
    it = x.itemsize
    (s0, s1), (n0, n1) = x.strides[-2:], x.shape[-2:]

    def ok(lead, unit, width):
        return unit == it and lead % it == 0 and width <= lead // it < 2**31 - 1

    return ok(s0, s1, n1) or ok(s1, s0, n0)


def _mm_shape(sa, sb) -> tuple:
    """Shape of ``np.matmul`` of operands of shapes ``sa`` and ``sb`` (2-D/3-D, batch 1 broadcasts;
    plain Python: np/torch.broadcast_shapes cost ~3-15 us per call)."""
    if len(sa) == 2 and len(sb) == 2:
        return (sa[0], sb[1])
    na = sa[0] if len(sa) == 3 else 1
    nb = sb[0] if len(sb) == 3 else 1
    return (nb if na == 1 else na, sa[-2], sb[-1])


def _operand(x, dtype: str, acc) -> np.ndarray:
    """``x`` as a BLAS-ready array of the accumulator dtype: 16-bit data widened (layout kept), same-dtype
    data as is when BLAS can read it, else one contiguous copy."""
    if dtype == "bfloat16":
        x = bf16_bits_to_f32(x)
    else:
        x = np.asarray(x)
        if x.dtype != acc:
            x = x.astype(acc)  # order="K"
    return x if _blas_ready(x) else np.ascontiguousarray(x)


def _c_values(C, out_dtype: str, acc) -> np.ndarray:
    if out_dtype == "bfloat16":
        return bf16_bits_to_f32(C)
    C = np.asarray(C)
    return C if C.dtype == acc else C.astype(acc)


def _store(D: np.ndarray, T: np.ndarray, out_dtype: str) -> None:
    """``D[...] = T`` rounded once to the output dtype (``T`` broadcasts)."""
    if out_dtype == "bfloat16":
        D[...] = f32_to_bf16_bits(T.astype(np.float32, copy=False))
    else:
        np.copyto(D, T, casting="unsafe")


def run_numpy(A, B, C, D, alpha=1.0, beta=0.0, in_dtype: str | None = None, out_dtype: str | None = None):
    """``D[...] = alpha * A @ B + beta * C`` with NumPy's BLAS, written into ``D`` in place; returns ``D``.

    ``A``, ``B``: NumPy arrays (2-D or 3-D, any strides; batch 1 broadcasts) of ``in_dtype``
    (``"float16"``, ``"bfloat16"`` as uint16 bits, ``"float32"``, ``"float64"``; default: from ``A``).
    ``C``: ``None`` or an array of ``out_dtype`` broadcastable to ``D``. ``D``: writable NumPy array of
    the result's shape and ``out_dtype`` (default: from ``D``), not overlapping the operands.

    float32/float64 in and out with alpha 1 and no C: one ``np.matmul(A, B, out=D)``, no temporary,
    when ``D`` is BLAS-ready (row- or column-major rows); alpha and beta then cost one in-place pass
    each (plus a ``beta * C`` temporary when beta is not 1). Other output dtypes or layouts: one
    accumulator-dtype temporary and one rounding store.
    """
    calls["numpy"] += 1
    D = np.asarray(D)
    in_dtype = in_dtype or dtype_name(np.asarray(A))
    out_dtype = out_dtype or dtype_name(D)
    alpha = float(alpha)
    beta = float(beta)
    if D.size == 0:
        return D
    acc = acc_dtype(in_dtype)
    use_c = C is not None and beta != 0.0
    A_ = np.asarray(A)
    B_ = np.asarray(B)
    K = A_.shape[-1]
    if B_.shape[-2] != K:
        raise ValueError(f"host GEMM: inner dimensions differ ({A_.shape} @ {B_.shape})")

    if alpha == 0.0 or K == 0:  # no product: D = beta * C, or zeros
        if use_c:
            c = _c_values(C, out_dtype, acc)
            _store(D, c * acc(beta) if beta != 1.0 else c, out_dtype)
        else:
            D[...] = 0
        return D

    a = _operand(A_, in_dtype, acc)
    b = _operand(B_, in_dtype, acc)
    mm_shape = _mm_shape(a.shape, b.shape)
    if D.dtype == acc and D.size == math.prod(mm_shape) and _blas_ready(D):
        out = D if D.shape == mm_shape else D.reshape(mm_shape)  # (M, N) <-> (1, M, N)
        if not np.may_share_memory(out, D):  # reshape had to copy: cannot write through it
            out = None
    else:
        out = None
    T = np.matmul(a, b, out=out) if out is not None else np.matmul(a, b)
    if alpha != 1.0:
        np.multiply(T, acc(alpha), out=T)
    if use_c:
        c = _c_values(C, out_dtype, acc)
        if beta == 1.0:
            np.add(T, c, out=T)
        else:
            np.add(T, c * acc(beta), out=T)
    if out is None:
        # (1, M, N) <-> (M, N) by reshape; a smaller product (batch 1 into a batched D) broadcasts
        _store(D, T.reshape(D.shape) if T.shape != D.shape and T.size == D.size else T, out_dtype)
    return D


# --- torch -----------------------------------------------------------------------------------------------
_onednn: dict = {}


def _onednn_16bit(torch, dtype) -> bool:
    """Whether torch's oneDNN has a native GEMM for this 16-bit dtype on this CPU (AVX512-BF16/AMX,
    AVX512-FP16). Without it torch's fallback 16-bit GEMM is slower than widening to sgemm."""
    if dtype not in _onednn:
        try:
            probe = (torch.ops.mkldnn._is_mkldnn_bf16_supported if dtype == torch.bfloat16
                     else torch.ops.mkldnn._is_mkldnn_fp16_supported)
            _onednn[dtype] = bool(torch.backends.mkldnn.is_available() and probe())
        except (AttributeError, RuntimeError):
            _onednn[dtype] = False
    return _onednn[dtype]


def _t_mm_shape(torch, a, b) -> tuple:
    return _mm_shape(tuple(a.shape), tuple(b.shape))


def run_torch(A, B, C, D, alpha=1.0, beta=0.0):
    """``D[...] = alpha * A @ B + beta * C`` for torch CPU tensors, through torch's BLAS, in place; returns
    ``D``. Same semantics as :func:`run_numpy` (dtypes from the tensors; ``C`` has ``D``'s dtype).

    float16/bfloat16: with a 16-bit result, alpha 1 and no C, and where torch's oneDNN has a native
    16-bit GEMM on this CPU, torch's own 16-bit GEMM (it accumulates in float32 and rounds once; on the
    2-core AMX test machine bf16 1024^3 ran at 1282 GFLOP/s against 225 widened, fp16 at 334 against
    215). Otherwise the inputs are widened to float32 first: torch rounds its 16-bit GEMM result to 16
    bit before an alpha/beta epilogue, and warp_gemm rounds once, after it.
    Runs under ``torch.no_grad()``: gradients are warp_gemm's autograd layer's business.
    """
    import torch

    calls["torch"] += 1
    alpha = float(alpha)
    beta = float(beta)
    with torch.no_grad():
        if D.numel() == 0:
            return D
        acc = torch.float64 if A.dtype == torch.float64 else torch.float32
        use_c = C is not None and beta != 0.0
        K = A.shape[-1]
        if alpha == 0.0 or K == 0:
            if use_c:
                D.copy_(C.to(acc) * beta if beta != 1.0 else C)
            else:
                D.zero_()
            return D
        if (A.dtype != acc and D.dtype == A.dtype and alpha == 1.0 and not use_c
                and _onednn_16bit(torch, A.dtype) and tuple(D.shape) == tuple(_t_mm_shape(torch, A, B))):
            # 16-bit in and out, no epilogue: torch's own 16-bit GEMM accumulates in float32 and rounds
            # once, like the GPU, and uses AMX/AVX512-FP16 where the CPU has them.
            if D.is_contiguous():
                torch.matmul(A, B, out=D)
            else:
                D.copy_(torch.matmul(A, B).reshape(D.shape))
            return D
        a = A if A.dtype == acc else A.to(acc)
        b = B if B.dtype == acc else B.to(acc)
        c = C.to(acc) if use_c else None
        mm_shape = _t_mm_shape(torch, a, b)
        direct = D.dtype == acc and D.is_contiguous() and tuple(D.shape) == mm_shape
        if direct and a.dim() == 2 and b.dim() == 2 and use_c:
            torch.addmm(c, a, b, beta=beta, alpha=alpha, out=D)
            return D
        if direct:
            T = torch.matmul(a, b, out=D)
        else:
            T = torch.matmul(a, b)
        if alpha != 1.0:
            T.mul_(alpha)
        if use_c:
            T.add_(c, alpha=beta)
        if not direct:
            D.copy_(T.reshape(D.shape) if T.numel() == D.numel() else T)
        return D
