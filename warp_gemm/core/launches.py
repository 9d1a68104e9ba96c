"""Recorded launches: every kernel warp_gemm launches goes through :func:`launch`.

Warp's ``wp.launch`` packs every argument into ctypes structs on every call: ~37% of a small call's
host time (cProfile of fp16 1000^3 on the H100 host: 147 us per call in a loop, while the same call
replayed from a CUDA graph takes 85 us of GPU time). A
launch recorded once (``record_cmd=True``) is replayed when the same kernel is launched with the same
argument values -- pointers, shapes, strides, dtypes and scalars -- which is exactly the parameter
block a fresh launch would pack, so a hit launches the same thing.

A recorded launch keeps its argument list (Warp's API capture reads it). It is therefore recorded with
*borrowed* arrays: non-owning views of the same memory (:func:`borrow`), never the caller's arrays or
the launcher's temporaries, so the cache keeps no memory alive. Replaying is safe whenever the key
matches, because the key holds every pointer: a hit means the memory this call passes (live for this
call) is at the addresses the recorded parameters name. Temporaries (split-K workspaces, padded
copies) usually come back at the same address from the stream-ordered allocators, so their launches
are replayed too: 16x8192x8192 fp16 (workspace, zero fill, GEMM, finishing pass) took 186 us of host
time per call with them launched afresh (H100 host; 125 us once recorded).
"""

from __future__ import annotations

import threading

import warp as wp

from warp_gemm import _compat
from warp_gemm.core.lru import LRU
from warp_gemm.core.operands import raw_view
from warp_gemm.core.options import options
from warp_gemm.families.common import elementwise

# Up to four launches per call (fill, GEMM, finishing pass, conversion) for a few hundred operand sets in
# rotation: with 512 entries 200 rotating split-K calls evicted each other and every call re-recorded
# (~40 us of host time per launch on a miss). A recorded launch is a few KB.
_cache = LRU(4096)
_active = threading.local()  # the Recorder of this thread's current call, if any


class Recorder:
    """Collects the recorded commands launched (in this thread) inside ``with Recorder() as r``;
    ``r.complete`` is False if any launch could not be recorded."""

    def __enter__(self):
        self.cmds, self.complete = [], True
        self._outer = getattr(_active, "rec", None)
        _active.rec = self
        return self

    def __exit__(self, *exc):
        _active.rec = self._outer
        return False


def borrow(x):
    """A non-owning Warp view of array ``x`` (same memory, shape, strides, dtype), memoized."""
    if getattr(x, "_wg_view", False):
        return x
    return raw_view(x.ptr, x.dtype, x.shape, x.strides, x.device)


def _key(kernel, dim: tuple, inputs: list, block_dim, dev, tiled: bool = True) -> tuple:
    key = [id(kernel), tuple(dim), block_dim, str(dev), tiled]
    for x in inputs:
        if isinstance(x, wp.array):
            key.append((x.ptr, x.shape, x.strides, x.dtype))
        else:
            key.append((type(x), x))
    return tuple(key)


# --- first loads, one at a time ---------------------------------------------------------------------
# Warp's Module.load is not safe when two threads make the first launch of one kernel at once (Warp
# 1.19, context.py): both miss the module's executable cache, both load the CUDA module, and the second
# replaces the first in ``Module.execs``. ``wp.launch(..., record_cmd=True)`` then builds its Launch
# from the kernel hooks of the executable it loaded but retains the one ``Module.load`` returns *now*
# (Launch.__init__ loads again): when the first executable is garbage-collected its CUDA module is
# unloaded and every replay of that Launch fails with "invalid resource handle" (error 400) -- the
# 8-thread failure of docs/reliability.md. The first launch of each (kernel, device, block_dim) is
# therefore made by one thread while the others wait; afterwards every load returns the one cached
# executable. Different kernels still compile and load in parallel.
_ready: set = set()  # (id(kernel), device, block_dim) whose module this process has loaded
_first_locks: dict = {}
_first_locks_guard = threading.Lock()


