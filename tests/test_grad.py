"""Gradients of matmul/gemm: torch.autograd (gradcheck, vs torch.matmul, nn.Module, no_grad) and wp.Tape
(vs finite differences, vs torch, batched/broadcast, accumulation, 16-bit dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from conftest import DEVICES, make, to_f64, torch

import warp_gemm
import warp_gemm._compat as compat
from warp_gemm import autograd as wg_autograd
from warp_gemm.tools.tolerance import compare, round_to

M, K, N = 7, 13, 5  # odd on purpose
NB = 3
TRANS = ["nn", "tn", "nt", "tt"]
# (shape of op(A), shape of op(B)) with every kind of batch broadcast.
BATCH_SHAPES = {
    "2d": ((M, K), (K, N)),
    "bb": ((NB, M, K), (NB, K, N)),
    "b2": ((NB, M, K), (K, N)),
    "2b": ((M, K), (NB, K, N)),
    "1b": ((1, M, K), (NB, K, N)),
    "b1": ((NB, M, K), (1, K, N)),
    "11": ((1, M, K), (1, K, N)),
    "12": ((1, M, K), (K, N)),
}
C_SHAPES = {"none": None, "MN": (M, N), "N": (N,), "1N": (1, N), "M1": (M, 1), "scalar": (), "BMN": "BMN",
            "1MN": "1MN", "B1N": "B1N"}


def _c_shape(cs, out_shape):
    spec = C_SHAPES[cs]
    if spec is None or isinstance(spec, tuple):
        return spec
    if len(out_shape) != 3:
        return None
    nb = out_shape[0]
    return {"BMN": (nb, M, N), "1MN": (1, M, N), "B1N": (nb, 1, N)}[spec]


def _stored(x, trans):
    """The array to pass for op(X) = x (stored transposed when ``trans``)."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if trans else x


def _out_shape(sa, sb):
    return np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])


def _ref(a, b, c, G, alpha, beta, ta, tb):
    """float64 gradients of sum(G * (alpha op(A) op(B) + beta C)) w.r.t. the *stored* a, b, c (torch)."""
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) if x is not None else None
          for x in (a, b, c)]
    A, B, C = ts
    opA = A.transpose(-1, -2) if ta else A
    opB = B.transpose(-1, -2) if tb else B
    D = alpha * torch.matmul(opA, opB)
    if C is not None:
        D = D + beta * C
    D.backward(torch.tensor(G))
    return [t.grad.numpy() if t is not None else None for t in ts]


def _ref_np(a, b, c, G, alpha, beta, ta, tb):
    """The same gradients from the formulas, in NumPy float64 (no torch needed)."""
    opa = np.swapaxes(a, -1, -2) if ta else a
    opb = np.swapaxes(b, -1, -2) if tb else b
    dopa = alpha * G @ np.swapaxes(opb, -1, -2)
    dopb = alpha * np.swapaxes(opa, -1, -2) @ G

    def sum_to(x, shape):
        while x.ndim > len(shape):
            x = x.sum(0)
        for i, n in enumerate(shape):
            if n == 1 and x.shape[i] != 1:
                x = x.sum(i, keepdims=True)
        return x

    da = sum_to(np.swapaxes(dopa, -1, -2) if ta else dopa, a.shape)
    db = sum_to(np.swapaxes(dopb, -1, -2) if tb else dopb, b.shape)
    dc = sum_to(beta * G, c.shape) if c is not None else None
    return [da, db, dc]


# --- torch.autograd ----------------------------------------------------------------------------------------
def _torch_device(device):
    if torch is None:
        pytest.skip("torch not installed")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return device


