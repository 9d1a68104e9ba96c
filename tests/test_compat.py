"""The version shim: probed flags, and warp_gemm's behaviour on each kind of Warp release.

CI runs this file against several warp-lang releases (scripts/test.sh). Behaviour of releases that
cannot be installed side by side is simulated by setting the probed flag, which is exactly what the
rest of the package reads.
"""

from __future__ import annotations

import ast
import inspect
import pathlib

import numpy as np
import pytest
import warp as wp
from conftest import make, nan_like, to_f64

import warp_gemm
from warp_gemm import _compat
from warp_gemm.families import tiled as _kernels
from warp_gemm.tools.tolerance import compare, random_operands

PKG = pathlib.Path(warp_gemm.__file__).parent


def test_flags_match_the_installed_warp():
    ctx = _compat._ctx
    tm_params = _compat._builtin_params("tile_matmul")
    assert _compat.HAS_TF32 == ("precision" in tm_params)
    assert _compat.HAS_MATMUL_ALPHA_BETA == ("alpha" in tm_params)
    assert _compat.HAS_TILE_ASTYPE == ("tile_astype" in ctx.builtin_functions)
    assert _compat.HAS_BF16 == hasattr(wp, "bfloat16")
    assert _compat.HAS_UNIQUE_MODULE == ("module" in inspect.signature(wp.kernel).parameters)
    assert _compat.HAS_COMPILE_AOT == hasattr(wp, "compile_aot_module")
    assert _compat.SUPPORTED, "the releases CI installs are all supported"
    feats = _compat.features()
    assert feats["WARP_VERSION"] == _compat.WARP_VERSION and all(isinstance(v, (bool, str)) for v in feats.values())


def test_no_version_comparisons_outside_compat():
    """Only _compat may look at Warp's version; everything else reads probed flags."""
    offenders = []
    for path in PKG.glob("*.py"):
        if path.name == "_compat.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = {n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in ast.walk(node)}
                if names & {"WARP_VERSION", "version", "__version__"}:
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "version" and \
                    isinstance(node.value, ast.Attribute) and node.value.attr == "config":
                offenders.append(f"{path.name}:{node.lineno} (wp.config.version)")
    assert not offenders, f"version checks outside _compat: {offenders}"


def test_below_minimum_release_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_compat, "SUPPORTED", False)
    a = np.ones((3, 4), np.float32)
    with pytest.raises(_compat.UnsupportedWarpError, match=r"warp-lang >= 1\.7"):
        warp_gemm.matmul(a, a.T.copy())


def test_cpu_without_cpu_tiles_is_a_clear_error(monkeypatch):
    """Warp 1.6 runs tile kernels on CUDA only."""
    monkeypatch.setattr(_compat, "HAS_CPU_TILES", False)
    a = np.ones((3, 4), np.float32)
    out = np.full((3, 3), np.nan, np.float32)
    with pytest.raises(_compat.UnsupportedWarpError, match=r"CPU need warp-lang >= 1\.7"):
        warp_gemm.matmul(a, a.T.copy(), out=out)
    assert np.isnan(out).all()


