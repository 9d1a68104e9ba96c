"""Tuning tables: winners per bucket, lookup, corrupt/stale files, and one kernel per first call."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest

import warp_gemm
from warp_gemm import Config
from warp_gemm.families import tiled as _kernels
from warp_gemm.config import tables as tune
from warp_gemm.tools.tune import FAMILY_MIN_SCORE, _winners

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


# --- the pipelined family's configurations -------------------------------------------------------------------
from warp_gemm.config.configs import PipeConfig  # noqa: E402
from warp_gemm.families.pipelined import rules as _plan  # noqa: E402
from warp_gemm.core.options import options as _options  # noqa: E402
from warp_gemm.core.plan import make_plan as _make_plan  # noqa: E402
from warp_gemm.families import pipelined as _pipe  # noqa: E402

PIPE_OK = _pipe.applies(__import__("warp").get_device("cpu"), "float64")
needs_pipe = pytest.mark.skipif(not PIPE_OK, reason="pipelined family needs Warp 1.19-class tiles")


def test_pipe_config_text_round_trip():
    for text in ("pipe/128x128x128/s2/b256/o1", "pipe/64x64x32/s2/b128/o2", "pipe/96x128x64/s4/b512/o0",
                 "pipe/128x128x128/s2/b128/o1/p1"):
        assert str(PipeConfig.parse(text)) == text
    assert PipeConfig.parse(" pipe/128x64x128 ") == PipeConfig(128, 64, 128, 2, 256, 0)
    assert PipeConfig.parse("pipe/64x64x32/o2/b128") == PipeConfig(64, 64, 32, 2, 128, 2)  # any order
    assert PipeConfig.parse(str(PipeConfig(32, 64, 32, 3, 128, 2))) == PipeConfig(32, 64, 32, 3, 128, 2)
    assert PipeConfig.parse("pipe/64x64x32/p2/o2").fields()["persistent"] == 2


@pytest.mark.parametrize("text,field", [
    ("128x128x128/s2/b256/o1", "pipe/"),  # a tiled-family string is not a pipelined one
    ("pipe", "tile shape"),
    ("pipe/128x128/s2", "tile shape"),
    ("pipe/128x100x128/s2", "tn"),
    ("pipe/0x128x128", "tm"),
    ("pipe/128x128x1024", "tk"),
    ("pipe/128x128x128/s9", "stages"),
    ("pipe/128x128x128/s1", "stages"),
    ("pipe/128x128x128/sx", "stages"),
    ("pipe/128x128x128/b100", "block_dim"),
    ("pipe/128x128x128/b2048", "block_dim"),
    ("pipe/128x128x128/o-1", "min_blocks"),
    ("pipe/128x128x128/b1024/o4", "min_blocks"),
    ("pipe/128x128x128/g8", "unknown field 'g8'"),
    ("pipe/128x128x128/s2/s3", "stages"),
    ("pipe/128x128x128/p9", "persistent"),
    ("pipe/128x128x128/px", "persistent"),
    ("pipe/128x128x128//s2", "unknown field ''"),
])
def test_pipe_config_errors_name_the_field(text, field):
    with pytest.raises(ValueError, match="bad pipelined configuration") as e:
        PipeConfig.parse(text)
    assert field in str(e.value)
    with pytest.raises(ValueError, match="stages"):
        PipeConfig(128, 128, 128, stages=9)


@pytest.mark.parametrize("dtype,tf32", [("float16", False), ("bfloat16", False), ("float32", True),
                                        ("float32", False), ("float64", False)])
def test_pipe_candidates_fit(dtype, tf32):
    """8-18 candidates per dtype, the measured default among them, and every one within the per-block
    shared-memory limit in every layout as the planner builds it (those that are not are dropped: 128x256x64 for
    16-bit); the 16-bit, tf32 and float64 ones include mma.sync kernels, exact float32's are all SIMT kernels."""
    if tf32 and not __import__("warp_gemm")._compat.HAS_TF32:
        pytest.skip("no tf32 in this Warp")
    cands = _plan.candidate_pipe_configs(dtype, tf32)
    assert 8 <= len(cands) <= 18 and len(set(cands)) == len(cands)
    default = _pipe.default_spec(dtype, tf32=tf32)
    assert any(c.fields() == {k: getattr(default, k) for k in c.fields()} for c in cands)
    for c in cands:
        for lay in ("NN", "NT", "TN", "TT"):
            spec = _plan._with_pipe_config(_pipe.default_spec(dtype, tf32=tf32, layout=lay), c, False)
            assert _pipe.smem_bytes(spec) <= _pipe.SMEM_LIMIT and _pipe.unfit(spec) == "", (c, lay)
    assert sum(c.mma for c in cands) == {"float16": 6, "bfloat16": 6, "float32": 3 if tf32 else 0, "float64": 10}[dtype]
    assert all(c.simt for c in cands) if dtype == "float32" and not tf32 else not any(c.simt for c in cands)
    if dtype == "float16":
        assert PipeConfig.parse("pipe/128x256x64/s2/b256/o1") not in cands  # 234 KB: dropped


