"""The Hopper family (warp_gemm/families/hopper): TMA + wgmma kernels on an sm_90 GPU against float64, its rules, and
its offline sm_90a build.

GPU tests need CUDA sm_90 (H100/H200) and skip elsewhere: every output is NaN-prefilled, inputs are fresh random
draws (``randn * K**-0.25``), the bound is the package's tolerance model. The operands are 3-D Warp views whose rows
are padded to a multiple of 8 elements (16 bytes, TMA's rule) when K or N is odd, as the planner's staging does for
short rows (it pads rows of 1 KB or more to 128 bytes); D may be a column view of a wider array whose other columns must stay untouched. The CPU tests check what the
rules refuse and that the kernels build offline for sm_90a (no GPU needed).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import zlib

import numpy as np
import pytest
import warp as wp
from conftest import CudaLike, make, to_f64

from warp_gemm import _compat
from warp_gemm.families import hopper as H
from warp_gemm.tools.tolerance import compare, random_operands, round_to

_compat.init()


def _sm90():
    if wp.get_cuda_device_count() == 0:
        return None
    d = wp.get_device("cuda:0")
    return d if d.arch == 90 else None


DEV = _sm90()
needs_sm90 = pytest.mark.skipif(DEV is None, reason="needs a CUDA sm_90 GPU (H100/H200)")
HAS_BF16 = _compat.HAS_BF16


def _rng(request) -> np.random.Generator:
    salt = int(os.environ.get("WARP_GEMM_TEST_SEED", "0") or 0)
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()) + salt)


def _ld8(n: int) -> int:
    return -(-n // 8) * 8


def _view(x: np.ndarray, dtype: str, device, ld: int | None = None) -> wp.array:
    """A 3-D Warp view of ``x`` (nb, rows, cols) on ``device``; ``ld`` > cols: a column slice of a wider array whose
    other columns hold finite junk (7.0) that must never be read or written."""
    nb, rows, cols = x.shape
    if ld is None or ld == cols:
        return make(x, dtype, "warp", device)
    wide = np.full((nb, rows, ld), 7.0)
    wide[:, :, :cols] = x
    return make(wide, dtype, "warp", device)[:, :, :cols]


def _run(spec: H.HopperSpec, M, N, K, rng, *, batch=1, a_nb=1, b_nb=1, c_nb=1, alpha=1.25, beta=-0.5, ldd=None,
         grid=None):
    """Run ``spec`` on fresh operands on the GPU; returns (D as float64, float64 reference). Split-K specs get a
    NaN-prefilled float32 workspace (a slab element the kernel leaves unwritten reaches D as NaN)."""
    dt, ot = spec.in_dtype, spec.out_dtype
    nb = max(a_nb, b_nb, batch)
    a, b = random_operands(M, N, K, dt, rng, batch=nb)
    a, b = a[:a_nb], b[:b_nb]
    b_st = np.swapaxes(b, 1, 2) if spec.layout_b == "T" else b
    A = _view(a, dt, DEV, _ld8(K))
    B = _view(b_st, dt, DEV, _ld8(b_st.shape[2]))
    c = round_to(rng.standard_normal((c_nb, M, N)), ot) if spec.epilogue == "axpby" else None
    C = make(c, ot, "warp", DEV) if c is not None else None
    D = _view(np.full((batch, M, N), np.nan), ot, DEV, ldd)
    W = None
    if spec.splits > 1:
        W = wp.full((spec.splits * batch, M, N), float("nan"), dtype=wp.float32, device=DEV)
    todo = H.launch_args(spec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb if c is not None else 1,
                         grid=grid, workspace=W)
    assert len(todo) == (2 if spec.splits > 1 else 1)
    for k, dim, inputs, block in todo:
        if block is None:  # the split-K finishing pass: a plain kernel
            wp.launch(k, dim=list(dim), inputs=inputs, device=DEV)
        else:
            wp.launch_tiled(k, dim=list(dim), inputs=inputs, block_dim=block, device=DEV)
    wp.synchronize_device(DEV)
    if ldd is not None and ldd != N:
        wide = wp.array(ptr=D.ptr, dtype=D.dtype, shape=(batch, M, ldd), device=DEV)
        np.testing.assert_array_equal(to_f64(wide)[:, :, N:], 7.0)  # nothing written past N
    ai, bi = np.minimum(np.arange(batch), a_nb - 1), np.minimum(np.arange(batch), b_nb - 1)
    ref = alpha * np.matmul(a[ai], b[bi])
    if c is not None:
        ref = ref + beta * c[np.minimum(np.arange(batch), c_nb - 1)]
    return to_f64(D), ref


def _check(out, ref, dtype, tf32=False):
    cmp = compare(out, ref, dtype, tf32)
    assert cmp.ok, str(cmp)


def _spec(in_dtype="float16", out_dtype="float16", layout_b="T", epilogue="scale", **over) -> H.HopperSpec:
    return H.HopperSpec(in_dtype=in_dtype, out_dtype=out_dtype, layout_b=layout_b, epilogue=epilogue, **over)


_IN = ["float16"] + (["bfloat16"] if HAS_BF16 else [])
SHAPES = [  # M, N, K
    pytest.param(4096, 4096, 4096, id="M4096-N4096-K4096"),
    pytest.param(4095, 4095, 4095, id="M4095-N4095-K4095"),
    pytest.param(4097, 4097, 4097, id="M4097-N4097-K4097"),
    pytest.param(1023, 1025, 1027, id="M1023-N1025-K1027"),
    pytest.param(1, 333, 520, id="M1-N333-K520"),
    pytest.param(257, 1, 129, id="M257-N1-K129"),
    pytest.param(130, 300, 40, id="M130-N300-K40"),  # K under one K tile (64)
    pytest.param(64, 72, 8, id="M64-N72-K8"),
]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("layout_b", ["T", "N"])
@pytest.mark.parametrize("in_dtype", _IN)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_default_tiles_against_float64(M, N, K, in_dtype, layout_b, request):
    """The default kernel (128x256x64, 4 stages, persistent grid) on tile multiples, tile +- 1, odd shapes, a single
    row / column and K under one K tile, both B layouts, the input dtype as output (alpha 1.25)."""
    spec = _spec(in_dtype, in_dtype, layout_b)
    out, ref = _run(spec, M, N, K, _rng(request))
    _check(out, ref, in_dtype)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_tf32_against_float64(M, N, K, epilogue, request):
    """float32 operands multiplied as tf32 (K-major B: layout T), the default tiles, every shape of the 16-bit test,
    with and without beta * C (batch 2, C broadcast): within the tf32 tolerance (the tensor core truncates the inputs
    to tf32)."""
    spec = _spec("float32", "float32", "T", epilogue)
    batch = 2 if epilogue == "axpby" else 1
    out, ref = _run(spec, M, N, K, _rng(request), batch=batch, a_nb=batch, b_nb=batch)
    _check(out, ref, "float32", tf32=True)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("layout_b", ["T", "N"])
@pytest.mark.parametrize("in_dtype,out_dtype", [("float16", "float32")] + (
    [("bfloat16", "float32"), ("bfloat16", "bfloat16")] if HAS_BF16 else []) + [("float16", "float16")])
def test_axpby_batched_broadcast_strided_output(in_dtype, out_dtype, layout_b, request):
    """alpha * A @ op(B) + beta * C over 3 batch entries with A broadcast, D a column view of a wider array (its
    other columns untouched, pairs stored one by one where D's rows are not aligned), odd M, N, K."""
    spec = _spec(in_dtype, out_dtype, layout_b, "axpby")
    out, ref = _run(spec, 301, 517, 203, _rng(request), batch=3, a_nb=1, b_nb=3, c_nb=3, ldd=517 + 3)
    _check(out, ref, out_dtype)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("over", [
    {"bm": 128, "bn": 128, "stages": 6}, {"bm": 256, "bn": 128, "stages": 4}, {"bm": 128, "bn": 256, "stages": 3},
    {"setmaxnreg": False}, {"consumers": 1, "bm": 128, "bn": 128, "stages": 4},
    {"bm": 64, "bn": 128, "stages": 8, "split_n": True}, {"bm": 64, "bn": 256, "stages": 4, "split_n": True},
    {"bm": 128, "bn": 128, "stages": 6, "split_n": True}], ids=lambda o: H.HopperSpec(**o).key)
@pytest.mark.parametrize("layout_b", ["T", "N"])
def test_other_tiles(over, layout_b, request):
    """The tile shapes, stage counts and warpgroup splits the benchmarks compare, batch 2, C broadcast."""
    spec = _spec("float16", "float32", layout_b, "axpby", **over)
    out, ref = _run(spec, 515, 771, 333, _rng(request), batch=2, a_nb=2, b_nb=2, c_nb=1)
    _check(out, ref, "float32")


STAGED = [  # the staged store (staged_store): the tiles whose buffer fits beside the stages
    {"bm": 128, "bn": 128, "stages": 5, "staged_store": True},
    {"bm": 64, "bn": 128, "stages": 8, "split_n": True, "staged_store": True},
    {"bm": 64, "bn": 128, "stages": 8, "consumers": 1, "cluster": 2, "staged_store": True},
    {"bm": 64, "bn": 128, "stages": 8, "split_n": True, "cluster": 2, "staged_store": True}]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("over", STAGED, ids=lambda o: H.HopperSpec(**o).key)
@pytest.mark.parametrize("out_dtype", _IN)
@pytest.mark.parametrize("epilogue", ["scale", "axpby"])
@pytest.mark.parametrize("N,ldd,grid", [(776, 776 + 8, None), (776, 776 + 8, 5), (771, 771 + 5, None)],
                         ids=["rows16", "rows16-grid5", "odd-N"])
def test_staged_store_against_float64(over, out_dtype, epilogue, N, ldd, grid, request):
    """16-bit outputs through the shared staging buffer (stmatrix, then 16-byte stores of whole rows): 515 rows (a partial last tile row), N 776
    (a partial last tile column of 8) in a D whose rows are 16-byte aligned but wider (nothing written past N), a
    persistent grid of 5 blocks (several tiles per block reuse the buffer), and N 771 (rows off 16 bytes: the stores
    from registers); batch 2, C broadcast, both B layouts over the two grids."""
    layout_b = "N" if grid else "T"
    spec = _spec(out_dtype, out_dtype, layout_b, epilogue, **over)
    out, ref = _run(spec, 515, N, 333, _rng(request), batch=2, a_nb=2, b_nb=2, c_nb=1, ldd=ldd, grid=grid)
    _check(out, ref, out_dtype)


def test_staged_store_rule():
    """16-bit outputs take the staged store on 128x128 tiles with K up to STAGED_STORE_MAX_K (5 stages) and on the
    64x128 cluster tiles (8 stages; short K: the split_n clusters); float32 outputs, longer K, split_n without
    clusters, split-K kernels and 128x256 tiles keep the stores from registers; an unfit spec is refused."""
    from warp_gemm.families.hopper import rules as R

    s = R.default_spec("float16", "float16", "N", 1536, 1536, R.STAGED_STORE_MAX_K, 1, 132)
    assert (s.bm, s.bn, s.stages, s.cluster, s.staged_store) == (128, 128, 5, 1, True) and not H.unfit(s)
    s = R.default_spec("float16", "float16", "N", 1000, 1000, 1000, 1, 132)
    assert (s.bm, s.bn, s.stages, s.cluster, s.split_n, s.staged_store) == (64, 128, 8, 2, True, True)
    assert not H.unfit(s)
    s = R.default_spec("bfloat16", "bfloat16", "T", 1000, 1000, 4000, 1, 132)
    assert (s.bm, s.bn, s.stages, s.cluster, s.split_n, s.staged_store) == (64, 128, 8, 2, False, True)
    assert not R.default_spec("float16", "float32", "N", 1000, 1000, 1000, 1, 132).staged_store
    assert not R.default_spec("float16", "float16", "N", 4096, 4096, 4096, 1, 132).staged_store
    long_k = R.default_spec("float16", "float16", "N", 1536, 1536, R.STAGED_STORE_MAX_K + 64, 1, 132)
    assert (long_k.bm, long_k.bn, long_k.cluster) == (128, 128, 1) and not long_k.staged_store and long_k.stages == 6
    sn = R.default_spec("float16", "float16", "N", 1024, 1024, 1024, 1, 132, rows_128=True)
    assert sn.split_n and not sn.staged_store
    split = R.default_spec("float16", "float16", "N", 1024, 1024, 16384, 1, 132)
    assert split.splits > 1 and not split.staged_store and not split.kernel_spec.staged_store
    assert "staged_store" in H.unfit(H.HopperSpec(out_dtype="float32", staged_store=True))
    assert "shared memory" in H.unfit(H.HopperSpec(bm=128, bn=128, stages=6, staged_store=True))


CLUSTERS = [  # clusters of two blocks: the tile shapes the benchmarks compare, sharing B (pair M) or A (pair N)
    {"bm": 64, "bn": 128, "stages": 8, "split_n": True, "cluster": 2},
    {"bm": 64, "bn": 128, "stages": 8, "split_n": True, "cluster": 2, "pair": "N"},
    {"bm": 64, "bn": 128, "stages": 8, "consumers": 1, "cluster": 2},
    {"bm": 128, "bn": 128, "stages": 6, "cluster": 2},
    {"bm": 128, "bn": 128, "stages": 6, "cluster": 2, "pair": "N"},
    {"bm": 128, "bn": 256, "stages": 4, "cluster": 2}]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("over", CLUSTERS, ids=lambda o: H.HopperSpec(**o).key)
@pytest.mark.parametrize("layout_b", ["T", "N"])
def test_clusters_against_float64(over, layout_b, request):
    """Clusters of two on odd M, N, K (515 x 771: an odd number of tile rows and columns, so the last pair item's
    second tile lies past the edge: copied, not stored), batch 2 with C broadcast, float32 output and axpby, D a
    column view of a wider array (nothing written past N)."""
    spec = _spec("float16", "float32", layout_b, "axpby", **over)
    out, ref = _run(spec, 515, 771, 333, _rng(request), batch=2, a_nb=2, b_nb=2, c_nb=1, ldd=771 + 5)
    _check(out, ref, "float32")


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("in_dtype", _IN)
@pytest.mark.parametrize("layout_b", ["T", "N"])
@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (1023, 1025, 1027), (1, 333, 520), (257, 1, 129)])
@pytest.mark.parametrize("consumers,staged", [(1, False), (1, True), (2, False)])
def test_cluster_shapes_16bit_output(M, N, K, layout_b, in_dtype, consumers, staged, request):
    """The 64x128 clusters (pair M; one consumer as the planner takes them, with and without the staged store, or
    two splitting the columns) with the input dtype as output: 1000^3, tile +- 1, a single row (every pair's second
    tile masked) and a single column. One pair item per cluster: the lone clusters' ending (no exit barrier, the
    last stages not released) with K tiles past the stage count."""
    spec = _spec(in_dtype, in_dtype, layout_b, bm=64, bn=128, stages=8, consumers=consumers,
                 split_n=consumers == 2, cluster=2, staged_store=staged)
    out, ref = _run(spec, M, N, K, _rng(request))
    _check(out, ref, in_dtype)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("pair", ["M", "N"])