def _first_lock(key: tuple) -> threading.Lock:
    with _first_locks_guard:
        lk = _first_locks.get(key)
        if lk is None:
            lk = _first_locks[key] = threading.Lock()
        return lk


def first_load(kernel, dev, block_dim, load) -> None:
    """Run ``load()`` -- a first launch or an explicit module load of ``kernel`` -- unless this
    (kernel, device, block_dim) is known to be loaded; one thread at a time per key."""
    key = (id(kernel), str(dev), block_dim)
    if key in _ready:
        load()
        return
    with _first_lock(key):
        load()
        _ready.add(key)


# --- a call's first loads, in parallel ------------------------------------------------------------------
# A plan's kernels (staging copy, GEMM, finishing pass, conversion) would otherwise compile one after another
# on a first call, each on its first launch: fp32 33x17x65 took 2.95 s (H100 host, empty kernel cache) for
# three NVRTC builds of about 1 s. Inside ``with Deferred():`` this thread's launches are collected; on exit the
# modules not loaded yet are built by parallel threads (Warp's own ``force_load`` loads modules in threads too),
# then the launches are made in order. Arch-specific (sm_90a) modules are loaded by their families before their
# launch is collected, never beside a plain build (``_compat.load_plain``).
PRELOAD_WORKERS = 4


class Deferred:
    """Collect this thread's launches; on a clean exit build the missing modules in parallel, then launch them in
    order. On an exception nothing is launched. Nested blocks hand their launches to the outer one."""

    def __enter__(self):
        self.todo = []
        self._outer = getattr(_active, "defer", None)
        if self._outer is None:
            _active.defer = self
        return self

    def __exit__(self, exc_type, *exc):
        if self._outer is not None:
            return False
        _active.defer = None
        if exc_type is None:
            todo, self.todo = self.todo, []
            preload([(k, dev, bd) for k, _, _, dev, bd, _ in todo])
            for kernel, dim, inputs, dev, block_dim, tiled in todo:
                launch(kernel, dim, inputs, dev, block_dim, tiled)
        return False


def preload(kernels) -> int:
    """Build the modules of ``[(kernel, device, block_dim)]`` that this process has not loaded, in parallel threads
    (CUDA devices; at most :data:`PRELOAD_WORKERS` at once); returns how many were built. One module at a time
    changes nothing, so then the first launch loads it as usual."""
    todo, seen = [], set()
    for kernel, dev, block_dim in kernels:
        key = (id(kernel), str(dev), block_dim)
        mkey = (id(kernel.module), str(dev), block_dim)
        if key in _ready or mkey in seen or getattr(dev, "is_cpu", True) or not _compat.HAS_LOAD_BLOCK_DIM:
            continue
        seen.add(mkey)
        todo.append((kernel, dev, block_dim))
    if len(todo) < 2:
        return 0
    from concurrent.futures import ThreadPoolExecutor

    def one(item):
        kernel, dev, block_dim = item
        first_load(kernel, dev, block_dim, lambda: _compat.load_plain(kernel.module, dev, block_dim))

    with ThreadPoolExecutor(max_workers=min(len(todo), PRELOAD_WORKERS)) as ex:
        for f in [ex.submit(one, item) for item in todo]:
            f.result()  # a build error is raised here, before anything is launched
    return len(todo)


# --- CPU launches, one thread per module at a time ----------------------------------------------------
# Warp's CPU tile kernels keep their "shared memory" behind a static pointer per compiled module
# (warp/native/tile.h: ``static tile_shared_storage_t* shared_tile_storage`` -- "Ideally this would be
# thread_local, but LLVM's JIT doesn't support TLS yet"): two threads running kernels of one module at
# once share it, which crashed (SIGSEGV / SIGILL) or could mix their tiles -- 8 threads calling one
# CPU tile GEMM, Warp 1.19.0, tests/test_concurrency.py. CPU launches run in the calling thread, so a
# per-module lock around them makes them safe; different modules still run in parallel.
_module_locks: dict = {}


