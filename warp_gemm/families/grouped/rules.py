"""When the grouped family's kernels take which configuration.

The tiles are the pipelined family's measured single-GEMM choices (``pipelined.default_spec``, H100): its
product snippets are the family's fastest on each dtype, and a group of a grouped product is one such GEMM.
Groups whose typical side is at most :data:`SMALL_SIDE` (lists of small matrices) take quarter-size tiles:
a 128x128 tile over a 32x32 product computes 16 times the work it keeps.
"""

from __future__ import annotations

from ._deps import PipeSpec

#: Typical group sides (median of M and of N) up to this take the small tiles.
SMALL_SIDE = 64
#: Tiles of one group kept together in grouped order (Triton's GROUP_SIZE_M): A rows and B columns stay in L2.
GROUP_M = 8


def choose_spec(in_dtype: str, out_dtype: str, tf32: bool, layout: str, device_is_cpu: bool,
                typical_m: int, typical_n: int) -> PipeSpec:
    """The kernel configuration for a grouped product of ``in_dtype`` (``tf32``: float32 on tensor cores),
    operand layouts ``layout`` ("NN", "NT", "TN", "TT"), whose groups are typically ``typical_m x typical_n``.

    CUDA, large groups: the pipelined family's "big" defaults (H100, 4096^3): 16-bit mma.sync 128x128x64, 3
    stages, 4 warps (303.8 TFLOP/s NN); tf32 mma.sync 128x128x32, 3 stages, two blocks per SM (140.3); exact
    float32 SIMT 64x128x16, 3 stages, three blocks per SM (44.9); float64 tile_matmul 64x64x32, 2 stages, two
    blocks per SM (24.5). On the grouped suite's bf16 MoE rows, 128x128x32 with 4 stages and two blocks per SM
    took 3.511 ms against 3.490 (8 experts) and 0.867 against 0.851 (64 experts); 64x128x64 4.067 / 1.053 (H200,
    benchmarks/results/grouped/probe_tiles_h200.txt). Small groups: 64x64 (mma.sync, tf32), 32x64 (SIMT), 32x32
    (float64). CPU: one thread per block, 32-row tiles (the same snippets' CPU twins; compiles stay at a few
    seconds)."""
    small = max(typical_m, typical_n) <= SMALL_SIDE
    la, lb = layout[0], layout[1]
    base = dict(in_dtype=in_dtype, out_dtype=out_dtype, layout_a=la, layout_b=lb, epilogue="scale", chunk=16)
    if device_is_cpu:
        if in_dtype in ("float16", "bfloat16"):
            f = dict(tm=32, tn=32, tk=32, stages=2, block_dim=1, pad_ab=8, mma=4)
        elif in_dtype == "float32" and tf32:
            f = dict(tm=32, tn=32, tk=32, stages=2, block_dim=1, pad_ab=4, mma=4, tf32=True)
        elif in_dtype == "float32":
            f = dict(tm=32, tn=64, tk=16, stages=2, block_dim=1, pad_ab=4, simt=True)
        else:
            f = dict(tm=32, tn=32, tk=32, stages=2, block_dim=1, pad_ab=0, pad_c=4)
        return PipeSpec(**base, **f)
    if in_dtype in ("float16", "bfloat16"):
        if small:
            f = dict(tm=64, tn=64, tk=64, stages=3, block_dim=128, min_blocks=0, pad_ab=8, mma=4)
        else:
            f = dict(tm=128, tn=128, tk=64, stages=3, block_dim=128, min_blocks=1, pad_ab=8, mma=4)
    elif in_dtype == "float32" and tf32:
        if small:
            f = dict(tm=64, tn=64, tk=32, stages=3, block_dim=128, min_blocks=0, pad_ab=4, mma=4, tf32=True)
        else:
            f = dict(tm=128, tn=128, tk=32, stages=3, block_dim=128, min_blocks=2, pad_ab=4, mma=4, tf32=True)
    elif in_dtype == "float32":
        if small:
            f = dict(tm=32, tn=64, tk=16, stages=3, block_dim=32, min_blocks=0, pad_ab=4, simt=True)
        else:
            f = dict(tm=64, tn=128, tk=16, stages=3, block_dim=128, min_blocks=3, pad_ab=4, simt=True)
    else:
        if small:
            f = dict(tm=32, tn=32, tk=32, stages=2, block_dim=64, min_blocks=0, pad_ab=4, pad_c=4)
        else:
            f = dict(tm=64, tn=64, tk=32, stages=2, block_dim=128, min_blocks=2, pad_ab=4, pad_c=4)
    return PipeSpec(**base, **f)
