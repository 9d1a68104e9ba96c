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

import warp as wp

from warp_gemm import _compat
from warp_gemm.config import tables
from warp_gemm.core import launches, rebind
from warp_gemm.core.fastpath import (  # noqa: F401
    _described_in_place,
    _fast,
    _extent,
    _fast_key,
    _keep_fast,
    _NewResult,
    _replay,
    _sig,
    _warp_stream,
    align_class,
    template_key,
)
from warp_gemm.core.launches import convert, fill
from warp_gemm.core.lru import LRU
from warp_gemm.core.operands import ITEMSIZE, Operand, _torch, layout_view, torch_dtype, wp_view
from warp_gemm.core.operands import data_ptr as _ptr
from warp_gemm.core.options import options
from warp_gemm.core.plan import Plan, make_plan
from warp_gemm.core.problem import Problem, validate
from warp_gemm.core.workspaces import _staged, _zeroed_ints, owns, workspace
from warp_gemm.families import registry as families
from warp_gemm.families.base import Env
from warp_gemm.families.common import epilogue
from warp_gemm.families.common.kernels import WP_DTYPES
from warp_gemm.families.host.call import _HostCall


def run(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname, activation=None):
    """``act(alpha * op(a) @ op(b) + beta * c)`` into ``out`` (or a new result): the whole call, no
    autograd. ``activation``: None or a name of ``kernels.epilogue.ACTIVATIONS`` (applied in the
    pipelined family's epilogue, else in one elementwise pass over the output)."""
    opts = options()
    fast = _fast_key(a, b, c, out, alpha, beta, trans_a, trans_b, allow_tf32, config, opts, activation)
    new_result = False
    tk = None
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
        elif opts.rebind and not _apic_capturing():
            tk = template_key(fk, (a, b, c, out))
            t = rebind.get(tk[0]) if tk is not None else None
            if t is not None:
                bases = tk[1]
                if out is None:
                    out = t.recipe.allocate()
                    if align_class(_ptr(out)) != t.d_align:
                        return _run_full(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname,
                                         activation, opts, fast, True, None)
                    bases = bases + [_ptr(out)]
                t.run(bases, stream)
                return out
    return _run_full(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname, activation, opts,
                     fast, new_result, tk)


def _run_full(a, b, c, alpha, beta, trans_a, trans_b, out, allow_tf32, config, fname, activation, opts, fast,
              new_result, tk):
    """``run`` past the fast path: validate, plan (or find the call plan kept for these operands), launch, and
    keep what a later call may replay (the call plan, the fast entry, the re-bound template under ``tk``)."""
    raw = (alpha, beta, activation)  # as the caller passed them: the fast path's key reads them so
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
    if fast is None and stream is not None and not new_result:
        # the first call on a torch stream, whose Warp wrapper this call made (_replay_stream): its key now exists
        fast = _fast_key(a, b, c, out, raw[0], raw[1], trans_a, trans_b, allow_tf32, config, opts, raw[2])
        if fast is not None and opts.rebind and not _apic_capturing():
            tk = template_key(fast[0], (a, b, c, out))
    if fast is not None and _described_in_place(p, a, b, c, out):
        _keep_fast(fast[0], p, None if new_result else out, cmds)
        if tk is not None and rebind.get(tk[0]) is None:
            _keep_template(tk, p, None if new_result else out, cmds)
    return p.result


def _keep_template(tk, p: Problem, out, cmds: tuple) -> None:
    """Keep ``cmds`` re-bindable under ``tk`` (fastpath.template_key), where core.rebind accepts them."""
    key, _, ranges = tk
    ranges = list(ranges)
    if out is None:  # the result this call made: its range, and how a later call makes its own
        sig = _sig(p.result)
        ext = _extent(p.result, sig) if sig is not None else None
        if ext is None:
            return
        ranges.append(ext)
    t = rebind.build(cmds, ranges, owns)
    if t is None:
        return
    if out is None:
        t.recipe, t.d_align = _NewResult(p), align_class(ext[0])
    rebind.put(key, t)


def _apic_capturing() -> bool:
    """Whether Warp's API capture is recording (1.19+): re-bound launches keep no argument lists to record."""
    return getattr(getattr(_compat.WARP_CONTEXT, "runtime", None), "_apic_capture", None) is not None


