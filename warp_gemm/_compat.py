"""Everything warp_gemm knows about differences between warp-lang releases, in one place.

The installed Warp is probed once at import through its builtin table, ``hasattr`` and
``inspect.signature`` -- never by comparing version strings. Other modules read these flags and
call these helpers; no other module looks at Warp's version. ``WARP_VERSION`` is for messages only.

Release history the probes stand for (see docs/compat.md and shared WARP_TILES.md):
1.5 tile-index offsets (unsupported) . 1.6 element offsets, GPU only . 1.7 CPU tiles,
``module="unique"``, 16-bit tiles accumulate in 16 bit . 1.8 ``tile_astype`` . 1.9 ``bounds_check``,
``compile_aot_module`` . 1.11 alpha/beta . 1.13 ``aligned``, ``wp.bfloat16``, ``module_options`` .
1.14 bf16 operands need ``enable_backward=False`` modules . 1.19 ``precision="tf32"``.
"""

from __future__ import annotations

import importlib
import inspect
import os
import threading
import time

import warp as wp

WARP_VERSION: str = getattr(wp.config, "version", None) or getattr(wp, "__version__", "unknown")


def _context_module():
    # warp.context moved to warp._src.context in 1.13.
    for name in ("warp._src.context", "warp.context"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "builtin_functions"):
            return mod
    raise ImportError("cannot find Warp's builtin function table (warp._src.context / warp.context)")


_ctx = _context_module()


def _builtin_params(name: str) -> set[str]:
    """Union of the parameter names of every overload of a Warp builtin ({} if it does not exist)."""
    fn = _ctx.builtin_functions.get(name)
    if fn is None:
        return set()
    params: set[str] = set()
    for ov in getattr(fn, "overloads", None) or [fn]:
        params.update((getattr(ov, "input_types", None) or {}).keys())
    return params


_kernel_params = set(inspect.signature(wp.kernel).parameters)

HAS_TILES: bool = "tile_load" in _ctx.builtin_functions
#: 1.6+: ``tile_load(a, shape=, offset=)`` with element offsets; 1.5 took tile indices.
TILE_ELEMENT_OFFSETS: bool = "shape" in _builtin_params("tile_load")
#: 1.7+: ``@wp.kernel(module="unique")``.
HAS_UNIQUE_MODULE: bool = "module" in _kernel_params
#: Tiles reached the CPU backend in the same release (1.7) as ``module="unique"``; no cheaper probe
#: exists short of compiling a kernel, so that arrival stands for CPU tile support.
HAS_CPU_TILES: bool = HAS_TILES and HAS_UNIQUE_MODULE
#: 1.8+: ``tile_astype``. The same release made 16-bit inputs accumulate in the ``out`` tile's dtype;
#: 1.7 accumulated float16 in float16 (relative error 6e-2 in the probe), so without ``tile_astype``
#: warp_gemm widens 16-bit operands to float32 on the device before the GEMM kernel.
HAS_TILE_ASTYPE: bool = "tile_astype" in _ctx.builtin_functions
#: ``tile_empty`` (a tile left uninitialized; a builtin kernels can call, not a ``warp`` module attribute
#: in 1.19). The pipelined family's shared A/B stage buffers are wholly overwritten by their copies:
#: zero-filling them was ~45% of a one-K-step block's instructions (ncu, H100).
HAS_TILE_EMPTY: bool = "tile_empty" in _ctx.builtin_functions
WIDEN_16BIT_INPUTS: bool = not HAS_TILE_ASTYPE
#: 1.9+: ``bounds_check=`` on tile_load/tile_store.
HAS_BOUNDS_CHECK: bool = "bounds_check" in _builtin_params("tile_load")
#: 1.13+: ``aligned=`` on tile_load/tile_store.
HAS_ALIGNED: bool = "aligned" in _builtin_params("tile_load")
#: 1.11+: ``tile_matmul(..., alpha=, beta=)``.
HAS_MATMUL_ALPHA_BETA: bool = "alpha" in _builtin_params("tile_matmul")
#: 1.19+: ``tile_matmul(..., precision="tf32")``. Elsewhere allow_tf32 gives exact fp32.
HAS_TF32: bool = "precision" in _builtin_params("tile_matmul")
#: 1.13+: ``wp.bfloat16``.
HAS_BF16: bool = hasattr(wp, "bfloat16")
#: 1.13+: ``@wp.kernel(module_options=...)``.
HAS_MODULE_OPTIONS_KW: bool = "module_options" in _kernel_params
#: 1.9+: offline CUDA compilation without a GPU.
HAS_COMPILE_AOT: bool = hasattr(wp, "compile_aot_module")
#: ``wp.div_approx`` (kernel code only: div.approx.f32 on CUDA, an exact division on the CPU), 1.12+
HAS_DIV_APPROX: bool = "div_approx" in _ctx.builtin_functions
#: <= 1.6: the CUTLASS ``wp.matmul`` (benchmarks only).
HAS_OLD_MATMUL: bool = hasattr(wp, "matmul")
#: ``wp.launch(..., record_cmd=True)`` returns a replayable launch (all supported releases have it).
HAS_RECORD_CMD: bool = "record_cmd" in inspect.signature(wp.launch).parameters


