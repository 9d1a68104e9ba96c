"""The launcher's special paths on the CPU backend: split-K and zero-padded tile-multiple copies.

On CUDA these are chosen automatically (split-K when the output tiles cannot fill the GPU, padding
for large problems with misaligned rows); here they are forced so CI exercises their kernels.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from conftest import DTYPES, make, nan_like, to_f64

import warp_gemm
from warp_gemm import Config
from warp_gemm import _compat
from warp_gemm.families import tiled
from warp_gemm.families.tiled import rules as plan
from warp_gemm.core.options import Options
from warp_gemm.tools.tolerance import compare, random_operands, round_to


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("split", [2, 3, 7])
@pytest.mark.parametrize("with_c", [False, True])
def test_split_k(dtype, split, with_c, rng):
    M, N, K = 37, 45, 7 * 32 + 5
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal(N), dtype)
    out = nan_like("warp", (M, N), dtype, "cpu")
    cfg = Config(32, 32, 32, 1, 8, split)
    args = (make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"))
    if with_c:
        warp_gemm.gemm(*args, make(c, dtype, "warp", "cpu"), alpha=1.25, beta=-0.5, out=out, config=cfg)
        ref = 1.25 * a @ b - 0.5 * c
    else:
        warp_gemm.matmul(*args, out=out, config=cfg)
        ref = a @ b
    cmp = compare(to_f64(out), ref, dtype)
    assert cmp.ok, f"split {split} {dtype}: {cmp}"


@pytest.fixture
def opts():
    """``opts(**changes)``: planner options for the rest of the test (warp_gemm.options)."""
    with contextlib.ExitStack() as stack:
        yield lambda **kw: stack.enter_context(warp_gemm.options(**kw))


def test_split_k_batched_transposed(rng):
    a, b = random_operands(19, 23, 150, "float32", rng, batch=3)
    A = make(np.ascontiguousarray(np.swapaxes(a, 1, 2)), "float32", "warp", "cpu")
    res = warp_gemm.gemm(A, make(b, "float32", "warp", "cpu"), trans_a=True, config=Config(32, 32, 32, 1, 8, 4))
    assert compare(to_f64(res), np.matmul(a, b), "float32").ok


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("smem_pad", [False, True])
def test_padded_copies(dtype, layout, split, smem_pad, rng, monkeypatch, opts):
    if smem_pad and not _compat.HAS_STRIDED_MATMUL_OPERANDS:
        pytest.skip("padded shared tiles need warp-lang 1.19")
    opts(pad_on_cpu=True, smem_pad_on_cpu=smem_pad, pad_min_work=1)
    M, N, K = 45, 37, 61  # odd leading dimensions: rows not 16-byte aligned
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal((M, N)), dtype)
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(a.T) if ta else a, dtype, "numpy", "cpu")
    B = make(np.ascontiguousarray(b.T) if tb else b, dtype, "numpy", "cpu")
    out = nan_like("numpy", (M, N), dtype, "cpu")
    warp_gemm.gemm(A, B, make(c, dtype, "numpy", "cpu"), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb, out=out,
                   config=Config(32, 32, 32, 1, 8, split))
    cmp = compare(out, 0.5 * a @ b + 2.0 * c, dtype)
    assert cmp.ok, f"{dtype} {layout}: {cmp}"


@pytest.mark.skipif(not _compat.HAS_STRIDED_MATMUL_OPERANDS,
                    reason="padded shared tiles need tile_matmul with strided operands (warp-lang 1.19)")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("MNK", [(45, 37, 61), (128, 96, 64), (70, 45, 56)])
@pytest.mark.parametrize("clamp", [False, True])
def test_padded_shared_tiles(dtype, layout, split, MNK, clamp, rng, monkeypatch, opts):
    """The CUDA kernels' padded A/B/accumulator layouts (wide loads, tile_view, transposed views, the
    split-K atomic epilogue of a view) on the CPU backend. 45x37x61: the last tiles are partial and the
    wide loads of the last tiles start ``pad`` columns early (the edge shift); 128x96x64: tile
    multiples, where the shifted loads of the last column/K tiles end exactly at the array's edge;
    70x45x56: K = 3.5 tiles of 16, an 8-element overlap -- a whole number of 16-byte chunks for every
    dtype, so with ``clamp`` the last K tile is clamped and its overlap zeroed (plan.k_clamp_for).
    ``clamp``: the CUDA launcher's clamped last tile row/column/K tile (plan.edge_clamps, k_clamp_for)."""
    opts(smem_pad_on_cpu=True, edge_clamp_on_cpu=clamp)
    M, N, K = MNK
    a, b = random_operands(M, N, K, dtype, rng, batch=2)
    c = round_to(rng.standard_normal((M, N)), dtype)
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(np.swapaxes(a, 1, 2)) if ta else a, dtype, "warp", "cpu")
    B = make(np.ascontiguousarray(np.swapaxes(b, 1, 2)) if tb else b, dtype, "warp", "cpu")
    out = nan_like("warp", (2, M, N), dtype, "cpu")
    cfg = Config(64, 32, 16, 1, 8, split)  # 64 rows: the epilogue runs in two 32-row chunks
    built = []
    get = tiled.get_kernel
    monkeypatch.setattr(tiled.launch, "get_kernel", lambda spec: built.append(spec) or get(spec))
    warp_gemm.gemm(A, B, make(c, dtype, "warp", "cpu"), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb, out=out,
                   config=cfg)
    pads = tiled.smem_pads(dtype, False, tf32=True)
    assert [(s.pad_ab, s.pad_c) for s in built] == [pads] and min(pads) > 0, built
    # the K-tail kernel exactly where the last K tile is clamped: 56 = 3.5 tiles of 16
    assert [s.k_tail for s in built] == [clamp and MNK == (70, 45, 56)], built
    cmp = compare(to_f64(out), 0.5 * np.matmul(a, b) + 2.0 * c, dtype)
    assert cmp.ok, f"{dtype} {layout} split {split}: {cmp}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", ["full", "row", "strided"])
