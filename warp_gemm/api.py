"""Public entry points: :func:`matmul` and :func:`gemm`.

Both validate everything before any launch (so a bad call writes nothing), describe the operands
zero-copy, pick one tile configuration, and launch one Warp tile kernel (plus, only where the installed
Warp or the operands require it, an elementwise widening/copy kernel).
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any

import warp as wp

from . import _compat, _config, _kernels
from . import autograd as _autograd
from ._config import Config
from ._kernels import KernelSpec, acc_dtype_name, convert, fill, get_kernel
from . import _launch as _recorded
from ._launch import launch as recorded_launch
from ._lru import LRU
from ._operands import (Operand, _torch, as3d, describe, empty_like_caller, layout_view, overlaps, raw_view,
                        torch_dtype, wp_view)


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


# --- validation ---------------------------------------------------------------------------------------
@dataclass
class _Problem:
    A: Operand  # op(A), as a (possibly transposed) view
    B: Operand
    C: Operand | None
    D: Operand  # the output (caller's out or a new array)
    result: Any  # what the caller gets back
    M: int
    N: int
    K: int
    batch: int  # launch batch (1 for 2-D results)
    in_dtype: str
    out_dtype: str


def _shape_str(op: Operand) -> str:
    return "x".join(map(str, op.shape)) if op.shape else "scalar"


def _describe(x, name: str, fname: str) -> Operand:
    try:
        return describe(x, name)
    except TypeError as e:
        raise TypeError(f"{fname}: {e}") from None


def _real(v, name: str, fname: str) -> float:
    """``float(v)`` for a real scalar; strings, complex values and arrays are refused, not coerced."""
    if type(v) is float:  # the common case, without the ABC checks below (a huge int must still raise)
        return v
    bad = isinstance(v, (str, bytes, bytearray))
    bad |= isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real)
    if not bad and getattr(getattr(v, "dtype", None), "kind", "") != "c":
        try:
            return float(v)
        except OverflowError:
            raise ValueError(f"{fname}: {name} ({type(v).__name__}) is too large for a float") from None
        except (TypeError, ValueError, RuntimeError):
            pass
    raise TypeError(f"{fname}: {name} must be a real number, got {type(v).__name__}")


def _validate(a, b, c, alpha, beta, trans_a, trans_b, out, fname) -> _Problem:
    A = _describe(a, "a", fname)
    B = _describe(b, "b", fname)
    for name, op in (("a", A), ("b", B)):
        if op.ndim not in (2, 3):
            raise ValueError(f"{fname}: {name} has shape {list(op.shape)} (rank {op.ndim}); "
                             "warp_gemm takes 2-D (M, K) or 3-D batched (B, M, K) operands")
    if A.dtype != B.dtype:
        raise TypeError(f"{fname}: a is {A.dtype}{list(A.shape)} but b is {B.dtype}{list(B.shape)}; "
                        "both operands must have the same dtype")
    if A.device is not B.device and str(A.device) != str(B.device):
        raise ValueError(f"{fname}: a is {A.describe()} but b is {B.describe()}; both must be on one device")
    _compat.require_device(A.device)
    if trans_a:
        A = A.transposed()
    if trans_b:
        B = B.transposed()
    M, K = A.shape[-2:]
    K2, N = B.shape[-2:]
    if K != K2:
        ta = "op(a)" if trans_a else "a"
        tb = "op(b)" if trans_b else "b"
        raise ValueError(f"{fname}: inner dimensions differ: {ta} is {_shape_str(A)} and {tb} is "
                         f"{_shape_str(B)} ({K} != {K2}) [{A.dtype}]")
    nba = A.shape[0] if A.ndim == 3 else None
    nbb = B.shape[0] if B.ndim == 3 else None
    if nba is not None and nbb is not None and nba != nbb and 1 not in (nba, nbb):
        raise ValueError(f"{fname}: batch dimensions {nba} (a: {_shape_str(A)}) and {nbb} "
                         f"(b: {_shape_str(B)}) do not broadcast")
    batched = nba is not None or nbb is not None
    nb = max(nba or 1, nbb or 1)
    shape = (nb, M, N) if batched else (M, N)
    in_dtype = A.dtype

    C = None
    if c is not None:
        C = _describe(c, "c", fname)
        if C.device is not A.device and str(C.device) != str(A.device):
            raise ValueError(f"{fname}: c is {C.describe()} but a and b are on {A.device}")
        if C.ndim > len(shape) or any(cd not in (1, rd) for cd, rd in zip(C.shape[::-1], shape[::-1])):
            raise ValueError(f"{fname}: c has shape {list(C.shape)}, which does not broadcast to the result "
                             f"shape {list(shape)}")

    if out is not None:
        D = _describe(out, "out", fname)
        if D.obj is not out and D.size:  # describe() had to copy it (negative or unaligned numpy strides)
            raise ValueError(f"{fname}: out ({D.describe()}) has negative or unaligned strides; warp_gemm "
                             "writes out in place and cannot write through such a view")
        if D.kind == "numpy" and not out.flags.writeable:
            raise ValueError(f"{fname}: out ({D.describe()}) is a read-only numpy array")
        if D.size and any(n > 1 and st == 0 for n, st in zip(D.shape, D.strides)):
            raise ValueError(f"{fname}: out ({D.describe()}, strides {list(D.strides)}) has several elements "
                             "at one address (a broadcast/expanded view); pass a writable array of its own")
        if tuple(D.shape) != shape:
            raise ValueError(f"{fname}: out has shape {list(D.shape)}; the result of {_shape_str(A)} @ "
                             f"{_shape_str(B)} has shape {list(shape)}")
        if D.device is not A.device and str(D.device) != str(A.device):
            raise ValueError(f"{fname}: out is {D.describe()} but the operands are on {A.device}")
        for name, op in (("a", A), ("b", B), ("c", C)):
            if op is not None and overlaps(D, op):
                raise ValueError(f"{fname}: out ({D.describe()}) shares memory with {name} "
                                 f"({op.describe()}); warp_gemm does not compute in place "
                                 "(pass a separate out)")
        out_dtype = D.dtype
        result = out
    else:
        out_dtype = in_dtype
        D = None
        result = None
    if C is not None and C.dtype != out_dtype:
        raise TypeError(f"{fname}: c is {C.dtype}{list(C.shape)} but the result is {out_dtype}; "
                        "c must have the result's dtype")
    for name, v in (("alpha", alpha), ("beta", beta)):
        _real(v, name, fname)

    if D is None:
        result = empty_like_caller(A.kind, A, shape, out_dtype)
        D = describe(result, "out")
    return _Problem(A, B, C, D, result, M, N, K, nb, in_dtype, out_dtype)


# --- launch -----------------------------------------------------------------------------------------
def _stream_scope(p: _Problem):
    """The launch's device scope; on torch's current stream when the operands are torch CUDA tensors
    (``wp.ScopedStream`` scopes the stream's device too)."""
    torch = _torch()
    if torch is not None and not p.A.device.is_cpu and "torch" in (p.A.kind, p.B.kind, p.D.kind):
        # No sync on entry: the launch simply joins torch's stream, which keeps it capturable in a
        # torch CUDA graph (a sync would make the captured stream wait on uncaptured Warp work).
        return wp.ScopedStream(_warp_stream(torch.cuda.current_stream(p.A.device.ordinal)), sync_enter=False)
    return wp.ScopedDevice(p.A.device)


# Warp stream wrappers of torch streams, by (device, CUDA stream handle): wp.stream_from_torch builds and
# registers a new wp.Stream on every call. A cached wrapper keeps its torch stream object alive, so
# the handle cannot be recycled for another stream while it is cached.
_streams = LRU(64)


def _warp_stream(ts):
    key = (ts.device.index, ts.cuda_stream)
    s = _streams.get(key)
    if s is None:
        s = wp.stream_from_torch(ts)
        _streams.put(key, s)
    return s


def _allocator(device, torch_stream: bool):
    """``allocate(shape, dtype, zero=False)`` for temporaries. On the torch path they come from torch's
    caching allocator, which is stream-ordered and CUDA-graph aware: Warp frees its own arrays at once,
    which is not permitted while torch captures a graph (Warp CUDA error 900 in ``release_now``)."""
    from ._kernels import WP_DTYPES

    torch = _torch()
    if torch_stream and torch is not None and not device.is_cpu:
        tdev = torch.device("cuda", device.ordinal)

        def allocate(shape, dtype, zero=False):
            t = (torch.zeros if zero else torch.empty)(shape, dtype=torch_dtype(dtype), device=tdev)
            arr = wp.array(ptr=t.data_ptr(), dtype=WP_DTYPES[dtype], shape=tuple(shape),
                           capacity=max(t.numel(), 1) * t.element_size(), device=device)
            arr._wg_owner = t  # the tensor lives as long as the Warp view
            return arr

        return allocate

    def allocate(shape, dtype, zero=False):
        return (wp.zeros if zero else wp.empty)(shape, dtype=WP_DTYPES[dtype], device=device)

    return allocate


def _run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname):
    p = _validate(a, b, c, alpha, beta, trans_a, trans_b, out, fname)
    if p.M == 0 or p.N == 0:
        return p.result
    alpha, beta = float(alpha), float(beta)
    with _stream_scope(p):
        key = _plan_key(p, alpha, beta, allow_tf32, config) if _recorded.ENABLED and _compat.HAS_RECORD_CMD else None
        plan = _plans.get(key) if key is not None else None
        if plan is not None:
            for cmd in plan:
                cmd.launch()
        else:
            with _recorded.Recorder() as rec:
                temporaries = _launch(p, alpha, beta, allow_tf32, config)
            if key is not None and not temporaries and rec.complete:
                _plans.put(key, tuple(rec.cmds))
    return p.result


