"""``python benchmarks/bench_plots.py ROWS.json DIR``: :mod:`warp_gemm.tools.bench.plots` (imported: that
module)."""

import pathlib
import sys

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from warp_gemm.tools.bench import plots  # noqa: E402

if __name__ == "__main__":
    sys.exit(plots.main())
sys.modules[__name__] = plots