@pytest.mark.parametrize("grid,splits", [(2, 1), (5, 1), (6, 3), (None, 3)])
def test_cluster_persistent_grids_and_split_k(grid, splits, pair, request):
    """Clusters walking several pair items each (one cluster for all; 5 blocks asked, 3 clusters launched; fewer
    clusters than items with K splits) and split-K partial slabs (NaN-prefilled workspace), batch 2, A broadcast."""
    spec = _spec("float16", "float16", "N", bm=64, bn=128, stages=8, split_n=True, cluster=2, pair=pair, splits=splits)
    out, ref = _run(spec, 777, 1100, 19 * 64 - 5, _rng(request), batch=2, a_nb=1, b_nb=2, grid=grid)
    _check(out, ref, "float16")


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("grid", [1, 7, None])
def test_persistent_grid_sizes(grid, request):
    """One block walking every tile, a grid that divides no count, and one block per output tile (the
    non-persistent launch): the same result."""
    spec = _spec("float16", "float32", "T")
    M, N, K = 777, 1100, 300
    if grid is None:
        grid = -(-M // spec.bm) * -(-N // spec.bn) * 2
    out, ref = _run(spec, M, N, K, _rng(request), batch=2, a_nb=2, b_nb=1, grid=grid)
    _check(out, ref, "float32")


SPLITS = [  # M, N, K, spec fields, batch: the planner's split shapes, ranges of unequal length, K off the 64 grid
    pytest.param(1024, 1024, 16384, {"bm": 128, "bn": 256, "stages": 4, "splits": 4}, 1, id="1024x1024x16384-256-s4"),
    pytest.param(1024, 1024, 4096, {"bm": 128, "bn": 128, "stages": 6, "splits": 2}, 1, id="1024x1024x4096-128-s2"),
    pytest.param(128, 128, 65536, {"bm": 128, "bn": 128, "stages": 6, "splits": 128}, 1, id="128x128x65536-s128"),
    pytest.param(200, 72, 20000, {"bm": 128, "bn": 128, "stages": 6, "splits": 40}, 1, id="200x72x20000-s40"),
    pytest.param(301, 517, 2051, {"bm": 128, "bn": 256, "stages": 4, "splits": 4}, 2, id="301x517x2051-s4-last-short"),
    pytest.param(1000, 1000, 1000, {"bm": 128, "bn": 128, "stages": 6, "splits": 2}, 1, id="1000^3-s2"),
    pytest.param(1000, 1000, 3000, {"bm": 64, "bn": 128, "stages": 8, "split_n": True, "splits": 3}, 1,
                 id="1000x1000x3000-64x128-split_n-s3"),
]


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("M,N,K,over,batch", SPLITS)
@pytest.mark.parametrize("layout_b", ["N", "T"])
def test_split_k_against_float64(M, N, K, over, batch, layout_b, request):
    """Split-K: float32 partial slabs (NaN-prefilled workspace) and the finishing pass, against float64: the
    planner's shapes, a last K range shorter than the others, K not a multiple of 64, batch 2 with A broadcast."""
    assert H.k_ranges(K, over["splits"])[0] == over["splits"]
    spec = _spec("float16", "float16", layout_b, **over)
    out, ref = _run(spec, M, N, K, _rng(request), batch=batch, a_nb=1, b_nb=batch)
    _check(out, ref, "float16")


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("in_dtype,out_dtype", [("float16", "float32")] + (
    [("bfloat16", "bfloat16")] if HAS_BF16 else []))
@pytest.mark.parametrize("grid", [None, 5])
def test_split_k_axpby_strided_output(in_dtype, out_dtype, grid, request):
    """Split-K with alpha, beta * C (C broadcast over 3 batch entries), D a column view of a wider array (its other
    columns untouched), 3 K ranges of 7, 7 and 5 K tiles, on the full grid and on 5 blocks walking every item."""
    spec = _spec(in_dtype, out_dtype, "N", "axpby", bm=128, bn=128, stages=6, splits=3)
    out, ref = _run(spec, 257, 300, 19 * 64 - 5, _rng(request), batch=3, a_nb=3, b_nb=1, c_nb=1, ldd=300 + 5,
                    grid=grid)
    _check(out, ref, out_dtype)


@pytest.mark.gpu
@needs_sm90
def test_rules_accept_aligned_and_refuse_odd_rows_on_the_gpu():
    """On the GPU, contiguous 4096^3 operands apply; K = 4095 contiguous rows do not (16-byte rows)."""
    for K, ok in ((4096, True), (4095, False)):
        A = wp.zeros((1, 256, K), dtype=wp.float16, device=DEV)
        B = wp.zeros((1, 384, K), dtype=wp.float16, device=DEV)
        D = wp.zeros((1, 256, 384), dtype=wp.float16, device=DEV)
        got = H.applies(DEV, "float16", "float16", "N", "T", 256, 384, K, 1, A, B, D, False)
        assert isinstance(got, H.HopperSpec) == ok, got


# --- CPU: what the rules refuse, the specs the factory refuses, the offline sm_90a build -----------------------------
def _cpu_views(M=256, N=384, K=512, ld_a=None, off_a=0, col_stride_b=False):
    cpu = "cpu"
    A = wp.zeros((1, M, (ld_a or K) + off_a), dtype=wp.float16, device=cpu)[:, :, off_a:off_a + K]
    Bw = wp.zeros((1, N, 2 * K if col_stride_b else K), dtype=wp.float16, device=cpu)
    B = Bw[:, :, ::2] if col_stride_b else Bw
    D = wp.zeros((1, M, N), dtype=wp.float16, device=cpu)
    return A, B, D


def test_tma_promotion_follows_the_rows_lines():
    from warp_gemm.families.hopper import tma

    # rows on 128-byte lines: 256-byte promotion; a row stride or base off a line: 128
    assert tma.promotion(1 << 20, 2048) == tma._L2_PROMOTION_256B
    assert tma.promotion(1 << 20, 128 * 37) == tma._L2_PROMOTION_256B
    assert tma.promotion(1 << 20, 2000) == tma._L2_PROMOTION_128B
    assert tma.promotion((1 << 20) + 16, 2048) == tma._L2_PROMOTION_128B
    assert tma.promotion((1 << 20) + 64, 4096) == tma._L2_PROMOTION_128B


def test_rules_refuse_cpu_and_other_gpus():
    A, B, D = _cpu_views()
    why = H.applies(wp.get_device("cpu"), "float16", "float16", "N", "T", 256, 384, 512, 1, A, B, D, False)
    assert isinstance(why, str) and "CUDA sm_90" in why
    ampere = CudaLike()
    ampere.arch = 80
    why = H.applies(ampere, "float16", "float16", "N", "T", 256, 384, 512, 1, A, B, D, False)
    assert isinstance(why, str) and "sm_80" in why


@pytest.mark.parametrize("kw,args,match", [
    ({"off_a": 1}, {}, "base address"),
    ({"ld_a": 4095, "M": 8, "K": 4095}, {"K": 4095}, "row stride"),
    ({"col_stride_b": True}, {}, "columns are not contiguous"),
    ({}, {"in_dtype": "float64"}, "float16, bfloat16 and float32"),
    ({}, {"out_dtype": "float64"}, "out_dtype"),
    ({}, {"layout_a": "T"}, "layout_a"),
    ({}, {"K": 0}, "K == 0"),
])
def test_rules_refuse_with_the_reason(kw, args, match):
    """On an sm_90 stand-in device (the planner's CudaLike; nothing launched): misaligned bases, rows that are not
    16-byte multiples (TMA), strided columns, other dtypes and layouts, K == 0 -- each refused with its reason."""
    A, B, D = _cpu_views(**kw)
    call = {"in_dtype": "float16", "out_dtype": "float16", "layout_a": "N", "layout_b": "T", "M": A.shape[1], "N": B.shape[1],
                "K": A.shape[2], "batch": 1}
    call.update(args)
    why = H.applies(CudaLike(), call["in_dtype"], call["out_dtype"], call["layout_a"], call["layout_b"], call["M"],
                    call["N"], call["K"], call["batch"], A, B, D, False)
    assert isinstance(why, str) and match in why, why


def test_rules_accept_aligned_operands_with_the_default_spec():
    A, B, D = _cpu_views(M=4096, N=4096, K=4096)
    spec = H.applies(CudaLike(), "float16", "float16", "N", "T", 4096, 4096, 4096, 1, A, B, D, True)
    assert isinstance(spec, H.HopperSpec), spec
    assert spec == H.default_spec("float16", "float16", "T", 4096, 4096, 4096, 1, 132, True)
    assert (spec.bm, spec.bn, spec.epilogue) == (128, 256, "axpby") and H.unfit(spec) == ""


@pytest.mark.parametrize("over,match", [
    ({"in_dtype": "float64"}, "float16, bfloat16 and float32"), ({"in_dtype": "float32", "layout_b": "N"}, "K-major"),
    ({"transpose_b": True}, "transpose_b"), ({"layout_a": "T"}, "layout_a"),
    ({"bm": 96}, "bm 96"), ({"bn": 320}, "bn 320"), ({"bm": 256, "bn": 256}, "bn 256"),
    ({"stages": 5}, "shared memory"), ({"cluster": 3}, "cluster 3"), ({"cluster": 2, "pair": "K"}, "pair 'K'"),
    ({"cluster": 2, "layout_b": "N", "bn": 192, "stages": 3}, "multiple of 128"),
    ({"cluster": 2, "in_dtype": "float32", "out_dtype": "float32"}, "16-bit inputs only"),
    ({"consumer_regs": 248}, "setmaxnreg"),
    ({"split_n": True, "consumers": 1, "bm": 64, "bn": 128, "stages": 8}, "split_n"),
    ({"split_n": True, "bm": 64, "bn": 64, "stages": 8}, "split_n")])
def test_unfit_specs_are_refused_before_any_compile(over, match):
    spec = dataclasses.replace(H.HopperSpec(), **over)
    assert match in H.unfit(spec)
    with pytest.raises(ValueError, match=re.escape(match)):
        H.snippet(spec)


def test_cluster_refused_without_warp_cluster_dim(monkeypatch):
    """A Warp without the ``cluster_dim`` kernel option: clusters are refused with the reason (spec and kernel
    factory), before anything is compiled; cluster 1 still builds."""
    monkeypatch.setattr(_compat, "HAS_CLUSTER_DIM", False)
    spec = H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, cluster=2)
    assert "no cluster_dim kernel option" in H.unfit(spec)
    with pytest.raises(ValueError, match="cluster_dim"):
        H.snippet(spec)
    with pytest.raises(ValueError, match="cluster_dim"):
        _compat.make_kernel(lambda x: None, "cluster_probe_kernel", cluster_dim=2)
    assert H.unfit(dataclasses.replace(spec, cluster=1)) == ""


