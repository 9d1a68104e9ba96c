"""``warp-gemm bench``: runs the benchmark runner of the source tree (``benchmarks/run.py``).

The runner (providers, timing, plots) lives with the benchmarks rather than in the installed package;
this entry point finds it beside an editable install or a checkout (``WARP_GEMM_BENCHMARKS`` names
another folder).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _runner_dir() -> Path | None:
    env = os.environ.get("WARP_GEMM_BENCHMARKS")
    for d in ([Path(env)] if env else []) + [Path(__file__).resolve().parent.parent / "benchmarks",
                                              Path.cwd() / "benchmarks"]:
        if (d / "run.py").is_file():
            return d
    return None


def main(argv: list[str] | None = None) -> int:
    d = _runner_dir()
    if d is None:
        print("warp-gemm bench: benchmarks/run.py not found; run it from a source checkout of warp_gemm "
              "(or set WARP_GEMM_BENCHMARKS to its benchmarks folder)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(d))
    import run  # benchmarks/run.py

    return run.main(sys.argv[1:] if argv is None else argv)
