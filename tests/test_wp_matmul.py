"""``warp_gemm.compat``: the drop-ins for Warp's removed ``wp.matmul`` / ``wp.batched_matmul`` (signatures,
``d = alpha * a @ b + beta * c``, ``wp.Tape`` gradients, errors), and in-place updates (``out`` is ``c``
itself) on every kernel family and container, with partial overlaps still refused.

Fresh random inputs per test, NaN-prefilled outputs where the output is not also the input, float64
references from the inputs as rounded to the tested dtype.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import warp as wp
from conftest import DTYPES, make, nan_like, to_f64, torch

import warp_gemm
from warp_gemm import compat
from warp_gemm.tools.tolerance import compare, random_operands, round_to


def _operands(rng, M, N, K, dtype, batch=0):
    a, b = random_operands(M, N, K, dtype, rng, batch=batch)
    c = round_to(rng.standard_normal((batch, M, N) if batch else (M, N)), dtype)
    return a, b, c


# --- the signatures -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [compat.matmul, compat.batched_matmul])
def test_signature_is_warps(fn):
    """Warp's parameters, order and defaults (``device`` as in the releases that had it): a positional
    call written for wp.matmul binds the same way."""
    params = inspect.signature(fn).parameters
    assert list(params) == ["a", "b", "c", "d", "alpha", "beta", "allow_tf32x3_arith", "device"]
    assert [params[k].default for k in ("alpha", "beta", "allow_tf32x3_arith", "device")] == [1.0, 0.0, False, None]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params.values())


# --- d = alpha * a @ b + beta * c ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 2.0), (-1.5, 1.0)])
def test_matmul_positional(dtype, alpha, beta, rng):
    M, N, K = 37, 29, 45
    a, b, c = _operands(rng, M, N, K, dtype)
    A, B, C = (make(x, dtype, "warp", "cpu") for x in (a, b, c))
    D = nan_like("warp", (M, N), dtype, "cpu")
    assert compat.matmul(A, B, C, D, alpha, beta, False) is None  # positional, as wp.matmul was called
    cmp = compare(to_f64(D), alpha * a @ b + beta * c, dtype)
    assert cmp.ok, cmp
    np.testing.assert_array_equal(to_f64(C), c)  # c is only read


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_matmul(dtype, rng):
    nb, M, N, K = 3, 17, 33, 20
    a, b, c = _operands(rng, M, N, K, dtype, batch=nb)
    A, B, C = (make(x, dtype, "warp", "cpu") for x in (a, b, c))
    D = nan_like("warp", (nb, M, N), dtype, "cpu")
    compat.batched_matmul(A, B, C, D, alpha=2.0, beta=-1.0, allow_tf32x3_arith=True, device="cpu")
    cmp = compare(to_f64(D), 2.0 * np.matmul(a, b) - c, dtype)
    assert cmp.ok, cmp


@pytest.mark.cpu_host
def test_matmul_on_the_host_backend(rng):
    """The CPU's default backend (host BLAS) takes the same calls."""
    M, N, K = 40, 31, 23
    a, b, c = _operands(rng, M, N, K, "float64")
    A, B, C = (make(x, "float64", "warp", "cpu") for x in (a, b, c))
    D = nan_like("warp", (M, N), "float64", "cpu")
    compat.matmul(A, B, C, D, 3.0, 0.5)
    assert compare(to_f64(D), 3.0 * a @ b + 0.5 * c, "float64").ok


def test_transposed_views(rng):
    """``a.transpose()`` / ``b.transpose()`` views, as wp.matmul took them."""
    M, N, K = 21, 26, 34
    a, b, c = _operands(rng, M, N, K, "float32")
    At = make(np.ascontiguousarray(a.T), "float32", "warp", "cpu").transpose()
    Bt = make(np.ascontiguousarray(b.T), "float32", "warp", "cpu").transpose()
    C = make(c, "float32", "warp", "cpu")
    D = nan_like("warp", (M, N), "float32", "cpu")
    compat.matmul(At, Bt, C, D, 1.0, 1.0)
    assert compare(to_f64(D), a @ b + c, "float32").ok


def test_beta_zero_does_not_read_c(rng):
    """BLAS semantics (the CUDA path's): with beta = 0 a NaN in c does not reach d."""
    a, b, _ = _operands(rng, 8, 9, 10, "float32")
    A, B = make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu")
    C = nan_like("warp", (8, 9), "float32", "cpu")
    D = nan_like("warp", (8, 9), "float32", "cpu")
    compat.matmul(A, B, C, D)
    assert compare(to_f64(D), a @ b, "float32").ok


# --- d is c ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batched", [False, True])
def test_compat_accumulates_in_place(batched, rng):
    nb = 2 if batched else 0
    a, b, c = _operands(rng, 24, 40, 36, "float32", batch=nb)
    A, B, C = (make(x, "float32", "warp", "cpu") for x in (a, b, c))
    (compat.batched_matmul if batched else compat.matmul)(A, B, C, C, 0.5, 1.5)
    assert compare(to_f64(C), 0.5 * np.matmul(a, b) + 1.5 * c, "float32").ok


