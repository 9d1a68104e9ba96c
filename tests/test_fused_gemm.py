"""``warp_gemm.fused_gemm``: the Hopper K loop inside a user's Warp kernel. CPU: its twin (the same function, the
same user kernels, the descriptors' bounds, both B layouts, both tile widths, odd shapes, strided views); GPU (sm_90,
``-m gpu``): the TMA + wgmma body with the same kernels and checks, aligned and unaligned rows."""

import math

import numpy as np
import pytest
import warp as wp

import warp_gemm
from warp_gemm import _compat
from warp_gemm.tools.bench import fused as suite

pytestmark = pytest.mark.skipif(not (_compat.HAS_TILE_EMPTY and _compat.HAS_TILE_FUNC_ARGS),
                                reason="fused_gemm needs warp-lang 1.19 (tile arguments of native functions)")


def _np(dtype: str):
    return {"float16": np.float16, "bfloat16": np.float32}[dtype]


def _arr(x64: np.ndarray, dtype: str, device):
    """A Warp array of ``dtype`` holding ``x64`` rounded to it, and the rounded values in float64."""
    if dtype == "bfloat16":
        bits = (x64.astype(np.float32).view(np.uint32) + 0x8000) >> 16  # round to nearest (no NaN here)
        r = (bits << 16).astype(np.uint32).view(np.float32).astype(np.float64)
        a = wp.array(bits.astype(np.uint16), dtype=wp.uint16, device=device)
        return wp.array(ptr=a.ptr, dtype=wp.bfloat16, shape=a.shape, strides=a.strides, device=device), r, a
    h = x64.astype(np.float16)
    return wp.array(h, dtype=wp.float16, device=device), h.astype(np.float64), None