def test_pipe_winners_go_to_pipe_groups():
    def row(cfg, tf, family="pipelined", M=4096, batch=0):
        return {"status": "ok", "arch": "sm90", "dtype": "float16", "layout": "NN", "M": M, "N": 4096, "K": 4096,
                "batch": batch, "config": cfg, "tflops": tf, "family": family}

    rows = [row("pipe/128x128x128/s2/b256/o1", 150.0), row("pipe/128x128x64/s3/b256/o1", 130.0),
            row("128x128x64/b256/g8/o2", 100.0, family="tiled"),
            row("pipe/128x64x128/s2/b256/o1", 90.0, M=256, batch=64),
            row("pipe/128x128x128/s2/b256/o1", 80.0, M=256, batch=64)]
    w = _winners(rows)
    big = ",".join(map(str, tune.bucket(4096, 4096, 4096)))
    assert w["sm90|float16|NN|pipe"][big] == "pipe/128x128x128/s2/b256/o1"
    assert w["sm90|float16|NN"][big] == "128x128x64/b256/g8/o2"
    batched = ",".join(map(str, tune.bucket(256, 4096, 4096, 64)))  # the batch folds into M
    assert w["sm90|float16|NN|pipe"][batched] == "pipe/128x64x128/s2/b256/o1"


def _save_pipe(entries: dict):
    tune.save(tune.user_cache_path(SM90), {g: {",".join(map(str, tune.bucket(*s))): c for s, c in rows.items()}
                                           for g, rows in entries.items()})


def _pipe_spec_for(dtype, M, N, K, batch=1, layout="NN", tf32=False):
    return _plan.choose_pipe_spec(SM90, dtype, dtype, tf32, layout, "scale", M, N, K, batch)


def _fields(spec):
    return f"pipe/{spec.tm}x{spec.tn}x{spec.tk}/s{spec.stages}/b{spec.block_dim}/o{spec.min_blocks}"


def test_tuned_pipe_table_changes_the_planner(cache_dir):
    """A '|pipe' group in the user's table replaces default_spec's tile shape, stages, block size and blocks
    per SM for its buckets (paddings, chunk, dtypes, layout and epilogue kept) on a CUDA device; bfloat16
    and untuned layouts borrow, far buckets keep the default, the tiled lookup does not see the group."""
    default = _pipe_spec_for("float16", 4096, 4096, 4096)
    assert _fields(default) == "pipe/128x128x64/s3/b128/o1" and default.mma == 4  # the mma.sync kernel
    _save_pipe({"sm90|float16|NN|pipe": {(4096, 4096, 4096): "pipe/128x128x64/s3/b256/o1",
                                         (256, 256, 256, 64): "pipe/128x64x128/s3/b256/o1"},
                "sm90|float64|NN|pipe": {(4096, 4096, 4096): "pipe/128x64x32/s2/b256/o1"}})
    tuned = _pipe_spec_for("float16", 4000, 4096, 4090)  # the same bucket (12, 12, 12)
    assert _fields(tuned) == "pipe/128x128x64/s3/b256/o1"
    # a neighbouring bucket keeps the built-in choice: pipelined winners apply to their own bucket only
    assert _pipe_spec_for("float16", 4000, 4096, 4100) == default
    # a tile_matmul winner over the mma.sync default: tile_matmul's paddings (shared accumulator), no mma
    assert (tuned.pad_ab, tuned.pad_c, tuned.chunk, tuned.in_dtype, tuned.mma) == (8, 8, 16, "float16", 0)
    assert _fields(_pipe_spec_for("bfloat16", 4096, 4096, 4096)) == "pipe/128x128x64/s3/b256/o1"
    nt = _pipe_spec_for("float16", 4096, 4096, 4096, layout="NT")
    assert _fields(nt) == "pipe/128x128x64/s3/b256/o1" and nt.layout_b == "T"
    assert _fields(_pipe_spec_for("float16", 256, 256, 256, batch=64)) == "pipe/128x64x128/s3/b256/o1"
    assert _fields(_pipe_spec_for("float64", 4096, 4096, 4096)) == "pipe/128x64x32/s2/b256/o1"
    assert _pipe_spec_for("float16", 100, 100, 100) == _pipe.default_spec("float16", M=100, N=100)  # far away
    assert tune.lookup_pipe(SM90, "float16", "NN", 4096, 4096, 4096, 1) == PipeConfig.parse("pipe/128x128x64/s3/b256/o1")
    hit = tune.lookup(SM90, "float16", "NN", 4096, 4096, 4096, 1)
    assert hit is None or isinstance(hit, Config)  # the tiled lookup ignores the pipe groups
    assert all(isinstance(c, Config) for c in tune.shipped_configs("float16"))


def test_tuned_mma_winner_changes_the_planner(cache_dir):
    """A tuned ``/mma`` winner (the mma.sync kernel) is planned like any pipelined configuration: its warps from the
    block size, the family's 16-byte row padding, the accumulator in registers; its neighbours keep the default."""
    _save_pipe({"sm90|float16|NN|pipe": {(4096, 4096, 4096): "pipe/128x256x32/s3/b256/o1/mma"}})
    spec = _pipe_spec_for("float16", 4096, 4096, 4096)
    assert (spec.tm, spec.tn, spec.tk, spec.stages, spec.block_dim, spec.mma) == (128, 256, 32, 3, 256, 8)
    assert (spec.pad_ab, spec.pad_c, spec.simt) == (8, 0, False) and _pipe.unfit(spec) == ""
    assert _pipe_spec_for("float16", 4000, 4096, 4100) == _pipe.default_spec("float16", M=4000, N=4096, K=4100)


