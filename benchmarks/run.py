"""``python benchmarks/run.py ...``: the benchmark runner, which ships in the package as
:mod:`warp_gemm.tools.bench.runner` (``warp-gemm bench``). Every flag and shape set is the runner's.

Imported (``import run``, as benchmarks/probes do), this module is the runner itself.
"""

import pathlib
import sys

if __package__ in (None, ""):  # run as a script from a checkout: the package beside this folder
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from warp_gemm.tools.bench import runner  # noqa: E402

if __name__ == "__main__":
    sys.exit(runner.main())
sys.modules[__name__] = runner
