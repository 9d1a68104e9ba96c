"""The GEMV family (kernels/gemv.py): products whose smaller output side is 1, through its entry points
(choose_spec -> workspace_shape -> launch_args) and through the public API with ``family="gemv"``, on
the CPU twin (and on CUDA where there is a GPU): M == 1 and N == 1, every layout, odd K and rows,
strided vectors, batch broadcast, alpha/beta*C (broadcast, aliasing D), every dtype, K split into a
workspace and not, NaN-prefilled outputs and workspaces, NaN/Inf propagation, against float64. Also:
the planner's choice on a CUDA-like device, and an offline CUDA build of each kernel kind.

Compiles are kept few (one CPU kernel per kind, dtypes, epilogue and split variant: ~1 s each)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import warp as wp
from conftest import cuda_like_problem, make, nan_like, to_f64, set_options

import warp_gemm
import warp_gemm._compat as compat
from warp_gemm.families import gemv
from warp_gemm.tools.tolerance import compare, random_operands, round_to

compat.init()
DTYPES = ["float16", "float32", "float64"] + (["bfloat16"] if compat.HAS_BF16 else [])
DEVICES = ["cpu"] + ([pytest.param("cuda", marks=pytest.mark.gpu)] if wp.get_cuda_device_count() else [])
pytestmark = pytest.mark.skipif(not gemv.has_native_returns(),
                                reason="this Warp's native snippets return nothing")
_KEEP = []


def _strided(x64: np.ndarray, dtype: str, device: str, layout: str, vstride: int = 1):
    """A 3-D Warp view of the (nb, rows, cols) operand ``x64`` in ``layout`` ("N": stored as is; "T":
    its transpose stored row-major, viewed (nb, cols, rows)); ``vstride`` > 1 stores each row of the
    stored array ``vstride`` times wider (a leading dimension, e.g. a vector x with a stride)."""
    st = x64 if layout == "N" else np.ascontiguousarray(np.swapaxes(x64, 1, 2))
    nb, r, c = st.shape
    buf = np.zeros((nb, r, c * vstride))
    buf[:, :, :c] = st
    arr = make(buf, dtype, "warp", device)
    _KEEP.append(arr)
    it = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]
    strides = (r * c * vstride * it, c * vstride * it, it)
    return wp.array(ptr=arr.ptr, dtype=arr.dtype, shape=(nb, r, c), strides=strides, device=arr.device)


def run_gemv(device, dtype, out_dtype, layout, M, N, K, batch, a_nb, b_nb, c_nb, alpha, beta, rng,
             target=None, vstride=1, alias=False, poison=None):
    """One product through the family's entry points; returns (comparison, spec, launches, result).
    ``target``: the spec's target_warps (0: never split, large: split); ``poison``: ``(operand, index,
    value)`` written into A or B before the product (NaN/Inf propagation)."""
    dev = wp.get_device(device)
    epilogue = "axpby" if c_nb else "scale"
    spec = gemv.choose_spec(dev, dtype, layout[0], layout[1], M, N, K, batch, out_dtype, epilogue)
    assert spec is not None, (M, N, K, layout)
    if target is not None:
        spec = dataclasses.replace(spec, target_warps=target)
    a, _ = random_operands(M, N, K, dtype, rng, batch=a_nb)
    _, b = random_operands(M, N, K, dtype, rng, batch=b_nb)
    if poison is not None:
        which, idx, value = poison
        (a if which == "a" else b)[idx] = value
    A = _strided(a, dtype, device, layout[0], vstride if M == 1 else 1)
    B = _strided(b, dtype, device, layout[1], vstride if N == 1 and M != 1 else 1)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = np.broadcast_to(alpha * np.matmul(a, b), (batch, M, N)).copy()
    C = None
    if c_nb:
        c = round_to(rng.standard_normal((c_nb, M, N)), out_dtype)
        ref = ref + beta * c
        if alias:  # C is D: the output holds C when the kernel starts (the planner's c_into_d)
            assert c_nb == batch
            C = D = make(c, out_dtype, "warp", device)
        else:
            C = make(c, out_dtype, "warp", device)
    if not (c_nb and alias):
        D = nan_like("warp", (batch, M, N), out_dtype, device)
    ws = None
    shp = gemv.workspace_shape(spec, M, N, K, batch)
    if shp is not None:  # NaN-prefilled too: every partial sum the finishing pass reads must be written
        ws = wp.array(np.full(shp[0], np.nan), dtype=getattr(wp, shp[1]), device=device)
    n_cnt = gemv.counters_len(spec, M, N, batch)  # the fused bands' arrival counters: zeros, left zero
    extra = {"counters": wp.zeros(n_cnt, dtype=wp.int32, device=device)} if n_cnt else {}
    launches = gemv.launch_args(spec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb or 1,
                                workspace=ws, **extra)
    for kernel, dim, inputs, block_dim in launches:  # plain kernels: wp.launch, never launch_tiled
        kw = {"block_dim": block_dim} if block_dim else {}
        wp.launch(kernel, dim=dim, inputs=inputs, device=dev, **kw)
    wp.synchronize_device(dev)
    if n_cnt:
        assert not extra["counters"].numpy().any(), "the fused bands left a counter set"
    tol_dtype = out_dtype if out_dtype in ("float16", "bfloat16") or out_dtype == dtype else "float32"
    if dtype == "float64" and out_dtype != "float64":
        tol_dtype = out_dtype
    out = to_f64(D)
    return compare(out, ref, tol_dtype), spec, launches, (out, ref)


# (M, N, K, batch, a_nb, b_nb, c_nb): M == 1 and N == 1, K of 1, 7, 33, 1027, rows 1, 3, 129, batch
# broadcast of each operand and of C.
SHAPES = [
    (1, 129, 1027, 1, 1, 1, 0),
    (1, 3, 7, 2, 2, 1, 2),
    (1, 1, 33, 3, 1, 3, 1),
    (1, 129, 1, 2, 2, 2, 0),
    (129, 1, 33, 2, 1, 2, 1),
    (3, 1, 1027, 1, 1, 1, 1),
    (129, 1, 7, 3, 3, 1, 0),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("split", [False, True], ids=["whole-K", "split-K"])
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "M{}-N{}-K{}-b{}-a{}b{}c{}".format(*s))
def test_gemv_shapes(device, shape, layout, split):
    M, N, K, batch, a_nb, b_nb, c_nb = shape
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, launches, _ = run_gemv(device, "float32", "float32", layout, M, N, K, batch, a_nb, b_nb, c_nb,
                                      0.75, -1.5, rng, target=100000 if split else 0)
    assert res.ok, f"{spec.key}: {res}"
    assert spec.kind == gemv.kind_for(layout[0], layout[1], M, N)
    s, _ = gemv.splits(spec, M, N, K, batch)
    assert len(launches) == (2 if s > 1 else 1) and launches[0][1][1] == s  # dim (batch, splits, lanes)
    # the kernel's K step: rowdot lanes x chunk x unroll elements (CPU 1x4x4, CUDA 32x4x4), colsum its row
    # groups (CPU 1, CUDA block_dim / col_lanes)
    step = spec.lanes * spec.chunk * spec.unroll if spec.kind == "rowdot" else spec.row_groups
    assert (s > 1) == (split and K > step), "a large target_warps splits K of more than one K step"


def _run_cuda_like(shape, dtype: str, **fields):
    """``run_gemv`` on the CPU with the CPU spec's fields replaced by ``fields`` (a CUDA-shaped spec whose
    snippets take their plain C++ branches); the problem's own epilogue kept. Returns (result, spec, launches)."""
    M, N, K, batch, a_nb, b_nb, c_nb = shape
    layout = "NN" if M == 1 else "TN"
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    cpu_spec = gemv.choose_spec(wp.get_device("cpu"), dtype, layout[0], layout[1], M, N, K, batch, dtype, "scale")
    cuda_like = dataclasses.replace(cpu_spec, **fields)
    orig = gemv.choose_spec
    try:
        gemv.choose_spec = lambda *a, **k: dataclasses.replace(cuda_like, epilogue=orig(*a, **k).epilogue)
        res, spec, launches, _ = run_gemv("cpu", dtype, dtype, layout, M, N, K, batch, a_nb, b_nb, c_nb,
                                          0.75, -1.5, rng)
    finally:
        gemv.choose_spec = orig
    return res, spec, launches


