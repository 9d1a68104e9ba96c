"""Recorded-launch replay (warp_gemm.core.launches): a hit must launch exactly what a fresh launch would."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from conftest import DEVICES, kind_ok, make, nan_like, to_f64

import warp as wp

import warp_gemm
from warp_gemm import Config
from warp_gemm import _compat
from warp_gemm.core import launches as _launch
from warp_gemm.core import execute as api
from warp_gemm.tools.tolerance import compare, random_operands

pytestmark = pytest.mark.skipif(not _compat.HAS_RECORD_CMD, reason="no wp.launch(record_cmd=True)")


def _call_twice_with_new_values(rng, before_second) -> None:
    """Two calls on the same arrays, new values assigned in between; both results are checked.
    ``before_second()`` runs after the first call."""
    a1, b1 = random_operands(37, 45, 61, "float32", rng)
    a2, b2 = random_operands(37, 45, 61, "float32", rng)
    A, B = make(a1, "float32", "warp", "cpu"), make(b1, "float32", "warp", "cpu")
    out = nan_like("warp", (37, 45), "float32", "cpu")
    warp_gemm.matmul(A, B, out=out)
    assert compare(to_f64(out), a1 @ b1, "float32").ok
    before_second()
    A.assign(a2.astype(np.float32))
    B.assign(b2.astype(np.float32))
    out.fill_(float("nan"))
    warp_gemm.matmul(A, B, out=out)
    assert compare(to_f64(out), a2 @ b2, "float32").ok


def test_replay_reads_new_contents(rng, monkeypatch):
    """Same arrays, new values: the replayed launch computes on the new data (call plans off, so the
    recorded launch itself is what is replayed)."""
    monkeypatch.setattr(api, "_plan_key", lambda *a: None)
    hits = []
    _call_twice_with_new_values(rng, lambda: hits.append(len(_launch._cache)))
    assert len(_launch._cache) == hits[0], "the second call should replay the first call's launch"


def test_scalars_are_part_of_the_key(rng):
    a, b = random_operands(20, 30, 40, "float64", rng)
    c = rng.standard_normal((20, 30))
    A, B, C = (make(x, "float64", "warp", "cpu") for x in (a, b, c))
    out = nan_like("warp", (20, 30), "float64", "cpu")  # the same arrays every time: only scalars change
    for alpha, beta in [(1.0, 0.5), (2.0, 0.5), (2.0, -1.0)]:
        out.fill_(float("nan"))
        warp_gemm.gemm(A, B, C, alpha=alpha, beta=beta, out=out)
        assert compare(to_f64(out), alpha * a @ b + beta * c, "float64").ok, (alpha, beta)


@pytest.mark.parametrize("split", [1, 3])
def test_same_bits_with_and_without_replay(split, rng, monkeypatch):
    """Also with split-K (workspace, zero fill, GEMM, finishing pass: all recorded)."""
    a, b = random_operands(33, 65, 70, "float16", rng)
    A, B = make(a, "float16", "warp", "cpu"), make(b, "float16", "warp", "cpu")
    outs = []
    for cache in (False, True, True):
        out = nan_like("warp", (33, 65), "float16", "cpu")
        with warp_gemm.options(record_launches=cache):
            warp_gemm.matmul(A, B, out=out, config=Config(32, 32, 32, 1, 8, split))
        outs.append(out.numpy().view(np.uint16).copy())
    assert all((o == outs[0]).all() for o in outs[1:])


def test_no_operand_is_kept_alive(rng):
    torch = pytest.importorskip("torch")
    a = torch.randn(40, 50, dtype=torch.float32)
    b = torch.randn(50, 60, dtype=torch.float32)
    refs = [weakref.ref(a), weakref.ref(b)]
    r = warp_gemm.matmul(a, b)
    assert r.shape == (40, 60)
    del a, b, r
    gc.collect()
    assert all(w() is None for w in refs), "warp_gemm (its launch cache included) kept an operand alive"


def _spy_allocator(monkeypatch, reuse: bool):
    """Wrap the launcher's allocator: weak references to every temporary it makes; ``reuse``: hand back
    the same buffer for the same request (what a caching allocator usually does)."""
    made, pool = [], {}
    real = api._allocator

    def spy(dev, torch_path, log):
        alloc = real(dev, torch_path, log)

        def allocate(shape, dtype, zero=False):
            key = (tuple(shape), dtype)
            arr = pool.get(key) if reuse else None
            if arr is None:
                arr = alloc(shape, dtype, zero)
                if reuse:
                    pool[key] = arr
            else:
                log.append(shape)  # a temporary all the same
                if zero:
                    arr.zero_()
            made.append(weakref.ref(arr))
            return arr

        return allocate

    monkeypatch.setattr(api, "_allocator", spy)
    return made, pool


def _strided_out(M, N):
    """A NumPy ``out`` with column stride 2: the kernels write a temporary, converted into it."""
    return np.full((M, 2 * N), np.nan, np.float32)[:, ::2]


def test_temporaries_are_replayed(rng, monkeypatch):
    """A temporary output that comes back at the same address: the second call replays every launch
    (no new records) and computes on the new operand values."""
    made, _pool = _spy_allocator(monkeypatch, reuse=True)
    monkeypatch.setattr(_launch, "_cache", type(_launch._cache)(512))
    A = wp.empty((30, 200), dtype=wp.float32, device="cpu")
    B = wp.empty((200, 30), dtype=wp.float32, device="cpu")
    out = _strided_out(30, 30)
    for n in range(3):
        a, b = random_operands(30, 30, 200, "float32", rng)
        A.assign(a.astype(np.float32))
        B.assign(b.astype(np.float32))
        out[...] = np.nan
        warp_gemm.matmul(A, B, out=out)
        assert compare(out.astype(np.float64), a @ b, "float32").ok, n
        if n == 0:
            recorded = len(_launch._cache)
    assert made, "the strided out should have been computed in a temporary"
    assert recorded >= 2 and len(_launch._cache) == recorded, "later calls should replay the first call's launches"


def test_split_k_workspace_is_cached_and_the_call_kept_as_a_plan(rng, monkeypatch):
    """Split-K partial sums go to the cached workspace (no allocation per call): the call is kept as a
    plan, and its replays zero the workspace again and compute on the new operand values."""
    made, _pool = _spy_allocator(monkeypatch, reuse=False)
    A = wp.empty((30, 200), dtype=wp.float32, device="cpu")
    B = wp.empty((200, 30), dtype=wp.float32, device="cpu")
    out = nan_like("warp", (30, 30), "float32", "cpu")
    for n in range(3):
        a, b = random_operands(30, 30, 200, "float32", rng)
        A.assign(a.astype(np.float32))
        B.assign(b.astype(np.float32))
        out.fill_(float("nan"))
        warp_gemm.matmul(A, B, out=out, config=Config(32, 32, 32, 1, 8, 3))
        assert compare(to_f64(out), a @ b, "float32").ok, n
        assert len(api._plans) == 1, n
        if n == 0:
            _no_launch_path(monkeypatch)  # later calls can only succeed as replays
    assert not made, "split-K should not allocate per call"


def test_temporaries_are_not_kept_alive(rng, monkeypatch):
    """Recorded launches hold borrowed (non-owning) views: a call's temporary is freed after the call."""
    made, _pool = _spy_allocator(monkeypatch, reuse=False)
    a, b = random_operands(30, 30, 200, "float32", rng)
    out = _strided_out(30, 30)
    warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"), out=out)
    assert compare(out.astype(np.float64), a @ b, "float32").ok
    gc.collect()
    assert made and all(w() is None for w in made), "a recorded launch kept a temporary alive"


