"""warp_gemm: GEMM for NVIDIA Warp built from Warp's tile primitives.

``matmul(a, b)`` and ``gemm(a, b, c, alpha=, beta=, trans_a=, trans_b=)`` on ``wp.array``,
``torch.Tensor`` or ``numpy.ndarray`` operands of any shape, in float16, bfloat16, float32 or float64,
on CUDA and CPU.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ._compat import WARP_VERSION, UnsupportedWarpError
from ._config import Config, candidate_configs
from .api import gemm, matmul, precompile_config
from .tuning import tune

__all__ = [
    "Config",
    "UnsupportedWarpError",
    "WARP_VERSION",
    "candidate_configs",
    "gemm",
    "matmul",
    "precompile_config",
    "tune",
]