@pytest.mark.parametrize("pair,M,N,splits,want", [
    ("M", 1000, 1000, 1, 128),  # 64x128 tiles: 16 x 8; pair items 8 x 8: 64 clusters
    ("N", 1000, 1000, 1, 128),  # pair items 16 x 4
    ("M", 900, 1000, 1, 128),  # 15 tile rows: 8 pair rows (the last pair's second tile masked) x 8
    ("M", 64, 128, 1, 2),  # one tile: one cluster, the partner masked
    ("M", 4096, 4096, 1, 132),  # 1024 pair items: one cluster per two SMs
    ("M", 900, 1000, 3, 132)])  # 3 K ranges: 192 pair items
def test_cluster_grid_is_whole_clusters_of_pair_items(pair, M, N, splits, want):
    """The persistent grid of clusters of two: two blocks per pair item (K splits included), at most one cluster
    per two of the 132 SMs."""
    spec = H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, cluster=2, pair=pair, splits=splits)
    assert H.grid_size(spec, M, N, 1, CudaLike()) == want


def test_launch_refuses_on_the_cpu():
    A, B, D = _cpu_views()
    with pytest.raises(ValueError, match="sm_90"):
        H.launch_args(H.HopperSpec(), A, B, None, D, 1.0, 0.0, 256, 384, 512, 1, 1, 1, 1)


