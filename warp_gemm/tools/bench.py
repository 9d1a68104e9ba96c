"""``warp-gemm bench``: the benchmark runner, :mod:`warp_gemm.bench.runner` (installed with the package)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from warp_gemm.bench import runner

    return runner.main(argv, prog="warp-gemm bench")
