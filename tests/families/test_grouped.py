"""The grouped family: warp_gemm.grouped_mm (torch.nn.functional.grouped_mm's four cases) and grouped_matmul.

Every result is checked against a float64 loop over the groups (inputs rounded to the tested dtype first, the
tolerance model of warp_gemm.tools.tolerance), in results pre-filled with NaN so an unwritten tile fails: new
results are allocated through ``empty_like_caller``, which the ``nan_results`` fixture poisons. On the CPU the
conftest runs the tile kernels (the CUDA kernels' twins); the ``cpu_host`` tests run the NumPy host path.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from conftest import DEVICES, kind_ok, make, nan_like, to_f64, torch

import warp_gemm
from warp_gemm import _compat
from warp_gemm.core import grouped as core_grouped
from warp_gemm.families.grouped import rules
from warp_gemm.tools.tolerance import compare, round_to

CASES = ("2d3d", "3d2d", "2d2d", "3d3d")
DTYPES = ("float16", "bfloat16", "float32", "float64")


@pytest.fixture
def nan_results(monkeypatch):
    """New results come pre-filled with NaN."""

    def poisoned(kind, ref, shape, dtype):
        return nan_like(kind, shape, dtype, str(ref.device))

    monkeypatch.setattr(core_grouped, "empty_like_caller", poisoned)


# --- inputs and the float64 reference --------------------------------------------------------------------------
def group_ends(rng, G: int, avg: int, empty: bool = True) -> np.ndarray:
    """Cumulative ends of G groups of random sizes around ``avg``, a third of them empty when ``empty``."""
    sizes = rng.integers(1, 2 * avg + 1, G)
    if empty and G > 1:
        gone = rng.random(G) < 0.33
        gone[0] = True  # the first group empty (s = 0 = e)
        gone[-1] = False  # and the last one not: some product always remains
        sizes[gone] = 0
    return np.cumsum(sizes).astype(np.int32)


def _mat(x64, dtype, kind, device, transposed: bool):
    """A container holding ``x64`` (last two dims), stored transposed when asked (then read as a view)."""
    if not transposed:
        return make(x64, dtype, kind, device)
    st = make(np.ascontiguousarray(np.swapaxes(x64, -1, -2)), dtype, kind, device)
    if kind == "torch":
        return st.transpose(-2, -1)
    if kind == "numpy":
        return np.swapaxes(st, -1, -2)
    axes = (0, 2, 1) if st.ndim == 3 else (1, 0)
    return st.transpose(axes)


def operands(case, rng, dtype, kind, device, G=3, M=37, N=29, K=45, avg=11, a_t=False, b_t=False, tail=3,
             empty=True, multiple=1):
    """``(mat_a, mat_b, offs, a64, b64, ends)`` for ``case``: float64 values already rounded to ``dtype``, scaled
    so results have unit variance; ``ends`` None for 3d3d. The split dimension has ``tail`` extra entries (more
    up to a ``multiple``)."""
    ends = None if case == "3d3d" else group_ends(rng, G, avg, empty)
    total = 0 if ends is None else int(ends[-1] if len(ends) else 0) + tail
    total = -(-total // multiple) * multiple
    if case == "2d3d":
        ash, bsh, kk = (total, K), (G, K, N), K
    elif case == "3d2d":
        ash, bsh, kk = (G, M, K), (K, total), K
    elif case == "2d2d":
        ash, bsh, kk = (M, total), (total, N), max(avg, 1)
    else:
        ash, bsh, kk = (G, M, K), (G, K, N), K
    s = kk ** -0.25
    a64 = round_to(rng.standard_normal(ash) * s, dtype)
    b64 = round_to(rng.standard_normal(bsh) * s, dtype)
    a = _mat(a64, dtype, kind, device, a_t)
    b = _mat(b64, dtype, kind, device, b_t)
    offs = None if ends is None else _offs(ends, kind, device)
    return a, b, offs, a64, b64, ends


def _offs(ends, kind, device):
    if kind == "numpy":
        return ends.copy()
    if kind == "torch":
        return torch.tensor(ends, dtype=torch.int32, device=device)
    return wp.array(ends, dtype=wp.int32, device=device)


def reference(case, a64, b64, ends, G):
    """The float64 loop over the groups (zeros after offs[-1])."""
    if case == "3d3d":
        return a64 @ b64
    starts = np.concatenate(([0], ends[:-1])).astype(int) if len(ends) else []
    if case == "2d3d":
        out = np.zeros((a64.shape[0], b64.shape[2]))
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[s:e] = a64[s:e] @ b64[g]
    elif case == "3d2d":
        out = np.zeros((a64.shape[1], b64.shape[1]))
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[:, s:e] = a64[g] @ b64[:, s:e]
    else:
        out = np.zeros((G, a64.shape[0], b64.shape[1]))
        for g, (s, e) in enumerate(zip(starts, ends)):
            out[g] = a64[:, s:e] @ b64[s:e]
    return out


def check(out, ref, dtype, tf32=False):
    c = compare(to_f64(out), ref, dtype, tf32)
    assert c.ok, str(c)


def _skip(kind, dtype, device):
    why = kind_ok(kind, dtype, device)
    if why:
        pytest.skip(why)


# --- the four cases ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_cases_against_loop(case, dtype, device, rng, nan_results):
    a, b, offs, a64, b64, ends = operands(case, rng, dtype, "torch", device)
    out = warp_gemm.grouped_mm(a, b, offs=offs)
    assert isinstance(out, torch.Tensor) and out.dtype == a.dtype and out.device == a.device
    check(out, reference(case, a64, b64, ends, 3), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["NT", "TN", "TT"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("case", CASES)
def test_layouts(case, dtype, layout, device, rng, nan_results):
    """Transposed views (``W.transpose(-2, -1)`` of (G, N, K) weights, ``x.T``) read in place; a split along
    the stored columns takes the checked copies."""
    a, b, offs, a64, b64, ends = operands(case, rng, dtype, "torch", device, a_t=layout[0] == "T",
                                          b_t=layout[1] == "T")
    check(warp_gemm.grouped_mm(a, b, offs=offs), reference(case, a64, b64, ends, 3), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["warp", "numpy"])
@pytest.mark.parametrize("case", CASES)
def test_containers(case, kind, device, rng, nan_results):
    _skip(kind, "float32", device)
    a, b, offs, a64, b64, ends = operands(case, rng, "float32", kind, device)
    out = warp_gemm.grouped_mm(a, b, offs=offs)
    assert type(out) is type(a) and tuple(out.shape) == reference(case, a64, b64, ends, 3).shape
    check(out, reference(case, a64, b64, ends, 3), "float32")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["2d3d", "3d2d", "2d2d"])
def test_hundreds_of_groups(case, device, rng, nan_results):
    G = 300
    a, b, offs, a64, b64, ends = operands(case, rng, "float32", "torch", device, G=G, M=9, N=13, K=7, avg=3)
    check(warp_gemm.grouped_mm(a, b, offs=offs), reference(case, a64, b64, ends, G), "float32")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_one_group(case, device, rng, nan_results):
    a, b, offs, a64, b64, ends = operands(case, rng, "float16", "torch", device, G=1, avg=70, tail=0)
    check(warp_gemm.grouped_mm(a, b, offs=offs), reference(case, a64, b64, ends, 1), "float16")


@pytest.mark.parametrize("device", DEVICES)
def test_all_groups_empty_and_tail(device, rng, nan_results):
    """Every group empty: the result is the tail's zeros (no product at all)."""
    a = torch.tensor(rng.standard_normal((5, 8)), dtype=torch.float32, device=device)
    b = torch.tensor(rng.standard_normal((4, 8, 6)), dtype=torch.float32, device=device)
    offs = torch.zeros(4, dtype=torch.int32, device=device)
    out = warp_gemm.grouped_mm(a, b, offs=offs)
    assert torch.equal(out.cpu(), torch.zeros(5, 6))
    out = warp_gemm.grouped_mm(a.T.contiguous(), torch.tensor(rng.standard_normal((5, 3)), dtype=torch.float32,
                                                                   device=device), offs=torch.zeros(2, dtype=torch.int32, device=device))
    assert out.shape == (2, 8, 3) and torch.equal(out.cpu(), torch.zeros(2, 8, 3))  # K = 0 for every group


