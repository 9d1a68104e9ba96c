"""The small-matrix batched family: whole small products in one tile, many batch entries per launch.

One block computes one output tile ``(TM, TN)`` of ``per_block`` consecutive batch entries in turn::

    D[b] = alpha * op(A[b]) @ op(B[b])                 (epilogue "scale")
    D[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b]    (epilogue "axpby")

Tiles are sized to the problem (16 or 32 per side: the whole matrix in one tile up to 32x32), so
a 32x32 product does not pay for a 128x128 tile (4096 x 32^3 fp16: 355.6 us with the
large-problem tiles, against 20.6 us for cuBLAS; H100). ``tile_matmul`` is Warp's scalar GEMM (module option
``enable_mathdx_gemm=False``, Warp 1.12+), which compiles in under a second where the MathDx (cuBLASDx) GEMM
takes 20-60 s, at 0.5-4% more time on the fp32 sizes measured (``choose_spec``); ``SmallSpec(mathdx=True)`` is
the MathDx kernel. Where Warp lacks the option the MathDx GEMM is used.

Layouts, batch broadcast (``A[min(b, a_nb - 1)]``) and the checked edge tiles follow families/tiled/;
M, N, K and the batch are runtime values, so one kernel serves every shape that fits its tiles.

The planner gives batched 16-bit products of 17-32 output sides with 16-byte rows, K <= 128
and >= 256 entries to the pipelined family's 32x32 tiles instead (``pipelined.tiny_batched``: 4096 x 32^3
fp16 20.2 us cold L2 there against 27.2 here, H100); this family keeps sides up to 16, exact fp32 and
fp64, fewer entries and unaligned rows.
"""

# No `from __future__ import annotations`: Warp reads the kernel's annotations as objects.
import dataclasses
import functools
import threading
from dataclasses import dataclass

import warp as wp

from ... import _compat
from ..common.kernels import WP_DTYPES, acc_dtype_name, check_pads, epilogue_store, gemm_tag, spec_types

# Tile side choices; K larger than the tile loops.
_SIDES = (16, 32)
# Where the family applies (H100, warp 1.19.0; CUDA-graph timings, cuBLAS through torch in the same run):
# - output sides <= 32: fp16 4096 x 32^3 23.4 us against 355.6 us for the tiled family's large tiles
#   and 18.1 us for cuBLAS; fp32 10000 x 16^3 20.5 us against 27.5 for cuBLAS.
# - not at 64: fp16 512 x 64^3 took 19.8 us with one 64x64 tile per entry, the tiled family 19.9 and
#   the pipelined family (64x64x64, 2 stages, block 128) 13.0 (cuBLAS 9.3); fp16 64 x 256^3 89.5 us
#   with 64-wide tiles against 33.1-38.8 for the pipelined/tiled families (cuBLAS 12.0).
MAX_SIDE = 32
# K up to this many elements (a few tile steps); longer K is a different problem (unmeasured here).
MAX_K = 128


@dataclass(frozen=True)
class SmallSpec:
    tm: int
    tn: int
    tk: int
    in_dtype: str
    out_dtype: str
    layout_a: str  # "N" or "T"
    layout_b: str
    epilogue: str  # "scale" or "axpby"
    per_block: int = 1  # batch entries one block computes in turn
    block_dim: int = 64
    mathdx: bool = False  # True: MathDx's tile GEMM; False: Warp's scalar one (module option enable_mathdx_gemm=False)
    # Extra columns of the shared A/B tiles and of the accumulator (MathDx only): dense tiles whose rows
    # are a multiple of 128 bytes start every row on the same bank and MathDx's fragment loads
    # serialise (families/tiled/ measured 64 -> 234 TFLOP/s for the MathDx call alone). The tiles
    # are loaded whole (vectorized) into registers and assigned into the padded shared tiles.
    pad_ab: int = 0
    pad_c: int = 0

    @property
    def acc_dtype(self) -> str:
        return acc_dtype_name(self.in_dtype)

    @property
    def kernel_key(self) -> str:
        """Names the compiled kernel: everything but ``per_block`` (a launch argument)."""
        g = gemm_tag(self.mathdx, self.pad_ab, self.pad_c)
        return (f"wg_small_{self.in_dtype}_{self.out_dtype}_{self.layout_a}{self.layout_b}_"
                f"{self.tm}x{self.tn}x{self.tk}_{self.epilogue}_b{self.block_dim}_{g}")

    @property
    def key(self) -> str:
        return f"{self.kernel_key}_p{self.per_block}"


