"""Tuning tables: winners per bucket, lookup, corrupt/stale files, and one kernel per first call."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest

import warp_gemm
from warp_gemm import Config
from warp_gemm.kernels import tiled as _kernels
from warp_gemm.config import tables as tune
from warp_gemm.tools.tune import _winners

SM90 = types.SimpleNamespace(arch=90, name="NVIDIA H100 80GB HBM3", is_cpu=False)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WARP_GEMM_CACHE_DIR", str(tmp_path))
    tune._tables.clear()
    tune._memo.clear()
    yield tmp_path
    tune._tables.clear()
    tune._memo.clear()


def _row(dtype, M, N, K, cfg, tflops):
    return {"arch": "sm90", "dtype": dtype, "layout": "NN", "M": M, "N": N, "K": K, "config": cfg,
            "status": "ok", "tflops": tflops}


def test_winners_saved_and_looked_up(cache_dir):
    rows = [_row("float16", 4096, 4096, 4096, "128x128x64/b256/g8", 41.0),
            _row("float16", 4096, 4096, 4096, "128x128x256/b256/g8", 51.0),
            _row("float16", 16, 8192, 8192, "16x128x256/b128/g8/s0", 12.0),
            {"arch": "sm90", "dtype": "float16", "layout": "NN", "M": 4096, "N": 4096, "K": 4096,
             "config": "256x256x256/b256/g8", "status": "WRONG"}]
    tune.save(tune.user_cache_path(SM90), _winners(rows))
    assert tune.lookup(SM90, "float16", "NN", 4096, 4096, 4096, 1) == Config.parse("128x128x256/b256/g8")
    # Near buckets (within a factor of 4 in one dimension) share the winner; far ones do not.
    assert tune.lookup(SM90, "float16", "NN", 4000, 4100, 8000, 1) == Config.parse("128x128x256/b256/g8")
    assert tune.lookup(SM90, "float16", "TN", 1, 8000, 8192, 1) == Config(16, 128, 256, 128, 8, 0)
    assert tune.lookup(SM90, "float64", "NN", 4096, 4096, 4096, 1) != Config.parse("128x128x256/b256/g8")
    # bfloat16 borrows float16's winners.
    assert tune.lookup(SM90, "bfloat16", "NN", 4096, 4096, 4096, 1) == Config.parse("128x128x256/b256/g8")


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": 999, "entries": {}}),
                                     json.dumps({"format": 1, "entries": {"sm90|float16|NN": {"x": "y"}}}),
                                     json.dumps([1, 2, 3])])
def test_corrupt_or_stale_cache_is_ignored_with_a_warning(cache_dir, content):
    path = tune.user_cache_path(SM90)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    with pytest.warns(UserWarning, match="ignoring tuning table"):
        hit = tune.lookup(SM90, "float32", "NN", 4096, 4096, 4096, 1)
    # Falls through to the shipped table (or None): never raises.
    assert hit is None or isinstance(hit, Config)


def test_shipped_table_parses():
    cfgs = tune.shipped_configs("float16")
    assert cfgs and all(isinstance(c, Config) for c in cfgs)
    assert Config.parse(str(cfgs[0])) == cfgs[0]


def test_first_call_builds_exactly_one_kernel(rng):
    """A first call with no tuning compiles one GEMM kernel (plain path: no split-K, no padding)."""
    before = _kernels._build.cache_info().currsize
    a = rng.standard_normal((23, 29)).astype(np.float32)
    b = rng.standard_normal((29, 31)).astype(np.float32)
    # A configuration no other test uses, so its kernel is certainly new in this process.
    warp_gemm.matmul(a, b, config=Config(16, 16, 16, 1, 4))
    assert _kernels._build.cache_info().currsize == before + 1
    warp_gemm.matmul(a, b, config=Config(16, 16, 16, 1, 4))
    assert _kernels._build.cache_info().currsize == before + 1


def test_winner_is_best_across_the_bucket():
    """One lucky shape must not pick a configuration that is slow on its bucket's other shapes."""
    def row(M, cfg, tf):
        return {"status": "ok", "arch": "sm90", "dtype": "float16", "layout": "NN", "M": M, "N": M, "K": M,
                "config": cfg, "tflops": tf}

    rows = [row(1024, "a", 17.1), row(1024, "b", 17.0), row(1000, "a", 9.0), row(1000, "b", 16.0),
            row(4096, "a", 50.0), row(4096, "c", 60.0)]
    w = _winners(rows)["sm90|float16|NN"]
    assert w[",".join(map(str, tune.bucket(1024, 1024, 1024)))] == "b"
    assert w[",".join(map(str, tune.bucket(4096, 4096, 4096)))] == "c"


def test_config_text_round_trip():
    for text in ("128x128x64/b256/g8", "16x128x256/b128/g8/s0", "128x128x64/b256/g8/o2", "64x64x32/b128/g4/s3/o3"):
        assert str(Config.parse(text)) == text
    assert Config.parse("64x64x64") == Config(64, 64, 64, 256, 8, 1, 0)
    with pytest.raises(ValueError, match="unknown field"):
        Config.parse("64x64x64/b128/x3")
