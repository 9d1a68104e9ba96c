"""The benchmark runner (``warp-gemm bench``), its parallel kernel builds and its plots.

:mod:`warp_gemm.tools.bench.runner` times warp_gemm against other GEMM providers on the shared shape list;
:mod:`warp_gemm.tools.bench.compile_parallel` fills Warp's kernel cache first; :mod:`warp_gemm.tools.bench.plots`
draws the rows (matplotlib, the ``bench`` extra). ``benchmarks/run.py`` in a checkout calls the runner.
"""


def main(argv: list[str] | None = None) -> int:
    """``warp-gemm bench``: the runner, under that name in its usage line."""
    from warp_gemm.tools.bench import runner

    return runner.main(argv, prog="warp-gemm bench")