def _t(x, device, dtype=None, grad=True):
    dtype = dtype or torch.float64
    return torch.tensor(x, dtype=torch.float64).to(dtype).to(device).requires_grad_(grad)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_matmul_2d(device, rng):
    _torch_device(device)
    a, b = _t(rng.standard_normal((M, K)), device), _t(rng.standard_normal((K, N)), device)
    assert torch.autograd.gradcheck(warp_gemm.matmul, (a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["bb", "b2", "2b", "1b", "b1", "12"])
def test_gradcheck_matmul_batched(device, case, rng):
    _torch_device(device)
    # Batch 2, M=3, K=5, N=4: small enough for gradcheck's finite differences to stay quick.
    lead = {"bb": ((2,), (2,)), "b2": ((2,), ()), "2b": ((), (2,)), "1b": ((1,), (2,)), "b1": ((2,), (1,)),
            "12": ((1,), ())}[case]
    sa, sb = lead[0] + (3, 5), lead[1] + (5, 4)
    a, b = _t(rng.standard_normal(sa), device), _t(rng.standard_normal(sb), device)
    assert torch.autograd.gradcheck(warp_gemm.matmul, (a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("case,cs", [("2d", "MN"), ("2d", "N"), ("2d", "M1"), ("2d", "scalar"), ("b2", "1N"),
                                     ("b2", "BMN"), ("2b", "1MN"), ("1b", "B1N"), ("bb", "none")])
def test_gradcheck_gemm(device, trans, case, cs, rng):
    _torch_device(device)
    ta, tb = trans[0] == "t", trans[1] == "t"
    sa, sb = BATCH_SHAPES[case]
    csh = _c_shape(cs, _out_shape(sa, sb))
    a = _t(_stored(rng.standard_normal(sa), ta), device)
    b = _t(_stored(rng.standard_normal(sb), tb), device)
    args = (a, b)
    if csh is not None:
        args += (_t(rng.standard_normal(csh), device),)

    def f(a, b, c=None):
        return warp_gemm.gemm(a, b, c, alpha=1.5, beta=-0.75, trans_a=ta, trans_b=tb)

    assert torch.autograd.gradcheck(f, args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("case", ["2d", "b2", "2b", "bb"])
def test_torch_grads_match_torch_matmul(device, dtype, case, rng):
    _torch_device(device)
    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    sa, sb = BATCH_SHAPES[case]
    s = K ** -0.25
    a64, b64 = round_to(rng.standard_normal(sa) * s, dtype), round_to(rng.standard_normal(sb) * s, dtype)
    G = round_to(rng.standard_normal(_out_shape(sa, sb)), dtype)
    tdt = getattr(torch, dtype)
    a, b = _t(a64, device, tdt), _t(b64, device, tdt)
    out = warp_gemm.matmul(a, b)
    assert out.grad_fn is not None and out.dtype == tdt
    out.backward(torch.tensor(G, dtype=tdt, device=device))
    ra, rb, _ = _ref_np(a64, b64, None, G, 1.0, 0.0, False, False)
    for got, ref, name in ((a.grad, ra, "a"), (b.grad, rb, "b")):
        assert got.dtype == tdt and tuple(got.shape) == ref.shape
        cmp = compare(to_f64(got), ref, dtype)
        assert cmp.ok, f"d{name} {dtype} {case}: {cmp}"


def test_torch_only_some_inputs_need_grad(rng):
    _torch_device("cpu")
    a = _t(rng.standard_normal((NB, M, K)), "cpu", grad=False)
    b = _t(rng.standard_normal((K, N)), "cpu")
    c = _t(rng.standard_normal((N,)), "cpu", grad=False)
    d = warp_gemm.gemm(a, b, c, beta=1.0)
    d.sum().backward()
    assert a.grad is None and c.grad is None
    ref = a.detach().numpy().sum((0, 1))[:, None].repeat(N, 1)
    np.testing.assert_allclose(b.grad.numpy(), ref, rtol=1e-12)


def test_torch_numpy_operand(rng):
    """A torch tensor that needs grad times a NumPy array: the gradient still comes from warp_gemm."""
    _torch_device("cpu")
    a = _t(rng.standard_normal((M, K)), "cpu")
    b = rng.standard_normal((K, N))
    warp_gemm.matmul(a, b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.ones((M, N)) @ b.T, rtol=1e-12)


def test_torch_no_grad_records_nothing(rng):
    _torch_device("cpu")
    a, b = _t(rng.standard_normal((M, K)), "cpu"), _t(rng.standard_normal((K, N)), "cpu")
    with torch.no_grad():
        assert warp_gemm.matmul(a, b).grad_fn is None
        assert warp_gemm.gemm(a, b, b[0, :N], beta=1.0).grad_fn is None
    with torch.inference_mode():
        assert warp_gemm.matmul(a, b).grad_fn is None
    d = warp_gemm.matmul(a.detach(), b.detach())
    assert d.grad_fn is None and not d.requires_grad
    assert warp_gemm.matmul(a, b.detach()).grad_fn is not None


def test_torch_out_refused_and_double_backward(rng):
    _torch_device("cpu")
    a, b = _t(rng.standard_normal((M, K)), "cpu"), _t(rng.standard_normal((K, N)), "cpu")
    out = torch.full((M, N), float("nan"), dtype=torch.float64)
    with pytest.raises(RuntimeError, match="out="):
        warp_gemm.matmul(a, b, out=out)
    assert torch.isnan(out).all()
    # Double backward: torch operands go through the warp_gemm::gemm custom op, whose backward is made
    # of the op itself, so it is differentiable (it was refused before the custom op).
    a.requires_grad_(True)
    b.requires_grad_(True)
    d = warp_gemm.matmul(a, b)
    (ga,) = torch.autograd.grad(d.sum(), a, create_graph=True)  # ones(M, N) @ b^T
    ga.sum().backward()  # d/db of sum(ones @ b^T) = M everywhere
    assert torch.allclose(b.grad, torch.full_like(b, float(M)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_nn_module(device, rng):
    _torch_device(device)
    nn = torch.nn

    class WarpLinear(nn.Module):
        """nn.Linear's maths (x @ W^T + b) through warp_gemm."""

        def __init__(self, fin, fout):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(fout, fin, dtype=torch.float64) * fin ** -0.5)
            self.bias = nn.Parameter(torch.randn(fout, dtype=torch.float64))

        def forward(self, x):
            return warp_gemm.gemm(x, self.weight, self.bias, beta=1.0, trans_b=True)

    torch.manual_seed(0)
    model = nn.Sequential(WarpLinear(K, 11), nn.Tanh(), WarpLinear(11, N)).to(device)
    ref = nn.Sequential(nn.Linear(K, 11), nn.Tanh(), nn.Linear(11, N)).to(device, torch.float64)
    ref.load_state_dict(model.state_dict())
    x = torch.tensor(rng.standard_normal((NB, M, K)), device=device)  # a batch of sequences
    y = torch.tensor(rng.standard_normal((NB, M, N)), device=device)
    for m in (model, ref):
        nn.functional.mse_loss(m(x), y).backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.cpu().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    # And it trains.
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    first = None
    for _ in range(30):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.9 * first


# --- wp.Tape ---------------------------------------------------------------------------------------------
def _wp(x, dtype, device, grad=True):
    arr = make(x, dtype, "warp", device)
    if grad:
        arr.requires_grad = True
    return arr


def _tape_grads(a, b, c, G, dtype, device, alpha, beta, ta, tb, need=(True, True, True)):
    A, B = _wp(a, dtype, device, need[0]), _wp(b, dtype, device, need[1])
    C = _wp(c, dtype, device, need[2]) if c is not None else None
    tape = wp.Tape()
    with tape:
        D = warp_gemm.gemm(A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)
    assert D.requires_grad
    assert len(tape.launches) == 1 and callable(tape.launches[0]), "GEMM kernels must not be on the tape"
    tape.backward(grads={D: make(G, dtype, "warp", device)})
    return [to_f64(X.grad) if X is not None and X.requires_grad else None for X in (A, B, C)]


def _fd_grads(a, b, c, G, device, alpha, beta, ta, tb, h=1e-6):
    """Central finite differences of sum(G * gemm(...)) in float64 (forward calls only)."""

    def f(a, b, c):
        C = make(c, "float64", "warp", device) if c is not None else None
        D = warp_gemm.gemm(make(a, "float64", "warp", device), make(b, "float64", "warp", device), C,
                           alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)
        return float((to_f64(D) * G).sum())

    out = []
    xs = [a, b, c]
    for i, x in enumerate(xs):
        if x is None:
            out.append(None)
            continue
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            up = [y.copy() if y is not None else None for y in xs]
            dn = [y.copy() if y is not None else None for y in xs]
            up[i][idx] += h
            dn[i][idx] -= h
            g[idx] = (f(*up) - f(*dn)) / (2 * h)
        out.append(g)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case,cs,trans", [("2d", "MN", "nn"), ("2d", "N", "tt"), ("b2", "1N", "tn"),
                                           ("2b", "M1", "nt"), ("1b", "BMN", "tt"), ("b1", "B1N", "nn")])
def test_tape_vs_finite_differences(device, case, cs, trans, rng):
    ta, tb = trans[0] == "t", trans[1] == "t"
    sa, sb = BATCH_SHAPES[case]
    sa, sb = sa[:-2] + (3, 4), sb[:-2] + (4, 2)  # keep the finite differences few
    osh = _out_shape(sa, sb)
    a, b = _stored(rng.standard_normal(sa), ta), _stored(rng.standard_normal(sb), tb)
    csh = {"MN": (3, 2), "N": (2,), "1N": (1, 2), "M1": (3, 1), "BMN": osh, "B1N": (osh[0], 1, 2)}[cs]
    c = rng.standard_normal(csh)
    G = rng.standard_normal(osh)
    got = _tape_grads(a, b, c, G, "float64", device, 0.5, 2.0, ta, tb)
    fd = _fd_grads(a, b, c, G, device, 0.5, 2.0, ta, tb)
    for name, x, y in zip("abc", got, fd):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7, err_msg=f"d{name}")


def _tape_params():
    out = []
    for dev in DEVICES:
        d = dev.values[0]
        for case in BATCH_SHAPES:
            for trans in TRANS:
                cs = {"2d": "N", "bb": "BMN", "b2": "1N", "2b": "1MN", "1b": "B1N", "b1": "MN",
                      "11": "scalar", "12": "none"}[case]
                for dtype in ("float64", "float32"):
                    out.append(pytest.param(d, case, cs, trans, dtype, id=f"{d}-{case}-c{cs}-{trans}-{dtype}",
                                            marks=dev.marks))
    return out


@pytest.mark.parametrize("device,case,cs,trans,dtype", _tape_params())
def test_tape_vs_torch(device, case, cs, trans, dtype, rng):
    if torch is None:
        pytest.skip("torch not installed")
    ta, tb = trans[0] == "t", trans[1] == "t"
    sa, sb = BATCH_SHAPES[case]
    osh = _out_shape(sa, sb)
    s = K ** -0.25
    a = round_to(_stored(rng.standard_normal(sa) * s, ta), dtype)
    b = round_to(_stored(rng.standard_normal(sb) * s, tb), dtype)
    csh = _c_shape(cs, osh)
    if csh == ():
        csh = (1,)  # wp.array has no 0-d form
    c = round_to(rng.standard_normal(csh), dtype) if csh is not None else None
    G = round_to(rng.standard_normal(osh), dtype)
    got = _tape_grads(a, b, c, G, dtype, device, 1.25, -0.5, ta, tb)
    ref = _ref(a, b, c, G, 1.25, -0.5, ta, tb)
    for name, x, r in zip("abc", got, ref):
        if r is None:
            assert x is None
            continue
        assert x.shape == r.shape, name
        cmp = compare(x, r, dtype)
        if name == "c" and r.size < G.size and not cmp.ok and cmp.worst_excess <= 1.0:
            # A broadcast c's gradient is beta * a sum of G over the broadcast dimensions: its rounding
            # error scales with beta * sum|G|, not with the (possibly cancelling) sum itself, so the
            # Frobenius bound is taken relative to that scale (the elementwise bound still applies).
            scale = np.abs(_ref(a, b, c, np.abs(G), 1.25, -0.5, ta, tb)[2])
            err = float(np.linalg.norm(np.asarray(x, np.float64) - r) / np.linalg.norm(scale))
            assert err <= cmp.bound, f"dc: {cmp}; relative to beta*sum|G|: {err:.2e}"
            continue
        assert cmp.ok, f"d{name}: {cmp}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["2d", "b2", "2b"])
def test_tape_16bit(device, dtype, case, rng):
    if dtype == "bfloat16" and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    sa, sb = BATCH_SHAPES[case]
    sa, sb = sa[:-2] + (33, 70), sb[:-2] + (70, 29)
    osh = _out_shape(sa, sb)
    s = 70 ** -0.25
    a, b = round_to(rng.standard_normal(sa) * s, dtype), round_to(rng.standard_normal(sb) * s, dtype)
    c = round_to(rng.standard_normal((29,)), dtype)
    G = round_to(rng.standard_normal(osh), dtype)
    got = _tape_grads(a, b, c, G, dtype, device, 1.0, 1.0, False, False)
    ref = _ref_np(a, b, c, G, 1.0, 1.0, False, False)
    for name, x, r in zip("abc", got, ref):
        cmp = compare(x, r, dtype)
        assert cmp.ok, f"d{name} {dtype}: {cmp}"


@wp.kernel
def _weighted_sum(d: wp.array3d(dtype=wp.float64), w: wp.array3d(dtype=wp.float64),
                  loss: wp.array(dtype=wp.float64)):
    i, j, k = wp.tid()
    wp.atomic_add(loss, 0, d[i, j, k] * w[i, j, k])


def _loss_setup(device, rng):
    a, b, c = rng.standard_normal((NB, M, K)), rng.standard_normal((K, N)), rng.standard_normal((N,))
    W = rng.standard_normal((NB, M, N))
    A, B, C = (_wp(x, "float64", device) for x in (a, b, c))
    Wa = make(W, "float64", "warp", device)
    ref = _ref_np(a, b, c, W, 1.0, 1.0, False, False)
    return A, B, C, Wa, ref


def _forward_loss(A, B, C, Wa, device):
    D = warp_gemm.gemm(A, B, C, beta=1.0)
    loss = wp.zeros(1, dtype=wp.float64, device=device, requires_grad=True)
    wp.launch(_weighted_sum, dim=D.shape, inputs=[D, Wa], outputs=[loss], device=device)
    return D, loss


@pytest.mark.parametrize("device", DEVICES)
def test_tape_accumulates_over_two_tapes(device, rng):
    """Two forward/backward passes without zeroing: every gradient doubles (Warp adds, never overwrites)."""
    A, B, C, Wa, ref = _loss_setup(device, rng)
    for _ in range(2):
        tape = wp.Tape()
        with tape:
            _, loss = _forward_loss(A, B, C, Wa, device)
        tape.backward(loss)
    for X, r in zip((A, B, C), ref):
        np.testing.assert_allclose(to_f64(X.grad), 2 * r, rtol=1e-12, atol=1e-12)
    tape.zero()
    for X in (A, B, C):
        assert not to_f64(X.grad).any()


@pytest.mark.parametrize("device", DEVICES)
def test_tape_backward_twice_like_warp_kernels(device, rng):
    """One tape, ``backward(loss)`` twice: the output's gradient is consumed after use on Warp releases that
    consume it (1.19: final-write-wins, unless retain_grad), so the second pass adds the same gradients."""
    if not wg_autograd.CONSUMES_OUTPUT_GRAD:
        pytest.skip("this Warp does not consume output gradients")
    A, B, C, Wa, ref = _loss_setup(device, rng)
    tape = wp.Tape()
    with tape:
        D, loss = _forward_loss(A, B, C, Wa, device)
    tape.backward(loss)
    assert not to_f64(D.grad).any()
    tape.backward(loss)
    for X, r in zip((A, B, C), ref):
        np.testing.assert_allclose(to_f64(X.grad), 2 * r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_tape_out_and_retain_grad(device, rng):
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    A, B = _wp(a, "float64", device), _wp(b, "float64", device, grad=False)
    bad = make(np.full((M, N), np.nan), "float64", "warp", device)
    with wp.Tape():
        with pytest.raises(ValueError, match="requires_grad"):
            warp_gemm.matmul(A, B, out=bad)
    assert np.isnan(to_f64(bad)).all()
    out = wp.zeros((M, N), dtype=wp.float64, device=device, requires_grad=True)
    if wg_autograd.CONSUMES_OUTPUT_GRAD:
        out.retain_grad = True
    tape = wp.Tape()
    with tape:
        res = warp_gemm.matmul(A, B, out=out)
    assert res is out
    G = rng.standard_normal((M, N))
    tape.backward(grads={out: make(G, "float64", "warp", device)})
    np.testing.assert_allclose(to_f64(A.grad), G @ b.T, rtol=1e-12)
    np.testing.assert_allclose(to_f64(out.grad), G)  # retained
    assert B.grad is None


def test_tape_not_recording_or_no_grad(rng):
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    A, B = _wp(a, "float64", "cpu"), _wp(b, "float64", "cpu")
    D = warp_gemm.matmul(A, B)  # no tape: an ordinary call
    assert not D.requires_grad
    tape = wp.Tape()
    with tape:
        D = warp_gemm.matmul(_wp(a, "float64", "cpu", False), _wp(b, "float64", "cpu", False))
    assert not D.requires_grad
    assert not tape.launches, "forward-only GEMM kernels recorded on the tape"
    assert wg_autograd.needs_grad(A, B, None) is None


def test_tape_mixed_containers(rng):
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    B = _wp(b, "float64", "cpu")
    with wp.Tape():
        with pytest.raises(TypeError, match="wp.array result"):
            warp_gemm.matmul(a, B)  # the result would be a NumPy array
    A = _wp(a, "float64", "cpu")
    tape = wp.Tape()
    with tape:
        D = warp_gemm.matmul(A, b)  # b is NumPy: no gradient for it, but dA needs it
    tape.backward(grads={D: make(np.ones((M, N)), "float64", "warp", "cpu")})
    np.testing.assert_allclose(to_f64(A.grad), np.ones((M, N)) @ b.T, rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_tape_out_dtype_differs(device, rng):
    """float16 operands, float32 out: the float32 gradient is not rounded to float16 before the GEMMs."""
    a, b = round_to(rng.standard_normal((M, K)), "float16"), round_to(rng.standard_normal((K, N)), "float16")
    A, B = _wp(a, "float16", device), _wp(b, "float16", device)
    out = wp.zeros((M, N), dtype=wp.float32, device=device, requires_grad=True)
    tape = wp.Tape()
    with tape:
        warp_gemm.matmul(A, B, out=out)
    G = rng.standard_normal((M, N)).astype(np.float32).astype(np.float64)
    tape.backward(grads={out: make(G, "float32", "warp", device)})
    assert A.grad.dtype == wp.float16
    assert compare(to_f64(A.grad), G @ b.T, "float16").ok
    assert compare(to_f64(B.grad), a.T @ G, "float16").ok


@pytest.mark.parametrize("device", DEVICES)
def test_tape_k0(device, rng):
    A = _wp(np.zeros((M, 0)), "float64", device)
    B = _wp(np.zeros((0, N)), "float64", device)
    C = _wp(rng.standard_normal((N,)), "float64", device)
    tape = wp.Tape()
    with tape:
        D = warp_gemm.gemm(A, B, C, beta=3.0)
    G = rng.standard_normal((M, N))
    tape.backward(grads={D: make(G, "float64", "warp", device)})
    np.testing.assert_allclose(to_f64(C.grad), 3.0 * G.sum(0), rtol=1e-12)
