"""Plan -> launches: device and stream scope, temporaries, recorded launches and the call-plan cache.

``run`` is the one path every product takes (``api``, ``autograd``'s backward products, the tuner):
validate (core.problem) -> plan (core.plan, pure) -> execute (here). A repeated call with the same
operands (pointers, shapes, strides, dtypes), scalars and options replays the launches it recorded
last time without planning again: ~45-60 us of host time per small call before, see
docs/performance.md.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import warp as wp

from warp_gemm import _compat
from warp_gemm.config import tables
from warp_gemm.core import launches
from warp_gemm.core.launches import convert, fill
from warp_gemm.core.lru import LRU
from warp_gemm.core.operands import ITEMSIZE, Operand, _torch, layout_view, raw_view, torch_dtype, wp_view
from warp_gemm.core.options import options
from warp_gemm.core.plan import Plan, make_plan
from warp_gemm.core.problem import Problem, validate
from warp_gemm.families import registry as families
from warp_gemm.families.base import Env
from warp_gemm.families.common import epilogue
from warp_gemm.families.common.kernels import WP_DTYPES


def run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname, activation=None):
    """``act(alpha * op(a) @ op(b) + beta * c)`` into ``out`` (or a new result): the whole call, no
    autograd. ``activation``: None or a name of ``kernels.epilogue.ACTIVATIONS`` (applied in the
    pipelined family's epilogue, else in one elementwise pass over the output)."""
    opts = options()
    fast = _fast_key(a, b, c, out, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation)
    new_result = False
    if fast is not None:
        fk, stream = fast
        hit = _fast.peek(fk)  # fast entries age in insertion order (a miss re-inserts them)
        if hit is not None:
            if out is not None:
                _replay(hit, stream, a, b, c, out)
                return out
            out, new_result = hit.allocate(), True  # a new result, as validate would make it
            cmds = _fast.peek((fk, _ptr(out)))
            if cmds is not None:
                _replay(cmds, stream, a, b, c, out)
                return out
    if activation is not None:
        activation = epilogue.check_activation(activation)
    p = validate(a, b, c, alpha, beta, trans_a, trans_b, out, fname)
    if p.M == 0 or p.N == 0:
        return p.result
    alpha, beta = float(alpha), float(beta)
    if p.A.device.is_cpu and opts.cpu_backend == "host" and opts.family in (None, "host") and config is None \
            and p.K and alpha != 0.0:
        call = _HostCall(p, alpha, beta, activation)  # the CPU's BLAS: no launches to record
        call.run(p.A.obj, p.B.obj, None if p.C is None else p.C.obj, p.D.obj)
        if fast is not None and _described_in_place(p, a, b, c, out):
            _keep_fast(fast[0], p, None if new_result else out, call)
        return p.result
    key = stream = None
    if opts.record_launches and _compat.HAS_RECORD_CMD:
        # A plan's cached workspaces belong to one (stream, thread) (see ``workspace``): so does the plan.
        stream = _replay_stream(p)
        key = _plan_key(p, alpha, beta, allow_tf32, config, opts, activation)
        if key is not None:
            key += (None if stream is None else stream.cuda_stream, threading.get_ident())
    cmds = _plans.get(key) if key is not None else None
    if cmds is None:
        with _stream_scope(p):
            plan = make_plan(p, alpha, beta, allow_tf32, config, opts, activation)
            with launches.Recorder() as rec:
                temporaries = execute(plan, p, alpha, beta)
        if key is None or temporaries or not rec.complete or plan.family == "host":
            return p.result
        cmds = tuple(rec.cmds)
        _plans.put(key, cmds)
    else:
        # A replay names its stream directly (a recorded launch carries its device's context), so it
        # skips entering a device/stream scope: ~10 us less host time per small call.
        launches.replay(cmds, stream)
    if fast is not None and _described_in_place(p, a, b, c, out):
        _keep_fast(fast[0], p, None if new_result else out, cmds)
    return p.result


def _replay_stream(p: Problem):
    """The stream a scoped launch would take: torch's current stream on the torch path, else the
    device's current Warp stream (None on the CPU)."""
    dev = p.A.device
    if dev.is_cpu:
        return None
    torch = _torch()
    if torch is not None and "torch" in (p.A.kind, p.B.kind, p.D.kind):
        return _warp_stream(torch.cuda.current_stream(dev.ordinal))
    return dev.stream


# --- call plans ----------------------------------------------------------------------------------------
# A call that needs no temporaries is determined by its operands (pointers, shapes, strides, dtypes),
# scalars and options: the launches it recorded are kept and replayed on the next equal call, which
# skips planning and argument assembly. The key also holds the options and the tuning-cache directory;
# saving a table drops every plan (a new table may choose another configuration). Replaying is as safe
# as replaying one recorded launch (see core/launches.py).
# Sized for a few hundred operand sets in rotation (the benchmark runner cycles up to 200 to defeat the
# L2 cache; a pipeline of buffers does the same): a plan is a few hundred bytes.
_plans = LRU(1024)
_fast = LRU(2048)  # the same launches under the calls' raw signatures (see "the fast path" below)


def clear_plans() -> None:
    """Drop every kept call plan (tables.save does: a new table may choose another configuration)."""
    _plans.clear()
    _fast.clear()


tables.on_save.append(clear_plans)


def _plan_key(p: Problem, alpha: float, beta: float, allow_tf32: bool, config, opts, activation=None) -> tuple:
    def d(op):
        return None if op is None else (op.kind, op.ptr, op.shape, op.strides, op.dtype)

    return (d(p.A), d(p.B), d(p.C), d(p.D), str(p.A.device), alpha, beta, bool(allow_tf32), config, opts,
            activation, os.environ.get("WARP_GEMM_CACHE_DIR"))


# --- the fast path: a repeated call skips validation too ---------------------------------------------------
# A call plan's key is built from the validated Problem; building that Problem (describing every operand,
# checking shapes, dtypes, devices and aliasing) was ~70% of a replayed call's host time (cProfile, CPU
# tiles backend, 64^3 torch operands with out: 16 us per call of which validate 11). The outcome of
# validation and planning is a function of what ``_sig`` reads from each container (pointer, shape,
# strides, dtype, device) and of the scalars and options, so a call whose raw signature equals that of
# an earlier call that was validated, planned and kept replays the same launches (on the CPU's BLAS: runs
# the kept non-owning NumPy views, _HostCall). Only plain wp.array, torch.Tensor/Parameter and
# numpy.ndarray operands that validation used as they are (no conj/neg or negative-stride copy) take it;
# subclasses, scalars of other types and every first call take the full path.
class _NewResult:
    """How validate made the result of a call without ``out`` (a plain empty array of the caller's kind)."""

    __slots__ = ("kind", "shape", "dtype", "device")

    def __init__(self, p: Problem):
        self.kind, self.shape, self.dtype = p.D.kind, tuple(p.D.shape), p.D.dtype
        self.device = p.result.device

    def allocate(self):
        if self.kind == "torch":
            return _torch().empty(self.shape, dtype=torch_dtype(self.dtype), device=self.device)
        if self.kind == "numpy":
            return np.empty(self.shape, dtype=self.dtype)
        return wp.empty(self.shape, dtype=WP_DTYPES[self.dtype], device=self.device)


def _sig(x):
    """What validation and planning read from one operand, cheaply; None: not a fast-path operand."""
    f = _SIGS.get(type(x))
    if f is None:
        f = _sig_of_type(type(x))
    return f(x)


def _sig_wp(x):
    return (x.ptr, x.shape, x.strides, x.dtype, x.device.alias)


def _sig_np(x):
    return (x.__array_interface__["data"][0], x.shape, x.strides, x.dtype, x.flags.writeable)


def _sig_torch(x):
    return (x.data_ptr(), x.shape, x.stride(), x.dtype, x.device, x.is_neg())


def _no_sig(x):
    return None


_SIGS = {wp.array: _sig_wp, np.ndarray: _sig_np}


def _sig_of_type(t):
    """The signature function for operands of type ``t`` (torch's types are known once torch is loaded;
    anything else -- subclasses included -- takes the full path)."""
    torch = _torch()
    if torch is not None and t in (torch.Tensor, torch.nn.Parameter):
        _SIGS[t] = _sig_torch
        return _sig_torch
    if torch is None:
        return _no_sig  # not cached: torch may be imported later
    _SIGS[t] = _no_sig
    return _no_sig


def _ptr(x) -> int:
    if type(x) is wp.array:
        return x.ptr
    return x.__array_interface__["data"][0] if type(x) is np.ndarray else x.data_ptr()


_SCALARS = (float, int)


def _fast_key(a, b, c, out, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation):
    """``(key, stream)`` of a call that may take the fast path, or None."""
    if not (opts.record_launches and _compat.HAS_RECORD_CMD) or type(alpha) not in _SCALARS \
            or type(beta) not in _SCALARS or type(trans_a) is not bool or type(trans_b) is not bool:
        return None
    sa, sb = _sig(a), _sig(b)
    if sa is None or sb is None:
        return None
    sc = so = None
    if c is not None and (sc := _sig(c)) is None:
        return None
    if out is not None and (so := _sig(out)) is None:
        return None
    if type(a) is np.ndarray:
        return _key_tuple(sa, sb, sc, so, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation,
                          None), None
    dev = a.device
    if type(a) is wp.array:
        if dev.is_cpu:
            stream = None
        elif type(b) is wp.array and (out is None or type(out) is wp.array):
            stream = dev.stream
            if stream is None:  # a context another thread is still initialising: the full path waits
                return None
        else:
            return None  # mixed containers: the full path decides the stream
        handle = None if stream is None else stream.cuda_stream
    elif dev.type == "cuda":
        stream = _torch_stream(dev.index)
        if stream is None:
            return None
        handle = stream.cuda_stream
    else:
        stream = handle = None
    return _key_tuple(sa, sb, sc, so, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation,
                      handle), stream


def _key_tuple(sa, sb, sc, so, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation, handle):
    return ("fast", sa, sb, sc, so, alpha, beta, trans_a, trans_b, bool(allow_tf32), config, opts, activation,
            _cache_dir_env(), handle, threading.get_ident())


# The tuning-cache directory variable, read without os.environ.get's per-call key encoding (~1 us on the
# H100 host): CPython's os.environ keeps its encoded items in ``_data`` (updated by every assignment
# through os.environ, monkeypatch.setenv included); elsewhere the plain lookup.
_ENV_DATA = getattr(os.environ, "_data", None)
_ENV_KEY = os.environ.encodekey("WARP_GEMM_CACHE_DIR") if hasattr(os.environ, "encodekey") else None


def _cache_dir_env():
    if _ENV_DATA is not None and _ENV_KEY is not None:
        return _ENV_DATA.get(_ENV_KEY)
    return os.environ.get("WARP_GEMM_CACHE_DIR")


def _torch_stream(index: int):
    """The Warp stream over torch's current stream on CUDA device ``index`` where the full path has made
    one (``_warp_stream``), else None: the first call on a stream takes the full path, which also
    initialises Warp (a Warp stream cannot be made before Warp is)."""
    return _streams.peek((index, _torch()._C._cuda_getCurrentRawStream(index)))


def _described_in_place(p: Problem, a, b, c, out) -> bool:
    """Whether validation described every operand as the caller's own object (no resolution copy)."""
    return p.A.obj is a and p.B.obj is b and (c is None or (p.C is not None and p.C.obj is c)) and \
        (out is None or p.D.obj is out)


def _replay(entry, stream, a, b, c, out) -> None:
    if type(entry) is _HostCall:
        entry.run(a, b, c, out)
    else:
        launches.replay(entry, stream)


def _keep_fast(fk: tuple, p: Problem, out, cmds: tuple) -> None:
    """Keep ``cmds`` under the fast key: for a call with ``out`` directly; for one without, the recipe of
    its result and, per result address, the launches."""
    if out is not None:
        _fast.put(fk, cmds)
    elif _sig(p.result) is not None:
        _fast.put(fk, _NewResult(p))
        _fast.put((fk, p.D.ptr), cmds)


# --- device and stream scope, temporaries ---------------------------------------------------------------
def _stream_scope(p: Problem):
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


def _allocator(device, torch_stream: bool, log: list):
    """``allocate(shape, dtype, zero=False)`` for temporaries (each recorded in ``log``). On the torch
    path they come from torch's caching allocator, which is stream-ordered and CUDA-graph aware: Warp
    frees its own arrays at once, which is not permitted while torch captures a graph (Warp CUDA error
    900 in ``release_now``)."""
    torch = _torch()
    if torch_stream and torch is not None and not device.is_cpu:
        tdev = torch.device("cuda", device.ordinal)

        def allocate(shape, dtype, zero=False):
            log.append(shape)
            t = (torch.zeros if zero else torch.empty)(shape, dtype=torch_dtype(dtype), device=tdev)
            arr = wp.array(ptr=t.data_ptr(), dtype=WP_DTYPES[dtype], shape=tuple(shape),
                           capacity=max(t.numel(), 1) * t.element_size(), device=device)
            arr._wg_owner = t  # the tensor lives as long as the Warp view
            return arr

        return allocate

    def allocate(shape, dtype, zero=False):
        log.append(shape)
        return (wp.zeros if zero else wp.empty)(shape, dtype=WP_DTYPES[dtype], device=device)

    return allocate


# --- execution per family ---------------------------------------------------------------------------------
def execute(plan: Plan, p: Problem, alpha: float, beta: float) -> bool:
    """Launch ``plan``; returns whether any temporary was allocated (such calls are not kept as plans)."""
    temporaries: list = []
    allocate = _allocator(p.A.device, "torch" in (p.A.kind, p.B.kind, p.D.kind), temporaries)
    if plan.family == "host":
        _HostCall(p, alpha, beta, plan.activation).run(p.A.obj, p.B.obj, None if p.C is None else p.C.obj, p.D.obj)
        return False
    (dnb, dr, dc), (dsb, dsr, dsc) = plan.d3
    D = plan.D
    if plan.tmp_out:
        Dk = _padded(allocate, (dnb, dr, dc), plan.out_k)
    else:
        Dk = wp_view(D, (dnb, dr, dc), (dsb if dnb > 1 else dr * dc, dsr if dr > 1 else dc, 1))
    if plan.family == "fill":  # no product: D = beta * C, or zeros
        if plan.use_c:
            convert(Dk, _c_view(plan.C), plan.out_k, plan.C.dtype, beta)
        else:
            fill(Dk, plan.out_k, 0.0)
    else:
        _launch_all(families.get(plan.family).launches(plan, p, Dk, alpha, beta, _env(allocate)), p.A.device)
    if plan.activation is not None and not plan.fused_activation:  # one elementwise pass, in place
        launches.launch(epilogue.forward_kernel(plan.activation, plan.out_k, plan.out_k), Dk.shape, [Dk, Dk],
                        p.A.device)
    if plan.tmp_out:
        convert(wp_view(D, (dnb, dr, dc), (dsb, dsr, dsc)), Dk, D.dtype, plan.out_k)
    return bool(temporaries)


def _kernel_operand(op: Operand, widen: bool, allocate):
    """The 3-D Warp array the tiled kernel reads for ``op`` (a view, or a contiguous/widened copy)."""
    view, _ = layout_view(op)
    if view is None:  # a strided view such as a[:, ::2]: one contiguous copy
        shape, strides = _as3d(op)
        view = allocate(shape, op.dtype)
        convert(view, wp_view(op, shape, strides), op.dtype, op.dtype)
    if widen:  # Warp 1.7: 16-bit tiles accumulate in 16 bit, so widen the operand to float32 first
        tmp = allocate(view.shape, "float32")
        convert(tmp, view, "float32", op.dtype)
        view = tmp
    return view


def _as3d(op: Operand):
    from warp_gemm.core.operands import as3d

    return as3d(op)




def _c_kernel_view(plan: Plan, Dk):
    """(C as the kernel reads it, its batch count): read in place, or first written into the output."""
    if not plan.use_c:
        return None, 1
    if plan.c_into_d:
        convert(Dk, _c_view(plan.C), plan.out_k, plan.C.dtype)
        return Dk, Dk.shape[0]
    return _c_in_place_view(plan.C, plan.M, plan.N)


def _c_in_place_view(C: Operand, M: int, N: int):
    """(C as a (c_nb, M, N) Warp view, c_nb): a broadcast row (a bias) gets row stride 0."""
    shape = (1,) * (3 - C.ndim) + tuple(C.shape)
    strides = (0,) * (3 - C.ndim) + tuple(C.strides)
    row_stride = 0 if shape[1] == 1 else (strides[1] if M > 1 else N)
    return wp_view(C, (shape[0], M, N), (strides[0] if shape[0] > 1 else M * N, row_stride, 1)), shape[0]


def _env(allocate) -> Env:
    """What a family's ``launches`` may use: kernel views, cached buffers, this call's temporaries."""
    return Env(views=lambda plan, p, Dk: _views(plan, p, Dk, allocate), kernel_operand=_kernel_operand, staged=_staged, c_kernel_view=_c_kernel_view,
               c_view=_c_view, c_in_place_view=_c_in_place_view, workspace=workspace, zeroed_ints=_zeroed_ints,
               allocate=allocate)


def _views(plan: Plan, p: Problem, Dk, allocate=None):
    """(A, B, C, c_nb): the kernel views of a plan's operands (A and B staged into 16-byte aligned rows where the
    plan says), C read in place or first written into ``Dk``."""
    Av = _kernel_operand(plan.A, False, allocate)
    Bv = _kernel_operand(plan.B, False, allocate)
    if any(plan.stage):
        Av, Bv = _staged((Av, Bv), plan.stage, p.in_dtype, p.A.device)
    Cv, c_nb = _c_kernel_view(plan, Dk)
    return Av, Bv, Cv, c_nb


def _launch_all(todo, dev) -> None:
    """Launch ``[(kernel, dim, inputs, block_dim_or_None, tiled)]`` in order. The GEMV family's kernels are
    plain (SIMT): ``wp.launch`` with the family's block size, not ``launch_tiled``. On the CPU a tile
    kernel's block is one thread, and a SIMT kernel takes Warp's default."""
    for kernel, dim, inputs, block_dim, tiled in todo:
        if dev.is_cpu:
            block_dim = 1 if tiled and block_dim is not None else None
        launches.launch(kernel, dim, inputs, dev, block_dim, tiled=tiled)






# --- cached workspaces -------------------------------------------------------------------------------------
# One growing buffer per (device, stream, slot, thread): a call whose family needs a workspace gets a
# plan like any other (no allocation per call, the same address each time). Kernels on one stream run
# in order, so one thread's calls on that stream can share it; two threads on one stream cannot (their
# launches interleave: one call's fill, another's GEMM, ...), nor can two threads on the CPU, whose
# kernels run in the calling thread -- hence the thread in the key (and in the call plans' keys). A
# buffer outgrown is kept (never freed: a captured CUDA graph may still name it), so the memory held
# is under twice the largest workspace used, per thread.
_workspaces: dict = {}
_retired: list = []
_ws_lock = threading.Lock()


def _staged(views, which, dtype: str, dev):
    """``views`` (A, B) with those ``which`` selects copied into cached buffers whose rows start on 16-byte
    boundaries (same shapes; one launch for both), the others as they are."""
    item = ITEMSIZE[dtype]
    out, jobs = [], []
    for view, slot, on in zip(views, ("stage_a", "stage_b"), which):
        if not on:
            out.append(view)
            continue
        nb, r, c = view.shape
        cp = -(-c * item // 16) * 16 // item
        buf = workspace(dev, (nb, r, cp), dtype, slot)
        jobs.append((buf, view))
        out.append(raw_view(buf.ptr, buf.dtype, (nb, r, c), (r * cp * item, cp * item, item), dev))
    launches.stage(jobs, dtype)  # 16-byte stores (4x the element-per-thread copy's rate, H100)
    return tuple(out)


def _cached_buffer(dev, nbytes: int, slot: str, zeroed: bool = False):
    """This device, current stream, slot and thread's cached buffer (float32 words) of at least ``nbytes``: grown to
    at least twice its old size when too small, the old one kept (see above). ``zeroed``: allocated zero, for the
    slots whose kernels leave them zero (the fused GEMV's counters, stream-K's flags); a slot is always used one
    way."""
    stream = 0 if dev.is_cpu else wp.get_stream(dev).cuda_stream
    key = (dev.alias, stream, slot, threading.get_ident())
    with _ws_lock:
        buf = _workspaces.get(key)
        if buf is None or buf.capacity < nbytes:
            if buf is not None:
                _retired.append(buf)
            words = max(nbytes, 2 * (buf.capacity if buf is not None else 0)) // 4
            buf = (wp.zeros if zeroed else wp.empty)(words, dtype=wp.float32, device=dev)
            _workspaces[key] = buf
    return buf


def workspace(dev, shape: tuple, dtype: str, slot: str = "ws"):
    """A Warp array of ``shape``/``dtype`` over this device and current stream's cached workspace
    ``slot`` (one call's temporaries take different slots)."""
    nbytes = max(1, -(-__import__("math").prod(shape) * ITEMSIZE[dtype] // 256) * 256)
    buf = _cached_buffer(dev, nbytes, slot)
    item = ITEMSIZE[dtype]
    strides = tuple(int(__import__("math").prod(shape[i + 1:])) * item for i in range(len(shape)))
    return raw_view(buf.ptr, WP_DTYPES[dtype], tuple(shape), strides, dev)


def _zeroed_ints(dev, n: int, slot: str):
    """``n`` int32 zeros of this device, stream, slot and thread (:func:`_cached_buffer`, allocated zero): the
    kernels that use them (fused GEMV bands, stream-K) leave them zero."""
    buf = _cached_buffer(dev, max(1, -(-n * 4 // 256) * 256), slot, zeroed=True)
    return raw_view(buf.ptr, wp.int32, (n,), (4,), dev)


class _HostCall:
    """One product on the CPU's BLAS (kernels/host.py) on zero-copy views of the operands' memory: torch's
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




def _padded(allocate, shape, dtype):
    """A (nb, r, c) Warp array whose rows start on 16-byte boundaries (owner kept on the view)."""
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