@pytest.mark.parametrize("dtype", ["float16"] + (["bfloat16"] if _compat.HAS_BF16 else []))
@pytest.mark.parametrize("shape", [(33, 47, 1027), (5, 70, 300)])
def test_16bit_widening_path_keeps_fp32_accuracy(dtype, shape, rng, monkeypatch):
    """Warp 1.7 accumulates 16-bit tiles in 16 bit; warp_gemm widens on the device first. The path
    runs here on any release (flag forced), and natively in CI's 1.7 environment."""
    monkeypatch.setattr(_compat, "WIDEN_16BIT_INPUTS", True)
    M, N, K = shape
    a, b = random_operands(M, N, K, dtype, rng)
    out = nan_like("warp", (M, N), dtype, "cpu")
    warp_gemm.matmul(make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"), out=out)
    cmp = compare(to_f64(out), a @ b, dtype)
    assert cmp.ok, cmp


@pytest.mark.skipif(not _compat.HAS_TILE_ASTYPE, reason="this release has no tile_astype to switch off")
def test_no_tile_astype_path(rng, monkeypatch):
    """Without tile_astype (1.7) the kernel writes its accumulator dtype into a temporary that an
    elementwise pass converts; force that path on this release."""
    monkeypatch.setattr(_compat, "HAS_TILE_ASTYPE", False)
    monkeypatch.setattr(_compat, "WIDEN_16BIT_INPUTS", True)
    a, b = random_operands(40, 50, 260, "float16", rng)
    c = rng.standard_normal(50).astype(np.float16)
    out = np.full((40, 50), np.nan, np.float16)
    warp_gemm.gemm(a.astype(np.float16), b.astype(np.float16), c, beta=1.0, out=out)
    assert compare(out, a @ b + c.astype(np.float64), "float16").ok


def test_bf16_absent_is_a_clear_error(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_compat, "HAS_BF16", False)
    x = torch.ones(4, 4, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"bfloat16 needs warp-lang >= 1\.13"):
        warp_gemm.matmul(x, x)


def test_allow_tf32_documented_fallback(rng):
    """CPU (any release) and releases without precision="tf32": exact float32."""
    a, b = random_operands(64, 64, 512, "float32", rng)
    res = warp_gemm.matmul(a.astype(np.float32), b.astype(np.float32), allow_tf32=True)
    assert compare(res, a @ b, "float32").ok


@pytest.mark.gpu
def test_tf32_on_cuda(rng):
    a, b = random_operands(256, 256, 1024, "float32", rng)
    A = wp.array(a.astype(np.float32), device="cuda")
    B = wp.array(b.astype(np.float32), device="cuda")
    res = warp_gemm.matmul(A, B, allow_tf32=True).numpy()
    cmp = compare(res, a @ b, "float32", tf32=True)
    assert cmp.ok, cmp
    if not _compat.HAS_TF32:
        assert compare(res, a @ b, "float32").ok, "without precision='tf32' the result is exact fp32"


def test_kernels_are_forward_only():
    spec = _kernels.KernelSpec(32, 32, 32, "float32", "float32", "N", "N", "scale")
    k = _kernels.get_kernel(spec)
    assert k.module.options.get("enable_backward") is False


AOT_DTYPES = ["float16", "float32", "float64"] + (["bfloat16"] if _compat.HAS_BF16 else []) + \
    (["tf32"] if _compat.HAS_TF32 else [])


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.parametrize("dtype", AOT_DTYPES)
def test_cuda_kernels_compile_offline(dtype, tmp_path):
    """CUDA build coverage without a GPU: one configuration per dtype for sm_80 and sm_90, so a
    MathDx/LTO rejection fails CI instead of a user's first call."""
    from warp_gemm.config.configs import heuristic
    from warp_gemm.tools.precompile import build_one

    base = "float32" if dtype == "tf32" else dtype
    cfg = heuristic(False, base, 4096, 4096, 4096, 1)
    job, seconds, err = build_one((str(cfg), base, "NN", "scale", dtype == "tf32"), [80, 90], str(tmp_path))
    assert not err, f"{job}: {err}"
    built = sorted(p.name for p in tmp_path.rglob("*") if p.suffix in (".cubin", ".ptx"))
    assert any("sm80" in n for n in built) and any("sm90" in n for n in built), built


@pytest.mark.skipif(not _compat.HAS_COMPILE_AOT, reason="wp.compile_aot_module arrived in warp-lang 1.9")
@pytest.mark.skipif(not _compat.HAS_STRIDED_MATMUL_OPERANDS, reason="K-tail kernels are padded kernels (1.19+)")
@pytest.mark.parametrize("dtype", ["float16", "float64"] + (["tf32"] if _compat.HAS_TF32 else []))
def test_k_tail_kernels_compile_offline(dtype, tmp_path):
    """The K-tail variant (clamped last K tile, zeroed overlap) of the heuristic's kernel, for sm_90."""
    from warp_gemm.config.configs import heuristic
    from warp_gemm.tools.precompile import build_one

    base = "float32" if dtype == "tf32" else dtype
    cfg = heuristic(False, base, 4096, 4096, 4096, 1)
    job, seconds, err = build_one((str(cfg), base, "NN", "scale", dtype == "tf32", True), [90], str(tmp_path))
    assert not err, f"{job}: {err}"
    built = sorted(p.name for p in tmp_path.rglob("*") if p.suffix in (".cubin", ".ptx"))
    assert any("sm90" in n for n in built) and any("_kt" in n for n in built), built
