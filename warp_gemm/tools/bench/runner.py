"""The warp_gemm benchmark runner: one table over a registry of GEMM providers (``warp-gemm bench``).

    warp-gemm bench                                   # bench-all on CUDA (bench-quick on CPU)
    warp-gemm bench --quick --device cpu              # the CI smoke test (< 2 minutes on 2 cores)
    warp-gemm bench --shapes bench-square --dtype fp16,tf32 --providers warp_gemm,torch
    warp-gemm bench --shapes 4096x4096x4096 --dtype bf16 --sweep --json rows.json --plot plots/

Also ``python -m warp_gemm.tools.bench.runner`` and, in a checkout, ``python benchmarks/run.py``. Every
provider's result is checked against a float64 reference (a sample of rows for large shapes) before it
is timed; a wrong provider gets a "WRONG" row and no number. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import itertools
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from warp_gemm.tools import dtypes as dtypes_mod
from warp_gemm.tools import shapes as shapes_mod
from warp_gemm.tools.shapes import Shape

from .env import (
    DType,
    Timing,
    Unavailable,
    _torch,
    _try_import,
    _wp,
    align_warp_stream,
    default_device,
    is_cuda,
    last_level_cache_bytes,
    normalize_device,
    parse_dtypes,
    synchronize,
    time_fn,
    torch_on,
    warm_up_gpu,
)
from .inputs import Inputs, check, input_set_count, make_inputs
from .providers import (
    NumpyProvider,
    Provider,
    TorchProvider,
    TritonProvider,
    WarpGemmProvider,
    WpMatmulProvider,
    sweep_providers,
)

# The folder `git` runs in for the header's commit: the checkout this package is in (an installed copy
# has none, and its rows say "unknown").
ROOT = Path(__file__).resolve().parents[3]

FIRST_CALL_MARKER = "FIRST_CALL_JSON "












































































PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (WarpGemmProvider(), TritonProvider(), TorchProvider(), NumpyProvider(), WpMatmulProvider())
}
















# ----------------------------------------------------------------------------------------------------------
# rows


@dataclass
class Row:
    shape: str
    M: int
    N: int
    K: int
    batch: int
    dtype: str  # the label: float16, bfloat16, float32, tf32, float64
    provider: str
    status: str = "ok"  # ok | WRONG | ERROR
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    first_call_s: float | None = None  # first call in this process (compile or cache load included)
    cold_first_call_s: float | None = None  # --cold: first call in a fresh process with an empty kernel cache
    cached_first_call_s: float | None = None  # --cold: first call in a fresh process with the normal cache
    reps: int | None = None
    input_sets: int = 1
    rel_fro_err: float | None = None
    max_abs_err: float | None = None
    note: str = ""


def new_row(shape: Shape, dtype: DType, provider: Provider) -> Row:
    return Row(shape.id, shape.M, shape.N, shape.K, shape.batch, dtype.label, provider.name)


def fill_timing(row: Row, shape: Shape, dtype: DType, t: Timing) -> None:
    seconds = t.median_ms / 1e3
    elements = (shape.M * shape.K + shape.K * shape.N + shape.M * shape.N) * max(shape.batch, 1)
    moved = elements * dtype.elem_bytes  # each operand read or written once
    row.median_ms, row.p20_ms, row.p80_ms, row.reps = t.median_ms, t.p20_ms, t.p80_ms, t.reps
    row.tflops = shape.flops / seconds / 1e12 if seconds > 0 else None
    row.gbps = moved / seconds / 1e9 if seconds > 0 else None


def bench_one(provider: Provider, shape: Shape, dtype: DType, device: str, inputs: Inputs,
              args: argparse.Namespace) -> Row:
    """Prepare, time the first call, gate on correctness, then time the steady state."""
    row = new_row(shape, dtype, provider)
    row.input_sets = len(inputs.sets)
    try:
        fn = provider.prepare(shape, dtype.name, dtype.tf32, device, inputs)
        synchronize(device)
        t0 = time.perf_counter()
        out = fn()  # input set 0: the one the reference was computed from
        synchronize(device)
        row.first_call_s = time.perf_counter() - t0
        cmp = check(out, inputs, dtype)
        row.rel_fro_err, row.max_abs_err = cmp.rel_fro, cmp.max_abs
        if not cmp.ok:
            row.status, row.note = "WRONG", str(cmp)
            return row
        # Every input set once before timing: a provider's first call on a new set of buffers may plan,
        # record or cache (warp_gemm's call plans are per operand set), and the timer's own warm-up is
        # sized from the first few calls. Without this, fp16 512^3 (200 sets, three launches per call)
        # timed 0.29-0.53 ms per call, against 49 us in steady state (H100): about half the
        # timed calls were first visits.
        for _ in range(len(inputs.sets)):
            fn()
        synchronize(device)
        fill_timing(row, shape, dtype, time_fn(fn, device, args.warmup_ms, args.rep_ms))
    except Exception as exc:  # noqa: BLE001 - one failing provider must not end the whole run
        row.status, row.note = "ERROR", f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return row


# ----------------------------------------------------------------------------------------------------------
# cold / cached first call in fresh processes (--cold)


def first_call_in_child(row: Row, provider: WarpGemmProvider, dtype: DType, device: str,
                        cache_dir: str | None) -> float | None:
    """Wall time of the first warp_gemm call in a fresh interpreter; ``cache_dir`` replaces Warp's kernel
    cache (an empty one measures the cold compile)."""
    spec = {"shape": row.shape, "dtype": dtype.label, "device": device, "config_index": provider.config_index,
            "config": None if provider.config is None else str(provider.config)}
    env = dict(os.environ)
    if cache_dir is not None:
        env["WARP_CACHE_PATH"] = cache_dir
    proc = subprocess.run([sys.executable, "-m", "warp_gemm.tools.bench.runner", "--_first-call", json.dumps(spec)],
                          env=env, capture_output=True, text=True, timeout=3600)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(FIRST_CALL_MARKER):
            return json.loads(line[len(FIRST_CALL_MARKER):])["first_call_s"]
    print(f"  [cold] child failed for {row.provider} {row.shape}: {proc.stderr.strip()[-500:]}",
          file=sys.stderr)
    return None


def child_first_call(spec_json: str) -> int:
    """The child side of --cold: build inputs, then time only the first warp_gemm call."""
    spec = json.loads(spec_json)
    shape, device = shapes_mod.parse_shape(spec["shape"]), spec["device"]
    dtype = parse_dtypes(spec["dtype"])[0]
    _wp()
    align_warp_stream(device)
    provider = WarpGemmProvider()
    if spec["config_index"] is not None:
        provider = sweep_providers(device, dtype)[spec["config_index"]]
        assert str(provider.config) == spec["config"], "candidate_configs() changed between processes"
    inputs = make_inputs(shape, dtype, device, n_sets=1, seed=0)
    fn = provider.prepare(shape, dtype.name, dtype.tf32, device, inputs)
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    print(FIRST_CALL_MARKER + json.dumps({"first_call_s": time.perf_counter() - t0}), flush=True)
    return 0


def measure_cold(rows: list[Row], providers: dict[str, Provider], dtypes: dict[str, DType],
                 device: str) -> None:
    for row in rows:
        provider = providers.get(row.provider)
        if row.status != "ok" or not isinstance(provider, WarpGemmProvider):
            continue
        with tempfile.TemporaryDirectory(prefix="warp_gemm_cold_") as empty_cache:
            row.cold_first_call_s = first_call_in_child(row, provider, dtypes[row.dtype], device, empty_cache)
        # The main run has filled the normal cache by now, so this is the cached first call.
        row.cached_first_call_s = first_call_in_child(row, provider, dtypes[row.dtype], device, None)
        print(f"  [cold] {row.shape:<22} {row.dtype:<8} {row.provider:<34} "
              f"cold {fmt(row.cold_first_call_s, '.2f')} s, cached {fmt(row.cached_first_call_s, '.3f')} s",
              flush=True)


# ----------------------------------------------------------------------------------------------------------
# header and table


def _run_text(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=ROOT)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str:
    """The checkout's commit (``-dirty`` with uncommitted changes); "unknown" for an installed package."""
    if not (ROOT / "pyproject.toml").is_file():
        return "unknown"
    rev = _run_text(["git", "rev-parse", "--short", "HEAD"])
    if rev is None:
        return "unknown"
    dirty = _run_text(["git", "status", "--porcelain", "--untracked-files=no"])
    return rev + ("-dirty" if dirty else "")


