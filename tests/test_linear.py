"""``warp_gemm.linear`` for wp.array and NumPy operands (torch's are in test_torch_native.py): every
activation against float64 on each CPU path -- the host BLAS, the tile kernels with the activation pass,
and the pipelined family with the activation fused into its epilogue -- and wp.Tape gradients; plus the
issue's torch.compile repro through ``warp_gemm.matmul`` itself."""

from __future__ import annotations

import numpy as np
import pytest

import warp as wp

import warp_gemm
from warp_gemm.families.common.epilogue import ACTIVATIONS, reference, reference_grad
from warp_gemm.tools.tolerance import compare, round_to

ACTS = [None, *ACTIVATIONS]


@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("path", ["host", "tiles", "pipelined"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_linear_forward(activation, path, dtype, rng):
    x = round_to(rng.standard_normal((2, 37, 48)) / 7, dtype)  # (batch, rows, in)
    w = round_to(rng.standard_normal((40, 48)) / 7, dtype)
    b = round_to(rng.standard_normal(40), dtype)
    z = np.matmul(x, w.T) + b
    ref = z if activation is None else reference(activation, z)
    opts = {"host": {}, "tiles": {"cpu_backend": "tiles", "family": "tiled"},
            "pipelined": {"cpu_backend": "tiles", "family": "pipelined"}}[path]
    X, W, B = (wp.array(v.astype(dtype), dtype=getattr(wp, dtype), device="cpu") for v in (x, w, b))
    with warp_gemm.options(**opts):
        y = warp_gemm.linear(X, W, B, activation=activation)
    cmp = compare(y.numpy().astype(np.float64), ref, dtype)
    assert cmp.ok, f"{path} {dtype} {activation}: {cmp}"


@pytest.mark.parametrize("activation", ACTS)
def test_linear_tape_gradients(activation, rng):
    x, w, b = rng.standard_normal((9, 6)), rng.standard_normal((5, 6)), rng.standard_normal(5)
    X, W, B = (wp.array(v, dtype=wp.float64, device="cpu", requires_grad=True) for v in (x, w, b))
    tape = wp.Tape()
    with tape:
        y = warp_gemm.linear(X, W, B, activation=activation)
    g = rng.standard_normal((9, 5))
    tape.backward(grads={y: wp.array(g, dtype=wp.float64, device="cpu")})
    z = x @ w.T + b
    dz = g if activation is None else g * reference_grad(activation, z)
    assert np.allclose(y.numpy(), z if activation is None else reference(activation, z), rtol=1e-12, atol=1e-12)
    assert np.allclose(X.grad.numpy(), dz @ w, rtol=1e-10, atol=1e-12)
    assert np.allclose(W.grad.numpy(), dz.T @ x, rtol=1e-10, atol=1e-12)
    assert np.allclose(B.grad.numpy(), dz.sum(0), rtol=1e-10, atol=1e-12)


def test_unknown_activation_is_named():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="swish"):
        warp_gemm.linear(x, np.ones((4, 3), np.float32), activation="swish")


def test_compile_fullgraph_through_matmul():
    """The issue's repro: torch.compile(fullgraph=True) of warp_gemm.matmul itself, forward and backward."""
    torch = pytest.importorskip("torch")
    f = torch.compile(lambda x, y: torch.relu(warp_gemm.matmul(x, y)), fullgraph=True, backend="aot_eager")
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    y = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    out = f(x, y)
    ref = torch.relu(x.detach() @ y.detach())
    assert torch.allclose(out, ref, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    mask = (ref > 0).double()
    assert torch.allclose(x.grad, mask @ y.detach().T, rtol=1e-12, atol=1e-12)