@pytest.mark.parametrize("split", [False, True], ids=["whole-K", "split-K"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 129, 1027, 2, 1, 2, 2), (77, 1, 300, 1, 1, 1, 0)],
                         ids=lambda s: "M{}-N{}-K{}-b{}-a{}b{}c{}".format(*s))
def test_colsum_cuda_spec_on_cpu(shape, dtype, split):
    """The CUDA colsum kernel's indexing (a block of threads per column strip, strips ragged at the
    edge, K split in whole block steps, the epilogue and workspace) run on the CPU: a CUDA-shaped spec
    (block 64, 4 chunks per row) built for the CPU takes the snippet's scalar branch, thread j < cols of
    each strip computing column j."""
    M, N, K, batch = shape[:4]
    res, spec, launches = _run_cuda_like(shape, dtype, lanes=32, block_dim=64, col_lanes=4,
                                         target_warps=100000 if split else 0)
    assert res.ok, f"{spec.key}: {res}"
    assert spec.kind == "colsum" and (spec.group, spec.row_groups) == (64, 16)
    s, per = gemv.splits(spec, M, N, K, batch)
    assert (s > 1) == split and (s == 1 or per % spec.row_groups == 0)
    assert launches[0][1] == (batch, s, -(-max(M, N) // spec.cols) * 64)


@pytest.mark.parametrize("groups", [1, 4], ids=lambda g: f"g{g}")
@pytest.mark.parametrize("bands", ["one", "some", "many"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 129, 1027, 2, 1, 2, 2), (77, 1, 300, 1, 1, 1, 0), (1, 3001, 77, 3, 3, 1, 1)],
                         ids=lambda s: "M{}-N{}-K{}-b{}-a{}b{}c{}".format(*s))
def test_bands_cuda_spec_on_cpu(shape, dtype, bands, groups):
    """The CUDA bands kernels' indexing run on the CPU: a CUDA-shaped spec (64 threads per column block, 8
    rows per unrolled step, BANDS_FINISH_WARPS warps per 32 columns in the finishing kernel) takes the
    snippets' plain C++ branches -- column blocks ragged at the edge (129, 77, 3001 columns), one band, a few,
    or hundreds of bands ending in a partial one, batch broadcast, C, the NaN-prefilled workspace every band
    must write. With 4 row groups (``band_groups``): 16 threads per group, each group a quarter of the band's rows
    (partial or empty in a ragged last band), group 0 writing and groups 1-3 adding theirs in order (the CPU
    branch of the groups' meeting)."""
    M, N, K, batch = shape[:4]
    chunk = 16 // np.dtype(dtype).itemsize
    cols = 64 // groups * chunk
    warps = batch * -(-max(M, N) // cols) * 2  # the band's: 64 threads per column block
    target = {"one": 0, "some": 3 * warps * gemv.BANDS_SPLIT_TO, "many": 10**6}[bands]  # 3 bands; the most
    res, spec, launches = _run_cuda_like(shape, dtype, kind="bands", lanes=32, block_dim=64, unroll=8,
                                         target_warps=target, band_groups=groups)
    assert res.ok, f"{spec.key}: {res}"
    assert spec.cols == cols and (f"_g{groups}_b64" in spec.kernel_key) == (groups > 1)
    s, per = gemv.splits(spec, M, N, K, batch)
    assert per % (8 * groups) == 0 or s == 1
    assert s == -(-K // per) and (s == 1) == (bands == "one")
    assert s == {"one": 1, "some": 3, "many": min(-(-K // (8 * groups)), gemv.BANDS_MAX_SPLITS)}[bands]
    R = max(M, N)
    fb = 32 * gemv.BANDS_FINISH_WARPS
    assert [ln[1] for ln in launches] == [(batch, s, -(-R // cols) * 64), (batch, -(-R // 32) * fb)]
    assert [ln[3] for ln in launches] == [64, fb]


@pytest.mark.parametrize("groups", [1, 4], ids=lambda g: f"g{g}")
@pytest.mark.parametrize("bands", ["one", "some", "many"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 129, 1027, 2, 1, 2, 2), (77, 1, 300, 1, 1, 1, 0), (1, 3001, 77, 3, 3, 1, 1)],
                         ids=lambda s: "M{}-N{}-K{}-b{}-a{}b{}c{}".format(*s))
def test_fused_bands_cuda_spec_on_cpu(shape, dtype, bands, groups):
    """The fused bands (round 14; the default for one matrix since round 18) on the CPU: a CUDA-shaped spec whose
    snippet takes its plain C++ branch -- every thread counts its own bands' arrivals and the last sums them in band
    order, then the epilogue. One launch; against float64 with NaN-prefilled outputs and workspace; run_gemv checks the
    counters end zero. With 4 row groups (round 17): group 0 stores, groups 1-3 add, and only the last group counts and
    finishes."""
    M, N, K, batch = shape[:4]
    chunk = 16 // np.dtype(dtype).itemsize
    cols = 64 // groups * chunk
    warps = batch * -(-max(M, N) // cols) * 2
    target = {"one": 0, "some": 3 * warps * gemv.BANDS_SPLIT_TO, "many": 10**6}[bands]
    res, spec, launches = _run_cuda_like(shape, dtype, kind="bands", lanes=32, block_dim=64, unroll=8,
                                         target_warps=target, fused=True, band_groups=groups)
    assert res.ok, f"{spec.key}: {res}"
    s, _ = gemv.splits(spec, M, N, K, batch)
    assert len(launches) == 1 and launches[0][1] == (batch, s, -(-max(M, N) // cols) * 64)


def test_fused_bands_finishers():
    """Finishers per column block, as launch_args passes them (its last input): at most BANDS_FINISHERS and at most
    the bands, and every column block's finishers waiting at once stay under the SM count (132 here), so a waiting
    block never keeps a band block from starting; one finisher (no waiting) where the column blocks alone fill it."""
    class Cuda:
        is_cpu = False

    base = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 4096, 4096, 1, "float16", "scale")
    spec = dataclasses.replace(base, fused=True, band_groups=1, target_warps=gemv.TARGET_WARPS_PER_SM * 132)
    for N, K, batch, want in [(4096, 4096, 1, 64), (4096, 4096, 4, 16), (8192, 1024, 1, 32), (4096, 64, 80, 1)]:
        A = wp.empty((batch, 1, K), dtype=wp.float16, device="cpu")
        B = wp.empty((batch, K, N), dtype=wp.float16, device="cpu")
        D = wp.empty((batch, 1, N), dtype=wp.float16, device="cpu")
        (ws_shape, ws_dtype), n = gemv.workspace_shape(spec, 1, N, K, batch), gemv.counters_len(spec, 1, N, batch)
        ws = wp.empty(ws_shape, dtype=getattr(wp, ws_dtype), device="cpu")
        cnt = wp.zeros(n, dtype=wp.int32, device="cpu")
        (kernel, dim, inputs, block), = gemv.launch_args(spec, A, B, None, D, 1.0, 0.0, 1, N, K, batch, batch, batch,
                                                         1, workspace=ws, counters=cnt)
        nfin, bands, blocks = inputs[-1], dim[1], batch * -(-N // spec.cols)
        assert nfin == want and nfin <= min(bands, gemv.BANDS_FINISHERS), (N, K, batch, bands, nfin)
        assert nfin == 1 or nfin * blocks < 132
    with pytest.raises(ValueError, match="int32 counters"):
        gemv.launch_args(spec, A, B, None, D, 1.0, 0.0, 1, N, K, batch, batch, batch, 1, workspace=ws)


def test_fused_bands_counters_are_cached_zeros():
    """The call path's counters for the fused bands (gemv.launch.counters): none for other specs; int32
    zeros of counters_len, one buffer per device/stream/slot/thread, reused by a smaller launch, grown zeroed."""
    from warp_gemm.core import execute

    _ENV = execute._env(None)
    dev = wp.get_device("cpu")
    spec = gemv.GemvSpec("float16", "float16", "bands", "scale", block_dim=64, unroll=8, fused=True)
    assert gemv.launch.counters(_ENV, dev, dataclasses.replace(spec, fused=False), 1, 4096, 1) == {}
    big = gemv.launch.counters(_ENV, dev, spec, 1, 4096, 2, slot="test_cnt")["counters"]
    assert big.dtype == wp.int32 and big.shape == (gemv.counters_len(spec, 1, 4096, 2),) and not big.numpy().any()
    small_ = gemv.launch.counters(_ENV, dev, spec, 1, 512, 1, slot="test_cnt")["counters"]
    assert small_.ptr == big.ptr and small_.shape == (gemv.counters_len(spec, 1, 512, 1),)
    grown = gemv.launch.counters(_ENV, dev, spec, 1, 8192, 2, slot="test_cnt")["counters"]
    assert grown.shape[0] >= gemv.counters_len(spec, 1, 8192, 2) and not grown.numpy().any()


def test_kind_rule():
    # M == 1: B stored (N, K) (layout T, F.linear's weight) has rows along K; N == 1: A stored (M, K).
    assert gemv.kind_for("N", "T", 1, 64) == "rowdot" and gemv.kind_for("T", "T", 1, 64) == "rowdot"
    assert gemv.kind_for("N", "N", 1, 64) == "colsum"
    assert gemv.kind_for("N", "N", 64, 1) == "rowdot" and gemv.kind_for("T", "T", 64, 1) == "colsum"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout,shape", [("NT", (1, 37, 150, 2, 2, 1, 1)), ("NN", (1, 37, 150, 2, 1, 2, 2)),
                                          ("NN", (37, 1, 150, 2, 2, 2, 1)), ("TN", (37, 1, 150, 2, 1, 1, 2))],
                         ids=["rowdot-M1", "colsum-M1", "rowdot-N1", "colsum-N1"])
@pytest.mark.parametrize("split", [False, True], ids=["whole-K", "split-K"])
def test_gemv_dtypes(device, dtype, layout, shape, split):
    M, N, K, batch, a_nb, b_nb, c_nb = shape
    if split:  # K over two of every kernel's K steps on every device (CUDA rowdot fp16: 32 x 8 x 4)
        K = 2100
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, launches, _ = run_gemv(device, dtype, dtype, layout, M, N, K, batch, a_nb, b_nb, c_nb, 0.5, 2.0,
                                      rng, target=100000 if split else 0)
    assert res.ok, f"{spec.key}: {res}"
    assert len(launches) == (2 if split else 1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,out_dtype", [("float16", "float32"), ("bfloat16", "float32"),
                                             ("float32", "float16"), ("float64", "float32")])
@pytest.mark.parametrize("layout", ["NT", "NN"])
def test_gemv_output_cast(device, dtype, out_dtype, layout):
    if "bfloat16" in (dtype, out_dtype) and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _, _ = run_gemv(device, dtype, out_dtype, layout, 1, 40, 130, 1, 1, 1, 1, 1.25, 0.5, rng)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout,MN", [("TN", (1, 45)), ("TT", (1, 45)), ("NN", (45, 1)), ("TN", (45, 1))],
                         ids=["x-strided-colsum", "x-strided-rowdot", "y-strided-rowdot", "y-strided-colsum"])
@pytest.mark.parametrize("split", [False, True], ids=["whole-K", "split-K"])
def test_gemv_strided_vector(device, layout, MN, split):
    """The vector with a stride (A of layout T for M == 1: x's elements a row stride apart; B (K, 1)
    inside a wider array for N == 1)."""
    M, N = MN
    if N == 1:  # B (b_nb, K, 1) stored with a leading dimension of 3 elements
        layout = layout[0] + "N"
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _, _ = run_gemv(device, "float16", "float16", layout, M, N, 77, 2, 2, 1, 1, 0.5, 2.0, rng,
                               target=100000 if split else 0, vstride=3)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout,MN", [("NT", (1, 50)), ("NN", (1, 50)), ("NN", (50, 1)), ("TN", (50, 1))])
@pytest.mark.parametrize("split", [False, True], ids=["whole-K", "split-K"])
def test_gemv_c_aliases_d(device, layout, MN, split):
    M, N = MN
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
    res, spec, _, _ = run_gemv(device, "float32", "float32", layout, M, N, 300, 3, 3, 1, 3, -0.5, 1.5, rng,
                               target=100000 if split else 0, alias=True)
    assert res.ok, f"{spec.key}: {res}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout,MN", [("NT", (1, 20)), ("NN", (1, 20)), ("NN", (20, 1)), ("TN", (20, 1))])
@pytest.mark.parametrize("split", [False, True], ids=["whole-K", "split-K"])
def test_gemv_nonfinite_propagates(device, layout, MN, split):
    """A NaN and an Inf in the matrix reach exactly the outputs they feed (the reference's NaN/Inf
    pattern, signs included); the rest stay right."""
    M, N = MN
    K = 100
    mat = "b" if M == 1 else "a"
    for value, idx in ((np.nan, 3), (np.inf, 11)):
        rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**31)
        # b[0, k, n] (M == 1) / a[0, m, k] (N == 1): row or column `idx` of the output
        where = (0, 40, idx) if mat == "b" else (0, idx, 40)
        res, spec, _, (out, ref) = run_gemv(device, "float32", "float32", layout, M, N, K, 1, 1, 1, 0, 1.0, 0.0,
                                            rng, target=100000 if split else 0, poison=(mat, where, value))
        assert not np.isfinite(ref).all()
        assert res.ok, f"{spec.key} {value}: {res}"


def test_gemv_workspace_checked():
    cpu = wp.get_device("cpu")
    spec = dataclasses.replace(gemv.choose_spec(cpu, "float32", "N", "N", 1, 64, 1000, 1, "float32", "scale"),
                               target_warps=1000)
    assert gemv.choose_spec(cpu, "float32", "N", "N", 2, 64, 1000, 1, "float32", "scale") is None
    assert gemv.choose_spec(cpu, "float32", "N", "N", 1, 64, 1000, 1, "float32", "splitk") is None
    shape, dt = gemv.workspace_shape(spec, 1, 64, 1000, 1)
    assert dt == "float32" and shape[1:] == (1, 64) and shape[0] > 1
    A = wp.zeros((1, 1, 1000), dtype=wp.float32)
    B = wp.zeros((1, 1000, 64), dtype=wp.float32)
    D = wp.zeros((1, 1, 64), dtype=wp.float32)
    with pytest.raises(ValueError, match="workspace"):
        gemv.launch_args(spec, A, B, None, D, 1.0, 0.0, 1, 64, 1000, 1, 1, 1, 1, workspace=None)


def test_split_rules():
    """CUDA-like choices (pure arithmetic): rowdot splits K only where its rows give fewer than 16
    warps per SM (fp16 1x4096x4096: 4096 rows, one launch); colsum (blocks of 512 threads over column
    strips of 64 bytes) only where its blocks give fewer than 8 warps per SM."""

    class Cuda:
        is_cpu = False
        sm_count = 132

    nt = gemv.choose_spec(Cuda(), "float16", "N", "T", 1, 4096, 4096, 1, "float16", "scale")
    nn = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 4096, 1023, 1, "float16", "scale")
    assert (nt.kind, nt.lanes, nt.target_warps) == ("rowdot", 32, 64 * 132) and nn.kind == "colsum"
    assert gemv.splits(nt, 1, 4096, 4096, 1) == (1, 4096) and gemv.workspace_shape(nt, 1, 4096, 4096, 1) is None
    # under BANDS_MIN_BYTES (8 MiB) colsum: 128 strips of 32 columns, one wave of 1024-thread blocks, one launch,
    # no workspace
    assert (nn.block_dim, nn.cols, nn.group, nn.row_groups) == (1024, 32, 1024, 256)
    assert gemv.splits(nn, 1, 4096, 1023, 1) == (1, 1023) and gemv.workspace_shape(nn, 1, 4096, 1023, 1) is None
    nn4 = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 4096, 4096, 2, "float16", "scale")
    nn8 = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 8192, 8192, 2, "float16", "scale")
    # from 8 MiB, bands; for a batch, 4 row groups of 64 threads (round 17), 512 columns (64 threads x 8) per block,
    # bands toward 32 warps per SM in whole unrolled steps of each group, and a finishing kernel -- 2 x 1x4096x4096:
    # 8 column blocks x 32 bands of 128 rows (each group 32); 2 x 1x8192x8192: 16 x 16 of 512 rows
    assert (nn4.kind, nn4.cols, nn4.group, nn4.unroll, nn4.band_groups, nn4.fused) == ("bands", 512, 256, 8, 4, False)
    assert nn8.kind == "bands" and not nn8.fused and gemv.BANDS_GROUPS == 4
    assert gemv.splits(nn4, 1, 4096, 4096, 2) == (32, 128) and gemv.splits(nn8, 1, 8192, 8192, 2) == (16, 512)
    assert gemv.workspace_shape(nn4, 1, 4096, 4096, 2) == ((64, 1, 4096), "float32")
    # one matrix (round 18): the fused finish with 16 row groups of 16 threads, 128 columns per block -- 1x4096x4096:
    # 32 column blocks x 16 bands of 256 rows; 1x8192x8192: 64 x 8 of 1024 rows; the workspace one plane per band
    one4 = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 4096, 4096, 1, "float16", "scale")
    one8 = gemv.choose_spec(Cuda(), "bfloat16", "N", "N", 1, 8192, 8192, 1, "bfloat16", "scale")
    assert (one4.kind, one4.cols, one4.band_groups, one4.fused) == ("bands", 128, 16, True)
    assert (one8.kind, one8.band_groups, one8.fused) == ("bands", 16, True)
    assert gemv.splits(one4, 1, 4096, 4096, 1) == (16, 256) and gemv.splits(one8, 1, 8192, 8192, 1) == (8, 1024)
    assert gemv.workspace_shape(one4, 1, 4096, 4096, 1) == ((16, 1, 4096), "float32")
    # ... while its column blocks of 128 stay under the SM count: 128 for 16384 columns, 192 for 24576
    assert gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 16384, 1024, 1, "float16", "scale").fused
    wide = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 24576, 2048, 1, "float16", "scale")
    assert (wide.kind, wide.fused, wide.band_groups) == ("bands", False, 4)
    nn4 = dataclasses.replace(one4, fused=False, band_groups=4)  # what follows: the two-launch bands, one matrix
    assert gemv.splits(nn4, 1, 4096, 4096, 1) == (64, 64)
    assert gemv.splits(nn4, 1, 4096, 3, 1) == (1, 3)  # K within one unrolled step: one band
    assert gemv.splits(nn4, 1, 8, 2**20, 1)[0] == gemv.BANDS_MAX_SPLITS
    assert gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 4096, 1024, 1, "float16", "scale").kind == "bands"
    assert gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 4096, 1023, 1, "float16", "scale").kind == "colsum"
    sm = gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 256, 16383, 1, "float16", "scale")
    s, per = gemv.splits(sm, 1, 256, 16383, 1)  # 8 strips of 16 warps: split toward 32 warps per SM
    assert sm.block_dim == 512 and (s, per) == (32, 512) and per % sm.row_groups == 0
    assert gemv.workspace_shape(sm, 1, 256, 16383, 1) == ((32, 1, 256), "float32")
    # bands for 16-bit matrices of 4096+ columns only (colsum measured ahead for narrower ones and for fp32)
    assert gemv.choose_spec(Cuda(), "float16", "N", "N", 1, 2048, 65536, 1, "float16", "scale").kind == "colsum"
    assert gemv.choose_spec(Cuda(), "bfloat16", "T", "N", 4096, 1, 1024, 1, "bfloat16", "scale").kind == "bands"
    s, per = gemv.splits(nt, 1, 16, 65536, 1)  # 16 rows: split, in whole unrolled warp steps
    assert s > 1 and per % (32 * 8 * gemv.UNROLL) == 0
    assert gemv.splits(nn, 1, 8, 2**20, 1)[0] == gemv.MAX_SPLITS  # the finishing pass's serial sum stays short
    assert gemv.choose_spec(Cuda(), "float32", "T", "N", 4096, 1, 4096, 1, "float32", "axpby").kind == "colsum"


