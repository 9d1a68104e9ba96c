"""Launching the pipelined family: the arguments of one kernel launch (``launch_args``), which devices, dtypes and
layouts it applies to, stream-K buffers, and the launches of a plan."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import dataclasses
import functools

import warp as wp

from ... import _compat
from ..common import native
from ..common.kernels import ITEM_BYTES, WP_DTYPES, cuda_source
from .kernel import _factory_lock, get_kernel
from .snippets import _stub_copy
from .spec import CHUNKS, PipeSpec
from .stream_k import _cdiv, stream_k_dp_tiles, stream_k_sizes


def launch_args(spec: PipeSpec, A, B, C, D, alpha: float, beta: float, M: int, N: int, K: int, batch: int,
                a_nb: int, b_nb: int, c_nb: int, group_m: int = 8, bias=None, workspace=None, flags=None):
    """``(kernel, dim, inputs, block_dim)`` for ``wp.launch_tiled(kernel, dim=dim, inputs=inputs,
    block_dim=block_dim, device=...)``.

    A, B, C, D: Warp 3-D arrays ``(batch, rows, cols)``; A is ``(a_nb, M, K)`` (layout T: ``(a_nb, K,
    M)``), B ``(b_nb, K, N)`` (T: ``(b_nb, N, K)``), C ``(c_nb, M, N)`` or None for "scale", D ``(batch,
    M, N)``; a/b/c_nb is the batch count or 1 (broadcast). Rows must satisfy ``spec.chunk`` (see
    :func:`max_chunk`). K == 0 gives ``alpha * 0 (+ beta * C)``. ``bias``: ``spec.bias`` kernels only,
    a Warp array of ``spec.out_dtype`` of shape ``(1, N)`` or ``(N,)`` (any strides). On the CPU the
    block size is 1. Stream-K kernels (``spec.stream_k``) also take ``workspace`` (of the accumulator dtype: float32, float64 for float64 inputs) and ``flags`` (int32
    zeros) of at least :func:`stream_k_sizes` elements.
    """
    if spec.stream_k:
        grid, n_ws, n_flags = stream_k_sizes(spec, M, N, K, batch, D.device)
        if not grid:
            return launch_args(dataclasses.replace(spec, stream_k=0), A, B, C, D, alpha, beta, M, N, K, batch, a_nb,
                               b_nb, c_nb, group_m, bias)
        ws_dt = WP_DTYPES[spec.acc_dtype]
        for name, arr, dt, n in (("workspace", workspace, ws_dt, n_ws), ("flags", flags, wp.int32, n_flags)):
            if arr is None or arr.dtype != dt or arr.ndim != 1 or arr.shape[0] < n:
                got = None if arr is None else (tuple(arr.shape), arr.dtype)
                raise ValueError(f"{spec.key} M={M} N={N} K={K} batch={batch}: stream-K needs a {name} of at least "
                                 f"{n} {dt.__name__}; got {got}")
    if bool(spec.bias) != (bias is not None):
        raise ValueError(f"{spec.key}: bias given: {bias is not None}, spec.bias: {spec.bias}")
    if bias is not None and bias.ndim == 1:
        bias = wp.array(ptr=bias.ptr, dtype=bias.dtype, shape=(1, bias.shape[0]), strides=(0, bias.strides[0]),
                        device=bias.device)
    k = get_kernel(spec)
    if spec.wgmma and not D.device.is_cpu:
        _load_arch_specific(k, spec, D.device)
    tiles_m, tiles_n, k_tiles = _cdiv(M, spec.tm), _cdiv(N, spec.tn), _cdiv(K, spec.tk)
    c = C if C is not None else D
    inputs = [A, B, c, D, alpha, beta, k_tiles, tiles_m, tiles_n, max(1, int(group_m)),
              int(a_nb), int(b_nb), int(c_nb if C is not None else 1), bias]
    block = 1 if D.device.is_cpu else spec.block_dim
    if spec.persistent:
        if k_tiles == 0:  # nothing to loop over: the one-tile-per-block kernel stores alpha * 0 (+ beta * C)
            return launch_args(dataclasses.replace(spec, persistent=0), A, B, C, D, alpha, beta, M, N, K, batch,
                               a_nb, b_nb, c_nb, group_m, bias)
        sms = 4 if D.device.is_cpu else _compat.sm_count(D.device)
        grid = max(1, min(int(batch) * tiles_m * tiles_n, spec.persistent * sms))
        return k, (1, grid), inputs + [grid], block
    if spec.stream_k:
        dp = stream_k_dp_tiles(int(batch) * tiles_m * tiles_n, grid)
        return k, (1, grid), inputs + [grid, dp, workspace, flags], block
    return k, (int(batch), tiles_m * tiles_n), inputs, block


def _load_arch_specific(kernel, spec: PipeSpec, device) -> None:
    """Load the wgmma kernel's module on ``device`` compiled for sm_90a (wgmma is an arch-specific feature): Warp
    takes the suffix from ``wp.config.cuda_arch_suffix`` at compile time only, so it is "a" while this module loads
    (under the factory lock), then restored; later launches find the module loaded. Caveat: for that moment the
    setting is process-wide, and a module that another thread compiles then for a pre-sm_90 GPU would fail."""
    arch = getattr(device, "arch", 0)
    if arch != 90 or not _compat.HAS_CUDA_ARCH_SUFFIX:
        raise ValueError(f"{spec.key}: wgmma kernels need an sm_90 GPU (H100/H200) and a Warp with "
                         f"wp.config.cuda_arch_suffix; got sm_{arch}")
    key = (spec, str(device))
    if key in _ARCH_SPECIFIC_LOADED:  # every launch after the first (a set lookup, no lock)
        return
    with _factory_lock:
        if key in _ARCH_SPECIFIC_LOADED:
            return
        _compat.load_arch_specific(kernel.module, device, spec.block_dim)
        _ARCH_SPECIFIC_LOADED.add(key)


# --- where the family applies ---------------------------------------------------------------------------

@functools.cache
def _native_tile_args() -> bool:
    """Whether this Warp passes a shared tile to a ``wp.func_native`` snippet by reference with its
    storage reachable as ``.data.ptr`` (1.19 does). Probed by generating (not compiling) the CUDA source
    of a tiny kernel. (HAS_NATIVE_TILE_ARGS below; a candidate for _compat, which the lead owns.)"""
    try:
        snip = "#if defined(__CUDA_ARCH__)\n (void)dst.data.ptr;\n#endif\n"
        touch = native.func(snip, "wg_pipe_probe_touch", _stub_copy(wp.float16, 16, 16))

        def probe(a: wp.array2d(dtype=wp.float16)):
            t = wp.tile_zeros(shape=(16, 16), dtype=wp.float16, storage="shared")
            touch(t, 0, a, 0, 0)
            v = wp.tile_view(t, offset=(wp.tid() * 0, 0), shape=(8, 16))
            wp.tile_store(a, v, offset=(0, 0))

        k = _compat.make_kernel(probe, "wg_pipe_probe")
        src = cuda_source(k) or ""
        return "dst.data.ptr" in src and "wg_pipe_probe_touch" in src
    except Exception:
        return False


def has_native_tile_args() -> bool:
    # The factory's lock: the probe registers a native function in this module, like _build does.
    with _factory_lock:
        return _native_tile_args()


def applies(device, in_dtype: str, tf32: bool = False, chunk: int = 16, layout: str = "NN",
            simt: bool = False) -> bool:
    """Whether the pipelined family can run ``in_dtype`` on ``device`` (a Warp device): CUDA sm_80+
    (cp.async) or the CPU twin, a Warp that passes tiles to native snippets, tile_view/tile_astype, and
    tf32 only where ``precision="tf32"`` exists. Exact float32 with a transposed operand is refused on
    CUDA through tile_matmul: correct, but 4.8 (NT) and 10.9 (TN) TFLOP/s against 27.7 NN (H100, 4096^3);
    the SIMT kernel (``simt``) reads every layout from its stages directly."""
    if in_dtype not in WP_DTYPES or (tf32 and not (_compat.HAS_TF32 and in_dtype == "float32")):
        return False
    if device.is_cuda and in_dtype == "float32" and not tf32 and layout != "NN" and not simt:
        return False
    if chunk not in CHUNKS or chunk < ITEM_BYTES[in_dtype]:
        return False
    if device.is_cuda:
        if getattr(device, "arch", 0) < 80:
            return False
    elif not _compat.HAS_CPU_TILES:
        return False
    return has_warp_features()


def has_warp_features() -> bool:
    """Whether this Warp has what the family's code needs on any device (``applies`` without the
    device and dtype checks): tiles, tile_astype, tile_matmul of strided views, tiles passed to native
    snippets. tile_gemm_func picks its pipelined body by this."""
    if not (_compat.HAS_TILES and _compat.HAS_TILE_ASTYPE and _compat.HAS_STRIDED_MATMUL_OPERANDS):
        return False
    return has_native_tile_args()



_ARCH_SPECIFIC_LOADED: set = set()




def stream_k_buffers(env, dev, spec: PipeSpec, M: int, N: int, K: int, batch: int) -> dict:
    """``{"workspace": ..., "flags": ...}`` for a stream-K launch (``spec.stream_k``), else ``{}``."""
    grid, n_ws, n_flags = stream_k_sizes(spec, M, N, K, batch, dev)
    if not grid:
        return {}
    return {"workspace": env.workspace(dev, (n_ws,), spec.acc_dtype, "stream_k"), "flags": env.zeroed_ints(dev, n_flags, "sk")}


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """``[(kernel, dim, inputs, block_dim, tiled)]`` for ``plan`` (no peeled edges: composite/peel.py)."""
    dev = p.A.device
    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    spec = plan.family_spec
    return [(*launch_args(spec, Av, Bv, Cv, Dk, alpha, beta, plan.M, plan.N, p.K, p.batch, Av.shape[0], Bv.shape[0],
                          c_nb, **stream_k_buffers(env, dev, spec, plan.M, plan.N, p.K, p.batch)), True)]