def test_edge_clamp(dtype, bias, rng, monkeypatch, opts):
    """The overlapping last tile row/column (plan.edge_clamps) with every way C reaches the kernel:
    read in place (clamped), or first copied into D (a broadcast bias, a strided view: not clamped,
    since a clamped block would read C rows the neighbouring block already overwrote)."""
    opts(edge_clamp_on_cpu=True)
    M, N, K = 70, 45, 33  # 3x2 tiles of 32x32 with the last row/column clamped to 38 and 13
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal(N if bias == "row" else (M, N)), dtype)
    if bias == "strided":  # a transposed view: unit row stride
        C = make(np.ascontiguousarray(c.T), dtype, "warp", "cpu").transpose()
    else:
        C = make(c, dtype, "warp", "cpu")
    out = nan_like("warp", (M, N), dtype, "cpu")
    warp_gemm.gemm(make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"), C, alpha=0.5, beta=2.0, out=out,
                   config=Config(32, 32, 32, 1, 8))
    cmp = compare(to_f64(out), 0.5 * a @ b + 2.0 * c, dtype)
    assert cmp.ok, f"{dtype} {bias}: {cmp}"


@pytest.mark.skipif(not _compat.HAS_STRIDED_MATMUL_OPERANDS,
                    reason="padded shared tiles need tile_matmul with strided operands (warp-lang 1.19)")
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_k_clamp_zeroes_both_operands(dtype, layout, rng, monkeypatch, opts):
    """A clamped last K tile (plan.k_clamp_for) re-reads K columns the previous tile counted and zeroes them
    in A *and* B: with an infinity in each operand's overlap, zeroing only one would add inf * 0 = NaN
    where the product is an infinity."""
    opts(smem_pad_on_cpu=True, edge_clamp_on_cpu=True)
    M, N, K = 40, 40, 56  # 16-deep K tiles: the last one is clamped to start at 40; overlap K 40..47
    a, b = random_operands(M, N, K, dtype, rng)
    a[3, 44] = np.inf
    b[45, 5] = -np.inf
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(a.T) if ta else a, dtype, "warp", "cpu")
    B = make(np.ascontiguousarray(b.T) if tb else b, dtype, "warp", "cpu")
    out = nan_like("warp", (M, N), dtype, "cpu")
    assert plan.k_clamp_for(K, Config(32, 32, 16, 1, 8), 8, dtype, False, Options()) == 40
    warp_gemm.gemm(A, B, trans_a=ta, trans_b=tb, out=out, config=Config(32, 32, 16, 1, 8))
    got = to_f64(out)
    with np.errstate(invalid="ignore"):
        ref = a @ b
    assert np.array_equal(np.isnan(got), np.isnan(ref)), f"NaN at {np.argwhere(np.isnan(got) != np.isnan(ref))[:5]}"
    assert np.array_equal(np.isinf(got) & (got > 0), np.isinf(ref) & (ref > 0))
    assert np.array_equal(np.isinf(got) & (got < 0), np.isinf(ref) & (ref < 0))
    finite = np.isfinite(ref)
    cmp = compare(np.where(finite, got, 0.0), np.where(finite, ref, 0.0), dtype)
    assert cmp.ok, f"{dtype} {layout}: {cmp}"