def test_cache_is_bounded(rng, monkeypatch):
    monkeypatch.setattr(_launch._cache, "maxsize", 4)
    for n in range(8, 16):
        a, b = random_operands(n, n, n, "float32", rng)
        warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"))
    assert len(_launch._cache) <= 4


# --- call plans (core.execute._plans): a repeated call without temporaries replays its recorded launches -------
def _no_launch_path(monkeypatch):
    """Make the full launch path fail: only a plan replay can then succeed."""
    def boom(*a, **k):
        raise AssertionError("core.execute.execute ran: the call was not replayed from its plan")

    monkeypatch.setattr(api, "execute", boom)


def test_plan_replays_with_new_contents(rng, monkeypatch):
    def one_plan_then_no_launch_path():
        assert len(api._plans) == 1
        _no_launch_path(monkeypatch)

    _call_twice_with_new_values(rng, one_plan_then_no_launch_path)


@pytest.mark.parametrize("change", ["alpha", "beta", "config", "trans", "view"])
def test_plan_key_covers_the_call(change, rng):
    """Everything that changes what is launched changes the plan: the second call computes its own result."""
    a, b = random_operands(40, 40, 40, "float64", rng)
    c = rng.standard_normal((40, 40))
    A, B, C = (make(x, "float64", "warp", "cpu") for x in (a, b, c))
    out = nan_like("warp", (40, 40), "float64", "cpu")
    warp_gemm.gemm(A, B, C, alpha=1.0, beta=1.0, out=out)
    kw = dict(alpha=1.0, beta=1.0, out=out)
    ref = a @ b + c
    if change == "alpha":
        kw["alpha"], ref = 2.0, 2.0 * a @ b + c
    elif change == "beta":
        kw["beta"], ref = -1.0, a @ b - c
    elif change == "config":
        kw["config"] = Config(32, 32, 16, 1, 8)
    elif change == "trans":
        kw["trans_a"], ref = True, a.T @ b + c
    else:  # the same memory seen as a narrower operand: a 40x39 view of B, and a 40x39 out
        B = B[:, :39]
        kw["out"] = out = nan_like("warp", (40, 39), "float64", "cpu")
        C = C[:, :39]
        ref = a @ b[:, :39] + c[:, :39]
    out.fill_(float("nan"))
    warp_gemm.gemm(A, B, C, **kw)
    assert compare(to_f64(out), ref, "float64").ok, change


