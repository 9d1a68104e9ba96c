"""The host BLAS family (warp_gemm/families/host/): the CPU default path.

Every output is pre-filled with NaN (an element the path never wrote fails), inputs are fresh random
draws rounded to the tested dtype, and results are compared with float64 references under the
tolerance model. bfloat16 goes through uint16 bit arrays, as the callers hand it over.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from warp_gemm.families import host

try:
    from warp_gemm.tools.tolerance import compare, f64_to_bf16_bits, random_operands, round_to
except ImportError:  # before the tools/ move
    from warp_gemm.tolerance import compare, f64_to_bf16_bits, random_operands, round_to

try:
    import torch
except ImportError:
    torch = None

DTYPES = ["float16", "bfloat16", "float32", "float64"]
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# --- containers --------------------------------------------------------------------------------------
def np_of(x64: np.ndarray, dtype: str) -> np.ndarray:
    """A NumPy array of ``dtype`` holding ``x64`` (bfloat16: its uint16 bits)."""
    if dtype == "bfloat16":
        return f64_to_bf16_bits(x64)
    return np.ascontiguousarray(x64.astype(dtype))


def f64_of(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (np.ascontiguousarray(x).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def nan_out(shape, dtype: str) -> np.ndarray:
    return np_of(np.full(shape, np.nan), dtype)


def check(out, ref, dtype):
    res = compare(out, ref, dtype)
    assert res.ok, str(res)


def rand_c(rng, shape, dtype):
    return round_to(rng.standard_normal(shape), dtype)


# --- bfloat16 bits -----------------------------------------------------------------------------------
def test_bf16_bits_round_trip_all_patterns():
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    f = host.bf16_bits_to_f32(bits)
    assert f.dtype == np.float32
    back = host.f32_to_bf16_bits(f)
    nan = np.isnan(f)
    assert np.array_equal(back[~nan], bits[~nan])  # every bf16 value is exact in float32 and back
    assert np.isnan(host.bf16_bits_to_f32(back[nan])).all()  # NaN stays NaN
    # sign of NaN kept
    assert np.array_equal(back[nan] >> 15, bits[nan] >> 15)


def test_f32_to_bf16_rounds_to_nearest_even(rng):
    x = rng.standard_normal(100_000).astype(np.float32) * np.float32(1e3)
    # exact ties: bf16 value + half an ulp, both even and odd lower bits
    base = (rng.integers(0, 0x7F7F, 1000).astype(np.uint32) << 16) | 0x8000  # finite, below the largest
    ties = base.view(np.float32)
    vals = np.concatenate([x, ties, np.array([3.4e38, -3.4e38, np.inf, -np.inf, 0.0, -0.0, 1e-45],
                                             dtype=np.float32)])
    got = host.f32_to_bf16_bits(vals)
    assert got.dtype == np.uint16 and got.shape == vals.shape
    assert np.array_equal(got, f64_to_bf16_bits(vals.astype(np.float64)))
    # ties go to the even neighbour
    t = host.f32_to_bf16_bits(ties)
    assert (t & 1 == 0).all()
    assert host.f32_to_bf16_bits(np.float32(3.4e38)) == 0x7F80  # overflow rounds to inf


def test_bf16_bits_keep_layout():
    u = np.arange(12, dtype=np.uint16).reshape(3, 4).T  # Fortran-ordered view
    f = host.bf16_bits_to_f32(u)
    assert f.shape == (4, 3) and f.flags.f_contiguous
    assert np.array_equal(host.f32_to_bf16_bits(f), u)


# --- run_numpy -----------------------------------------------------------------------------------------
SHAPES = [(1, 1, 1), (7, 13, 97), (70, 45, 33), (129, 65, 257), (33, 1, 17), (1, 40, 9)]
LAYOUTS = ["NN", "TN", "NT", "TT"]


def operands(a64, b64, dtype, layout):
    """op(A), op(B) as NumPy views: "T" stores the transpose and hands over its ``.T`` view."""
    A = np_of(a64, dtype) if layout[0] == "N" else np_of(np.swapaxes(a64, -1, -2), dtype).swapaxes(-1, -2)
    B = np_of(b64, dtype) if layout[1] == "N" else np_of(np.swapaxes(b64, -1, -2), dtype).swapaxes(-1, -2)
    return A, B


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_numpy_odd_shapes_layouts(shape, layout, dtype, rng):
    M, N, K = shape
    a, b = random_operands(M, N, K, dtype, rng)
    A, B = operands(a, b, dtype, layout)
    D = nan_out((M, N), dtype)
    assert host.run_numpy(A, B, None, D, 1.0, 0.0, dtype, dtype) is D
    check(f64_of(D, dtype), a @ b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batches", [(1, 3), (3, 1), (3, 3), (3, None), (None, 3)], ids=str)
def test_numpy_batch_broadcast(batches, dtype, rng):
    M, N, K = 19, 23, 41
    ba, bb = batches
    a = random_operands(M, 1, K, dtype, rng, batch=ba or 0)[0]
    b = random_operands(1, N, K, dtype, rng, batch=bb or 0)[1]
    nb = max(ba or 1, bb or 1)
    A, B = np_of(a, dtype), np_of(b, dtype)
    D = nan_out((nb, M, N), dtype)
    host.run_numpy(A, B, None, D, 1.0, 0.0, dtype, dtype)
    check(f64_of(D, dtype), np.broadcast_to(a @ b, (nb, M, N)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", ["3d", "2d"])
def test_numpy_single_batch_product_into_batched_output(dims, dtype, rng):
    """A product with batch 1 (or none) written into a (3, M, N) output: every batch gets it."""
    M, N, K = 11, 14, 23
    a, b = random_operands(M, N, K, dtype, rng, batch=1 if dims == "3d" else 0)
    D = nan_out((3, M, N), dtype)
    host.run_numpy(np_of(a, dtype), np_of(b, dtype), None, D, 0.5, 0.0, dtype, dtype)
    check(f64_of(D, dtype), np.broadcast_to(0.5 * (a @ b), (3, M, N)), dtype)
    if torch is not None:
        Dt = t_nan((3, M, N), dtype)
        host.run_torch(t_of(a, dtype), t_of(b, dtype), None, Dt, 0.5, 0.0)
        check(t_f64(Dt), np.broadcast_to(0.5 * (a @ b), (3, M, N)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c_shape", ["full", "bias", "column", "batch1"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (-3.0, 0.25)])
def test_numpy_alpha_beta_c(alpha, beta, c_shape, dtype, rng):
    M, N, K, nb = 37, 29, 65, 2
    a, b = random_operands(M, N, K, dtype, rng, batch=nb)
    shape = {"full": (nb, M, N), "bias": (N,), "column": (M, 1), "batch1": (1, M, N)}[c_shape]
    c = rand_c(rng, shape, dtype)
    D = nan_out((nb, M, N), dtype)
    host.run_numpy(np_of(a, dtype), np_of(b, dtype), np_of(c, dtype), D, alpha, beta, dtype, dtype)
    check(f64_of(D, dtype), alpha * (a @ b) + beta * c, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_beta_zero_does_not_read_c(dtype, rng):
    M, N, K = 21, 34, 55
    a, b = random_operands(M, N, K, dtype, rng)
    C = nan_out((M, N), dtype)
    for alpha in (1.0, 2.5):
        D = nan_out((M, N), dtype)
        host.run_numpy(np_of(a, dtype), np_of(b, dtype), C, D, alpha, 0.0, dtype, dtype)
        check(f64_of(D, dtype), alpha * (a @ b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_alpha_zero_skips_the_product(dtype, rng):
    M, N, K = 16, 9, 31
    a, b = random_operands(M, N, K, dtype, rng)
    a[3, 4] = np.nan  # not read when alpha == 0 (BLAS)
    c = rand_c(rng, (M, N), dtype)
    D = nan_out((M, N), dtype)
    host.run_numpy(np_of(a, dtype), np_of(b, dtype), np_of(c, dtype), D, 0.0, -1.5, dtype, dtype)
    check(f64_of(D, dtype), -1.5 * c, dtype)
    D = nan_out((M, N), dtype)
    host.run_numpy(np_of(a, dtype), np_of(b, dtype), None, D, 0.0, 0.0, dtype, dtype)
    assert (f64_of(D, dtype) == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_k_zero(dtype, rng):
    M, N = 12, 7
    A, B = np_of(np.zeros((M, 0)), dtype), np_of(np.zeros((0, N)), dtype)
    D = nan_out((M, N), dtype)
    host.run_numpy(A, B, None, D, 1.0, 0.0, dtype, dtype)
    assert (f64_of(D, dtype) == 0).all()
    c = rand_c(rng, (N,), dtype)
    D = nan_out((M, N), dtype)
    host.run_numpy(A, B, np_of(c, dtype), D, 2.0, 0.5, dtype, dtype)
    check(f64_of(D, dtype), np.broadcast_to(0.5 * c, (M, N)), dtype)
    D = nan_out((M, N), dtype)
    host.run_numpy(A, B, nan_out((M, N), dtype), D, 2.0, 0.0, dtype, dtype)
    assert (f64_of(D, dtype) == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_empty_result(dtype):
    D = nan_out((0, 5), dtype)
    host.run_numpy(np_of(np.ones((0, 3)), dtype), np_of(np.ones((3, 5)), dtype), None, D, 1.0, 0.0)
    assert D.shape == (0, 5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("view", ["transposed", "strided_cols", "padded_rows"])
def test_numpy_writes_through_output_views(view, dtype, rng):
    """D is a view into a larger NaN buffer: the result lands in the view, nothing else is touched."""
    M, N, K = 33, 18, 47
    a, b = random_operands(M, N, K, dtype, rng)
    if view == "transposed":
        buf = nan_out((N, M), dtype)
        D = buf.T
    elif view == "strided_cols":
        buf = nan_out((M, 2 * N), dtype)
        D = buf[:, ::2]
    else:
        buf = nan_out((M, N + 5), dtype)
        D = buf[:, :N]
    c = rand_c(rng, (M, N), dtype)
    host.run_numpy(np_of(a, dtype), np_of(b, dtype), np_of(c, dtype), D, 1.5, 0.5, dtype, dtype)
    check(f64_of(D, dtype), 1.5 * (a @ b) + 0.5 * c, dtype)
    untouched = np.ones(buf.shape, bool)
    if view == "transposed":
        untouched[:] = False
    elif view == "strided_cols":
        untouched[:, ::2] = False
    else:
        untouched[:, :N] = False
    assert np.isnan(f64_of(buf, dtype)[untouched]).all()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_numpy_non_blas_strided_inputs(dtype, rng):
    """Operands with a non-unit stride in both dimensions (BLAS cannot take them) are still right."""
    M, N, K = 31, 26, 43
    a, b = random_operands(2 * M, 3 * N, 2 * K, dtype, rng)
    A, B = np_of(a, dtype)[::2, ::2], np_of(b, dtype)[::2, ::3]
    assert not host._blas_ready(A) or dtype != "float32"
    D = nan_out((M, N), dtype)
    host.run_numpy(A, B, None, D, 1.0, 0.0, dtype, dtype)
    check(f64_of(D, dtype), a[::2, ::2] @ b[::2, ::3], dtype)


@pytest.mark.parametrize("in_dtype", ["float16", "bfloat16"])
def test_numpy_16bit_in_float32_out(in_dtype, rng):
    M, N, K = 45, 38, 129
    a, b = random_operands(M, N, K, in_dtype, rng)
    c = rand_c(rng, (M, N), "float32")
    D = nan_out((M, N), "float32")
    host.run_numpy(np_of(a, in_dtype), np_of(b, in_dtype), c.astype(np.float32), D, 2.0, -1.0, in_dtype, "float32")
    check(D, 2.0 * (a @ b) - c, "float32")


def test_numpy_16bit_accumulates_in_float32(rng):
    """K = 4096 in float16: float16 accumulation would give ~u*sqrt(K) = 3e-2 relative error."""
    M, N, K = 8, 8, 4096
    a, b = random_operands(M, N, K, "float16", rng)
    D = nan_out((M, N), "float16")
    host.run_numpy(np_of(a, "float16"), np_of(b, "float16"), None, D, 1.0, 0.0)
    check(D, a @ b, "float16")


def test_numpy_dtypes_inferred(rng):
    a, b = random_operands(10, 11, 12, "bfloat16", rng)
    D = nan_out((10, 11), "bfloat16")
    host.run_numpy(np_of(a, "bfloat16"), np_of(b, "bfloat16"), None, D)
    check(f64_of(D, "bfloat16"), a @ b, "bfloat16")


def test_numpy_float32_fast_path_makes_no_temporary(rng):
    """float32 into a C-contiguous D with alpha 1, beta 0: one matmul into D, no result-sized temporary."""
    n = 256
    A = rng.standard_normal((n, n)).astype(np.float32)
    B = rng.standard_normal((n, n)).astype(np.float32)
    D = np.full((n, n), np.nan, np.float32)
    host.run_numpy(A, B, None, D, 1.0, 0.0)  # warm-up
    tracemalloc.start()
    try:
        host.run_numpy(A, B, None, D, 1.0, 0.0, "float32", "float32")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < D.nbytes // 4, peak
    check(D, A.astype(np.float64) @ B.astype(np.float64), "float32")


def test_numpy_writes_a_wp_array_in_place(rng):
    wp = pytest.importorskip("warp")
    M, N, K = 40, 30, 50
    a, b = random_operands(M, N, K, "float32", rng)
    out = wp.array(np.full((M, N), np.nan, np.float32), dtype=wp.float32, device="cpu")
    host.run_numpy(a.astype(np.float32), b.astype(np.float32), None, out.numpy(), 1.0, 0.0)
    check(out.numpy(), a @ b, "float32")


def test_numpy_counts_calls(rng):
    before = host.calls["numpy"]
    host.run_numpy(np.ones((2, 2)), np.ones((2, 2)), None, np.empty((2, 2)))
    assert host.calls["numpy"] == before + 1


# --- run_torch --------------------------------------------------------------------------------------------
TORCH_DT = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64"}


def t_of(x64, dtype):
    return torch.tensor(np.asarray(x64, np.float64)).to(getattr(torch, TORCH_DT[dtype]))


def t_nan(shape, dtype):
    return torch.full(shape, float("nan"), dtype=getattr(torch, TORCH_DT[dtype]))


def t_f64(t):
    return t.to(torch.float64).numpy()


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(70, 45, 33), (1, 17, 5), (129, 65, 257)], ids=lambda s: "x".join(map(str, s)))
def test_torch_odd_shapes_layouts(shape, layout, dtype, rng):
    M, N, K = shape
    a, b = random_operands(M, N, K, dtype, rng)
    A = t_of(a, dtype) if layout[0] == "N" else t_of(a.T, dtype).T
    B = t_of(b, dtype) if layout[1] == "N" else t_of(b.T, dtype).T
    D = t_nan((M, N), dtype)
    assert host.run_torch(A, B, None, D, 1.0, 0.0) is D
    check(t_f64(D), a @ b, dtype)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (2.0, 0.0)])
def test_torch_alpha_beta_c(alpha, beta, batched, dtype, rng):
    M, N, K = 37, 29, 65
    nb = 3 if batched else 0
    a, b = random_operands(M, N, K, dtype, rng, batch=nb)
    if batched:
        b = b[:1]  # batch 1 broadcasts
    shape = (nb, M, N) if batched else (M, N)
    c = rand_c(rng, (N,), dtype)
    C = t_of(c, dtype)
    if beta == 0.0:
        C = t_nan((M, N), dtype)  # not read
    D = t_nan(shape, dtype)
    host.run_torch(t_of(a, dtype), t_of(b, dtype), C, D, alpha, beta)
    ref = alpha * (a @ b) + (beta * c if beta else 0.0)
    check(t_f64(D), np.broadcast_to(ref, shape), dtype)


@needs_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_k_zero_alpha_zero_and_views(dtype, rng):
    M, N = 14, 9
    D = t_nan((M, N), dtype)
    c = rand_c(rng, (M, N), dtype)
    host.run_torch(t_of(np.zeros((M, 0)), dtype), t_of(np.zeros((0, N)), dtype), t_of(c, dtype), D, 1.0, 3.0)
    check(t_f64(D), 3.0 * c, dtype)
    a, b = random_operands(M, N, 20, dtype, rng)
    a[0, 0] = np.nan
    D = t_nan((M, N), dtype)
    host.run_torch(t_of(a, dtype), t_of(b, dtype), None, D, 0.0, 0.0)
    assert (t_f64(D) == 0).all()
    # a transposed output view
    a[0, 0] = 0.5
    buf = t_nan((N, M), dtype)
    host.run_torch(t_of(a, dtype), t_of(b, dtype), t_of(c, dtype), buf.T, 2.0, 1.0)
    check(t_f64(buf.T), 2.0 * (a @ b) + c, dtype)


@needs_torch
def test_torch_ignores_requires_grad(rng):
    a, b = random_operands(8, 6, 5, "float32", rng)
    A = t_of(a, "float32").requires_grad_()
    D = t_nan((8, 6), "float32")
    host.run_torch(A, t_of(b, "float32"), None, D, 1.0, 0.0)
    check(t_f64(D), a @ b, "float32")


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_torch_16bit_accumulates_in_float32(dtype, alpha, rng):
    """K = 4096: a 16-bit accumulation would miss the bound by ~10x (fp16 u*sqrt(K) = 3e-2)."""
    M, N, K = 16, 24, 4096
    a, b = random_operands(M, N, K, dtype, rng)
    D = t_nan((M, N), dtype)
    host.run_torch(t_of(a, dtype), t_of(b, dtype), None, D, alpha, 0.0)
    check(t_f64(D), alpha * (a @ b), dtype)


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_16bit_widened_where_onednn_lacks_it(dtype, rng, monkeypatch):
    """The widened path (CPUs without a native 16-bit GEMM) gives the same bound."""
    monkeypatch.setitem(host._onednn, getattr(torch, dtype), False)
    M, N, K = 16, 24, 4096
    a, b = random_operands(M, N, K, dtype, rng)
    D = t_nan((M, N), dtype)
    host.run_torch(t_of(a, dtype), t_of(b, dtype), None, D, 1.0, 0.0)
    check(t_f64(D), a @ b, dtype)