@pytest.mark.parametrize("device", DEVICES)
def test_strided_both_ways_is_copied(device, rng, nan_results):
    a, b, offs, a64, b64, ends = operands("2d3d", rng, "float32", "torch", device, K=20)
    wide = torch.zeros(a.shape[0], 2 * a.shape[1], dtype=a.dtype, device=device)
    wide[:, ::2] = a
    check(warp_gemm.grouped_mm(wide[:, ::2], b, offs=offs), reference("2d3d", a64, b64, ends, 3), "float32")


# --- bias, out_dtype, tf32 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("per_group", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_bias(case, per_group, device, rng, nan_results):
    if case == "3d2d" and per_group:
        pytest.skip("a 3-D x 2-D product's bias is one row over its columns")
    a, b, offs, a64, b64, ends = operands(case, rng, "float64", "torch", device)
    ref = reference(case, a64, b64, ends, 3)
    cols = ref.shape[-1]
    bias64 = rng.standard_normal((3, cols) if per_group else (cols,))
    bias = torch.tensor(bias64, dtype=torch.float64, device=device)
    out = warp_gemm.grouped_mm(a, b, offs=offs, bias=bias)
    if case == "2d3d":
        starts = np.concatenate(([0], ends[:-1]))
        for g, (s, e) in enumerate(zip(starts, ends)):
            ref[s:e] += bias64[g] if per_group else bias64
    elif case == "3d2d":
        ref[:, :ends[-1]] += bias64[:ends[-1]]
    else:
        ref += bias64[:, None, :] if per_group else bias64
    check(out, ref, "float64")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_out_dtype_float32(dtype, device, rng, nan_results):
    a, b, offs, a64, b64, ends = operands("2d3d", rng, dtype, "torch", device, b_t=True)
    out = warp_gemm.grouped_mm(a, b, offs=offs, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    check(out, reference("2d3d", a64, b64, ends, 3), dtype)
    c = compare(to_f64(out), reference("2d3d", a64, b64, ends, 3), "float32")
    assert c.rel_fro < 1e-5, str(c)  # float32 sums, no 16-bit rounding of the result


def test_tf32_kernel_on_cpu(rng, nan_results):
    """The tf32 mma.sync kernel's CPU twin (CUDA takes it with allow_tf32=True; the CPU otherwise stays exact)."""
    spec = rules.choose_spec("float32", "float32", True, "NT", True, 32, 32)
    assert spec.tf32 and spec.mma
    a, b, offs, a64, b64, ends = operands("2d3d", rng, "float32", "torch", "cpu", b_t=True)
    out = core_grouped.grouped_mm(a, b, offs, None, None, True, spec=spec)
    ref = reference("2d3d", a64, b64, ends, 3)
    check(out, ref, "float32", tf32=True)
    assert not compare(to_f64(out), ref, "float32").ok  # really rounded to tf32


# --- the host path (the package's CPU default) and torch's own grouped_mm -------------------------------------------
@pytest.mark.cpu_host
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_host_path_and_torch_reference(case, dtype, rng):
    # sizes of whole 16 bytes: torch's CPU grouped_mm refuses other strides
    a, b, offs, a64, b64, ends = operands(case, rng, dtype, "torch", "cpu", M=40, N=24, K=48, b_t=case == "2d3d",
                                          multiple=8)
    out = warp_gemm.grouped_mm(a, b, offs=offs)
    ref = reference(case, a64, b64, ends, 3)
    check(out, ref, dtype)
    F = torch.nn.functional
    if hasattr(F, "grouped_mm") and dtype != "float64":
        theirs = F.grouped_mm(a, b, offs=offs).double().numpy()
        if case == "2d3d":  # torch leaves the rows after offs[-1] unwritten
            theirs[ends[-1]:] = 0
        elif case == "3d2d":
            theirs[:, ends[-1]:] = 0
        check(theirs, ref, dtype)


# --- errors --------------------------------------------------------------------------------------------------------
def _pair(rng, G=3):
    a = torch.tensor(rng.standard_normal((10, 4)), dtype=torch.float32)
    b = torch.tensor(rng.standard_normal((G, 4, 5)), dtype=torch.float32)
    return a, b


@pytest.mark.parametrize("offs, err, words", [
    (torch.tensor([2, 4, 6], dtype=torch.int64) if torch else None, TypeError, ["int32", "int64"]),
    (torch.tensor([[2, 4, 6]], dtype=torch.int32) if torch else None, ValueError, ["1-D", "[1, 3]"]),
    (torch.tensor([4, 2, 6], dtype=torch.int32) if torch else None, ValueError, ["decreases", "index 1"]),
    (torch.tensor([2, 4, 11], dtype=torch.int32) if torch else None, ValueError, ["past", "10"]),
    (torch.tensor([-1, 4, 6], dtype=torch.int32) if torch else None, ValueError, [">= 0"]),
    (torch.tensor([2, 6], dtype=torch.int32) if torch else None, ValueError, ["group counts", "2", "[3, 4, 5]"]),
    (None, ValueError, ["need offs"]),
])
def test_offs_errors(offs, err, words, rng):
    a, b = _pair(rng)
    with pytest.raises(err) as e:
        warp_gemm.grouped_mm(a, b, offs=offs)
    assert "grouped_mm" in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_operand_errors(rng):
    a, b = _pair(rng)
    offs = torch.tensor([2, 4, 6], dtype=torch.int32)
    with pytest.raises(TypeError, match=r"grouped_mm: mat_a is float32\[10, 4\] but mat_b is float64"):
        warp_gemm.grouped_mm(a, b.double(), offs=offs)
    with pytest.raises(ValueError, match=r"grouped_mm: contraction dimensions differ"):
        warp_gemm.grouped_mm(a, b.transpose(-2, -1), offs=offs)
    with pytest.raises(ValueError, match=r"grouped_mm: offs is given, but 3-D x 3-D"):
        warp_gemm.grouped_mm(b.transpose(-2, -1), b, offs=offs)
    with pytest.raises(ValueError, match=r"grouped_mm: group counts differ: mat_a \[3, 5, 4\] has 3, mat_b \[2"):
        warp_gemm.grouped_mm(b.transpose(-2, -1), b[:2])
    with pytest.raises(TypeError, match=r"grouped_mm: mat_a is a torch array and mat_b a numpy array"):
        warp_gemm.grouped_mm(a, b.numpy(), offs=offs)
    with pytest.raises(TypeError, match=r"grouped_mm: out_dtype float16 is not available for float32"):
        warp_gemm.grouped_mm(a, b, offs=offs, out_dtype=torch.float16)
    with pytest.raises(ValueError, match=r"grouped_mm: bias has shape \[4\]"):
        warp_gemm.grouped_mm(a, b, offs=offs, bias=torch.zeros(4))
    with pytest.raises(TypeError, match=r"grouped_mm: .*int32"):
        warp_gemm.grouped_mm(a.int(), b.int(), offs=offs)


def test_bad_offs_on_the_device_make_nan(rng, monkeypatch, nan_results):
    """Offsets in GPU memory are checked by the table kernel, not the host: bad ones make the whole result NaN.
    (The CPU's host check is switched off here so that the device check runs.)"""
    monkeypatch.setattr(core_grouped, "check_offs_values", lambda *a, **k: None)
    a, b = _pair(rng)
    for ends in ([4, 2, 6], [2, 4, 11], [-1, 4, 6]):
        out = warp_gemm.grouped_mm(a, b, offs=torch.tensor(ends, dtype=torch.int32))
        assert torch.isnan(out).all(), ends
    out = warp_gemm.grouped_mm(a, b, offs=torch.tensor([2, 4, 6], dtype=torch.int32))
    assert not torch.isnan(out).any()


@pytest.mark.gpu
def test_mixed_devices_refused(rng):
    a, b = _pair(rng)
    with pytest.raises(ValueError, match="grouped_mm: mat_a .* is on cpu and mat_b .* on cuda"):
        warp_gemm.grouped_mm(a, b.cuda(), offs=torch.tensor([2, 4, 6], dtype=torch.int32))
    with pytest.raises(ValueError, match="grouped_mm: offs is on cpu"):
        warp_gemm.grouped_mm(a.cuda(), b.cuda(), offs=torch.tensor([2, 4, 6], dtype=torch.int32))


# --- autograd and torch.compile --------------------------------------------------------------------------------------
def _loop_torch(case, a, b, ends):
    """The reference product with torch ops (differentiable), float64."""
    if case == "3d3d":
        return a @ b
    starts = [0] + list(ends[:-1])
    parts = []
    if case == "2d3d":
        out = [a[s:e] @ b[g] for g, (s, e) in enumerate(zip(starts, ends))]
        tail = a.new_zeros((a.shape[0] - int(ends[-1]), b.shape[2]))
        return torch.cat(out + [tail], 0)
    if case == "3d2d":
        out = [a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends))]
        tail = a.new_zeros((a.shape[1], b.shape[1] - int(ends[-1])))
        return torch.cat(out + [tail], 1)
    parts = [a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)]
    return torch.stack(parts)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_autograd_against_float64(case, device, rng):
    a, b, offs, a64, b64, ends = operands(case, rng, "float64", "torch", device, b_t=case == "2d3d")
    a.requires_grad_()
    b.requires_grad_()
    out = warp_gemm.grouped_mm(a, b, offs=offs)
    g = torch.tensor(rng.standard_normal(tuple(out.shape)), dtype=torch.float64, device=device)
    out.backward(g)
    a2 = a.detach().clone().requires_grad_()
    b2 = b.detach().clone().requires_grad_()
    _loop_torch(case, a2, b2, ends).backward(g)
    check(a.grad, to_f64(a2.grad), "float64")
    check(b.grad, to_f64(b2.grad), "float64")


