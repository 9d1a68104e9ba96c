"""The ``warp-gemm`` command: one dtype spelling everywhere, shape errors that name the format, one-line
failures (exit 2, no traceback) where the device or backend a command needs is missing, and ``check``
naming the backend and family that ran (host BLAS or the Warp tile kernels on the CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_CUDA, torch

from warp_gemm.tools import dtypes, shapes

ROOT = Path(__file__).resolve().parent.parent
no_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the behaviour without a CUDA device")


def _cli(*args: str, timeout: int = 600):
    """``python -m warp_gemm ARGS`` in a fresh process from outside the source tree: (exit code, stdout, stderr)."""
    env_path = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "warp_gemm", *args], capture_output=True, text=True,
                          timeout=timeout, cwd="/", env={**__import__("os").environ, "PYTHONPATH": env_path})
    return proc.returncode, proc.stdout, proc.stderr


def _ours(stderr: str) -> list[str]:
    """stderr without Warp's own start-up lines (its CUDA-driver warning is printed by its C library)."""
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("Warp CUDA warning")]


# --- the one dtype parser --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,names", [
    ("fp16,bf16,tf32,fp32,fp64", ["float16", "bfloat16", "tf32", "float32", "float64"]),
    ("float16, BFLOAT16,float32,float64", ["float16", "bfloat16", "float32", "float64"]),
    ("half,double,f32,fp16", ["float16", "float64", "float32"]),
])
def test_dtype_spellings(text, names):
    assert dtypes.parse_list(text) == names


@pytest.mark.parametrize("text", ["fp8", "int32", "", "fp16,fp99"])
def test_dtype_errors_name_the_spellings(text):
    with pytest.raises(ValueError, match="fp16, bf16, tf32, fp32, fp64"):
        dtypes.parse_list(text)


def test_every_command_uses_the_one_parser():
    """check, bench, tune, precompile and the parallel builds all take the short and the long names."""
    from warp_gemm.tools.bench import compile_parallel, runner
    from warp_gemm.tools import check, precompile

    assert [d.label for d in runner.parse_dtypes("fp16,bfloat16,tf32,double")] == ["float16", "bfloat16", "tf32",
                                                                                  "float64"]
    assert precompile.canon_dtype("bf16") == precompile.canon_dtype("bfloat16") == "bfloat16"
    args = check.parse_args(["--device", "cpu", "--dtype", "fp16,float32,tf32"])
    assert args.dtype == ["float16", "float32", "tf32"]
    with pytest.raises(SystemExit):
        compile_parallel.main(["--dtype", "fp8"])


@pytest.mark.parametrize("text", ["7x13", "7x13x9x1x2", "axbxc", "M7-N13", "odd,7x-1x3"])
def test_shape_errors_name_the_format(text):
    with pytest.raises(ValueError, match="MxNxK or BxMxNxK|negative"):
        shapes.get_set(text)


def test_shape_lists():
    assert shapes.get_set("odd,") == shapes.SETS["odd"]  # a trailing comma adds nothing
    assert shapes.get_set("7x13x97,3x33x17x65") == [shapes.Shape(7, 13, 97), shapes.Shape(33, 17, 65, 3)]


# --- one line, exit 2, where the device is missing ---------------------------------------------------------------
@no_cuda
@pytest.mark.parametrize("args,needle", [
    (["tune"], "needs a CUDA device"),
    (["tune", "--device", "cpu"], "--device cpu"),
    (["check", "--device", "cuda"], "--device cuda"),
    (["bench", "--device", "cuda"], "--device cuda:0"),
    (["precompile", "--arch", ""], "needs a CUDA device"),
    (["check", "--shapes", "7x13"], "MxNxK or BxMxNxK"),
    (["bench", "--dtype", "fp8"], "fp16, bf16, tf32, fp32, fp64"),
])
def test_missing_device_is_one_line(args, needle):
    rc, out, err = _cli(*args)
    lines = _ours(err)
    assert rc == 2, (out, err)
    assert "Traceback" not in err, err
    assert lines and needle in lines[-1] and lines[-1].startswith(f"warp-gemm {args[0]}"), err
    # a usage error prints the usage above its one error line; a missing device prints only the line
    if "usage:" not in err:
        assert len(lines) == 1, lines


def test_bench_usage_names_the_subcommand():
    rc, out, _ = _cli("bench", "--help")
    assert rc == 0 and out.startswith("usage: warp-gemm bench"), out[:200]
    assert "warp_gemm.shapes" not in out  # (no such module: the sets are named)


# --- check: backend and family ------------------------------------------------------------------------------------
@pytest.mark.cpu_host
@pytest.mark.parametrize("backend,family", [("host", "host"), ("tiles", "tiled")])
def test_check_names_backend_and_family(backend, family, tmp_path, capsys):
    from warp_gemm.tools import check

    path = tmp_path / "check.json"
    rc = check.main(["--device", "cpu", "--backend", backend, "--shapes", "7x13x97,3x33x17x65", "--dtype", "fp32",
                     "--layouts", "nn,tn", "--no-triton", "--json", str(path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert f"backend: cpu: {'host BLAS' if backend == 'host' else 'Warp tile kernels'}" in out
    doc = json.loads(path.read_text())
    fams = {c["paths"]["warp_gemm"]["family"].split()[0] for c in doc["cases"]}
    assert fams == {family}, fams
    assert doc["backend"] == backend
    assert f"warp_gemm families: {family} 4" in out


@pytest.mark.cpu_host
def test_check_tiles_backend_is_scoped(capsys):
    """``--backend tiles`` changes the options for the run only."""
    from warp_gemm.core.options import options
    from warp_gemm.tools import check

    assert options().cpu_backend == "host"
    assert check.main(["--device", "cpu", "--backend", "tiles", "--shapes", "7x13x97", "--dtype", "fp64",
                       "--layouts", "nn", "--no-triton"]) == 0
    assert options().cpu_backend == "host"


@pytest.mark.skipif(torch is None, reason="--device cuda on a CPU build of torch")
@pytest.mark.skipif(HAS_CUDA, reason="needs a machine without CUDA")
def test_check_cuda_reason_names_torch_or_warp():
    from warp_gemm.tools import check

    why = check.cuda_problem()
    assert why is not None and ("Warp sees none" in why or "CPU build" in why), why
