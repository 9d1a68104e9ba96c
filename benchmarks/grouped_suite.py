"""``python benchmarks/grouped_suite.py ...``: the grouped benchmark suite, which ships in the package as
:mod:`warp_gemm.tools.bench.grouped` (``warp-gemm bench --suite grouped``). Every flag is the suite's."""

import pathlib
import sys

if __package__ in (None, ""):  # run as a script from a checkout: the package beside this folder
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from warp_gemm.tools.bench import grouped  # noqa: E402

if __name__ == "__main__":
    sys.exit(grouped.main())
