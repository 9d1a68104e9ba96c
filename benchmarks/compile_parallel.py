"""``python benchmarks/compile_parallel.py ...``: :mod:`warp_gemm.tools.bench.compile_parallel` (imported: that
module)."""

import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from warp_gemm.tools.bench import compile_parallel  # noqa: E402

if __name__ == "__main__":
    sys.exit(compile_parallel.main())
sys.modules[__name__] = compile_parallel