def test_split_launch_refuses_a_missing_or_wrong_workspace_and_empty_ranges():
    """Split-K needs the float32 (splits * batch, M, N) workspace; a split count that leaves an empty K range (8 K
    tiles asked in 5 ranges: ranges of 2 tiles make 4) is refused before any launch."""
    A, B, D = _cpu_views()  # M 256, N 384, K 512: 8 K tiles
    spec = H.HopperSpec(splits=4)
    with pytest.raises(ValueError, match="workspace"):
        H.launch_args(spec, A, B, None, D, 1.0, 0.0, 256, 384, 512, 1, 1, 1, 1)
    bad = wp.zeros((4, 256, 384), dtype=wp.float16, device="cpu")
    with pytest.raises(ValueError, match="workspace"):
        H.launch_args(spec, A, B, None, D, 1.0, 0.0, 256, 384, 512, 1, 1, 1, 1, workspace=bad)
    with pytest.raises(ValueError, match="empty"):
        H.launch_args(H.HopperSpec(splits=5), A, B, None, D, 1.0, 0.0, 256, 384, 512, 1, 1, 1, 1)


@pytest.mark.parametrize("K,asked,want", [(512, 4, (4, 2)), (512, 5, (4, 2)), (512, 3, (3, 3)), (512, 100, (8, 1)),
                                          (65536, 132, (128, 8)), (2051, 4, (4, 9)), (1, 3, (1, 1))])