# --- through the public API -------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["x-row", "x-strided", "W-rows", "y-col", "A-T"])
@pytest.mark.parametrize("kind", ["numpy", "warp"])
def test_gemv_through_the_api(case, kind, rng, planned):
    """``warp_gemm.gemm`` with ``family="gemv"`` on NumPy/Warp operands: a row x times B, a strided x
    (every third element), x times a weight W (N, K) transposed, A times a column y, A^T times y."""
    if compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7 (no tile_astype): the planner keeps every product on the tiled family")
    M, N, K = {"x-row": (1, 33, 70), "x-strided": (1, 33, 70), "W-rows": (1, 33, 70), "y-col": (33, 1, 70),
               "A-T": (33, 1, 70)}[case]
    a, b = random_operands(M, N, K, "float32", rng)
    c = round_to(rng.standard_normal(N), "float32")
    ta = tb = False
    if kind == "numpy":
        if case == "x-strided":
            big = np.zeros((2, 3 * K), np.float32)
            big[0, ::3] = a[0]
            A = big[:1, ::3]
        elif case == "A-T":
            A, ta = np.ascontiguousarray(a.T.astype(np.float32)), True
        else:
            A = a.astype(np.float32)
        B = np.ascontiguousarray(b.T.astype(np.float32)) if case == "W-rows" else b.astype(np.float32)
        tb = case == "W-rows"
        out = np.full((M, N), np.nan, np.float32)
    else:
        if case == "x-strided":  # (1, K) with a stride of 3 elements
            big = np.zeros((1, 3 * K))
            big[0, ::3] = a[0]
            store = make(big, "float32", "warp", "cpu")
            _KEEP.append(store)
            A = wp.array(ptr=store.ptr, dtype=wp.float32, shape=(1, K), strides=(12 * K, 12), device="cpu")
        elif case == "A-T":
            A, ta = make(np.ascontiguousarray(a.T), "float32", "warp", "cpu"), True
        else:
            A = make(a, "float32", "warp", "cpu")
        tb = case == "W-rows"
        B = make(np.ascontiguousarray(b.T) if tb else b, "float32", "warp", "cpu")
        out = nan_like("warp", (M, N), "float32", "cpu")
    with warp_gemm.options(family="gemv"):
        warp_gemm.gemm(A, B, make(c, "float32", kind, "cpu"), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb, out=out)
    assert [p.family for p in planned] == ["gemv"]
    cmp = compare(to_f64(out), 0.5 * (a @ b) + 2.0 * c, "float32")
    assert cmp.ok, f"{case} {kind}: {cmp}"


