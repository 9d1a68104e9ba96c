"""warp_gemm.torch: the custom operators, their fake implementations and autograd, torch.compile,
torch.export, the Linear module and the DDP example (CPU; CUDA-graph tests carry the gpu marker).

References are float64 torch expressions on the same (fresh random) inputs.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import warp_gemm._compat as compat  # noqa: E402
import warp_gemm.torch as wgt  # noqa: E402
from warp_gemm.families.common import epilogue  # noqa: E402

pytestmark = pytest.mark.skipif(not compat.HAS_CPU_TILES, reason="CPU tile kernels need warp-lang >= 1.7")

F64 = torch.float64
ACTS = [None, *epilogue.ACTIVATIONS]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def gen(rng):
    """A torch generator seeded from the test's fresh numpy seed."""
    return torch.Generator().manual_seed(int(rng.integers(2**62)))


@pytest.fixture(params=["host", "tiles"])
def cpu_backend(request):
    """Both CPU product paths under the operators: the BLAS host family (the default) and Warp's tile
    kernels (what CUDA runs)."""
    import warp_gemm

    opts = getattr(warp_gemm, "options", None)
    if opts is None:
        pytest.skip("this warp_gemm has no options()")
    with opts(cpu_backend=request.param):
        yield request.param


def randn(gen, *shape, dtype=F64, grad=False):
    return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_(grad)


def ref_act(name, z):
    return epilogue.reference(name, z)


def close64(got, want):
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


# --- gemm / matmul forward ------------------------------------------------------------------------------
GEMM_CASES = [
    # (a shape, b shape, c shape or None) before the transposes
    ((5, 7), (7, 3), None),
    ((5, 7), (7, 3), (3,)),
    ((5, 7), (7, 3), (5, 1)),
    ((5, 7), (7, 3), (5, 3)),
    ((2, 5, 7), (2, 7, 3), (1, 3)),
    ((2, 5, 7), (7, 3), (2, 5, 3)),
    ((5, 7), (3, 7, 3), (3, 1, 3)),
    ((1, 5, 7), (3, 7, 3), (3,)),
]


def _t(x, flag):
    return x.transpose(-1, -2) if flag else x


@pytest.mark.parametrize("trans", ["NN", "TN", "NT", "TT"])
@pytest.mark.parametrize("case", GEMM_CASES, ids=[f"{a}x{b}+{c}" for a, b, c in GEMM_CASES])
@pytest.mark.usefixtures("cpu_backend")
def test_gemm_forward_matches_float64_torch(case, trans, gen):
    sa, sb, sc = case
    ta, tb = trans[0] == "T", trans[1] == "T"
    # store the transposed operands contiguously, so op(a) is a real transposed read
    a = _t(randn(gen, *sa), ta).contiguous()
    b = _t(randn(gen, *sb), tb).contiguous()
    c = randn(gen, *sc) if sc else None
    alpha, beta = 1.5, (-0.75 if c is not None else 0.0)
    d = wgt.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)
    want = alpha * (_t(a, ta) @ _t(b, tb)) + (beta * c if c is not None else 0)
    assert d.shape == want.shape and d.dtype == F64
    close64(d, want)


def test_matmul_float32_within_dot_product_bound(gen):
    M, K, N = 33, 65, 17
    a, b = randn(gen, M, K, dtype=torch.float32), randn(gen, K, N, dtype=torch.float32)
    d = wgt.matmul(a, b)
    assert d.dtype == torch.float32 and d.shape == (M, N)
    want = a.double() @ b.double()
    bound = 2 * K * torch.finfo(torch.float32).eps * (a.double().abs() @ b.double().abs())
    assert bool(((d.double() - want).abs() <= bound).all())


@pytest.mark.usefixtures("cpu_backend")
def test_matmul_is_zero_copy_on_strided_inputs(gen):
    base = randn(gen, 9, 14)
    a = base[:, ::2]  # a strided (9, 7) view
    b = randn(gen, 3, 7).t()  # a transposed view
    close64(wgt.matmul(a, b), a @ b)


# --- gemm gradients -----------------------------------------------------------------------------------------
GRAD_CASES = [
    ((3, 5), (5, 4), (4,), "NN"),
    ((5, 3), (4, 5), (3, 1), "TT"),
    ((2, 3, 5), (5, 4), (1, 4), "NN"),
    ((3, 5), (2, 4, 5), (2, 3, 4), "NT"),
    ((1, 5, 3), (2, 5, 4), None, "TN"),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[f"{a}x{b}+{c}-{t}" for a, b, c, t in GRAD_CASES])
