"""Shared fixtures: devices, operand containers, fresh random inputs, NaN-poisoned outputs.

GPU tests carry the ``gpu`` marker and skip without CUDA. Every test draws fresh inputs from its own
seed (test id hashed with a per-session random salt, printed in the header for reproduction).
"""

from __future__ import annotations

import os
import zlib

# Triton's interpreter must be chosen before triton is first imported: on a machine without CUDA the
# Triton reference tests run interpreted (TRITON_INTERPRET=1); on a GPU machine they compile.
if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch as _t

        _cuda = _t.cuda.is_available()
    except ImportError:
        _cuda = False
    if not _cuda:
        os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import pytest
import warp as wp

import warp_gemm._compat as compat
from warp_gemm.tools.tolerance import f64_to_bf16_bits, random_operands

try:
    import torch
except ImportError:  # torch is an optional extra
    torch = None

compat.init()
SALT = int(os.environ.get("WARP_GEMM_TEST_SEED", np.random.SeedSequence().entropy % 2**31))
HAS_CUDA = wp.get_cuda_device_count() > 0
DTYPES = ["float16", "float32", "float64"] + (["bfloat16"] if compat.HAS_BF16 else [])
CPU_OK = compat.HAS_CPU_TILES
DEVICES = ([pytest.param("cpu", id="cpu")] if CPU_OK else []) + [
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)
]
KINDS = ["warp", "numpy"] + (["torch"] if torch is not None else [])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The inputs' seed on every failing run (``-q`` hides the header): a failure reruns with the same draws."""
    if exitstatus:
        terminalreporter.write_line(f"WARP_GEMM_TEST_SEED={SALT} (set it to draw the same inputs again)")


def pytest_report_header(config):
    return (f"warp-lang {compat.WARP_VERSION}; cuda devices: {wp.get_cuda_device_count()}; "
            f"torch: {getattr(torch, '__version__', None)}; WARP_GEMM_TEST_SEED={SALT}")


def _shard_key(item) -> str:
    """Items that compile the same kernels share a key: dtype, layout, and the tile configuration the
    heuristic picks for the item's shape (a cold CUDA kernel compile costs ~30-60 s). Items without a
    shape are keyed by test function and their dtype / layout / op parameters: the Hopper and fused
    tests build a kernel per configuration (1-20 s each), and one key per file put 150 of them in one
    process."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    key = [item.module.__name__, str(params.get("dtype", "")), str(params.get("layout", params.get("trans", "")))]
    shape = params.get("shape")
    if shape is not None and hasattr(shape, "M"):
        from warp_gemm.config.configs import heuristic

        key.append(str(heuristic(False, str(params.get("dtype", "float32")), shape.M, shape.N, shape.K, 1)))
    else:
        key += [getattr(item, "originalname", item.name)] + [
            str(params[p]) for p in ("in_dtype", "layout_b", "op", "tn", "pingpong", "kind") if p in params]
    return "|".join(key)


#: measured seconds per shard key of the last full GPU suite (scripts/gpu.sh suite writes them to $OUT/gpu_times.json):
#: the weights that balance the shards
GPU_TIMES = os.path.join(os.path.dirname(__file__), "gpu_times.json")


def _shards(items, n: int) -> dict:
    """Shard key -> shard of n: keys longest first (measured seconds; a key not measured counts 10 s plus 1 s per
    GPU test, 0 without one) each into the shard with the least time so far, shards then numbered longest first
    (scripts/gpu.sh starts them in that order). Every process computes the same split from the same collection."""
    import json

    try:
        with open(GPU_TIMES) as f:
            secs = json.load(f)
    except (OSError, ValueError):
        secs = {}
    count: dict = {}
    for it in items:
        k = _shard_key(it)
        count[k] = count.get(k, 0) + (it.get_closest_marker("gpu") is not None)
    weight = {k: secs.get(k, 10.0 + c if c else 0.0) for k, c in count.items()}
    load, of = [0.0] * n, {}
    for k in sorted(weight, key=lambda k: (-weight[k], k)):
        s = min(range(n), key=lambda i: (load[i], i))
        of[k], load[s] = s, load[s] + weight[k]
    rank = {s: r for r, s in enumerate(sorted(range(n), key=lambda i: (-load[i], i)))}
    return {k: rank[s] for k, s in of.items()}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("gpu") and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
    # WARP_GEMM_SHARD=i/n keeps one of n kernel-disjoint shards balanced on measured time, so n processes can
    # compile in parallel on the GPU machine (scripts/gpu.sh suite).
    shard = os.environ.get("WARP_GEMM_SHARD")
    if shard:
        i, n = (int(x) for x in shard.split("/"))
        of = _shards(items, n)
        keep = [it for it in items if of[_shard_key(it)] == i]
        # WARP_GEMM_SUBSHARD=j/m: every m-th of the shard's tests from the j-th (a shard too long for one
        # process's time limit, run as m processes; they may compile the same kernels twice).
        sub = os.environ.get("WARP_GEMM_SUBSHARD")
        if sub:
            j, m = (int(x) for x in sub.split("/"))
            keep = keep[j::m]
        config.hook.pytest_deselected(items=[it for it in items if it not in keep])
        items[:] = keep


_TIMES: dict = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With WARP_GEMM_GPU_TIMES_OUT=DIR, each process writes the seconds it spent per shard key (setup, call and
    teardown: the key's compiles included) to DIR/times_<pid>.json at its end (scripts/gpu.sh suite merges them)."""
    import time

    t0 = time.perf_counter()
    yield
    if os.environ.get("WARP_GEMM_GPU_TIMES_OUT"):
        k = _shard_key(item)
        _TIMES[k] = _TIMES.get(k, 0.0) + time.perf_counter() - t0


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("WARP_GEMM_GPU_TIMES_OUT")
    if out and _TIMES:
        import json

        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"times_{os.getpid()}.json"), "w") as f:
            json.dump(_TIMES, f)