def test_k_ranges_leave_no_range_empty(K, asked, want):
    got = H.k_ranges(K, asked)
    assert got == want
    s, per = got
    k_tiles = -(-K // 64)
    assert (s - 1) * per < k_tiles <= s * per  # the last range holds at least one K tile


def test_split_count_and_tile_choice():
    """The rule's arithmetic (132 SMs): 128x256 tiles where they fill the SMs (4097^3 included), else 128x128 tiles,
    split over K where the time model says it saves time, in one wave, at least 16 K tiles a split."""
    from warp_gemm.families.hopper import rules as R

    assert R.split_count(64, 1024, 1024, 16384, 1, 132) == 2  # modelled 67 us against 85
    assert R.split_count(64, 1024, 1024, 4096, 1, 132) == 1  # modelled 32 us against 21
    assert R.split_count(1, 128, 128, 65536, 1, 132) == 64  # 1024 K tiles in 64 ranges of 16
    assert R.split_count(64, 1000, 1000, 1000, 1, 132) == 1  # 16 K tiles: under 2 x 16
    assert R.split_count(132, 1408, 1536, 1 << 20, 1, 132) == 1  # the tiles fill the GPU
    assert R.tile_choice(4096, 4096, 4096, 1, 132) == (128, 256, 1)
    assert R.tile_choice(4097, 4097, 4097, 1, 132) == (128, 256, 1)
    assert R.tile_choice(2048, 2048, 2048, 1, 132) == (128, 128, 1)  # 128 tiles of 128x256 < 132 SMs
    assert R.tile_choice(333, 4096, 4096, 1, 132) == (128, 128, 1)
    assert R.tile_choice(1024, 1024, 16384, 1, 132) == (128, 128, 2)
    assert R.tile_choice(1024, 1024, 16384, 1, 132, split=False) == (128, 128, 1)
    assert R.tile_choice(128, 128, 65536, 1, 132) == (128, 128, 64)
    for M, N, K, batch in ((1024, 1024, 16384, 1), (128, 128, 65536, 1), (256, 128, 1 << 17, 3)):
        bm, bn, s = R.tile_choice(M, N, K, batch, 132)
        tiles = batch * -(-M // bm) * -(-N // bn)
        assert s > 1 and tiles * s <= 132 and H.k_ranges(K, s)[0] == s, (M, N, K, bm, bn, s)
        assert H.k_ranges(K, s)[1] >= R.SPLIT_MIN_KT
    spec = R.default_spec("float16", "float16", "N", 1024, 1024, 16384, 1, 132)
    assert spec.splits == 2 and spec.kernel_spec.out_dtype == "float32" and spec.kernel_spec.splits == 1
    assert R.default_spec("float16", "float16", "N", 1024, 1024, 16384, 1, 132, splits=False).splits == 1


def test_split_n_rule():
    """64x128 tiles with the consumers splitting the columns where unsplit 128x128 tiles leave half the SMs idle and
    every row is on a 128-byte boundary (rows off it: in clusters of two for 16-bit outputs, test_cluster_rule);
    128x128 tiles (or K splits, or tf32) otherwise; never carried into a peel."""
    from warp_gemm.families.hopper import rules as R

    sn = R.default_spec("float16", "float16", "N", 1024, 1024, 1024, 1, 132, rows_128=True)
    assert (sn.bm, sn.bn, sn.stages, sn.split_n, sn.splits) == (64, 128, 8, True, 1) and not H.unfit(sn)
    assert R.default_spec("bfloat16", "bfloat16", "T", 512, 2048, 2048, 1, 132, rows_128=True).split_n
    off = R.default_spec("float16", "float32", "N", 1024, 1024, 1024, 1, 132)  # rows off 128 bytes, float32 out
    assert not off.split_n and off.cluster == 1
    off = R.default_spec("float16", "float16", "N", 1024, 1024, 1024, 1, 132)  # 16-bit out: the split_n clusters
    assert off.split_n and off.cluster == 2
    assert not R.default_spec("float16", "float16", "N", 1536, 1536, 1536, 1, 132, rows_128=True).split_n  # 144 tiles
    assert R.default_spec("float16", "float16", "N", 1024, 1024, 16384, 1, 132, rows_128=True).splits == 2  # K split
    assert not R.default_spec("float32", "float32", "T", 1024, 1024, 1024, 1, 132, rows_128=True).split_n
    core = R.peel_choice(sn, 513, 1024, 1024, 1, 132)
    assert core is None or not core[0].split_n


def test_cluster_rule():
    """Clusters of two (64x128 tiles of one consumer sharing the B tile) where 128x128 tiles leave half the SMs
    idle, rows are off 128 bytes and K is long enough for the B layout; below that K, 16-bit outputs take the
    clusters whose two consumers split the columns (float32 outputs none); never on 128-byte rows (split_n alone), K
    splits, tf32, more tiles, one tile row, batches, or a Warp without clusters; a peeled core drops the cluster."""
    from warp_gemm.families.hopper import rules as R

    cl = R.default_spec("float16", "float16", "N", 1000, 1000, 4000, 1, 132)
    assert (cl.bm, cl.bn, cl.stages, cl.consumers, cl.split_n, cl.cluster, cl.pair, cl.splits) == (
        64, 128, 8, 1, False, 2, "M", 1)
    assert not H.unfit(cl)
    assert R.default_spec("bfloat16", "bfloat16", "T", 777, 1000, 3000, 1, 132).cluster == 2
    for lb, k in R.CLUSTER_MIN_K.items():
        assert R.default_spec("float16", "float16", lb, 1000, 1000, k, 1, 132).cluster == 2
        short = R.default_spec("float16", "float16", lb, 1000, 1000, k - 8, 1, 132)
        assert (short.bm, short.bn, short.cluster, short.split_n, short.staged_store) == (64, 128, 2, True, True)
        assert R.default_spec("float16", "float32", lb, 1000, 1000, k - 8, 1, 132).cluster == 1
    assert R.default_spec("float16", "float16", "N", 1024, 1024, 4096, 1, 132, rows_128=True).cluster == 1
    assert R.default_spec("float16", "float16", "N", 1536, 1000, 4000, 1, 132).cluster == 1  # 96 tiles
    assert R.default_spec("float16", "float16", "N", 64, 1000, 8000, 1, 132).cluster == 1  # one tile row
    assert R.default_spec("float16", "float16", "N", 500, 500, 4000, 4, 132).cluster == 1  # a batch
    assert R.default_spec("float16", "float16", "N", 128, 128, 65536, 1, 132).splits > 1  # split-K, no cluster
    assert R.default_spec("float16", "float16", "N", 128, 128, 65536, 1, 132).cluster == 1
    assert R.default_spec("float32", "float32", "T", 1000, 1000, 4000, 1, 132).cluster == 1
    core = R.peel_choice(cl, 1001, 1000, 4000, 1, 132)
    assert core is None or core[0].cluster == 1


def test_cluster_rule_needs_warp_clusters(monkeypatch):
    from warp_gemm.families.hopper import rules as R

    monkeypatch.setattr(_compat, "HAS_CLUSTER_DIM", False)
    assert R.default_spec("float16", "float16", "N", 1000, 1000, 4000, 1, 132).cluster == 1
    assert R.default_spec("float16", "float16", "N", 1000, 1000, 1000, 1, 132).cluster == 1


def test_peel_choice_model():
    """hopper.rules.peel_choice: one-wide edges where the persistent grid saves a round (132 SMs), none where it does
    not or the problem is split over K; the column only where B is stored (N, K) (a contiguous GEMV vector)."""
    from warp_gemm.families.hopper import rules as R

    base = R.default_spec("float16", "float16", "N", 4097, 4097, 4097, 1, 132)
    core, pr, pc = R.peel_choice(base, 4097, 4097, 4097, 1, 132)
    assert (core.bm, core.bn, core.stages, pr, pc) == (256, 128, 4, 1, 0)
    assert R.peel_choice(R.default_spec("float16", "float16", "N", 4096, 4096, 4096, 1, 132), 4096, 4096, 4096, 1,
                         132) is None
    assert R.peel_choice(base, 4097, 4097, 64, 1, 132) is None  # one K tile: the GEMV's launch costs more
    wt = R.default_spec("bfloat16", "bfloat16", "T", 4096, 4097, 4097, 1, 132)
    core, pr, pc = R.peel_choice(wt, 4096, 4097, 4097, 1, 132)
    assert (pr, pc) == (0, 1) and (core.bm, core.bn) == (128, 256)  # 32 x 16 tiles over 4096 x 4096
    nn = R.default_spec("bfloat16", "bfloat16", "N", 4096, 4097, 4097, 1, 132)
    assert R.peel_choice(nn, 4096, 4097, 4097, 1, 132) is None  # B's last column is strided: not peeled
    assert R.peel_choice(dataclasses.replace(base, splits=2), 4097, 4097, 4097, 1, 132) is None


_OFFLINE = [H.HopperSpec(), H.HopperSpec(layout_b="N", out_dtype="float32", epilogue="axpby"),
            H.HopperSpec(bn=128, stages=6, splits=8),
            H.HopperSpec(in_dtype="float32", out_dtype="float32", epilogue="axpby"),
            H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, layout_b="N"),
            H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, out_dtype="float32", epilogue="axpby"),
            H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, cluster=2, layout_b="N"),
            H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, cluster=2, pair="N", out_dtype="float32",
                         epilogue="axpby"),
            H.HopperSpec(bn=128, stages=6, cluster=2, splits=3),
            H.HopperSpec(layout_b="N", bn=128, stages=5, staged_store=True),
            H.HopperSpec(bm=64, bn=128, stages=8, split_n=True, cluster=2, layout_b="N", epilogue="axpby",
                         staged_store=True)] + (
    [H.HopperSpec(in_dtype="bfloat16", out_dtype="bfloat16", bm=256, bn=128, epilogue="axpby")] if HAS_BF16 else [])


