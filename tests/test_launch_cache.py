"""Recorded-launch replay (api._tile_launch): a hit must launch exactly what a fresh launch would."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from conftest import make, nan_like, to_f64

import warp_gemm
from warp_gemm import _compat, api
from warp_gemm.tolerance import compare, random_operands

pytestmark = pytest.mark.skipif(not _compat.HAS_RECORD_CMD, reason="no wp.launch(record_cmd=True)")


def test_replay_reads_new_contents(rng):
    """Same arrays, new values: the replayed launch computes on the new data."""
    a1, b1 = random_operands(37, 45, 61, "float32", rng)
    a2, b2 = random_operands(37, 45, 61, "float32", rng)
    A, B = make(a1, "float32", "warp", "cpu"), make(b1, "float32", "warp", "cpu")
    out = nan_like("warp", (37, 45), "float32", "cpu")
    warp_gemm.matmul(A, B, out=out)
    assert compare(to_f64(out), a1 @ b1, "float32").ok
    hits = len(api._launches)
    A.assign(a2.astype(np.float32))
    B.assign(b2.astype(np.float32))
    out.fill_(float("nan"))
    warp_gemm.matmul(A, B, out=out)
    assert len(api._launches) == hits, "the second call should replay the first call's launch"
    assert compare(to_f64(out), a2 @ b2, "float32").ok


def test_scalars_are_part_of_the_key(rng):
    a, b = random_operands(20, 30, 40, "float64", rng)
    c = rng.standard_normal((20, 30))
    A, B, C = (make(x, "float64", "warp", "cpu") for x in (a, b, c))
    out = nan_like("warp", (20, 30), "float64", "cpu")  # the same arrays every time: only scalars change
    for alpha, beta in [(1.0, 0.5), (2.0, 0.5), (2.0, -1.0)]:
        out.fill_(float("nan"))
        warp_gemm.gemm(A, B, C, alpha=alpha, beta=beta, out=out)
        assert compare(to_f64(out), alpha * a @ b + beta * c, "float64").ok, (alpha, beta)


def test_same_bits_with_and_without_replay(rng, monkeypatch):
    a, b = random_operands(33, 65, 70, "float16", rng)
    A, B = make(a, "float16", "warp", "cpu"), make(b, "float16", "warp", "cpu")
    outs = []
    for cache in (False, True, True):
        monkeypatch.setattr(api, "LAUNCH_CACHE", cache)
        out = nan_like("warp", (33, 65), "float16", "cpu")
        warp_gemm.matmul(A, B, out=out)
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


def test_temporaries_are_not_recorded(rng, monkeypatch):
    """Launches on temporaries (split-K workspace here) are not recorded: a recorded launch keeps its
    argument list, which would keep the temporary alive."""
    from warp_gemm import Config

    monkeypatch.setattr(api, "_launches", type(api._launches)(256))
    a, b = random_operands(30, 30, 200, "float32", rng)
    warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"),
                     config=Config(32, 32, 32, 1, 8, 3))
    assert len(api._launches) == 0
    warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"))
    assert len(api._launches) == 1


def test_cache_is_bounded(rng, monkeypatch):
    monkeypatch.setattr(api._launches, "maxsize", 4)
    for n in range(8, 16):
        a, b = random_operands(n, n, n, "float32", rng)
        warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"))
    assert len(api._launches) <= 4