@pytest.mark.parametrize("M,N,trans_b,allow_tf32,dtype,want", [
    (1, 4096, False, False, "float16", "gemv"),  # bands (32 MiB; round 9: ahead of colsum cold, H100)
    (1, 1024, False, False, "float16", "gemv"),  # colsum (round 6: ahead of skinny, H100)
    (1, 4096, True, False, "float16", "gemv"),
    (4096, 1, False, False, "float16", "gemv"),
    (1, 512, True, True, "float32", "gemv"),  # tf32 allowed: the exact fp32 GEMV still
    (2, 4096, False, False, "float16", "skinny"),
    (4096, 2, True, False, "float16", "skinny"),
])
def test_planner_picks_gemv_on_cuda(monkeypatch, M, N, trans_b, allow_tf32, dtype, want):
    from warp_gemm.core.options import Options
    from warp_gemm.core.plan import make_plan

    if compat.WIDEN_16BIT_INPUTS:
        pytest.skip("Warp 1.7 (no tile_astype): the planner keeps every product on the tiled family")
    K = 4096
    a = np.zeros((M, K), dtype)
    b = np.zeros((N, K) if trans_b else (K, N), dtype)
    p = cuda_like_problem(monkeypatch, a, b, trans_b)
    plan = make_plan(p, 1.0, 0.0, allow_tf32, None, Options())
    assert plan.family == want
    if want == "gemv":
        kind = gemv.kind_for("N", "T" if trans_b else "N", M, N)
        big = M * N * K * np.dtype(dtype).itemsize >= gemv.BANDS_MIN_BYTES and max(M, N) >= 4096 and dtype == "float16"
        assert plan.family_spec.kind == ("bands" if kind == "colsum" and big else kind)
        assert plan.family_spec.lanes == 32 and plan.family_spec.target_warps == 64 * 132