# One forced plan per kernel family and per multi-step path (split-K workspace, the peeled edges, the
# small-problem K slices): out = c must give the same numbers as a separate out on each.
INPLACE = {  # id -> (options, (M, N, K, batch), config)
    "tiled": ({"family": "tiled"}, (45, 70, 50, 0), None),
    "tiled-split-k": ({"family": "tiled"}, (33, 40, 300, 0), "32x32x32/b64/g8/s4"),
    "tiled-padded": ({"family": "tiled", "pad_on_cpu": True, "pad_min_work": 1}, (45, 70, 50, 0), None),
    "pipelined": ({"family": "pipelined"}, (64, 48, 72, 2), None),
    "pipelined-peeled": ({"family": "pipelined", "peel_on_cpu": True}, (65, 49, 40, 0), None),
    "small": ({"family": "small"}, (19, 31, 40, 3), None),
    "skinny": ({"family": "skinny"}, (3, 70, 90, 0), None),
    "gemv": ({"family": "gemv"}, (1, 70, 90, 0), None),
    "splitpipe": ({"family": "splitpipe"}, (6, 40, 512, 0), None),
    "fill (alpha 0)": ({}, (30, 20, 10, 0), None),
}


@pytest.mark.parametrize("case", sorted(INPLACE))
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_out_is_c_on_every_family(case, dtype, rng, planned):
    opts, (M, N, K, batch), config = INPLACE[case]
    alpha = 0.0 if case.startswith("fill") else 0.75
    a, b, c = _operands(rng, M, N, K, dtype, batch=batch)
    A, B, C = (make(x, dtype, "warp", "cpu") for x in (a, b, c))
    with warp_gemm.options(cpu_backend="tiles", **opts):
        res = warp_gemm.gemm(A, B, C, alpha=alpha, beta=-1.25, out=C, config=config)
    assert res is C
    if "family" in opts:
        assert [p.family for p in planned] == [opts["family"]]
    if case == "pipelined-peeled":
        assert any(planned[0].peel), "the peel was not planned"
    cmp = compare(to_f64(C), alpha * np.matmul(a, b) - 1.25 * c, dtype)
    assert cmp.ok, f"{case}: {cmp}"


@pytest.mark.parametrize("kind", ["numpy", "warp"] + (["torch"] if torch is not None else []))
@pytest.mark.parametrize("backend", ["host", "tiles"])
def test_out_is_c_every_container(kind, backend, rng):
    M, N, K = 31, 27, 40
    a, b, c = _operands(rng, M, N, K, "float64")
    A, B, C = (make(x, "float64", kind, "cpu") for x in (a, b, c))
    with warp_gemm.options(cpu_backend=backend):
        for _ in range(2):  # the second call may replay a kept plan: it must copy c again
            before = to_f64(C).copy()  # (to_f64 of a float64 torch CPU tensor is a view)
            assert warp_gemm.gemm(A, B, C, alpha=2.0, beta=0.5, out=C) is C
            assert compare(to_f64(C), 2.0 * a @ b + 0.5 * before, "float64").ok


def test_out_is_a_strided_c(rng):
    """``out`` and ``c`` the same column-major view: exactly the same memory and strides, so in place."""
    a, b, _ = _operands(rng, 12, 9, 7, "float32")
    base = round_to(rng.standard_normal((9, 12)), "float32").astype(np.float32)
    c = base.T  # (12, 9), column-major
    c0 = c.astype(np.float64)
    warp_gemm.gemm(a, b, c, beta=1.0, out=c)
    assert compare(c.astype(np.float64), a @ b + c0, "float32").ok


# --- wp.Tape ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 2.0)])
def test_tape_gradients_match_warps_adjoint(batched, alpha, beta, rng):
    """Warp 1.6's adj_matmul: a.grad += alpha * dD @ b^T, b.grad += alpha * a^T @ dD, c.grad += beta * dD,
    accumulated into the existing gradients."""
    nb = 3 if batched else 0
    M, N, K = 13, 11, 17
    a, b, c = _operands(rng, M, N, K, "float64", batch=nb)
    shape_d = c.shape
    A, B, C = (wp.array(x, dtype=wp.float64, device="cpu", requires_grad=True) for x in (a, b, c))
    g0 = [rng.standard_normal(x.shape) for x in (a, b, c)]  # gradients already there: added to
    for X, g in zip((A, B, C), g0):
        X.grad.assign(g)
    D = wp.array(np.full(shape_d, np.nan), dtype=wp.float64, device="cpu", requires_grad=True)
    dD = rng.standard_normal(shape_d)
    tape = wp.Tape()
    with tape:
        (compat.batched_matmul if batched else compat.matmul)(A, B, C, D, alpha, beta)
    tape.backward(grads={D: wp.array(dD, dtype=wp.float64, device="cpu")})
    bt = np.swapaxes(b, -1, -2)
    at = np.swapaxes(a, -1, -2)
    np.testing.assert_allclose(D.numpy(), alpha * np.matmul(a, b) + beta * c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), g0[0] + alpha * np.matmul(dD, bt), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B.grad.numpy(), g0[1] + alpha * np.matmul(at, dD), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C.grad.numpy(), g0[2] + beta * dD, rtol=1e-12, atol=1e-12)