def _context_module():
    """The Warp module whose ``runtime`` carries the recording tape and the API capture.

    ``warp._src.context`` (1.13+) is probed first: where a ``warp.context`` shim also exists it may
    hold a stale copy of ``runtime``. Older releases keep it in ``warp.context``.
    """
    for name in ("warp._src.context", "warp.context"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "runtime"):
            return mod
    return None


#: Warp's module holding ``runtime`` (read ``WARP_CONTEXT.runtime`` at use: it is set by ``wp.init()``).
WARP_CONTEXT = _context_module()
#: 1.19+: ``@wp.kernel(launch_bounds=(block_dim, min_blocks))``.
HAS_LAUNCH_BOUNDS: bool = "launch_bounds" in _kernel_params
#: 1.19+: ``@wp.kernel(cluster_dim=n)``: thread-block clusters of n blocks (CUDA ``__cluster_dims__``, sm_90+).
HAS_CLUSTER_DIM: bool = "cluster_dim" in _kernel_params
#: 1.18+: CPU tile kernels may use several threads per block.
HAS_CPU_BLOCKS: bool = hasattr(wp.config, "enable_cpu_blocks")
# sm_90a compiles (wgmma) through wp.config.cuda_arch_suffix = "a" (warp-lang 1.19 has it)
HAS_CUDA_ARCH_SUFFIX: bool = hasattr(wp.config, "cuda_arch_suffix")
#: ``Module.load(device, block_dim)`` (a module loaded ahead of its first launch for that block size)
HAS_LOAD_BLOCK_DIM: bool = "block_dim" in inspect.signature(_ctx.Module.load).parameters
#: 1.12 and 1.19 (not 1.7): a user ``@wp.func`` may take tile parameters, annotated ``wp.tile(...)``
#: (1.12+ passes them by reference). 1.7 has no tile annotation and no type code for a tile argument,
#: so a function that takes a tile cannot be declared (or instantiated, with ``Any``) there.
HAS_TILE_FUNC_ARGS: bool = isinstance(getattr(wp, "tile", None), type)


def _lto_dot_params() -> set[str]:
    """Parameter names of Warp's internal MathDx GEMM builder (``build_lto_dot``), wherever the
    release keeps it; empty when it cannot be found."""
    for name in ("warp._src.build", "warp.build"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, "build_lto_dot", None)
        if fn is not None:
            return set(inspect.signature(fn).parameters)
    return set()


#: 1.19: ``tile_matmul`` passes each operand's leading dimension (from the tile's strides) to
#: cuBLASDx, so a ``tile_view`` into a wider shared tile -- a padded layout -- is multiplied
#: correctly. Up to 1.18 (``build_lto_dot`` without ``lda``) MathDx assumed dense tiles: a view
#: would be read wrongly, so warp_gemm pads its shared tiles only where this holds.
HAS_STRIDED_MATMUL_OPERANDS: bool = "lda" in _lto_dot_params()

#: The oldest release warp_gemm supports at all, and the oldest with CPU tiles (for messages).
MIN_RELEASE = "1.7"
MIN_CPU_RELEASE = "1.7"

#: 1.6 is refused: on an H100 with warp-lang 1.6.2 the GPU test matrix gave wrong results in 31 of
#: 357 cases (2026-11-21): K tiles deeper than K returned garbage or Inf (128x128x32 fp32: Inf;
#: 64x64x64 fp16: relative error 2.0), tile_atomic_add of a tile_matmul result does not compile
#: (NVRTC: no matching atomic_add for a shared tile) or adds nothing (split-K results all zero).
#: A clear error is better than a wrong number; 1.7 (the ``module="unique"`` probe) passes everything.
SUPPORTED: bool = HAS_TILES and TILE_ELEMENT_OFFSETS and HAS_UNIQUE_MODULE


