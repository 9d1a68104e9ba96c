"""warp_gemm on the CPU against ``np.matmul``, in one process (issue 20: target >= 0.7x NumPy).

For each size n and dtype: the median time of warp_gemm's CPU GEMM of n x n x n and of ``np.matmul``
on the same operands, interleaved (ours, numpy, ours, numpy, ...) after a warm-up, so a drifting
machine slows both alike. ``ratio`` = numpy_time / our_time: 1.0 is parity, above 1 faster.

``--via``:
- ``host``: ``warp_gemm.families.host.run_numpy`` on NumPy arrays, into a preallocated output (the
  host family alone);
- ``api``: ``warp_gemm.matmul(a, b)`` on CPU ``wp.array`` operands (the whole call: validation, the
  output allocation unless ``--out``, the routing); NumPy then multiplies zero-copy NumPy views of the same arrays;
- ``tiles``: as ``api`` under ``warp_gemm.options(cpu_backend="tiles")``: Warp's tile kernels on the
  CPU, what warp_gemm ran before the host family (slow: keep ``--sizes`` small);
- ``auto`` (default): ``api`` when ``warp_gemm.matmul`` routes a CPU call to the host family (probed
  with one small call), else ``host``.

    python benchmarks/cpu_vs_numpy.py
    python benchmarks/cpu_vs_numpy.py --via api --out --sizes 256,1024 --dtypes float32 --json cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402


def api_routes_to_host() -> bool:
    """Whether ``warp_gemm.matmul`` on CPU wp.arrays reaches ``host.run_numpy`` (its call counter moves)."""
    import warp as wp

    import warp_gemm
    from warp_gemm.families import host

    a = wp.array(np.ones((4, 4), np.float32), device="cpu")
    before = host.calls["numpy"]
    try:
        warp_gemm.matmul(a, a)
    except Exception:  # noqa: BLE001 -- a broken api path is reported by --via api, not here
        return False
    return host.calls["numpy"] > before


def time_pair(ours, theirs, repeats: int, warmup: int) -> tuple[float, float]:
    for _ in range(warmup):
        ours()
        theirs()
    t_ours, t_np = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        ours()
        t_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        theirs()
        t_np.append(time.perf_counter() - t)
    return statistics.median(t_ours), statistics.median(t_np)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--via", choices=("auto", "host", "api", "tiles"), default="auto")
    ap.add_argument("--sizes", default="256,512,1024,2048", help="comma-separated n of n^3 problems")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--repeats", type=int, default=0,
                    help="timed repeats per row (default: enough for ~1 s of GEMMs, 5..200)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", action="store_true",
                    help="api: pass a preallocated out= (no result allocation per call)")
    ap.add_argument("--target", type=float, default=0.7, help="ratio to report as met (default 0.7)")
    ap.add_argument("--json", default="", help="write the header and rows here")
    args = ap.parse_args(argv)

    import warp as wp

    from warp_gemm.families import host

    try:
        from warp_gemm import _compat
    except ImportError:  # pragma: no cover
        _compat = None
    if _compat is not None:
        _compat.init()
    else:
        wp.init()

    via = args.via
    if via == "auto":
        via = "api" if api_routes_to_host() else "host"
    if via in ("api", "tiles"):
        import contextlib

        import warp_gemm

        scope = warp_gemm.options(cpu_backend="tiles") if via == "tiles" else contextlib.nullcontext()
        scope.__enter__()  # for the whole run (options are per thread; this script has one)

    header = {
        "via": via + ("+out" if via != "host" and args.out else ""), "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
        "numpy": np.__version__, "warp": wp.config.version, "python": platform.python_version(),
        "blas": _blas_name(),
    }
    print(" ".join(f"{k}={v}" for k, v in header.items()))
    print(f"{'dtype':<8} {'n':>5} {'ours ms':>9} {'numpy ms':>9} {'ours GF/s':>10} {'numpy GF/s':>11} {'ratio':>6}")
    rng = np.random.default_rng(0)
    rows = []
    ok = True
    for dtype in args.dtypes.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            flops = 2.0 * n**3
            reps = args.repeats or max(5, min(200, int(1.0 / (flops / 100e9))))
            if via in ("api", "tiles"):
                wa, wb = wp.array(a, device="cpu"), wp.array(b, device="cpu")
                na, nb = wa.numpy(), wb.numpy()  # zero-copy views of the same memory

                wout = wp.empty((n, n), dtype=wa.dtype, device="cpu") if args.out else None

                def ours():
                    return warp_gemm.matmul(wa, wb, out=wout)

                def theirs():
                    return np.matmul(na, nb)
                first = ours().numpy()
            else:
                d = np.full((n, n), np.nan, dtype)

                def ours():
                    return host.run_numpy(a, b, None, d, 1.0, 0.0, dtype, dtype)

                def theirs():
                    return np.matmul(a, b)
                first = ours()
            err = float(np.abs(np.asarray(first, np.float64) - theirs().astype(np.float64)).max())
            bound = (1e-3 if dtype == "float32" else 1e-10) * np.sqrt(n)
            if not err <= bound:
                print(f"{dtype:<8} {n:>5} WRONG: max |ours - numpy| = {err:.3e} > {bound:.1e}")
                ok = False
                continue
            t_ours, t_np = time_pair(ours, theirs, reps, args.warmup)
            ratio = t_np / t_ours
            row = dict(header, dtype=dtype, n=n, repeats=reps, ours_ms=t_ours * 1e3, numpy_ms=t_np * 1e3,
                       ours_gflops=flops / t_ours / 1e9, numpy_gflops=flops / t_np / 1e9, ratio=ratio,
                       meets_target=ratio >= args.target)
            rows.append(row)
            print(f"{dtype:<8} {n:>5} {t_ours*1e3:>9.3f} {t_np*1e3:>9.3f} {row['ours_gflops']:>10.1f} "
                  f"{row['numpy_gflops']:>11.1f} {ratio:>6.2f}{'' if row['meets_target'] else '  < target'}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    return 0 if ok else 1


def _blas_name() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 -- older NumPy: no dict mode
        return "?"


if __name__ == "__main__":
    sys.exit(main())