def test_tuned_pipe_config_that_does_not_fit_is_ignored(cache_dir):
    """A tuned configuration whose kernel would not fit (shared memory) leaves default_spec's choice."""
    _save_pipe({"sm90|float16|NN|pipe": {(4096, 4096, 4096): "pipe/128x256x64/s2/b256/o1"},  # 234 KB
                "sm90|float64|NN|pipe": {(4096, 4096, 4096): "pipe/128x128x64/s4/b256/o1"}})
    assert _pipe_spec_for("float16", 4096, 4096, 4096) == _pipe.default_spec("float16", M=4096, N=4096)
    assert _pipe_spec_for("float64", 4096, 4096, 4096) == _pipe.default_spec("float64", M=4096, N=4096)


@pytest.mark.parametrize("content", [
    json.dumps({"format": 1, "entries": {"sm90|float16|NN|pipe": {"12,12,12": "pipe/100x128x128"}}}),
    json.dumps({"format": 1, "entries": {"sm90|float16|NN|pipe": {"12,12,12": "128x128x64/b256/g8"}}}),
    json.dumps({"format": 1, "entries": {"sm90|float16|NN": {"12,12,12": "pipe/128x128x128/s2/b256/o1"}}}),
    json.dumps({"format": 2, "entries": {"sm90|float16|NN|pipe": {"12,12,12": "pipe/128x128x64/s3/b256/o1"}}}),
    "{not json"])
def test_corrupt_or_stale_pipe_table_is_ignored_with_a_warning(cache_dir, content):
    path = tune.user_cache_path(SM90)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    with pytest.warns(UserWarning, match="ignoring tuning table"):
        spec = _pipe_spec_for("float16", 4096, 4096, 4096)
    shipped = tune.lookup_pipe(SM90, "float16", "NN", 4096, 4096, 4096, 1)  # the shipped table, if any
    want = _pipe.default_spec("float16", M=4096, N=4096)
    assert spec == (_plan.pipe_spec(want, shipped) or want if shipped else want)


def test_old_tables_load_without_pipe_groups(cache_dir):
    """A format-1 file from before the pipelined groups: its tiled winners load, no pipe hit."""
    path = tune.user_cache_path(SM90)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "warp": "1.19.0",
                                "entries": {"sm90|float16|NN": {"12,12,12": "128x128x256/b256/g8"}}}))
    assert tune.lookup(SM90, "float16", "NN", 4096, 4096, 4096, 1) == Config.parse("128x128x256/b256/g8")
    other = types.SimpleNamespace(arch=90, name="a GPU with no user table", is_cpu=False)
    assert tune.lookup_pipe(SM90, "float16", "NN", 4096, 4096, 4096, 1) == \
        tune.lookup_pipe(other, "float16", "NN", 4096, 4096, 4096, 1)  # only the shipped table's answer


def test_saving_a_table_drops_call_plans(cache_dir):
    from warp_gemm.core import execute

    execute._plans.put(("probe",), ())
    _save_pipe({"sm90|float16|NN|pipe": {(4096, 4096, 4096): "pipe/128x128x64/s3/b256/o1"}})
    assert execute._plans.get(("probe",)) is None


def test_shipped_pipe_configs_and_precompile(tmp_path, monkeypatch):
    """Pipe groups of the shipped tables: listed per dtype (bfloat16 borrows float16's), kept apart from
    the tiled configurations, and built by `warp-gemm precompile` in every layout asked for."""
    from warp_gemm.families.pipelined.rules import precompile_jobs as pipelined_jobs

    data = tmp_path / "tuned_sm90.json"
    data.write_text(json.dumps({"format": 1, "entries": {
        "sm90|float16|NN": {"12,12,12": "128x128x64/b256/g8/o2"},
        "sm90|float16|NN|pipe": {"12,12,12": "pipe/128x128x64/s3/b256/o1", "10,10,10": "pipe/128x64x128/s3/b256/o1"},
        "sm90|tf32|NN|pipe": {"12,12,12": "pipe/128x128x32/s3/b256/o1"}}}))
    monkeypatch.setattr(tune, "_shipped_files", lambda: [data])
    tune._tables.pop(str(data), None)
    assert tune.shipped_configs("float16") == [Config.parse("128x128x64/b256/g8/o2")]
    pipes = [PipeConfig.parse("pipe/128x128x64/s3/b256/o1"), PipeConfig.parse("pipe/128x64x128/s3/b256/o1")]
    assert tune.shipped_pipe_configs("float16") == sorted(pipes)
    assert tune.shipped_pipe_configs("bfloat16") == sorted(pipes)
    assert tune.shipped_pipe_configs("tf32") == [PipeConfig.parse("pipe/128x128x32/s3/b256/o1")]
    assert tune.shipped_pipe_configs("float64") == []
    if not _pipe.has_native_tile_args():
        return
    jobs = pipelined_jobs(["float16", "bfloat16"], ("NN", "TT"), ("scale", "axpby"))
    got = {(j[1].in_dtype, j[1].layout_a + j[1].layout_b, j[1].epilogue, _fields(j[1])) for j in jobs}
    for dt in ("float16", "bfloat16"):
        for lay in ("NN", "TT"):
            for epi in ("scale", "axpby"):
                for c in pipes:
                    assert (dt, lay, epi, str(c)) in got
    assert len({j[1] for j in jobs}) == len(jobs)