def _side(n: int) -> int:
    for s in _SIDES:
        if n <= s:
            return s
    return _SIDES[-1]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def choose_spec(device, dtype: str, layout_a: str, layout_b: str, M: int, N: int, K: int, batch: int,
                out_dtype: str, epilogue: str):
    """The spec for this problem, or None where the family does not apply: an output side over
    ``MAX_SIDE`` or K over ``MAX_K``, an epilogue other than scale/axpby, or a Warp without
    ``tile_astype`` or tile parameters in functions (1.7). The batch may be 1 (one block per output
    tile).

    Choices (H100, warp 1.19.0, CUDA-graph timings):
    - entries per block (at most 4): several only where the grouped launch keeps >= 6 blocks per SM:
      fp16 4096 x 32^3 28.5 us (1 per block) / 25.4 (2) / 23.4 (4), block 32; fp32 10000 x 16^3
      23.3 / 21.4 / 20.5 / 28.7 (8). With fewer entries grouping starves the GPU: fp16 256 x 32^3
      5.3 us (1 per block, block 128) against 10.4 (4); fp32 1000 x 16^3 5.2 (1, block 64) / 9.7 (4).
    - block size: 32 threads when entries are grouped (4096 x 32^3: 23.4 at 32, 24.8 at 64, 32.0 at 128),
      128 (32-wide tiles) or 64 (16-wide) otherwise.
    - Warp's scalar GEMM on CUDA, not MathDx: it compiles in < 1 s instead of 20-60 s, and ran within 0.5-4% of
      MathDx on fp32 (10000 x 16^3 20.6 vs 20.5 us, 1000 x 16^3 5.4 vs 5.2) and 14% behind on fp16 4096 x 32^3
      (26.6 vs 23.4; aligned 16-bit products of that size are the pipelined family's, ``tiny_batched``).
    - padded shared tiles (``pad_ab``/``pad_c``) lost everywhere (4096 x 32^3 fp16: 31.7-142.6 us,
      h100_run2.json): left at 0.
    float64 and bfloat16 take the same rules (not measured separately)."""
    if epilogue not in ("scale", "axpby") or layout_a not in ("N", "T") or layout_b not in ("N", "T"):
        return None
    if dtype not in WP_DTYPES or out_dtype not in WP_DTYPES or not _compat.HAS_TILE_ASTYPE:
        return None
    if not _compat.HAS_TILE_FUNC_ARGS:  # the epilogue is kernels.common.epilogue_store
        return None
    if max(M, N) > MAX_SIDE or K > MAX_K or min(M, N, batch) < 1:
        return None
    tm, tn, tk = _side(M), _side(N), _side(max(K, 1))
    is_cpu = getattr(device, "is_cpu", False) or str(device) == "cpu"
    if is_cpu:
        # The CPU runs one thread per block and Warp's scalar GEMM whatever the option says.
        return SmallSpec(tm, tn, tk, dtype, out_dtype, layout_a, layout_b, epilogue, per_block=1, block_dim=1,
                         mathdx=False)
    blocks_per_entry = _ceil(M, tm) * _ceil(N, tn)
    # Group entries while the launch keeps >= 6 blocks per SM (792 on an H100): measured good at 1024
    # blocks (4096 x 32^3 in fours) and 2500, bad at 500 (1000 x 16^3 in pairs: 6.7 us against 5.2).
    floor = 6 * _compat.sm_count(device)
    per_block = 1
    while per_block < 4 and _ceil(batch, per_block * 2) * blocks_per_entry >= floor:
        per_block *= 2
    block_dim = 32 if per_block > 1 else (128 if max(tm, tn) >= 32 else 64)
    return SmallSpec(tm, tn, tk, dtype, out_dtype, layout_a, layout_b, epilogue, per_block=per_block,
                     block_dim=block_dim, mathdx=False)


def workspace_shape(spec: SmallSpec, M: int, N: int, K: int, batch: int):
    """The small family needs no workspace."""
    return None