class UnsupportedWarpError(RuntimeError):
    """The installed warp-lang lacks a feature the call needs."""


def require_supported() -> None:
    if not SUPPORTED:
        raise UnsupportedWarpError(
            f"warp_gemm needs warp-lang >= {MIN_RELEASE} (element-offset tiles with correct partial tiles "
            f"and tile_atomic_add; 1.6 gave wrong results on the GPU, see docs/compat.md); "
            f"warp-lang {WARP_VERSION} is installed. Upgrade with: pip install -U warp-lang"
        )


def require_device(device) -> None:
    """Raise if Warp cannot run tile kernels on ``device``; acquire its CUDA context (see init)."""
    require_supported()
    if device.is_cuda and device.alias not in _ready_devices:
        init(device)
    if device.is_cpu and not HAS_CPU_TILES:
        raise UnsupportedWarpError(
            f"tile kernels on the CPU need warp-lang >= {MIN_CPU_RELEASE}; warp-lang {WARP_VERSION} "
            "runs them on CUDA devices only. Use a CUDA device or upgrade warp-lang."
        )


# --- one-time, thread-safe initialisation ---------------------------------------------------------
# Warp's own first-time initialisation is not thread-safe: 8 threads entering it at once were seen to
# nest the kernel-cache path (~/.cache/warp/1.19.0/1.19.0/1.19.0/...). warp_gemm initialises once,
# under a lock, before any other Warp call.
_init_lock = threading.Lock()
_initialised = False
_ready_devices: set = set()  # CUDA devices whose context this process has acquired (under _init_lock)


def init(device=None) -> None:
    """Initialise Warp once (thread-safe) and, for a CUDA ``device`` (a Warp device or its name),
    acquire its context once under the same lock.

    Warp 1.19 acquires a CUDA device's primary context lazily, on first use, and publishes the context
    before it creates the device's stream (``Device.context`` then ``_init_streams``): a second thread
    that uses the device in that window finds ``device.stream`` None (``AttributeError: 'NoneType'
    object has no attribute 'cuda_stream'`` in ``wp.array``/``wp.copy``; 6 of 24 eight-thread runs on an
    H100). warp_gemm acquires contexts here, under a lock, before it touches a device, and when another
    thread (one of the caller's, outside this lock) is inside that window it waits for the stream
    (``_await_stream``) rather than go on to a launch that would read it. Programs that build Warp arrays
    from several threads should call ``warp_gemm.init()`` once in the main thread first: Warp's own calls
    in those threads are not covered (docs/reliability.md)."""
    global _initialised
    if not _initialised:
        with _init_lock:
            if not _initialised:
                if os.environ.get("WARP_GEMM_VERBOSE", "") in ("", "0"):
                    quiet()
                wp.init()
                _initialised = True
    if device is not None:
        dev = wp.get_device(device) if isinstance(device, str) else device
        if dev.is_cuda and dev.alias not in _ready_devices:
            with _init_lock:
                if dev.alias not in _ready_devices:
                    dev.context  # noqa: B018 -- acquires the context and creates its streams
                    _await_stream(dev)
                    _ready_devices.add(dev.alias)


#: How long :func:`init` waits for another thread to finish creating a device's streams (seconds).
STREAM_WAIT_S = 10.0


def _await_stream(dev) -> None:
    """Return once ``dev.stream`` exists. ``Device.context`` returns as soon as a context is published,
    which another thread may have done without yet creating the streams (Warp 1.19's order): until it
    has, ``dev.stream`` is None. After ``STREAM_WAIT_S`` the caller goes on (and meets Warp's error)."""
    deadline = time.monotonic() + STREAM_WAIT_S
    while getattr(dev, "stream", None) is None and time.monotonic() < deadline:
        time.sleep(0.001)


def quiet() -> None:
    """Silence Warp's per-module compile/load messages (``quiet`` went away in 1.18: ``log_level``)."""
    if hasattr(wp.config, "quiet"):
        wp.config.quiet = True
    if hasattr(wp.config, "log_level"):
        try:
            import logging

            wp.config.log_level = logging.WARNING
        except Exception:
            pass


# --- kernels ----------------------------------------------------------------------------------------
_MODULE_OPTIONS = {
    # Every warp_gemm kernel is forward-only: gradients are computed by warp_gemm's own GEMMs on
    # transposed layouts. It also halves the generated code, and 1.14+ rejects bf16 tile operands in
    # modules with backward code.
    "enable_backward": False,
}