@pytest.mark.skipif(not (_compat.HAS_COMPILE_AOT and _compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_EMPTY),
                    reason="offline sm_90a builds need wp.compile_aot_module, cuda_arch_suffix and tile_empty")
@pytest.mark.parametrize("spec", _OFFLINE, ids=lambda s: s.key)
def test_cuda_build_offline_sm90a(spec, tmp_path):
    """The kernel compiles for sm_90a with no GPU (cubin, and PTX where compile_aot_module writes it); the PTX keeps
    the sums in registers (no local memory), moves registers with setmaxnreg, copies with 3-D bulk tensor copies and
    multiplies with wgmma m64n{wg_n}k16 of the spec's types and B transpose bit (tf32: m64n{wg_n}k8, no transpose bits;
    wg_n is bn, or bn / 2 where the consumers split the columns)."""
    k = H.get_kernel(spec)
    k.module.options["block_dim"] = spec.block_dim
    old = wp.config.cuda_arch_suffix
    wp.config.cuda_arch_suffix = "a"
    try:
        wp.compile_aot_module(k.module, arch=[90], module_dir=str(tmp_path / "cubin"))
        assert any(p.suffix == ".cubin" and "sm90a" in p.name for p in (tmp_path / "cubin").rglob("*"))
        if "use_ptx" not in inspect.signature(wp.compile_aot_module).parameters:
            return
        wp.compile_aot_module(k.module, arch=[90], module_dir=str(tmp_path / "ptx"), use_ptx=True)
    finally:
        wp.config.cuda_arch_suffix = old
    ptx = "".join(p.read_text(errors="replace") for p in (tmp_path / "ptx").rglob("*.ptx"))
    t = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32"}[spec.in_dtype]
    assert ".target sm_90a" in ptx and ".local" not in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx and "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    assert "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    # clusters of two: the kernel declares them, multicasts the shared half, releases stages on both blocks and
    # meets its partner at a cluster barrier after the set-up (a relaxed arrival: the inits' fence publishes them)
    # and (clusters with several items) before exit (a release arrival); other kernels have none of it
    clustered = spec.cluster == 2
    assert (".reqnctapercluster 2, 1, 1" in ptx) == clustered
    assert ("complete_tx::bytes.multicast::cluster" in ptx) == clustered
    assert ("mbarrier.arrive.shared::cluster.b64" in ptx) == clustered
    assert ptx.count("barrier.cluster.arrive.relaxed") == (1 if clustered else 0)
    assert ptx.count("barrier.cluster.arrive.release") == (1 if clustered else 0)
    assert ptx.count("barrier.cluster.wait.acquire") == (2 if clustered else 0)
    # the maps' fetch starts at entry; the staged store writes its buffer with stmatrix (none without it)
    assert "prefetch.tensormap" in ptx
    assert ("stmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx) == spec.staged_store
    if t == "tf32":
        wg = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k8\.f32\.tf32\.tf32[^;]*, 1, 1;", ptx)
        assert wg and {int(n) for n in wg} == {spec.wg_n}, wg[:2]
        return
    wg = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.{t}\.{t}[^;]*, (\d);", ptx)
    assert wg and {int(n) for n, _ in wg} == {spec.wg_n}, wg[:2]
    assert {int(tb) for _, tb in wg} == {int(spec.layout_b == "N")}


def test_planner_takes_the_family_on_sm90(monkeypatch):
    """The planner (a CUDA-like sm_90 device, no launch): large 16-bit products with A stored (M, K) go to the Hopper
    family, rows that are not 16-byte aligned staged first; options(hopper=False), small products and float32
    inputs do not."""
    import numpy as np
    from conftest import cuda_like_problem

    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    def fam(M, N, K, dtype=np.float16, trans_b=False, **opts):
        a = np.zeros((M, K), dtype)
        b = np.zeros((N, K) if trans_b else (K, N), dtype)
        plan = make_plan(cuda_like_problem(monkeypatch, a, b, trans_b), 1.0, 0.0, False, None, Options(**opts))
        return plan

    big = fam(4096, 4096, 4096)
    assert big.family == "hopper" and big.family_spec.bn == 256 and big.stage == (False, False)
    assert big.family_spec.splits == 1 and big.workspace is None
    assert fam(4096, 4096, 4096, trans_b=True).family_spec.layout_b == "T"
    odd = fam(4095, 4095, 4095)
    assert odd.family == "hopper" and odd.stage == (True, True)
    full = fam(4097, 4097, 4097, peel=False)
    assert full.family_spec.bn == 256 and full.peel == (0, 0)
    # one past a multiple of the tile: the last row to the GEMV family, a 256x128 core (16 x 33 tiles: 4 rounds)
    peeled = fam(4097, 4097, 4097)
    assert peeled.family == "hopper" and peeled.peel == (1, 0), peeled.peel
    assert (peeled.family_spec.bm, peeled.family_spec.bn) == (256, 128) and peeled.edge_specs[0].kind in ("colsum", "bands")
    assert peeled.stage == (True, True) and peeled.edge_specs[1] is None
    wt = fam(4097, 4097, 4097, trans_b=True)
    assert wt.peel in ((1, 0), (0, 1)) and wt.family_spec.layout_b == "T"
    assert fam(4096, 4096, 4096).peel == (0, 0) and fam(4095, 4095, 4095).peel == (0, 0)
    assert fam(1024, 1024, 4096).family_spec.splits == 1
    for M, N, K in ((1024, 1024, 16384), (128, 128, 65536)):  # fewer tiles than SMs, long K: split-K
        sp = fam(M, N, K)
        s = sp.family_spec
        assert sp.family == "hopper" and s.splits > 1, (M, N, K, sp.family)
        assert sp.workspace == ((s.splits, M, N), "float32")
        assert -(-M // s.bm) * -(-N // s.bn) * s.splits <= 132
    assert fam(4096, 4096, 4096, hopper=False).family == "pipelined"
    assert fam(1000, 1000, 1000).family == "hopper"  # 125 TFLOP/s against the pipelined family's 95 (H200)
    assert fam(512, 512, 512).family != "hopper"  # 24.6 against 27.1
    assert fam(512, 512, 512, family="hopper").family == "hopper"  # forced: no work threshold
    assert fam(16, 8192, 8192).family != "hopper"  # a side of 16: the split pipe
    assert fam(4096, 4096, 4096, dtype=np.float32).family != "hopper"  # exact float32: no wgmma
    for trans_b in (False, True):  # tf32: B stored (K, N) is copied transposed first
        tf = make_plan(cuda_like_problem(monkeypatch, np.zeros((4096, 4096), np.float32),
                                         np.zeros((4096, 4096), np.float32), trans_b), 1.0, 0.0, True, None, Options())
        assert tf.family == "hopper" and tf.family_spec.layout_b == "T", tf.family
        assert tf.family_spec.transpose_b is (not trans_b) and tf.stage == (False, False)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=[pytest.mark.gpu, needs_sm90])])
