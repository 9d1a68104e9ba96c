"""Reference GEMMs that warp_gemm is checked against.

Two paths:

- :func:`float64_gemm` / :func:`float64_matmul`: the ground truth, computed with NumPy in float64 from
  whatever operands it is given (NumPy arrays, torch tensors, wp.arrays, anything with ``.numpy()``).
- :func:`triton_gemm` / :func:`triton_matmul`: an independent GPU implementation written in Triton after
  Triton's matrix-multiplication tutorial (2-D blocks of the result, a K loop, grouped program order for
  L2 reuse, ``triton.autotune`` over the tutorial's configurations), extended with masks on every edge,
  arbitrary strides (transposed operands without copies), an ``alpha * A @ B + beta * C`` epilogue and a
  batch grid axis. It works on torch tensors on CUDA, or on CPU under Triton's interpreter.

Triton is imported lazily, inside functions only, so ``import warp_gemm.reference`` works without it.

The interpreter: Triton decides whether a kernel is compiled or interpreted from the environment variable
``TRITON_INTERPRET`` when the kernel is decorated, and our kernels are decorated on first use. Set
``TRITON_INTERPRET=1`` *before triton is imported* (before the first ``import triton`` anywhere in the
process) to run :func:`triton_gemm` on CPU tensors; :func:`enable_interpreter` does that when it still can.
:func:`triton_available` says whether the Triton path can run on a device and, if not, why.

Semantics shared by both paths (BLAS-like, torch.matmul batching)::

    D = alpha * op(A) @ op(B) + beta * C      op(X) = X.mT if trans_x else X

- ``op(A)`` is ``(M, K)`` or ``(batch, M, K)``; ``op(B)`` is ``(K, N)`` or ``(batch, K, N)``. Batch
  dimensions broadcast like torch.matmul: a 2-D operand, or a batch of 1, is reused for every batch entry.
- ``C`` is broadcast to the result shape ``(M, N)`` / ``(batch, M, N)``. When ``beta == 0`` (or ``C`` is
  None) ``C`` is not read at all, so NaN/Inf in it do not propagate (the BLAS convention).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import numpy as np

# Dtypes the Triton path takes; float64 only where tl.dot supports it (checked at launch).
TRITON_DTYPES = ("float16", "bfloat16", "float32", "float64")
# The interpreter's one block edge (M, N and K): small, so CPU runs stay fast.
_INTERPRETER_BLOCK = 32


# --------------------------------------------------------------------------------------------------
# float64 ground truth
# --------------------------------------------------------------------------------------------------


def to_float64(x: Any) -> np.ndarray:
    """``x`` as a float64 NumPy array (a copy or a view).

    Takes NumPy arrays, torch tensors (any device, bfloat16 included), wp.arrays (bfloat16 ones are
    returned by Warp as raw uint16 bits and decoded here) and anything else with ``.numpy()``.
    """
    if isinstance(x, np.ndarray):
        return x.astype(np.float64, copy=False)
    mod = type(x).__module__
    if mod.startswith("torch"):
        # .numpy() refuses bfloat16 and CUDA tensors: convert on the torch side first.
        import torch

        return x.detach().to(device="cpu", dtype=torch.float64).numpy()
    if mod.startswith("warp") and hasattr(x, "numpy"):
        import warp as wp

        arr = x.numpy()
        if getattr(wp, "bfloat16", None) is not None and x.dtype == wp.bfloat16:
            from warp_gemm.tools.tolerance import bf16_bits_to_f64

            return bf16_bits_to_f64(arr)
        return arr.astype(np.float64, copy=False)
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy(), dtype=np.float64)
    return np.asarray(x, dtype=np.float64)


def _result_shape(sa: tuple[int, ...], sb: tuple[int, ...], what: str) -> tuple[int, ...]:
    """torch.matmul's result shape for op(A) of shape ``sa`` and op(B) of shape ``sb`` (2-D or 3-D)."""
    if len(sa) not in (2, 3) or len(sb) not in (2, 3):
        raise ValueError(f"{what}: operands must be 2-D or 3-D, got op(A) {sa} and op(B) {sb}")
    if sa[-1] != sb[-2]:
        raise ValueError(f"{what}: inner dimensions differ: op(A) {sa} has K={sa[-1]}, "
                         f"op(B) {sb} has K={sb[-2]}")
    ba = sa[0] if len(sa) == 3 else None
    bb = sb[0] if len(sb) == 3 else None
    if ba is not None and bb is not None and ba != bb and 1 not in (ba, bb):
        raise ValueError(f"{what}: batch dimensions {ba} and {bb} do not broadcast (op(A) {sa}, op(B) {sb})")
    batch = () if ba is None and bb is None else (max(b for b in (ba, bb) if b is not None),)
    if ba == 0 or bb == 0:
        batch = (0,)
    return batch + (sa[-2], sb[-1])