def _version(module: str) -> str | None:
    mod = _try_import(module)
    return getattr(mod, "__version__", None) if mod is not None else None


def device_info(device: str) -> dict[str, str | None]:
    if not is_cuda(device):
        try:
            lines = Path("/proc/cpuinfo").read_text().splitlines()
            model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        except (OSError, StopIteration):
            model = platform.processor() or platform.machine()
        return {"gpu": None, "cpu": f"{model} ({os.cpu_count()} cores)", "driver": None, "cuda": None}
    wp = _wp()
    index = device.split(":")[1] if ":" in device else "0"
    driver = _run_text(["nvidia-smi", f"--id={index}", "--query-gpu=driver_version", "--format=csv,noheader"])
    cuda_driver = getattr(wp, "get_cuda_driver_version", lambda: None)()
    toolkit = getattr(wp, "get_cuda_toolkit_version", lambda: None)()
    torch = _torch()
    cuda = ", ".join(x for x in (
        f"driver API {'.'.join(map(str, cuda_driver))}" if cuda_driver else "",
        f"torch {torch.version.cuda}" if torch is not None and torch.version.cuda else "",
        f"warp {'.'.join(map(str, toolkit))}" if toolkit else "") if x)
    return {"gpu": wp.get_device(device).name, "cpu": None, "driver": driver, "cuda": cuda or None}