def make_kernel(func, key: str, launch_bounds: tuple[int, int] | None = None, cluster_dim: int = 1):
    """``@wp.kernel`` for ``func`` in a module of its own, forward-only.

    ``key`` names the configuration; it becomes the kernel's name so logs and caches are readable.
    ``launch_bounds`` (CUDA ``__launch_bounds__``) is passed only where Warp has it (1.19+). ``cluster_dim`` > 1
    (thread-block clusters of that many blocks) needs ``HAS_CLUSTER_DIM``: a ValueError without it.
    """
    init()
    func.__name__ = func.__qualname__ = key
    if cluster_dim != 1 and not HAS_CLUSTER_DIM:
        raise ValueError(f"make_kernel: {key} asks for clusters of {cluster_dim} blocks; warp-lang {WARP_VERSION} "
                         f"has no cluster_dim kernel option (1.19 has it)")
    if HAS_MODULE_OPTIONS_KW:
        extra = {"launch_bounds": launch_bounds} if launch_bounds and HAS_LAUNCH_BOUNDS else {}
        if cluster_dim != 1:
            extra["cluster_dim"] = int(cluster_dim)
        return wp.kernel(func, module="unique", enable_backward=False, module_options=dict(_MODULE_OPTIONS),
                         **extra)
    if HAS_UNIQUE_MODULE:
        k = wp.kernel(func, module="unique", enable_backward=False)
    else:
        # 1.6: no module= argument; a module is named after ``__module__``, so give each its own.
        func.__module__ = f"warp_gemm._gen.{key}"
        k = wp.kernel(func, enable_backward=False)
    k.module.options.update(_MODULE_OPTIONS)
    return k


def bf16_dtype():
    if not HAS_BF16:
        raise TypeError(f"bfloat16 needs warp-lang >= 1.13 (wp.bfloat16); warp-lang {WARP_VERSION} is installed")
    return wp.bfloat16


def features() -> dict[str, bool | str]:
    """The probed flags, for ``warp-gemm info`` and bug reports."""
    names = [n for n in globals() if n.isupper() and isinstance(globals()[n], (bool, str))]
    return {n: globals()[n] for n in names}


def sm_count(device) -> int:
    """Multiprocessors of a CUDA device (132 on an H100 SXM when Warp does not say)."""
    return int(getattr(device, "sm_count", 0) or 132)


class _SuffixGate:
    """Who may compile while ``wp.config.cuda_arch_suffix`` is set: one arch-specific load at a time, alone, or any
    number of plain loads (:func:`load_plain`) at once -- so a plain module is never built with the suffix by a
    load of ours, and its kernel-cache entry stays the one ``warp-gemm precompile`` writes."""

    def __init__(self):
        self._cond = threading.Condition()
        self._plain = 0
        self._arch = False

    def plain(self):
        return _Hold(self, False)

    def arch(self):
        return _Hold(self, True)


class _Hold:
    def __init__(self, gate: _SuffixGate, arch: bool):
        self.gate, self.arch = gate, arch

    def __enter__(self):
        g = self.gate
        with g._cond:
            if self.arch:
                g._cond.wait_for(lambda: not g._arch and g._plain == 0)
                g._arch = True
            else:
                g._cond.wait_for(lambda: not g._arch)
                g._plain += 1

    def __exit__(self, *exc):
        g = self.gate
        with g._cond:
            if self.arch:
                g._arch = False
            else:
                g._plain -= 1
            g._cond.notify_all()
        return False


_suffix_gate = _SuffixGate()


def load_arch_specific(module, device, block_dim: int) -> None:
    """Load ``module`` on ``device`` compiled for the device's arch-specific target (sm_90a: wgmma, setmaxnreg).
    Warp reads ``wp.config.cuda_arch_suffix`` only when it compiles, so it is "a" while the module loads, alone among
    warp_gemm's loads (:class:`_SuffixGate`), then restored. For that moment the setting is process-wide: a module
    that another thread compiles outside warp_gemm then would get the suffix too."""
    with _suffix_gate.arch():
        old = wp.config.cuda_arch_suffix
        wp.config.cuda_arch_suffix = "a"
        try:
            module.load(device, block_dim)
        finally:
            wp.config.cuda_arch_suffix = old


def load_plain(module, device, block_dim) -> None:
    """Load ``module`` on ``device`` for ``block_dim`` (None: the module's own), never while an arch-specific load
    has the suffix set; plain loads run in parallel with each other (``core.launches.Deferred``)."""
    with _suffix_gate.plain():
        module.load(device, block_dim)