def float64_gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
                 trans_b: bool = False) -> np.ndarray:
    """``alpha * op(A) @ op(B) + beta * C`` in float64 with NumPy (the ground truth).

    ``a``: ``(M, K)``/``(batch, M, K)`` (``(K, M)``/``(batch, K, M)`` with ``trans_a``); ``b``: ``(K, N)``/
    ``(batch, K, N)`` (``(N, K)``/... with ``trans_b``); ``c``: anything that broadcasts to the result
    ``(M, N)``/``(batch, M, N)``. Returns a float64 array of the result shape.
    """
    fa, fb = to_float64(a), to_float64(b)
    if fa.ndim < 2 or fb.ndim < 2:
        raise ValueError(f"float64_gemm: operands must be 2-D or 3-D, got A {fa.shape} and B {fb.shape}")
    if trans_a:
        fa = np.swapaxes(fa, -1, -2)
    if trans_b:
        fb = np.swapaxes(fb, -1, -2)
    shape = _result_shape(fa.shape, fb.shape, "float64_gemm")
    d = np.matmul(fa, fb) if fa.shape[-1] else np.zeros(shape)
    d = np.broadcast_to(d, shape)
    if alpha != 1.0:
        d = alpha * d
    if c is not None and beta != 0.0:
        fc = to_float64(c)
        try:
            fc = np.broadcast_to(fc, shape)
        except ValueError:
            raise ValueError(f"float64_gemm: C of shape {fc.shape} does not broadcast to the result "
                             f"{shape}") from None
        d = d + beta * fc
    return np.array(d, dtype=np.float64)  # a fresh, writable, contiguous array


def float64_matmul(a, b) -> np.ndarray:
    """``A @ B`` in float64 (torch.matmul semantics for 2-D/3-D operands)."""
    return float64_gemm(a, b)


# --------------------------------------------------------------------------------------------------
# Triton availability and the interpreter
# --------------------------------------------------------------------------------------------------


def _env_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def _imported_mode() -> str | None:
    """How triton was imported: "interpreter" or "compiled" (its own library functions such as
    ``tl.cdiv`` are decorated at import, in the mode TRITON_INTERPRET gave then); None if not yet."""
    if "triton" not in sys.modules:
        return None
    import triton.language as tl

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # a Triton without the interpreter
        return "compiled"
    return "interpreter" if isinstance(tl.cdiv, InterpretedFunction) else "compiled"


def interpreting() -> bool:
    """True when Triton runs (or, once imported, will run) kernels in its CPU interpreter."""
    mode = _imported_mode()
    return _env_interpret() if mode is None else mode == "interpreter"


def enable_interpreter() -> bool:
    """Turn on Triton's CPU interpreter if it is still possible; return whether it is on.

    It is possible while neither ``triton`` nor our kernels have been loaded: Triton reads
    ``TRITON_INTERPRET`` when a kernel is decorated, and a process that already imported triton may have
    decorated kernels in compiled mode.
    """
    if interpreting():
        return True
    if "triton" in sys.modules or _kernels.cache_info().currsize:
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    return True


