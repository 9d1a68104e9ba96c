"""The grouped kernel family: many independent GEMMs of different sizes in one launch.

Read in this order: ``spec.py`` (the four operand cases of ``torch.nn.functional.grouped_mm`` and how each
operand is addressed per group), ``rules.py`` (which kernel configuration a problem takes), ``kernel.py``
(the group table built on the device, the one-launch kernel on the pipelined family's copy, product and store
snippets, the bias pass), ``launch.py`` (each kernel's launch arguments; the table of a list of products).
Everything the family takes from the rest of the package is imported in ``_deps.py``. The calls that check
operands, allocate and launch are ``warp_gemm/core/grouped.py``; the public entry points
``warp_gemm.grouped_mm`` and ``warp_gemm.grouped_matmul`` (``warp_gemm/grouped.py``, with ``wp.Tape``); the
torch operators ``warp_gemm/torch/grouped_ops.py``. Everything here is pure host arithmetic or Warp kernel
code: no allocation, no launch.
"""