def collect_header(device: str) -> dict[str, Any]:
    return {"device": device, **device_info(device), "warp": _version("warp"), "torch": _version("torch"),
            "triton": _version("triton"), "numpy": np.__version__, "python": platform.python_version(),
            "commit": git_commit(), "host": platform.node(),
            "time": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}


def header_line(h: dict[str, Any]) -> str:
    if h["gpu"]:
        hw = f"GPU {h['gpu']} | driver {h['driver'] or '?'} | CUDA {h['cuda'] or '?'}"
    else:
        hw = f"CPU {h['cpu']}"
    return (f"# warp_gemm bench on {h['device']}: {hw} | warp {h['warp']} | torch {h['torch']} | "
            f"triton {h['triton']} | numpy {h['numpy']} | commit {h['commit']}"
            + (f" | layout {h['layout']}" if h.get("layout", "nn") != "nn" else ""))


def fmt(x: float | None, spec: str) -> str:
    """``x`` formatted by ``spec``; a missing value is a '-' of the same width."""
    width = int("".join(c for c in spec.split(".")[0] if c.isdigit()) or 0)
    return f"{'-':>{width}}" if x is None else format(x, spec)


COLUMNS = (f"{'shape':<22} {'dtype':<8} {'provider':<34} {'median ms':>10} {'p20-p80 ms':>19} "
           f"{'TFLOP/s':>8} {'GB/s':>8} {'1st s':>7}  status")


def format_row(r: Row) -> str:
    spread = "-" if r.p20_ms is None else f"{r.p20_ms:.4g}-{r.p80_ms:.4g}"
    status = r.status if r.status == "ok" else f"{r.status} {r.note}"
    return (f"{r.shape:<22} {r.dtype:<8} {r.provider:<34} {fmt(r.median_ms, '10.4g')} {spread:>19} "
            f"{fmt(r.tflops, '8.4g')} {fmt(r.gbps, '8.4g')} {fmt(r.first_call_s, '7.2f')}  {status}")


def print_summary(rows: list[Row]) -> None:
    """The final table, grouped by dtype and shape, with each provider's speed relative to the fastest."""
    print("\n# summary (rel = TFLOP/s / best TFLOP/s for the shape and dtype)")
    print(COLUMNS + "   rel")
    order = sorted(rows, key=lambda r: (r.dtype, r.batch, r.M * r.N * r.K, r.shape))
    for (dtype, shape), group in itertools.groupby(order, key=lambda r: (r.dtype, r.shape)):
        group = list(group)
        best = max((r.tflops for r in group if r.tflops), default=None)
        for r in group:
            rel = f"{r.tflops / best:6.2f}" if best and r.tflops else "     -"
            print(format_row(r) + "   " + rel)


def write_json(path: str, header: dict[str, Any], rows: list[Row], skipped: list[dict[str, str]]) -> None:
    """Top-level header plus rows; each row repeats the header fields so rows from many runs can be merged."""
    data = {"header": header, "skipped": skipped,
            "rows": [{**header, **asdict(r)} for r in rows]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1))


# ----------------------------------------------------------------------------------------------------------
# driver


