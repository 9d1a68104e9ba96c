"""The grouped kernel family: many independent GEMMs of different sizes in one launch.

Read in this order: ``spec.py`` (the four operand cases of ``torch.nn.functional.grouped_mm``, how each
operand is addressed per group, the checks), ``rules.py`` (which kernel configuration a problem takes),
``kernel.py`` (the group table built on the device, the one-launch kernel on the pipelined family's copy,
product and store snippets, the bias pass), ``launch.py`` (temporaries, the launches, the CPU's host path),
``api.py`` / ``tape.py`` (containers, results, ``wp.Tape``). Public entry points: ``warp_gemm.grouped_mm``
and ``warp_gemm.grouped_matmul``; the torch operators live in ``warp_gemm/torch/grouped_ops.py``;
everything taken from the rest of the package is imported in ``_deps.py``.
"""