def _to64(y: wp.array, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        v = wp.array(ptr=y.ptr, dtype=wp.uint16, shape=y.shape, strides=y.strides, device=y.device).numpy()
        return (v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return y.numpy().astype(np.float64)


def _nan_out(M, N, dtype, device):
    if dtype == "bfloat16":
        a = wp.array(np.full((M, N), 0x7FC0, np.uint16), dtype=wp.uint16, device=device)
        return wp.array(ptr=a.ptr, dtype=wp.bfloat16, shape=a.shape, strides=a.strides, device=device), a
    return wp.array(np.full((M, N), np.nan, np.float16), dtype=wp.float16, device=device), None


def _gelu(z):
    from math import erf

    return 0.5 * z * (1.0 + np.vectorize(erf)(z / math.sqrt(2.0)))


def _run(op, dtype, M, N, K, device, layout_b=None, a_view=None, tn=suite.TN, seed=0, form="tile", grid=None,
         pingpong=None):
    """One user kernel of the bench suite on fresh inputs; returns (result, float64 reference, bound). ``form``
    "tile": the kernel on ``g.func`` (one block per output tile, the tile in shared memory); "regs": the persistent
    kernel on ``g.tile_func`` over ``grid`` blocks (default: ``operands``' choice)."""
    rng = np.random.default_rng(seed)
    lin = op == "linear_gelu"
    layout_b = layout_b or ("T" if lin else "N")
    keep = []
    a_full = rng.standard_normal((M, K + (3 if a_view else 0))) * K ** -0.25
    A, a64, k = _arr(a_full, dtype, device)
    keep.append(k)
    if a_view:  # a column slice: rows 2 bytes off any 16-byte grid, row stride K + 3 elements
        A, a64 = A[:, 1:K + 1], a64[:, 1:K + 1]
    w = rng.standard_normal((N, K) if layout_b == "T" else (K, N)) * K ** -0.25
    B, b64, k = _arr(w, dtype, device)
    keep.append(k)
    z = a64 @ (b64.T if layout_b == "T" else b64)
    if form == "regs" and layout_b == ("T" if lin else "N") and pingpong is None:
        g, kern = suite._kernels(op, dtype, layout_b, form, tn)  # the suite's kernel (g.store_frag) at this tn
    elif tn != suite.TN or layout_b != ("T" if lin else "N") or pingpong is not None:
        g = warp_gemm.fused_gemm(getattr(wp, dtype), layout_b=layout_b, tn=tn, pingpong=pingpong)
        kern = _silu_kernel(g, dtype) if form == "tile" else _silu_regs_kernel(g, dtype)
        op = "silu"
    else:
        g, kern = suite._kernels(op, dtype, layout_b, form)
    ops = g.operands(A, B, grid=grid)

    def launch(last):
        if form == "tile":
            g.launch(kern, M, N, [ops.a, ops.b, ops.K] + last, device=device)
        else:
            g.launch_tiles(kern, ops, ops.args + last, device=device)

    if op == "rowsum":
        out = wp.array(np.full(M, np.nan, np.float32), device=device)
        out.zero_()
        launch([N, out] if form == "tile" else [out])
        wp.synchronize_device(device)
        return out.numpy().astype(np.float64), np.exp(suite.SCALE * z).sum(1), 1e-5
    Y, k = _nan_out(M, N, dtype, device)
    keep.append(k)
    if op == "silu":
        launch([Y])
        ref = z / (1.0 + np.exp(-z))
    elif lin:
        bias, bias64, k = _arr(rng.standard_normal((1, N)), dtype, device)
        keep.append(k)
        launch([bias, Y])
        ref = _gelu(z + bias64)
    else:
        R, r64, k = _arr(rng.standard_normal((M, N)), dtype, device)
        keep.append(k)
        launch([R, Y])
        ref = z + r64
    wp.synchronize_device(device)
    return _to64(Y, dtype), ref, (2e-3 if dtype == "float16" else 1e-2)


_SILU = {}


def _silu_kernel(g, dtype):
    if g.key in _SILU:
        return _SILU[g.key]
    T = getattr(wp, dtype)
    gemm, BM, BN, R, C = g.func, g.bm, g.bn, g.buf_rows, g.buf_cols

    @wp.func
    def silu(x: float):
        return x / (1.0 + wp.exp(-x))

    def k(ta: wp.uint64, tb: wp.uint64, K: int, Y: wp.array2d(dtype=T)):
        i, j = wp.tid()
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        gemm(buf, ta, tb, K, i * BM, j * BN)
        acc = wp.tile_view(buf, offset=(0, 0), shape=(BM, BN))
        wp.tile_store(Y, wp.tile_astype(wp.tile_map(silu, acc), T), offset=(i * BM, j * BN))

    _SILU[g.key] = wp.kernel(k, module="unique", module_options={"enable_backward": False})
    return _SILU[g.key]


def _silu_regs_kernel(g, dtype):
    key = g.key + "_regs"
    if key in _SILU:
        return _SILU[key]
    T = getattr(wp, dtype)
    frag, origin, coord, FR, R, C = g.tile_func, g.tile_origin, g.tile_coord, g.frag, g.buf_rows, g.buf_cols

    @wp.func
    def silu(x: float):
        return x / (1.0 + wp.exp(-x))

    def k(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int, Y: wp.array2d(dtype=T)):
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)
            o = origin(M, N, t)
            for i in range(FR):
                rc = coord(o, i)
                if rc[0] < M and rc[1] < N:
                    Y[rc[0], rc[1]] = T(silu(acc[i]))

    _SILU[key] = wp.kernel(k, module="unique", module_options={"enable_backward": False})
    return _SILU[key]


def _check(y, ref, bound):
    assert not np.isnan(y).any(), f"{np.isnan(y).sum()} outputs unwritten"
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err < bound, err


CASES = [  # (op, dtype, M, N, K, extra)
    ("silu", "float16", 130, 260, 70, {}),
    ("linear_gelu", "bfloat16", 129, 257, 65, {}),
    ("residual", "float16", 131, 33, 17, {}),
    ("rowsum", "float16", 140, 300, 40, {}),
    ("silu", "float16", 70, 45, 33, {"a_view": True}),
    ("silu", "float16", 150, 140, 66, {"layout_b": "T", "tn": 256}),
    ("silu", "bfloat16", 129, 300, 64, {"layout_b": "N", "tn": 256}),
    ("silu", "float16", 129, 130, 64, {"layout_b": "T"}),
]


@pytest.mark.parametrize("op,dtype,M,N,K,extra", CASES)
def test_cpu_twin(op, dtype, M, N, K, extra):
    y, ref, bound = _run(op, dtype, M, N, K, "cpu", **extra)
    _check(y, ref, bound)


#: the persistent form (tile_func): grids of 1-3 blocks make each block loop over several output tiles
CASES_REGS = [
    ("silu", "float16", 300, 270, 40, {"grid": 2}),
    ("linear_gelu", "bfloat16", 129, 257, 65, {"grid": 3}),
    ("linear_gelu", "float16", 129, 257, 65, {"grid": 2, "tn": 256}),
    ("residual", "float16", 131, 33, 17, {}),
    ("rowsum", "bfloat16", 140, 300, 40, {"grid": 1}),
    ("silu", "float16", 70, 45, 33, {"a_view": True}),
    ("silu", "bfloat16", 129, 130, 64, {"layout_b": "T"}),
    ("silu", "float16", 300, 270, 40, {"grid": 2, "pingpong": True}),            # a whole tile per consumer
    ("silu", "bfloat16", 150, 300, 70, {"grid": 2, "tn": 256, "layout_b": "T"}),  # 128 x 256, shared tiles
]


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="the tile_func twin runs 384 CPU fibers (warp-lang 1.18+)")
@pytest.mark.parametrize("op,dtype,M,N,K,extra", CASES_REGS)
def test_cpu_twin_tile_func(op, dtype, M, N, K, extra):
    y, ref, bound = _run(op, dtype, M, N, K, "cpu", form="regs", **extra)
    _check(y, ref, bound)