@pytest.fixture(autouse=True)
def _cpu_tile_kernels(request):
    """On the CPU the suite checks Warp's tile kernels -- the GPU kernels' twin, how CI checks the kernel
    logic -- not the default host BLAS path; tests of that path carry the ``cpu_host`` marker."""
    if request.node.get_closest_marker("cpu_host"):
        yield
        return
    import warp_gemm

    with warp_gemm.options(cpu_backend="tiles"):
        yield


@pytest.fixture(autouse=True)
def _fresh_call_plans():
    """Each test starts without recorded call plans (core.execute._plans): a plan left by an earlier test for
    arrays at a reused address would let a test's first call skip the launch path it means to test."""
    from warp_gemm.core import execute as api

    api.clear_plans()
    yield


@pytest.fixture
def planned(monkeypatch):
    """Every plan the executor makes during the test, in order (``make_plan`` spied on)."""
    from warp_gemm.core import execute
    from warp_gemm.core import plan as plan_mod

    seen = []
    real = plan_mod.make_plan

    def spy(*a, **k):
        p = real(*a, **k)
        seen.append(p)
        return p

    monkeypatch.setattr(execute, "make_plan", spy)
    return seen


@pytest.fixture
def rng(request):
    return np.random.default_rng([SALT, zlib.crc32(request.node.nodeid.encode())])


def kind_ok(kind: str, dtype: str, device: str) -> str | None:
    """Why this container/dtype/device combination cannot be built, or None."""
    if kind == "numpy" and dtype == "bfloat16":
        return "numpy has no bfloat16"
    if kind == "numpy" and device != "cpu":
        return "numpy arrays live on the CPU"
    if kind == "torch" and torch is None:
        return "torch not installed"
    if kind == "torch" and dtype == "bfloat16" and not compat.HAS_BF16:
        return "bfloat16 needs warp-lang >= 1.13"
    return None


TORCH_DT = {}
if torch is not None:
    TORCH_DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64}