def test_no_plan_for_calls_with_temporaries(rng):
    a, b = random_operands(30, 30, 200, "float32", rng)
    out = _strided_out(30, 30)  # computed in a temporary, converted into out
    warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"), out=out)
    assert compare(out.astype(np.float64), a @ b, "float32").ok
    assert len(api._plans) == 0


def test_saving_a_tuning_table_drops_the_plans(rng, tmp_path, monkeypatch):
    from warp_gemm.config import tables as tuning

    a, b = random_operands(20, 20, 20, "float32", rng)
    warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"))
    assert len(api._plans) == 1
    tuning.save(tmp_path / "t.json", {"sm90|float32|NN": {"10,10,10": "64x64x64/b128/g8"}})
    assert len(api._plans) == 0


# --- the fast path (core.execute._fast): a repeated call skips validation too ------------------------------
def _no_validation(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("core.execute.validate ran: the call did not take the fast path")

    monkeypatch.setattr(api, "validate", boom)


@pytest.mark.parametrize("kind", ["warp", "torch"])
def test_fast_path_replays_with_new_contents(kind, rng, monkeypatch):
    """The second call on the same containers skips validation and planning, and computes on new values."""
    if kind == "torch":
        pytest.importorskip("torch")
    a1, b1 = random_operands(37, 45, 61, "float32", rng)
    a2, b2 = random_operands(37, 45, 61, "float32", rng)
    A, B = make(a1, "float32", kind, "cpu"), make(b1, "float32", kind, "cpu")
    out = nan_like(kind, (37, 45), "float32", "cpu")
    warp_gemm.matmul(A, B, out=out)
    assert compare(to_f64(out), a1 @ b1, "float32").ok
    _no_validation(monkeypatch)
    for x, v in ((A, a2), (B, b2)):
        if kind == "torch":
            x.copy_(__import__("torch").from_numpy(v.astype(np.float32)))
        else:
            x.assign(v.astype(np.float32))
    out.fill_(float("nan"))
    warp_gemm.matmul(A, B, out=out)
    assert compare(to_f64(out), a2 @ b2, "float32").ok


@pytest.mark.parametrize("kind", ["warp", "torch"])
def test_fast_path_new_results_are_new_arrays(kind, rng, monkeypatch):
    """Without out, every call returns an array of its own: a kept earlier result is not overwritten."""
    if kind == "torch":
        pytest.importorskip("torch")
    a, b = random_operands(24, 40, 56, "float64", rng)
    A, B = make(a, "float64", kind, "cpu"), make(b, "float64", kind, "cpu")
    results = [warp_gemm.matmul(A, B) for _ in range(4)]
    assert len({id(r) for r in results}) == 4
    ptrs = {r.data_ptr() if kind == "torch" else r.ptr for r in results}
    assert len(ptrs) == 4
    for r in results:
        assert compare(to_f64(r), a @ b, "float64").ok
    # A new result at an address seen before (allocators recycle them; made certain here by handing out
    # the first result's memory again) replays without validation, into that result.
    first = results[0]
    first.fill_(float("nan"))
    monkeypatch.setattr(api._NewResult, "allocate", lambda self: first)
    _no_validation(monkeypatch)
    r = warp_gemm.matmul(A, B)
    assert r is first
    assert compare(to_f64(r), a @ b, "float64").ok


def test_fast_key_covers_torch_views(rng):
    """Views that share the pointer and shape but read other elements (a transpose of a square tensor,
    a negative view) are other calls."""
    torch = pytest.importorskip("torch")
    a, b = random_operands(32, 32, 32, "float64", rng)
    A, B = make(a, "float64", "torch", "cpu"), make(b, "float64", "torch", "cpu")
    out = torch.full((32, 32), float("nan"), dtype=torch.float64)
    warp_gemm.matmul(A, B, out=out)
    warp_gemm.matmul(A, B, out=out)  # now kept under the fast key
    for view, ref in ((A.T, a.T @ b), (torch._neg_view(A), -a @ b)):
        out.fill_(float("nan"))
        warp_gemm.matmul(view, B, out=out)
        assert compare(to_f64(out), ref, "float64").ok


def test_fast_key_covers_options_and_errors(rng):
    """An invalid call whose operands match a kept call's in pointer only still fails validation, and a
    change of options is another call."""
    a, b = random_operands(16, 16, 16, "float32", rng)
    A, B = make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu")
    out = nan_like("warp", (16, 16), "float32", "cpu")
    for _ in range(2):
        warp_gemm.matmul(A, B, out=out)
    with pytest.raises(ValueError, match="shares memory"):
        warp_gemm.matmul(A, B, out=A)
    with pytest.raises(TypeError, match="alpha"):
        warp_gemm.gemm(A, B, out=out, alpha="2")
    out.fill_(float("nan"))
    with warp_gemm.options(family="tiled", record_launches=True):
        warp_gemm.gemm(A, B, out=out, alpha=3)
    assert compare(to_f64(out), 3 * a @ b, "float32").ok


def test_fast_key_follows_the_tuning_cache_dir(rng, monkeypatch, tmp_path):
    """Another tuning-cache directory may choose another configuration: the fast path does not carry a
    call across a change of WARP_GEMM_CACHE_DIR (the full path runs again)."""
    a, b = random_operands(16, 16, 16, "float32", rng)
    A, B = make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu")
    out = nan_like("warp", (16, 16), "float32", "cpu")
    for _ in range(2):
        warp_gemm.matmul(A, B, out=out)
    calls = []
    orig = api.validate
    monkeypatch.setattr(api, "validate", lambda *x, **k: calls.append(1) or orig(*x, **k))
    warp_gemm.matmul(A, B, out=out)
    assert calls == []  # kept: the fast path
    monkeypatch.setenv("WARP_GEMM_CACHE_DIR", str(tmp_path))
    out.fill_(float("nan"))
    warp_gemm.matmul(A, B, out=out)
    assert calls == [1]
    assert compare(to_f64(out), a @ b, "float32").ok


# --- re-bound plans (core.rebind): new operands of a planned shape skip validation and planning ------------
def _count_full(monkeypatch) -> list:
    """Calls that took the full path (validation and the planner), appended to the returned list."""
    calls = []
    real = api._run_full

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(api, "_run_full", spy)
    return calls


def _fresh(kind, x, dtype, device):
    return make(x, dtype, kind, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["warp", "torch"])
@pytest.mark.parametrize("dtype,shape", [("float32", (37, 45, 61)), ("float16", (64, 40, 96)),
                                         ("float64", (5, 33, 17))])
def test_new_operands_rebind_the_plan(kind, dtype, shape, device, rng, monkeypatch):
    """Operand sets never seen before, of one planned shape: each call after the first re-binds the first
    call's launches (no validation, no planning) and computes its own product, with and without ``out``."""
    if kind == "torch":
        pytest.importorskip("torch")
    if (why := kind_ok(kind, dtype, device)) is not None:
        pytest.skip(why)
    M, N, K = shape
    # a first call on this stream sets up its Warp wrapper (the fast path's key needs it): made on another shape
    warp_gemm.matmul(make(np.ones((8, 8)), dtype, kind, device), make(np.ones((8, 8)), dtype, kind, device))
    full = _count_full(monkeypatch)
    for with_out in (True, False):
        keep = []  # every operand stays alive: no address is reused, each call is on new memory
        for i in range(4):
            a, b = random_operands(M, N, K, dtype, rng)
            A, B = make(a, dtype, kind, device), make(b, dtype, kind, device)
            out = nan_like(kind, (M, N), dtype, device) if with_out else None
            r = warp_gemm.matmul(A, B, out=out)
            if i == 0:
                # Warp 1.7 widens 16-bit operands into temporaries: such calls keep no plan to re-bind
                kept = len(api._plans) > 0
            keep.append((A, B, r))
            assert compare(to_f64(r), a @ b, dtype).ok, (with_out, i)
        assert len(full) == (1 if kept else 4), f"with_out={with_out}: {len(full)} calls took the full path"
        full.clear()
        api.clear_plans()


@pytest.mark.parametrize("device", DEVICES)
def test_rebind_gemm_with_c_and_in_place(device, rng, monkeypatch):
    """``gemm`` with C re-binds; calls with C the output itself (``c is out``) between them compute their own
    product and do not disturb it; an output that overlaps an input is still refused by validation."""
    if (why := kind_ok("warp", "float32", device)) is not None:
        pytest.skip(why)
    M, N, K = 24, 40, 56
    full = _count_full(monkeypatch)
    keep, separate = [], 0
    for in_place in (False, True, False, True, False):
        a, b = random_operands(M, N, K, "float32", rng)
        c = rng.standard_normal((M, N))
        A, B = make(a, "float32", "warp", device), make(b, "float32", "warp", device)
        C = make(c, "float32", "warp", device)
        out = C if in_place else nan_like("warp", (M, N), "float32", device)
        before = len(full)
        warp_gemm.gemm(A, B, C, alpha=0.5, beta=2.0, out=out)
        separate += 0 if in_place else len(full) - before
        keep.append((A, B, C, out))
        assert compare(to_f64(out), 0.5 * (a @ b) + 2.0 * c, "float32").ok, in_place
    assert separate == 1
    with pytest.raises(ValueError, match="shares memory"):
        warp_gemm.matmul(A, B, out=A[:, :N])


@pytest.mark.parametrize("device", DEVICES)
def test_rebind_keys_on_alignment(device, rng, monkeypatch):
    """16-bit views one element off a 16-byte boundary plan differently (staged copies): they get a plan of
    their own, and views of either alignment compute their own product."""
    torch = pytest.importorskip("torch")
    if (why := kind_ok("torch", "float16", device)) is not None:
        pytest.skip(why)
    M, N, K = 40, 48, 64
    full = _count_full(monkeypatch)
    keep = []
    for off in (0, 1, 0, 1, 1):
        a, b = random_operands(M, N, K, "float16", rng)
        bufa = torch.empty(M * K + 8, dtype=torch.float16, device=device)
        A = bufa[off:off + M * K].view(M, K)
        A.copy_(torch.from_numpy(a.astype(np.float16)))
        B = make(b, "float16", "torch", device)
        r = warp_gemm.matmul(A, B)
        kept = len(api._plans) > 0  # none on Warp 1.7 (16-bit operands widened into temporaries)
        keep.append((bufa, B, r))
        assert compare(to_f64(r), a.astype(np.float16).astype(np.float64) @ b, "float16").ok, off
    assert len(full) == (2 if kept else 5)


@pytest.mark.parametrize("device", DEVICES)
def test_rebind_refuses_overlapping_inputs(device, rng, monkeypatch):
    """A and B views of one buffer that overlap (not the same view) take the full path every time."""
    torch = pytest.importorskip("torch")
    if (why := kind_ok("torch", "float32", device)) is not None:
        pytest.skip(why)
    n = 32
    full = _count_full(monkeypatch)
    keep = []  # no address is reused (a reused one would take the fast path, keyed on addresses)
    for _ in range(3):
        x = rng.standard_normal((n + 8, n))
        X = make(x, "float32", "torch", device)
        r = warp_gemm.matmul(X[:n], X[8:])
        keep.append((X, r))
        assert compare(to_f64(r), x[:n] @ x[8:], "float32").ok
    assert len(full) == 3


@pytest.mark.parametrize("device", DEVICES)
def test_rebind_same_operand_twice(device, rng, monkeypatch):
    """``matmul(X, X)`` (A and B the same view) re-binds: after the first call on new memory, each call computes
    its own square without planning again."""
    torch = pytest.importorskip("torch")
    if (why := kind_ok("torch", "float32", device)) is not None:
        pytest.skip(why)
    n = 24
    warp_gemm.matmul(make(np.ones((8, 8)), "float32", "torch", device), make(np.ones((8, 8)), "float32", "torch", device))
    full = _count_full(monkeypatch)
    keep = []
    for _ in range(3):
        x = rng.standard_normal((n, n))
        X = make(x, "float32", "torch", device)
        r = warp_gemm.matmul(X, X)
        kept = len(api._plans) > 0
        keep.append((X, r))
        assert compare(to_f64(r), x @ x, "float32").ok
    assert len(full) == (1 if kept else 3)


@pytest.mark.gpu
def test_first_call_on_a_new_torch_stream_keeps_its_template(rng, monkeypatch):
    """The first call on a torch stream Warp has not wrapped yet (no ``out``) still keeps its re-bindable plan: the
    next call on new operands of that shape, on that stream, skips validation and planning."""
    torch = pytest.importorskip("torch")
    if (why := kind_ok("torch", "float32", "cuda")) is not None:
        pytest.skip(why)
    M, N, K = 40, 56, 72
    full = _count_full(monkeypatch)
    keep = []
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            a, b = random_operands(M, N, K, "float32", rng)
            A, B = make(a, "float32", "torch", "cuda"), make(b, "float32", "torch", "cuda")
            r = warp_gemm.matmul(A, B)
            keep.append((A, B, r))
            s.synchronize()
            assert compare(to_f64(r), a @ b, "float32").ok
    assert len(full) == 1


def test_rebind_build_refuses_unknown_memory(rng):
    """A plan whose launches name memory outside the operands and the cached workspaces is not kept for
    re-binding (core.rebind.build returns None)."""
    from warp_gemm.core import rebind

    a, b = random_operands(16, 16, 16, "float32", rng)
    A, B = make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu")
    out = nan_like("warp", (16, 16), "float32", "cpu")
    warp_gemm.matmul(A, B, out=out)
    (cmds,) = api._plans._d.values()  # the one call plan kept
    assert cmds
    ranges = [(x.ptr, x.ptr + x.capacity) for x in (A, B, out)]
    assert rebind.build(cmds, ranges, lambda p: False) is not None
    assert rebind.build(cmds, ranges[:2], lambda p: False) is None
