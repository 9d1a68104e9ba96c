"""The reference paths and the ``warp-gemm check`` harness.

- :func:`warp_gemm.tools.reference.float64_gemm` against plain NumPy;
- the Triton kernel against float64 on ``shapes.SMALL`` for every dtype, plus batched, broadcast,
  transposed and alpha/beta cases: on CPU under Triton's interpreter, on CUDA compiled (``gpu`` marker;
  the fixed configuration, plus one autotuned case);
- ``warp_gemm.tools.check.main`` on the small set on CPU: returns 0, and 1 when a path is wrong.

Triton reads TRITON_INTERPRET when it is imported, so this module turns the interpreter on (when no CUDA
device is visible) before anything here imports triton. If another module imported triton first, the
CPU Triton tests skip with that reason; set TRITON_INTERPRET=1 in the environment (or in conftest.py)
to avoid it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from warp_gemm.tools import reference
from warp_gemm.tools import shapes
from warp_gemm.tools.tolerance import DTYPES, compare, random_operands

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    reference.enable_interpreter()  # before the first import of triton in this process

TORCH_DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64}
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def _need_triton(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    ok, why = reference.triton_available(device)
    if not ok:
        pytest.skip(why)


def _t(x64: np.ndarray, dtype: str, device: str):
    """A torch tensor of ``dtype`` on ``device`` holding ``x64`` (already rounded to ``dtype``: exact)."""
    return torch.from_numpy(np.ascontiguousarray(x64)).to(TORCH_DT[dtype]).to(device)


def _run_triton(fn, dtype: str, device: str):
    """Run ``fn``; on a device whose tl.dot has no float64, the documented TypeError skips."""
    try:
        return fn()
    except TypeError as e:
        if dtype == "float64" and device == "cuda":
            pytest.skip(str(e))
        raise


# --- the tolerance model's comparison --------------------------------------------------------------


def test_compare_frobenius_floor_for_one_cancelling_element():
    """A 1x1 float64 product that cancels (K 53: -2.98e-4 against sum |a_i b_i| 4.6, from a CI failure on Warp
    1.7.2) with the kernel's error of that run (2.79e-13 relative, 8.3e-17 absolute) is judged against a quarter of
    the model's unit RMS (FRO_FLOOR_RMS), not against the element itself; an error 10x the floor's bound still
    fails, and so does one element off by more than its elementwise bound."""
    from warp_gemm.tools.tolerance import FRO_FLOOR_RMS, compare, tolerance

    ref = np.array([[-2.9842296773588883e-4]])
    cmp = compare(ref * (1 + 2.79e-13), ref, "float64")
    assert cmp.ok and cmp.rel_fro == pytest.approx(2.79e-13 * abs(ref[0, 0]) / FRO_FLOOR_RMS, rel=1e-3), cmp
    fro = tolerance("float64").fro
    assert not compare(ref + 10 * fro * FRO_FLOOR_RMS, ref, "float64").ok
    assert not compare(ref + 2e-12, ref, "float64").ok  # elementwise: atol 1e-12 + rtol * 3e-4


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_compare_frobenius_unchanged_at_realistic_sizes(dtype, rng):
    """Outputs of the model's scale (unit variance, 64 elements): the Frobenius bound is relative to the output's
    own norm, as before the floor -- an error of 0.9x the bound passes, 1.1x fails (spread over every element, so the
    elementwise bound is not what decides)."""
    from warp_gemm.tools.tolerance import compare, tolerance

    ref = rng.standard_normal((8, 8))
    assert np.sqrt(np.mean(ref**2)) > 0.25  # the floor does not bind (a chi-square with 64 dof under 4: ~1e-24)
    fro = tolerance(dtype).fro
    unit = rng.choice([-1.0, 1.0], size=ref.shape) * np.linalg.norm(ref) / np.sqrt(ref.size)
    good, bad = compare(ref + 0.9 * fro * unit, ref, dtype), compare(ref + 1.1 * fro * unit, ref, dtype)
    assert good.rel_fro == pytest.approx(0.9 * fro) and bad.rel_fro == pytest.approx(1.1 * fro)
    assert good.ok and not bad.ok and bad.worst_excess < 1.0, (good, bad)


# --- float64_gemm -------------------------------------------------------------------------------------


def test_float64_gemm_matches_numpy(rng):
    a = rng.standard_normal((5, 7))
    b = rng.standard_normal((7, 3))
    c = rng.standard_normal((3,))
    np.testing.assert_allclose(reference.float64_gemm(a, b), a @ b, rtol=1e-14)
    np.testing.assert_allclose(reference.float64_matmul(a, b), a @ b, rtol=1e-14)
    got = reference.float64_gemm(a.T.copy(), b.T.copy(), c, alpha=2.0, beta=-0.5, trans_a=True, trans_b=True)
    np.testing.assert_allclose(got, 2.0 * (a @ b) - 0.5 * c, rtol=1e-14)


def test_float64_gemm_batch_broadcast_and_containers(rng):
    a = rng.standard_normal((3, 5, 7))
    b = rng.standard_normal((7, 4))
    assert reference.float64_gemm(a, b).shape == (3, 5, 4)
    np.testing.assert_allclose(reference.float64_gemm(a, b), np.matmul(a, b), rtol=1e-14)
    b1 = rng.standard_normal((1, 7, 4))
    np.testing.assert_allclose(reference.float64_gemm(a, b1), np.matmul(a, b1), rtol=1e-14)
    # torch inputs, bfloat16 included (torch's .numpy() refuses bfloat16).
    ta = torch.from_numpy(a).to(torch.bfloat16)
    tb = torch.from_numpy(b).to(torch.bfloat16)
    expected = np.matmul(ta.double().numpy(), tb.double().numpy())
    np.testing.assert_allclose(reference.float64_gemm(ta, tb), expected, rtol=1e-14)


def test_float64_gemm_beta_zero_ignores_nan_c(rng):
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 5))
    c = np.full((4, 5), np.nan)
    assert np.all(np.isfinite(reference.float64_gemm(a, b, c, beta=0.0)))


def test_float64_gemm_errors():
    with pytest.raises(ValueError, match="inner dimensions"):
        reference.float64_gemm(np.ones((3, 4)), np.ones((5, 6)))
    with pytest.raises(ValueError, match="do not broadcast"):
        reference.float64_gemm(np.ones((2, 3, 4)), np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="does not broadcast"):
        reference.float64_gemm(np.ones((3, 4)), np.ones((4, 5)), np.ones((2, 5)), beta=1.0)


def test_reference_imports_without_triton():
    # Importing the module must not need triton; triton_available says why it cannot run.
    code = ("import sys; sys.modules['triton'] = None\n"
            "import warp_gemm.tools.reference as r\n"
            "print(r.triton_available('cpu'))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "triton is not installed" in res.stdout


# --- the Triton kernel --------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", shapes.SMALL, ids=lambda s: s.id)
def test_triton_small(shape, dtype, device, rng):
    _need_triton(device)
    a, b = random_operands(shape.M, shape.N, shape.K, dtype, rng)
    ta, tb = _t(a, dtype, device), _t(b, dtype, device)
    out = _run_triton(lambda: reference.triton_gemm(ta, tb, tune=False), dtype, device)
    assert out.dtype == TORCH_DT[dtype] and tuple(out.shape) == (shape.M, shape.N)
    cmp = compare(reference.to_float64(out), reference.float64_gemm(a, b), dtype)
    assert cmp.ok, f"{shape.id} {dtype} {device}: {cmp}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_triton_batched_broadcast(dtype, device, rng):
    """(B, M, K) @ (B, K, N), and a 2-D B shared by every batch entry (stride 0)."""
    _need_triton(device)
    s = shapes.BATCHED[0]
    a, b = random_operands(s.M, s.N, s.K, dtype, rng, batch=s.batch)
    ta, tb = _t(a, dtype, device), _t(b, dtype, device)
    out = _run_triton(lambda: reference.triton_gemm(ta, tb, tune=False), dtype, device)
    cmp = compare(reference.to_float64(out), reference.float64_gemm(a, b), dtype)
    assert cmp.ok, f"batched {s.id} {dtype}: {cmp}"
    out = reference.triton_gemm(ta, tb[0], tune=False)
    cmp = compare(reference.to_float64(out), reference.float64_gemm(a, b[0]), dtype)
    assert out.shape == (s.batch, s.M, s.N) and cmp.ok, f"broadcast B {dtype}: {cmp}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_triton_transposed_alpha_beta(dtype, device, rng):
    """tt layout read through strides, alpha/beta epilogue, C a broadcast (N,) bias, a NaN-free result."""
    _need_triton(device)
    M, N, K = 65, 33, 129
    a, b = random_operands(M, N, K, dtype, rng)
    c = random_operands(1, N, 1, dtype, rng)[1][0]  # (N,), rounded to dtype
    ta = _t(a.T, dtype, device)  # stored (K, M): op(A) = ta.T
    tb = _t(b.T, dtype, device)
    tc = _t(c, dtype, device)
    out = _run_triton(lambda: reference.triton_gemm(ta, tb, tc, alpha=0.5, beta=-1.5, trans_a=True,
                                                    trans_b=True, tune=False), dtype, device)
    ref = reference.float64_gemm(a, b, c, alpha=0.5, beta=-1.5)
    cmp = compare(reference.to_float64(out), ref, dtype)
    assert cmp.ok, f"tt alpha/beta {dtype}: {cmp}"


@pytest.mark.parametrize("device", DEVICES)
def test_triton_beta_zero_ignores_nan_c_and_out_dtype(device, rng):
    _need_triton(device)
    a, b = random_operands(17, 19, 40, "float16", rng)
    c = torch.full((17, 19), float("nan"), dtype=torch.float16, device=device)
    out = reference.triton_gemm(_t(a, "float16", device), _t(b, "float16", device), c, beta=0.0,
                                out_dtype=torch.float32, tune=False)
    assert out.dtype == torch.float32
    # float32 output of a float32 accumulator: float32's bound applies.
    cmp = compare(reference.to_float64(out), reference.float64_gemm(a, b), "float32")
    assert cmp.ok, str(cmp)


@pytest.mark.parametrize("device", DEVICES)
def test_triton_k_zero_and_empty(device, rng):
    """K == 0: the product is zero and D = beta * C; M == 0: an empty result, no launch."""
    _need_triton(device)
    a = torch.ones((5, 0), device=device)
    b = torch.ones((0, 7), device=device)
    c = torch.from_numpy(rng.standard_normal((5, 7))).float().to(device)
    out = reference.triton_gemm(a, b, c, beta=2.0, tune=False)
    np.testing.assert_allclose(reference.to_float64(out), 2.0 * reference.to_float64(c), rtol=1e-6)
    empty = reference.triton_gemm(torch.ones((0, 4), device=device), torch.ones((4, 3), device=device))
    assert tuple(empty.shape) == (0, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_triton_errors(device):
    _need_triton(device)
    f16 = torch.ones((4, 8), dtype=torch.float16, device=device)
    with pytest.raises(TypeError, match="float32"):
        reference.triton_gemm(f16, torch.ones((8, 4), dtype=torch.float32, device=device))
    with pytest.raises(ValueError, match="inner dimensions"):
        reference.triton_gemm(f16, torch.ones((5, 4), dtype=torch.float16, device=device))
    with pytest.raises(TypeError, match="int32"):
        i32 = torch.ones((4, 4), dtype=torch.int32, device=device)
        reference.triton_gemm(i32, i32)


@pytest.mark.gpu
def test_triton_tf32_and_tuned_cuda(rng):
    """The autotuned kernel (the other tests use the fixed one: autotuning compiles and times ~10
    configurations per new shape) on an odd shape, and TF32."""
    _need_triton("cuda")
    M, N, K = 257, 129, 1000
    a, b = random_operands(M, N, K, "float32", rng)
    ref = reference.float64_gemm(a, b)
    out = reference.triton_gemm(_t(a, "float32", "cuda"), _t(b, "float32", "cuda"), allow_tf32=True,
                                tune=False)
    cmp = compare(reference.to_float64(out), ref, "float32", tf32=True)
    assert cmp.ok, f"tf32: {cmp}"
    a, b = random_operands(M, N, K, "float16", rng)
    out = reference.triton_gemm(_t(a, "float16", "cuda"), _t(b, "float16", "cuda"), tune=True)
    cmp = compare(reference.to_float64(out), reference.float64_gemm(a, b), "float16")
    assert cmp.ok, f"autotuned fp16: {cmp}"


# --- the harness --------------------------------------------------------------------------------------


def _need_gemm():
    try:
        import warp_gemm

        warp_gemm.gemm  # noqa: B018
    except Exception as e:  # the API is written in parallel; skip until it imports
        pytest.skip(f"warp_gemm.gemm is not importable: {e}")


def test_check_main_small_cpu(tmp_path, capsys):
    _need_gemm()
    path = tmp_path / "check.json"
    rc = __import__("warp_gemm.tools.check").tools.check.main(
        ["--device", "cpu", "--shapes", "small", "--dtype", "float32,float16", "--seed", "7",
         "--json", str(path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "0 failed" in out
    doc = json.loads(path.read_text())
    assert doc["summary"]["failed"] == 0
    assert len(doc["cases"]) == len(shapes.SMALL) * 2 * 4
    statuses = {c["paths"]["warp_gemm"]["status"] for c in doc["cases"]}
    assert statuses == {"pass"}


def test_check_main_reports_failure(monkeypatch, capsys):
    """A warp_gemm that returns a wrong result (here: leaves the NaN-filled out untouched) must fail."""
    _need_gemm()
    import warp_gemm
    from warp_gemm.tools import check

    monkeypatch.setattr(warp_gemm, "gemm", lambda a, b, c=None, *, out=None, **kw: out)
    rc = check.main(["--device", "cpu", "--shapes", "7x13x97", "--dtype", "float32", "--layouts", "nn",
                     "--no-triton", "--seed", "1"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL" in out and "1 failed" in out


def test_check_rejects_bad_arguments():
    from warp_gemm.tools import check

    with pytest.raises(SystemExit) as e:
        check.main(["--device", "cpu", "--layouts", "nx"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        check.main(["--device", "cpu", "--shapes", "nonsense"])