def test_tile_coord_cpu():
    """tile_origin / tile_coord on the CPU's 384 fibers (ping-pong: work item t is tiles 2 t and 2 t + 1, one per
    consumer warpgroup of 128 threads x 128 entries): the items cover each output of a 3 x 2 grid of tiles once, in
    grouped order; the producer's threads get row 2^30."""
    g = warp_gemm.fused_gemm(wp.float16, pingpong=True)
    assert g.pingpong and g.tiles_per_item == 2 and g.frag == 128
    origin, coord, FR = g.tile_origin, g.tile_coord, g.frag

    @wp.kernel(module="unique")
    def k(M: int, N: int, tiles: int, out: wp.array3d(dtype=int)):
        blk = wp.tid()
        for t in range(blk, tiles, 1):
            o = origin(M, N, t)
            for i in range(FR):
                rc = coord(o, i)
                if rc[0] < M:
                    wp.atomic_add(out, rc[0], rc[1], 0, 1)
                    wp.atomic_add(out, rc[0], rc[1], 1, t)
                else:
                    wp.atomic_add(out, 0, 0, 2, 1)

    M, N = 3 * 128, 2 * 128
    out = wp.zeros((M, N, 3), dtype=int, device="cpu")
    g.launch_tiles(k, 1, [M, N, 3, out], device="cpu")
    o = out.numpy()
    assert (o[:, :, 0] == 1).all()
    assert o[0, 0, 2] == 3 * 128 * FR
    # grouped order (8 tile rows per group, here all 3): tile u at tile row u % 3, tile column u // 3; item u // 2
    rows, cols = np.meshgrid(np.arange(M) // 128, np.arange(N) // 128, indexing="ij")
    assert (o[:, :, 1] == (cols * 3 + rows) // 2).all()


def test_configuration():
    g = warp_gemm.fused_gemm(wp.float16)
    assert (g.bm, g.bn, g.block_dim, g.stages, g.layout_b) == (128, 128, 384, 6, "N")
    for x in (g, warp_gemm.fused_gemm(wp.float16, layout_b="T", tn=256)):
        # the stages, their barriers and the 1024-byte alignment fit the buffer; the sums stay below the stages' end
        assert x.buf_rows * x.buf_cols * 4 >= x.stages * ((128 + x.bn) * 64 * 2 + 16) + 1024
        assert x.bm * x.buf_cols * 4 <= x.stages * (128 + x.bn) * 64 * 2
        assert x.smem_bytes <= 232448
    assert warp_gemm.fused_gemm("fp16") is g
    assert warp_gemm.fused_gemm(wp.float16, layout_b="T", tn=256).stages == 4
    # tile_func: both consumers on one tile by default (64 sums per thread at 128 columns, 128 at 256); ping-pong on
    # request at 128 columns (a whole 128 x 128 tile per consumer: 128 sums per thread, two tiles per work item)
    assert (g.pingpong, g.tiles_per_item, g.frag) == (False, 1, 64)
    p128 = warp_gemm.fused_gemm(wp.float16, pingpong=True)
    assert (p128.pingpong, p128.tiles_per_item, p128.frag) == (True, 2, 128)
    c256 = warp_gemm.fused_gemm(wp.float16, tn=256)
    assert (c256.pingpong, c256.tiles_per_item, c256.frag) == (False, 1, 128)
    # the buffer holds the stages, their barriers, the two ping-pong order barriers and the 1024-byte alignment
    assert p128.smem_bytes == g.smem_bytes
    assert g.smem_bytes >= g.stages * ((128 + 128) * 64 * 2 + 16) + 16 + 1024


def test_errors():
    with pytest.raises(TypeError, match="fused_gemm: dtype float32"):
        warp_gemm.fused_gemm(wp.float32)
    with pytest.raises(ValueError, match="layout_b"):
        warp_gemm.fused_gemm(wp.float16, layout_b="X")
    with pytest.raises(ValueError, match="tn must be 256 or 128"):
        warp_gemm.fused_gemm(wp.float16, tn=64)
    with pytest.raises(ValueError, match="pingpong needs tn=128"):
        warp_gemm.fused_gemm(wp.float16, tn=256, pingpong=True)
    g = warp_gemm.fused_gemm(wp.float16)
    A = wp.zeros((4, 5), dtype=wp.float16, device="cpu")
    with pytest.raises(ValueError, match=r"disagree on K \(5 against 6\)"):
        g.operands(A, wp.zeros((6, 3), dtype=wp.float16, device="cpu"))
    with pytest.raises(TypeError, match="has dtype float32"):
        g.operands(A, wp.zeros((5, 3), dtype=wp.float32, device="cpu"))
    with pytest.raises(TypeError, match="2-D wp.array"):
        g.operands(np.zeros((4, 5)), A)


def _sm90():
    return wp.get_cuda_device_count() > 0 and wp.get_device("cuda:0").arch == 90


@pytest.mark.gpu
@pytest.mark.skipif(not _sm90(), reason="needs an sm_90 GPU")
@pytest.mark.parametrize("op,dtype,M,N,K,extra", CASES + [
    ("silu", "float16", 1000, 1030, 4095, {}),          # odd K: A's rows staged into an aligned copy
    ("linear_gelu", "bfloat16", 777, 513, 1001, {}),    # odd K: both operands staged
    ("silu", "float16", 300, 1001, 512, {}),            # odd N: B's rows staged
    ("rowsum", "bfloat16", 513, 1000, 257, {}),
])
def test_gpu(op, dtype, M, N, K, extra):
    y, ref, bound = _run(op, dtype, M, N, K, "cuda:0", **extra)
    _check(y, ref, bound)


@pytest.mark.gpu
@pytest.mark.skipif(not _sm90(), reason="needs an sm_90 GPU")
@pytest.mark.parametrize("op,dtype,M,N,K,extra", CASES_REGS + [
    ("silu", "float16", 1000, 1030, 4095, {}),              # odd K: A's rows staged into an aligned copy
    ("silu", "float16", 1000, 1030, 4095, {"grid": 5}),     # 5 blocks over 72 tiles: stages and phases carry over
    ("linear_gelu", "bfloat16", 777, 513, 1001, {}),        # odd K: both operands staged
    ("linear_gelu", "float16", 2048, 2048, 1024, {"grid": 7}),
    ("silu", "float16", 300, 1001, 512, {}),                # odd N: B's rows staged
    ("silu", "bfloat16", 513, 700, 448, {"layout_b": "T", "grid": 3}),  # 7 K tiles: not a multiple of 6 stages
    ("residual", "float16", 1030, 1100, 130, {"grid": 11}),
    ("rowsum", "bfloat16", 513, 1000, 257, {}),
    ("rowsum", "float16", 4096, 4096, 512, {}),
])
def test_gpu_tile_func(op, dtype, M, N, K, extra):
    y, ref, bound = _run(op, dtype, M, N, K, "cuda:0", form="regs", **extra)
    _check(y, ref, bound)


@pytest.mark.parametrize("row", [suite.Row("s", "silu", "float16", 130, 300, 70),
                                 suite.Row("g", "linear_gelu", "bfloat16", 129, 257, 65),
                                 suite.Row("r", "residual", "float16", 131, 33, 17),
                                 suite.Row("rs", "rowsum", "float16", 140, 300, 40)], ids=lambda r: r.name)
def test_suite_checks_cpu(row):
    """The fused suite's providers on the CPU (checks only, no timing): each one agrees with float64."""
    pytest.importorskip("torch")
    recs = suite.run_row(row, 1, device="cpu", time=False)
    assert [r["provider"] for r in recs] == ["fused", "fused_persistent"] + (
        [] if row.op == "rowsum" else ["fused_persistent_256"]) + ["warp_gemm+ew", "torch"]
    assert all(r["status"] == "ok" for r in recs), recs


def test_operands_keep_maps_of_aligned_operands(monkeypatch):
    """On CUDA, ``operands`` makes the TMA maps of operands read in place once per (pointers, shapes, strides): a
    second call with the same arrays returns the same descriptors without new views or map lookups; other strides
    get their own. (A stand-in sm_90 device; the map maker counts its calls.)"""
    import warp_gemm.fused as fused_mod
    from warp_gemm.families.hopper import tma

    class Sm90:
        is_cpu, is_cuda, arch = False, True, 90

        def __str__(self):
            return "cuda:0"

    calls = []

    def fake_map(view, rows, cols=None):
        calls.append((view.ptr, tuple(view.shape), tuple(view.strides), rows))
        return 1000 + len(calls)

    monkeypatch.setattr(tma, "tensor_map", fake_map)
    monkeypatch.setattr(fused_mod, "_view3", lambda x: x)  # no 3-D view on the stand-in device
    monkeypatch.setattr(_compat, "HAS_CUDA_ARCH_SUFFIX", True)
    g = warp_gemm.fused_gemm(wp.float16, layout_b="T")
    dev = Sm90()
    A = wp.zeros((256, 128), dtype=wp.float16, device="cpu")
    B = wp.zeros((192, 128), dtype=wp.float16, device="cpu")
    Av, Bv = A[:, :64], B[:, :64]  # row stride 256 bytes: TMA-readable in place, other extents
    for x in (A, B, Av, Bv):
        x.device = dev
    o1 = g.operands(A, B, grid=7)
    o2 = g.operands(A, B)
    assert (o1.a, o1.b) == (o2.a, o2.b) == (1001, 1002) and len(calls) == 2
    assert (o1.M, o1.N, o1.K, o1.items, o1.grid) == (256, 192, 128, 2 * 2, 4)  # one tile per item: 4 items
    assert not o1.staged and not o2.staged
    o3 = g.operands(Av, Bv)
    assert len(calls) == 4 and (o3.a, o3.b) == (1003, 1004) and o3.K == 64


def test_staging_buffers_come_back_for_the_next_call():
    """``fused._aligned`` copies the operands whose rows TMA cannot read (one launch for both) into aligned buffers
    that return to a per-stream pool when their holder is dropped: the next call stages into the same address (its
    TMA map is then made already), a call while the first one's buffers are still held gets others."""
    import gc

    import warp_gemm.fused as fused_mod

    rng = np.random.default_rng(5)
    a_np = rng.standard_normal((33, 45)).astype(np.float16)  # 90-byte rows: staged (16-byte padding)
    b_np = rng.standard_normal((45, 35)).astype(np.float16)  # 70-byte rows: staged
    c_np = rng.standard_normal((45, 40)).astype(np.float16)  # 80-byte rows: read in place
    A, B, C = (wp.array(x, dtype=wp.float16, device="cpu") for x in (a_np, b_np, c_np))

    def check(x, ref):
        assert x.ptr % 16 == 0 and x.strides[0] % 16 == 0 and tuple(x.shape) == ref.shape
        assert np.array_equal(x.numpy(), ref)

    a, b, leases = fused_mod._aligned(A, B)
    check(a, a_np)
    check(b, b_np)
    assert len(leases) == 2
    first = (a.ptr, b.ptr)
    a2, b2, leases2 = fused_mod._aligned(A, B)  # the first pair still held: other buffers
    assert {a2.ptr, b2.ptr}.isdisjoint(first)
    check(a2, a_np)
    pooled = {first[0], a2.ptr}  # A's two buffers
    del a, b, leases, a2, b2, leases2
    gc.collect()
    key = lambda k: k[0] == "cpu" and k[2:] == (33, 48, "float16")  # noqa: E731
    free = [x for k, v in fused_mod._pool.items() if key(k) for x in v] + [x for k, x in fused_mod._returned if key(k)]
    assert {x.ptr for x in free} == pooled  # kept alive for the pool, not freed
    a3, c3, leases3 = fused_mod._aligned(A, C)
    assert a3.ptr in pooled  # one of A's pooled buffers, staged again
    assert c3 is C and len(leases3) == 1
    check(a3, a_np)
    d_np = rng.standard_normal((20, 601)).astype(np.float16)  # 1202-byte rows: padded to 128 bytes (1280)
    d, _, _ = fused_mod._aligned(wp.array(d_np, dtype=wp.float16, device="cpu"), C)
    check(d, d_np)
    assert d.strides[0] == 1280


@pytest.mark.parametrize("body", ["fused", "fused-persistent"])
def test_example_07_bodies_cpu(body):
    """examples/07_fused_layer.py's fused_gemm bodies on the CPU twins (checked against float64 inside; exit code 0
    only when every result is within tolerance)."""
    import importlib.util
    import pathlib

    if body == "fused-persistent" and not _compat.HAS_CPU_BLOCKS:
        pytest.skip("the tile_func twin runs 384 CPU fibers (warp-lang 1.18+)")
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "07_fused_layer.py"
    spec = importlib.util.spec_from_file_location("example_07_fused_layer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--device", "cpu", "--dtype", "float16", "--size", "130x140x70", "--body", body]) == 0


# --- g.store_frag: a consumer thread's fragment stored with 16-byte stores (CUDA) ---------------------------------
_STORE = {}


def _store_kernel(g, dtype):
    """silu of tile_func's sums, in place in the fragment vector, stored through ``g.store_frag``."""
    if g.key + str(g.pingpong) in _STORE:
        return _STORE[g.key + str(g.pingpong)]
    T = getattr(wp, dtype)
    frag, origin, FR, R, C, store = g.tile_func, g.tile_origin, g.frag, g.buf_rows, g.buf_cols, g.store_frag

    @wp.func
    def silu(x: float):
        return x / (1.0 + wp.exp(-x))

    def k(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int, Y: wp.array2d(dtype=T)):
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)
            for i in range(FR):
                acc[i] = silu(acc[i])
            store(Y, acc, origin(M, N, t))

    _STORE[g.key + str(g.pingpong)] = wp.kernel(k, module="unique", module_options={"enable_backward": False})
    return _STORE[g.key + str(g.pingpong)]