# --- offline CUDA builds -----------------------------------------------------------------------------------
@pytest.mark.skipif(not compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("kind,dtype,arch,partial", [
    ("rowdot", "float16", 90, False), ("colsum", "float16", 90, True),
    ("rowdot", "float32", 80, True), ("colsum", "float64", 80, False), ("bands", "float16", 90, True),
    ("bands", "float64", 80, True),
])
def test_cuda_build_offline(kind, dtype, arch, partial, tmp_path):
    """Each kernel kind compiles for CUDA without a GPU (NVRTC; under a second each): the snippet's
    16-byte loads and warp shuffles are in the generated source, and, where Warp writes PTX, in the PTX."""
    import inspect

    spec = gemv.GemvSpec(dtype, dtype, kind, "axpby", unroll=gemv.BANDS_UNROLL if kind == "bands" else gemv.UNROLL)
    ks = gemv.kernels(spec, partial) if kind == "bands" else [gemv.get_kernel(spec, partial)]
    for n, k in enumerate(ks):
        wp.compile_aot_module(k.module, arch=[arch], module_dir=str(tmp_path / "cubin"))
    built = sorted(p.name for p in (tmp_path / "cubin").rglob("*") if p.suffix in (".cubin", ".ptx"))
    assert sum(f"sm{arch}" in n for n in built) == len(ks), built
    src = "".join(p.read_text() for p in (tmp_path / "cubin").rglob("*.cu"))
    assert "__ldg(" in src and "uint4" in src
    # colsum/rowdot reduce over warps with shuffles; bands' finishing kernel through shared memory
    assert ("__syncthreads()" in src) if kind == "bands" else ("__shfl_xor_sync(0xffffffffu" in src)
    if "use_ptx" in inspect.signature(wp.compile_aot_module).parameters:
        for k in ks:
            wp.compile_aot_module(k.module, arch=[arch], module_dir=str(tmp_path / "ptx"), use_ptx=True)
        ptx = "".join(p.read_text(errors="replace") for p in (tmp_path / "ptx").rglob("*.ptx"))
        assert "ld.global.nc.v4.u32" in ptx and ("bar.sync" in ptx if kind == "bands" else "shfl.sync.bfly" in ptx)
        assert "ld.local" not in ptx  # the partial sums stay in registers


@pytest.mark.skipif(not compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype,groups,arch", [("float16", 4, 90), ("bfloat16", 8, 90), ("float64", 2, 80)])
def test_band_groups_build_offline(dtype, groups, arch, tmp_path):
    """The bands kernel with row groups (``band_groups``) compiles for CUDA without a GPU: the groups' shared
    exchange and barrier are in the source and PTX, the sums stay in registers, the 16-byte loads stay; a block the
    groups do not divide is refused."""
    import inspect

    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    spec = gemv.GemvSpec(dtype, dtype, "bands", "axpby", block_dim=gemv.BANDS_BLOCK, unroll=gemv.BANDS_UNROLL,
                         band_groups=groups)
    ks = gemv.kernels(spec, True)
    assert len(ks) == 2 and f"_g{groups}_b{gemv.BANDS_BLOCK}" in spec.kernel_key
    assert spec.cols == gemv.BANDS_BLOCK // groups * spec.chunk
    for k in ks:
        wp.compile_aot_module(k.module, arch=[arch], module_dir=str(tmp_path / "cubin"))
    src = "".join(p.read_text() for p in (tmp_path / "cubin").rglob("*.cu"))
    assert f"red[{groups} - 1]" in src and "if (grp > 0) return;" in src
    if "use_ptx" in inspect.signature(wp.compile_aot_module).parameters:
        for k in ks:
            wp.compile_aot_module(k.module, arch=[arch], module_dir=str(tmp_path / "ptx"), use_ptx=True)
        ptx = "".join(p.read_text(errors="replace") for p in (tmp_path / "ptx").rglob("*.ptx"))
        assert "ld.global.nc.v4.u32" in ptx and "bar.sync" in ptx and "ld.local" not in ptx
    with pytest.raises(ValueError, match="row groups"):
        gemv._snippet(dataclasses.replace(spec, block_dim=99))


@pytest.mark.skipif(not compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype,epilogue,arch,groups", [("float16", "axpby", 90, 1), ("float64", "scale", 80, 1),
                                                        ("float16", "scale", 90, 4)])
def test_fused_bands_build_offline(dtype, epilogue, arch, groups, tmp_path):
    """The fused bands kernel (partial sums, then the finish in the same launch; the default for one matrix) compiles
    for CUDA without a GPU, one kernel, and its PTX holds the arrival (a global atomic add after a device-wide fence and
    a block barrier), the wait (a volatile load, nanosleep on sm_70+), the partial sums read past L1 (ld.global.cg) and
    the 16-byte matrix loads; nothing spills to local memory."""
    import inspect

    spec = gemv.GemvSpec(dtype, dtype, "bands", epilogue, block_dim=gemv.BANDS_BLOCK, unroll=gemv.BANDS_UNROLL,
                         fused=True, band_groups=groups)
    ks = gemv.kernels(spec, True)
    assert len(ks) == 1 and "_fused" in spec.kernel_key and ("_g4_" in spec.kernel_key) == (groups == 4)
    wp.compile_aot_module(ks[0].module, arch=[arch], module_dir=str(tmp_path / "cubin"))
    src = "".join(p.read_text() for p in (tmp_path / "cubin").rglob("*.cu"))
    assert "atomicAdd(ctr, 1)" in src and "__threadfence()" in src and "__ldcg(" in src
    if "use_ptx" not in inspect.signature(wp.compile_aot_module).parameters:
        return
    wp.compile_aot_module(ks[0].module, arch=[arch], module_dir=str(tmp_path / "ptx"), use_ptx=True)
    ptx = "".join(p.read_text(errors="replace") for p in (tmp_path / "ptx").rglob("*.ptx"))
    assert "atom.global.add" in ptx and "membar.gl" in ptx and "ld.volatile.global" in ptx
    assert "nanosleep" in ptx and "ld.global.cg" in ptx and "ld.global.nc.v4.u32" in ptx and "bar.sync" in ptx
    assert "ld.local" not in ptx


# --- on a GPU (the lead's runs) ----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,trans_a,trans_b,dtype", [
    (1, 4096, 4096, False, True, "float16"),  # x @ W^T, W (N, K): F.linear's decode case
    (1, 4096, 4096, False, False, "float16"),  # bands: 64 bands of 64 rows (4 row groups)
    (1, 8191, 4099, False, False, "float16"),  # bands: rows not 16-byte aligned (scalar loads), ragged blocks
    (4097, 1, 3001, True, False, "bfloat16"),  # bands over A^T, a partial last band
    (1, 1000, 999, False, True, "float16"),
    (1, 1000, 999, False, False, "float16"),
    (4096, 1, 4096, False, False, "float16"),
    (1000, 1, 999, True, False, "float16"),
    (1, 1000, 999, True, True, "bfloat16"),
    (999, 1, 1000, False, False, "float32"),
    (1, 1000, 999, False, False, "float64"),
], ids=lambda v: str(v))
def test_gemv_gpu(M, N, K, trans_a, trans_b, dtype, rng, planned):
    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal((M, N)), dtype)
    A = make(np.ascontiguousarray(a.T) if trans_a else a, dtype, "warp", "cuda")
    B = make(np.ascontiguousarray(b.T) if trans_b else b, dtype, "warp", "cuda")
    for use_c in (False, True):  # the planner's own choice: both kinds are planned
        out = nan_like("warp", (M, N), dtype, "cuda")
        C = make(c, dtype, "warp", "cuda") if use_c else None
        warp_gemm.gemm(A, B, C, alpha=0.5, beta=2.0 if use_c else 0.0, trans_a=trans_a, trans_b=trans_b, out=out)
        wp.synchronize()
        ref = 0.5 * (a @ b) + (2.0 * c if use_c else 0.0)
        cmp = compare(to_f64(out), ref, dtype)
        assert cmp.ok, f"{M}x{N}x{K} {dtype} ta={trans_a} tb={trans_b} c={use_c}: {cmp}"
    assert {p.family for p in planned} == {"gemv"}


