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


# --- the Hopper grouped kernel (hopper.py) -------------------------------------------------------------------------
#: Grouped products (all rows x N x K) from which the Hopper grouped kernel is taken on sm_90; below it the mma.sync
#: kernel. The dense Hopper family's measured crossover (hopper.rules.MIN_WORK, 2^29); not measured for grouped.
HOPPER_MIN_WORK = 2**29
_MAX_DIM = (1 << 31) - 1 - 256  # TMA coordinates and the kernel's row arithmetic are 32-bit


def hopper_reason(p, a_ptr: int, b_ptr: int, device, tf32: bool) -> str:
    """Why the Hopper grouped kernel cannot take the grouped product ``p`` ("" when it can): a CUDA sm_90 device and
    a Warp that builds sm_90a modules; rows of a 2-D A split by ``offs`` times a 3-D B (``2d3d``) of 1..MAX_GROUPS
    groups; float16 / bfloat16 inputs (float32 as tf32 where ``tf32`` and B is read K-major, layout T); A stored
    (M, K) row-major and B either way with unit column strides, 16-byte aligned base addresses, row and batch
    strides (TMA)."""
    from warp_gemm import _compat

    from .hopper import MAX_GROUPS

    if not getattr(device, "is_cuda", False) or getattr(device, "arch", 0) != 90:
        return f"device {device}: the Hopper grouped kernel runs on sm_90 GPUs (H100/H200)"
    if not (_compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_EMPTY and _compat.HAS_LAUNCH_BOUNDS
            and _compat.HAS_TILE_FUNC_ARGS):
        return f"warp-lang {_compat.WARP_VERSION} cannot build the sm_90a kernels"
    if p.case != "2d3d":
        return f"case {p.case}: the Hopper grouped kernel takes a 2-D mat_a split by offs and a 3-D mat_b"
    if not 1 <= p.G <= MAX_GROUPS:
        return f"{p.G} groups: the Hopper grouped kernel takes 1..{MAX_GROUPS}"
    if p.in_dtype == "float32":
        if not tf32 or p.b.layout != "T":
            return "float32: only tf32 products (allow_tf32) with mat_b read K-major ((G, N, K) weights as W.T)"
    elif p.in_dtype not in ("float16", "bfloat16"):
        return f"{p.in_dtype}: the Hopper grouped kernel multiplies float16, bfloat16 and tf32"
    if min(p.total, p.N, p.K) < 1 or max(p.total, p.N, p.K) > _MAX_DIM:
        return f"rows {p.total}, N {p.N}, K {p.K}: each must be in 1..{_MAX_DIM}"
    item = 2 if p.in_dtype != "float32" else 4
    if p.a.layout != "N":
        return "mat_a must be stored row-major (unit column stride)"
    if p.b.layout not in ("N", "T"):
        return "mat_b needs a unit stride in one of its last two dimensions"
    if a_ptr % 16 or (p.a.ld * item) % 16:
        return f"mat_a: base 0x{a_ptr:x} or row stride {p.a.ld * item} bytes not a multiple of 16 (TMA)"
    if b_ptr % 16 or (p.b.ld * item) % 16 or (p.G > 1 and (p.b.gs % 16 or p.b.gs <= 0)):
        return (f"mat_b: base 0x{b_ptr:x}, row stride {p.b.ld * item} or group stride {p.b.gs} bytes not a positive "
                "multiple of 16 (TMA)")
    return ""


def hopper_choice(p, sm_count: int, bm: int = 0, bn: int = 0, stages: int = 0):
    """The Hopper grouped kernel's configuration for ``p`` (hopper_reason passed): 128x256 tiles (4 stages) where the
    work items, about ``ceil(rows / 128) + G / 2`` tile rows (a group's last tile row is half full on average) times
    ``ceil(N / 256)`` columns, fill the SMs, else 128x128 (6 stages), the dense family's choice
    (hopper.rules.tile_choice). Measured (H200, benchmarks/results/grouped/probe_hopper_tiles_h200.txt): 128x256
    best or tied on every MoE row of the grouped suite: bf16 8 experts 1.538 ms against 1.785 (128x128) and 1.873
    (256x128), 64 experts 0.503 against 0.532 and 0.629, fp16 64 experts 0.447 against 0.443 and 0.566. ``bm``,
    ``bn``, ``stages``: a configuration instead (probes)."""
    from ._deps import HOPPER_STAGES, HopperSpec

    if not bm:
        rows = -(-p.total // 128) + p.G // 2
        bm, bn = (128, 256) if rows * -(-p.N // 256) >= sm_count else (128, 128)
    stages = stages or HOPPER_STAGES[(bm, bn)]
    return HopperSpec(p.in_dtype, p.out_dtype, "N", p.b.layout, bm=bm, bn=bn, stages=stages)


def use_hopper(p) -> bool:
    """Whether the rules take the Hopper grouped kernel for ``p`` (where it applies): products of at least
    HOPPER_MIN_WORK."""
    return p.total * p.N * p.K >= HOPPER_MIN_WORK
