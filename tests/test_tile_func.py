"""``warp_gemm.tile_gemm_func`` inside user kernels, on the CPU: odd shapes (edges zero-filled), a user
epilogue (``tile_map`` of a user ``wp.func``) and the user's own ``tile_store``, every dtype, against
float64 references, NaN-prefilled outputs. CUDA runs the same tests (``gpu`` marker)."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import functools

import numpy as np
import pytest
import warp as wp

import warp_gemm._compat as compat
from warp_gemm.tile import tile_gemm_func

try:
    from warp_gemm.tools.tolerance import compare, f64_to_bf16_bits, random_operands
except ImportError:  # before the tools/ move
    from warp_gemm.tolerance import compare, f64_to_bf16_bits, random_operands

compat.init()
HAS_CUDA = wp.get_cuda_device_count() > 0
DEVICES = ([pytest.param("cpu", id="cpu")] if compat.HAS_CPU_TILES else []) + [
    pytest.param("cuda", id="cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="no CUDA")])
]
pytestmark = pytest.mark.skipif(not compat.SUPPORTED, reason="warp_gemm needs warp-lang >= 1.7")


def _dtype_params():
    out = []
    for dt in ("float16", "bfloat16", "float32", "float64"):
        marks = []
        if dt in ("float16", "bfloat16") and not compat.HAS_TILE_ASTYPE:
            marks.append(pytest.mark.skip(reason="16-bit tiles accumulate in 16 bit before warp-lang 1.8"))
        if dt == "bfloat16" and not compat.HAS_BF16:
            marks.append(pytest.mark.skip(reason="wp.bfloat16 needs warp-lang >= 1.13"))
        out.append(pytest.param(dt, id=dt, marks=marks))
    return out


DTYPES = _dtype_params()


def wp_dtype(name):
    return getattr(wp, name)


def acc_name(dt):
    return "float64" if dt == "float64" else "float32"


_KEEP = []


def to_wp(x64, dt, device):
    if dt == "bfloat16":
        bits = wp.array(f64_to_bf16_bits(x64), dtype=wp.uint16, device=device)
        _KEEP.append(bits)  # the bfloat16 view below does not own its memory
        return wp.array(ptr=bits.ptr, dtype=wp.bfloat16, shape=bits.shape, strides=bits.strides,
                        capacity=bits.size * 2, device=bits.device)
    return wp.array(np.ascontiguousarray(x64.astype(dt)), dtype=wp_dtype(dt), device=device)


def make_kernel(func, forward_only):
    """A user's kernel in a module of its own; bfloat16 tiles need a module without backward code."""
    if forward_only and compat.HAS_MODULE_OPTIONS_KW:
        return wp.kernel(func, module="unique", module_options={"enable_backward": False})
    k = wp.kernel(func, module="unique") if compat.HAS_UNIQUE_MODULE else wp.kernel(func)
    if forward_only:
        k.module.options.update({"enable_backward": False})
    return k


def _leaky_func(acc_dt):
    ACC = wp_dtype(acc_dt)

    def leaky(x: ACC):
        # the user's activation: leaky ReLU with slope 1/8 (exact in every dtype)
        if x > ACC(0.0):
            return x
        return x * ACC(0.125)

    leaky.__name__ = leaky.__qualname__ = f"user_leaky_{acc_dt}"
    return wp.func(leaky, name=f"user_leaky_{acc_dt}")


@functools.cache
def layer_kernel(tm, tn, tk, dt):
    """GEMM + the user's leaky ReLU + the user's store, in the accumulator dtype."""
    mma = tile_gemm_func(tm, tn, tk, dt)
    IN, OUT = wp_dtype(dt), wp_dtype(acc_name(dt))
    act = _leaky_func(acc_name(dt))
    TM, TN = tm, tn

    def layer(A: wp.array2d(dtype=IN), B: wp.array2d(dtype=IN), C: wp.array2d(dtype=OUT)):
        i, j = wp.tid()
        acc = mma(A, B, i * TM, j * TN)
        wp.tile_store(C, wp.tile_map(act, acc), offset=(i * TM, j * TN))

    layer.__name__ = layer.__qualname__ = f"user_layer_{dt}_{tm}x{tn}x{tk}"
    return make_kernel(layer, forward_only=dt == "bfloat16")