@pytest.mark.parametrize("case", ["2d3d", "3d2d", "3d3d"])
def test_bias_gradient(case, rng):
    a, b, offs, a64, b64, ends = operands(case, rng, "float64", "torch", "cpu")
    cols = (b.shape[-1])
    bias = torch.tensor(rng.standard_normal((3, cols) if case != "3d2d" else (cols,)), requires_grad=True)
    out = warp_gemm.grouped_mm(a, b, offs=offs, bias=bias)
    g = torch.tensor(rng.standard_normal(tuple(out.shape)))
    out.backward(g)
    if case == "2d3d":
        starts = np.concatenate(([0], ends[:-1]))
        want = np.stack([g.numpy()[s:e].sum(0) for s, e in zip(starts, ends)])
    elif case == "3d2d":
        want = g.numpy().sum(0)
        want[ends[-1]:] = 0
    else:
        want = g.numpy().sum(1)
    check(bias.grad, want, "float64")


def test_compile_fullgraph_forward_and_backward(rng):
    torch._dynamo.reset()
    a, b, offs, a64, b64, ends = operands("2d3d", rng, "float64", "torch", "cpu", b_t=True)
    a.requires_grad_()
    f = torch.compile(lambda x, w, o: torch.relu(warp_gemm.grouped_mm(x, w, offs=o)) * 2.0, fullgraph=True,
                      backend="aot_eager")
    out = f(a, b, offs)
    out.sum().backward()
    a2 = a.detach().clone().requires_grad_()
    want = torch.relu(_loop_torch("2d3d", a2, b, ends)) * 2.0
    want.sum().backward()
    check(out, to_f64(want), "float64")
    check(a.grad, to_f64(a2.grad), "float64")


