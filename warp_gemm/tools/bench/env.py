"""The runner's environment: lazy imports, dtypes, devices, timing (CUDA events, the L2 flush, quantiles)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from warp_gemm.tools import dtypes as dtypes_mod

MB = 1 << 20


def _try_import(name: str):
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - an optional dependency may fail in any way on import
        return None


_WP = None


def quiet_warp(wp) -> None:
    """Keep Warp's init banner and per-module load lines out of the table (warnings still show)."""
    if hasattr(wp, "LOG_WARNING"):  # Warp >= 1.19 replaced config.quiet by a log level
        wp.config.log_level = wp.LOG_WARNING
    else:
        wp.config.quiet = True


def _wp():
    """Warp, initialised once and quietly (imported lazily so `--help` stays fast)."""
    global _WP
    if _WP is None:
        import warp as wp

        quiet_warp(wp)
        wp.init()
        _WP = wp
    return _WP


def _torch():
    return _try_import("torch")


# ----------------------------------------------------------------------------------------------------------
# dtypes


@dataclass(frozen=True)
class DType:
    name: str  # a tolerance.DTYPES name
    tf32: bool = False  # float32 inputs with TF32 tensor-core products allowed

    @property
    def label(self) -> str:
        return "tf32" if self.tf32 else self.name

    @property
    def elem_bytes(self) -> int:
        return {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[self.name]


def parse_dtypes(text: str) -> list[DType]:
    """The dtypes of a ``--dtype`` list (:mod:`warp_gemm.tools.dtypes`: fp16, bf16, tf32, fp32, fp64, long names)."""
    return [DType(*dtypes_mod.storage(name)) for name in dtypes_mod.parse_list(text)]


def torch_dtype(dtype: DType):
    torch = _torch()
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64}[dtype.name]


def numpy_dtype(dtype: DType):
    if dtype.name == "bfloat16":
        raise Unavailable("numpy has no bfloat16")
    return np.dtype(dtype.name)


class Unavailable(Exception):
    """A provider or input path that cannot run this (device, dtype); becomes a skip, not an error."""


# ----------------------------------------------------------------------------------------------------------
# devices


def is_cuda(device: str) -> bool:
    return device.startswith("cuda")


def default_device() -> str:
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        return "cuda:0"
    try:
        return "cuda:0" if _wp().is_cuda_available() else "cpu"
    except Exception:  # noqa: BLE001 - no Warp at all: let the providers report it
        return "cpu"


def normalize_device(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


def torch_on(device: str) -> bool:
    """Whether torch tensors can live on ``device`` (a CPU-only torch cannot hold CUDA inputs)."""
    torch = _torch()
    return torch is not None and (not is_cuda(device) or torch.cuda.is_available())


def synchronize(device: str) -> None:
    if not is_cuda(device):
        return  # every CPU provider here is synchronous
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize(device)
    if _WP is not None:
        _WP.synchronize_device(device)


def last_level_cache_bytes(device: str) -> int:
    """The cache a small benchmark's inputs would otherwise stay in: the GPU's L2, or the CPU's L3."""
    if is_cuda(device):
        torch = _torch()
        if torch_on(device):
            size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
            if size:
                return int(size)
        return 50 * MB  # H100
    for level in (3, 2):
        path = Path(f"/sys/devices/system/cpu/cpu0/cache/index{level}/size")
        try:
            text = path.read_text().strip().upper()
            return int(text.rstrip("KM")) * (1024 if text.endswith("K") else MB)
        except (OSError, ValueError):
            continue
    return 32 * MB


def align_warp_stream(device: str) -> None:
    """Make Warp launch on torch's current stream: the CUDA timers record events on torch's stream, so a
    kernel on Warp's own stream would be timed wrongly (or not at all)."""
    if is_cuda(device) and torch_on(device):
        wp, torch = _wp(), _torch()
        wp.set_stream(wp.stream_from_torch(torch.cuda.current_stream(device)), device=device)


def warm_up_gpu(device: str, seconds: float = 0.5) -> None:
    """Keep the GPU busy for ``seconds`` before the first timed row: the first row of a run on a GPU that
    had been idle showed a 2-4x p20-p80 spread (H100, fp16 1000^3: median 105 us against 54.5 us in
    the rows after it). With this warm-up: median 55.5 us, p80 still 84 us."""
    if not (is_cuda(device) and torch_on(device)):
        return
    torch = _torch()
    x = torch.randn(4096, 4096, device=device, dtype=torch.float16)
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        for _ in range(10):
            x @ x
        torch.cuda.synchronize(device)


# ----------------------------------------------------------------------------------------------------------
# timing


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int | None = None  # None where the timer does not say (triton's do_bench)


def quantiles(times_ms: list[float]) -> Timing:
    med, p20, p80 = np.percentile(np.asarray(times_ms), [50, 20, 80])
    return Timing(float(med), float(p20), float(p80), len(times_ms))


def time_cpu(fn: Callable[[], Any], warmup_ms: float, rep_ms: float, min_reps: int = 3) -> Timing:
    """Wall time per call: warm up for ``warmup_ms``, then repeat for ``rep_ms`` (at least ``min_reps``)."""
    end = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < end:
        fn()
    times: list[float] = []
    end = time.perf_counter() + rep_ms / 1e3
    while len(times) < min_reps or (time.perf_counter() < end and len(times) < 100_000):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return quantiles(times)


def time_cuda(fn: Callable[[], Any], device: str, warmup_ms: float, rep_ms: float) -> Timing:
    """triton.testing.do_bench (L2 flushed between calls) where Triton imports, else a CUDA-event loop."""
    testing = _try_import("triton.testing")
    if testing is not None and torch_on(device):
        torch = _torch()
        with torch.cuda.device(device):  # do_bench records its events on the current device
            med, p20, p80 = testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
        return Timing(float(med), float(p20), float(p80))
    return time_cuda_events(fn, device, warmup_ms, rep_ms)


def time_cuda_events(fn: Callable[[], Any], device: str, warmup_ms: float, rep_ms: float) -> Timing:
    """One event pair per call, on torch's stream when torch has CUDA, else on Warp's."""
    if torch_on(device):
        torch = _torch()
        new_event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        record = lambda e: e.record(torch.cuda.current_stream(device))  # noqa: E731
        elapsed = lambda s, e: s.elapsed_time(e)  # noqa: E731
    else:
        wp = _wp()
        new_event = lambda: wp.Event(device, enable_timing=True)  # noqa: E731
        record = lambda e: wp.record_event(e)  # noqa: E731
        elapsed = lambda s, e: wp.get_event_elapsed_time(s, e)  # noqa: E731

    start, stop = new_event(), new_event()
    record(start)
    for _ in range(5):
        fn()
    record(stop)
    synchronize(device)
    estimate_ms = max(elapsed(start, stop) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate_ms))):
        fn()
    pairs = [(new_event(), new_event()) for _ in range(max(3, int(rep_ms / estimate_ms)))]
    for s, e in pairs:
        record(s)
        fn()
        record(e)
    synchronize(device)
    return quantiles([elapsed(s, e) for s, e in pairs])


def time_fn(fn: Callable[[], Any], device: str, warmup_ms: float, rep_ms: float) -> Timing:
    if is_cuda(device):
        return time_cuda(fn, device, warmup_ms, rep_ms)
    return time_cpu(fn, warmup_ms, rep_ms)