@needs_pipe
def test_forced_pipe_config_through_the_api_on_cpu(rng, planned):
    """options(family="pipelined", pipe_config=...) plans exactly that configuration (block 1 and no
    launch bound on the CPU; a persistent one: 4 blocks looping over 8 output tiles of 2 batch entries)
    through the public call path; the result matches float64; another
    configuration is another plan (the option is part of the call-plan key); one that does not fit raises."""
    import warp_gemm
    from warp_gemm.tools.tolerance import compare, random_operands

    a, b = random_operands(45, 61, 70, "float64", rng, batch=2)  # odd rows: staged to 16-byte rows
    out = np.empty((2, 45, 61))
    for text in ("pipe/32x64x32/s3/b128/o2", "pipe/64x32x16/s2/b256/o1", "pipe/32x32x32/s2/p1"):
        n = len(planned)
        with warp_gemm.options(family="pipelined", pipe_config=text, cpu_backend="tiles"):
            for _ in range(2):
                out.fill(np.nan)
                warp_gemm.matmul(a, b, out=out)
                cmp = compare(out, np.matmul(a, b), "float64")
                assert cmp.ok, f"{text}: {cmp}"
        assert len(planned) > n  # the same operands under another configuration: planned again
        spec = planned[-1].family_spec
        assert planned[-1].family == "pipelined"
        want = PipeConfig.parse(text)
        assert (spec.tm, spec.tn, spec.tk, spec.stages, spec.block_dim, spec.min_blocks, spec.persistent) == \
            (want.tm, want.tn, want.tk, want.stages, 1, 0, want.persistent)
        assert not want.persistent or spec.pad_c > 0  # persistent blocks get a shared accumulator on the CPU too
    with pytest.raises(ValueError, match="shared memory"):
        with warp_gemm.options(family="pipelined", pipe_config=PipeConfig(256, 256, 128, 4), cpu_backend="tiles"):
            warp_gemm.matmul(a, b)
    with pytest.raises(TypeError, match="pipe_config"):
        with warp_gemm.options(pipe_config=Config(64, 64, 64, 128)):
            pass


@needs_pipe
def test_tuner_pieces_on_cpu(rng):
    """What tune(family="pipelined") runs per candidate, on the CPU twin (tune() itself refuses the CPU):
    the plan check, the forced call, the batched operands with the checked rows in batch 0."""
    import warp as wp

    from warp_gemm.tools import tune as T
    from warp_gemm.tools.tolerance import compare, random_operands

    dev = wp.get_device("cpu")
    a64, b64 = random_operands(40, 48, 72, "float64", rng)
    A = T._device_operand(rng, (3, 40, 72), "float64", dev, a64)
    B = T._device_operand(rng, (3, 72, 48), "float64", dev, b64)
    out = wp.empty((3, 40, 48), dtype=wp.float64, device=dev)
    cfg = PipeConfig.parse("pipe/32x32x32/s2/b128/o1")
    key = T._pipe_check(A, B, out, cfg, False)()
    assert key.startswith("wg_pipe_float64_float64_NN_32x32x32_s2_b1")
    out.fill_(float("nan"))
    T._pipe_call(A, B, out, cfg, False)()
    assert compare(T._rows_f64(out, 40), a64 @ b64, "float64").ok
    assert np.array_equal(T._rows_f64(A, 40), a64)
    assert T._candidates("pipelined", "float32", None) == _plan.candidate_pipe_configs("float32", False)  # SIMT
    assert T._candidates("pipelined", "tf32", ["pipe/128x128x64/s2/b256/o1"]) == [PipeConfig(128, 128, 64, 2, 256, 1)]
    with pytest.raises(ValueError, match="CUDA"):
        T.tune(["fp16"], device="cpu", family="pipelined")
    with pytest.raises(ValueError, match="family"):
        T.tune(["fp16"], device="cpu", family="small")


def test_tools_have_no_undefined_globals():
    """Every global name the tuning, table and precompile modules load exists (tune() itself cannot run
    here: a missing import would only show on a GPU)."""
    import builtins
    import dis
    import importlib

    for name in ("warp_gemm.tools.tune", "warp_gemm.tools.precompile", "warp_gemm.tools.cli",
                 "warp_gemm.config.tables", "warp_gemm.config.configs", "warp_gemm.core.plan",
                 "warp_gemm.core.options"):
        mod = importlib.import_module(name)
        missing = set()
        todo = [compile(open(mod.__file__).read(), mod.__file__, "exec")]
        while todo:
            code = todo.pop()
            todo += [c for c in code.co_consts if hasattr(c, "co_code")]
            for ins in dis.get_instructions(code):
                if ins.opname == "LOAD_GLOBAL" and not hasattr(mod, ins.argval) and not hasattr(builtins, ins.argval):
                    missing.add(ins.argval)
        assert not missing, f"{name}: undefined globals {sorted(missing)}"