def test_opcheck(rng):
    import warp_gemm.torch  # noqa: F401 -- registers the operators
    a, b, offs, *_ = operands("2d3d", rng, "float64", "torch", "cpu")
    a.requires_grad_()
    torch.library.opcheck(torch.ops.warp_gemm.grouped_mm.default, (a, b, offs, None, None, False))
    la = [torch.randn(3, 4, dtype=torch.float64, requires_grad=True), torch.randn(2, 5, dtype=torch.float64)]
    lb = [torch.randn(4, 2, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64, requires_grad=True)]
    torch.library.opcheck(torch.ops.warp_gemm.grouped_matmul.default, (la, lb, False))


# --- grouped_matmul --------------------------------------------------------------------------------------------------
def _list(rng, n, dtype, kind, device, lo=1, hi=40, transposed=True):
    """n products of random sizes lo..hi (some empty), a random half of the operands stored transposed."""
    la, lb, ra, rb = [], [], [], []
    for i in range(n):
        m, k, nn = (int(x) for x in rng.integers(lo, hi + 1, 3))
        if i == 1:
            k = 0  # a product with K = 0 (zeros)
        if i == 2:
            m = 0  # an empty result
        s = max(k, 1) ** -0.25
        a64 = round_to(rng.standard_normal((m, k)) * s, dtype)
        b64 = round_to(rng.standard_normal((k, nn)) * s, dtype)
        la.append(_mat(a64, dtype, kind, device, transposed and rng.random() < 0.5))
        lb.append(_mat(b64, dtype, kind, device, transposed and rng.random() < 0.5))
        ra.append(a64)
        rb.append(b64)
    return la, lb, ra, rb


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["torch", "warp", "numpy"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_grouped_matmul_into_nan_outputs(dtype, kind, device, rng):
    _skip(kind, dtype, device)
    la, lb, ra, rb = _list(rng, 23, dtype, kind, device)
    out = [nan_like(kind, (a.shape[0], b.shape[1]), dtype, device) for a, b in zip(ra, rb)]
    res = warp_gemm.grouped_matmul(la, lb, out=out)
    assert all(r is o for r, o in zip(res, out))
    for o, a, b in zip(out, ra, rb):
        check(o, a @ b, dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_matmul_new_results_and_autograd(device, rng):
    la, lb, ra, rb = _list(rng, 17, "float64", "torch", device)
    for x in la + lb:
        x.requires_grad_()
    res = warp_gemm.grouped_matmul(la, lb)
    gs = [torch.tensor(rng.standard_normal(tuple(r.shape)), dtype=torch.float64, device=device) for r in res]
    for r, a, b in zip(res, ra, rb):
        check(r, a @ b, "float64")
    torch.autograd.backward(res, gs)
    for x, y, g, a, b in zip(la, lb, gs, ra, rb):
        check(x.grad, to_f64(g) @ b.T, "float64")
        check(y.grad, a.T @ to_f64(g), "float64")


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_matmul_tape(device, rng):
    la, lb, ra, rb = _list(rng, 9, "float32", "warp", device, transposed=False)
    la = [wp.array(x.numpy(), dtype=wp.float32, device=device, requires_grad=True) for x in la]
    lb = [wp.array(x.numpy(), dtype=wp.float32, device=device, requires_grad=True) for x in lb]
    tape = wp.Tape()
    with tape:
        res = warp_gemm.grouped_matmul(la, lb)
    gs = [rng.standard_normal(tuple(r.shape)) for r in res]
    tape.backward(grads={r: wp.array(g.astype(np.float32), dtype=wp.float32, device=device) for r, g in zip(res, gs)})
    for x, y, g, a, b in zip(la, lb, gs, ra, rb):
        check(x.grad, round_to(g, "float32") @ b.T, "float32")
        check(y.grad, a.T @ round_to(g, "float32"), "float32")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["torch", "warp"])
def test_grouped_matmul_plan(kind, device, rng):
    """A plan reads its operands in place at each call (new values after an in-place change), makes new results
    each call (the last call's stay as they were) or writes into ``out`` (NaN-filled first); operands it would
    have to copy are refused when it is made."""
    la, lb, ra, rb = _list(rng, 21, "float32", kind, device, transposed=kind == "torch")
    plan = warp_gemm.grouped_matmul_plan(la, lb)
    first = plan()
    for r, a, b in zip(first, ra, rb):
        check(r, a @ b, "float32")
    kept = [to_f64(r).copy() for r in first]
    new = [round_to(rng.standard_normal(a.shape) * 0.5, "float32") for a in ra]
    for x, v in zip(la, new):  # new values in the same storage (through transposed views too)
        if kind == "torch":
            x.copy_(torch.tensor(v, dtype=torch.float32, device=device))
        else:
            x.assign(v.astype(np.float32))
    second = plan()
    for r, a, b in zip(second, new, rb):
        check(r, a @ b, "float32")
    for r, k in zip(first, kept):
        assert np.array_equal(to_f64(r), k)
    out = [nan_like(kind, (a.shape[0], b.shape[1]), "float32", device) for a, b in zip(ra, rb)]
    into = warp_gemm.grouped_matmul_plan(la, lb, out=out)
    assert all(r is o for r, o in zip(into(), out))
    for o, a, b in zip(out, new, rb):
        check(o, a @ b, "float32")
    if kind == "torch":
        wide = torch.zeros(4, 6, device=device)
        with pytest.raises(ValueError, match=r"grouped_matmul: product 0: .*no unit stride; a plan reads"):
            warp_gemm.grouped_matmul_plan([wide[:, ::2]], [torch.zeros(3, 2, device=device)])
        with pytest.raises(ValueError, match=r"grouped_matmul_plan: an operand requires a gradient"):
            warp_gemm.grouped_matmul_plan([torch.zeros(2, 3, device=device, requires_grad=True)],
                                          [torch.zeros(3, 2, device=device)])


@pytest.fixture
def nan_list_results(monkeypatch):
    """New grouped_matmul results come pre-filled with NaN (the buffer behind them)."""
    made = core_grouped._new_outputs

    def poisoned(*args, **kw):
        res, ptrs, ld = made(*args, **kw)
        for r in res:
            r.fill_(float("nan")) if torch is not None and isinstance(r, torch.Tensor) else r.fill_(np.nan)
        return res, ptrs, ld

    monkeypatch.setattr(core_grouped, "_new_outputs", poisoned)


def _fresh(like, rng, offset: int = 0):
    """A new float tensor of ``like``'s dtype, device, shape and strides holding fresh random values, starting
    ``offset`` elements into a new buffer (offset 1: a 4-byte-aligned pointer for float32); its float64 values."""
    m, k = like.shape
    s = max(k, 1) ** -0.25
    v = round_to(rng.standard_normal((m, k)) * s, str(like.dtype).replace("torch.", ""))
    span = (m - 1) * like.stride(0) + (k - 1) * like.stride(1) + 1 if m and k else 0
    buf = torch.full((offset + span + 1,), float("nan"), dtype=like.dtype, device=like.device)
    x = buf.as_strided((m, k), like.stride(), offset)
    x.copy_(torch.tensor(v, dtype=like.dtype))
    return x, v


@pytest.mark.parametrize("device", DEVICES)
def test_grouped_matmul_rebinds_pointers(device, rng, monkeypatch, nan_list_results):
    """Lists of new tensors with the shapes, strides and dtype of a list seen before reuse its tables with the new
    pointers: new values, misaligned pointers (the checked copies), out= lists, and earlier results untouched;
    another dtype, another shape or a mixed dtype take the full checks."""
    monkeypatch.setattr(core_grouped, "_LISTS", {})  # (other tests' lists would count towards its bound)
    hits = []
    call = core_grouped._ListTables.__call__
    monkeypatch.setattr(core_grouped._ListTables, "__call__", lambda self, *a: hits.append(1) or call(self, *a))
    la, lb, ra, rb = _list(rng, 37, "float32", "torch", device)
    first = warp_gemm.grouped_matmul(la, lb)
    for r, a, b in zip(first, ra, rb):
        check(r, a @ b, "float32")
    kept = [to_f64(r).copy() for r in first]
    assert hits == []
    for offset in (0, 1):
        na, va = zip(*(_fresh(x, rng, offset) for x in la))
        nb, vb = zip(*(_fresh(y, rng, offset) for y in lb))
        assert [x.stride() for x in na] == [x.stride() for x in la]
        res = warp_gemm.grouped_matmul(list(na), list(nb))
        assert len(hits) == 1 + offset
        for r, a, b in zip(res, va, vb):
            check(r, a @ b, "float32")
    for r, k in zip(first, kept):
        assert np.array_equal(to_f64(r), k)
    for _ in range(2):  # out= lists: new NaN-filled outputs each call
        out = [nan_like("torch", (a.shape[0], b.shape[1]), "float32", device) for a, b in zip(ra, rb)]
        na, va = zip(*(_fresh(x, rng) for x in la))
        assert all(r is o for r, o in zip(warp_gemm.grouped_matmul(list(na), lb, out=out), out))
        for o, a, b in zip(out, va, rb):
            check(o, a @ b, "float32")
    assert len(hits) == 3
    la64 = [x.double() for x in la]  # same shapes, another dtype: its own tables
    lb64 = [y.double() for y in lb]
    for r, a, b in zip(warp_gemm.grouped_matmul(la64, lb64), ra, rb):
        check(r, a @ b, "float64")
    assert len(hits) == 3
    grown = list(la)
    grown[5] = torch.zeros(la[5].shape[0], la[5].shape[1] + 1, device=device)
    with pytest.raises(ValueError, match=r"grouped_matmul: product 5: .*inner dimensions differ"):
        warp_gemm.grouped_matmul(grown, lb)
    mixed = list(la)
    mixed[4] = la[4].double()
    with pytest.raises(TypeError, match=r"grouped_matmul: list_a\[0\] is float32.* but list_a\[4\] is float64"):
        warp_gemm.grouped_matmul(mixed, lb)
    assert len(hits) == 3
    # row-major lists with every side >= 2 are matched through is_contiguous(): the same shapes with a padded row
    # stride or stored transposed are other lists
    dims = rng.integers(2, 41, (12, 3))
    va = [round_to(rng.standard_normal((m, k)) * 0.5, "float32") for m, k, _ in dims]
    vb = [round_to(rng.standard_normal((k, n)) * 0.5, "float32") for _, k, n in dims]
    ta = [torch.tensor(v, dtype=torch.float32, device=device) for v in va]
    tb = [torch.tensor(v, dtype=torch.float32, device=device) for v in vb]
    for r, a, b in zip(warp_gemm.grouped_matmul(ta, tb), va, vb):
        check(r, a @ b, "float32")
    padded = []
    for v in va:
        x = torch.full((v.shape[0], v.shape[1] + 3), float("nan"), dtype=torch.float32, device=device)[:, :v.shape[1]]
        padded.append(x.copy_(torch.tensor(v, dtype=torch.float32)))
    stored_t = [torch.tensor(np.ascontiguousarray(v.T), dtype=torch.float32, device=device).T for v in va]
    for variant in (padded, stored_t):
        for r, a, b in zip(warp_gemm.grouped_matmul(variant, tb), va, vb):
            check(r, a @ b, "float32")
    assert len(hits) == 3
    na, va2 = zip(*(_fresh(x, rng) for x in ta))
    for r, a, b in zip(warp_gemm.grouped_matmul(list(na), tb), va2, vb):
        check(r, a @ b, "float32")
    assert len(hits) == 4
    # autograd (the custom operator, results not views of one buffer): the second list's forward and backward
    # products reuse the first's tables
    for step in range(2):
        xa = [torch.tensor(v, dtype=torch.float64, device=device, requires_grad=True) for v in va]
        xb = [torch.tensor(v, dtype=torch.float64, device=device, requires_grad=True) for v in vb]
        res = warp_gemm.grouped_matmul(xa, xb)
        assert len({r.untyped_storage().data_ptr() for r in res}) == len(res)
        gs = [rng.standard_normal(tuple(r.shape)) for r in res]
        torch.autograd.backward(res, [torch.tensor(g, dtype=torch.float64, device=device) for g in gs])
        for r, x, y, g, a, b in zip(res, xa, xb, gs, va, vb):
            check(r, a @ b, "float64")
            check(x.grad, g @ b.T, "float64")
            check(y.grad, a.T @ g, "float64")
        assert len(hits) == 4 + 3 * step


def test_grouped_matmul_errors_write_nothing(rng):
    la, lb, ra, rb = _list(rng, 4, "float32", "torch", "cpu", transposed=False)
    out = [nan_like("torch", (a.shape[0], b.shape[1]), "float32", "cpu") for a, b in zip(ra, rb)]
    with pytest.raises(ValueError, match=r"grouped_matmul: product 3: .*inner dimensions differ"):
        warp_gemm.grouped_matmul(la[:3] + [la[3]], lb[:3] + [torch.zeros(lb[3].shape[0] + 1, 2)], out=out)
    with pytest.raises(TypeError, match=r"grouped_matmul: list_a\[0\] is float32.* but list_a\[2\] is float64"):
        warp_gemm.grouped_matmul(la[:2] + [la[2].double()] + la[3:], lb, out=out)
    with pytest.raises(ValueError, match=r"grouped_matmul: 4 left operands but 3 right"):
        warp_gemm.grouped_matmul(la, lb[:3], out=out)
    bad = list(out)
    bad[1] = torch.zeros(out[1].shape[0] + 1, out[1].shape[1])
    with pytest.raises(ValueError, match=r"grouped_matmul: out\[1\] has shape"):
        warp_gemm.grouped_matmul(la, lb, out=bad)
    assert all(torch.isnan(o).all() for o in out if o.numel())


# --- CUDA: the MoE shapes at a small scale, on the CUDA tiles --------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_moe_forward_cuda(dtype, rng, nan_results):
    """(G, N, K) weights used as W.T, uneven token counts: 128x128 tiles, unchecked 16-byte copies."""
    G, K, N = 8, 512, 384
    a, b, offs, a64, b64, ends = operands("2d3d", rng, dtype, "torch", "cuda", G=G, K=K, N=N, avg=300, b_t=True,
                                          tail=0)
    check(warp_gemm.grouped_mm(a, b, offs=offs), reference("2d3d", a64, b64, ends, G), dtype)
    if dtype == "float32":
        check(warp_gemm.grouped_mm(a, b, offs=offs, allow_tf32=True), reference("2d3d", a64, b64, ends, G), dtype,
              tf32=True)
    F = torch.nn.functional
    if dtype == "bfloat16" and hasattr(F, "grouped_mm"):
        check(F.grouped_mm(a, b, offs=offs), reference("2d3d", a64, b64, ends, G), dtype)


@pytest.mark.gpu
def test_cuda_graph_capture(rng):
    a, b, offs, a64, b64, ends = operands("2d3d", rng, "bfloat16", "torch", "cuda", K=64, N=64, b_t=True)
    warp_gemm.grouped_mm(a, b, offs=offs)  # compile and load outside the capture
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            out = warp_gemm.grouped_mm(a, b, offs=offs)
    g.replay()
    torch.cuda.synchronize()
    check(out, reference("2d3d", a64, b64, ends, 3), "bfloat16")


# --- the Hopper grouped kernel (TMA + wgmma, sm_90) ------------------------------------------------------------------
def _hopper_spec(dtype, out_dtype, layout_b, tiles):
    from warp_gemm.families.grouped._deps import HopperSpec

    bm, bn, st = tiles
    return HopperSpec("float32" if dtype == "tf32" else dtype, out_dtype, "N", layout_b, bm=bm, bn=bn, stages=st)


def _sm90() -> bool:
    return torch is not None and torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def test_hopper_grouped_snippets_fill():
    """Every grouped Hopper configuration the rules or tests take fills gemm.cuh's work-item fields (no field
    left), keeps the dense kernel's K loop, and takes the grouped work items."""
    from warp_gemm.families.grouped import hopper

    for dtype, out, lb, tiles in [("bfloat16", "bfloat16", "T", (128, 256, 4)), ("float16", "float32", "N", (128, 128, 6)),
                                  ("tf32", "float32", "T", (128, 128, 6))]:
        spec = _hopper_spec(dtype, out, lb, tiles)
        assert hopper.unfit(spec) == ""
        text = hopper.snippet(spec)
        assert "${" not in text and "wgmma.mma_async" in text and "item_of(t, g, tm, tn, row0, mg)" in text
        assert "tile_of(" not in text  # the dense work items are replaced
    with pytest.raises(ValueError, match="grouped.hopper: cannot build"):
        hopper.snippet(_hopper_spec("bfloat16", "bfloat16", "T", (128, 256, 5)))  # 5 stages + table > 227 KB


def test_hopper_grouped_rules_refuse_cpu_and_other_cases(rng):
    """The planner never takes the Hopper grouped kernel on the CPU or for the other operand cases; a forced spec
    there is a ValueError naming the reason."""
    from warp_gemm.families.grouped.spec import problem

    p = problem("3d2d", 3, (3, 8, 16), (128, 16, 1), (16, 24), (24, 1), 2, "float16", "float16")
    assert "case 3d2d" in rules.hopper_reason(p, 0, 0, _FakeSm90(), False)
    p = problem("2d3d", 3, (40, 16), (16, 1), (3, 16, 24), (384, 24, 1), 2, "float16", "float16")
    if not (_compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_FUNC_ARGS):
        pytest.skip(f"warp-lang {_compat.WARP_VERSION} builds no sm_90a kernels")
    assert rules.hopper_reason(p, 0, 0, _FakeSm90(), False) == ""
    assert "mat_a: base 0x8" in rules.hopper_reason(p, 8, 0, _FakeSm90(), False)
    p32 = problem("2d3d", 3, (40, 16), (16, 1), (3, 16, 24), (384, 24, 1), 4, "float32", "float32")
    assert "tf32" in rules.hopper_reason(p32, 0, 0, _FakeSm90(), False)  # exact float32: the mma.sync path
    assert "tf32" in rules.hopper_reason(p32, 0, 0, _FakeSm90(), True)  # tf32 needs mat_b read K-major
    many = problem("2d3d", 3000, (40, 16), (16, 1), (3000, 16, 24), (384, 24, 1), 2, "float16", "float16")
    assert "3000 groups" in rules.hopper_reason(many, 0, 0, _FakeSm90(), False)
    assert "sm_90" in rules.hopper_reason(p, 0, 0, wp.get_device("cpu"), False)
    a, b, offs, *_ = operands("2d3d", rng, "float16", "torch", "cpu", K=16, N=24)
    with pytest.raises(ValueError, match="grouped_mm: cannot run hopper_f16_f16_NN"):
        core_grouped.grouped_mm(a, b, offs, None, None, spec=_hopper_spec("float16", "float16", "N", (128, 128, 6)))


class _FakeSm90:
    is_cuda = True
    arch = 90

    def __str__(self):
        return "cuda:0"


HOPPER_TILES = [(128, 256, 4), (128, 128, 6)]


@pytest.mark.gpu
@pytest.mark.parametrize("tiles", HOPPER_TILES, ids=["128x256", "128x128"])
@pytest.mark.parametrize("dtype,out_dtype,b_t", [("bfloat16", "bfloat16", True), ("float16", "float16", False),
                                                 ("bfloat16", "float32", False), ("float16", "float32", True),
                                                 ("tf32", "float32", True)])
def test_hopper_grouped_against_float64(dtype, out_dtype, b_t, tiles, rng, nan_results):
    """The Hopper grouped kernel forced: empty groups (the first among them), odd group sizes, rows after offs[-1]
    (zeros), K not a multiple of 64 and N not of the tile, both B layouts ((G, N, K) weights as W.T, or (G, K, N)),
    into NaN-filled results."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    base = "float32" if dtype == "tf32" else dtype
    G, K, N = 7, 200, 328
    a, b, offs, a64, b64, ends = operands("2d3d", rng, base, "torch", "cuda", G=G, K=K, N=N, avg=150, b_t=b_t,
                                          tail=37)
    spec = _hopper_spec(dtype, out_dtype, "T" if b_t else "N", tiles)
    out = core_grouped.grouped_mm(a, b, offs, None, getattr(torch, out_dtype), allow_tf32=dtype == "tf32", spec=spec)
    assert out.dtype == getattr(torch, out_dtype)
    ref = reference("2d3d", a64, b64, ends, G)
    check(out, ref, base, tf32=dtype == "tf32")
    assert torch.equal(out[int(ends[-1]):].cpu(), torch.zeros(out.shape[0] - int(ends[-1]), N, dtype=out.dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("G,avg,tail", [(1, 500, 0), (1, 90, 5), (300, 9, 3), (2048, 2, 1)],
                         ids=["one-group", "one-small-group", "300-groups", "2048-groups"])
def test_hopper_grouped_group_counts(G, avg, tail, rng, nan_results):
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    a, b, offs, a64, b64, ends = operands("2d3d", rng, "bfloat16", "torch", "cuda", G=G, K=72, N=136, avg=avg,
                                          b_t=True, tail=tail)
    spec = _hopper_spec("bfloat16", "bfloat16", "T", (128, 128, 6))
    check(core_grouped.grouped_mm(a, b, offs, None, None, spec=spec), reference("2d3d", a64, b64, ends, G), "bfloat16")


@pytest.mark.gpu
def test_hopper_grouped_bias_bad_offs_and_route(rng, monkeypatch, nan_results):
    """Bias per group after the Hopper product; offs past the rows on the device make the whole result NaN; the
    planner takes the Hopper kernel for large products (threshold lowered here) and the mma.sync one else."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    from warp_gemm.families.grouped import launch as glaunch

    G, K, N = 5, 128, 256
    a, b, offs, a64, b64, ends = operands("2d3d", rng, "float16", "torch", "cuda", G=G, K=K, N=N, avg=100, b_t=True)
    bias64 = round_to(rng.standard_normal((G, N)), "float16")
    bias = torch.tensor(bias64, dtype=torch.float16, device="cuda")
    spec = _hopper_spec("float16", "float16", "T", (128, 256, 4))
    ref = reference("2d3d", a64, b64, ends, G)
    starts = np.concatenate(([0], ends[:-1]))
    for g, (s, e) in enumerate(zip(starts, ends)):
        ref[s:e] += bias64[g]
    check(core_grouped.grouped_mm(a, b, offs, bias, None, spec=spec), ref, "float16")
    bad = offs.clone()
    bad[2] = a.shape[0] + 1
    out = core_grouped.grouped_mm(a, b, bad, None, None, spec=spec)
    assert torch.isnan(out).all()
    calls = []
    real = glaunch.hopper_launch
    monkeypatch.setattr(glaunch, "hopper_launch", lambda *x, **k: calls.append(1) or real(*x, **k))
    monkeypatch.setattr(rules, "HOPPER_MIN_WORK", 0)
    check(warp_gemm.grouped_mm(a, b, offs=offs), reference("2d3d", a64, b64, ends, G), "float16")
    assert calls == [1]
    monkeypatch.setattr(rules, "HOPPER_MIN_WORK", 2**62)
    core_grouped._fast_mm.clear()  # the fast path keeps the rules' decision for this signature
    check(warp_gemm.grouped_mm(a, b, offs=offs), reference("2d3d", a64, b64, ends, G), "float16")
    assert calls == [1]


# --- the fast path of repeated torch MoE calls (core/grouped.py: _fast_mm) ---------------------------------------------
def _spy_checks(monkeypatch):
    """Count the calls that go through the checks (core_grouped.validate)."""
    seen = []
    real = core_grouped.validate
    monkeypatch.setattr(core_grouped, "validate", lambda *x, **k: seen.append(1) or real(*x, **k))
    return seen


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_fast_path_launches_what_the_checked_path_launches(rng, monkeypatch):
    """A Hopper-eligible torch call (faked on the CPU: CUDA tensors, an sm_90 device, no launch) keeps its decision;
    a second call of the same signature on new tensors and new offs skips the checks and launches the same kernel
    configuration with the new addresses; any change of signature (shape, strides, dtype, offs dtype or length,
    out_dtype, allow_tf32, bias, options, address alignment) goes through the checks again, and bad operands still
    raise before anything is launched."""
    from warp_gemm.families.grouped import launch as glaunch

    if not (_compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_FUNC_ARGS):
        pytest.skip(f"warp-lang {_compat.WARP_VERSION} builds no sm_90a kernels")
    core_grouped._fast_mm.clear()
    monkeypatch.setattr(core_grouped, "_on_cuda", lambda t: True)
    real_reason = rules.hopper_reason
    monkeypatch.setattr(rules, "hopper_reason", lambda p, a, b, dev, tf32: real_reason(p, a, b, _FakeSm90(), tf32))

    def hopper_spec(p, A, B, dev, allow_tf32, spec):
        tf32 = bool(allow_tf32 and p.in_dtype == "float32")
        if not core_grouped.options().hopper or rules.hopper_reason(p, A.ptr, B.ptr, dev, tf32):
            return None
        return rules.hopper_choice(p, 132)

    monkeypatch.setattr(core_grouped, "_hopper_spec", hopper_spec)
    launched = []
    monkeypatch.setattr(glaunch, "hopper_launch", lambda *x: launched.append(x) or ("k", (1,), [], 384))
    monkeypatch.setattr(core_grouped, "launch", lambda *x, **k: None)
    seen = _spy_checks(monkeypatch)
    G, T, K, N = 4, 96, 64, 48

    def ops(dtype=torch.float16, t=T, k=K, b_t=True):
        a = torch.randn(t, k).to(dtype)
        b = torch.randn(G, N, k).to(dtype).transpose(-2, -1) if b_t else torch.randn(G, k, N).to(dtype)
        offs = torch.tensor(np.sort(rng.integers(0, t + 1, G)), dtype=torch.int32)
        return a, b, offs

    with warp_gemm.options(cpu_backend="tiles"):
        a, b, offs = ops()
        out = warp_gemm.grouped_mm(a, b, offs=offs)
        assert len(seen) == 1 and len(launched) == 1 and len(core_grouped._fast_mm) == 1
        a2, b2, offs2 = ops()
        out2 = warp_gemm.grouped_mm(a2, b2, offs=offs2)
        assert len(seen) == 1 and len(launched) == 2  # no checks: the kept decision
        (p1, s1, pa1, pb1, pd1, o1, *_), (p2, s2, pa2, pb2, pd2, o2, *_) = launched
        assert (p2, s2) == (p1, s1) and s1.key.startswith("hopper_f16_f16_NT")
        assert (pa1, pb1, pd1, o1.ptr) == (a.data_ptr(), b.data_ptr(), out.data_ptr(), offs.data_ptr())
        assert (pa2, pb2, pd2, o2.ptr) == (a2.data_ptr(), b2.data_ptr(), out2.data_ptr(), offs2.data_ptr())
        assert out2.shape == (T, N) and out2.dtype == torch.float16 and out2.data_ptr() != out.data_ptr()
        n = len(seen)
        def mm(a, b, offs, **kw):
            return warp_gemm.grouped_mm(a, b, offs=offs, **kw)

        others = [lambda: mm(*ops(t=T + 8)),  # shape
                  lambda: mm(*ops(b_t=False)),  # strides (B stored (G, K, N))
                  lambda: mm(*ops(dtype=torch.bfloat16)),  # dtype
                  lambda: mm(a2, b2, offs2, out_dtype=torch.float32),
                  lambda: mm(a2, b2, offs2, allow_tf32=True),
                  lambda: mm(a2, b2, offs2, bias=torch.zeros(N, dtype=torch.float16)),
                  lambda: mm(torch.randn(T * K + 1).half()[1:].view(T, K), b2, offs2),  # A 2 bytes off 16
                  lambda: mm(a2, torch.randn(G * N * K + 1).half()[1:].view(G, N, K).transpose(-2, -1), offs2)]
        for i, call in enumerate(others):
            call()
            assert len(seen) == n + i + 1, i
        with warp_gemm.options(hopper=False):
            warp_gemm.grouped_mm(a2, b2, offs=offs2)
        assert len(seen) == n + len(others) + 1
        with pytest.raises(TypeError, match="offs must be int32"):
            warp_gemm.grouped_mm(a2, b2, offs=offs2.long())
        with pytest.raises(ValueError, match="group counts differ"):
            warp_gemm.grouped_mm(a2, b2, offs=offs2[:-1])
        with pytest.raises(TypeError, match="one dtype"):
            warp_gemm.grouped_mm(a2.bfloat16(), b2, offs=offs2)
    core_grouped._fast_mm.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("G,b_t", [(6, True), (6, False), (1, True), (300, True)],
                         ids=["W.T", "GKN", "one-group", "300-groups"])
def test_hopper_grouped_fast_path_rebinds(G, b_t, rng, monkeypatch, nan_results):
    """Repeated torch calls of one signature on the Hopper kernel (threshold lowered) take the fast path: new
    activations, new weights and new offs each call (pointer re-binding, other group sizes, empty groups, rows
    after offs[-1]), each result NaN-filled before and checked against float64."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    monkeypatch.setattr(rules, "HOPPER_MIN_WORK", 0)
    core_grouped._fast_mm.clear()
    seen = _spy_checks(monkeypatch)
    K, N = 136, 264
    total = None
    for i in range(3):
        a, b, offs, a64, b64, ends = operands("2d3d", rng, "bfloat16", "torch", "cuda", G=G, K=K, N=N,
                                              avg=70 if G < 100 else 5, b_t=b_t, tail=0)
        if total is None:
            total = a.shape[0]
        # one row count for every call (one signature): the groups' ends vary, the rows after offs[-1] too
        pad = total - a.shape[0]
        if pad < 0:
            ends = np.minimum(ends, total).astype(np.int32)
            offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
            a, a64 = a[:total], a64[:total]
        elif pad > 0:
            a64 = np.concatenate([a64, round_to(rng.standard_normal((pad, K)) * K ** -0.25, "bfloat16")])
            a = torch.tensor(a64, dtype=torch.bfloat16, device="cuda")
        out = warp_gemm.grouped_mm(a, b, offs=offs)
        check(out, reference("2d3d", a64, b64, ends, G), "bfloat16")
        assert len(seen) == 1, i  # the checks ran for the first call only
    core_grouped._fast_mm.clear()
