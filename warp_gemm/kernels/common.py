"""What every kernel family shares: dtype tables and the accumulator rule."""

import warp as wp

from .. import _compat

WP_DTYPES = {"float16": wp.float16, "float32": wp.float32, "float64": wp.float64}
if _compat.HAS_BF16:
    WP_DTYPES["bfloat16"] = wp.bfloat16

ITEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def acc_dtype_name(in_dtype: str) -> str:
    """16-bit and float32 inputs accumulate in float32; float64 in float64."""
    return "float64" if in_dtype == "float64" else "float32"


def gemm_tag(mathdx: bool, pad_ab: int, pad_c: int) -> str:
    """The kernel-name part for the tile GEMM used: ``dx`` (MathDx) or ``sc`` (Warp's scalar GEMM), and
    the shared-tile pads when there are any (``dx_p8-8``)."""
    g = "dx" if mathdx else "sc"
    return f"{g}_p{pad_ab}-{pad_c}" if pad_ab or pad_c else g