def test_transposed_copy_of_b(device, request):
    """tf32 products of B stored (K, N) read a transposed copy: every element moved (edges of partial tiles
    included), into a view whose rows are padded, the padding untouched."""
    if device == "cpu" and not _compat.HAS_CPU_TILES:
        pytest.skip("needs Warp's CPU tile backend")
    from warp_gemm.families.hopper.kernel import transpose_launch

    rng = _rng(request)
    nb, k, n = 2, 37, 45
    src = wp.array(rng.standard_normal((nb, k, n)).astype(np.float32), device=device)
    wide = wp.full((nb, n, 40), 7.0, dtype=wp.float32, device=device)
    dst = wide[:, :, :k]
    kern, dim, inputs, block = transpose_launch(src, dst)
    wp.launch_tiled(kern, dim=list(dim), inputs=inputs, block_dim=block if device != "cpu" else 1, device=device)
    got = wide.numpy()
    np.testing.assert_array_equal(got[:, :, :k], np.swapaxes(src.numpy(), 1, 2))
    np.testing.assert_array_equal(got[:, :, k:], 7.0)


@pytest.mark.gpu
@needs_sm90
@pytest.mark.parametrize("in_dtype,trans_b,M,N,K,beta", [
    ("float16", False, 4097, 4097, 512, 0.0),  # the last row peeled, 256x128 core, odd rows staged
    (_IN[-1], True, 4096, 4097, 520, 0.0),  # B = W.T: the last column peeled, 128x256 core
    (_IN[-1], False, 4097, 4097, 1032, 0.5),  # beta * C through the core and the edge
])
def test_peeled_public_call_against_float64(in_dtype, trans_b, M, N, K, beta, request):
    """warp_gemm.gemm through the planner where it peels the Hopper core's last row or column to the GEMV family
    (hopper.rules.peel_choice): NaN-prefilled output, float64 reference, the edge rows and columns checked on their own."""
    import warp_gemm
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate
    from warp_gemm.core.options import Options

    rng = _rng(request)
    a, b = random_operands(M, N, K, in_dtype, rng)
    a, b = a.reshape(M, K), b.reshape(K, N)
    b_st = np.ascontiguousarray(b.T) if trans_b else b
    A, B = make(a, in_dtype, "warp", DEV), make(b_st, in_dtype, "warp", DEV)
    c = round_to(rng.standard_normal((M, N)), in_dtype)
    C = make(c, in_dtype, "warp", DEV)
    D = make(np.full((M, N), np.nan), in_dtype, "warp", DEV)
    p = validate(A, B, C, 1.0, beta, False, trans_b, D, "gemm")
    plan = make_plan(p, 1.0, beta, False, None, Options())
    assert plan.family == "hopper" and any(plan.peel), (plan.family, plan.peel)
    warp_gemm.gemm(A, B, C, beta=beta, trans_b=trans_b, out=D)
    out = to_f64(D)
    ref = a.astype(np.float64) @ b.astype(np.float64) + beta * c
    assert not np.isnan(out).any()
    _check(out, ref, in_dtype)
    pr, pc = plan.peel
    if pr:
        _check(out[-pr:], ref[-pr:], in_dtype)
    if pc:
        _check(out[:, -pc:], ref[:, -pc:], in_dtype)


