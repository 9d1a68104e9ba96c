"""The odd-shape matrix: shapes x dtypes x containers x layouts x batching, against float64.

Every output is pre-filled with NaN, so a tile the kernel never wrote fails the comparison.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DEVICES, DTYPES, KINDS, kind_ok, make, nan_like, to_f64

import warp_gemm
from warp_gemm.config import choice
from warp_gemm.tools import shapes
from warp_gemm.tools.tolerance import compare, random_operands


def _edges(device_is_cpu: bool) -> list[shapes.Shape]:
    tiles = set()
    for dt in DTYPES:
        for cfg in choice.reachable_configs(device_is_cpu, dt):
            tiles.add((cfg.tm, cfg.tn, cfg.tk))
    return shapes.tile_edges(sorted(tiles))


def _odd_params():
    out = []
    for dev in DEVICES:
        d = dev.values[0]
        for s in shapes.ODD + _edges(d == "cpu"):
            for dt in DTYPES:
                out.append(pytest.param(d, s, dt, id=f"{d}-{s.id}-{dt}", marks=dev.marks))
    return out


@pytest.mark.parametrize("device,shape,dtype", _odd_params())
def test_odd_shapes(device, shape, dtype, rng):
    a, b = random_operands(shape.M, shape.N, shape.K, dtype, rng)
    out = nan_like("warp", (shape.M, shape.N), dtype, device)
    res = warp_gemm.matmul(make(a, dtype, "warp", device), make(b, dtype, "warp", device), out=out)
    assert res is out
    cmp = compare(to_f64(out), a @ b, dtype)
    assert cmp.ok, f"{shape} {dtype}: {cmp}"


LAYOUT_SHAPES = [shapes.Shape(7, 13, 97), shapes.Shape(33, 31, 65), shapes.Shape(1, 37, 19)]
LAYOUTS = ["nn", "tn", "nt", "tt", "sliced"]


def _operands(a, b, dtype, kind, device, layout):
    """Build op(A), op(B) in ``layout``: returns (a_arg, b_arg, trans_a, trans_b)."""
    if layout == "sliced":
        # Every other row of a taller A and a column window of a wider B: non-contiguous views.
        big_a = np.zeros((2 * a.shape[0], a.shape[1]))
        big_a[::2] = a
        big_b = np.zeros((b.shape[0], b.shape[1] + 5))
        big_b[:, 2:2 + b.shape[1]] = b
        A = make(big_a, dtype, kind, device)
        B = make(big_b, dtype, kind, device)
        return A[::2], B[:, 2:2 + b.shape[1]], False, False
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(a.T) if ta else a, dtype, kind, device)
    B = make(np.ascontiguousarray(b.T) if tb else b, dtype, kind, device)
    return A, B, ta, tb


def _layout_params():
    out = []
    for dev in DEVICES:
        d = dev.values[0]
        for s in LAYOUT_SHAPES:
            for dt in DTYPES:
                for kind in KINDS:
                    for lay in LAYOUTS:
                        out.append(pytest.param(d, s, dt, kind, lay, id=f"{d}-{s.id}-{dt}-{kind}-{lay}",
                                                marks=dev.marks))
    return out


@pytest.mark.parametrize("device,shape,dtype,kind,layout", _layout_params())
def test_layouts_and_containers(device, shape, dtype, kind, layout, rng):
    why = kind_ok(kind, dtype, device)
    if why:
        pytest.skip(why)
    if kind == "warp" and layout == "sliced":
        pytest.skip("wp.array slicing with a step is not supported by every Warp release")
    a, b = random_operands(shape.M, shape.N, shape.K, dtype, rng)
    A, B, ta, tb = _operands(a, b, dtype, kind, device, layout)
    if layout in ("nn", "sliced"):
        res = warp_gemm.matmul(A, B)
    else:
        res = warp_gemm.gemm(A, B, trans_a=ta, trans_b=tb)
    assert type(res).__module__.split(".")[0] == type(A).__module__.split(".")[0]
    assert tuple(res.shape) == (shape.M, shape.N)
    cmp = compare(to_f64(res), a @ b, dtype)
    assert cmp.ok, f"{shape} {dtype} {kind} {layout}: {cmp}"


def test_torch_transposed_views_zero_copy(rng):
    torch = pytest.importorskip("torch")
    a, b = random_operands(29, 23, 41, "float32", rng)
    A = torch.tensor(np.ascontiguousarray(a.T), dtype=torch.float32).T  # a view: column-major
    B = torch.tensor(np.ascontiguousarray(b.T), dtype=torch.float32).T
    assert not A.is_contiguous() and not B.is_contiguous()
    res = warp_gemm.matmul(A, B)
    assert compare(res.double().numpy(), a @ b, "float32").ok


BATCH_CASES = [  # (a batch, b batch, result batch); 0 means a 2-D operand
    (3, 3, 3),
    (0, 3, 3),
    (3, 0, 3),
    (1, 3, 3),
    (3, 1, 3),
    (1, 1, 1),
]


def _batch_params():
    out = []
    for dev in DEVICES:
        d = dev.values[0]
        for s in shapes.BATCHED:
            for dt in DTYPES:
                for case in BATCH_CASES:
                    for kind in KINDS:
                        out.append(pytest.param(d, s, dt, case, kind,
                                                id=f"{d}-{s.id}-{dt}-a{case[0]}b{case[1]}-{kind}", marks=dev.marks))
    return out


@pytest.mark.parametrize("device,shape,dtype,case,kind", _batch_params())
def test_batched_broadcast(device, shape, dtype, case, kind, rng):
    why = kind_ok(kind, dtype, device)
    if why:
        pytest.skip(why)
    ba, bb, bo = case
    s = max(shape.K, 1) ** -0.25
    from warp_gemm.tools.tolerance import round_to

    a = round_to(rng.standard_normal(((ba,) if ba else ()) + (shape.M, shape.K)) * s, dtype)
    b = round_to(rng.standard_normal(((bb,) if bb else ()) + (shape.K, shape.N)) * s, dtype)
    ref = np.matmul(a, b)
    assert ref.shape == (bo, shape.M, shape.N)
    out = nan_like(kind, ref.shape, dtype, device)
    warp_gemm.matmul(make(a, dtype, kind, device), make(b, dtype, kind, device), out=out)
    cmp = compare(to_f64(out), ref, dtype)
    assert cmp.ok, f"{case} {dtype}: {cmp}"


C_SHAPES = ["MN", "N", "1N", "M1", "scalar", "BMN", "1MN"]


def _c_array(rng, cs, B, M, N):
    shape = {"MN": (M, N), "N": (N,), "1N": (1, N), "M1": (M, 1), "scalar": (), "BMN": (B, M, N),
             "1MN": (1, M, N)}[cs]
    return rng.standard_normal(shape)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cs", C_SHAPES)
@pytest.mark.parametrize("trans", ["nn", "tt"])
def test_gemm_alpha_beta_c(device, dtype, cs, trans, rng):
    from warp_gemm.tools.tolerance import round_to

    kind = "warp" if dtype == "bfloat16" else "numpy" if device == "cpu" else "torch"
    if kind_ok(kind, dtype, device):
        kind = "warp"
    B, M, N, K = 2, 37, 29, 70
    batched = cs in ("BMN", "1MN")
    a, b = random_operands(M, N, K, dtype, rng, batch=B if batched else 0)
    c = round_to(_c_array(rng, cs, B, M, N), dtype)
    alpha, beta = 1.5, -0.75
    ref = alpha * np.matmul(a, b) + beta * c
    ta, tb = trans[0] == "t", trans[1] == "t"
    A = make(np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a, dtype, kind, device)
    Bm = make(np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b, dtype, kind, device)
    if cs == "scalar" and kind == "warp":
        pytest.skip("wp.array has no 0-d form")
    C = make(c, dtype, kind, device)
    out = nan_like(kind, ref.shape, dtype, device)
    warp_gemm.gemm(A, Bm, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, out=out)
    cmp = compare(to_f64(out), ref, dtype)
    assert cmp.ok, f"c{cs} {dtype}: {cmp}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", ["float32", "float64"])
def test_out_dtype_differs(device, out_dtype, rng):
    a, b = random_operands(45, 67, 89, "float16", rng)
    out = nan_like("warp", (45, 67), out_dtype, device)
    warp_gemm.matmul(make(a, "float16", "warp", device), make(b, "float16", "warp", device), out=out)
    # float16 inputs, float32 accumulation, output not rounded to float16.
    assert compare(to_f64(out), a @ b, "float32").rel_fro < 1e-5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["colmajor", "strided"])
def test_out_views(device, layout, rng):
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    a, b = random_operands(33, 21, 50, "float32", rng)
    if layout == "colmajor":
        out = torch.full((21, 33), float("nan"), device=device).T
    else:
        big = torch.full((33, 42), float("nan"), device=device)
        out = big[:, ::2]
    A = torch.tensor(a, dtype=torch.float32, device=device)
    Bt = torch.tensor(b, dtype=torch.float32, device=device)
    warp_gemm.matmul(A, Bt, out=out)
    assert compare(out.double().cpu().numpy(), a @ b, "float32").ok
    if layout == "strided":
        assert torch.isnan(big[:, 1::2]).all(), "wrote outside the out view"


@pytest.mark.parametrize("device", DEVICES)
def test_empty_and_k0(device, rng):
    A0 = make(np.zeros((0, 5)), "float32", "warp", device)
    B = make(rng.standard_normal((5, 7)), "float32", "warp", device)
    assert warp_gemm.matmul(A0, B).shape == (0, 7)
    Ak = make(np.zeros((4, 0)), "float32", "warp", device)
    Bk = make(np.zeros((0, 6)), "float32", "warp", device)
    out = nan_like("warp", (4, 6), "float32", device)
    warp_gemm.matmul(Ak, Bk, out=out)
    assert (to_f64(out) == 0).all()
    c = rng.standard_normal((4, 6))
    out2 = nan_like("warp", (4, 6), "float32", device)
    warp_gemm.gemm(Ak, Bk, make(c, "float32", "warp", device), beta=2.0, out=out2)
    np.testing.assert_allclose(to_f64(out2), 2 * c.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_inf_propagate(device, rng):
    a, b = random_operands(40, 40, 40, "float32", rng)
    a[3, 5] = np.nan
    a[7, 1] = np.inf
    ref = a @ b
    out = warp_gemm.matmul(make(a, "float32", "warp", device), make(b, "float32", "warp", device))
    o = to_f64(out)
    assert np.isnan(o[3]).all()
    assert np.array_equal(np.isnan(o), np.isnan(ref)) and np.array_equal(np.isinf(o), np.isinf(ref))
    # beta == 0: C is not read (BLAS), so NaN in C does not reach the result.
    cnan = make(np.full((40, 40), np.nan), "float32", "warp", device)
    a2, b2 = random_operands(40, 40, 40, "float32", rng)
    res = warp_gemm.gemm(make(a2, "float32", "warp", device), make(b2, "float32", "warp", device), cnan, beta=0.0)
    assert compare(to_f64(res), a2 @ b2, "float32").ok


def test_allow_tf32_exact_on_cpu(rng):
    a, b = random_operands(50, 60, 70, "float32", rng)
    res = warp_gemm.matmul(a.astype(np.float32), b.astype(np.float32), allow_tf32=True)
    # CPU: exact float32 whatever the flag says (documented).
    assert compare(res, a @ b, "float32").ok