def _replay_stream(p: Problem):
    """The stream a scoped launch would take: torch's current stream on the torch path, else the
    device's current Warp stream (None on the CPU)."""
    dev = p.A.device
    if dev.is_cpu:
        return None
    torch = _torch()
    if torch is not None and "torch" in (p.A.kind, p.B.kind, p.D.kind):
        return _warp_stream(torch.cuda.current_stream(dev.ordinal))
    stream = dev.stream
    if stream is None:  # a context another thread is still setting up (Warp publishes it before its stream)
        _compat.init(dev)
        stream = dev.stream
    return stream


# --- call plans ----------------------------------------------------------------------------------------
# A call that needs no temporaries is determined by its operands (pointers, shapes, strides, dtypes),
# scalars and options: the launches it recorded are kept and replayed on the next equal call, which
# skips planning and argument assembly. The key also holds the options and the tuning-cache directory;
# saving a table drops every plan (a new table may choose another configuration). Replaying is as safe
# as replaying one recorded launch (see core/launches.py).
# Sized for a few hundred operand sets in rotation (the benchmark runner cycles up to 200 to defeat the
# L2 cache; a pipeline of buffers does the same): a plan is a few hundred bytes.
_plans = LRU(1024)


def clear_plans() -> None:
    """Drop every kept call plan (tables.save does: a new table may choose another configuration)."""
    _plans.clear()
    _fast.clear()
    rebind.clear()


tables.on_save.append(clear_plans)


def _plan_key(p: Problem, alpha: float, beta: float, allow_tf32: bool, config, opts, activation=None) -> tuple:
    def d(op):
        return None if op is None else (op.kind, op.ptr, op.shape, op.strides, op.dtype)

    return (d(p.A), d(p.B), d(p.C), d(p.D), str(p.A.device), alpha, beta, bool(allow_tf32), config, opts,
            activation, os.environ.get("WARP_GEMM_CACHE_DIR"))


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


def _allocator(device, torch_stream: bool, log: list):
    """``allocate(shape, dtype, zero=False)`` for temporaries (each kept in ``log``: alive until the call's deferred
    launches are made, whatever views the kernels get). On the torch
    path they come from torch's caching allocator, which is stream-ordered and CUDA-graph aware: Warp
    frees its own arrays at once, which is not permitted while torch captures a graph (Warp CUDA error
    900 in ``release_now``)."""
    torch = _torch()
    if torch_stream and torch is not None and not device.is_cpu:
        tdev = torch.device("cuda", device.ordinal)

        def allocate(shape, dtype, zero=False):
            t = (torch.zeros if zero else torch.empty)(shape, dtype=torch_dtype(dtype), device=tdev)
            arr = wp.array(ptr=t.data_ptr(), dtype=WP_DTYPES[dtype], shape=tuple(shape),
                           capacity=max(t.numel(), 1) * t.element_size(), device=device)
            arr._wg_owner = t  # the tensor lives as long as the Warp view
            log.append(arr)
            return arr

        return allocate

    def allocate(shape, dtype, zero=False):
        arr = (wp.zeros if zero else wp.empty)(shape, dtype=WP_DTYPES[dtype], device=device)
        log.append(arr)
        return arr

    return allocate


# --- execution per family ---------------------------------------------------------------------------------
def execute(plan: Plan, p: Problem, alpha: float, beta: float) -> bool:
    """Launch ``plan``; returns whether any temporary was allocated (such calls are not kept as plans)."""
    temporaries: list = []
    allocate = _allocator(p.A.device, "torch" in (p.A.kind, p.B.kind, p.D.kind), temporaries)
    if plan.family == "host":
        _HostCall(p, alpha, beta, plan.activation).run(p.A.obj, p.B.obj, None if p.C is None else p.C.obj, p.D.obj)
        return False
    with launches.Deferred():  # a first call builds the plan's kernels in parallel, then launches them in order
        _execute(plan, p, alpha, beta, allocate)
    return bool(temporaries)


def _execute(plan: Plan, p: Problem, alpha: float, beta: float, allocate) -> None:
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