def test_tape_in_place_gives_c_the_gradient_of_its_old_value(rng):
    M, N, K = 9, 14, 6
    a, b, c = _operands(rng, M, N, K, "float64")
    A, B, C = (wp.array(x, dtype=wp.float64, device="cpu", requires_grad=True) for x in (a, b, c))
    dD = rng.standard_normal((M, N))
    tape = wp.Tape()
    with tape:
        compat.matmul(A, B, C, C, 2.0, 0.5)
    tape.backward(grads={C: wp.array(dD, dtype=wp.float64, device="cpu")})
    np.testing.assert_allclose(C.numpy(), 2.0 * a @ b + 0.5 * c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), 2.0 * dD @ b.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B.grad.numpy(), 2.0 * a.T @ dD, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C.grad.numpy(), 0.5 * dD, rtol=1e-12, atol=1e-12)


def test_tape_needs_d_with_requires_grad(rng):
    a, b, c = _operands(rng, 4, 5, 6, "float32")
    A = wp.array(a, dtype=wp.float32, device="cpu", requires_grad=True)
    B, C = wp.array(b, dtype=wp.float32, device="cpu"), wp.array(c, dtype=wp.float32, device="cpu")
    D = wp.array(np.full((4, 5), np.nan, np.float32), dtype=wp.float32, device="cpu")
    with wp.Tape(), pytest.raises(ValueError, match="compat.matmul: .* but d is not a wp.array with requires_grad"):
        compat.matmul(A, B, C, D)
    assert np.isnan(D.numpy()).all()


# --- errors ---------------------------------------------------------------------------------------------------
def _arrays(shapes, dtypes=(wp.float32,) * 4):
    return [wp.array(np.full(s, np.nan), dtype=dt, device="cpu") for s, dt in zip(shapes, dtypes)]


@pytest.mark.parametrize("fn,shapes,dtypes,exc,needles", [
    (compat.matmul, [(4, 5), (5, 6), (4, 6), (4, 6)], (wp.float32, wp.float64, wp.float32, wp.float32), TypeError,
     ["compat.matmul: a, b, c and d must have one dtype", "b float64"]),
    (compat.matmul, [(4, 5), (4, 6), (4, 6), (4, 6)], None, ValueError,
     ["compat.matmul: a has shape [4, 5]", "b [4, 6] (expected [5, 6])"]),
    (compat.matmul, [(4, 5), (5, 6), (4, 6), (6, 4)], None, ValueError, ["d [6, 4] (expected [4, 6])"]),
    (compat.matmul, [(4, 5), (5, 6), (6,), (4, 6)], None, ValueError, ["c has shape [6]", "2-D"]),
    (compat.matmul, [(2, 4, 5), (2, 5, 6), (2, 4, 6), (2, 4, 6)], None, ValueError, ["batched_matmul takes"]),
    (compat.batched_matmul, [(2, 4, 5), (3, 5, 6), (2, 4, 6), (2, 4, 6)], None, ValueError,
     ["compat.batched_matmul", "b [3, 5, 6] (expected [2, 5, 6])"]),
    (compat.batched_matmul, [(4, 5), (5, 6), (4, 6), (4, 6)], None, ValueError, ["takes 3-D", "matmul takes"]),
])
def test_errors(fn, shapes, dtypes, exc, needles):
    arrays = _arrays(shapes, dtypes or (wp.float32,) * 4)
    with pytest.raises(exc) as ei:
        fn(*arrays)
    assert all(n in str(ei.value) for n in needles), str(ei.value)
    assert np.isnan(arrays[3].numpy()).all(), "d was written by a refused call"


def test_errors_containers_and_overlaps():
    a, b, c, d = _arrays([(4, 5), (5, 6), (4, 6), (4, 6)])
    with pytest.raises(TypeError, match="compat.matmul: c must be a wp.array"):
        compat.matmul(a, b, np.zeros((4, 6), np.float32), d)
    sq = wp.array(np.zeros((5, 5), np.float32), device="cpu")
    with pytest.raises(ValueError, match=r"compat.matmul: d \(warp float32\[5, 5\] on cpu\) shares memory with a"):
        compat.matmul(sq, sq, sq, sq)


def test_errors_device_mismatch_mocked(monkeypatch):
    """``device=`` other than the arrays' is refused (a stand-in device: no CUDA needed)."""
    a, b, c, d = _arrays([(4, 5), (5, 6), (4, 6), (4, 6)])
    with monkeypatch.context() as mp:
        mp.setattr(wp, "get_device", lambda d=None: "cuda:7")
        with pytest.raises(ValueError, match="every array must be on cuda:7; a on cpu, b on cpu, c on cpu, d on cpu"):
            compat.matmul(a, b, c, d, device="cuda:7")
    assert np.isnan(d.numpy()).all()
