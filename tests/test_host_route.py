"""The default CPU path: ``matmul``/``gemm`` on CPU operands run on the host BLAS (kernels/host.py)
through zero-copy views, for every container and dtype, with the same semantics as the tile kernels:
alpha/beta/C broadcasting, BLAS's unread C, ``out`` written in place (column-major too), gradients."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DTYPES, KINDS, kind_ok, make, nan_like, to_f64

import warp as wp

import warp_gemm
from warp_gemm.families import host
from warp_gemm.tools.tolerance import compare, random_operands, round_to

pytestmark = pytest.mark.cpu_host


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_gemm_on_host_blas(dtype, kind, rng):
    if kind_ok(kind, dtype, "cpu"):
        pytest.skip(kind_ok(kind, dtype, "cpu"))
    M, N, K = 37, 29, 53
    a, b = random_operands(M, N, K, dtype, rng, batch=3)
    c = round_to(rng.standard_normal(N), dtype)
    out = nan_like(kind, (3, M, N), dtype, "cpu")
    before = dict(host.calls)
    warp_gemm.gemm(make(np.ascontiguousarray(np.swapaxes(a, 1, 2)), dtype, kind, "cpu"), make(b, dtype, kind, "cpu"),
                   make(c, dtype, kind, "cpu"), alpha=0.5, beta=-2.0, trans_a=True, out=out)
    assert sum(host.calls.values()) == sum(before.values()) + 1, "the call did not take the host path"
    cmp = compare(to_f64(out), 0.5 * np.matmul(a, b) - 2.0 * c, dtype)
    assert cmp.ok, f"{dtype} {kind}: {cmp}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unread_c_and_column_major_out(dtype, rng):
    a, b = random_operands(20, 30, 40, dtype, rng)
    c = np.full((20, 30), np.nan, dtype)  # beta == 0: never read, so no NaN may appear
    out = np.full((30, 20), np.nan, dtype).T  # column-major (20, 30)
    warp_gemm.gemm(a.astype(dtype), b.astype(dtype), c, alpha=2.0, beta=0.0, out=out)
    assert compare(out.astype(np.float64), 2.0 * a @ b, dtype).ok


def test_tape_gradients_on_host(rng):
    a, b = random_operands(9, 7, 11, "float64", rng)
    A = wp.array(a, dtype=wp.float64, device="cpu", requires_grad=True)
    B = wp.array(b, dtype=wp.float64, device="cpu", requires_grad=True)
    tape = wp.Tape()
    with tape:
        D = warp_gemm.matmul(A, B)
    g = rng.standard_normal((9, 7))
    tape.backward(grads={D: wp.array(g, dtype=wp.float64, device="cpu")})
    assert np.allclose(A.grad.numpy(), g @ b.T, rtol=1e-12, atol=1e-12)
    assert np.allclose(B.grad.numpy(), a.T @ g, rtol=1e-12, atol=1e-12)


def test_torch_autograd_on_host(rng):
    torch = pytest.importorskip("torch")
    a = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: warp_gemm.matmul(x, y), (a, b))


def test_tiles_selectable(rng):
    """``cpu_backend="tiles"`` runs the tile kernels instead (no host call)."""
    a, b = random_operands(17, 19, 23, "float32", rng)
    before = dict(host.calls)
    with warp_gemm.options(cpu_backend="tiles"):
        d = warp_gemm.matmul(a.astype(np.float32), b.astype(np.float32))
    assert host.calls == before
    assert compare(d.astype(np.float64), a @ b, "float32").ok


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("with_out", [True, False])
def test_repeated_host_call_skips_validation(dtype, kind, with_out, rng, monkeypatch):
    """A repeated host call with the same containers and ``out`` takes the fast path (no validation) and
    computes on the containers' new contents, through a transposed operand, C and alpha/beta; without
    ``out`` each call returns a new array and leaves the earlier result alone."""
    from warp_gemm.core import execute

    if kind_ok(kind, dtype, "cpu"):
        pytest.skip(kind_ok(kind, dtype, "cpu"))
    M, N, K = 19, 23, 31
    first, second = (random_operands(M, N, K, dtype, rng) for _ in range(2))
    c = round_to(rng.standard_normal((M, N)), dtype)
    A = make(np.ascontiguousarray(first[0].T), dtype, kind, "cpu")
    B, C = make(first[1], dtype, kind, "cpu"), make(c, dtype, kind, "cpu")
    out = nan_like(kind, (M, N), dtype, "cpu") if with_out else None
    r1 = warp_gemm.gemm(A, B, C, alpha=0.5, beta=2.0, trans_a=True, out=out)
    assert compare(to_f64(r1), 0.5 * first[0] @ first[1] + 2.0 * c, dtype).ok
    kept = to_f64(r1).copy()

    def boom(*a, **k):
        raise AssertionError("validate ran: no fast path")

    if with_out:  # (without out the second result is at a new address: the full path, validation included)
        monkeypatch.setattr(execute, "validate", boom)
    for x, v in ((A, np.ascontiguousarray(second[0].T)), (B, second[1])):
        fresh = make(v, dtype, kind, "cpu")
        if kind == "numpy":
            x[...] = fresh
        elif kind == "torch":
            x.copy_(fresh)
        else:
            x.assign(fresh)
    if with_out:
        out.fill_(float("nan")) if kind != "numpy" else out.fill(np.nan)
    calls = sum(host.calls.values())
    r2 = warp_gemm.gemm(A, B, C, alpha=0.5, beta=2.0, trans_a=True, out=out)
    assert sum(host.calls.values()) == calls + 1
    assert compare(to_f64(r2), 0.5 * second[0] @ second[1] + 2.0 * c, dtype).ok
    if not with_out:
        assert r2 is not r1
        np.testing.assert_array_equal(to_f64(r1), kept)  # the first result is untouched
