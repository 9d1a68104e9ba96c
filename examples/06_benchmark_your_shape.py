"""Time warp_gemm on your own M x N x K against torch.matmul and NumPy.

For each provider the program checks one result against float64 first (a provider that is wrong gets
no number), reports the first call apart (it builds or loads the kernel), then times ``--repeats``
calls one by one -- with CUDA events on a GPU, wall time on the CPU -- and prints the median, the 20th
and 80th percentiles and TFLOP/s (2*M*N*K / median).

    python examples/06_benchmark_your_shape.py --m 4096 --n 4096 --k 4096 --dtype float16
    python examples/06_benchmark_your_shape.py --device cpu --m 1023 --n 1025 --k 1027 --dtype float32
    python examples/06_benchmark_your_shape.py --shape 16x8192x8192 --dtype bfloat16 --allow-tf32

For many shapes, configurations and plots use the benchmark runner, ``warp-gemm bench``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import warp as wp

import warp_gemm
from warp_gemm.tools.dtypes import storage_arg
from warp_gemm.tools.explain import backend
from warp_gemm.tools.shapes import parse_shape
from warp_gemm.tools.tolerance import bf16_bits_to_f64, compare, round_to

try:
    import torch
except ImportError:  # optional: the torch row is skipped without it
    torch = None

CHECK_ROWS = 64  # rows of the float64 reference: enough to catch a wrong tile, cheap at any size


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--backend", choices=("host", "tiles"), default=None,
                   help="CPU products: host (the host BLAS, the default) or tiles (Warp's tile kernels)")
    p.add_argument("--m", type=int, default=None, help="rows of A and of the result")
    p.add_argument("--n", type=int, default=None, help="columns of B and of the result")
    p.add_argument("--k", type=int, default=None, help="the inner dimension")
    p.add_argument("--shape", default=None, help="MxNxK at once (overrides --m/--n/--k)")
    p.add_argument("--dtype", default=None, type=storage_arg,
                   help="fp16, bf16, fp32, fp64 (or float16, ...); default: fp16 on CUDA, fp32 on CPU")
    p.add_argument("--allow-tf32", action="store_true",
                   help="float32 on TF32 tensor cores (warp_gemm and torch)")
    p.add_argument("--repeats", type=int, default=20, help="timed calls per provider (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed calls after the first (default: %(default)s)")
    p.add_argument("--providers", default="warp_gemm,torch,numpy",
                   help="comma-separated subset of warp_gemm, torch, numpy (default: %(default)s)")
    args = p.parse_args(argv)
    if args.shape:
        s = parse_shape(args.shape)
        args.m, args.n, args.k = s.M, s.N, s.K
    args.m, args.n, args.k = args.m or 2048, args.n or 2048, args.k or 2048
    if min(args.m, args.n, args.k, args.repeats) < 1:
        p.error("sizes and --repeats must be positive")
    return args


# --- providers: each returns a zero-argument callable that runs one product, or a reason to skip -------
def warp_gemm_provider(a32, b32, dtype, device, tf32):
    A, B = (wp.array(x, dtype=getattr(wp, dtype), device=device) for x in (a32, b32))
    D = wp.empty((A.shape[0], B.shape[1]), dtype=A.dtype, device=device)

    def run():
        warp_gemm.matmul(A, B, out=D, allow_tf32=tf32)
        return D

    def result(D):
        return bf16_bits_to_f64(D.view(wp.uint16).numpy()) if dtype == "bfloat16" else D.numpy()

    return run, result


def torch_provider(a32, b32, dtype, device, tf32):
    if torch is None:
        return "torch not installed"
    if device.startswith("cuda") and not torch.cuda.is_available():
        return "this torch has no CUDA"
    if device.startswith("cpu") and dtype == "float16" and a32.size * b32.shape[1] > 1 << 30:
        return "torch's float16 CPU matmul is too slow at this size"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    A, B = (torch.from_numpy(x).to(device=device, dtype=getattr(torch, dtype)) for x in (a32, b32))
    return (lambda: torch.matmul(A, B)), (lambda D: D.double().cpu().numpy())


def numpy_provider(a32, b32, dtype, device, tf32):
    if not device.startswith("cpu"):
        return "NumPy runs on the CPU only"
    if dtype in ("float16", "bfloat16"):
        return f"NumPy has no BLAS path for {dtype}"
    A, B = a32.astype(dtype), b32.astype(dtype)
    return (lambda: A @ B), (lambda D: D)


PROVIDERS = {"warp_gemm": warp_gemm_provider, "torch": torch_provider, "numpy": numpy_provider}


# --- timing -------------------------------------------------------------------------------------------
def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        wp.synchronize_device(device)
        if torch is not None and torch.cuda.is_available():
            torch.cuda.synchronize(torch.device(device))


def time_calls(name: str, fn: Callable, device: str, repeats: int) -> list[float]:
    """Milliseconds of each of ``repeats`` calls: CUDA events around each call on a GPU (on the stream
    the provider launches on), wall time on the CPU."""
    if not device.startswith("cuda"):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        return times
    if name == "torch":
        new = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        pairs = [(new(), new()) for _ in range(repeats)]
        for s, e in pairs:
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize(torch.device(device))
        return [s.elapsed_time(e) for s, e in pairs]
    pairs = [(wp.Event(device, enable_timing=True), wp.Event(device, enable_timing=True))
             for _ in range(repeats)]
    for s, e in pairs:
        wp.record_event(s)
        fn()
        wp.record_event(e)
    wp.synchronize_device(device)
    return [wp.get_event_elapsed_time(s, e) for s, e in pairs]


def main(argv=None) -> int:
    args = parse_args(argv)
    # cpu_backend="tiles" sends CPU products to the Warp tile kernels (the default is the host BLAS)
    with warp_gemm.options(**({"cpu_backend": args.backend} if args.backend else {})):
        return run(args)


def run(args) -> int:
    wp.init()
    device = args.device or default_device()
    if device == "cuda":
        device = "cuda:0"  # torch's set_device/synchronize want an index
    print(f"backend: {backend(device)}")
    dtype = args.dtype or ("float16" if device.startswith("cuda") else "float32")
    tf32 = args.allow_tf32 and dtype == "float32"
    M, N, K = args.m, args.n, args.k
    flops = 2.0 * M * N * K
    rng = np.random.default_rng(0)
    # Unit-variance products (randn * K**-0.25 per factor), rounded to the tested dtype through float32.
    a32 = (rng.standard_normal((M, K), dtype=np.float32) * np.float32(K**-0.25))
    b32 = (rng.standard_normal((K, N), dtype=np.float32) * np.float32(K**-0.25))
    if dtype == "bfloat16":  # round here (to nearest even), so every provider starts from the same values
        a32, b32 = (round_to(x, dtype).astype(np.float32) for x in (a32, b32))
    b64 = round_to(b32, dtype)  # the reference's B; its A is the first CHECK_ROWS rows of a32, rounded
    print(f"{M}x{N}x{K} {dtype}{' (tf32 allowed)' if tf32 else ''} on {device}; warp_gemm "
          f"{warp_gemm.__version__}, warp-lang {warp_gemm.WARP_VERSION}"
          + (f", torch {torch.__version__}" if torch is not None else ""))
    print(f"{'provider':<10} {'first call':>12} {'median':>11} {'p20':>11} {'p80':>11} {'TFLOP/s':>9}  check")
    failed = False
    if torch is not None and device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    with wp.ScopedDevice(device):
        for name in [p.strip() for p in args.providers.split(",") if p.strip()]:
            if name not in PROVIDERS:
                print(f"unknown provider {name!r}; choose from {', '.join(PROVIDERS)}")
                return 2
            made = PROVIDERS[name](a32, b32, dtype, device, tf32)
            if isinstance(made, str):
                print(f"{name:<10} skipped: {made}")
                continue
            fn, to_host = made
            t = time.perf_counter()
            out = fn()
            synchronize(device)
            first_ms = (time.perf_counter() - t) * 1e3
            # Check the first CHECK_ROWS rows against float64 from the same rounded inputs.
            r = min(M, CHECK_ROWS)
            got = np.asarray(to_host(out), dtype=np.float64)[:r]
            verdict = compare(got, round_to(a32[:r], dtype) @ b64, dtype, tf32)
            if not verdict.ok:
                failed = True
                print(f"{name:<10} WRONG: {verdict}")
                continue
            for _ in range(args.warmup):
                fn()
            synchronize(device)
            times = time_calls(name, fn, device, args.repeats)
            med = statistics.median(times)
            p20, p80 = np.percentile(times, [20, 80])
            print(f"{name:<10} {first_ms:9.1f} ms {med:8.3f} ms {p20:8.3f} ms {p80:8.3f} ms "
                  f"{flops / (med * 1e-3) / 1e12:9.4g}  ok (rel_fro {verdict.rel_fro:.1e})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
