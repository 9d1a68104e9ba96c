"""Worker: eight threads make their first warp_gemm calls at once, two or three per kernel.

Run as ``python tests/workers/shared_kernels.py DEVICE [init|lazy]`` in a fresh process whose Warp kernel
cache is empty (``WARP_CACHE_PATH``); prints one ``RESULT {json}`` line. The case of issue 14: each
thread has its own dtype (float16, float32, float64 in turn, so two or three threads share each
kernel), its own odd shapes (10+7i x 33+i x 17+5r), builds its ``wp.array`` operands inside the
thread and calls ``warp_gemm.matmul`` three times, every result checked against float64. One more
thread passes mismatched shapes at the same time and must get its ValueError. Before the fix in
``warp_gemm/core/launches.py`` (``first_load``: first loads one thread at a time) this failed with "invalid resource
handle" on an H100 in 12 of 12 runs.
"""

import json
import sys
import threading
import traceback

import numpy as np

import warp_gemm  # must not initialise Warp by itself
import warp as wp
from warp_gemm.tools.tolerance import compare, random_operands

DEV = sys.argv[1] if len(sys.argv) > 1 else "cuda:0"
# "init": the main thread calls warp_gemm.init() first (the documented way to use Warp from threads);
# "lazy": nothing before the threads, whose first Warp call is their own wp.array -- that also runs
# into Warp's own unsynchronised context creation (docs/reliability.md), which warp_gemm cannot guard.
MODE = sys.argv[2] if len(sys.argv) > 2 else "init"
N = 8
if MODE == "init":
    warp_gemm.init(DEV)
DTYPES = ["float16", "float32", "float64"]
barrier = threading.Barrier(N + 1)
results = [None] * (N + 1)


def job(i):
    dtype = DTYPES[i % 3]
    try:
        rng = np.random.default_rng()
        barrier.wait()  # start together: first loads of one kernel from two or three threads
        for r in range(3):
            M, K, Nn = 10 + 7 * i, 33 + i, 17 + 5 * r
            a, b = random_operands(M, Nn, K, dtype, rng)
            A = wp.array(a.astype(dtype), dtype=getattr(wp, dtype), device=DEV)
            B = wp.array(b.astype(dtype), dtype=getattr(wp, dtype), device=DEV)
            out = wp.array(np.full((M, Nn), np.nan, dtype=dtype), dtype=getattr(wp, dtype), device=DEV)
            res = warp_gemm.matmul(A, B, out=out)
            cmp = compare(res.numpy().astype(np.float64), a @ b, dtype)
            if not cmp.ok:
                results[i] = f"thread {i} {dtype} {M}x{Nn}x{K} call {r}: {cmp}"
                return
        results[i] = "ok"
    except BaseException:
        results[i] = f"thread {i} {dtype}: " + traceback.format_exc()


def bad_job():
    """Bad input under concurrency: a typed error naming the shapes, and ``out`` untouched."""
    try:
        barrier.wait()
        A = wp.array(np.ones((5, 7), np.float32), dtype=wp.float32, device=DEV)
        B = wp.array(np.ones((8, 3), np.float32), dtype=wp.float32, device=DEV)
        out = wp.array(np.full((5, 3), np.nan, np.float32), dtype=wp.float32, device=DEV)
        try:
            warp_gemm.matmul(A, B, out=out)
            results[N] = "no error for a 5x7 @ 8x3 product"
        except ValueError as e:
            untouched = bool(np.isnan(out.numpy()).all())
            results[N] = "ok" if ("7 != 8" in str(e) and untouched) else f"wrong error or out written: {e}"
    except BaseException:
        results[N] = "bad-input thread: " + traceback.format_exc()


threads = [threading.Thread(target=job, args=(i,)) for i in range(N)] + [threading.Thread(target=bad_job)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=900)
print("RESULT " + json.dumps({"results": results, "alive": [t.is_alive() for t in threads],
                              "cache": wp.config.kernel_cache_dir}), flush=True)
