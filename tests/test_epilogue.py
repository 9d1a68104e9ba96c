"""kernels/epilogue.py: every activation and its derivative as a Warp function inside ``wp.tile_map`` on
float32 and float64 tiles (the fused-epilogue use) and in the elementwise kernels, against the float64
references; the references against torch's own activations and autograd."""

# No `from __future__ import annotations`: Warp reads the test kernel's annotations as objects.

import numpy as np
import pytest
import warp as wp

import warp_gemm._compat as compat
from warp_gemm.families.common import epilogue as E

pytestmark = pytest.mark.skipif(not compat.HAS_CPU_TILES, reason="CPU tile kernels need warp-lang >= 1.7")

ACTS = [None, *E.ACTIVATIONS]
TM, TN = 4, 8
_tile_kernels = {}


def tile_map_kernel(fn, dtype, tag=""):
    """A one-tile kernel applying ``fn`` with ``wp.tile_map`` (as a GEMM epilogue does to its accumulator)."""
    key = (fn.key, dtype, tag)
    if key not in _tile_kernels:
        T = dtype

        def k(src: wp.array2d(dtype=T), dst: wp.array2d(dtype=T)):
            t = wp.tile_load(src, shape=(TM, TN), offset=(0, 0))
            wp.tile_store(dst, wp.tile_map(fn, t), offset=(0, 0))

        name = fn.key.rsplit(".", 1)[-1]
        _tile_kernels[key] = compat.make_kernel(k, f"test_epi_{name}_{dtype.__name__}{tag}")
    return _tile_kernels[key]


def draws(rng, shape, dtype):
    z = rng.standard_normal(shape) * 3
    z.flat[:4] = [0.0, -30.0, 30.0, -1e-3]  # the kink, saturation both ways, a tiny negative
    return z.astype(dtype)


def rel_err(got, want):
    return float(np.max(np.abs(got - want) / (1 + np.abs(want))))


TOL = {np.float64: 1e-14, np.float32: 4e-7 * 4, np.float16: 2e-3}


def run_tile_map(fn, wdt, z, tag=""):
    src = wp.array(z, dtype=wdt, device="cpu")
    dst = wp.full(z.shape, np.nan, dtype=wdt, device="cpu")
    wp.launch_tiled(tile_map_kernel(fn, wdt, tag), dim=[1], inputs=[src, dst], block_dim=32, device="cpu")
    return dst.numpy()