def cpu_lock(kernel) -> threading.Lock:
    """The lock CPU launches of ``kernel``'s module hold while they run."""
    key = id(getattr(kernel, "module", kernel))
    lk = _module_locks.get(key)
    if lk is None:
        with _first_locks_guard:
            lk = _module_locks.setdefault(key, threading.Lock())
    return lk


# --- replays straight through Warp's native launcher ----------------------------------------------------
# ``Launch.launch`` re-reads the launch's device context, bounds and hooks and converts eleven Python values
# for the native call on every replay: 6-10 us per launch on the H200 host, where a call replayed from
# the fast path spends 19-31 us in all. A CUDA launch's native arguments are fixed once it is recorded
# (the parameter block is patched in place, core/rebind.py), so they are converted once and the native
# launcher is called with them directly -- except while Warp captures a graph (it retains the module
# then) or records an API capture (it records the launch from its argument list): Warp's own path.
_NATIVE_ARGS = 11  # wp_cuda_launch_kernel's parameters (Warp 1.19); any other signature: Warp's path


def _native(cmd):
    """``(native launcher, its leading ctypes arguments)`` of recorded CUDA launch ``cmd``, or False (CPU,
    adjoint, or a Warp whose launcher takes other parameters). Memoized on the launch (``_wg_native``)."""
    import ctypes

    n = False
    try:
        fn = _compat.WARP_CONTEXT.runtime.core.wp_cuda_launch_kernel
        if (not cmd.adjoint and not cmd.device.is_cpu and len(fn.argtypes or ()) == _NATIVE_ARGS
                and cmd.params_addr is not None):
            n = (fn, (ctypes.c_void_p(cmd.device.context), ctypes.c_void_p(cmd.hooks.forward),
                      ctypes.c_size_t(cmd.bounds.size), ctypes.c_int(cmd.max_blocks), ctypes.c_int(cmd.block_dim),
                      ctypes.c_int(int(cmd.grid_stride)), ctypes.c_int(cmd.cluster_dim),
                      ctypes.c_int(cmd.hooks.forward_smem_bytes), cmd.params_addr))
    except AttributeError:
        n = False
    cmd._wg_native = n
    return n


def _capturing(rt) -> bool:
    return bool(getattr(rt, "captures", None)) or getattr(rt, "_apic_capture", None) is not None


def replay(cmds, stream) -> None:
    """Launch recorded commands in order (``stream`` None: the CPU, each under its module's lock)."""
    if stream is not None:
        rt = _compat.WARP_CONTEXT.runtime
        if _capturing(rt):
            for cmd in cmds:
                cmd.launch(stream)
            return
        handle = stream.cuda_stream
        for cmd in cmds:
            n = cmd.__dict__.get("_wg_native")
            if n is None:
                n = _native(cmd)
            # a failed native launch (nonzero) is made again by Warp's path, which raises its error
            if n is False or n[0](*n[1], handle, None):
                cmd.launch(stream)
        return
    for cmd in cmds:
        with cpu_lock(cmd.kernel):
            cmd.launch()


def launch(kernel, dim: tuple, inputs: list, dev, block_dim: int | None = None, tiled: bool = True) -> None:
    """``wp.launch_tiled(kernel, dim, inputs, block_dim, device=dev)`` (``block_dim`` given) or
    ``wp.launch(kernel, dim, inputs, device=dev)``, replaying a recorded launch with the same
    arguments where one exists. ``tiled=False``: a plain (SIMT) kernel launched with ``wp.launch``
    and ``block_dim`` threads per block where given (the GEMV family). The first launch of a kernel on
    a device is serialised (see above)."""
    d = getattr(_active, "defer", None)
    if d is not None:
        d.todo.append((kernel, dim, inputs, dev, block_dim, tiled))
        return
    if (id(kernel), str(dev), block_dim) in _ready:
        _launch(kernel, dim, inputs, dev, block_dim, tiled)
    else:
        first_load(kernel, dev, block_dim, lambda: _launch(kernel, dim, inputs, dev, block_dim, tiled))