@functools.cache
def plain_kernel(tm, tn, tk, dt):
    """GEMM and a store converted back to the input dtype (``tile_astype``), no activation."""
    mma = tile_gemm_func(tm, tn, tk, wp_dtype(dt))
    IN = wp_dtype(dt)
    TM, TN = tm, tn

    def plain(A: wp.array2d(dtype=IN), B: wp.array2d(dtype=IN), C: wp.array2d(dtype=IN)):
        i, j = wp.tid()
        acc = mma(A, B, i * TM, j * TN)
        if wp.static(IN == wp.float32 or IN == wp.float64):
            wp.tile_store(C, acc, offset=(i * TM, j * TN))
        else:
            wp.tile_store(C, wp.tile_astype(acc, IN), offset=(i * TM, j * TN))

    plain.__name__ = plain.__qualname__ = f"user_plain_{dt}_{tm}x{tn}x{tk}"
    return make_kernel(plain, forward_only=dt == "bfloat16")


def grid(M, N, tm, tn):
    return (max(1, -(-M // tm)), max(1, -(-N // tn)))


def leaky_ref(x):
    return np.where(x > 0, x, 0.125 * x)


SHAPES = [
    # (M, N, K), (tm, tn, tk)
    ((70, 45, 33), (32, 32, 16)),  # every edge partial, K not a tile multiple
    ((64, 64, 64), (32, 32, 16)),  # tile multiples
    ((1, 1, 1), (16, 16, 8)),
    ((37, 100, 129), (16, 32, 32)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,tiles", SHAPES, ids=lambda v: "x".join(map(str, v)))
def test_fused_layer(shape, tiles, dtype, device, rng):
    M, N, K = shape
    tm, tn, tk = tiles
    a, b = random_operands(M, N, K, dtype, rng)
    out = wp.array(np.full((M, N), np.nan), dtype=wp_dtype(acc_name(dtype)), device=device)
    wp.launch_tiled(layer_kernel(tm, tn, tk, dtype), dim=grid(M, N, tm, tn),
                    inputs=[to_wp(a, dtype, device), to_wp(b, dtype, device), out], block_dim=64, device=device)
    res = compare(out.numpy(), leaky_ref(a @ b), acc_name(dtype))
    assert res.ok, str(res)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_store_in_input_dtype(dtype, device, request, rng):
    if device == "cuda" and dtype == "bfloat16":
        # H100, warp-lang 1.19.0 (2026-11-22): 495 of the 45x70 outputs were left unwritten (the NaN
        # prefill); float16/float32/float64 and bfloat16 stored as float32 (test_fused_layer) were right.
        request.applymarker(pytest.mark.xfail(strict=True, reason="a tile_astype'd bfloat16 tile stored "
                                              "into a bfloat16 array on CUDA (not diagnosed)"))
    M, N, K = 45, 70, 97
    a, b = random_operands(M, N, K, dtype, rng)
    out = to_wp(np.full((M, N), np.nan), dtype, device)
    wp.launch_tiled(plain_kernel(32, 16, 32, dtype), dim=grid(M, N, 32, 16),
                    inputs=[to_wp(a, dtype, device), to_wp(b, dtype, device), out], block_dim=32, device=device)
    got = out.numpy()
    if dtype == "bfloat16":
        got = (got.astype(np.uint32) << 16).view(np.float32)
    res = compare(got, a @ b, dtype)
    assert res.ok, str(res)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("block_dim", [1, 16, 32, 128])
def test_any_block_dim(block_dim, device, rng):
    # On CUDA cuBLASDx builds the GEMM for whole warps only: a one-thread block failed on the H100
    # ("Failed to compile LTO 'dot_32_32_16_90_1_...'"); tile_gemm_func's docs ask for multiples of 32.
    if device == "cuda" and block_dim % 32:
        pytest.skip("CUDA: block_dim must be a multiple of 32 (documented)")
    M, N, K = 50, 35, 40
    a, b = random_operands(M, N, K, "float32", rng)
    out = wp.array(np.full((M, N), np.nan), dtype=wp.float32, device=device)
    wp.launch_tiled(layer_kernel(32, 32, 16, "float32"), dim=grid(M, N, 32, 32),
                    inputs=[to_wp(a, "float32", device), to_wp(b, "float32", device), out],
                    block_dim=block_dim, device=device)
    res = compare(out.numpy(), leaky_ref(a @ b), "float32")
    assert res.ok, str(res)


@pytest.mark.parametrize("device", DEVICES)
def test_tile_inside_a_larger_output(device, rng):
    """Only the launched tiles are written: a 2x1 grid over a 3-tile-tall output leaves the rest NaN."""
    M, N, K = 96, 32, 20
    a, b = random_operands(M, N, K, "float32", rng)
    out = wp.array(np.full((M, N), np.nan), dtype=wp.float32, device=device)
    wp.launch_tiled(layer_kernel(32, 32, 16, "float32"), dim=(2, 1),
                    inputs=[to_wp(a, "float32", device), to_wp(b, "float32", device), out], block_dim=32,
                    device=device)
    got = out.numpy()
    res = compare(got[:64], leaky_ref(a @ b)[:64], "float32")
    assert res.ok, str(res)
    assert np.isnan(got[64:]).all()


def test_memoized_and_dtype_spellings():
    f = tile_gemm_func(32, 32, 16, wp.float32)
    assert tile_gemm_func(32, 32, 16, "float32") is f
    assert tile_gemm_func(32, 32, 16, float) is f
    assert tile_gemm_func(32, 32, 16, "fp32", acc_dtype=wp.float32) is f
    assert tile_gemm_func(32, 32, 8, wp.float32) is not f


@pytest.mark.parametrize("args,exc", [
    ((0, 32, 16, wp.float32), ValueError),
    ((32, 32, 16.0, wp.float32), ValueError),
    ((32, 32, 16, wp.int32), TypeError),
    ((32, 32, 16, "float8"), TypeError),
])
def test_bad_arguments(args, exc):
    with pytest.raises(exc):
        tile_gemm_func(*args)


def test_acc_dtype_must_match():
    with pytest.raises(ValueError, match="accumulate in float32"):
        tile_gemm_func(32, 32, 16, wp.float32, acc_dtype=wp.float64)
    with pytest.raises(ValueError, match="accumulate in float64"):
        tile_gemm_func(32, 32, 16, wp.float64, acc_dtype="float32")


@pytest.mark.skipif(compat.HAS_TILE_ASTYPE, reason="only releases that accumulate 16-bit tiles in 16 bit")
def test_16bit_refused_where_tiles_would_accumulate_in_16bit():
    with pytest.raises(compat.UnsupportedWarpError, match="1.8"):
        tile_gemm_func(32, 32, 16, wp.float16)


@functools.cache
def two_gemm_kernel(dt):
    """Two calls in one kernel: A1 @ B1 + A2 @ B2 (different K), one store."""
    mma = tile_gemm_func(32, 16, 16, dt)
    IN, OUT = wp_dtype(dt), wp_dtype(acc_name(dt))

    def two(A1: wp.array2d(dtype=IN), B1: wp.array2d(dtype=IN), A2: wp.array2d(dtype=IN),
            B2: wp.array2d(dtype=IN), C: wp.array2d(dtype=OUT)):
        i, j = wp.tid()
        s = wp.tile_map(wp.add, mma(A1, B1, i * 32, j * 16), mma(A2, B2, i * 32, j * 16))
        wp.tile_store(C, s, offset=(i * 32, j * 16))

    two.__name__ = two.__qualname__ = f"user_two_gemms_{dt}"
    return make_kernel(two, forward_only=dt == "bfloat16")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_calls_in_one_kernel(dtype, device, rng):
    M, N, K1, K2 = 41, 37, 19, 50
    a1, b1 = random_operands(M, N, K1, dtype, rng)
    a2, b2 = random_operands(M, N, K2, dtype, rng)
    out = wp.array(np.full((M, N), np.nan), dtype=wp_dtype(acc_name(dtype)), device=device)
    wp.launch_tiled(two_gemm_kernel(dtype), dim=grid(M, N, 32, 16),
                    inputs=[to_wp(x, dtype, device) for x in (a1, b1, a2, b2)] + [out], block_dim=64, device=device)
    res = compare(out.numpy(), a1 @ b1 + a2 @ b2, acc_name(dtype))
    assert res.ok, str(res)