def parse_args(argv: list[str] | None, prog: str | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", help=f"comma-separated set names ({', '.join(shapes_mod.SETS)}) and/or "
                   f"{shapes_mod.FORMAT} (default: bench-all on CUDA, bench-quick on CPU)")
    p.add_argument("--dtype", help=f"comma-separated: {dtypes_mod.SPELLINGS}; "
                   "default fp16,bf16,tf32,fp32 on CUDA, fp32 on CPU")
    p.add_argument("--providers", default=",".join(PROVIDERS),
                   help=f"comma-separated from {', '.join(PROVIDERS)}")
    p.add_argument("--device", help="cpu, cuda, cuda:N (default: cuda:0 when available)")
    p.add_argument("--sweep", action="store_true",
                   help="add one warp_gemm row per warp_gemm.candidate_configs() entry")
    p.add_argument("--quick", action="store_true", help="tiny shapes, few repeats: a smoke test")
    p.add_argument("--cold", action="store_true", help="also time warp_gemm's first call in fresh processes: "
                   "with an empty kernel cache (cold compile) and with the normal one (cached)")
    p.add_argument("--precompile", type=int, default=0, metavar="N", help="first build every candidate "
                   "configuration of the dtypes in N parallel processes (warp_gemm.tools.bench.compile_parallel), so "
                   "that neither --sweep nor the default choice compiles serially while timing")
    p.add_argument("--json", metavar="PATH", help="write the header and all rows as JSON")
    p.add_argument("--plot", metavar="DIR", help="write TFLOP/s figures (PNG), one per dtype (needs matplotlib)")
    p.add_argument("--rep-ms", type=float, help="timed repetition budget per row (default 100; --quick 20)")
    p.add_argument("--warmup-ms", type=float, help="warm-up budget per row (default 25; --quick 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layout", choices=("nn", "nt"), default="nn",
                   help="nt: B stored (N, K) and passed as its transposed view (F.linear's W.T); default nn")
    p.add_argument("--suite", choices=("gemm", "grouped", "fused", "first-call", "host"), default="gemm",
                   help="gemm: the GEMM table over --shapes (default); grouped: grouped_mm / grouped_matmul against "
                        "F.grouped_mm and loops of torch.matmul (CUDA; its own rows, see warp_gemm.tools.bench.grouped); "
                        "fused: a GEMM and its epilogue in one user kernel (fused_gemm) against the unfused pair and "
                        "torch (CUDA; warp_gemm.tools.bench.fused); "
                        "first-call: seconds to the first result, each case in a fresh process on an empty kernel "
                        "cache; host: host time per call on new and seen operands against torch.matmul (both CUDA, "
                        "see warp_gemm.tools.bench.startup)")
    p.add_argument("--jobs", type=int, default=1, help="--suite first-call: cases run at once (default 1)")
    p.add_argument("--_first-call", dest="first_call", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = [n for n in args.providers.split(",") if n.strip() not in PROVIDERS]
    if unknown:
        p.error(f"unknown provider(s) {', '.join(unknown)}; known: {', '.join(PROVIDERS)}")
    if args.first_call:
        return args
    args.device = normalize_device(args.device or default_device())
    if not re.fullmatch(r"cpu|cuda:\d+", args.device):
        p.error(f"unknown device {args.device!r}: use cpu, cuda or cuda:N")
    cuda = is_cuda(args.device)
    if cuda and not cuda_available():
        p.exit(2, f"{p.prog}: error: --device {args.device}: no CUDA device here (Warp sees none); use --device cpu\n")
    if args.suite != "gemm" and not (cuda and torch_on(args.device)):
        p.exit(2, f"{p.prog}: error: --suite {args.suite} runs on torch CUDA tensors: it needs a CUDA device and torch "
                  "with CUDA\n")
    args.shapes = args.shapes or ("bench-quick" if args.quick or not cuda else "bench-all")
    args.dtype = args.dtype or ("fp16,bf16,tf32,fp32" if cuda and not args.quick else "fp32")
    try:
        args.shape_list = shapes_mod.get_set(args.shapes)
        args.dtype_list = parse_dtypes(args.dtype)
    except ValueError as e:
        p.error(str(e))
    if args.plot and _try_import("matplotlib") is None:
        p.error("--plot needs matplotlib (pip install 'warp-gemm[bench]')")
    args.rep_ms = args.rep_ms if args.rep_ms is not None else (20.0 if args.quick else 100.0)
    args.warmup_ms = args.warmup_ms if args.warmup_ms is not None else (5.0 if args.quick else 25.0)
    return args


def cuda_available() -> bool:
    """Whether Warp sees a CUDA device (every provider but NumPy needs Warp's or torch's CUDA)."""
    try:
        return _wp().get_cuda_device_count() > 0
    except Exception:  # noqa: BLE001 - a Warp that cannot start has no CUDA device to offer
        return False


def select_providers(args: argparse.Namespace, dtype: DType,
                     skipped: list[dict[str, str]]) -> list[Provider]:
    """The requested providers that can run (device, dtype); the others are reported once and left out."""
    out: list[Provider] = []
    for name in (n.strip() for n in args.providers.split(",")):
        if name not in PROVIDERS:
            raise ValueError(f"unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
        ok, reason = PROVIDERS[name].available(args.device, dtype)
        if not ok:
            skipped.append({"provider": name, "dtype": dtype.label, "reason": reason})
            print(f"# skip {name} for {dtype.label}: {reason}", flush=True)
            continue
        out.append(PROVIDERS[name])
        if name == "warp_gemm" and args.sweep:
            try:
                out.extend(sweep_providers(args.device, dtype))
            except Exception as exc:  # noqa: BLE001 - e.g. candidate_configs() not written yet
                skipped.append({"provider": "warp_gemm --sweep", "dtype": dtype.label, "reason": repr(exc)})
                print(f"# skip --sweep for {dtype.label}: {exc!r}", flush=True)
    return out


def free_device_memory(device: str) -> None:
    gc.collect()
    torch = _torch()
    if is_cuda(device) and torch_on(device):
        torch.cuda.empty_cache()


def run_shape(shape: Shape, dtype: DType, providers: list[Provider], args: argparse.Namespace,
              cache_bytes: int, seed: int) -> list[Row]:
    n_sets = input_set_count(shape, dtype, cache_bytes)
    try:
        inputs = make_inputs(shape, dtype, args.device, n_sets, seed, getattr(args, "layout", "nn"))
    except Unavailable as exc:
        print(f"# skip {shape.id} {dtype.label}: {exc}", flush=True)
        return []
    except Exception as exc:  # noqa: BLE001 - e.g. out of memory: report every provider's row as an error
        rows = [new_row(shape, dtype, p) for p in providers]
        for r in rows:
            r.status, r.note = "ERROR", f"inputs: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            print(format_row(r), flush=True)
        return rows
    rows = []
    for provider in providers:
        row = bench_one(provider, shape, dtype, args.device, inputs, args)
        print(format_row(row), flush=True)
        rows.append(row)
    del inputs
    free_device_memory(args.device)
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    if args.first_call:
        return child_first_call(args.first_call)
    if args.suite == "grouped":
        from warp_gemm.tools.bench import grouped

        return grouped.main(["--reps", "20"] + (["--json", args.json] if args.json else []))
    if args.suite in ("first-call", "host"):
        from warp_gemm.tools.bench import startup

        return startup.main([args.suite, "--jobs", str(args.jobs)] + (["--json", args.json] if args.json else []))
    if args.suite == "fused":
        from warp_gemm.tools.bench import fused

        return fused.main(["--reps", "20"] + (["--json", args.json] if args.json else []))
    shape_list = args.shape_list
    dtypes = args.dtype_list
    _wp()
    align_warp_stream(args.device)
    header = collect_header(args.device)
    header["layout"] = getattr(args, "layout", "nn")
    print(header_line(header), flush=True)

    if args.precompile and "warp_gemm" in args.providers:
        from warp_gemm.tools.bench.compile_parallel import precompile_sweep

        precompile_sweep(args.device, [d.label for d in dtypes], workers=args.precompile)

    warm_up_gpu(args.device)
    skipped: list[dict[str, str]] = []
    rows: list[Row] = []
    used_providers: dict[str, Provider] = {}
    cache_bytes = last_level_cache_bytes(args.device)
    for dtype in dtypes:
        providers = select_providers(args, dtype, skipped)
        used_providers.update({p.name: p for p in providers})
        print(COLUMNS, flush=True)
        for i, shape in enumerate(shape_list):
            rows.extend(run_shape(shape, dtype, providers, args, cache_bytes, seed=args.seed + i))

    if args.cold:
        measure_cold(rows, used_providers, {d.label: d for d in dtypes}, args.device)
    print_summary(rows)
    if args.json:
        write_json(args.json, header, rows, skipped)
        print(f"# wrote {args.json}")
    if args.plot:
        from warp_gemm.tools.bench.plots import write_plots

        title = f"{header['gpu'] or header['cpu']} | commit {header['commit']}"
        for path in write_plots(rows, args.plot, title):
            print(f"# wrote {path}")
    return 0 if all(r.status == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
