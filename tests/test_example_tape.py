"""examples/05_tape_fit.py: a linear model fitted through wp.Tape + warp_gemm must actually fit."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import warp_gemm._compat as compat

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "05_tape_fit.py"


def _load():
    spec = importlib.util.spec_from_file_location("example_05_tape_fit", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not compat.HAS_CPU_TILES, reason="CPU tile kernels need warp-lang >= 1.7")
def test_tape_fit_converges(capsys):
    rc = _load().main(["--device", "cpu", "--steps", "25"])
    out = capsys.readouterr().out
    assert rc == 0, out
    first, last = (float(v) for v in re.search(r"initial loss (\S+)\s+final loss (\S+)", out).groups())
    assert last < first / 1e4, out  # from ~1e2 down to the noise floor (~5e-6)
    w_err = float(re.search(r"relative error vs the true W: (\S+),", out).group(1))
    assert w_err < 1e-2, out