def triton_available(device: str = "cuda") -> tuple[bool, str]:
    """Whether :func:`triton_gemm` can run on ``device`` ("cpu", "cuda", "cuda:1", ...), and why not."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed (the Triton reference works on torch tensors)"
    try:
        import triton  # noqa: F401
    except ImportError:
        return False, "triton is not installed"
    kind = str(device).split(":")[0]
    if kind == "cpu":
        if not interpreting():
            if _env_interpret():
                return False, ("triton was imported before TRITON_INTERPRET=1 was set; set it before the "
                               "first import of triton to run the Triton reference on CPU")
            return False, ("Triton runs on CPU only under its interpreter: set TRITON_INTERPRET=1 before "
                           "importing triton")
        return True, "triton interpreter"
    if kind == "cuda":
        if not torch.cuda.is_available():
            return False, "no CUDA device visible to torch"
        return True, "triton interpreter" if interpreting() else "triton (compiled)"
    return False, f"unsupported device {device!r} for the Triton reference"


@functools.lru_cache(maxsize=None)
def _require_triton(device: str) -> None:
    """Raise unless the Triton path runs on ``device``. Cached: once triton is imported its mode is
    fixed, and the check would otherwise cost every launch a few microseconds. (A raise is not cached.)"""
    ok, why = triton_available(device)
    if not ok:
        raise RuntimeError(f"triton_gemm cannot run on {device}: {why}")


# --------------------------------------------------------------------------------------------------
# The Triton kernel
# --------------------------------------------------------------------------------------------------


def _cuda_configs() -> list:
    """Triton's matmul-tutorial configurations for CUDA (its eight fp16 ones) plus three Hopper-sized ones.

    Configurations that need more shared memory than the device has (e.g. 128x256x64 for float32) are
    dropped by the autotuner (it times them as infinitely slow).
    """
    import triton

    def cfg(m, n, k, stages, warps, group=8):
        return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": group},
                             num_stages=stages, num_warps=warps)

    return [
        cfg(128, 256, 64, 3, 8),  # the tutorial's best on Hopper for fp16
        cfg(128, 256, 64, 4, 8),  # same tile, one more stage (196 KiB of smem for fp16: fits on H100)
        cfg(256, 128, 64, 3, 8),
        cfg(64, 256, 32, 4, 4),
        cfg(128, 128, 64, 4, 8),
        cfg(128, 128, 32, 4, 4),
        cfg(128, 64, 32, 4, 4),
        cfg(64, 128, 32, 4, 4),
        cfg(128, 32, 32, 4, 4),
        cfg(64, 32, 32, 5, 2),
        cfg(32, 64, 32, 5, 2),
    ]


def _fp64_configs() -> list:
    """Small tiles for float64: a float64 accumulator of 128x256 per CTA would spill registers."""
    import triton

    def cfg(m, n, k, stages, warps):
        return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                             num_stages=stages, num_warps=warps)

    return [cfg(64, 64, 16, 3, 4), cfg(128, 64, 16, 3, 4), cfg(64, 128, 16, 3, 4), cfg(32, 64, 32, 3, 4)]


def _fixed_configs(dtype: str) -> list:
    """One mid-size configuration for runs that want no autotuning (``triton_gemm(..., tune=False)``):
    a correctness harness over many shapes would otherwise compile and time every configuration for
    every new (M, N, K)."""
    import triton

    k = 16 if dtype == "float64" else 32
    return [triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
                          num_stages=3, num_warps=4)]


def _interpreter_configs() -> list:
    """Exactly one small configuration: the interpreter runs each program in Python, and autotuning
    would run the kernel once per configuration."""
    import triton

    b = _INTERPRETER_BLOCK
    return [triton.Config({"BLOCK_SIZE_M": b, "BLOCK_SIZE_N": b, "BLOCK_SIZE_K": b, "GROUP_SIZE_M": 8},
                          num_stages=1, num_warps=4)]


@functools.lru_cache(maxsize=1)
def _kernels() -> dict[str, Any]:
    """Decorate the kernel (on first use, so that TRITON_INTERPRET is read after the caller set it).

    Returns ``{(tuned, is_float64): kernel}``: ``triton.autotune`` wrappers of one ``triton.jit`` kernel,
    over the tutorial's list (tuned, not float64), small float64 tiles (tuned, float64) or a single fixed
    configuration (not tuned). Under the interpreter all four hold the one interpreter configuration.
    """
    import triton
    import triton.language as tl

    if interpreting() != _env_interpret():
        # triton.jit decorates from the environment variable now, Triton's own library kept the mode of
        # its import: the two would not run together.
        raise RuntimeError("TRITON_INTERPRET changed after triton was imported; set it (or not) before the "
                           "first import of triton")

    def gemm_kernel(
        a_ptr, b_ptr, c_ptr, d_ptr,
        M, N, K,
        stride_ab, stride_am, stride_ak,
        stride_bb, stride_bk, stride_bn,
        stride_cb, stride_cm, stride_cn,
        stride_db, stride_dm, stride_dn,
        alpha: tl.float64, beta: tl.float64,  # float64 so that float64 GEMMs get exact scalars
        HAS_C: tl.constexpr,  # read C (beta != 0)
        SCALE: tl.constexpr,  # alpha != 1
        ACC_DTYPE: tl.constexpr,  # float32, or float64 for float64 inputs
        UPCAST: tl.constexpr,  # convert operands to float32 before tl.dot (bf16 in the interpreter)
        INPUT_PRECISION: tl.constexpr,  # "ieee" or "tf32"
        K_TILES_HOST: tl.constexpr,  # interpreter only (else -1): the K-loop trip count, see below
        BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
    ):
        """One (BLOCK_SIZE_M, BLOCK_SIZE_N) block of D[batch] = alpha * A[batch] @ B[batch] + beta * C[batch].

        Grid: (number of result blocks, batch). A is (M, K), B (K, N), C and D (M, N), each addressed
        through its own strides; a stride of 0 broadcasts (a shared batch entry, a bias row, ...).
        """
        pid = tl.program_id(axis=0)
        pid_b = tl.program_id(axis=1).to(tl.int64)  # int64: batch offsets can pass 2**31 elements
        # Grouped ordering (the tutorial's "L2 cache optimisation"): consecutive programs walk down a group
        # of GROUP_SIZE_M block rows before moving right, so the A rows and B columns they load are reused
        # from L2 instead of being fetched again.
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m

        offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        offs_k = tl.arange(0, BLOCK_SIZE_K)
        mask_m = offs_m < M
        mask_n = offs_n < N
        a_ptrs = a_ptr + pid_b * stride_ab + (offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + pid_b * stride_bb + (offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn)

        acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACC_DTYPE)
        # Triton 3.6's interpreter fails on range() over a kernel scalar with NumPy >= 2.4
        # (triton-lang/triton#9171), so it gets the trip count as a Python int; the compiled kernel
        # (K_TILES_HOST == -1, a constant condition resolved at compile time) loops to cdiv(K, BLOCK_SIZE_K).
        for k in range(0, K_TILES_HOST if K_TILES_HOST >= 0 else tl.cdiv(K, BLOCK_SIZE_K)):
            # Masks on all three edges: rows past M, columns past N and the K tail read as 0, so any shape
            # works without padding (the tutorial wraps M/N with % instead and masks K only).
            k_left = K - k * BLOCK_SIZE_K
            a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC_DTYPE)
            a_ptrs += BLOCK_SIZE_K * stride_ak
            b_ptrs += BLOCK_SIZE_K * stride_bk

        # Epilogue in the accumulator's precision, one rounding to the output dtype at the store.
        if SCALE:
            acc = acc * tl.cast(alpha, ACC_DTYPE)
        mask = mask_m[:, None] & mask_n[None, :]
        if HAS_C:
            c_ptrs = c_ptr + pid_b * stride_cb + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
            c = tl.load(c_ptrs, mask=mask, other=0.0).to(ACC_DTYPE)
            acc += tl.cast(beta, ACC_DTYPE) * c
        d_ptrs = d_ptr + pid_b * stride_db + offs_m[:, None] * stride_dm + offs_n[None, :] * stride_dn
        tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=mask)

    # Two compilations of the one kernel. The tuned one lets Triton specialize integer arguments (a
    # stride of 1 or a size divisible by 16 becomes a compile-time fact: contiguous, vectorized loads).
    # The fixed one does not: a correctness run over odd shapes and layouts would otherwise compile a
    # new binary for nearly every case; unspecialized, it compiles about once per dtype.
    ints = ["M", "N", "K", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk", "stride_bn",
            "stride_cb", "stride_cm", "stride_cn", "stride_db", "stride_dm", "stride_dn"]
    fast = triton.jit(gemm_kernel)
    generic = triton.jit(do_not_specialize=ints)(gemm_kernel)

    key = ["M", "N", "K"]  # the autotuner adds the tensor dtypes to the key itself
    if interpreting():
        cfg = _interpreter_configs
        lists = {(True, False): cfg(), (True, True): cfg(), (False, False): cfg(), (False, True): cfg()}
    else:
        lists = {(True, False): _cuda_configs(), (True, True): _fp64_configs(),
                 (False, False): _fixed_configs("float32"), (False, True): _fixed_configs("float64")}
    # With a single configuration the autotuner launches it directly, without timing anything.
    return {(tuned, is64): triton.autotune(configs=v, key=key)(fast if tuned else generic)
            for (tuned, is64), v in lists.items()}


def _batch_stride(t) -> int:
    """Batch stride of a 3-D operand; 0 for a 2-D operand or a batch of one (both broadcast)."""
    if t.dim() == 2 or t.shape[0] == 1:
        return 0
    return t.stride(0)


def _triton_operands(a, b) -> str:
    """Check the operands of :func:`triton_gemm` (torch tensors of one supported dtype on one device where
    the Triton path runs) and return their dtype's name."""
    import torch

    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(f"triton_gemm takes torch tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.dtype != b.dtype:
        raise TypeError(f"triton_gemm: A is {a.dtype} but B is {b.dtype}; both must have one dtype")
    name = str(a.dtype).removeprefix("torch.")
    if name not in TRITON_DTYPES:
        raise TypeError(f"triton_gemm: unsupported dtype {a.dtype}; supported: {', '.join(TRITON_DTYPES)}")
    if a.device != b.device:
        raise ValueError(f"triton_gemm: A is on {a.device} but B is on {b.device}")
    _require_triton(str(a.device))
    return name


def _c_view(c, shape: tuple[int, ...], device):
    """C as a tensor on ``device`` broadcast to the result ``shape`` (a stride-0 view where C
    broadcasts; no copy)."""
    import torch

    if not isinstance(c, torch.Tensor):
        c = torch.as_tensor(c, device=device)
    if c.device != device:
        raise ValueError(f"triton_gemm: C is on {c.device} but A and B are on {device}")
    try:
        return torch.broadcast_to(c, shape)
    except RuntimeError:
        raise ValueError(f"triton_gemm: C of shape {tuple(c.shape)} does not broadcast to the result "
                         f"{shape}") from None


def _launch(op_a, op_b, cv, dst, M: int, N: int, K: int, batch: int, alpha: float, beta: float, has_c: bool,
            name: str, allow_tf32: bool, tune: bool) -> None:
    """Launch the Triton kernel of :func:`triton_gemm`: ``dst = alpha * op_a @ op_b (+ beta * cv)``."""

    def s3(t):  # (batch stride, row stride, column stride) of a 2-D/3-D tensor
        return (_batch_stride(t), t.stride(-2), t.stride(-1))

    is64 = name == "float64"
    kernel = _kernels()[(bool(tune), is64)]
    import triton
    import triton.language as tl

    def grid(meta):  # result blocks on axis 0 (up to 2**31 - 1), batch on axis 1 (up to 65535)
        return (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]), batch)

    try:
        kernel[grid](
            op_a, op_b, cv, dst, M, N, K,
            *s3(op_a), *s3(op_b), *s3(cv), *s3(dst),
            float(alpha), float(beta),
            HAS_C=has_c, SCALE=alpha != 1.0,
            ACC_DTYPE=tl.float64 if is64 else tl.float32,
            # The interpreter's tl.dot multiplies bfloat16 raw bits as integers (Triton 3.6); float32
            # products of bfloat16 values are exact, so upcasting gives the same float32-accumulated result.
            UPCAST=name == "bfloat16" and interpreting(),
            INPUT_PRECISION="tf32" if (allow_tf32 and name == "float32") else "ieee",
            # Compiled kernels keep K a runtime argument (one binary for every K); the interpreter, which
            # compiles nothing, takes the trip count as a constant.
            K_TILES_HOST=triton.cdiv(K, _INTERPRETER_BLOCK) if interpreting() else -1,
        )
    except Exception as e:
        if is64:
            raise TypeError(f"triton_gemm: tl.dot does not support float64 on {op_a.device} "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from e
        raise


def triton_gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
                trans_b: bool = False, allow_tf32: bool = False, out_dtype=None, tune: bool = True):
    """``alpha * op(A) @ op(B) + beta * C`` with the Triton kernel; returns a new torch tensor.

    ``a``, ``b``: torch tensors of one dtype (float16, bfloat16, float32; float64 where tl.dot supports it)
    on one device (CUDA, or CPU under ``TRITON_INTERPRET=1``); 2-D or 3-D with any strides, shapes as in
    :func:`float64_gemm`. ``trans_a``/``trans_b`` read the operands transposed through their strides (no
    copies). ``c``: a tensor (any float dtype) broadcastable to the result; not read when ``beta == 0``.
    Accumulates in float32 (float64 for float64); float32 inputs use TF32 tensor cores only if
    ``allow_tf32``. The result has the inputs' dtype unless ``out_dtype`` (a torch dtype) is given.
    ``tune``: autotune over the configuration list (the first call per (M, N, K, dtype) compiles and times
    each one); ``False`` launches one fixed configuration (for correctness runs over many shapes).
    """
    import torch

    name = _triton_operands(a, b)
    op_a = a.mT if trans_a else a  # views: the kernel reads the transpose through the strides
    op_b = b.mT if trans_b else b
    shape = _result_shape(tuple(op_a.shape), tuple(op_b.shape), "triton_gemm")
    M, N, K = shape[-2], shape[-1], op_a.shape[-1]
    batch = shape[0] if len(shape) == 3 else 1
    out = torch.empty(shape, dtype=out_dtype or a.dtype, device=a.device)
    if out.numel() == 0:
        return out
    if batch > 65535:
        raise ValueError(f"triton_gemm: batch {batch} exceeds the CUDA grid's 65535 limit on axis 1")

    has_c = c is not None and beta != 0.0
    cv = _c_view(c, shape, a.device) if has_c else out  # out: never read (HAS_C is False), a mere pointer

    # The interpreter (Triton 3.6) converts float32 to bfloat16 by truncation, not by rounding to
    # nearest even as the GPU does; there the kernel stores its float32 result and torch rounds it.
    dst = out
    if out.dtype == torch.bfloat16 and interpreting():
        dst = torch.empty(shape, dtype=torch.float32, device=a.device)

    _launch(op_a, op_b, cv, dst, M, N, K, batch, alpha, beta, has_c, name, allow_tf32, tune)
    if dst is not out:
        out.copy_(dst)
    return out


def triton_matmul(a, b, *, allow_tf32: bool = False):
    """``A @ B`` with the Triton kernel (torch.matmul semantics for 2-D/3-D torch tensors)."""
    return triton_gemm(a, b, allow_tf32=allow_tf32)