def _store_case(dtype, M, N, K, tn, pingpong, view, device, grid=None, record=False):
    """silu(A @ B) through store_frag into ``view`` of a NaN-prefilled array: "contig" (Y itself), "colslice"
    (columns 1 .. N of an (M, N + 3) array: rows off the 16-byte grid), "rowstep" (every second row of a (2 M, N)
    array), "colstep" (every second column of an (M, 2 N) array). Returns (the whole array in float64, the view's
    region in it, the float64 reference)."""
    rng = np.random.default_rng(M * 7 + N)
    A, a64, ka = _arr(rng.standard_normal((M, K)) * K ** -0.25, dtype, device)
    B, b64, kb = _arr(rng.standard_normal((K, N)) * K ** -0.25, dtype, device)
    shape, sl = {"contig": ((M, N), np.s_[:, :]), "colslice": ((M, N + 3), np.s_[:, 1:N + 1]),
                 "rowstep": ((2 * M, N), np.s_[::2, :]), "colstep": ((M, 2 * N), np.s_[:, ::2])}[view]
    Yb, kk = _nan_out(*shape, dtype, device)
    Y = Yb[sl] if view != "contig" else Yb
    g = warp_gemm.fused_gemm(getattr(wp, dtype), layout_b="N", tn=tn, pingpong=pingpong)
    kern = _store_kernel(g, dtype)
    ops = g.operands(A, B, grid=grid)
    if device != "cpu":  # A's rows are 2 K bytes, B's 2 N: TMA reads them in place where both are multiples of 16
        assert ops.staged == bool((2 * K) % 16 or (2 * N) % 16)
    if record:
        cmd = g.launch_tiles(kern, ops, ops.args + [Y], device=device, record_cmd=True)
        wp.synchronize_device(device)
        assert np.isnan(_to64(Yb, dtype)).all(), "record_cmd=True launched"
        cmd.launch()
    else:
        g.launch_tiles(kern, ops, ops.args + [Y], device=device)
    wp.synchronize_device(device)
    z = a64 @ b64
    yb = _to64(Yb, dtype)  # before ka, kb, kk (the bfloat16 arrays' memory) go
    return yb, sl, z / (1.0 + np.exp(-z))