@pytest.mark.usefixtures("cpu_backend")
def test_gemm_gradcheck(case, gen):
    sa, sb, sc, trans = case
    ta, tb = trans[0] == "T", trans[1] == "T"
    a, b = randn(gen, *sa, grad=True), randn(gen, *sb, grad=True)
    inputs = (a, b) + ((randn(gen, *sc, grad=True),) if sc else ())

    def f(a, b, c=None):
        return wgt.gemm(a, b, c, alpha=0.7, beta=1.3 if c is not None else 0.0, trans_a=ta, trans_b=tb)

    assert torch.autograd.gradcheck(f, inputs)


@pytest.mark.parametrize("case", GRAD_CASES, ids=[f"{a}x{b}+{c}-{t}" for a, b, c, t in GRAD_CASES])
def test_gemm_gradients_equal_torch_expression(case, gen):
    """Exact (float64) gradients against torch's own, where gradcheck's tolerance (rtol 1e-3) is loose."""
    sa, sb, sc, trans = case
    ta, tb = trans[0] == "T", trans[1] == "T"
    a, b = randn(gen, *sa, grad=True), randn(gen, *sb, grad=True)
    c = randn(gen, *sc, grad=True) if sc else None
    ts = [t for t in (a, b, c) if t is not None]
    beta = 0.5 if c is not None else 0.0
    d = wgt.gemm(a, b, c, alpha=2.0, beta=beta, trans_a=ta, trans_b=tb)
    g = randn(gen, *d.shape)
    d.backward(g)
    got = [t.grad for t in ts]
    for t in ts:
        t.grad = None
    (2.0 * (_t(a, ta) @ _t(b, tb)) + (beta * c if c is not None else 0)).backward(g)
    for x, t in zip(got, ts):
        assert x.shape == t.shape
        close64(x, t.grad)


