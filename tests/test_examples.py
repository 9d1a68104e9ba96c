"""Run every example program through its ``main(argv)`` on the CPU at small sizes, so none can rot.

(examples/05_tape_fit.py has its own test.)
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

import warp_gemm._compat as compat

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

pytestmark = pytest.mark.skipif(not compat.HAS_CPU_TILES, reason="CPU tile kernels need warp-lang >= 1.7")


def load(name: str):
    """Import examples/<name>.py (file names start with a digit, so not through ``import``)."""
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = {
    "01_basic_wp_array": ["--m", "37", "--n", "29", "--k", "65", "--batch", "2"],
    # The README's main job, with its default shapes (1023x1025x1027 and the primes): ~2 s on 2 cores.
    "02_odd_shapes": [],
    "04_gemm_alpha_beta": ["--m", "33", "--n", "17", "--k", "65"],
    "06_benchmark_your_shape": ["--shape", "65x33x129", "--repeats", "2", "--warmup", "0"],
    "07_fused_layer": ["--size", "70x45x33", "--tiles", "32x32x16"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name, capsys):
    rc = load(name).main([*CASES[name], "--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "FAIL" not in out and "WRONG" not in out, out


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_odd_shapes_other_dtypes(dtype, capsys):
    rc = load("02_odd_shapes").main(["--device", "cpu", "--dtype", dtype, "--shapes", "7x13x97,3x33x17x65"])
    assert rc == 0, capsys.readouterr().out


def test_torch_interop():
    pytest.importorskip("torch")
    args = ["--device", "cpu", "--batch", "37", "--in-features", "65", "--out-features", "29"]
    assert load("03_torch_interop").main(args) == 0


def test_odd_shapes_exits_nonzero_on_a_wrong_result(monkeypatch, capsys):
    mod = load("02_odd_shapes")
    real = mod.compare
    monkeypatch.setattr(mod, "compare", lambda out, ref, dtype: replace(real(out, ref, dtype), ok=False))
    assert mod.main(["--device", "cpu", "--shapes", "7x13x97"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_bad_arguments_exit_with_usage():
    mod = load("02_odd_shapes")
    with pytest.raises(SystemExit) as e:
        mod.main(["--shapes", "not-a-shape"])
    assert e.value.code == 2