def _bands_on_cuda(M, N, K, batch, dtype, rng, with_c):
    """One call through the planner on CUDA per entry of ``with_c`` (whether it passes C, beta 2), fresh operands
    each, alpha 0.5, NaN-prefilled output, against float64; N == 1 takes A stored transposed (colsum's orientation).
    The bands' GPU tests (fused or not) share it; a repeated call reuses the planner's workspace and counters."""
    ta = N == 1
    for call, use_c in enumerate(with_c):
        a, b = random_operands(M, N, K, dtype, rng, batch=batch)
        c = round_to(rng.standard_normal((batch, M, N)), dtype)
        A = make(np.ascontiguousarray(np.swapaxes(a, 1, 2)) if ta else a, dtype, "warp", "cuda")
        B = make(b, dtype, "warp", "cuda")
        out = nan_like("warp", (batch, M, N), dtype, "cuda")
        C = make(c, dtype, "warp", "cuda") if use_c else None
        warp_gemm.gemm(A, B, C, alpha=0.5, beta=2.0 if use_c else 0.0, trans_a=ta, out=out)
        wp.synchronize()
        ref = 0.5 * np.matmul(a, b) + (2.0 * c if use_c else 0.0)
        cmp = compare(to_f64(out), ref, dtype)
        assert cmp.ok, f"call {call}: {batch}x{M}x{N}x{K} {dtype} c={use_c}: {cmp}"