def _check_store(yb, sl, ref, dtype):
    inside = np.zeros(yb.shape, bool)
    inside[sl] = True
    assert np.isnan(yb[~inside]).all(), "store_frag wrote outside the view"
    _check(yb[sl], ref, 2e-3 if dtype == "float16" else 1e-2)


STORE_CASES = [  # (dtype, M, N, K, tn, pingpong, view)
    ("float16", 300, 270, 40, 128, None, "contig"),
    ("bfloat16", 129, 256, 64, 128, None, "colslice"),
    ("float16", 150, 300, 70, 256, None, "rowstep"),
    ("bfloat16", 260, 130, 33, 128, False, "colstep"),
]


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="the tile_func twin runs 384 CPU fibers (warp-lang 1.18+)")
@pytest.mark.parametrize("dtype,M,N,K,tn,pingpong,view", STORE_CASES)
def test_store_frag_cpu(dtype, M, N, K, tn, pingpong, view):
    yb, sl, ref = _store_case(dtype, M, N, K, tn, pingpong, view, "cpu", grid=2)
    _check_store(yb, sl, ref, dtype)


@pytest.mark.skipif(not _compat.HAS_CPU_BLOCKS, reason="the tile_func twin runs 384 CPU fibers (warp-lang 1.18+)")
def test_record_cmd_cpu():
    """``launch_tiles(..., record_cmd=True)`` launches nothing; the returned command's ``launch()`` runs it."""
    yb, sl, ref = _store_case("float16", 140, 150, 30, 128, None, "contig", "cpu", grid=2, record=True)
    _check_store(yb, sl, ref, "float16")


