"""Eight threads call warp_gemm at once on cold caches.

The work runs in a fresh subprocess whose Warp kernel cache is an empty temporary directory
(``WARP_CACHE_PATH``, which Warp 1.19's ``warp._src.build.init_kernel_cache`` reads when
``wp.config.kernel_cache_dir`` is unset; Warp appends ``<version>/`` to it). Nothing in the subprocess
touches Warp before the threads start, so Warp's own initialisation, warp_gemm's kernel factory and
Warp's module compilation all happen concurrently, from the threads, for eight different
dtype/shape/layout/epilogue combinations (eight different kernels).

Checked: every result matches float64; no thread raised; the process exited cleanly; and the cache
holds ``<cache>/<version>/`` but no nested ``<cache>/<version>/<version>`` -- the path Warp's own
unsynchronised first-time init produces when several threads enter it at once, which
``warp_gemm._compat.init()`` prevents by initialising once under a lock.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from warp_gemm import _compat

ROOT = pathlib.Path(__file__).resolve().parent.parent

WORKER = r'''
import json, sys, threading, traceback
import numpy as np

import warp_gemm  # must not initialise Warp by itself
import warp as wp
from warp_gemm import _compat
from warp_gemm.tools.tolerance import compare, random_operands, round_to, f64_to_bf16_bits, bf16_bits_to_f64

try:
    from warp._src import context as _ctx
except ImportError:  # Warp < 1.13
    from warp import context as _ctx
pre_init = _ctx.runtime is not None
DEV = sys.argv[1]
JOBS = [  # dtype, kind, M, N, K, batch, trans_a, trans_b, with_c
    ("float32", "numpy", 33, 31, 65, 0, False, False, False),
    ("float64", "numpy", 17, 40, 29, 0, True, False, False),
    ("float16", "warp", 45, 37, 70, 0, False, True, False),
    ("float32", "warp", 31, 33, 32, 3, False, False, True),
    ("float64", "warp", 64, 7, 13, 2, True, True, True),
    ("float16", "numpy", 1, 65, 33, 0, False, False, True),
    ("bfloat16" if _compat.HAS_BF16 else "float32", "warp", 29, 23, 41, 0, False, False, False),
    ("float32", "numpy", 63, 1, 97, 0, True, False, False),
]
barrier = threading.Barrier(len(JOBS))
results = [None] * len(JOBS)


def to_wp(x, dtype):
    if dtype == "bfloat16":
        bits = wp.array(f64_to_bf16_bits(x), dtype=wp.uint16, device=DEV)
        return wp.array(ptr=bits.ptr, dtype=wp.bfloat16, shape=bits.shape, strides=bits.strides,
                        capacity=bits.size * 2, device=DEV), bits
    return wp.array(np.ascontiguousarray(x.astype(dtype)), dtype=getattr(wp, dtype), device=DEV), None


def from_wp(x, dtype):
    if dtype == "bfloat16":
        u = wp.array(ptr=x.ptr, dtype=wp.uint16, shape=x.shape, strides=x.strides, capacity=x.capacity,
                     device=x.device)
        return bf16_bits_to_f64(u.numpy())
    return x.numpy().astype(np.float64)


def job(i):
    dtype, kind, M, N, K, batch, ta, tb, with_c = JOBS[i]
    if DEV != "cpu":
        kind = "warp"
    try:
        rng = np.random.default_rng(i)
        a, b = random_operands(M, N, K, dtype, rng, batch=batch)
        c = round_to(rng.standard_normal((N,)), dtype) if with_c else None
        ref = np.matmul(a, b) * 1.5 + (-0.5 * c if with_c else 0.0)
        sa = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a
        sb = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b
        keep = []
        barrier.wait()  # start together: Warp init, the kernel factory and compilation all race
        if kind == "numpy":  # the first Warp call of this thread is warp_gemm's own
            A, B = sa.astype(dtype), sb.astype(dtype)
            C = c.astype(dtype) if with_c else None
        else:  # wp.array() would initialise Warp (and acquire the CUDA context) itself, which Warp 1.19
            # does not do safely from several threads (docs/reliability.md#threads): go through
            # warp_gemm's init for the device, as the docs tell a threaded caller to
            _compat.init(DEV)
            (A, k1), (B, k2) = to_wp(sa, dtype), to_wp(sb, dtype)
            C, k3 = to_wp(c, dtype) if with_c else (None, None)
            keep += [k1, k2, k3]
        for rep in range(3):
            # (on the CPU the tile kernels, not the host BLAS: this test is about concurrent compiles)
            with warp_gemm.options(cpu_backend="tiles"):
                res = warp_gemm.gemm(A, B, C, alpha=1.5, beta=-0.5, trans_a=ta, trans_b=tb)
            got = res.astype(np.float64) if kind == "numpy" else from_wp(res, dtype)
            cmp = compare(got, ref, dtype)
            if not cmp.ok:
                results[i] = f"job {JOBS[i]} rep {rep}: {cmp}"
                return
        results[i] = "ok"
    except BaseException:
        results[i] = f"job {JOBS[i]}: " + traceback.format_exc()


threads = [threading.Thread(target=job, args=(i,)) for i in range(len(JOBS))]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=600)
print("RESULT " + json.dumps({"results": results, "cache": wp.config.kernel_cache_dir,
                              "version": wp.config.version, "alive": [t.is_alive() for t in threads],
                              "pre_init": pre_init}))
'''


def _run_worker(tmp_path, device: str):
    cache = tmp_path / "warp-cache"
    env = dict(os.environ)
    env["WARP_CACHE_PATH"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("WARP_GEMM_VERBOSE", None)
    proc = subprocess.run([sys.executable, "-c", WORKER, device], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"worker exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return cache, json.loads(lines[-1][len("RESULT "):])


def _check(cache: pathlib.Path, info: dict) -> None:
    bad = [r for r in info["results"] if r != "ok"]
    assert not bad, "\n\n".join(str(r) for r in bad)
    assert not any(info["alive"]), "a thread hung"
    assert info["pre_init"] is not True, "Warp was initialised before the threads started"
    version = info["version"]
    assert pathlib.Path(info["cache"]).resolve() == (cache / version).resolve(), info["cache"]
    nested = [p for p in cache.rglob(version) if p.is_dir() and p.parent != cache]
    assert not nested, f"nested kernel cache directories (Warp first-init race): {nested}"
    modules = [p for p in (cache / version).iterdir() if p.is_dir() and p.name.startswith("wp_")]
    assert len(modules) >= 8, f"expected >= 8 compiled modules in the fresh cache, found {len(modules)}"


@pytest.mark.skipif(not _compat.HAS_CPU_TILES, reason="Warp without CPU tiles")
def test_eight_threads_cold_cache_cpu(tmp_path):
    cache, info = _run_worker(tmp_path, "cpu")
    _check(cache, info)


@pytest.mark.gpu
def test_eight_threads_cold_cache_cuda(tmp_path):
    cache, info = _run_worker(tmp_path, "cuda:0")
    _check(cache, info)


def test_init_serialises_warp_init(monkeypatch):
    """``_compat.init()`` from 8 threads at once enters ``wp.init`` exactly once, never concurrently.

    Deterministic companion to the subprocess test (whose nested-path check guards a race that only
    opens for a few microseconds inside Warp's ``init_kernel_cache``): a slow stand-in for ``wp.init``
    counts entries and the largest number of threads inside it at one time.
    """
    import threading
    import time

    import warp as wp

    state = {"calls": 0, "inside": 0, "max_inside": 0}
    lock = threading.Lock()

    def slow_init():
        with lock:
            state["calls"] += 1
            state["inside"] += 1
            state["max_inside"] = max(state["max_inside"], state["inside"])
        time.sleep(0.2)
        with lock:
            state["inside"] -= 1

    monkeypatch.setattr(wp, "init", slow_init)
    monkeypatch.setattr(_compat, "_initialised", False)
    barrier = threading.Barrier(8)
    errors = []

    def worker():
        try:
            barrier.wait()
            _compat.init()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert state == {"calls": 1, "inside": 0, "max_inside": 1}, state


class _HalfInitialisedDevice:
    """A CUDA device as Warp 1.19 leaves it while another thread is inside ``Device.context``: the context
    is published, the stream not yet (``_init_streams`` runs after). ``publish()`` completes it."""

    is_cuda, is_cpu, alias = True, False, "cuda:99"

    def __init__(self):
        self.stream = None
        self.context = object()

    def publish(self):
        self.stream = type("Stream", (), {"cuda_stream": 1234})()


def test_init_waits_for_a_stream_another_thread_is_creating(monkeypatch):
    """``_compat.init(device)`` returns only once the device's stream exists (docs/reliability.md, threads,
    defect 2): warp_gemm then never reads ``device.stream`` as None (``'NoneType' object has no attribute
    'cuda_stream'``)."""
    import threading
    import time

    dev = _HalfInitialisedDevice()
    monkeypatch.setattr(_compat, "_ready_devices", set())
    timer = threading.Timer(0.2, dev.publish)  # the other thread finishes Warp's _init_streams
    t0 = time.monotonic()
    timer.start()
    try:
        _compat.init(dev)
        stream_when_init_returned, waited = dev.stream, time.monotonic() - t0
    finally:
        timer.join()
    assert stream_when_init_returned is not None, "init returned while the device had no stream"
    assert waited >= 0.19 and stream_when_init_returned.cuda_stream == 1234
    assert dev.alias in _compat._ready_devices


def test_init_gives_up_waiting_after_the_bound(monkeypatch):
    dev = _HalfInitialisedDevice()
    monkeypatch.setattr(_compat, "_ready_devices", set())
    monkeypatch.setattr(_compat, "STREAM_WAIT_S", 0.05)
    _compat.init(dev)  # returns (Warp's own error will follow at the first use of the stream)
    assert dev.stream is None


def _run_shared_worker(tmp_path, device: str):
    env = dict(os.environ)
    env["WARP_CACHE_PATH"] = str(tmp_path / "warp-cache")  # cold: every module compiles and loads here
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "workers" / "shared_kernels.py"), device],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"worker exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    info = json.loads(lines[-1][len("RESULT "):])
    bad = [r for r in info["results"] if r != "ok"]
    assert not bad, "\n\n".join(str(r) for r in bad)
    assert not any(info["alive"]), "a thread hung"


@pytest.mark.gpu
def test_threads_share_kernels_cold_cache_cuda(tmp_path):
    """Issue 14: eight threads, two or three per kernel, make their first calls at once on CUDA
    (failed 12 of 12 runs with "invalid resource handle" before first loads were serialised)."""
    _run_shared_worker(tmp_path, "cuda:0")


def test_first_load_one_thread_per_kernel():
    """``_launch.first_load``: per (kernel, device, block_dim) one thread makes the first load while
    the others wait; different kernels load in parallel; later calls take no lock."""
    import threading
    import time

    from warp_gemm.core import launches as _launch

    kernels = [object(), object()]  # stand-ins: only their identity is used
    state = {"inside": {0: 0, 1: 0}, "max": {0: 0, 1: 0}, "loads": 0, "both": False}
    lock = threading.Lock()

    def load(which):
        with lock:
            state["loads"] += 1
            state["inside"][which] += 1
            state["max"][which] = max(state["max"][which], state["inside"][which])
            state["both"] |= all(state["inside"].values())
        time.sleep(0.05)
        with lock:
            state["inside"][which] -= 1

    barrier = threading.Barrier(8)
    errors = []

    def worker(i):
        try:
            barrier.wait()
            which = i % 2
            _launch.first_load(kernels[which], "cuda:0", 128, lambda: load(which))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    assert state["loads"] == 8
    assert state["max"] == {0: 1, 1: 1}, state  # never two threads in one kernel's load
    assert state["both"], "the two kernels' loads should overlap"


def test_workspaces_and_plans_belong_to_one_thread():
    """Cached workspaces (split-K partial sums, staged operands) are per (device, stream, slot, thread):
    two threads on one stream would otherwise interleave one call's fill with another's GEMM into one
    buffer. A thread gets its own buffer, and the same one again on its next call."""
    import threading

    import warp as wp

    from warp_gemm.core import execute

    dev = wp.get_device("cpu")
    mine = execute.workspace(dev, (4, 8), "float32", "ws").ptr
    assert execute.workspace(dev, (4, 8), "float32", "ws").ptr == mine
    theirs = []
    t = threading.Thread(target=lambda: theirs.append(execute.workspace(dev, (4, 8), "float32", "ws").ptr))
    t.start()
    t.join()
    assert theirs and theirs[0] != mine


@pytest.mark.parametrize("family", ["splitk", "skinny"])
def test_threads_sharing_operands_get_right_results(family):
    """Eight threads, one set of operands and one kernel plan each, calls with workspaces (a split-K
    tiled product, the skinny family's K slices) at once, on the CPU tile kernels: every result right."""
    import threading

    import numpy as np
    import warp as wp

    import warp_gemm
    from warp_gemm.tools.tolerance import compare

    M, N, K = (40, 36, 700) if family == "splitk" else (3, 40, 512)
    cfg = warp_gemm.Config(16, 16, 32, 64, split_k=4) if family == "splitk" else None
    opts = dict(cpu_backend="tiles", family="skinny") if family == "skinny" else dict(cpu_backend="tiles")
    errors, barrier = [], threading.Barrier(8)

    def worker(i):
        try:
            a = np.random.default_rng(i).standard_normal((M, K)).astype(np.float32)
            b = np.random.default_rng(100 + i).standard_normal((K, N)).astype(np.float32)
            A, B = wp.array(a, device="cpu"), wp.array(b, device="cpu")
            out = wp.array(np.full((M, N), np.nan, np.float32), device="cpu")
            barrier.wait()
            with warp_gemm.options(**opts):
                for _ in range(3):
                    warp_gemm.matmul(A, B, out=out, config=cfg)
                    res = compare(out.numpy().astype(np.float64), a.astype(np.float64) @ b, "float32")
                    if not res.ok:
                        errors.append(f"thread {i}: {res}")
                        return
        except BaseException as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, "\n".join(errors)
