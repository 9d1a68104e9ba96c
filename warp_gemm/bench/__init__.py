"""The benchmark runner (``warp-gemm bench``), its parallel kernel builds and its plots.

:mod:`warp_gemm.bench.runner` times warp_gemm against other GEMM providers on the shared shape list;
:mod:`warp_gemm.bench.compile_parallel` fills Warp's kernel cache first; :mod:`warp_gemm.bench.plots`
draws the rows (matplotlib, the ``bench`` extra). ``benchmarks/run.py`` in a checkout calls the runner.
"""
