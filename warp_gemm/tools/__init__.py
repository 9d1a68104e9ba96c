"""Around the library, not in its call path: the float64 and Triton references, tolerances, shape
lists, the checker, the benchmark hooks, precompilation, the tuner and the ``warp-gemm`` command."""