@pytest.mark.gpu
@pytest.mark.skipif(not _sm90(), reason="needs an sm_90 GPU")
@pytest.mark.parametrize("dtype,M,N,K,tn,pingpong,view", STORE_CASES + [
    ("float16", 512, 512, 128, 128, None, "contig"),      # every 32-column chunk inside: 16-byte stores only
    ("bfloat16", 520, 1000, 200, 256, None, "contig"),    # 16-byte stores and the right edge's pairs
    ("float16", 1000, 1030, 4095, 128, None, "colslice"),  # odd K (A staged), unaligned rows: shifted segments
    ("bfloat16", 384, 520, 96, 128, False, "rowstep"),
    ("float16", 300, 1023, 100, 256, None, "contig"),     # 2046-byte rows: every shift of the aligned segments
    ("bfloat16", 200, 517, 64, 128, True, "colslice"),    # ping-pong, rows and base off the 16-byte grid
])
def test_store_frag_gpu(dtype, M, N, K, tn, pingpong, view):
    yb, sl, ref = _store_case(dtype, M, N, K, tn, pingpong, view, "cuda:0")
    _check_store(yb, sl, ref, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not _sm90(), reason="needs an sm_90 GPU")
def test_record_cmd_gpu():
    yb, sl, ref = _store_case("bfloat16", 700, 600, 256, 128, None, "contig", "cuda:0", record=True)
    _check_store(yb, sl, ref, "bfloat16")


def test_staging_lease_finalizer_takes_no_lock():
    """A dropped lease's finalizer may run inside any ``with _lock:`` (a garbage collection during a kernel build):
    it must not wait for the lock, and its buffer still comes back for the next call."""
    import threading

    import warp_gemm.fused as fused_mod

    buf = wp.empty((1, 4, 8), dtype=wp.float16, device="cpu")
    key = ("cpu", 0, 4, 8, "float16_lease_test")
    lease = fused_mod._Lease(key, buf)
    with fused_mod._lock:  # held, as by a kernel build in another frame of this thread
        t = threading.Thread(target=lease.__del__)
        t.start()
        t.join(10)
        assert not t.is_alive(), "the lease's finalizer waited for fused._lock"
    with fused_mod._lock:
        assert fused_mod._take(key) is buf