def make(x64: np.ndarray, dtype: str, kind: str, device: str):
    """A new contiguous container of ``kind`` holding ``x64`` (already rounded to ``dtype``)."""
    if kind == "numpy":
        return np.ascontiguousarray(x64.astype(dtype))
    if kind == "torch":
        return torch.tensor(x64, dtype=torch.float64).to(TORCH_DT[dtype]).to(device).contiguous()
    if dtype == "bfloat16":
        bits = wp.array(f64_to_bf16_bits(x64), dtype=wp.uint16, device=device)
        return _bf16_from_bits(bits)
    return wp.array(np.ascontiguousarray(x64.astype(dtype)), dtype=getattr(wp, dtype), device=device)


_KEEP = []


def _bf16_from_bits(bits):
    # Reinterpret a uint16 array as bfloat16 (keeps the owner alive for the test session).
    _KEEP.append(bits)
    return wp.array(ptr=bits.ptr, dtype=wp.bfloat16, shape=bits.shape, strides=bits.strides,
                    capacity=bits.size * 2, device=bits.device)


def nan_like(kind: str, shape, dtype: str, device: str):
    """An output container pre-filled with NaN, so an unwritten element fails the check."""
    return make(np.full(shape, np.nan), dtype, kind, device)


def to_f64(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(np.float64)
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float64).numpy()
    if isinstance(x, wp.array):
        if compat.HAS_BF16 and x.dtype is wp.bfloat16:
            from warp_gemm.tools.tolerance import bf16_bits_to_f64

            u16 = wp.array(ptr=x.ptr, dtype=wp.uint16, shape=x.shape, strides=x.strides,
                           capacity=x.capacity, device=x.device)
            return bf16_bits_to_f64(u16.numpy())
        return x.numpy().astype(np.float64)
    raise TypeError(type(x))


__all__ = ["DEVICES", "DTYPES", "KINDS", "kind_ok", "make", "nan_like", "random_operands", "to_f64", "torch"]


class CudaLike:
    """A CUDA-like device for the planner, which reads is_cpu/is_cuda/arch/sm_count/name and str(). It compares equal
    to "cpu", so that Warp resolves the planner's zero-copy views of the (CPU) operands. For planning only: nothing
    may be launched on it."""

    is_cpu = False
    is_cuda = True
    arch = 90
    sm_count = 132
    ordinal = 0
    alias = "cuda:0"
    name = "NVIDIA H100 80GB HBM3"

    def __str__(self):
        return "cuda:0"

    def __eq__(self, other):
        return other is self or other == "cpu"

    def __hash__(self):
        return hash("cpu")


def cuda_like_problem(monkeypatch, a: np.ndarray, b: np.ndarray, trans_b: bool = False):
    """``validate``'s problem for ``a @ op(b)`` (numpy operands), its operands claiming a :class:`CudaLike` device:
    what the planner sees on a GPU (make_plan on it is pure arithmetic; nothing may be launched)."""
    import dataclasses

    from warp_gemm.core import operands
    from warp_gemm.core.lru import LRU
    from warp_gemm.core.problem import validate

    monkeypatch.setattr(operands, "_VIEWS", LRU(64))  # views made on the stand-in device stay here
    p = validate(a, b, None, 1.0, 0.0, False, trans_b, None, "gemm")
    fake = CudaLike()
    return dataclasses.replace(p, A=dataclasses.replace(p.A, device=fake), B=dataclasses.replace(p.B, device=fake),
                               D=dataclasses.replace(p.D, device=fake))


def set_options(monkeypatch, **changes):
    """Set ``warp_gemm.options`` fields for the rest of a test (monkeypatch restores them): how tests switch the
    families' variants (``pipe_snippets``, ``staged_store``, ``zero_acc_snippet``, ``gemv_fused``, ...)."""
    import contextvars
    from dataclasses import replace

    from warp_gemm.core import options as _opts

    monkeypatch.setattr(_opts, "_current", contextvars.ContextVar("warp_gemm_options",
                                                                  default=replace(_opts._current.get(), **changes)))
