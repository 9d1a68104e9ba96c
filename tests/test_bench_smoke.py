"""Smoke test of the benchmark runner (``warp_gemm.tools.bench.runner``, ``warp-gemm bench``): ``--quick --device cpu``
in-process, and ``benchmarks/run.py`` as the checkout's shim onto it.

CI runs no GPU, so this covers the CPU timer, the correctness gate, the table, --json and --plot; it takes
a few seconds once Warp's CPU kernels are cached (~10 s cold on a 2-core machine).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_runner():
    from warp_gemm.tools.bench import runner

    return runner


def test_checkout_shim_is_the_runner():
    """``benchmarks/run.py``, imported by name as the probes do, is the packaged runner itself."""
    from warp_gemm.tools.bench import runner

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        sys.modules.pop("run", None)
        import run  # noqa: PLC0415
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
        sys.modules.pop("run", None)
    assert run is runner


def test_quick_cpu_run_writes_rows_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    try:
        from warp_gemm import matmul  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"warp_gemm.matmul is not importable yet: {exc}")
    import warp as wp

    run = _load_runner()
    rows_path, plot_dir = tmp_path / "rows.json", tmp_path / "plots"
    level = getattr(wp.config, "log_level", None)
    try:
        rc = run.main(["--quick", "--device", "cpu", "--json", str(rows_path), "--plot", str(plot_dir)])
    finally:
        if level is not None:  # the runner quiets Warp; leave the session's setting as it was
            wp.config.log_level = level

    data = json.loads(rows_path.read_text())
    rows = data["rows"]
    assert rc == 0
    assert rows, "no benchmark rows"
    bad = [(r["shape"], r["provider"], r["status"], r["note"]) for r in rows if r["status"] != "ok"]
    assert not bad, bad
    assert "warp_gemm" in {r["provider"] for r in rows}
    for r in rows:
        assert r["median_ms"] > 0 and r["tflops"] > 0 and r["gbps"] > 0
        assert r["p20_ms"] <= r["median_ms"] <= r["p80_ms"]
        assert r["commit"] == data["header"]["commit"]  # every row carries the header fields
    assert data["header"]["device"] == "cpu"
    assert list(plot_dir.glob("*.png")), "no figure written"


def test_layout_nt_passes_w_transposed(tmp_path):
    """``--layout nt``: B is a transposed view of an (N, K) array in every input set (F.linear's W.T), the header
    says so, and every provider's result passes the float64 check."""
    import numpy as np

    from warp_gemm.tools.bench.env import parse_dtypes
    from warp_gemm.tools.bench.inputs import make_inputs
    from warp_gemm.tools.shapes import parse_shape

    inputs = make_inputs(parse_shape("20x30x40"), parse_dtypes("fp32")[0], "cpu", 3, 0, "nt")
    for a, b in inputs.sets:
        b = b if isinstance(b, np.ndarray) else b.numpy()
        assert b.shape == (40, 30) and b.strides[0] < b.strides[1], b.strides  # K is the contiguous dimension
    with pytest.raises(ValueError, match="layout"):
        make_inputs(parse_shape("20x30x40"), parse_dtypes("fp32")[0], "cpu", 1, 0, "tt")
    run = _load_runner()
    rows_path = tmp_path / "rows.json"
    assert run.main(["--device", "cpu", "--shapes", "33x17x65", "--dtype", "fp32,fp16", "--quick", "--layout", "nt",
                     "--json", str(rows_path)]) == 0
    data = json.loads(rows_path.read_text())
    assert data["header"]["layout"] == "nt"
    assert data["rows"] and all(r["status"] == "ok" for r in data["rows"]), data["rows"]


@pytest.mark.parametrize("suite", ["grouped", "first-call", "host"])
def test_cuda_suites_need_cuda(suite, capsys):
    """``warp-gemm bench --suite grouped|first-call|host`` run on torch CUDA tensors: on the CPU each refuses in one
    line with exit 2, and the suites' rows are the package's (``warp_gemm.tools.bench.grouped`` / ``startup``)."""
    from warp_gemm.tools.bench import grouped, runner, startup

    with pytest.raises(SystemExit) as e:
        runner.main(["--suite", suite, "--device", "cpu"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--suite {suite}" in err[0] and "CUDA" in err[0]
    assert {"moe8", "moe64", "list1000"} <= {r.name for r in grouped.ROWS}
    labels = {c[0] for c in startup.FIRST_CALL_CASES}
    assert {"fp32 1000^3", "fp64 1000^3", "fp16 4096 x 32^3", "fp32 33x17x65", "tf32 1000 x 16^3"} <= labels
    assert len(labels) == len(startup.FIRST_CALL_CASES)
