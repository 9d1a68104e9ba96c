"""The control of `scripts/gpu.sh stress`: the shared-kernel worker with warp_gemm's first-load lock off.

Issue 14's failure, reproduced on purpose: runs tests/workers/shared_kernels.py with warp_gemm's
one-thread-at-a-time first load switched off (``_launch.first_load`` replaced by a plain call), i.e.
the code before the fix. Usage: python benchmarks/probes/threads_before_fix.py DEVICE (fresh
WARP_CACHE_PATH). Prints the worker's RESULT line."""
import pathlib
import runpy
import sys

from warp_gemm.core import launches as _launch

_launch.first_load = lambda kernel, dev, block_dim, load: load()
_launch._ready.clear()
runpy.run_path(str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "workers" / "shared_kernels.py"),
               run_name="__main__")
