"""``warp_gemm.matmul`` with ``torch.matmul``'s rank rules for every container (wp.array, NumPy, torch
with ``out``): 1-D operands and any number of broadcast batch dimensions, against float64 NumPy
references on fresh random operands, NaN-prefilled outputs. On the CPU tile kernels (conftest)."""

import numpy as np
import pytest
import warp as wp

import warp_gemm
from warp_gemm.tools.tolerance import compare

try:
    import torch
except ImportError:  # pragma: no cover - torch is a test dependency
    torch = None

CASES = [
    ((7,), (7,)),  # vector . vector -> ()
    ((7,), (7, 5)),  # vector . matrix
    ((6, 7), (7,)),  # matrix . vector
    ((2, 3, 6, 7), (7, 5)),  # 4-D @ matrix: folded into one (36, 7) @ (7, 5)
    ((2, 3, 6, 7), (2, 3, 7, 5)),  # batch dims merged
    ((2, 1, 6, 7), (1, 3, 7, 5)),  # broadcast along some dims: copies
    ((3, 6, 7), (7,)),
    ((7,), (2, 7, 5)),
    ((1, 1, 6, 7), (2, 7, 5)),
    ((2, 2, 2, 3, 4), (4, 3)),  # 5-D
]


def _ids(c):
    return "@".join("x".join(map(str, s)) for s in c)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("container", ["numpy", "warp", "torch-out"])
@pytest.mark.parametrize("shapes", CASES, ids=[_ids(c) for c in CASES])
def test_matmul_ranks(shapes, container, dtype):
    sa, sb = shapes
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**32)
    a = rng.standard_normal(sa).astype(dtype)
    b = rng.standard_normal(sb).astype(dtype)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if container == "numpy":
        out = np.full(ref.shape, np.nan, dtype=dtype)
        res = warp_gemm.matmul(a, b, out=out)
        assert res is out
        got = out
        fresh = warp_gemm.matmul(a, b)
        assert isinstance(fresh, np.ndarray) and fresh.shape == ref.shape
        assert compare(np.asarray(fresh, np.float64), ref, dtype).ok
    elif container == "warp":
        if max(len(sa), len(sb), ref.ndim) > 4:
            pytest.skip("Warp arrays have at most 4 dimensions")
        if ref.ndim == 0:
            with pytest.raises(ValueError, match="0-d"):
                warp_gemm.matmul(wp.array(a), wp.array(b))
            return
        out = wp.array(np.full(ref.shape, np.nan, dtype=dtype))
        res = warp_gemm.matmul(wp.array(a), wp.array(b), out=out)
        assert res is out and out.shape == ref.shape
        got = out.numpy()
        fresh = warp_gemm.matmul(wp.array(a), wp.array(b))
        assert isinstance(fresh, wp.array) and fresh.shape == ref.shape
        assert compare(fresh.numpy().astype(np.float64), ref, dtype).ok
    else:
        if torch is None:
            pytest.skip("torch not installed")
        out = torch.full(ref.shape, float("nan"), dtype=getattr(torch, dtype))
        res = warp_gemm.matmul(torch.from_numpy(a), torch.from_numpy(b), out=out)
        assert res is out
        got = out.numpy()
    assert got.shape == ref.shape
    res = compare(np.asarray(got, np.float64), ref, dtype)
    assert res.ok, f"{shapes} {container}: {res}"


def test_strided_batch_operand_and_out():
    """A batch operand whose batch dims do not merge (a transposed batch view) is copied; an ``out``
    that cannot be viewed as the GEMM's shape gets the result copied in; both right."""
    rng = np.random.default_rng()
    base = rng.standard_normal((3, 2, 6, 7)).astype(np.float32)
    a = base.transpose(1, 0, 2, 3)  # (2, 3, 6, 7), batch strides do not merge
    b = rng.standard_normal((2, 3, 7, 5)).astype(np.float32)
    big = np.full((2, 3, 6, 10), np.nan, np.float32)
    out = big[..., ::2]  # (2, 3, 6, 5) with column stride 2
    warp_gemm.matmul(a, b, out=out)
    assert compare(out.astype(np.float64), np.matmul(a.astype(np.float64), b), "float32").ok
    assert np.isnan(big[..., 1::2]).all()  # nothing written beside out


def test_wp_gradients_refused_for_other_ranks():
    a = wp.array(np.ones((2, 3, 4, 5), np.float32), requires_grad=True)
    b = wp.array(np.ones((5, 6), np.float32), requires_grad=True)
    with wp.Tape():
        with pytest.raises(ValueError, match="2-D and 3-D operands only"):
            warp_gemm.matmul(a, b)


def test_nd_bad_out_leaves_out_untouched():
    a = np.ones((2, 3, 4, 5), np.float32)
    b = np.ones((5, 6), np.float32)
    out = np.full((2, 3, 4, 5), np.nan, np.float32)
    with pytest.raises(ValueError, match=r"out has shape \[2, 3, 4, 5\]"):
        warp_gemm.matmul(a, b, out=out)
    assert np.isnan(out).all()


_NO_TORCH = """
import sys
sys.modules["torch"] = None  # torch cannot be imported in this process
import numpy as np, warp as wp, warp_gemm
from warp_gemm.tools.tolerance import compare
rng = np.random.default_rng()
for sa, sb in [((2, 1, 6, 7), (1, 3, 7, 5)), ((2, 1, 6, 7), (3, 7, 5)), ((1, 3, 6, 7), (2, 1, 7, 5))]:
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = wp.array(np.full(ref.shape, np.nan, np.float32), device="cpu")
    # A stored transposed (a strided view) as well: the copy reads any strides
    at = wp.array(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device="cpu").transpose((0, 1, 3, 2))
    for A in (wp.array(a, device="cpu"), at):
        warp_gemm.matmul(A, wp.array(b, device="cpu"), out=out)
        c = compare(out.numpy().astype(np.float64), ref, "float32")
        assert c.ok, (sa, sb, c)
assert "torch" not in sys.modules or sys.modules["torch"] is None
print("OK")
"""


def test_wp_broadcast_copies_need_no_torch():
    """A wp.array broadcast along some but not all batch dimensions is copied by Warp: torch is not
    importable in the process that runs it."""
    import os
    import subprocess
    import sys

    root = str(__import__("pathlib").Path(__file__).resolve().parent.parent)
    proc = subprocess.run([sys.executable, "-c", _NO_TORCH], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": root})
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wp_broadcast_copy_16bit(dtype):
    from conftest import make, to_f64

    from warp_gemm import _compat
    from warp_gemm.tools.tolerance import round_to

    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("bfloat16 needs warp-lang >= 1.13")
    rng = np.random.default_rng(np.random.SeedSequence().entropy % 2**32)
    a = round_to(rng.standard_normal((2, 1, 6, 7)) * 7**-0.25, dtype)
    b = round_to(rng.standard_normal((1, 3, 7, 5)) * 7**-0.25, dtype)
    out = make(np.full((2, 3, 6, 5), np.nan), dtype, "warp", "cpu")
    warp_gemm.matmul(make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"), out=out)
    assert compare(to_f64(out), np.matmul(a, b), dtype).ok