# --- launch plans ----------------------------------------------------------------------------------
# A call that needs no temporaries is determined by its operands (pointers, shapes, strides, dtypes),
# scalars and options: the launches it recorded are kept as its plan and replayed on the next equal
# call, which skips the configuration choice and the argument assembly. The key also holds the test
# hooks below and the tuning-cache directory; tuning.save() clears the plans (a new table may choose
# another configuration). Replaying is as safe as replaying one recorded launch (see _launch.py).
_plans = LRU(256)


def _plan_key(p: _Problem, alpha: float, beta: float, allow_tf32: bool, config) -> tuple:
    def d(op):
        return None if op is None else (op.kind, op.ptr, op.shape, op.strides, op.dtype)

    return (d(p.A), d(p.B), d(p.C), d(p.D), str(p.A.device), alpha, beta, bool(allow_tf32), config,
            PAD_ON_CPU, SMEM_PAD_ON_CPU, EDGE_CLAMP_ON_CPU, PAD_MIN_WORK, os.environ.get("WARP_GEMM_CACHE_DIR"))


def _launch(p: _Problem, alpha: float, beta: float, allow_tf32: bool, config: Config | None) -> bool:
    """Launch the kernels for ``p``; returns whether any temporary was allocated."""
    dev = p.A.device
    torch_path = "torch" in (p.A.kind, p.B.kind, p.D.kind)
    new_temporary = _allocator(dev, torch_path)
    temporaries = []

    def allocate(shape, dtype, zero=False):
        temporaries.append(shape)
        return new_temporary(shape, dtype, zero)

    D = p.D
    # A column-major out (unit row stride): compute D^T = op(B)^T @ op(A)^T into its row-major transpose.
    A, B, C = p.A, p.B, p.C
    M, N = p.M, p.N
    (_, dr, dc), (_, sdr, sdc) = as3d(D)
    if dc > 1 and sdc != 1 and (sdr == 1 or dr == 1):
        A, B, D = p.B.transposed(), p.A.transposed(), D.transposed()
        C = C.transposed() if C is not None and C.ndim >= 2 else C
        if C is not None and C.ndim == 1:  # a (N,) bias becomes a column: (N, 1)
            from dataclasses import replace

            C = replace(C, shape=(C.shape[0], 1), strides=(C.strides[0], 0))
        M, N = N, M
    (dnb, dr, dc), (dsb, dsr, dsc) = as3d(D)
    use_c = C is not None and beta != 0.0

    acc = acc_dtype_name(p.in_dtype)
    in_k = p.in_dtype
    widen = _compat.WIDEN_16BIT_INPUTS and p.in_dtype in ("float16", "bfloat16")
    if widen:
        in_k = "float32"
    out_k = p.out_dtype
    # Large CUDA problems that are not tile multiples (or whose rows are not 16-byte aligned) run on
    # zero-padded tile-multiple copies: 4095^3 fp16 ran at 21-23 TFLOP/s against 51 for 4096^3
    # (H100, Warp 1.19), while the copies cost ~3 passes over the data.
    pad = (not dev.is_cpu or PAD_ON_CPU) and M * N * p.K >= PAD_MIN_WORK
    # Without tile_astype the kernel's output dtype must be its accumulator dtype.
    need_tmp_out = (not _compat.HAS_TILE_ASTYPE and out_k != acc) or (dc > 1 and dsc != 1)
    if need_tmp_out:
        out_k = acc if not _compat.HAS_TILE_ASTYPE else p.out_dtype
        Dk = _padded(allocate, (dnb, dr, dc), out_k)
    else:
        Dk = wp_view(D, (dnb, dr, dc), (dsb if dnb > 1 else dr * dc, dsr if dr > 1 else dc, 1))

    if p.K == 0 or alpha == 0.0:
        # No product to compute: D = beta * C, or zeros.
        if use_c:
            convert(Dk, _c_view(C), out_k, C.dtype, beta)
        else:
            fill(Dk, out_k, 0.0)
    else:
        # (the third values keep any contiguous copy alive until the launch is queued)
        Av, la, _keep_a = layout_view(A, allocate)
        Bv, lb, _keep_b = layout_view(B, allocate)
        if widen:
            Av = _widened(Av, p.in_dtype, allocate)
            Bv = _widened(Bv, p.in_dtype, allocate)
        tf32 = bool(allow_tf32 and p.in_dtype == "float32" and _compat.HAS_TF32 and not dev.is_cpu)
        cfg = config or _config.choose(dev, p.in_dtype, la + lb, M, N, p.K, p.batch, tf32)
        padded = pad and _needs_padding(M, N, p.K, cfg, Av, Bv)
        pads = _kernels.smem_pads(in_k, dev.is_cpu and not SMEM_PAD_ON_CPU, tf32 or SMEM_PAD_ON_CPU)
        if padded:
            # pads[0] more columns: the kernel's widened tile loads then stay inside the copy, so every
            # one of them takes Warp's vectorized path.
            Av = _tile_padded_copy(Av, (cfg.tm, cfg.tk) if la == "N" else (cfg.tk, cfg.tm), in_k, allocate, pads[0])
            Bv = _tile_padded_copy(Bv, (cfg.tk, cfg.tn) if lb == "N" else (cfg.tn, cfg.tk), in_k, allocate, pads[0])
        tiles_m = -(-M // cfg.tm)
        tiles_n = -(-N // cfg.tn)
        k_tiles = -(-p.K // cfg.tk)
        # Automatic splits only on CUDA; an explicit split_k (tests, tuning) is honoured anywhere.
        if dev.is_cpu and cfg.split_k == 0:
            splits = 1
        else:
            splits = _config.split_count(cfg, p.batch * tiles_m * tiles_n, k_tiles, _compat.sm_count(dev))
        k_per_split = -(-k_tiles // splits)
        splits = -(-k_tiles // k_per_split)  # no empty splits
        c_nb = 1
        Cv = Dk
        epilogue = "scale"
        alpha_k = alpha
        workspace = splits > 1 or padded
        if workspace:
            # Split-K partial sums meet in a zeroed accumulator-dtype workspace (tile-multiple sized
            # when padded); one finishing pass applies alpha, beta*C and the output dtype.
            epilogue = "splitk" if splits > 1 else "scale"
            Wshape = (dnb, tiles_m * cfg.tm, tiles_n * cfg.tn) if padded else (dnb, dr, dc)
            W = allocate(Wshape, acc, zero=splits > 1)
            kernel_out, Dlaunch, Cv, alpha_k = acc, W, W, 1.0
        else:
            kernel_out, Dlaunch = out_k, Dk
            if use_c:
                epilogue = "axpby"
                Cv, c_nb = _c_operand(C, Dk, out_k, M, N)
        k_clamp = _k_clamp(p.K, cfg, pads[0], in_k, dev.is_cpu) if not padded else _NO_CLAMP
        spec = KernelSpec(cfg.tm, cfg.tn, cfg.tk, in_k, kernel_out, la, lb, epilogue, tf32, *pads,
                          *_kernels.occupancy_bound(cfg, dev.is_cpu), k_tail=k_clamp != _NO_CLAMP)
        kernel = get_kernel(spec)
        m_clamp, n_clamp = _edge_clamps(Dlaunch.shape[1:], cfg, epilogue, Cv is Dlaunch, dev.is_cpu)
        recorded_launch(kernel, (p.batch, tiles_m * tiles_n, splits),
                        [Av, Bv, Cv, Dlaunch, alpha_k, beta, k_tiles, k_per_split, tiles_m, tiles_n,
                         max(1, cfg.group_m), Av.shape[0], Bv.shape[0], c_nb, m_clamp, n_clamp, k_clamp],
                        dev, 1 if dev.is_cpu else cfg.block_dim)
        if workspace:
            cfin = None
            if use_c:
                cfin = _c_view(C)
                if C.dtype != out_k:  # Warp 1.7's float32 temporary: bring C to its dtype first
                    convert(Dk, cfin, out_k, C.dtype)
                    cfin = Dk
            Wv = raw_view(W.ptr, W.dtype, (dnb, dr, dc), W.strides, dev) if padded else W
            _kernels.finish_splitk(Dk, Wv, cfin, out_k, acc, alpha, beta)
    if need_tmp_out:
        convert(wp_view(D, (dnb, dr, dc), (dsb, dsr, dsc)), Dk, D.dtype, out_k)
    return bool(temporaries)


# M*N*K from which the padded tile-multiple path pays off: it costs ~8 extra launches (~0.4 ms of host
# time) plus ~3 passes over the data, and saves about W*(1/22 - 1/50 TFLOP/s) -- equal near 2^33.
# 1000^3 fp16 fell from 10-16 to 3.8 TFLOP/s when padded (H100), 4095^3 rose from 21 to 42.
PAD_MIN_WORK = 2**33
PAD_ON_CPU = False  # tests set this to run the padded path on the CPU backend
# Tests set this to run the padded-shared-tile kernels on the CPU backend (float32 with the padding of
# the tf32 kernels, since exact float32 is not padded).
SMEM_PAD_ON_CPU = False


# Tests set this to clamp the last tile row/column on the CPU backend too.
EDGE_CLAMP_ON_CPU = False
_NO_CLAMP = 2**30


def _edge_clamps(rows_cols, cfg: Config, epilogue: str, c_is_d: bool, is_cpu: bool) -> tuple[int, int]:
    """The kernel's ``m_clamp``/``n_clamp``: the last tile row (column) starts at ``M - tm`` (``N - tn``)
    instead of running past the edge, so its loads stay inside the arrays and take Warp's vectorized
    path (a tile not wholly inside its array is copied element by element). fp16 on the H100: 1024^3
    ran in 41 us, 1000x1024x1024 in 74 and 1024x1000x1024 in 78 -- the edge blocks with scalar loads
    finished last (benchmarks/results/edges_h100.json).

    The overlapping rows are computed by two blocks and stored twice with the same values, which is
    safe for the plain and axpby epilogues reading a separate C; not for split-K (atomic adds) nor
    when C was first copied into D (one block would read C after the other overwrote it). CUDA only:
    on the CPU backend the copies are scalar either way and the overlap is extra work."""
    rows, cols = rows_cols
    if (is_cpu and not EDGE_CLAMP_ON_CPU) or epilogue == "splitk" or (epilogue == "axpby" and c_is_d):
        return _NO_CLAMP, _NO_CLAMP
    return (rows - cfg.tm if rows >= cfg.tm else _NO_CLAMP), (cols - cfg.tn if cols >= cfg.tn else _NO_CLAMP)


def _k_clamp(K: int, cfg: Config, pad_ab: int, in_dtype: str, is_cpu: bool) -> int:
    """The kernel's ``k_clamp``: with K not a multiple of ``tk``, the last K tile starts at ``K - tk``
    (in bounds, so Warp copies it with vector loads) and the kernel zeroes its first ``tk - K % tk``
    columns of A / rows of B, which the previous tile already counted. Padded-shared-tile kernels only
    (where the tiles are shared and can be zeroed in place), and only when the overlap is a whole
    number of 16-byte chunks (``_kernels.K_CHUNK_BYTES``). fp16 on the H100: the partial last K tile
    cost 13 us of 55 at 1024x1024x1000 (benchmarks/results/edges_h100_after_clamp.json)."""
    chunk = _kernels.K_CHUNK_BYTES // _kernels.ITEM_BYTES[in_dtype]
    r = K % cfg.tk
    if (is_cpu and not EDGE_CLAMP_ON_CPU) or not pad_ab or K <= cfg.tk or r == 0 or (cfg.tk - r) % chunk:
        return _NO_CLAMP
    return K - cfg.tk


def _needs_padding(M: int, N: int, K: int, cfg: Config, Av, Bv) -> bool:
    """True unless M, N, K are tile multiples and both operands' rows start on 16-byte boundaries."""
    if M % cfg.tm or N % cfg.tn or K % cfg.tk:
        return True
    return any(v.ptr % 16 or v.strides[1] % 16 or (v.shape[0] > 1 and v.strides[0] % 16) for v in (Av, Bv))


def _tile_padded_copy(view, tiles: tuple[int, int], dtype: str, allocate, extra_cols: int = 0):
    """A zero-filled (nb, rows, cols) copy of ``view`` with rows and cols rounded up to ``tiles``
    (and ``extra_cols`` more zero columns)."""
    nb, r, c = view.shape
    rp, cp = -(-r // tiles[0]) * tiles[0], -(-c // tiles[1]) * tiles[1] + extra_cols
    buf = allocate((nb, rp, cp), dtype, zero=True)
    convert(raw_view(buf.ptr, buf.dtype, (nb, r, c), buf.strides, buf.device), view, dtype, dtype)
    return buf


def _padded(allocate, shape, dtype):
    """A (nb, r, c) Warp array whose rows start on 16-byte boundaries (owner kept on the view)."""
    from ._operands import ITEMSIZE

    nb, r, c = shape
    item = ITEMSIZE[dtype]
    cp = -(-c * item // 16) * 16 // item
    if cp == c:
        return allocate(shape, dtype)
    owner = allocate((nb, r, cp), dtype)
    view = wp.array(ptr=owner.ptr, dtype=owner.dtype, shape=shape, strides=(r * cp * item, cp * item, item),
                    capacity=owner.capacity, device=owner.device)
    view._wg_owner = owner  # the padded buffer lives as long as the view
    return view


def _widened(view, dtype, allocate):
    """Warp 1.7: 16-bit tiles accumulate in 16 bit, so widen the operand to float32 first."""
    tmp = allocate(view.shape, "float32")
    convert(tmp, view, "float32", dtype)
    return tmp


def _c_view(C: Operand):
    """``C`` as a 3-D Warp view whose size-1 dimensions broadcast (for the convert kernel)."""
    shape = (1,) * (3 - C.ndim) + tuple(C.shape)
    strides = (0,) * (3 - C.ndim) + tuple(C.strides)
    return wp_view(C, shape, tuple(s if n > 1 else 0 for n, s in zip(shape, strides)))


def _c_operand(C: Operand, Dk, out_k: str, M: int, N: int):
    """The C array the kernel reads and its batch count.

    A full (…, M, N) C with unit column stride and the kernel's dtype is read in place. Anything
    else (a broadcast bias, a strided view, another dtype) is first written into the output, which
    the kernel then reads back tile by tile before overwriting that same tile.
    """
    shape = (1,) * (3 - C.ndim) + tuple(C.shape)
    strides = (0,) * (3 - C.ndim) + tuple(C.strides)
    if shape[1] == M and shape[2] == N and (strides[2] == 1 or N == 1) and C.dtype == out_k:
        view = wp_view(C, shape, (strides[0] if shape[0] > 1 else M * N, strides[1] if M > 1 else N, 1))
        return view, shape[0]
    convert(Dk, _c_view(C), out_k, C.dtype)
    return Dk, Dk.shape[0]


def precompile_config(config: Config | str, dtype: str, device: str = "cuda", layout: str = "NN",
                      epilogue: str = "scale", tf32: bool = False) -> float:
    """Build (or load from Warp's kernel cache) one GEMM kernel; returns the seconds it took."""
    import time

    _compat.init()
    cfg = Config.parse(config) if isinstance(config, str) else config
    kernel = get_kernel(_kernels.spec_for(cfg, dtype, layout, epilogue, tf32,
                                          device_is_cpu=wp.get_device(device).is_cpu))
    dev = wp.get_device(device)
    t = time.perf_counter()
    if dev.is_cpu:
        kernel.module.load(dev)
    elif _accepts_block_dim(kernel.module.load):
        # (the same one-thread-at-a-time first load as a launch; see _launch.first_load)
        _recorded.first_load(kernel, dev, cfg.block_dim, lambda: kernel.module.load(dev, block_dim=cfg.block_dim))
    else:
        kernel.module.load(dev)
    return time.perf_counter() - t


def _accepts_block_dim(fn) -> bool:
    import inspect

    return "block_dim" in inspect.signature(fn).parameters
