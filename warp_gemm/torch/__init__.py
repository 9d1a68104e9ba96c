"""PyTorch-native warp_gemm: custom operators (``torch.ops.warp_gemm.*``), functions and ``Linear``.

Importing this package registers the operators ``warp_gemm::gemm``, ``warp_gemm::linear`` and
``warp_gemm::activation_backward`` (see ops.py), ``warp_gemm::grouped_mm`` and ``warp_gemm::grouped_matmul``
(grouped_ops.py), so ``torch.compile(fullgraph=True)`` and
``torch.export`` trace :func:`matmul`, :func:`gemm`, :func:`linear` and :class:`Linear`.
Needs torch >= 2.4 (``torch.library.custom_op``, ``register_fake``, ``register_autograd``).
"""

from .grouped_ops import grouped_matmul, grouped_mm
from .nn import Linear
from .ops import gemm, linear, matmul

__all__ = ["Linear", "gemm", "grouped_matmul", "grouped_mm", "linear", "matmul"]