def _launch(kernel, dim: tuple, inputs: list, dev, block_dim: int | None, tiled: bool = True) -> None:
    if getattr(dev, "is_cpu", dev == "cpu"):
        with cpu_lock(kernel):
            _launch_now(kernel, dim, inputs, dev, block_dim, tiled)
    else:
        _launch_now(kernel, dim, inputs, dev, block_dim, tiled)


def _launch_now(kernel, dim: tuple, inputs: list, dev, block_dim: int | None, tiled: bool = True) -> None:
    plain_block = {} if tiled or block_dim is None else {"block_dim": block_dim}
    tiled = tiled and block_dim is not None
    rec = getattr(_active, "rec", None)
    if not (options().record_launches and _compat.HAS_RECORD_CMD):
        if rec is not None:
            rec.complete = False
        if tiled:
            wp.launch_tiled(kernel, dim=dim, inputs=inputs, block_dim=block_dim, device=dev)
        else:
            wp.launch(kernel, dim=dim, inputs=inputs, device=dev, **plain_block)
        return
    key = _key(kernel, dim, inputs, block_dim, dev, tiled)
    cmd = _cache.get(key)
    if cmd is None:
        args = [borrow(x) if isinstance(x, wp.array) else x for x in inputs]
        if tiled:
            cmd = wp.launch_tiled(kernel, dim=dim, inputs=args, block_dim=block_dim, device=dev, record_cmd=True)
        else:
            cmd = wp.launch(kernel, dim=dim, inputs=args, device=dev, record_cmd=True, **plain_block)
        _cache.put(key, cmd)
    if rec is not None:
        rec.cmds.append(cmd)
    cmd.launch()


# --- elementwise launches -----------------------------------------------------------------------------
def convert(dst, src, dst_dtype: str, src_dtype: str, scale: float = 1.0) -> None:
    """``dst[...] = scale * src[...]`` with dtype conversion; ``src`` broadcasts over size-1 dims."""
    if dst.size == 0:
        return
    with elementwise.lock:
        k = elementwise.convert_kernel(src_dtype, dst_dtype)
    launch(k, dst.shape, [dst, src, scale], dst.device)


def stage(jobs, dtype: str) -> None:
    """Each ``(dst, src)`` of ``jobs`` (one or two): ``src`` (``(nb, r, c)``, any strides) into the first
    ``c`` columns of ``dst`` (``(nb, r, cp)``, rows 16-byte aligned, ``cp`` a whole number of 16-byte
    chunks), zeros in the rest -- one launch for both (``elementwise.stage_kernel``)."""
    jobs = [(d, s) for d, s in jobs if d.size]
    if not jobs:
        return
    with elementwise.lock:
        k = elementwise.stage_kernel(dtype)
    counts = [d.size * d.strides[2] // 16 for d, _ in jobs]
    for (d, _), n in zip(jobs, counts):
        if n >= 2**31:  # the kernel indexes chunks with 32-bit ints
            raise ValueError(f"cannot stage a {dtype} operand of shape {tuple(d.shape)}: {n} 16-byte chunks "
                             f"(at most 2**31 - 1)")
    if len(jobs) == 2 and sum(counts) < 2**31:
        (da, sa), (db, sb) = jobs
        launch(k, (sum(counts),), [da, sa, db, sb, counts[0]], da.device)
        return
    for (d, s), n in zip(jobs, counts):
        launch(k, (n,), [d, s, d, s, n], d.device)


def fill(dst, dtype: str, value: float = 0.0) -> None:
    if dst.size == 0:
        return
    with elementwise.lock:
        k = elementwise.fill_kernel(dtype)
    launch(k, dst.shape, [dst, value], dst.device)


def finish_splitk(dst, w, c, out_dtype: str, acc_dtype: str, alpha: float, beta: float) -> None:
    """``dst = alpha * w + beta * c`` (``c`` broadcasts over size-1 dims; None: not read)."""
    with elementwise.lock:
        k = elementwise.finish_kernel(acc_dtype, out_dtype)
    launch(k, dst.shape, [dst, w, c if c is not None else dst, alpha, beta, int(c is not None)], dst.device)