def test_ship_table_copies_the_pipe_groups(cache_dir, tmp_path):
    """benchmarks/ship_table.py: the user table's '|pipe' groups replace the shipped file's groups of
    the same name; tiled groups and other keys stay; the result loads."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "ship_table.py"
    spec = importlib.util.spec_from_file_location("ship_table", path)
    ship = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship)
    _save_pipe({"sm90|float16|NN|pipe": {(4096, 4096, 4096): "pipe/128x128x64/s3/b256/o1"},
                "sm90|float16|NN": {(4096, 4096, 4096): "128x128x256/b256/g8"}})
    dst = tmp_path / "tuned_sm90.json"
    dst.write_text(json.dumps({"format": 1, "measured": "tiled note", "entries": {
        "sm90|float16|NN": {"12,12,12": "128x128x64/b256/g8/o2"},
        "sm90|float16|NN|pipe": {"10,10,10": "pipe/128x64x128/s2/b256/o1"}}}))
    assert ship.main([str(tune.user_cache_path(SM90)), "--into", str(dst), "--note", "test run"]) == 0
    data = json.loads(dst.read_text())
    assert data["entries"]["sm90|float16|NN|pipe"] == {"12,12,12": "pipe/128x128x64/s3/b256/o1"}
    assert data["entries"]["sm90|float16|NN"] == {"12,12,12": "128x128x64/b256/g8/o2"}
    assert data["measured"] == "tiled note" and data["pipe_measured"] == "test run"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 1, "entries": {"sm90|float16|NN|pipe": {"12,12,12": "pipe/7x7x7"}}}))
    with pytest.warns(UserWarning, match="ignoring tuning table"):
        assert ship.main([str(bad), "--into", str(dst)]) == 1


def test_cli_tune_family_flag(tmp_path, capsys):
    """`warp-gemm tune --family pipelined --device cpu` is refused in one line (exit 2) before anything runs
    (tune() itself refuses the CPU too); an unknown family is a usage error."""
    from warp_gemm.tools import cli
    from warp_gemm.tools import tune as tuner

    rows = tmp_path / "rows.jsonl"
    assert cli.main(["tune", "--family", "pipelined", "--device", "cpu", "--rows", str(rows), "--no-save"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warp-gemm tune: error:") and "--device cpu" in err[0], err
    assert not rows.exists()
    with pytest.raises(ValueError, match="CUDA"):
        tuner.tune(["fp16"], device="cpu", family="pipelined", persist=False)
    with pytest.raises(SystemExit):
        cli.main(["tune", "--family", "small"])


def test_shipped_pipe_winners_do_not_override_snippet_defaults():
    """No shipped pipelined winner is a tile_matmul configuration for a bucket whose built-in choice on CUDA is a
    snippet kernel (mma.sync, SIMT): such winners were tuned before those kernels existed, and overrode them (tf32
    4096^3 ran 96.6 TFLOP/s on the table's 128x128x64 tile_matmul kernel against 125.7 for the mma.sync default, H100,
    round 13). Each bucket is checked at its largest shape (the bucket of 4096 is 2049..4096); the table's
    "pipe_over_snippet" lists the winners that were timed against the snippet default, with the numbers."""
    from warp_gemm.families import pipelined

    if not _options().pipe_snippets:
        pytest.skip("snippet defaults switched off")
    checked = 0
    for path in tune._shipped_files():
        data = json.loads(path.read_text())
        measured = data.get("pipe_over_snippet", {})  # winners timed against the snippet default, with the numbers
        for group, rows in data["entries"].items():
            if not group.endswith(tune.PIPE):
                continue
            _, dt, layout = group[:-len(tune.PIPE)].split("|")
            tf32 = dt == "tf32"
            for b, text in rows.items():
                m, n, k = (2 ** int(x) for x in b.split(","))
                spec = pipelined.default_spec("float32" if tf32 else dt, tf32=tf32, layout=layout, M=m, N=n, K=k,
                                              sm_count=132)
                cfg = PipeConfig.parse(text)
                if (spec.mma or spec.simt or spec.wgmma) and f"{group} {b}" not in measured:
                    assert cfg.mma or cfg.simt or cfg.wgmma, (group, b, text, spec.key)
                checked += 1
    assert checked  # the shipped table has pipelined groups (float64, tf32)


# --- the family tuner (tune --family families) and the '|family' groups ---------------------------------------
def _fam_row(fam, tf, M=16, N=8192, K=8192, batch=0, status="ok"):
    return {"status": status, "arch": "sm90", "dtype": "float16", "layout": "NN", "M": M, "N": N, "K": K,
            "batch": batch, "config": fam, "tflops": tf, "family": "families"}


def _fam_key(M, N, K, batch=1):
    return ",".join(map(str, tune.family_bucket(M, N, K, batch)))


def test_family_winners_go_to_family_groups():
    """The family tuner's rows: the fastest family per bucket in '|family' groups keyed by family_bucket, a batch
    apart from the one product of the same folded size; rows that did not plan (n/a) or failed do not count."""
    rows = [_fam_row("skinny", 30.0), _fam_row("splitpipe", 33.0), _fam_row("pipelined", 99.0, status="n/a"),
            _fam_row("small", 5.0, M=256, N=256, K=256, batch=64),
            _fam_row("pipelined", 80.0, M=256, N=256, K=256, batch=64),
            _fam_row("tiled", 60.0, M=16384, N=256, K=256),
            _fam_row("pipelined", 50.0, M=16384, N=256, K=256)]
    w = _winners(rows)["sm90|float16|NN|family"]
    assert w == {_fam_key(16, 8192, 8192): "splitpipe", _fam_key(256, 256, 256, 64): "pipelined",
                 _fam_key(16384, 256, 256): "tiled"}
    assert _fam_key(256, 256, 256, 64) != _fam_key(16384, 256, 256)  # same folded bucket, batch flag apart
    assert tune.family_bucket(256, 256, 256, 64)[:3] == tune.bucket(16384, 256, 256)


def test_family_bucket_keeps_small_m_apart():
    """M = 1, 2-8 and 9-16 are separate family buckets (the GEMV, splitpipe's narrow rows), not folded into 16 as the
    configuration buckets do; from 16 rows on the two agree."""
    keys = {tune.family_bucket(m, 8192, 8192) for m in (1, 8, 16)}
    assert len(keys) == 3 and tune.family_bucket(9, 8192, 8192) == tune.family_bucket(16, 8192, 8192)
    assert tune.bucket(1, 8192, 8192) == tune.bucket(16, 8192, 8192)
    for m, batch in [(16, 1), (17, 1), (300, 1), (16, 64), (1, 64)]:
        assert tune.family_bucket(m, 4096, 512, batch)[:3] == tune.bucket(m, 4096, 512, batch)


def test_family_bucket_whose_shapes_disagree_is_left_out():
    """Two shapes of one bucket, each 2x faster on a different family: no family scores FAMILY_MIN_SCORE, so the
    bucket gets no entry (the rules decide) -- where a bucket whose shapes agree keeps its winner."""
    rows = [_fam_row("skinny", 40.0, M=9), _fam_row("splitpipe", 20.0, M=9),
            _fam_row("skinny", 20.0, M=16), _fam_row("splitpipe", 40.0, M=16),
            _fam_row("tiled", 10.0, M=1024, N=1024, K=1024), _fam_row("pipelined", 30.0, M=1024, N=1024, K=1024)]
    assert _fam_key(9, 8192, 8192) == _fam_key(16, 8192, 8192)
    assert _winners(rows)["sm90|float16|NN|family"] == {_fam_key(1024, 1024, 1024): "pipelined"}
    assert FAMILY_MIN_SCORE > 0.75  # each family scores (1 + 0.5) / 2 on the disagreeing bucket


def test_shipped_family_table_and_rules_on_cuda_like(cache_dir, monkeypatch):
    """What the planner picks on an sm_90 stand-in (conftest.CudaLike; nothing launched) with the shipped tables:
    '|family' buckets (float32 rows of 5-16 to tiled, from splitpipe; 32x4096x4096 and 128x1024x1024 to tiled, from
    the SIMT kernel; float32 batches of 64^3 and 256^3 take the pipelined family by the rules) and its rule (16-bit products of 1-3 output tiles with K <= 2048: pipelined)."""
    from conftest import CudaLike, cuda_like_problem

    from warp_gemm.core.options import Options

    if warp_gemm._compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7 (no tile_astype): the planner keeps every product on the tiled family")
    assert tune.lookup_family(CudaLike(), "float32", "NN", 16, 8192, 8192, 1) == "tiled"

    def family(dtype, M, N, K, batch=1):
        sa, sb = ((batch, M, K), (batch, K, N)) if batch > 1 else ((M, K), (K, N))
        p = cuda_like_problem(monkeypatch, np.zeros(sa, dtype), np.zeros(sb, dtype))
        return _make_plan(p, 1.0, 0.0, False, None, Options()).family

    assert family(np.float32, 64, 64, 64, batch=256) == "pipelined"
    assert family(np.float32, 256, 256, 256, batch=64) == "pipelined"
    assert family(np.float32, 16, 8192, 8192) == "tiled" and family(np.float32, 8, 4096, 4096) == "tiled"
    assert family(np.float32, 16, 16, 16, batch=10000) == "small"  # no shipped bucket: the rules
    for M, N, K in [(64, 64, 64), (32, 32, 32), (100, 200, 300), (128, 128, 2048), (17, 17, 17)]:
        assert family(np.float16, M, N, K) == "pipelined", (M, N, K)
    assert _plan.pipelined_min_tiles("float16", 2049) == _plan.PIPELINED_MIN_TILES["float16"] > 1
    assert family(np.float16, 48, 80, 4000) == "tiled"  # one tile, long K: the tiled family's split-K
    assert family(np.float32, 64, 64, 64) == "pipelined"  # exact float32: the SIMT kernel at every size
    assert family(np.float32, 32, 4096, 4096) == "tiled" and family(np.float32, 128, 1024, 1024) == "tiled"  # table
    assert family(np.float64, 64, 64, 64) == "pipelined"  # float64: the DMMA kernel at every size
    assert family(np.float16, 16, 8192, 8192) == "splitpipe"  # the float32 table does not reach float16


def test_family_table_lookup(cache_dir):
    """lookup_family: its own bucket only, batches apart, bfloat16 and untuned layouts borrow; the tiled and
    pipelined lookups and the shipped-config lists never see a family name."""
    tune.save(tune.user_cache_path(SM90), {"sm90|float16|NN|family": {_fam_key(16, 8192, 8192): "skinny",
                                                                      _fam_key(256, 256, 256, 64): "small"}})
    assert tune.lookup_family(SM90, "float16", "NN", 16, 8192, 8192, 1) == "skinny"
    assert tune.lookup_family(SM90, "float16", "NN", 9, 5000, 4100, 1) == "skinny"  # the same bucket
    assert tune.lookup_family(SM90, "float16", "NN", 16, 8192, 16384, 1) is None  # a neighbour: the rules
    assert tune.lookup_family(SM90, "bfloat16", "TN", 16, 8192, 8192, 1) == "skinny"
    assert tune.lookup_family(SM90, "float16", "NN", 256, 256, 256, 64) == "small"
    assert tune.lookup_family(SM90, "float16", "NN", 16384, 256, 256, 1) is None  # not a batch
    assert tune.lookup_family(SM90, "float64", "NN", 16, 8192, 8192, 1) is None  # no float64 groups anywhere
    hit = tune.lookup(SM90, "float16", "NN", 16, 8192, 8192, 1)
    assert hit is None or isinstance(hit, Config)
    assert all(isinstance(c, Config) for c in tune.shipped_configs("float16"))


@pytest.mark.parametrize("entries", [{"sm90|float16|NN|family": {"4,13,13,0": "fastest"}},
                                     {"sm90|float16|NN|family": {"4,13,13": "skinny"}}])
def test_bad_family_table_is_ignored_with_a_warning(cache_dir, entries):
    """An unknown family name or a bucket without its batch field: the whole file is ignored, with a warning."""
    path = tune.user_cache_path(SM90)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "entries": entries}))
    with pytest.warns(UserWarning, match="ignoring tuning table"):
        assert tune.lookup_family(SM90, "float16", "NN", 16, 8192, 8192, 1) is None


def test_tuned_family_changes_the_planner(cache_dir, monkeypatch):
    """A '|family' winner is planned as if forced where it plans the problem; "tiled" sends the problem to the tiled
    family; a winner that does not plan the problem (gemv for a 512-row product) leaves the rules' choice; a forced
    family (Options) is never overridden. On a CUDA-like device (conftest.CudaLike: planning only, nothing
    launched)."""
    from conftest import CudaLike, cuda_like_problem

    from warp_gemm.core.options import Options

    if warp_gemm._compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7 (no tile_astype): the planner keeps every product on the tiled family")

    def family(M, N, K, **opts):
        p = cuda_like_problem(monkeypatch, np.zeros((M, K), np.float16), np.zeros((K, N), np.float16))
        return _make_plan(p, 1.0, 0.0, False, None, Options(**opts)).family

    ruled = {s: family(*s) for s in [(16, 8192, 8192), (1, 4096, 4096), (512, 512, 512)]}
    assert ruled[(1, 4096, 4096)] == "gemv" and ruled[(512, 512, 512)] == "pipelined"
    assert ruled[(16, 8192, 8192)] != "pipelined"
    other = "pipelined"  # it plans a 16-row product where forced (skinny, forced, would not: the tiled family)
    tune.save(tune.user_cache_path(CudaLike()), {"sm90|float16|NN|family": {
        _fam_key(16, 8192, 8192): other, _fam_key(1, 4096, 4096): "tiled", _fam_key(512, 512, 512): "gemv"}})
    assert family(16, 8192, 8192) == other
    assert family(1, 4096, 4096) == "tiled"
    assert family(512, 512, 512) == "pipelined"  # gemv does not plan a 512-row product: the rules decide
    assert family(1, 4096, 4096, family="gemv") == "gemv"  # forced: the table is not consulted


@needs_pipe
def test_family_tuner_pieces_on_cpu(rng):
    """What tune(family="families") runs per candidate, on the CPU twins (tune() itself refuses the CPU): the plan
    check (NotPlanned where the forced family falls back), the forced call against float64, the measure's "n/a"."""
    import warp as wp

    from warp_gemm.tools import tune as T
    from warp_gemm.tools.shapes import Shape
    from warp_gemm.tools.tolerance import compare, random_operands

    dev = wp.get_device("cpu")
    a64, b64 = random_operands(1, 40, 24, "float64", rng)
    A = T._device_operand(rng, (1, 24), "float64", dev, a64)
    B = T._device_operand(rng, (24, 40), "float64", dev, b64)
    out = wp.empty((1, 40), dtype=wp.float64, device=dev)
    assert T._family_check(A, B, out, "gemv", False)().startswith("gemv wg_gemv_")
    with pytest.raises(T.NotPlanned, match="small does not plan"):
        T._family_check(A, B, out, "small", False)()
    out.fill_(float("nan"))
    T._family_call(A, B, out, "gemv", False)()
    assert compare(out.numpy(), a64 @ b64, "float64").ok
    s = Shape(1, 40, 24)
    r = T._measure(T._family_call(A, B, out, "small", False), out, "float64", False, s, a64 @ b64, dev, 1,
                   T._family_check(A, B, out, "small", False))
    assert r["status"] == "n/a"
    assert T._candidates("families", "float16", None) == list(tune.FAMILY_NAMES)
    assert T._candidates("families", "float16", ["skinny", "gemv"]) == ["skinny", "gemv"]
    with pytest.raises(ValueError, match="unknown kernel family"):
        T._candidates("families", "float16", ["fastest"])
    with pytest.raises(ValueError, match="CUDA"):
        T.tune(["fp16"], device="cpu", family="families")
    assert T._shape_text(Shape(32, 32, 32, 4096)) == "4096x32x32x32" and T._shape_text(s) == "1x40x24"


def test_ship_table_copies_the_family_groups(cache_dir, tmp_path):
    """benchmarks/ship_table.py --groups family: the user table's '|family' groups only, noted under
    'family_measured'; the pipe groups stay."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "ship_table.py"
    spec = importlib.util.spec_from_file_location("ship_table", path)
    ship = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ship)
    tune.save(tune.user_cache_path(SM90), {"sm90|float16|NN|family": {_fam_key(16, 8192, 8192): "skinny"},
                                           "sm90|float16|NN|pipe": {"12,12,12": "pipe/128x128x64/s3/b256/o1"}})
    dst = tmp_path / "tuned_sm90.json"
    dst.write_text(json.dumps({"format": 1, "entries": {
        "sm90|float16|NN|pipe": {"10,10,10": "pipe/128x64x128/s2/b256/o1"}}}))
    assert ship.main([str(tune.user_cache_path(SM90)), "--into", str(dst), "--groups", "family",
                      "--note", "family run"]) == 0
    data = json.loads(dst.read_text())
    assert data["entries"]["sm90|float16|NN|family"] == {_fam_key(16, 8192, 8192): "skinny"}
    assert data["entries"]["sm90|float16|NN|pipe"] == {"10,10,10": "pipe/128x64x128/s2/b256/o1"}
    assert data["family_measured"] == "family run"


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,dtype,winner", [
    (16, 1024, 1024, "float16", "pipelined"),  # the rules: splitpipe or skinny
    (1, 2048, 2048, "bfloat16", "tiled"),  # the rules: gemv
    (4, 1000, 1000, "float32", "tiled")])  # the rules: skinny
def test_family_table_on_cuda(M, N, K, dtype, winner, cache_dir, rng, planned):
    """A user table's '|family' winner on a GPU: planned for its bucket in place of the rules' family, and correct
    against float64 (NaN-prefilled output); a product of a neighbouring bucket keeps the rules' family."""
    import warp as wp

    from conftest import make, nan_like, to_f64
    from warp_gemm.tools.tolerance import compare, random_operands

    if not wp.get_cuda_device_count():
        pytest.skip("no CUDA device")
    if dtype == "bfloat16" and not warp_gemm._compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")

    def run(n):
        a, b = random_operands(M, n, K, dtype, rng)
        out = nan_like("warp", (M, n), dtype, "cuda")
        warp_gemm.matmul(make(a, dtype, "warp", "cuda"), make(b, dtype, "warp", "cuda"), out=out)
        wp.synchronize()
        cmp = compare(to_f64(out), a @ b, dtype)
        assert cmp.ok, f"{M}x{n}x{K} {dtype}: {cmp}"
        return planned[-1].family

    ruled, ruled_next = run(N), run(2 * N)  # 2N: the next bucket
    assert ruled != winner
    dev = wp.get_device("cuda")
    tune.save(tune.user_cache_path(dev), {f"{tune.arch_of(dev)}|{dtype}|NN|family": {_fam_key(M, N, K): winner}})
    assert run(N) == winner
    assert run(2 * N) == ruled_next


def test_shipped_family_groups_follow_from_their_rows(tmp_path, monkeypatch, capsys):
    """benchmarks/family_gain.py on the family tuner's rows (H100) yields exactly the shipped '|family' groups: the
    table is what its evidence says under today's rules (a rule change that serves a bucket itself, or ships a
    bucket by hand, shows here)."""
    import importlib.util

    if warp_gemm._compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7 (no tile_astype): the planner keeps every product on the tiled family")
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("family_gain", root / "benchmarks" / "family_gain.py")
    fg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fg)
    monkeypatch.setenv("WARP_GEMM_CACHE_DIR", str(tmp_path))  # no user table: the rules and the shipped one
    tune._memo.clear()
    out = tmp_path / "fam.json"
    assert fg.main([str(root / "benchmarks/results/tuning/families.jsonl"), "--out", str(out)]) == 0
    derived = json.loads(out.read_text())["entries"]
    shipped = json.loads((root / "warp_gemm/config/data/tuned_sm90.json").read_text())
    shipped = {g: v for g, v in shipped["entries"].items() if g.endswith(tune.FAMILY)}
    assert derived == shipped and derived, capsys.readouterr().out
    tune._memo.clear()