# --- linear --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("act", ACTS, ids=str)
@pytest.mark.parametrize("xshape", [(7,), (5, 7), (2, 3, 7), (2, 1, 3, 7)], ids=str)
@pytest.mark.parametrize("has_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.usefixtures("cpu_backend")
def test_linear_forward_matches_float64_torch(act, xshape, has_bias, gen):
    x, w = randn(gen, *xshape), randn(gen, 6, 7)
    b = randn(gen, 6) if has_bias else None
    y = wgt.linear(x, w, b, activation=act)
    want = ref_act(act, torch.nn.functional.linear(x, w, b))
    assert y.shape == want.shape == (*xshape[:-1], 6)
    close64(y, want)


@pytest.mark.parametrize("act", ACTS, ids=str)
@pytest.mark.usefixtures("cpu_backend")
def test_linear_gradcheck(act, gen):
    while True:  # for relu, keep pre-activations away from the kink (finite differences step 1e-6)
        x = randn(gen, 2, 3, 5, grad=True)
        w, b = randn(gen, 4, 5, grad=True), randn(gen, 4, grad=True)
        with torch.no_grad():
            if act != "relu" or bool((torch.nn.functional.linear(x, w, b).abs() > 1e-4).all()):
                break
    assert torch.autograd.gradcheck(lambda x, w, b: wgt.linear(x, w, b, activation=act), (x, w, b))


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_linear_gradcheck_recomputes_unsaved_preactivation(act, gen):
    """save_preact=False (the torch.export choice): the backward recomputes the pre-activation."""
    x, w, b = randn(gen, 3, 5, grad=True), randn(gen, 4, 5, grad=True), randn(gen, 4, grad=True)

    def f(x, w, b):
        y, z = torch.ops.warp_gemm.linear(x, w, b, act, False)
        assert z.numel() == 0
        return y

    assert torch.autograd.gradcheck(f, (x, w, b))


@pytest.mark.parametrize("act", ACTS, ids=str)
def test_linear_gradients_equal_torch_expression(act, gen):
    x, w, b = randn(gen, 2, 3, 5, grad=True), randn(gen, 4, 5, grad=True), randn(gen, 4, grad=True)
    g = randn(gen, 2, 3, 4)
    wgt.linear(x, w, b, activation=act).backward(g)
    got = [t.grad for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    ref_act(act, torch.nn.functional.linear(x, w, b)).backward(g)
    for mine, t in zip(got, (x, w, b)):
        close64(mine, t.grad)


def test_linear_keeps_preactivation_only_when_needed(gen, monkeypatch):
    x, w = randn(gen, 3, 5), randn(gen, 4, 5, grad=True)
    calls = []
    real = wgt.ops._core_linear

    def spy(x2d, weight, bias, activation, out=None, z_out=None):
        calls.append((activation, None if z_out is None else tuple(z_out.shape)))
        return real(x2d, weight, bias, activation, out, z_out)

    monkeypatch.setattr(wgt.ops, "_core_linear", spy)
    y = wgt.linear(x, w, None, activation="gelu")
    with torch.no_grad():
        wgt.linear(x, w, None, activation="gelu")
    wgt.linear(x, w, None, activation="relu")  # relu' follows from y
    wgt.linear(x, w.detach(), None, activation="silu")  # nothing needs a gradient
    assert calls == [("gelu", (3, 4)), ("gelu", None), ("relu", None), ("silu", None)]
    close64(y, ref_act("gelu", x @ w.detach().t()))


@pytest.mark.parametrize("bad", ["swish", "GELU", "none", "", 3])
def test_unknown_activation_is_a_value_error_naming_it(bad, gen):
    x, w = randn(gen, 3, 5), randn(gen, 4, 5)
    with pytest.raises(ValueError, match=f"unknown activation {bad!r}.*'gelu_tanh'"):
        wgt.linear(x, w, activation=bad)
    with pytest.raises(ValueError, match=f"unknown activation {bad!r}"):
        wgt.Linear(5, 4, activation=bad)
    with pytest.raises(ValueError, match=f"unknown activation {bad!r}"):
        epilogue.check_activation(bad)


def test_linear_shape_errors(gen):
    with pytest.raises(ValueError, match="features"):
        wgt.linear(randn(gen, 3, 5), randn(gen, 4, 6))
    with pytest.raises(ValueError, match="bias"):
        wgt.linear(randn(gen, 3, 5), randn(gen, 4, 5), randn(gen, 3))


def test_opcheck_gemm_and_linear(gen):
    """torch.library.opcheck: schema, fake implementation vs real, autograd registration."""
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    a, b, c = randn(gen, 2, 3, 5, grad=True), randn(gen, 5, 4, grad=True), randn(gen, 4, grad=True)
    opcheck(torch.ops.warp_gemm.gemm.default, (a, b, c, 1.0, 2.0, False, False, False))
    x, w = randn(gen, 3, 5, grad=True), randn(gen, 4, 5, grad=True)
    opcheck(torch.ops.warp_gemm.linear.default, (x, w, c, "gelu", True))
    opcheck(torch.ops.warp_gemm.activation_backward.default, (randn(gen, 3, 4), randn(gen, 3, 4), "silu"))


# --- torch.compile / torch.export ---------------------------------------------------------------------------
def _capturing_backend(graphs):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def grab(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=grab, bw_compiler=grab)


def _targets(gm):
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def test_compile_fullgraph_forward_and_backward(gen):
    torch._dynamo.reset()
    graphs = []
    f = torch.compile(lambda x, y: torch.relu(wgt.matmul(x, y)), fullgraph=True, backend=_capturing_backend(graphs))
    x, y = randn(gen, 6, 5, grad=True), randn(gen, 5, 4, grad=True)
    out = f(x, y)
    g = randn(gen, 6, 4)
    out.backward(g)
    x2, y2 = x.detach().requires_grad_(), y.detach().requires_grad_()
    want = torch.relu(x2 @ y2)
    want.backward(g)
    close64(out, want)
    close64(x.grad, x2.grad)
    close64(y.grad, y2.grad)
    assert len(graphs) == 2  # one forward graph, one backward graph
    assert "warp_gemm.gemm.default" in _targets(graphs[0])
    assert "warp_gemm.gemm.default" in _targets(graphs[1])  # the backward products are warp_gemm's too


def test_compile_mlp_of_linear_aot_eager(gen):
    torch._dynamo.reset()
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    m = torch.nn.Sequential(wgt.Linear(5, 8, activation="gelu", dtype=F64), wgt.Linear(8, 3, activation="tanh", dtype=F64))
    cm = torch.compile(m, fullgraph=True, backend="aot_eager")
    x = randn(gen, 2, 4, 5)
    out = cm(x)
    out.sum().backward()
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    ref = m(x)
    ref.sum().backward()
    close64(out, ref)
    for g, p in zip(grads, m.parameters()):
        close64(g, p.grad)


def test_compile_inductor(gen):
    """One inductor run (about 20 s on 2 CPU cores): the custom op stays an opaque call in its code."""
    torch._dynamo.reset()
    f = torch.compile(lambda x, w, b: wgt.linear(x, w, b, activation="silu") * 2.0, fullgraph=True)
    x, w, b = randn(gen, 3, 5, grad=True), randn(gen, 4, 5, grad=True), randn(gen, 4, grad=True)
    out = f(x, w, b)
    out.sum().backward()
    close64(out, 2.0 * ref_act("silu", torch.nn.functional.linear(x.detach(), w.detach(), b.detach())))
    x2, w2, b2 = (t.detach().requires_grad_() for t in (x, w, b))
    (2.0 * torch.nn.functional.silu(torch.nn.functional.linear(x2, w2, b2))).sum().backward()
    for t, t2 in zip((x, w, b), (x2, w2, b2)):
        close64(t.grad, t2.grad)


def test_export_captures_linear_module(gen):
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    m = torch.nn.Sequential(wgt.Linear(5, 8, activation="relu", dtype=F64), wgt.Linear(8, 3, dtype=F64))
    x = randn(gen, 4, 5)
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(m, (x,), dynamic_shapes=({0: batch},))
    targets = _targets(ep.graph_module)
    assert "warp_gemm.linear.default" in targets
    assert not any("addmm" in t or "aten.mm" in t or "aten.linear" in t for t in targets)
    for rows in (4, 9):  # the dynamic batch dimension
        xi = randn(gen, rows, 5)
        close64(ep.module()(xi), m(xi))


# --- the module ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_linear_module_init_matches_torch_nn_linear(bias, gen):
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    torch.manual_seed(seed)
    mine = wgt.Linear(37, 11, bias=bias, activation="gelu")
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(37, 11, bias=bias)
    assert mine.weight.shape == theirs.weight.shape and mine.weight.dtype == theirs.weight.dtype
    assert torch.equal(mine.weight, theirs.weight)
    assert (mine.bias is None) == (theirs.bias is None)
    if bias:
        assert torch.equal(mine.bias, theirs.bias)
    bound = 1 / math.sqrt(37)  # kaiming_uniform(a=sqrt(5)) and the bias share this bound
    assert float(mine.weight.detach().abs().max()) <= bound
    assert [n for n, _ in mine.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert repr(mine) == "Linear(in_features=37, out_features=11, bias=%s, activation='gelu')" % bias


def test_linear_module_init_statistics():
    torch.manual_seed(int(time.time_ns() % 2**31))
    w = wgt.Linear(400, 300).weight.detach().double()
    bound = 1 / math.sqrt(400)
    # uniform(-bound, bound): mean 0, std bound / sqrt(3); 120000 draws -> standard errors ~1e-4 * bound
    assert abs(float(w.mean())) < 6 * bound / math.sqrt(3) / math.sqrt(w.numel())
    assert abs(float(w.std()) - bound / math.sqrt(3)) < 0.01 * bound


def test_linear_module_forward_dtype_and_device(gen):
    m = wgt.Linear(5, 3, activation="silu", dtype=F64)
    assert m.weight.dtype == F64 and m.weight.device.type == "cpu"
    x = randn(gen, 7, 5)
    close64(m(x), torch.nn.functional.silu(torch.nn.functional.linear(x, m.weight, m.bias)))


# --- DDP -----------------------------------------------------------------------------------------------------------
def _run_ddp(*args, timeout=120):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(ROOT / "examples" / "08_ddp_linear.py"), "--device", "cpu", *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not available")
def test_ddp_example_matches_torch_nn_linear():
    r = _run_ddp("--steps", "12", "--dtype", "float64", "--tol", "1e-10")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout and "2 ranks" in r.stdout, r.stdout


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not available")
def test_ddp_example_exits_nonzero_on_mismatch():
    # float32 products differ from torch's in the last bits, so a tolerance of 1e-12 must fail
    r = _run_ddp("--steps", "2", "--tol", "1e-12")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "MISMATCH" in r.stdout, r.stdout


# --- CUDA ------------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_graph_capture_of_linear_and_matmul():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    g = torch.Generator(device="cuda").manual_seed(int(time.time_ns() % 2**31))
    x = torch.randn(64, 96, device="cuda", generator=g)
    w = torch.randn(80, 96, device="cuda", generator=g)
    b = torch.randn(80, device="cuda", generator=g)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up (kernel loads) on a side stream, as torch recommends
        for _ in range(2):
            wgt.linear(x, w, b, activation="gelu")
            wgt.matmul(x, w.t())
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = wgt.linear(x, w, b, activation="gelu")
        d = wgt.matmul(x, w.t())
    x.copy_(torch.randn(64, 96, device="cuda", generator=g))
    graph.replay()
    torch.cuda.synchronize()
    x64, w64, b64 = x.double(), w.double(), b.double()
    want_d = x64 @ w64.t()
    bound = 2 * 96 * torch.finfo(torch.float32).eps * (x64.abs() @ w64.abs().t())
    assert bool(((d.double() - want_d).abs() <= bound).all())
    want_y = torch.nn.functional.gelu(want_d + b64)
    eps = torch.finfo(torch.float32).eps
    assert bool(((y.double() - want_y).abs() <= 1.2 * bound + 8 * eps * (1 + want_y.abs())).all())


# --- the eager fast path -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["matmul", "gemm", "linear"])
def test_eager_fast_path_equals_dispatched_op(fn, gen, monkeypatch):
    a, b, c = randn(gen, 2, 5, 7), randn(gen, 7, 4), randn(gen, 4)
    w = randn(gen, 4, 7)
    call = {"matmul": lambda: wgt.matmul(a, b), "gemm": lambda: wgt.gemm(a, b, c, alpha=0.5, beta=2.0),
            "linear": lambda: wgt.linear(a, w, c, activation="silu")}[fn]
    fast = call()
    monkeypatch.setattr(wgt.ops, "EAGER_FAST_PATH", False)
    slow = call()
    assert torch.equal(fast, slow)


def test_dispatch_modes_see_the_operators(gen):
    """Under a TorchDispatchMode (as make_fx, export, FlopCounterMode use) calls are not short-cut."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    a, b, w = randn(gen, 3, 5), randn(gen, 5, 4), randn(gen, 4, 5)
    with torch.no_grad(), Record():
        d = wgt.matmul(a, b)
        y = wgt.linear(a, w, activation="relu")
    close64(d, a @ b)
    close64(y, torch.relu(a @ w.t()))
    assert "warp_gemm.gemm.default" in seen and "warp_gemm.linear.default" in seen


def test_double_backward(gen):
    a, b, c = randn(gen, 3, 4, grad=True), randn(gen, 4, 2, grad=True), randn(gen, 2, grad=True)
    assert torch.autograd.gradgradcheck(lambda a, b, c: wgt.gemm(a, b, c, alpha=1.5, beta=0.5), (a, b, c))
    x, w = randn(gen, 3, 4, grad=True), randn(gen, 2, 4, grad=True)
    assert torch.autograd.gradgradcheck(lambda x, w, c: wgt.linear(x, w, c, activation="tanh"), (x, w, c))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("act", ["gelu", "silu", "tanh"])
@pytest.mark.usefixtures("cpu_backend")
def test_linear_low_precision_within_rounding_bound(dtype, act, gen):
    """16-bit and float32 inputs: within the GEMM's dot-product bound plus the roundings of z and y,
    propagated through the activation (|f'| <= 1.13 for these)."""
    if dtype == torch.bfloat16 and not compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    K = 33
    x, w, b = (randn(gen, *s).to(dtype) for s in ((9, K), (7, K), (7,)))
    y = wgt.linear(x, w, b, activation=act)
    assert y.dtype == dtype and y.shape == (9, 7)
    x64, w64, b64 = x.double(), w.double(), b.double()
    z = torch.nn.functional.linear(x64, w64, b64)
    want = ref_act(act, z)
    u = torch.finfo(dtype).eps / 2  # unit roundoff of the storage dtype
    acc_u = torch.finfo(torch.float32).eps / 2  # 16-bit inputs accumulate in float32
    gemm_err = 2 * K * acc_u * (x64.abs() @ w64.abs().t() + b64.abs())
    bound = 1.13 * (gemm_err + u * z.abs()) + u * want.abs() + 1e-30
    assert bool(((y.double() - want).abs() <= bound).all()), float(((y.double() - want).abs() / bound).max())