@pytest.mark.gpu
@pytest.mark.parametrize("groups", [1, 4, 16], ids=lambda g: f"g{g}")
@pytest.mark.parametrize("M,N,K,batch,dtype", [
    (1, 4096, 4096, 1, "float16"),  # one group: 2 column blocks x 256 bands, 64 finishers each
    (1, 8191, 4099, 1, "float16"),  # rows not 16-byte aligned, a ragged last column block
    (1, 4096, 4096, 4, "bfloat16"),  # one group: 8 column blocks, 16 finishers each
    (4097, 1, 3001, 1, "float16"),  # bands over A^T (layout T), a partial last band
    (1, 4096, 64, 32, "float16"),  # one group: 64 column blocks of 8 bands, 2 finishers each
], ids=lambda v: str(v))
def test_fused_bands_gpu(M, N, K, batch, dtype, groups, rng, monkeypatch, planned):
    """The fused bands (the finish in the band launch: arrival counters, waiting finishers; round 14; with 1, 4 or 16
    row groups since round 17; the default for one matrix with 16 since round 18) through the planner on CUDA: correct
    against float64 with NaN-prefilled outputs, three calls in a row on the same counters (each launch must leave them
    zero), with and without C."""
    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    set_options(monkeypatch, gemv_fused=True)
    set_options(monkeypatch, gemv_band_groups=groups)
    _bands_on_cuda(M, N, K, batch, dtype, rng, (False, True, False))
    assert planned and all(p.family == "gemv" and p.family_spec.kind == "bands" and p.family_spec.fused and
                           p.family_spec.band_groups == groups for p in planned), [p.family_spec for p in planned]