def launch_args(spec: SmallSpec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb, workspace=None):
    """``[(kernel, dim, inputs, block_dim)]``: one tiled launch over (batch groups, output tiles)."""
    if batch == 0 or M == 0 or N == 0:
        return []
    if spec.epilogue == "axpby" and C is None:
        raise ValueError("the axpby epilogue needs C")
    tiles_n = _ceil(N, spec.tn)
    dim = (_ceil(batch, spec.per_block), _ceil(M, spec.tm) * tiles_n)
    k_tiles = _ceil(K, spec.tk)
    inputs = [A, B, C if C is not None else D, D, float(alpha), float(beta), k_tiles, tiles_n, batch,
              spec.per_block, a_nb, b_nb, c_nb if C is not None else 1]
    return [(get_kernel(spec), dim, inputs, spec.block_dim)]


_factory_lock = threading.Lock()


def get_kernel(spec: SmallSpec):
    """The kernel for ``spec``, built once per process (thread-safe)."""
    with _factory_lock:
        return _build(dataclasses.replace(spec, per_block=1))


@functools.cache
def _build(spec: SmallSpec):
    IN, OUT, ACC, TRANS_A, TRANS_B = spec_types(spec, ("scale", "axpby"), "small-family")
    check_pads(spec)
    TM, TN, TK = spec.tm, spec.tn, spec.tk
    AXPBY = spec.epilogue == "axpby"
    PAD_AB, PAD_C = spec.pad_ab > 0, spec.pad_c > 0
    TKP, TNP, TNC = TK + spec.pad_ab, TN + spec.pad_ab, TN + spec.pad_c
    epilogue = epilogue_store(TM, TN, spec.acc_dtype, spec.out_dtype, AXPBY)  # (kernels.common)

    def gemm(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        tiles_n: int,
        batch: int,
        per_block: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
    ):
        g, t = wp.tid()
        m0 = (t // tiles_n) * TM
        n0 = (t % tiles_n) * TN
        # Runtime trip counts on purpose: Warp unrolls short constant loops and then gives every
        # iteration's tiles their own shared memory.
        if wp.static(PAD_AB):
            a_s = wp.tile_zeros(shape=(TM, TKP), dtype=IN, storage="shared")
            b_s = wp.tile_zeros(shape=(TK, TNP), dtype=IN, storage="shared")
            a_v = wp.tile_view(a_s, offset=(0, 0), shape=(TM, TK))
            b_v = wp.tile_view(b_s, offset=(0, 0), shape=(TK, TN))
        for bi in range(g * per_block, wp.min(batch, (g + 1) * per_block)):
            Ab = A[wp.min(bi, a_nb - 1)]
            Bb = B[wp.min(bi, b_nb - 1)]
            if wp.static(PAD_C):
                acc = wp.tile_view(wp.tile_zeros(shape=(TM, TNC), dtype=ACC, storage="shared"),
                                   offset=(0, 0), shape=(TM, TN))
            else:
                acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
            for k in range(k_tiles):
                if wp.static(TRANS_A):
                    a = wp.tile_transpose(wp.tile_load(Ab, shape=(TK, TM), offset=(k * TK, m0)))
                else:
                    a = wp.tile_load(Ab, shape=(TM, TK), offset=(m0, k * TK))
                if wp.static(TRANS_B):
                    b = wp.tile_transpose(wp.tile_load(Bb, shape=(TN, TK), offset=(n0, k * TK)))
                else:
                    b = wp.tile_load(Bb, shape=(TK, TN), offset=(k * TK, n0))
                if wp.static(PAD_AB):
                    wp.tile_assign(a_s, a, offset=(0, 0))
                    wp.tile_assign(b_s, b, offset=(0, 0))
                    wp.tile_matmul(a_v, b_v, acc)
                else:
                    wp.tile_matmul(a, b, acc)
            epilogue(D, C, bi, c_nb, acc * alpha, beta, m0, n0)

    k = _compat.make_kernel(gemm, spec.kernel_key)
    if not spec.mathdx:
        # Warp 1.12+ reads this module option at compile time; older releases ignore it (MathDx).
        k.module.options["enable_mathdx_gemm"] = False
    return k