def _build_sm90a(spec, tmp_path):
    """``spec``'s kernel built offline for sm_90a into ``tmp_path``: a cubin comes out."""
    k = H.get_kernel(spec)
    k.module.options["block_dim"] = spec.block_dim
    old = wp.config.cuda_arch_suffix
    wp.config.cuda_arch_suffix = "a"
    try:
        wp.compile_aot_module(k.module, arch=[90], module_dir=str(tmp_path))
    finally:
        wp.config.cuda_arch_suffix = old
    assert any(p.suffix == ".cubin" for p in tmp_path.rglob("*"))


def test_timeline_probe_anchors(monkeypatch, tmp_path):
    """benchmarks/probes/hopper_timeline.py finds every anchor of its eight stamps in the current kernel text, and its
    instrumented kernel builds offline for sm_90a."""
    import importlib.util
    import pathlib
    import sys

    from warp_gemm.families.hopper import kernel as HK

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "hopper_timeline.py"
    spec_ = importlib.util.spec_from_file_location("hopper_timeline", path)
    T = importlib.util.module_from_spec(spec_)
    monkeypatch.setitem(sys.modules, "hopper_timeline", T)  # its dataclass looks its module up
    spec_.loader.exec_module(T)
    for tiles in ("default", "128") + (("cl2", "cl2sn") if _compat.HAS_CLUSTER_DIM else ()):
        text = T.instrument(HK.snippet(T._specs(tiles, "float16", "T", 1000, 1000, 1000)))
        assert text.count("TL_[") == 2 * 8, tiles
    # 128x256 tiles store from registers: the staged block stays in the text under #if 0, its two stamps never run
    plain = T._specs("default", "float16", "N", 4096, 4096, 4096)
    assert not plain.staged_store and "#if 0" in HK.snippet(plain)
    assert T.instrument(HK.snippet(plain)).count("TL_[") == 2 * 8
    monkeypatch.setattr(HK, "snippet", HK.snippet)  # _timed_class wraps it; restored after the test
    if not (_compat.HAS_COMPILE_AOT and _compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_EMPTY
            and _compat.HAS_CLUSTER_DIM):
        return
    Timed = T._timed_class()
    timed = T._as(Timed, T._specs("cl2sn", "float16", "N", 1000, 1000, 1000), True)
    _build_sm90a(timed, tmp_path)


def test_variants_probe_edits(monkeypatch, tmp_path):
    """benchmarks/probes/hopper_variants.py finds what its edits change in the current kernel text (every stage's
    copies, every wgmma), and a variant builds offline for sm_90a."""
    import importlib.util
    import pathlib
    import sys

    from warp_gemm.families.hopper import kernel as HK

    probes = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "probes"
    monkeypatch.syspath_prepend(str(probes))  # it imports hopper_timeline's tile choices
    spec_ = importlib.util.spec_from_file_location("hopper_variants", probes / "hopper_variants.py")
    V = importlib.util.module_from_spec(spec_)
    monkeypatch.setitem(sys.modules, "hopper_variants", V)  # its dataclass looks its module up
    spec_.loader.exec_module(V)
    import hopper_timeline as T

    for tiles in ("default", "128") + (("cl2", "cl2sn") if _compat.HAS_CLUSTER_DIM else ()):
        for layout in ("N", "T"):
            text = HK.snippet(T._specs(tiles, "float16", layout, 1000, 1000, 1000))
            copies = V.edit(text, "nl2")
            assert copies.count("if (kt < kt0 + 2) {") == text.count(V.EXPECT) >= 1, (tiles, layout)
            products = V.edit(text, "nowg")
            assert "wgmma.mma_async" in text and "wgmma.mma_async" not in products, (tiles, layout)
            assert V.edit(text, "base") == text
            for part in ("entry", "setup"):
                assert V.edit(text, part).count(V.RETURN) == 1, (tiles, layout, part)
            if _compat.HAS_CLUSTER_DIM and tiles.startswith("cl2"):
                setup = V.edit(text, "setup")  # after the cluster barrier's wait, not at the block barrier
                assert setup.index(V.RETURN) > setup.index(V.CLUSTER_WAIT) > setup.index(V.BLOCK_SYNC)
    with pytest.raises(AssertionError, match="unknown variant"):
        V.edit(text, "nl")
    monkeypatch.setattr(HK, "snippet", HK.snippet)  # _variant_class wraps it; restored after the test
    if not (_compat.HAS_COMPILE_AOT and _compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_EMPTY
            and _compat.HAS_CLUSTER_DIM):
        return
    Variant = V._variant_class()
    spec = V._as(Variant, T._specs("cl2sn", "float16", "N", 1000, 1000, 1000), "nlST_nowg")
    _build_sm90a(spec, tmp_path)