@pytest.mark.gpu
@pytest.mark.parametrize("groups", [2, 4, 8], ids=lambda g: f"g{g}")
@pytest.mark.parametrize("M,N,K,batch,dtype", [
    (1, 4096, 4096, 1, "float16"),  # 4: 8 column blocks x 64 bands of 64 rows
    (1, 8191, 4099, 1, "float16"),  # rows not 16-byte aligned (scalar loads), a ragged last column block and band
    (1, 4096, 4096, 3, "bfloat16"),  # batch 3
    (4097, 1, 3001, 1, "float16"),  # bands over A^T (layout T), a partial last band
], ids=lambda v: str(v))
def test_band_groups_gpu(M, N, K, batch, dtype, groups, rng, monkeypatch, planned):
    """The bands with row groups (round 17; BANDS_GROUPS) through the planner on CUDA: correct against float64 with
    NaN-prefilled outputs, with and without C, the groups' shared exchange on the device."""
    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    set_options(monkeypatch, gemv_band_groups=groups)
    set_options(monkeypatch, gemv_fused=False)  # one matrix too: the two launches
    _bands_on_cuda(M, N, K, batch, dtype, rng, (False, True))
    assert planned and all(p.family == "gemv" and p.family_spec.kind == "bands" and p.family_spec.band_groups == groups
                           and not p.family_spec.fused for p in planned), [p.family_spec for p in planned]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,batch,dtype,fused", [
    (1, 4096, 4096, 1, "float16", True),  # one matrix: fused, 16 groups (32 column blocks x 16 bands, 4 finishers)
    (1, 8191, 4099, 1, "bfloat16", True),  # rows not 16-byte aligned, a ragged last column block and band
    (4097, 1, 3001, 1, "float16", True),  # bands over A^T (layout T)
    (1, 4096, 4096, 2, "float16", False),  # a batch: the two launches, 4 groups
    (1, 24576, 1024, 1, "float16", False),  # one matrix of 192 column blocks at 16 groups (H100): the two launches
], ids=lambda v: str(v))
def test_bands_defaults_gpu(M, N, K, batch, dtype, fused, rng, planned):
    """The planner's own bands choice (round 18: ``gemv.bands_choice``) on CUDA, nothing patched: fused with 16 row
    groups for one matrix of fewer column blocks than SMs, else the two launches with 4; correct against float64,
    NaN-prefilled, three calls in a row (the fused kernel must leave its counters zero), with and without C."""
    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    wide = -(-max(M, N) // 128) >= compat.sm_count(wp.get_device("cuda"))  # column blocks of 128 at 16 groups
    if batch == 1 and wide == fused:
        pytest.skip("this GPU's SM count puts the shape on the other side of the rule")
    _bands_on_cuda(M, N, K, batch, dtype, rng, (False, True, False))
    want = (True, gemv.BANDS_FUSED_GROUPS) if fused else (False, gemv.BANDS_GROUPS)
    assert planned and all(p.family == "gemv" and p.family_spec.kind == "bands" and
                           (p.family_spec.fused, p.family_spec.band_groups) == want for p in planned), planned


def test_precompile_lists_the_gemv_family():
    """`warp-gemm precompile` builds both GEMV kinds per dtype and epilogue, whole-K and split (tf32: the
    exact float32 kernels, which the planner uses for tf32 calls)."""
    from warp_gemm.families.gemv.rules import precompile_jobs as gemv_jobs
    from warp_gemm.tools.precompile import job_label

    jobs = gemv_jobs(["float16", "tf32"], ("scale", "axpby"))
    # per dtype and epilogue: rowdot whole-K and split; colsum whole-K at 512 and 1024 threads, split at 512;
    # bands (always split), fused and not
    assert len(jobs) == 2 * 2 * 7
    assert {(j[1].in_dtype, j[1].kind, j[1].epilogue, j[2]) for j in jobs} == {
        (dt, kind, epi, part) for dt in ("float16", "float32") for kind in gemv.KINDS
        for epi in ("scale", "axpby") for part in (False, True) if kind != "bands" or part}
    assert {(j[1].block_dim, j[1].unroll) for j in jobs if j[1].kind == "bands"} == {(256, 8)}
    # what choose_spec plans: fused with 16 row groups for one matrix, the two kernels with 4 for batches
    assert {(j[1].fused, j[1].band_groups) for j in jobs if j[1].kind == "bands"} == {(True, 16), (False, 4)}
    assert {(j[1].block_dim, j[2]) for j in jobs if j[1].kind == "colsum"} == {(512, False), (1024, False), (512, True)}
    assert all(job_label(j).startswith("wg_gemv_") for j in jobs)


@pytest.mark.skipif(not compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
def test_precompile_builds_a_gemv_kernel_offline(tmp_path):
    from warp_gemm.families.gemv.rules import precompile_jobs as gemv_jobs
    from warp_gemm.tools.precompile import build_one

    job = next(j for j in gemv_jobs(["float16"]) if j[1].kind == "colsum" and j[2])  # with the finishing pass
    _, _, err = build_one(job, [90], str(tmp_path))
    assert err == "", err
    cubins = [p.name for p in tmp_path.rglob("*.cubin") if "sm90" in p.name]
    assert any("wg_gemv_colsum" in n for n in cubins) and any("wg_skinny_finish" in n for n in cubins), cubins