@pytest.mark.parametrize("which", ["forward", "derivative"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("act", ACTS, ids=str)
def test_tile_map_matches_reference(act, dtype, which, rng):
    wdt = wp.float64 if dtype == np.float64 else wp.float32
    fn = E.activation_func(act, wdt) if which == "forward" else E.activation_grad_func(act, wdt)
    ref = E.reference if which == "forward" else E.reference_grad
    z = draws(rng, (TM, TN), dtype)
    out = run_tile_map(fn, wdt, z)
    assert out.dtype == dtype
    assert rel_err(out, ref(act, z.astype(np.float64))) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_erf_fallback_for_warp_without_erf(dtype, rng, monkeypatch):
    """The erf written for Warp releases without ``wp.erf`` (1.7), built and checked on any release:
    gelu and its derivative through it, over the series (|x| < 2.5 sqrt 2) and continued-fraction ranges."""
    monkeypatch.setattr(E, "HAS_ERF", False)
    wdt = wp.float64 if dtype == np.float64 else wp.float32
    fwd, grad = E._build(wdt)
    z = np.concatenate([draws(rng, (16,), dtype), np.linspace(-9, 9, 16)]).astype(dtype).reshape(TM, TN)
    z64 = z.astype(np.float64)
    assert rel_err(run_tile_map(fwd["gelu"], wdt, z, "_fb"), E.reference("gelu", z64)) <= TOL[dtype]
    assert rel_err(run_tile_map(grad["gelu"], wdt, z, "_fb"), E.reference_grad("gelu", z64)) <= TOL[dtype]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_generic_functions_in_tile_map(act, dtype, rng):
    """dtype=None: one generic (x: Any) function for both tile dtypes (warp-lang 1.12+; 1.7's tile_map
    cannot compile a generic user function)."""
    if not compat.HAS_TILE_ASTYPE:  # 1.7 (tile_astype arrived in 1.8; 1.12 compiles generic functions)
        pytest.skip("warp-lang 1.7's tile_map cannot compile a generic user function")
    wdt = wp.float64 if dtype == np.float64 else wp.float32
    z = draws(rng, (TM, TN), dtype)
    z64 = z.astype(np.float64)
    assert rel_err(run_tile_map(E.activation_func(act), wdt, z, "_g"), E.reference(act, z64)) <= TOL[dtype]
    assert rel_err(run_tile_map(E.activation_grad_func(act), wdt, z, "_g"), E.reference_grad(act, z64)) <= TOL[dtype]


def test_activation_func_dtypes():
    assert E.activation_func("gelu", wp.float64) is E.activation_func("gelu", "float64")
    assert E.activation_func("gelu", wp.float32) is not E.activation_func("gelu", wp.float64)
    with pytest.raises(TypeError, match="float16"):
        E.activation_func("relu", wp.float16)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        E.activation_grad_func("swish", wp.float32)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=["float16", "float32", "float64"])
@pytest.mark.parametrize("act", ACTS, ids=str)
def test_elementwise_kernels_match_reference(act, dtype, rng):
    wdt = {np.float16: wp.float16, np.float32: wp.float32, np.float64: wp.float64}[dtype]
    z = draws(rng, (2, 3, 5), dtype)
    gy = rng.standard_normal((2, 3, 5)).astype(dtype)
    Z = wp.array(z, dtype=wdt, device="cpu")
    Y = wp.full((2, 3, 5), np.nan, dtype=wdt, device="cpu")
    E.apply_activation(Y, Z, act)
    G = wp.array(gy, dtype=wdt, device="cpu")
    GZ = wp.full((2, 3, 5), np.nan, dtype=wdt, device="cpu")
    E.activation_backward(GZ, G, Z, act)
    z64 = z.astype(np.float64)
    assert rel_err(Y.numpy(), E.reference(act, z64)) <= TOL[dtype]
    assert rel_err(GZ.numpy(), gy.astype(np.float64) * E.reference_grad(act, z64)) <= TOL[dtype]


def test_apply_activation_in_place(rng):
    z = draws(rng, (1, 4, 6), np.float64)
    Z = wp.array(z, dtype=wp.float64, device="cpu")
    E.apply_activation(Z, Z, "silu")
    assert rel_err(Z.numpy(), E.reference("silu", z)) <= 1e-14


def test_elementwise_kernels_refuse_bad_shapes():
    a = wp.zeros((1, 2, 3), dtype=wp.float32, device="cpu")
    with pytest.raises(ValueError, match=r"src has shape \[1, 2, 3\]; expected \[1, 3, 2\]"):
        E.apply_activation(wp.zeros((1, 3, 2), dtype=wp.float32, device="cpu"), a, "relu")
    with pytest.raises(ValueError, match="3-D"):
        E.apply_activation(wp.zeros(6, dtype=wp.float32, device="cpu"), a, "relu")
    with pytest.raises(TypeError, match="one dtype"):
        E.activation_backward(a, a, wp.zeros((1, 2, 3), dtype=wp.float64, device="cpu"), "tanh")
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        E.apply_activation(a, a, "swish")


@pytest.mark.parametrize("act", ACTS, ids=str)
def test_references_match_torch(act, rng):
    torch = pytest.importorskip("torch")
    z = draws(rng, (64,), np.float64)
    t = torch.tensor(z, requires_grad=True)
    y = E.reference(act, t)
    y.sum().backward()
    np.testing.assert_allclose(E.reference(act, z), y.detach().numpy(), rtol=1e-14, atol=1e-15)
    # numpy reference derivative = torch autograd of torch's own activation = torch reference derivative.
    # The derivatives are sums of O(1) terms (|z| <= 30) that cancel where the derivative is small
    # (gelu_tanh near z = -3.5: -6e-4 from terms of about 2), so the absolute error is a few ulps of 2-4.
    np.testing.assert_allclose(E.reference_grad(act, z), t.grad.numpy(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(E.reference_grad(act, t.detach()).numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-14)


def test_check_activation():
    assert E.check_activation(None) is None
    for a in E.ACTIVATIONS:
        assert E.check_activation(a) == a
    with pytest.raises(ValueError, match=r"unknown activation 'swish'; valid activations: None, 'relu', 'gelu', "
                                         r"'gelu_tanh', 'silu', 'tanh'"):
        E.check_activation("swish")
    for bad in ("none", "ReLU", 1):
        with pytest.raises(ValueError, match=repr(bad)):
            E.check_activation(bad)
