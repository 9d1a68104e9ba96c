"""The pipelined Warp tile GEMM family: asynchronous copies into shared tiles, overlapped with tile_matmul.

One kernel computes, for every batch index ``b`` and output tile ``(i, j)``::

    D[b] = alpha * op(A[b]) @ op(B[b])                 (epilogue "scale")
    D[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b]   (epilogue "axpby")

``tile_load`` has no asynchronous form in Warp 1.19, so each K step of the tiled family is
load -> sync -> MMA -> sync. Here a ``wp.func_native`` snippet writes straight into the storage of a
shared tile with ``cp.async`` (sm_80+), ``stages`` K tiles of A and B live in one shared buffer each
(``stages * rows`` rows, one stage viewed with ``tile_view``), and the copies of K tile ``k + stages - 1``
are in flight while ``tile_matmul`` works on K tile ``k``. ``tile_matmul`` ends with a block sync, so the
stage it read may be refilled in the next iteration.

Edges: every copy chunk past the M, N or K extent of its operand is zero-filled by the copy itself
(cp.async's source-size operand: 0..chunk bytes are read, the rest of the chunk is zeroed), so edge tiles
stay asynchronous and need no edge shift, clamp or padded copy. A zero in the K padding of A always meets
a zero in the K padding of B, so an infinity in a valid edge element never meets a filled zero.

Alignment the caller must guarantee for ``spec.chunk`` bytes (see :func:`max_chunk`): every operand row
(each batch's base address and the row stride) is a multiple of ``chunk`` bytes and the column stride is
one element. Chunks of 16 bytes use ``cp.async.cg``, 8 and 4 ``cp.async.ca``; ``chunk == 2`` (16-bit rows
with an odd leading dimension) is a plain synchronous element copy in the same snippet: correct, but with
no overlap (the planner should rather stage such operands into aligned copies on large problems).

Layouts: ``"N"``: the operand is row-major ``(batch, rows, cols)``; ``"T"``: its transpose is stored
row-major (the view is ``(batch, cols, rows)``): the tile is copied in the transposed shape (coalesced)
and ``tile_transpose``d in shared memory before the MMA, as in the tiled family.

Batching: a batch count of 1 broadcasts (``A[min(b, a_nb - 1)]``), for A, B and C.

Persistent blocks (``spec.persistent`` > 0; not a default: built and tested, not yet timed): a grid of
``persistent`` blocks per SM, each taking output tiles ``g, g + grid, ...`` over every batch entry, their K
tiles one sequence whose copies run ``stages - 1`` steps ahead across tile boundaries; the shared
accumulator is stored and re-zeroed in place after each tile's last K step (so the zero-fill snippet is
required: :func:`native_acc`). The simt and mma.sync kernels (round 15; built and tested on the CPU, not yet run
on a GPU) store their register accumulator with their own store and re-zero it, in the same kernel.

Stream-K (``spec.stream_k`` > 0, the simt and mma.sync kernels; not a default: built and tested on the CPU, not yet
run on a GPU): a grid of ``stream_k`` blocks per SM shares the K steps of all output tiles evenly, and a tile split
across blocks is finished, in a fixed order, by the block holding its last K step (see :func:`_stream_k_kernel`).

Exact float32 on CUDA cores (``spec.simt``; the default for large problems on CUDA since round 12): the same stages
and copies, but each K step's product is the :data:`_SIMT_MMA` snippet (8x8 outputs per thread in the register
tile's storage, float32 FMAs, 16-byte shared loads, one barrier per K step) instead of ``tile_matmul``, whose
exact-fp32 path (MathDx SIMT) measured 33-40 TFLOP/s with its operands already in shared memory; every layout
reads its stages directly (no ``tile_transpose``); the epilogue is :data:`_OWN_STORE` (alpha, beta * C, cast).

float16, bfloat16 and tf32 on tensor cores without tile_matmul (``spec.mma`` warps; the default for large problems
on CUDA since round 12): the same stages, each K step's product the :data:`_MMA_SYNC` snippet (ldmatrix fragments,
mma.sync.m16n8k16 -- tf32: m16n8k8, with 32-bit shared loads for the operands stored with k across rows --, float32
sums in the register tile's storage, one barrier per K step); the epilogue is :data:`_OWN_STORE`, or (round 17,
:func:`staged_store`: the "scale" epilogue where the A stages hold the output tile) :data:`_STAGED_STORE`, which
writes the outputs into the free A stages and stores the tile in 16-byte chunks.

float16 and bfloat16 with A stored (M, K) and B stored (N, K) on Hopper's warpgroup MMAs (``spec.wgmma``; sm_90
only, compiled for sm_90a; not a default: correct on an H100, ~200 TFLOP/s, round 12): unpadded
K-major core-matrix stages filled by the same copies, :data:`_WGMMA` (wgmma.mma_async from shared-memory
descriptors, float32 sums in registers) and :data:`_OWN_STORE`.

Shared memory per block (bytes): ``stages*(TM*(TK+pa) + TK*(TN+pa))*item + TM*(TN+pc)*acc_item``
(layout T swaps the tile's two extents); :func:`smem_bytes`. 227 KB is the H100 per-block limit.

The snippets use Warp's tile macros (``WP_TILE_THREAD_IDX``, ``WP_TILE_BLOCK_DIM``, ``WP_TILE_SYNC``), so
the same kernel runs on the CPU (block_dim 1, or several fibers with ``wp.config.enable_cpu_blocks``)
with a plain synchronous copy under the same zero-fill rules: CPU CI runs the whole stage logic.
"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import dataclasses
import functools
import threading
from dataclasses import dataclass

import warp as wp

from .. import _compat
from .common import ITEM_BYTES, WP_DTYPES, acc_dtype_name, cuda_source, func_name, grouped_tile

# --- configuration -------------------------------------------------------------------------------------
# Where it stands (H100, warp-lang 1.19.0, TFLOP/s, benchmarks/results/pipelined/): fp16 4096^3 NN 150,
# NT 166 (cuBLAS 758); the same kernels with the copies removed (a diagnostic ceiling, DIAG=mmaonly)
# run NN 234 / NT 261 at 4096^3 and 241 / 283 at 8192^3: the K loop reaches ~64% of tile_matmul's own rate
# per tile, so the copies are not fully hidden. The accumulator must be a shared tile (a register one
# measured 111 against 150), which caps the tile at 128x128 with two 128-deep stages (204 KB of 227): every
# SM then pulls 64 KB per 4.2 MFLOP K step. tf32 87 (ceiling 141-149), fp64 25 (36-37), exact fp32 28 (33-34).
# Padding of the shared tiles, in elements: 16 bytes per A/B row for 16-bit data and tf32, 32 bytes for
# float64, 32 bytes per accumulator row (bank conflicts in MathDx's fragment loads; H100 measurements in
# _kernels.py: fp16 4096^3 50 -> 99 TFLOP/s in the tiled family). The async probe confirmed the
# accumulator pad: 8 floats 165.9 TFLOP/s, 4 floats 146.9 (fp16 4096^3, 128x128x128, 2 stages).
# Exact float32 is dense in the tiled family (padding lost 26.0 -> 23.7 there); here the pad is a spec
# field and the benchmark script measures both.
PAD_AB = {"float16": 8, "bfloat16": 8, "float32": 4, "float64": 4}
PAD_C = {"float32": 8, "float64": 4}
# Epilogue rows per chunk: a whole 128x128 fp32 register tile costs ~96 registers per thread at block
# 256 (fp16 4096^3 64.4 -> 96.9 TFLOP/s in 32-row chunks, tiled family, H200).
ER = 32
CHUNKS = (16, 8, 4, 2)
# K tiles in flight at most. 2-4 until round 15; cuBLAS's fp16 64 x 256^3 kernel keeps 6 stages of K 64 (Nsight
# Compute, benchmarks/results/round15/ncu15.txt), where a 128x128x32 mma.sync block with 3 stages is latency-bound.
MAX_STAGES = 8
SMEM_LIMIT = 227 * 1024  # H100/H200/A100-class per-block opt-in maximum (A100: 163 KB; the planner checks)


@dataclass(frozen=True)
class PipeSpec:
    """Every compile-time choice of one pipelined kernel (hashable; ``key`` names the kernel)."""

    tm: int
    tn: int
    tk: int
    in_dtype: str  # float16 / bfloat16 / float32 / float64
    out_dtype: str
    layout_a: str = "N"  # "N": row-major operand; "T": its transpose stored row-major
    layout_b: str = "N"
    epilogue: str = "scale"  # "scale" or "axpby"
    tf32: bool = False  # float32 inputs through tensor cores (tile_matmul(precision="tf32"))
    stages: int = 2  # 2-8 K tiles of A and B in shared memory (as fit: smem_bytes, SMEM_LIMIT)
    block_dim: int = 256
    min_blocks: int = 0  # CUDA __launch_bounds__(block_dim, min_blocks); 0: none
    chunk: int = 16  # copy chunk in bytes: 16 (cp.async.cg), 8/4 (cp.async.ca), 2 (synchronous)
    pad_ab: int = 0  # extra columns (elements) of each shared A/B row
    pad_c: int = 0  # extra columns of the shared accumulator; 0: the accumulator tile is a register tile
    bias: bool = False  # add a broadcast bias row (1, N) of out_dtype before the activation
    activation: str | None = None  # None/relu/gelu/gelu_tanh/silu/tanh (kernels/epilogue.py), last
    persistent: int = 0  # > 0: a grid of persistent * SMs blocks, each looping over output tiles (see _build)
    simt: bool = False  # exact float32 through the _SIMT_MMA snippet (CUDA-core FMAs) instead of tile_matmul
    mma: int = 0  # > 0: 16-bit inputs through the _MMA_SYNC snippet (mma.sync tensor cores) in this many warps
    wgmma: bool = False  # 16-bit NT through the _WGMMA snippet (sm_90a warpgroup MMAs on core-matrix stages)
    stream_k: int = 0  # > 0 (simt/mma): a grid of stream_k * SMs blocks sharing every tile's K steps (see _build)

    @property
    def acc_dtype(self) -> str:
        return acc_dtype_name(self.in_dtype)

    @property
    def key(self) -> str:
        tf = "_tf32" if self.tf32 else ""
        occ = f"_o{self.min_blocks}" if self.min_blocks else ""
        bias = "_bias" if self.bias else ""
        act = f"_{self.activation}" if self.activation else ""
        act += "_za" if native_acc(self) else ""  # the accumulator's zero-fill snippet (ZERO_ACC_SNIPPET)
        act += f"_per{self.persistent}" if self.persistent else ""
        act += "_simt" if self.simt else ""
        act += f"_mma{self.mma}" if self.mma else ""
        act += "_wgmma" if self.wgmma else ""
        act += f"_sk{self.stream_k}" if self.stream_k else ""
        act += "_ts" if staged_store(self) else ""  # the epilogue through shared memory (_STAGED_STORE)
        return (f"wg_pipe_{self.in_dtype}_{self.out_dtype}_{self.layout_a}{self.layout_b}_"
                f"{self.tm}x{self.tn}x{self.tk}_s{self.stages}_b{self.block_dim}{occ}_c{self.chunk}_"
                f"p{self.pad_ab}-{self.pad_c}_{self.epilogue}{tf}{bias}{act}")

    def a_tile(self) -> tuple[int, int]:
        """Rows and columns of one stage of A in shared memory: as stored (layout T: the transposed tile), or
        K-major ``(tk, tm)`` in the SIMT kernel whatever the layout."""
        if self.simt:
            return (self.tk, self.tm)
        return (self.tk, self.tm) if self.layout_a == "T" else (self.tm, self.tk)

    def b_tile(self) -> tuple[int, int]:
        if self.simt:
            return (self.tk, self.tn)
        return (self.tn, self.tk) if self.layout_b == "T" else (self.tk, self.tn)

    def stage_cols(self) -> tuple[int, int]:
        """Elements per shared row of A's and B's stages, padding included: the tile's columns plus ``pad_ab``;
        an operand whose fragments the tf32 mma.sync kernel reads with scalar loads (:meth:`scalar_fragments`)
        gets rows of 8 or 24 (mod 32) words, so that a fragment's 32 loads hit 32 banks."""
        (_, ac), (_, bc) = self.a_tile(), self.b_tile()
        sa, sb = self.scalar_fragments()
        return (_scalar_row(ac, self.pad_ab) if sa else ac + self.pad_ab,
                _scalar_row(bc, self.pad_ab) if sb else bc + self.pad_ab)

    @property
    def tf32_mma(self) -> bool:
        return bool(self.mma) and self.tf32

    def transposing_copies(self) -> tuple[bool, bool]:
        """Whether A's and B's stages hold the transpose of the tile as stored (copied 4 bytes at a time by
        ``_COPY_T``): the SIMT kernel's A stored (M, K) and B stored (N, K)."""
        if self.simt:
            return self.layout_a == "N", self.layout_b == "T"
        return False, False

    def scalar_fragments(self) -> tuple[bool, bool]:
        """Whether the tf32 mma.sync kernel reads A's / B's fragments with 32-bit shared loads instead of ldmatrix:
        the operands stored with k across rows (A stored (K, M), B stored (K, N)), whose stages are copied as
        stored in 16-byte chunks (ldmatrix .trans moves 16-bit elements, not 32-bit ones)."""
        if self.tf32_mma:
            return self.layout_a == "T", self.layout_b == "N"
        return False, False


def _scalar_row(cols: int, pad: int) -> int:
    """The shortest shared row of at least ``cols + pad`` 4-byte words, padding a whole number of 16 bytes, that is 8
    or 24 words modulo 32 (the tf32 mma.sync kernel's scalar fragment loads: lanes 4 g + t read row t, column g)."""
    r = cols + pad
    while (r - cols) % 4 or r % 32 not in (8, 24):
        r += 1
    return r


def default_spec(in_dtype: str, out_dtype: str | None = None, *, tf32: bool = False, layout: str = "NN",
                 epilogue: str = "scale", chunk: int = 16, device_is_cpu: bool = False, M: int | None = None,
                 N: int | None = None, batch: int = 1, sm_count: int = 132, K: int | None = None,
                 **over) -> PipeSpec:
    """The measured best configuration per dtype on an H100 (warp-lang 1.19.0; benchmarks/results/
    pipelined/pipelined_h100_r*.json, TFLOP/s at 4096^3 / 8192^3 / 1000^3, NN unless said); ``over``
    replaces fields. With ``M``/``N`` given, problems whose 128x64 output tiles fit in one wave (1000^3:
    128 tiles on 132 SMs) get the small-problem configuration; 16-bit inputs then take 64x32 tiles where
    those 128x64 tiles fill under half the SMs, and 96-row tiles where 128-row ones waste most of a wave
    (``_narrow_rows``), and outputs of at most 32x32 (batched small products) 32x32 tiles (K tiles of 64
    where ``K`` > 32). On the CPU: 32x32x32 tiles, block 1, no
    padding (nothing to tune, and compiles stay short)."""
    out_dtype = out_dtype or in_dtype
    # The small-problem configuration (128x64 tiles, one block per SM) only where its blocks fit in one
    # wave: 1023x1025x1027 fp16 (136 blocks of 128x64 for 132 SMs) took 72.9 us against 58.7 with
    # 128x128 tiles (72 blocks), 2048x1024x1024 51.0 against 37.5; 1000^3 (128 blocks) 26.5 against
    # 37.4, 127x4099x1031 61.4 against 73.5 (H100, graph replay of the whole call,
    # benchmarks/results/round4/small_waves.txt). Until round 4 the rule was "fewer 128x128 tiles than SMs".
    blocks64 = -(-M // 128) * -(-N // 64) * max(1, batch) if M is not None and N is not None else 1 << 30
    small = blocks64 <= sm_count
    # Grids that fill under half the SMs even with 128x64 tiles take 64x32 tiles (block 128, several per SM):
    # 127x4099x1031 37.9 -> 30.8 us, 256x2048x2048 44.6 -> 31.2, 512x1024x1024 25.7 -> 19.7, 128x4096x4096
    # 81.7 -> 53.7 (H100, graph replay of whole calls, benchmarks/results/round5/sw4.txt; 64x64 tiles and
    # 128x32 within 10% of it). 1000^3 (128 blocks of 128x64) keeps 128x64: 26.4 against 35.7.
    quarter = blocks64 <= sm_count // 2
    narrow = not small and _narrow_rows(M, N, batch, sm_count)
    if device_is_cpu:
        base = dict(tm=32, tn=32, tk=32, stages=2, block_dim=1, pad_ab=0, pad_c=0)
    elif in_dtype in ("float16", "bfloat16"):
        # 128x128x128, 2 stages, one block/SM: NN 150/161, NT 166/167 (bf16 165/174), TT 154; 128x128x64
        # with 3-4 stages 118-132, 128x128x96 s3 138/148, block 128 143/154, register acc 111/115.
        # Small: 128x64x128 (128 blocks): 70 NN, 73 NT against 50-53 for 128x128x128.
        # 96x128 where its waves are fewer (see _narrow_rows): 1023x1025x1027 52.2 us against 58.7, 1536^3
        # 80.9 against 96.3.
        # 128 threads for the large 128x128 tiles since the copies' fast path (before it 256 led): 4096^3 755 against
        # 775 us cold, 8192^3 5618 against 5914, 4095^3 835 against 851 (results/round9/r18p.txt); NT 4096^3 711
        # against 731, bf16 8192^3 5548 against 5814, 4097^3 847 against 899 (r19p.txt). tf32 and fp64 keep
        # their tiles: 128 threads measured 58.3 against 96.0 (tf32 4096^3), 27.2-29.7 against 30.9 (fp64).
        # Except where each tile has at most SHORT_K_STEPS K steps: its fixed cost (first copies, zero fill,
        # epilogue) then weighs most, and 256 threads do it sooner: 64 x 256^3 22.6 us against 25.4 (graph
        # replay), 28.7 against 31.1 cold (results/round10/r20q.txt).
        short_k = K is not None and K <= SHORT_K_STEPS * 128
        base = dict(tm=96 if narrow else 128, tn=64 if small else 128, tk=128, stages=2,
                    block_dim=256 if narrow or small or short_k else 128, min_blocks=1, pad_ab=8, pad_c=8)
        big = not (small or narrow or quarter or short_k or device_is_cpu)
        if MMA_DEFAULT and big and over.get("activation") is None:
            # The mma.sync kernel (round 12; H100, benchmarks/results/round12/r23p.txt, cold L2, TFLOP/s, cuBLAS in
            # the same process): 128x128x64 s3, 4 warps of 64x64, one block/SM bound: 4096^3 NN 303.8 / NT 305.0
            # (tile_matmul 183.9 / 193.4), 8192^3 320.9 (195.6), bf16 8192^3 330.2 (196.2), 4095^3 staged 243.4
            # (163.8; 1.61x cuBLAS). 128x128x32 s3 o2 299.8 / 298.9; 128x256x32 267 / 276; 8 warps 252. Its copy-free
            # ceiling (DIAG_NO_REFILL, 128x128x32): 479 / 514. Small grids keep tile_matmul (1000^3 24.5 us against
            # 23.4-37 for mma tiles; 64 x 256^3 28.7 against 26.0-34.1: within noise or worse).
            base = dict(tm=128, tn=128, tk=64, stages=3, block_dim=128, min_blocks=1, pad_ab=8, pad_c=0, mma=4)
        if quarter:
            base.update(tm=64, tn=32, block_dim=128)
        if M is not None and N is not None and max(M, N) <= TINY_SIDE:
            # Batched small products (the planner sends 16-bit ones of sides 17-32 here, TINY_MIN_BATCH):
            # one 32x32 tile per entry, 64 threads, many blocks per SM. H100, graph replay / cold L2 (cuBLAS
            # cold), benchmarks/results/round7/r8p.txt: 4096 x 32^3 14.2 / 20.2 us (small family 19.9 / 27.2,
            # cuBLAS 20.9); 1024 x 32^3 5.8 / 10.1 (9.9 / 19.7; 10.3); 256 x 32^3 4.5 / 8.0 (6.6 / 17.0;
            # 7.2); 4096 x 24^3 14.0 / 18.5 (32.9 / 47.5; 20.7); 4096 x 32x32x128 with 64-deep K tiles
            # 32.9 / 41.1, 32-deep 36.3 / 44.6 (61.0 / 66.9; 38.3). Block 32: within 5%, 128: slower cold.
            base.update(tm=32, tn=32, tk=64 if K is not None and K > 32 else 32, block_dim=64, min_blocks=0)
    elif in_dtype == "float32" and tf32:
        # 128x128x64 s2: NN 82/85, NT 87/86-89; 128x128x32 s3/s4 66-68; block 512 76/79; 64x128x64 s3 52/54.
        # Small: 128x64x64 s3: 44 NN, 45 NT (128x128x64: 32-33).
        base = dict(tm=128, tn=64 if small else 128, tk=64, stages=3 if small else 2, block_dim=256, min_blocks=1,
                    pad_ab=4, pad_c=8)
        if MMA_DEFAULT and not (small or device_is_cpu) and over.get("activation") is None:
            # The mma.sync kernel, tf32 (round 12, results/round12/r24p.txt): 128x128x32 s3, 4 warps, two blocks/SM:
            # 4096^3 NN 125.7 (tile_matmul 97.6), NT 145.1 (97.9), 4095^3 105.8 (88.0; 0.77x cuBLAS); 128x256x32
            # 113.7 / 140.8, 8 warps 91.6-113.7. NN then copied B transposed 4 bytes at a time; since round 13 B is
            # copied as stored and read with 32-bit loads (scalar_fragments): NN 140.3, 4095^3 120.0 (0.89x),
            # 2048^3 130.8 (results/round13/r26p.txt); 128x64x32 s4 o3 and 128x128x32 s4 o1 103-116.
            base = dict(tm=128, tn=128, tk=32, stages=3, block_dim=128, min_blocks=2, pad_ab=4, pad_c=0, mma=4)
    elif in_dtype == "float32":
        # Exact fp32 (MathDx SIMT): 128x64x32 s2 dense, register accumulator: 27.9/28.7, 1000^3 20.3;
        # 128x128x32 26/27, padded 64x64x32 s3 25/26 (20.8 at 1000^3). NN only: NT measured 4.8 and TN
        # 10.9 (transposed views in the SIMT path): the planner must not pick this family for them.
        base = dict(tm=128, tn=64, tk=32, stages=2, block_dim=256, min_blocks=0, pad_ab=0, pad_c=0)
        if MMA_DEFAULT and not device_is_cpu and over.get("activation") is None:
            # The SIMT kernel (round 12, results/round12/r22p.json; round 13, results/round13/r26p.txt): 64x128x16
            # s3, 128 threads (2 x 2 warps of 32 x 64 outputs), three blocks/SM: 4096^3 44.9, 4095^3 41.9 (0.86x
            # cuBLAS); round 12's 128x64x16 41.7 / 38.2 (tiled family 32.5 / 29.5), with s4 40.8, o4 41.8, tk 32
            # 36.8-41.2; 128x128x16 s2-s4 39.6-40.7. 1000^3: 17.8 against the tiled 19.1 (the planner sends small
            # exact-fp32 problems to the tiled family: SIMT_MIN_TILES); every layout, unlike tile_matmul's.
            base = dict(tm=64, tn=128, tk=16, stages=3, block_dim=128, min_blocks=3, pad_ab=4, pad_c=0, simt=True)
    else:
        # float64: 64x64x32, 2 stages, block 128, two blocks/SM: 24.5/25.1 (NT 25.3/25.7), 1000^3 20.5;
        # one block/SM 23.2-23.9, 3 stages 17-18, 128x64x32 23.3-24.1.
        base = dict(tm=64, tn=64, tk=32, stages=2, block_dim=128, min_blocks=2, pad_ab=4, pad_c=4)
    base.update(over)
    return PipeSpec(in_dtype=in_dtype, out_dtype=out_dtype, layout_a=layout[0], layout_b=layout[1],
                    epilogue=epilogue, tf32=tf32, chunk=chunk, **base)


# Batched 16-bit products whose output sides are both in 17..TINY_SIDE, K <= 128, and at least
# TINY_MIN_BATCH entries run here rather than in the small family (measured from 256 entries up; sides
# of 16 and less stay in the small family: 4096 x 16^3 8.7 us there against 13.3 here, graph replay).
TINY_SIDE = 32
TINY_MIN_BATCH = 256
TINY_MAX_K = 128


def tiny_batched(in_dtype: str, M: int, N: int, K: int, batch: int) -> bool:
    """Whether the planner gives this product to the family's 32x32 tiles instead of the small family
    (16-bit inputs, both output sides 17-32, K <= 128, >= 256 entries; the caller checks rows and device)."""
    return (in_dtype in ("float16", "bfloat16") and 16 < min(M, N) and max(M, N) <= TINY_SIDE
            and 0 < K <= TINY_MAX_K and batch >= TINY_MIN_BATCH)


# A 96x128 block of the 16-bit large configuration takes ~0.84 of a 128x128 block's time (H100, fp16, one
# block per SM, graph replay of whole calls: 1023x1025x1027 GEMM 34 against 41 us, both one wave; 1536^3
# 80.9 against 96.3 us, both two waves; benchmarks/results/round5/sw3.txt). It pays where the 128x128
# blocks leave the last wave mostly idle: 72 blocks of 132 at 1023^2, 144 at 1536^2.
NARROW_COST = 0.84
# 16-bit 128x128 tiles with at most this many K steps of 128 take 256 threads, the others 128 (default_spec).
SHORT_K_STEPS = 2


def _narrow_rows(M: int | None, N: int | None, batch: int, sm_count: int) -> bool:
    """Whether 96-row tiles finish sooner than 128-row tiles by the wave count of each (one block per
    SM): ``waves(96x128) * NARROW_COST < waves(128x128)``. 4095^3 (8 waves against 11), 2048x1024x1024
    (1 against 2) and 4096^3 keep 128 rows."""
    if M is None or N is None:
        return False
    tiles_n, b = -(-N // 128), max(1, batch)
    w128 = -(-(-(-M // 128) * tiles_n * b) // sm_count)
    w96 = -(-(-(-M // 96) * tiles_n * b) // sm_count)
    return w96 * NARROW_COST < w128


def smem_bytes(spec: PipeSpec) -> int:
    """Shared memory of the kernel's own tiles (A and B stages, plus the accumulator where ``pad_c`` puts
    it in shared memory), in bytes; Warp may add scratch for a register accumulator's MMA."""
    it = ITEM_BYTES[spec.in_dtype]
    ar, br = spec.a_tile()[0], spec.b_tile()[0]
    acp, bcp = spec.stage_cols()
    acc = spec.tm * (spec.tn + spec.pad_c) * ITEM_BYTES[spec.acc_dtype] if spec.pad_c else 0
    return spec.stages * (ar * acp + br * bcp) * it + acc


def unfit(spec: PipeSpec) -> str:
    """Why ``spec`` cannot be built and launched ("" when it can): more shared memory than
    :data:`SMEM_LIMIT`, or a field the kernel factory refuses (stages, chunk, tile columns, paddings).
    Pure arithmetic: nothing is compiled (the planner checks tuned configurations with it)."""
    need = smem_bytes(spec)
    if need > SMEM_LIMIT:
        return f"{need} bytes of shared memory, more than {SMEM_LIMIT}"
    try:
        _check(spec)
    except ValueError as e:
        return str(e)
    return ""


def max_chunk(arr, dtype: str) -> int:
    """The widest copy chunk (16/8/4/2 bytes) that every row of a 3-D Warp array (or a 2-D one) allows:
    base address and row/batch strides multiples of it, unit column stride. 0: not copyable (column
    stride not one element)."""
    it = ITEM_BYTES[dtype]
    if arr.strides[-1] != it:
        return 0
    vals = [arr.ptr or 0] + [s for s, n in zip(arr.strides[:-1], arr.shape[:-1]) if n > 1]
    for c in CHUNKS:
        if c >= it and all(v % c == 0 for v in vals):
            return c
    return it if it <= 2 else 0


# --- the copy snippets ----------------------------------------------------------------------------------
_COPY = r"""
    // Copy the ROWS x COLS region of `src` at (r0, c0) into rows [d0, d0 + ROWS), columns [0, COLS)
    // of the shared tile `dst` (row stride DLD elements); every element outside src is written as zero.
    // Assumes: src 2-D, unit column stride, each row's address a multiple of CH bytes, c0 a multiple
    // of CH / ITEM; dst rows a multiple of CH bytes apart (padded tiles keep 16). A region wholly inside
    // src takes _COPY_FAST where the family's tile allows it (FASTPATH below). Called by every
    // thread of the block; thread t copies chunks t, t + block_dim, ... . CUDA: cp.async (CH 16/8/4),
    // completion through commit/wait snippets; CH 2 or the CPU: a synchronous copy.
    const int nr = src.shape[0];
    const int nc = src.shape[1];
    const char* base = (const char*)src.data;
    const size_t ld = (size_t)src.strides[0];
    char* sbase = (char*)dst.data.ptr + (size_t)d0 * ({DLD} * {ITEM});
{FASTPATH}{CHECK}    for (int c = WP_TILE_THREAD_IDX; c < {TOTAL}; c += WP_TILE_BLOCK_DIM) {{
        const int r = c / {CPR};
        const int cc = (c - r * {CPR}) * {E};
        const int gr = r0 + r;
        const int gc = c0 + cc;
        int valid = nc - gc;
        valid = gr >= nr ? 0 : (valid < 0 ? 0 : (valid > {E} ? {E} : valid));
        const char* g = valid ? base + (size_t)gr * ld + (size_t)gc * {ITEM} : base;
        char* s = sbase + {DST};
#if defined(__CUDA_ARCH__) && {ASYNC}
        const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
        asm volatile("cp.async.{CG}.shared.global [%0], [%1], {CH}, %2;\n" :: "r"(sa), "l"(g), "r"(valid * {ITEM}));
#elif defined(__CUDA_ARCH__)
        *(unsigned short*)s = valid ? *(const unsigned short*)g : (unsigned short)0;
#else
        for (int b = 0; b < {CH}; ++b) s[b] = b < valid * {ITEM} ? g[b] : (char)0;
#endif
    }}
{FALLBACK}"""

_COPY_FAST = r"""
    if (r0 + {ROWS} <= nr && c0 + {COLS} <= nc) {{
        // The whole region inside src (most tiles): every chunk whole, the thread's chunks {PER} rows apart,
        // one address computed, no bounds arithmetic per chunk. (The CPU runs it with several fibers per block,
        // wp.config.enable_cpu_blocks, as a synchronous copy.)
        const int t = WP_TILE_THREAD_IDX;
        const int r = t / {CPR};
        const int cc = (t - r * {CPR}) * {E};
        const char* g = base + (size_t)(r0 + r) * ld + (size_t)(c0 + cc) * {ITEM};
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(sbase + {DST});
#pragma unroll
        for (int q = 0; q < {NQ}; ++q)
            asm volatile("cp.async.{CG}.shared.global [%0], [%1], {CH};\n" :: "r"(sa + q * ({QOFF})),
                         "l"(g + (size_t)q * {PER} * ld));
#else
        char* s = sbase + {DST};
        for (int q = 0; q < {NQ}; ++q)
            memcpy(s + (size_t)q * ({QOFF}), g + (size_t)q * {PER} * ld, {CH});
#endif
        return;
    }}
"""

_COMMIT = r"""
    // Close the cp.async group of this pipeline stage (a group may be empty). CPU: nothing to do.
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
"""

_SYNC = r"""
    // A block barrier (CPU: threads run one at a time; the macro is a no-op there).
    WP_TILE_SYNC();
"""

_WAIT = r"""
    // Wait until at most {N} cp.async groups of this thread are pending, then make every thread's
    // copies visible to the block. CPU: copies were synchronous; only the block barrier.
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group {N};\n" ::);
#endif
    WP_TILE_SYNC();
"""

# Stream-K (spec.stream_k): a block's register accumulator written to / added from its slot of the workspace, and
# zeroed. A slot holds every thread's registers register-major ([r][thread]: coalesced); a contributor's slot comes
# with a flag in `flags` (set after a device-wide fence; the finisher waits for it, adds the slot, and clears it).
_SK_ZERO = r"""
    // Zero this thread's accumulator registers (the register tile's storage).
#pragma unroll
    for (int r = 0; r < (int)(sizeof(acc.data) / sizeof(acc.data[0])); ++r) acc.data[r] = 0.0f;
"""
_SK_SPILL = r"""
    // ws[slot][r][thread] = acc.data[r]; then, where flag >= 0, flags[flag] = 1 once the whole block's writes are
    // visible device-wide.
    const int nreg = (int)(sizeof(acc.data) / sizeof(acc.data[0]));
    const int bd = WP_TILE_BLOCK_DIM;
    const int tid = WP_TILE_THREAD_IDX;
    float* w = (float*)ws.data + (size_t)slot * nreg * bd;
#pragma unroll  // constant trip count: acc.data stays in registers
    for (int r = 0; r < nreg; ++r) w[(size_t)r * bd + tid] = acc.data[r];
    if (flag >= 0) {
#if defined(__CUDA_ARCH__)
        __threadfence();
        __syncthreads();
        if (tid == 0) atomicExch((int*)flags.data + flag, 1);
#else
        ((int*)flags.data)[flag] = 1;
#endif
    }
"""
_SK_ADD = r"""
    // acc.data[r] += ws[slot][r][thread]; where flag >= 0, first wait for flags[flag] (set by a block of a lower
    // index: on the CPU, blocks run in index order, so it is set already -- else the sums become NaN), and clear it
    // after (every launch leaves the flags zero).
    const int nreg = (int)(sizeof(acc.data) / sizeof(acc.data[0]));
    const int bd = WP_TILE_BLOCK_DIM;
    const int tid = WP_TILE_THREAD_IDX;
    const float* w = (const float*)ws.data + (size_t)slot * nreg * bd;
    if (flag >= 0) {
#if defined(__CUDA_ARCH__)
        if (tid == 0) {
            while (*(volatile int*)((int*)flags.data + flag) == 0) {
#if __CUDA_ARCH__ >= 700
                __nanosleep(32);
#endif
            }
            __threadfence();
        }
        __syncthreads();
#else
        if (((int*)flags.data)[flag] == 0) {
            for (int r = 0; r < nreg; ++r) acc.data[r] = __builtin_nanf("");  // CPU only
            return;
        }
#endif
    }
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int r = 0; r < nreg; ++r) acc.data[r] += __ldcg(w + (size_t)r * bd + tid);
#else
    for (int r = 0; r < nreg; ++r) acc.data[r] += w[(size_t)r * bd + tid];
#endif
    if (flag >= 0) {
        WP_TILE_SYNC();  // every thread has read the flag (CPU fibers too) before it is cleared
        if (tid == 0) ((int*)flags.data)[flag] = 0;
    }
"""

# The shared accumulator's zero fill and the "scale" epilogue's stores, as snippets: Warp's tile_zeros and
# tile_store compute an index per element and store 4 / 2 bytes at a time; at 128x128 tiles they were ~45%
# (with the stage buffers' fill, since removed) and ~19% of the instructions of a one-K-step block (ncu,
# H100, benchmarks/results/round6/).
_ZERO_ACC = r"""
    // Zero the whole shared accumulator (every row with its padding: {N16} 16-byte words; Warp aligns
    // shared tiles to 16 bytes), then a block barrier. CPU: the same, byte by byte.
    char* p = (char*)acc.data.ptr;
    for (int i = WP_TILE_THREAD_IDX; i < {N16}; i += WP_TILE_BLOCK_DIM) {{
#if defined(__CUDA_ARCH__)
        ((::uint4*)p)[i] = make_uint4(0u, 0u, 0u, 0u);
#else
        for (int b = 0; b < 16; ++b) p[(size_t)i * 16 + b] = 0;
#endif
    }}
    WP_TILE_SYNC();
"""

_STORE = r"""
    // dst[m0 + r, n0 + c] = {OT}(alpha * acc[r, c]) for the block's {TM} x {TN} tile (acc: row stride {TNC});
    // rows and columns past dst's extent are dropped. Each thread takes {E} consecutive accumulator
    // elements (one 16-byte shared load on CUDA) and stores them with one {VW}-byte store where dst's
    // rows allow it (unit column stride, base and row stride multiples of {VW} bytes), else one by one.
    const int nr = dst.shape[0];
    const int nc = dst.shape[1];
    char* base = (char*)dst.data;
    const size_t ld = (size_t)dst.strides[0];
    const size_t cs = (size_t)dst.strides[1];
    const bool vec = cs == {OI} && (size_t)base % {VW} == 0 && (nr <= 1 || ld % {VW} == 0);
    const {AT}* a = (const {AT}*)acc.data.ptr;
    for (int c = WP_TILE_THREAD_IDX; c < {TOTAL}; c += WP_TILE_BLOCK_DIM) {{
        const int r = c / {CPR};
        const int cc = (c - r * {CPR}) * {E};
        const int gr = m0 + r;
        const int gc = n0 + cc;
        if (gr >= nr || gc >= nc)
            continue;
        alignas(16) {AT} x[{E}];
#if defined(__CUDA_ARCH__)
        *(::uint4*)x = *(const ::uint4*)(a + (size_t)r * {TNC} + cc);
#else
        for (int e = 0; e < {E}; ++e) x[e] = a[(size_t)r * {TNC} + cc + e];
#endif
        char* g = base + (size_t)gr * ld + (size_t)gc * cs;
        if (vec && gc + {E} <= nc) {{
            alignas(16) {OT} v[{E}];
            for (int e = 0; e < {E}; ++e) v[e] = {OT}(alpha * x[e]);
#if defined(__CUDA_ARCH__)
            *({VT}*)g = *(const {VT}*)v;
#else
            for (int b = 0; b < {VW}; ++b) g[b] = ((const char*)v)[b];
#endif
        }} else {{
            for (int e = 0; e < {E} && gc + e < nc; ++e) *({OT}*)(g + (size_t)e * cs) = {OT}(alpha * x[e]);
        }}
    }}
"""
_C_TYPES = {"float16": "wp::float16", "bfloat16": "wp::bfloat16", "float32": "wp::float32", "float64": "wp::float64"}
_VEC_TYPES = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long", 16: "::uint4"}  # by store width


# --- exact float32 on CUDA cores (spec.simt; H100: 44.9 TFLOP/s at 4096^3, the default for large problems) -------
# tile_matmul's exact-fp32 GEMM (MathDx's SIMT path) ran at 33-40 TFLOP/s on these tiles with its operands already
# in shared memory, against an fp32 FMA peak of ~67 and cuBLAS's 51.5 (H100; docs/performance.md, "Where the tile
# API is the wall"): a ceiling under issue 16's 41.5 for every kernel built on it. _SIMT_MMA replaces the
# tile_matmul of a K step by the register-blocked outer product of SIMT GEMMs: each thread keeps an 8x8 block of
# outputs in registers and, per k, reads 8 values of A and 8 of B with four 16-byte shared loads for 64 FMAs.
# Both stages are K-major, (TK, TM) and (TK, TN), whatever the layout: A stored (M, K) and B stored (N, K) are
# copied transposed, 4 bytes per cp.async (_COPY_T). Read K-contiguous instead, the compiler merged four k's
# loads into one 16-byte load and kept them live: 168-254 registers (ptxas 13.0, sm_90, NN/NT 128x128x16), or
# spills under __launch_bounds__(256, 2); K-major stages: 128 registers, no spill. Warps are 4 x 8 lanes over
# 32 x 64 outputs; a thread's rows and columns are two groups of 4 contiguous ones, 16 rows and 32 columns apart,
# so a warp's loads of one k read 64 (A) and 128 (B) contiguous bytes: no bank conflict. The accumulator is the
# register tile's own storage (acc.data) in this order, so only these snippets may read it; the epilogue is
# _OWN_STORE (alpha, beta * C, the output cast; no bias or activation). One barrier per K step: the K loop waits
# for stage k (and syncs) before refilling the stage the previous step read (_build).
SIMT_TILE = 8  # rows and columns of outputs per thread

_COPY_T = r"""
    // Copy the ROWS x COLS region of `src` at (r0, c0), 4-byte elements, transposed into the shared tile `dst`:
    // element (r, c) to row d0 + c, column r (row stride DLD elements); elements outside src are written as zero.
    // Assumes: unit column stride of src. A region wholly inside src takes the fast path below where the tile
    // allows it; otherwise thread t takes elements t, t + block_dim, ... in src's row-major order. CUDA: one
    // cp.async.ca of 4 bytes each (source size 0 past the edges), completion through commit/wait snippets; the
    // CPU: synchronous.
    const int nr = src.shape[0];
    const int nc = src.shape[1];
    const char* base = (const char*)src.data;
    const size_t ld = (size_t)src.strides[0];
    char* sbase = (char*)dst.data.ptr + (size_t)d0 * ({DLD} * 4);
    if ({FAST} && r0 + {ROWS} <= nr && c0 + {COLS} <= nc) {{
        // The whole region inside src: a warp copies blocks of 4 rows x 8 columns (lane: row lane % 4, column
        // lane / 4), so its 32 shared stores hit 32 different banks (DLD is 4 modulo 8: column c's 4 rows start
        // at bank 4 (c DLD / 4 mod 8)) and its loads read 4 rows of 32 bytes. Warp w starts at row {RW}, column
        // {CW}; then {Q1} steps of {RSTEP} rows x {Q2} of {CSTEP} columns (one address, constant offsets). (The CPU
        // runs it with several fibers per block, wp.config.enable_cpu_blocks, synchronously.)
        const int t = WP_TILE_THREAD_IDX;
        const int w = t / 32;
        const int r = {RW} + (t % 32) % 4;
        const int c = {CW} + (t % 32) / 4;
        const char* g = base + (size_t)(r0 + r) * ld + (size_t)(c0 + c) * 4;
        char* s = sbase + ((size_t)c * {DLD} + r) * 4;
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
#endif
#pragma unroll
        for (int q1 = 0; q1 < {Q1}; ++q1)
#pragma unroll
            for (int q2 = 0; q2 < {Q2}; ++q2) {{
                const size_t so = ((size_t)(q2 * {CSTEP}) * {DLD} + q1 * {RSTEP}) * 4;
                const char* gq = g + (size_t)(q1 * {RSTEP}) * ld + (size_t)(q2 * {CSTEP}) * 4;
#if defined(__CUDA_ARCH__)
                asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(sa + (unsigned)so), "l"(gq));
#else
                memcpy(s + so, gq, 4);
#endif
            }}
        return;
    }}
    for (int e = WP_TILE_THREAD_IDX; e < {ROWS} * {COLS}; e += WP_TILE_BLOCK_DIM) {{
        const int r = e / {COLS};
        const int c = e - r * {COLS};
        const bool ok = r0 + r < nr && c0 + c < nc;
        const char* g = ok ? base + (size_t)(r0 + r) * ld + (size_t)(c0 + c) * 4 : base;
        char* s = sbase + ((size_t)c * {DLD} + r) * 4;
#if defined(__CUDA_ARCH__)
        const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 4 : 0));
#else
        for (int b = 0; b < 4; ++b) s[b] = ok ? g[b] : (char)0;
#endif
    }}
"""

_SIMT_GEOMETRY = r"""
        const int v = WP_TILE_THREAD_IDX * ({VT} / WP_TILE_BLOCK_DIM) + q;  // the thread of the {VT} the tile needs
        const int w = v / 32;
        const int l = v % 32;
        const int row0 = (w / {WN}) * 32 + (l / 8) * 4;
        const int col0 = (w % {WN}) * 64 + (l % 8) * 4;
"""

_SIMT_MMA = r"""
    // acc += A x B over stage s of the K-major shared buffers ba (TK x TM, row stride {ALD}) and bb (TK x TN, row
    // stride {BLD}), in float32 FMAs. The tile's {VT} threads (CUDA: the block; the CPU runs them one after another)
    // keep 8 x 8 outputs each in acc.data (q: the CPU's {VT} / block_dim of them per real thread): thread v of warp
    // w = v / 32, lane l holds rows row0 + (i % 4) + 16 (i / 4) and columns col0 + (j % 4) + 32 (j / 4), i, j < 8,
    // row0 = (w / {WN}) * 32 + (l / 8) * 4, col0 = (w % {WN}) * 64 + (l % 8) * 4. No barrier: the caller syncs
    // before it refills a stage.
    const float* As = (const float*)ba.data.ptr + (size_t)s * {SA};
    const float* Bs = (const float*)bb.data.ptr + (size_t)s * {SB};
    for (int q = 0; q < {VT} / WP_TILE_BLOCK_DIM; ++q) {{
{GEOM}        const float* pa = As + row0;
        const float* pb = Bs + col0;
        float* d = acc.data + q * 64;
#pragma unroll
        for (int k = 0; k < {TK}; ++k) {{
            alignas(16) float a[8];
            alignas(16) float b[8];
#if defined(__CUDA_ARCH__)
            *(float4*)a = *(const float4*)(pa + {ALD} * k);
            *(float4*)(a + 4) = *(const float4*)(pa + {ALD} * k + 16);
            *(float4*)b = *(const float4*)(pb + {BLD} * k);
            *(float4*)(b + 4) = *(const float4*)(pb + {BLD} * k + 32);
#else
            for (int i = 0; i < 8; ++i) a[i] = pa[{ALD} * k + (i % 4) + 16 * (i / 4)];
            for (int j = 0; j < 8; ++j) b[j] = pb[{BLD} * k + (j % 4) + 32 * (j / 4)];
#endif
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) d[i * 8 + j] += a[i] * b[j];
        }}
    }}
"""

# --- 16-bit and tf32 inputs on tensor cores through mma.sync (spec.mma; H100: 303.8 / 125.7 TFLOP/s at 4096^3) ---
# tile_matmul's 16-bit GEMM (MathDx) reads its fragments with plain 32-bit shared loads and byte permutes (PRMT),
# never ldmatrix (SASS of the fp16 default, docs/performance.md "Round 11"), and measured 234-261 TFLOP/s with its
# operands already in shared memory (DIAG=mmaonly, 4096^3): the kernel's ~190 sits under that. _MMA_SYNC replaces
# the K step's tile_matmul by the warp-level MMA of CUTLASS's sm80 GEMMs: ldmatrix x4 fragment loads (.trans for
# the operands stored with k across rows: A of layout T, B of layout N), mma.sync.m16n8k16 with float32
# accumulators in the register tile's own storage (acc.data), one barrier per K step as in the SIMT kernel. The
# stages are the tile_matmul kernel's (as copied, 16-byte cp.async, rows padded by 16 bytes): an ldmatrix reads 8
# rows of 16 bytes, and with an odd number of 16-byte words per row (tk, tm, tn multiples of 16 and 8 elements of
# padding) they fall in 8 different bank groups. The epilogue is _OWN_STORE.
_MMA_GEOMETRY = r"""
        const int v = WP_TILE_THREAD_IDX * ({VT} / WP_TILE_BLOCK_DIM) + q;  // the thread of the {VT} the tile needs
        const int w = v / 32;
        const int l = v % 32;
        const int wr = (w / {WN}) * {WTM};  // the first row and column of warp w's outputs in the tile
        const int wc = (w % {WN}) * {WTN};
"""

_MMA_SYNC = r"""
    // acc += A x B over stage s of the shared buffers ba (A's {AR} x {AC} stage, row stride {ALD}) and bb ({BR} x
    // {BC}, row stride {BLD}) on tensor cores: mma.sync {SHAPE}, {T} products, float32 sums. The tile's {VT} threads
    // are {NW} warps ({WM} x {WN}) of {WTM} x {WTN} outputs: {MI} x {NJ} MMA tiles of 16 x 8 whose 4 outputs per
    // thread are acc.data[4 (mi {NJ} + nj) + c]: row wr + 16 mi + l / 4 + 8 (c / 2), column wc + 8 nj + 2 (l % 4) +
    // c % 2 (l: the lane). Fragments come from ldmatrix x4 loads of 8 x 16-byte matrices ({P} element(s) per 32-bit
    // register): lane l gives the address of row l % 8 of matrix l / 8; A's matrix j is rows + 8 (j % 2), k + {KH}
    // (j / 2) of a 16 x {KSTEP} (the a0..a3 of the PTX fragment), B's columns + 8 (j / 2), k + {KH} (j % 2) of a 16 x
    // {KSTEP} (b0, b1 of MMA tiles 2 nb and 2 nb + 1).{SCALAR_DOC}{CVT_DOC} No barrier: the caller syncs before it
    // refills a stage.
#if defined(__CUDA_ARCH__)
    const int q = 0;
{GEOM}    const int j = l / 8;
    const int i = l % 8;
    const unsigned sa = (unsigned)__cvta_generic_to_shared(ba.data.ptr) + (unsigned)(s * {SA} * {ITEM});
    const unsigned sb = (unsigned)__cvta_generic_to_shared(bb.data.ptr) + (unsigned)(s * {SB} * {ITEM});
    float* d = acc.data;
#pragma unroll
    for (int kk = 0; kk < {KS}; ++kk) {{
        const int cb = {KSTEP} * kk;
        unsigned af[{MI}][4];
        unsigned bf[{NB}][4];
#pragma unroll
        for (int mi = 0; mi < {MI}; ++mi) {{
            const int rb = wr + 16 * mi;
{A_LOAD}{CVT_A}        }}
#pragma unroll
        for (int nb = 0; nb < {NB}; ++nb) {{
            const int rb = wc + 16 * nb;
{B_LOAD}{CVT_B}        }}
#pragma unroll
        for (int mi = 0; mi < {MI}; ++mi)
#pragma unroll
            for (int nj = 0; nj < {NJ}; ++nj) {{
                float* c = d + 4 * (mi * {NJ} + nj);
                asm volatile("mma.sync.aligned.{SHAPE}.row.col.f32.{T}.{T}.f32 {{%0, %1, %2, %3}}, "
                             "{{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\n"
                             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                             : "r"(af[mi][0]), "r"(af[mi][1]), "r"(af[mi][2]), "r"(af[mi][3]),
                               "r"(bf[nj / 2][2 * (nj % 2)]), "r"(bf[nj / 2][2 * (nj % 2) + 1]));
            }}
    }}
#else
    // The CPU runs the tile's threads one after another. Each output sums, over k, the A and B values that the
    // lanes holding them in the PTX fragment layouts would have received from the ldmatrix addresses above (the
    // same expressions), so the CPU checks the addressing.
    const {IT}* As = (const {IT}*)ba.data.ptr + (size_t)s * {SA};
    const {IT}* Bs = (const {IT}*)bb.data.ptr + (size_t)s * {SB};
{CPU_CVT}    // element e of register j of lane L of an x4 ldmatrix at (rb, cb): row L / 4, b16 columns 2 (L % 4), + 1
    // of matrix j (.trans: of its transpose), whose row i starts where lane 8 j + i points (scalar fragments: the
    // word that lane L loads for register j)
    auto lda = [&](int rb, int cb, int L, int j, int e) -> float {{
        const int i = {A_I};
        return {RND}((float)As[({A_OFF_CPU}) + {A_C}]);
    }};
    auto ldb = [&](int rb, int cb, int L, int j, int e) -> float {{
        const int i = {B_I};
        return {RND}((float)Bs[({B_OFF_CPU}) + {B_C}]);
    }};
    for (int q = 0; q < {VT} / WP_TILE_BLOCK_DIM; ++q) {{
{GEOM}        float* d = acc.data + q * {PER};
        for (int kk = 0; kk < {KS}; ++kk)
            for (int mi = 0; mi < {MI}; ++mi)
                for (int nj = 0; nj < {NJ}; ++nj)
                    for (int c = 0; c < 4; ++c) {{
                        const int row = l / 4 + 8 * (c / 2);  // in the 16 x 8 MMA tile
                        const int col = 2 * (l % 4) + c % 2;
                        float x = 0.0f;
                        // A (row, k): lane 4 (row % 8) + (k % {KH}) / {P}, register row / 8 + 2 (k / {KH}), element
                        // k % {P}; B (k, col): lane 4 col + (k % {KH}) / {P}, register k / {KH} of MMA tile nj (2 (nj %
                        // 2) + k / {KH} of the x4)
                        for (int k = 0; k < {KSTEP}; ++k)
                            x += lda(wr + 16 * mi, {KSTEP} * kk, 4 * (row % 8) + (k % {KH}) / {P},
                                     row / 8 + 2 * (k / {KH}), k % {P}) *
                                 ldb(wc + 16 * (nj / 2), {KSTEP} * kk, 4 * col + (k % {KH}) / {P},
                                     2 * (nj % 2) + k / {KH}, k % {P});
                        d[4 * (mi * {NJ} + nj) + c] += x;
                    }}
    }}
#endif
"""
# tf32: each fragment register rounded to tf32 (to nearest, ties away from zero) rather than left to the tensor
# core, which ignores the low 13 bits (truncation: a bias of up to one tf32 unit instead of half).
_MMA_CVT = ("            for (int r = 0; r < 4; ++r)\n"
            "                asm(\"cvt.rna.tf32.f32 %0, %1;\\n\"\n"
            "                    : \"=r\"({F}[{X}][r]) : \"f\"(__uint_as_float({F}[{X}][r])));\n")
_MMA_CPU_CVT = r"""    // tf32 rounding as cvt.rna.tf32.f32: to nearest, ties away from zero, on the 19 upper bits;
    // infinities and NaN unchanged
    auto tf32 = [](float x) -> float {{
        unsigned u;
        memcpy(&u, &x, 4);
        if ((u & 0x7f800000u) != 0x7f800000u)
            u = (u + 0x1000u) & 0xffffe000u;
        memcpy(&x, &u, 4);
        return x;
    }};
"""
# ldmatrix addressing per operand and storage (_MMA_SYNC): the element offset in the stage of row {I} of x4 matrix
# {J} at (rb, cb) (rb: the first row of A / column of B, cb: the first k), the .trans flag, and, for the CPU, which
# row (i) and column of matrix j hold element e of lane L's register (P elements per register; KH: the k offset of
# the second matrix along k).
_LDSM = {
    # k along the stage's rows (A of layout N, B of layout T; tf32: every layout): plain ldmatrix
    ("A", False): ("(rb + 8 * ({J} % 2) + {I}) * {LD} + cb + {KH} * ({J} / 2)", "", "L / 4", "{P} * (L % 4) + e"),
    ("B", False): ("(rb + 8 * ({J} / 2) + {I}) * {LD} + cb + {KH} * ({J} % 2)", "", "L / 4", "{P} * (L % 4) + e"),
    # k down the stage's columns (16-bit A of layout T, B of layout N): ldmatrix .trans
    ("A", True): ("(cb + 8 * ({J} / 2) + {I}) * {LD} + rb + 8 * ({J} % 2)", ".trans", "2 * (L % 4) + e", "L / 4"),
    ("B", True): ("(cb + 8 * ({J} % 2) + {I}) * {LD} + rb + 8 * ({J} / 2)", ".trans", "2 * (L % 4) + e", "L / 4"),
    # k down the stage's columns, tf32 (A of layout T, B of layout N): one 32-bit load per register; lane L holds
    # A(row L / 4 (+ 8), k L % 4 (+ 4)) and B(k L % 4 (+ 4), column L / 4), so {I} is the k (L % 4) and L / 4 the
    # column added to the offset
    ("A", "s"): ("(cb + 4 * ({J} / 2) + {I}) * {LD} + rb + 8 * ({J} % 2)", "", "L % 4", "L / 4"),
    ("B", "s"): ("(cb + 4 * ({J} % 2) + {I}) * {LD} + rb + 8 * ({J} / 2)", "", "L % 4", "L / 4"),
}
_LDSM_X4 = ("            asm volatile(\"ldmatrix.sync.aligned.m8n8.x4{TR}.shared.b16 {{%0, %1, %2, %3}}, [%4];\\n\"\n"
            "                         : \"=r\"({F}[{X}][0]), \"=r\"({F}[{X}][1]), \"=r\"({F}[{X}][2]), "
            "\"=r\"({F}[{X}][3])\n"
            "                         : \"r\"({BASE} + {ITEM} * ({OFF})));\n")
_LDS_32 = ("            asm volatile(\"ld.shared.b32 %0, [%1];\\n\" : \"=r\"({F}[{X}][{R}])\n"
           "                         : \"r\"({BASE} + {ITEM} * ({OFF})));\n")


def _fragment_load(spec: PipeSpec, operand: str, trans, ld: int, k: dict) -> str:
    """CUDA source of one x4 fragment load of ``operand`` ("A": af[mi], "B": bf[nb]) for :data:`_MMA_SYNC`."""
    off = _LDSM[(operand, trans)][0]
    f, x = ("af", "mi") if operand == "A" else ("bf", "nb")
    base, item = ("sa" if operand == "A" else "sb"), ITEM_BYTES[spec.in_dtype]
    if trans == "s":
        return "".join(_LDS_32.format(F=f, X=x, R=r, BASE=base, ITEM=item,
                                      OFF=off.format(J=r, I="l % 4", LD=ld, **k) + " + l / 4") for r in range(4))
    return _LDSM_X4.format(TR=_LDSM[(operand, trans)][1], F=f, X=x, BASE=base, ITEM=item,
                           OFF=off.format(J="j", I="i", LD=ld, **k))


MMA_TYPES = {"float16": "f16", "bfloat16": "bf16"}


def mma_warps(spec: PipeSpec) -> tuple[int, int] | None:
    """``(warps along M, warps along N)`` of the mma.sync kernel's ``spec.mma`` warps: the split whose warp tiles
    are the squarest (ties: the taller), each a multiple of 16 x 16 outputs; None if there is none."""
    best = None
    for wm in range(1, spec.mma + 1):
        wn = spec.mma // wm
        if wm * wn != spec.mma or spec.tm % (16 * wm) or spec.tn % (16 * wn):
            continue
        cand = (abs(spec.tm // wm - spec.tn // wn), -(spec.tm // wm), wm, wn)
        best = cand if best is None else min(best, cand)
    return None if best is None else best[2:]


def _mma_fields(spec: PipeSpec) -> dict:
    wm, wn = mma_warps(spec)
    wtm, wtn = spec.tm // wm, spec.tn // wn
    ar, ac = spec.a_tile()
    br, bc = spec.b_tile()
    ald, bld = spec.stage_cols()
    tf = spec.tf32_mma
    p = 1 if tf else 2  # elements per 32-bit register
    kstep = 8 if tf else 16
    sa_, sb_ = spec.scalar_fragments()
    ta = "s" if sa_ else (not tf and spec.layout_a == "T")
    tb = "s" if sb_ else (not tf and spec.layout_b == "N")
    a_off, _, a_i, a_c = _LDSM[("A", ta)]  # (the .trans flag: _fragment_load)
    b_off, _, b_i, b_c = _LDSM[("B", tb)]
    k = dict(KH=4 * p, P=p)
    f = dict(VT=32 * spec.mma, NW=spec.mma, WM=wm, WN=wn, WTM=wtm, WTN=wtn, MI=wtm // 16, NJ=wtn // 8,
             NB=wtn // 16, PER=wtm * wtn // 32, KSTEP=kstep, KS=spec.tk // kstep, AR=ar, AC=ac, BR=br, BC=bc,
             ALD=ald, BLD=bld, SA=ar * ald, SB=br * bld, ITEM=ITEM_BYTES[spec.in_dtype],
             T="tf32" if tf else MMA_TYPES.get(spec.in_dtype, "f16"), SHAPE=f"m16n8k{kstep}",
             IT=_C_TYPES[spec.in_dtype], A_OFF_CPU=a_off.format(J="j", I="i", LD=ald, **k), A_I=a_i,
             A_C=a_c.format(**k), B_OFF_CPU=b_off.format(J="j", I="i", LD=bld, **k), B_I=b_i, B_C=b_c.format(**k),
             A_LOAD=_fragment_load(spec, "A", ta, ald, k), B_LOAD=_fragment_load(spec, "B", tb, bld, k), **k,
             SCALAR_DOC=(" tf32 operands stored with k across rows: one 32-bit shared load per register instead (A: "
                         "row l / 4 + 8 (j % 2), k l % 4 + 4 (j / 2); B: k l % 4 + 4 (j % 2), column l / 4 + 8 (j / "
                         "2)); their rows are 8 or 24 words modulo 32, so the 32 loads hit 32 banks."
                         if sa_ or sb_ else ""),
             CVT_A=_MMA_CVT.format(F="af", X="mi") if tf else "", CVT_B=_MMA_CVT.format(F="bf", X="nb") if tf else "",
             CVT_DOC=" tf32: each register rounded to nearest (cvt.rna)." if tf else "",
             CPU_CVT=_MMA_CPU_CVT.format() if tf else "", RND="tf32" if tf else "")
    f["GEOM"] = _MMA_GEOMETRY.format(**f)
    return f


def _mma_sync_snippet(spec: PipeSpec) -> str:
    return _MMA_SYNC.format(**_mma_fields(spec))


# --- 16-bit NT on sm_90a warpgroup MMAs (spec.wgmma; correct on an H100, ~200 TFLOP/s: not a default) -------------
# mma.sync issues one 16x8x16 product per warp instruction; Hopper's wgmma.mma_async multiplies 64 x N x 16 per
# warpgroup (4 warps) straight from shared memory, and is what cuBLAS's 690-760 TFLOP/s runs on. Warp 1.19 compiles
# for sm_90a when wp.config.cuda_arch_suffix is "a" (the factory sets it while it loads such a module:
# _load_arch_specific). The stages hold A (TM x TK) and B (TN x TK), both K-major (layouts N and T), as wgmma's
# core matrices without swizzle (_core_offset: 8 rows x 16 bytes contiguous; along K 128 bytes apart (the
# descriptor's LBO), along M/N TK / 8 core matrices apart (SBO)), written there by the same 16-byte cp.async copies.
# Warpgroup g computes rows 64 g .. 64 g + 63 of the tile over all TN columns; each thread holds TN / 2 float32 sums
# in the register tile's storage, in the order of wgmma's D fragment (_OWN_STORE). Per K step: the copies' wait,
# fence.proxy.async (the copies are generic-proxy writes, wgmma reads through the async proxy), the block barrier,
# then TK / 16 wgmma with one commit and a wait for all of them before the next barrier may let a stage be refilled.
_WGMMA_GEOMETRY = r"""
        const int v = WP_TILE_THREAD_IDX * ({VT} / WP_TILE_BLOCK_DIM) + q;  // the thread of the {VT} the tile needs
        const int l = v % 32;
        const int wr = 64 * (v / 128) + 16 * ((v % 128) / 32);  // the first of the 16 rows of this thread's warp
"""

_WGMMA = r"""
    // acc += A x B over stage s of the shared buffers ba (A's {TM} x {TK} stage) and bb (B's {TN} x {TK}), both
    // K-major core matrices (LBO 128 bytes along K, SBO {SBO} bytes along M / N). Warpgroup v / 128 multiplies its
    // 64 rows by all {TN} columns, {KS} wgmma.mma_async m64n{TN}k16 ({T}, float32 sums) per stage; thread v's
    // {PER} sums are acc.data[4 i + c]: row wr + l / 4 + 8 (c / 2), column 8 i + 2 (l % 4) + c % 2. The shared matrix
    // descriptor: bits 0-13 start address / 16, 16-29 LBO / 16, 32-45 SBO / 16, swizzle bits 62-63 zero.
    auto desc = [](unsigned long long addr) -> unsigned long long {{
        return ((addr & 0x3FFFFull) >> 4) | ((unsigned long long)(128 >> 4) << 16) |
               ((unsigned long long)({SBO} >> 4) << 32);
    }};
#if defined(__CUDA_ARCH__)
    const int q = 0;
{GEOM}    float* d = acc.data;
    const unsigned long long sa = (unsigned long long)__cvta_generic_to_shared(ba.data.ptr) +
                                  (unsigned long long)s * {SA} + (unsigned long long)(64 * (v / 128) / 8) * {SBO};
    const unsigned long long sb = (unsigned long long)__cvta_generic_to_shared(bb.data.ptr) +
                                  (unsigned long long)s * {SB};
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < {KS}; ++kk) {{
        const unsigned long long da = desc(sa + 256 * kk);
        const unsigned long long db = desc(sb + 256 * kk);
        // scale-d p = 1: D = A B + D; scale-a, scale-b 1; no transposes (both K-major)
        asm volatile("{{\n.reg .pred p;\nsetp.ne.b32 p, %{NS}, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n{TN}k16.f32.{T}.{T} "
                     "{{{DREGS}}}, %{NA}, %{NB}, p, 1, 1, 0, 0;\n}}\n"
                     : {DOUTS}
                     : "l"(da), "l"(db), "r"(1));
    }}
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    // the sums are written by the asynchronous wgmma: no access to them may move above its wait
#pragma unroll
    for (int i = 0; i < {PER}; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
#else
    // The CPU runs the tile's threads one after another; each sum reads A and B through the descriptors' fields
    // (decoded from the same desc()) and the core-matrix layout, so the copies' placement and the descriptors are
    // checked against each other.
    const char* As = (const char*)ba.data.ptr + (size_t)s * {SA};
    const char* Bs = (const char*)bb.data.ptr + (size_t)s * {SB};
    auto at = [](const char* base, unsigned long long dsc, int r, int k) -> float {{
        const size_t start = (size_t)(dsc & 0x3FFFull) << 4;
        const size_t lbo = (size_t)((dsc >> 16) & 0x3FFFull) << 4;
        const size_t sbo = (size_t)((dsc >> 32) & 0x3FFFull) << 4;
        return (float)*(const {IT}*)(base + start + (size_t)(r / 8) * sbo + (size_t)(k / 8) * lbo +
                                      (size_t)(r % 8) * 16 + (size_t)(k % 8) * 2);
    }};
    for (int q = 0; q < {VT} / WP_TILE_BLOCK_DIM; ++q) {{
{GEOM}        float* d = acc.data + q * {PER};
        for (int kk = 0; kk < {KS}; ++kk) {{
            const unsigned long long da = desc((unsigned long long)(64 * (v / 128) / 8) * {SBO} + 256 * kk);
            const unsigned long long db = desc((unsigned long long)(256 * kk));
            for (int o = 0; o < {PER}; ++o) {{
                const int row = wr % 64 + l / 4 + 8 * ((o % 4) / 2);  // in the warpgroup's 64 rows
                const int col = 8 * (o / 4) + 2 * (l % 4) + o % 2;
                float x = 0.0f;
                for (int k = 0; k < 16; ++k)
                    x += at(As, da, row, k) * at(Bs, db, col, k);
                d[o] += x;
            }}
        }}
    }}
#endif
"""
_WAIT_PROXY = r"""
    // Wait until at most {N} cp.async groups of this thread are pending, make its copies visible to the async
    // proxy (wgmma reads shared memory through it), then to the block. CPU: only the block barrier.
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group {N};\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
    WP_TILE_SYNC();
"""


def wgmma_threads(spec: PipeSpec) -> int:
    """Threads of the wgmma kernel: one warpgroup (128) per 64 rows of the tile; the CUDA block size."""
    return 128 * (spec.tm // 64)


def _wgmma_fields(spec: PipeSpec) -> dict:
    it = ITEM_BYTES[spec.in_dtype]
    n_d = spec.tn // 2  # float32 sums per thread
    f = dict(VT=wgmma_threads(spec), TM=spec.tm, TN=spec.tn, TK=spec.tk, KS=spec.tk // 16, PER=n_d,
             SBO=(spec.tk * it // 16) * 128, SA=spec.tm * spec.tk * it, SB=spec.tn * spec.tk * it,
             T=MMA_TYPES.get(spec.in_dtype, "f16"), IT=_C_TYPES[spec.in_dtype],
             DREGS=", ".join(f"%{i}" for i in range(n_d)), NA=n_d, NB=n_d + 1, NS=n_d + 2,
             DOUTS=", ".join(f'"+f"(d[{i}])' for i in range(n_d)))
    f["GEOM"] = _WGMMA_GEOMETRY.format(**f)
    return f


def _wgmma_snippet(spec: PipeSpec) -> str:
    return _WGMMA.format(**_wgmma_fields(spec))


_OWN_STORE = r"""
    // dst[m0 + r, n0 + c] = {OT}(alpha * acc[r, c]{AXPBY_DOC}) for this thread's {PER} outputs, held in acc.data in
    // {ORDER}'s order (output o at tile row {ROW}, column {COL}); rows and columns past dst's extent are dropped.
    // Outputs o .. o + {V} - 1 (o a multiple of {V}) are {V} consecutive columns of one row, stored with one
    // {VB}-byte store where dst's rows allow it (unit column stride, base and row stride multiples of {VB} bytes).
    // src: C ("axpby"; dst's shape) or unread.
    const int nr = dst.shape[0];
    const int nc = dst.shape[1];
    char* base = (char*)dst.data;
    const size_t ld = (size_t)dst.strides[0];
    const size_t cs = (size_t)dst.strides[1];
    const bool vec = cs == sizeof({OT}) && (size_t)base % {VB} == 0 && (nr <= 1 || ld % {VB} == 0);
    const char* cbase = (const char*)src.data;
    const size_t cld = (size_t)src.strides[0];
    const size_t ccs = (size_t)src.strides[1];
    for (int q = 0; q < {VT} / WP_TILE_BLOCK_DIM; ++q) {{
{GEOM}        const float* d = acc.data + q * {PER};
#pragma unroll
        for (int o = 0; o < {PER}; o += {V}) {{
            const int gr = m0 + {ROW};
            const int gc = n0 + {COL};
            if (gr >= nr || gc >= nc)
                continue;
            alignas({VB}) {OT} y[{V}];
#pragma unroll
            for (int e = 0; e < {V}; ++e) {{
                float x = alpha * d[o + e];
{AXPBY}                y[e] = {OT}(x);
            }}
            char* g = base + (size_t)gr * ld + (size_t)gc * cs;
            if (vec && gc + {V} <= nc) {{
#if defined(__CUDA_ARCH__)
                *({VTYPE}*)g = *(const {VTYPE}*)y;
#else
                for (int b = 0; b < {VB}; ++b) g[b] = ((const char*)y)[b];
#endif
            }} else {{
                for (int e = 0; e < {V} && gc + e < nc; ++e) *({OT}*)(g + (size_t)e * cs) = y[e];
            }}
        }}
    }}
"""
# beta * C for output o + e (its column may lie past dst's extent: then the value is never stored, and C not read)
_OWN_AXPBY = ("                if (gc + e < nc) x += beta * (float)(*(const {OT}*)(cbase + (size_t)gr * cld + "
              "(size_t)(gc + e) * ccs));\n")


# The mma.sync and SIMT kernels' epilogue through shared memory (round 17; :func:`staged_store`). Nsight Compute on
# fp16 64 x 256^3 (128x128x64 s3 mma.sync, benchmarks/results/round17/ncu17.tgz) put 45% of the kernel's stall samples
# and 55% of its instructions in _OWN_STORE: 64 stores of 4 bytes per thread, each with its own bounds check and
# 64-bit address, half of every 32-byte sector wasted (38% excess sectors) and the stores' registers reused at once
# (long-scoreboard stalls). Here each thread writes its outputs, converted, into the stage buffer of A (free once
# the K loop's last wait has passed its barrier), and the block then stores the tile row by row in 16-byte chunks.
# H100, cold L2, staged against not (round 17, results/round17/r34p.txt): 64 x 256^3 with 128x128x32 s4 o2 18.8 us
# (the same tile unstaged 26.3 in round 16; graph replay 12.9 against 19.9), 4096^3 443.7 against 457.7, 1536^3 40.2
# against 42.4, 512x1024x1024 14.5 against 15.4, 1000^3 and 256x2048x2048 within noise; 1023x1025x1027 (rows not
# 16-byte aligned, element stores) 35.6 against 34.0 in that run, before the element path's consecutive threads.
_STAGED_STORE = r"""
    // dst[m0 + r, n0 + c] = {OT}(alpha * acc[r, c]) through shared memory: each thread writes its {PER} outputs
    // ({ORDER}'s order, as in _OWN_STORE: output o at tile row {ROW}, column {COL}), converted, into `stage` (the
    // free A stage buffer, viewed as {TM} rows of {RS} bytes), {V} columns per write; then the block stores the tile
    // in {CH}-element (16-byte) chunks, consecutive threads taking consecutive chunks of a row, where dst's rows allow
    // 16-byte stores (unit column stride, base and row stride multiples of 16 bytes), else element by element,
    // consecutive threads taking consecutive elements of a row; rows and columns past dst's extent are dropped and
    // a chunk that crosses the last column is stored element by element. Every thread of the block calls this (two
    // barriers).
    char* sm = (char*)stage.data.ptr;
    WP_TILE_SYNC();
    for (int q = 0; q < {VT} / WP_TILE_BLOCK_DIM; ++q) {{
{GEOM}        const float* d = acc.data + q * {PER};
#pragma unroll
        for (int o = 0; o < {PER}; o += {V}) {{
            alignas({VB}) {OT} y[{V}];
#pragma unroll
            for (int e = 0; e < {V}; ++e) y[e] = {OT}(alpha * d[o + e]);
            char* p = sm + ({ROW}) * {RS} + ({COL}) * {IT};
#if defined(__CUDA_ARCH__)
            *({VTYPE}*)p = *(const {VTYPE}*)y;
#else
            for (int b = 0; b < {VB}; ++b) p[b] = ((const char*)y)[b];
#endif
        }}
    }}
    WP_TILE_SYNC();
    const int nr = dst.shape[0];
    const int nc = dst.shape[1];
    char* base = (char*)dst.data;
    const size_t ld = (size_t)dst.strides[0];
    const size_t cs = (size_t)dst.strides[1];
    const bool vec = cs == {IT} && (size_t)base % 16 == 0 && (nr <= 1 || ld % 16 == 0);
    if (!vec) {{
        for (int x = WP_TILE_THREAD_IDX; x < {TM} * {TN}; x += WP_TILE_BLOCK_DIM) {{
            const int r = x / {TN};
            const int c = x % {TN};
            if (m0 + r < nr && n0 + c < nc)
                *({OT}*)(base + (size_t)(m0 + r) * ld + (size_t)(n0 + c) * cs) =
                    *(const {OT}*)(sm + r * {RS} + c * {IT});
        }}
        return;
    }}
    for (int x = WP_TILE_THREAD_IDX; x < {TM} * {CPR}; x += WP_TILE_BLOCK_DIM) {{
        const int r = x / {CPR};
        const int c = (x % {CPR}) * {CH};
        const int gr = m0 + r;
        const int gc = n0 + c;
        if (gr >= nr || gc >= nc)
            continue;
        const char* t = sm + r * {RS} + c * {IT};
        char* g = base + (size_t)gr * ld + (size_t)gc * cs;
        if (gc + {CH} <= nc) {{
#if defined(__CUDA_ARCH__)
            *(::uint4*)g = *(const ::uint4*)t;
#else
            for (int b = 0; b < 16; ++b) g[b] = t[b];
#endif
        }} else {{
            for (int e = 0; e < {CH} && gc + e < nc; ++e) *({OT}*)(g + (size_t)e * cs) = *(const {OT}*)(t + e * {IT});
        }}
    }}
"""
STAGED_STORE = True  # the switch for staged_store (a probe may turn it off)


def staged_store(spec: PipeSpec) -> bool:
    """Whether the kernel's epilogue is :data:`_STAGED_STORE`: a plain (not persistent, not stream-K) mma.sync or
    SIMT kernel with the "scale" epilogue, whose A stage buffer holds the output tile as ``tm`` rows of ``tn``
    elements plus 16 bytes, and ``tn`` whole 16-byte chunks. Else :data:`_OWN_STORE`."""
    if not STAGED_STORE or not (spec.mma > 0 or spec.simt) or spec.wgmma or spec.persistent or spec.stream_k:
        return False
    it = ITEM_BYTES[spec.out_dtype]
    if spec.epilogue != "scale" or spec.bias or spec.activation or (spec.tn * it) % 16:
        return False
    a_bytes = spec.stages * spec.a_tile()[0] * spec.stage_cols()[0] * ITEM_BYTES[spec.in_dtype]
    return spec.tm * (spec.tn * it + 16) <= a_bytes


def _own_order(spec: PipeSpec) -> tuple[dict, dict]:
    """The product snippet's fields and where its output o of a thread lies (``ROW``, ``COL``, ``V`` consecutive
    columns, ``PER`` per thread): for :data:`_OWN_STORE` and :data:`_STAGED_STORE`."""
    if spec.simt:
        f = _simt_fields(spec)
        order = dict(ORDER="_SIMT_MMA", PER=SIMT_TILE * SIMT_TILE, V=4, ROW="row0 + (o / 8) % 4 + 16 * (o / 32)",
                     COL="col0 + o % 4 + 32 * ((o % 8) / 4)")
    elif spec.wgmma:
        f = _wgmma_fields(spec)
        order = dict(ORDER="_WGMMA", PER=f["PER"], V=2, ROW="wr + l / 4 + 8 * ((o % 4) / 2)",
                     COL="8 * (o / 4) + 2 * (l % 4) + o % 2")
    else:
        f = _mma_fields(spec)
        order = dict(ORDER="_MMA_SYNC", PER=f["PER"], V=2,
                     ROW=f"wr + 16 * (o / {4 * f['NJ']}) + l / 4 + 8 * ((o % 4) / 2)",
                     COL=f"wc + 8 * ((o / 4) % {f['NJ']}) + 2 * (l % 4) + o % 2")
    return f, order


def _staged_store_snippet(spec: PipeSpec) -> str:
    f, order = _own_order(spec)
    it = ITEM_BYTES[spec.out_dtype]
    vb = order["V"] * it
    return _STAGED_STORE.format(OT=_C_TYPES[spec.out_dtype], VT=f["VT"], GEOM=f["GEOM"], TM=spec.tm,
                                TN=spec.tn, RS=spec.tn * it + 16, IT=it, VB=vb, VTYPE=_VEC_TYPES[vb], CH=16 // it,
                                CPR=spec.tn * it // 16, **order)


def _own_store_snippet(spec: PipeSpec) -> str:
    """:data:`_OWN_STORE` for the kernels whose product is a snippet (SIMT, mma.sync) and whose accumulator is the
    register tile's storage in that snippet's order."""
    ot = _C_TYPES[spec.out_dtype]
    axpby = spec.epilogue == "axpby"
    f, order = _own_order(spec)
    vb = order["V"] * ITEM_BYTES[spec.out_dtype]
    return _OWN_STORE.format(OT=ot, AXPBY=_OWN_AXPBY.format(OT=ot) if axpby else "", VT=f["VT"], GEOM=f["GEOM"],
                             AXPBY_DOC=" + beta * src[m0 + r, n0 + c]" if axpby else "", VB=vb,
                             VTYPE=_VEC_TYPES[vb], **order)


def simt_threads(spec: PipeSpec) -> int:
    """Threads of the SIMT kernel's tile (:data:`_SIMT_MMA`): one per 8x8 outputs; the CUDA block size."""
    return spec.tm * spec.tn // (SIMT_TILE * SIMT_TILE)


def _simt_fields(spec: PipeSpec) -> dict:
    f = dict(VT=simt_threads(spec), WN=spec.tn // 64, TK=spec.tk, ALD=spec.tm + spec.pad_ab,
             BLD=spec.tn + spec.pad_ab)
    f.update(SA=spec.tk * f["ALD"], SB=spec.tk * f["BLD"], GEOM=_SIMT_GEOMETRY.format(**f))
    return f


def _simt_mma_snippet(spec: PipeSpec) -> str:
    return _SIMT_MMA.format(**_simt_fields(spec))


def _copy_t_snippet(spec: PipeSpec, rows: int, cols: int, dld: int) -> str:
    """:data:`_COPY_T` for a ``rows x cols`` region of a float32 operand (the SIMT kernel's A stored (M, K), B
    stored (N, K)) into a K-major stage of row stride ``dld``."""
    bd = spec.block_dim
    nw, bpr = bd // 32, cols // 8  # warps; blocks of 4 x 8 elements per 4 rows
    fast = FAST_COPY and bd % 32 == 0 and rows % 4 == 0 and cols % 8 == 0 and dld % 8 == 4
    if fast and nw % bpr == 0 and rows % (4 * nw // bpr) == 0:  # warps over the columns, then down the rows
        f = dict(RW=f"4 * (w / {bpr})", CW=f"8 * (w % {bpr})", Q1=rows // (4 * nw // bpr), RSTEP=4 * nw // bpr,
                 Q2=1, CSTEP=0)
    elif fast and bpr % nw == 0:  # warps across the columns, every warp down all rows
        f = dict(RW="0", CW="8 * w", Q1=rows // 4, RSTEP=4, Q2=bpr // nw, CSTEP=8 * nw)
    else:
        fast = False
        f = dict(RW="0", CW="0", Q1=0, RSTEP=0, Q2=0, CSTEP=0)
    return _COPY_T.format(ROWS=rows, COLS=cols, DLD=dld, FAST="true" if fast else "false", **f)


# Whether default_spec picks the snippet products (mma.sync for 16-bit and tf32, SIMT for exact fp32) for large
# problems on CUDA (round 12's measurements); the probes switch it off to time tile_matmul's kernels.
MMA_DEFAULT = True
# Whether the copy snippet takes its interior fast path (see _COPY) where the tile allows; the probes switch it off.
FAST_COPY = True
# A diagnostic for the probes, never for results: the SIMT / mma.sync K loop skips its refills (only the prologue's
# S - 1 K tiles are copied; later steps multiply stale stages), which leaves the product alone: its copy-free ceiling.
DIAG_NO_REFILL = False
# Whether shared accumulators may be zero-filled by _ZERO_ACC (after tile_empty) instead of tile_zeros
# (native_acc); the probes switch it off.
ZERO_ACC_SNIPPET = True
# Tiles of fewer rows keep tile_zeros and Warp's epilogue: the split-K plan's 16x128 tiles ran slower with
# either snippet, for reasons not found (the K loop's source is identical, the shared memory too):
# 16x8192x8192 60.4-60.7 us without them against 72.2-73.3 with one or both (H100, graph replay,
# benchmarks/results/round7/r9p.txt, r10p.txt).
SNIPPET_MIN_TM = 32


def _acc_rows_16(spec: PipeSpec) -> bool:
    """A shared accumulator (``pad_c > 0``) of at least SNIPPET_MIN_TM rows of whole 16-byte words."""
    return (spec.pad_c > 0 and spec.tm >= SNIPPET_MIN_TM
            and (spec.tn + spec.pad_c) * ITEM_BYTES[spec.acc_dtype] % 16 == 0)


def native_acc(spec: PipeSpec) -> bool:
    """Whether the kernel zero-fills its shared accumulator with :data:`_ZERO_ACC` (tile_empty, then 16-byte
    stores) rather than ``tile_zeros``. With the store snippet, against neither (H100, graph replay,
    benchmarks/results/round7/r9p.txt, r10p.txt): 4096^3 fp16 837-844 us against 851-853, 64 x 256^3
    23.6-24.5 against 27.1-29.6, 4096 x 32^3 14.2 against 20.6, 4095^3 900 against 922; the store snippet
    alone: 858, 25.6, 15.4, 920."""
    return ZERO_ACC_SNIPPET and _compat.HAS_TILE_EMPTY and _acc_rows_16(spec)


def native_store(spec: PipeSpec) -> bool:
    """Whether the kernel's epilogue is the :data:`_STORE` snippet: a shared accumulator (``_acc_rows_16``),
    the "scale" epilogue, no bias, no activation, a store of at most 16 bytes per thread (16-bit inputs into a
    float64 output would need 32: Warp's tile epilogue, :func:`_epilogue`, as for the others)."""
    e = 16 // ITEM_BYTES[spec.acc_dtype]
    return (_acc_rows_16(spec) and spec.epilogue == "scale" and not spec.bias and spec.activation is None
            and spec.tn % e == 0 and e * ITEM_BYTES[spec.out_dtype] in _VEC_TYPES)


def _store_snippet(spec: PipeSpec) -> str:
    ai, oi = ITEM_BYTES[spec.acc_dtype], ITEM_BYTES[spec.out_dtype]
    e = 16 // ai
    return _STORE.format(OT=_C_TYPES[spec.out_dtype], AT=_C_TYPES[spec.acc_dtype], TM=spec.tm, TN=spec.tn,
                         TNC=spec.tn + spec.pad_c, E=e, VW=e * oi, VT=_VEC_TYPES[e * oi], OI=oi,
                         TOTAL=spec.tm * (spec.tn // e), CPR=spec.tn // e)


def _copy_snippet(spec: PipeSpec, rows: int, cols: int, dld: int, checked: bool = False, core: bool = False) -> str:
    it = ITEM_BYTES[spec.in_dtype]  # checked: tile_gemm_func's run-time alignment check (_copy_check)
    ch = spec.chunk
    e = ch // it
    cpr, total, bd = cols // e, rows * (cols // e), spec.block_dim
    # the interior fast path: asynchronous whole chunks, each thread's the same count, rows of a whole block
    fast = (FAST_COPY and not checked and ch >= 4 and bd > 1 and total % bd == 0 and bd % cpr == 0)
    f = dict(DLD=dld, ITEM=it, TOTAL=total, CPR=cpr, E=e, CH=ch, CG="cg" if ch == 16 else "ca")
    per = bd // cpr if bd > 1 else 1
    if core:  # the wgmma kernel's core-matrix stage (_core_offset): a chunk's place, and q's rows PER apart
        f["DST"] = _core_offset("r", "cc", cols, it)
        qoff = f"{per // 8} * {(cols * it // 16) * 128}"
        fast = fast and per % 8 == 0
    else:
        f["DST"] = f"((size_t)r * {dld} + cc) * {it}"
        qoff = f"{per} * {dld} * {it}"
    path = _COPY_FAST.format(PER=per, NQ=total // bd, ROWS=rows, COLS=cols, QOFF=qoff, **f) if fast else ""
    return _COPY.format(FASTPATH=path, **f, **_copy_check(it, ch, e, rows, cols, dld, checked))


def _core_offset(r: str, c: str, cols: int, item: int) -> str:
    """Byte offset of element (r, c) (c a multiple of 16 bytes' elements for a chunk) in a stage of ``cols``
    elements per row stored as wgmma's K-major core matrices without swizzle (:data:`_WGMMA`): 8 rows x 16 bytes
    contiguous (128 bytes), the K-adjacent core matrix 128 bytes on (LBO), the next 8 rows cols * item / 16 core
    matrices on (SBO)."""
    e = 16 // item
    return (f"((size_t)(({c}) / {e}) * 128 + (size_t)(({r}) / 8) * {(cols * item // 16) * 128} + "
            f"(size_t)(({r}) % 8) * 16 + (size_t)(({c}) % {e}) * {item})")


def _native(snippet: str, name: str, stub):
    """``wp.func_native(snippet)`` on ``stub`` under a name unique to its kernel: Warp keys native
    functions by qualified name within the Python module, so two specs' snippets must not share one."""
    stub.__name__ = stub.__qualname__ = name
    return wp.func_native(snippet)(stub)


def _check(spec: PipeSpec) -> None:
    if spec.layout_a not in ("N", "T") or spec.layout_b not in ("N", "T"):
        raise ValueError(f"bad layouts in {spec}")
    if spec.epilogue not in ("scale", "axpby"):
        raise ValueError(f"bad epilogue in {spec}")
    if spec.in_dtype not in WP_DTYPES or spec.out_dtype not in WP_DTYPES:
        raise ValueError(f"unsupported dtype in {spec}")
    if spec.tf32 and not (_compat.HAS_TF32 and spec.in_dtype == "float32"):
        raise ValueError(f"tf32 kernels need float32 inputs and a Warp with precision='tf32': {spec}")
    if not 2 <= spec.stages <= MAX_STAGES:
        raise ValueError(f"stages must be 2-{MAX_STAGES}: {spec}")
    it = ITEM_BYTES[spec.in_dtype]
    if spec.chunk not in CHUNKS or spec.chunk < it or (spec.chunk == 2 and it != 2):
        raise ValueError(f"copy chunk {spec.chunk} bytes does not fit {spec.in_dtype}: {spec}")
    e = spec.chunk // it
    for rows, cols in (spec.a_tile(), spec.b_tile()):
        if cols % e:
            raise ValueError(f"tile columns {cols} are not a whole number of {spec.chunk}-byte chunks: {spec}")
    if spec.chunk >= 4 and (spec.pad_ab * it) % spec.chunk:
        raise ValueError(f"pad_ab {spec.pad_ab} breaks the {spec.chunk}-byte alignment of shared rows: {spec}")
    if (spec.pad_ab or spec.pad_c) and not _compat.HAS_STRIDED_MATMUL_OPERANDS:
        raise ValueError(f"{spec}: padded shared tiles need a Warp whose tile_matmul takes strided operands")
    if spec.out_dtype != spec.acc_dtype and not _compat.HAS_TILE_ASTYPE:
        raise ValueError(f"{spec} needs tile_astype")
    if spec.persistent and not native_acc(spec) and not (spec.simt or spec.mma):
        raise ValueError(f"{spec}: a persistent kernel re-zeroes its accumulator with the zero-fill snippet, which "
                         "needs a shared accumulator of at least SNIPPET_MIN_TM rows (pad_c > 0) and tile_empty, or "
                         "a register accumulator (simt, mma)")
    if not 0 <= spec.persistent <= 8:
        raise ValueError(f"persistent must be 0-8 blocks per SM: {spec}")
    if not 0 <= spec.stream_k <= 8 or (spec.stream_k and (spec.persistent or not (spec.simt or spec.mma))):
        raise ValueError(f"{spec}: stream-K (0-8 blocks per SM) is for the simt and mma kernels (register "
                         "accumulators), without persistent blocks")
    if (spec.simt + bool(spec.mma) + spec.wgmma) > 1:
        raise ValueError(f"{spec}: simt, mma and wgmma are different products: give one")
    if spec.wgmma:
        _check_wgmma(spec)
    if spec.simt:
        _check_simt(spec)
    if spec.mma:
        _check_mma(spec)
    if spec.activation is not None:
        from .epilogue import check_activation

        check_activation(spec.activation)


def _check_simt(spec: PipeSpec) -> None:
    if spec.in_dtype != "float32" or spec.tf32:
        raise ValueError(f"{spec}: the SIMT kernel (simt) is for exact float32 inputs only")
    if spec.tm % (4 * SIMT_TILE) or spec.tn % 64:
        raise ValueError(f"{spec}: the SIMT kernel needs tm a multiple of {4 * SIMT_TILE} and tn of 64 (warps of 4 x 8 "
                         f"lanes, {SIMT_TILE} x {SIMT_TILE} outputs per thread)")
    if spec.block_dim not in (1, simt_threads(spec)):
        raise ValueError(f"{spec}: the SIMT kernel's {spec.tm}x{spec.tn} tile takes block_dim {simt_threads(spec)} "
                         f"(one thread per {SIMT_TILE}x{SIMT_TILE} outputs; 1 on the CPU), got {spec.block_dim}")
    if spec.pad_c or spec.bias or spec.activation is not None:
        raise ValueError(f"{spec}: the SIMT kernel keeps its accumulator in registers and stores it itself: no pad_c, "
                         "bias or activation")
    if spec.chunk != 16 or (spec.pad_ab * 4) % 16:
        raise ValueError(f"{spec}: the SIMT kernel reads B in 16-byte words: chunk 16 and pad_ab a multiple of 4")


def _check_mma(spec: PipeSpec) -> None:
    if spec.in_dtype not in MMA_TYPES and not spec.tf32:
        raise ValueError(f"{spec}: the mma.sync kernel (mma) is for float16, bfloat16 and tf32 inputs only")
    if not 0 < spec.mma <= 16 or mma_warps(spec) is None:
        raise ValueError(f"{spec}: the mma.sync kernel splits the {spec.tm}x{spec.tn} tile among its {spec.mma} warps "
                         "in warp tiles of whole 16 x 16 outputs (1-16 warps); this split has none")
    if spec.tk % 16:
        raise ValueError(f"{spec}: the mma.sync kernel takes K tiles of whole 16-deep MMA steps (tk a multiple of 16)")
    if spec.block_dim not in (1, 32 * spec.mma):
        raise ValueError(f"{spec}: the mma.sync kernel's {spec.mma} warps take block_dim {32 * spec.mma} (1 on the "
                         f"CPU), got {spec.block_dim}")
    if spec.pad_c or spec.bias or spec.activation is not None:
        raise ValueError(f"{spec}: the mma.sync kernel keeps its accumulator in registers and stores it itself: no "
                         "pad_c, bias or activation")
    if spec.chunk != 16 or (spec.pad_ab * ITEM_BYTES[spec.in_dtype]) % 16:
        raise ValueError(f"{spec}: the mma.sync kernel's ldmatrix reads 16-byte rows: chunk 16 and pad_ab a whole "
                         "number of 16 bytes")


def _check_wgmma(spec: PipeSpec) -> None:
    if spec.in_dtype not in MMA_TYPES or spec.tf32:
        raise ValueError(f"{spec}: the wgmma kernel is for float16 and bfloat16 inputs only")
    if (spec.layout_a, spec.layout_b) != ("N", "T"):
        raise ValueError(f"{spec}: the wgmma kernel reads K-major stages only: A stored (M, K) and B stored (N, K) "
                         "(layout NT)")
    if spec.tm % 64 or not 16 <= spec.tn <= 256 or spec.tn % 16 or spec.tk % 16:
        raise ValueError(f"{spec}: the wgmma kernel takes tm a multiple of 64 (one warpgroup per 64 rows), tn a "
                         "multiple of 16 up to 256 and tk a multiple of 16")
    if spec.block_dim not in (1, wgmma_threads(spec)):
        raise ValueError(f"{spec}: the wgmma kernel's {spec.tm // 64} warpgroups take block_dim {wgmma_threads(spec)} "
                         f"(1 on the CPU), got {spec.block_dim}")
    if spec.pad_ab or spec.pad_c or spec.persistent or spec.bias or spec.activation is not None or spec.chunk != 16:
        raise ValueError(f"{spec}: the wgmma kernel's stages are unpadded core matrices of 16-byte copies and its "
                         "accumulator is in registers: pad_ab 0, pad_c 0, chunk 16, no persistent blocks, bias or "
                         "activation")


# --- the kernel factory ---------------------------------------------------------------------------------
_factory_lock = threading.Lock()


def get_kernel(spec: PipeSpec):
    """The kernel for ``spec``, built once per process (thread-safe)."""
    with _factory_lock:
        return _build(spec, native_acc(spec))


@functools.cache
def _build(spec: PipeSpec, zero_acc_snippet: bool):
    _check(spec)
    TM, TN, TK, S = spec.tm, spec.tn, spec.tk, spec.stages
    IN = WP_DTYPES[spec.in_dtype]
    OUT = WP_DTYPES[spec.out_dtype]
    ACC = WP_DTYPES[spec.acc_dtype]
    TRANS_A = spec.layout_a == "T"
    TRANS_B = spec.layout_b == "T"
    TF32 = spec.tf32
    # One stage of A / B as copied (rows x cols) and the shared buffers' shapes (closure scalars: Warp
    # needs compile-time tile shapes and takes no tuples from the closure).
    AR, AC = spec.a_tile()
    BR, BC = spec.b_tile()
    ACP, BCP = spec.stage_cols()
    SAR, SBR = S * AR, S * BR
    TNC = TN + spec.pad_c
    PAD_C = spec.pad_c > 0
    EMPTY = _compat.HAS_TILE_EMPTY
    key = spec.key

    # Stages that hold the transpose of the stored tile (the SIMT kernel's) copy it with _COPY_T.
    XA, XB = spec.transposing_copies()
    a_snip = _copy_t_snippet(spec, AC, AR, ACP) if XA else _copy_snippet(spec, AR, AC, ACP, core=spec.wgmma)
    b_snip = _copy_t_snippet(spec, BC, BR, BCP) if XB else _copy_snippet(spec, BR, BC, BCP, core=spec.wgmma)
    cp_a = _native(a_snip, key + "_cp_a", _stub_copy(IN, SAR, ACP))
    cp_b = _native(b_snip, key + "_cp_b", _stub_copy(IN, SBR, BCP))
    commit = _native(_COMMIT, key + "_commit", _stub_int())
    wait = _native(_WAIT.format(N=S - 1), key + "_wait", _stub_int())
    wait0 = _native(_WAIT.format(N=0), key + "_wait0", _stub_int())

    copy_stage = _stage_copier(spec, cp_a, cp_b)
    # SIMT and mma.sync kernels: the K step's product and the epilogue are snippets over a register accumulator.
    OWN = spec.simt or spec.mma > 0 or spec.wgmma
    REFILL = not DIAG_NO_REFILL
    if OWN:
        if spec.wgmma:
            product = _wgmma_snippet(spec)
        else:
            product = _simt_mma_snippet(spec) if spec.simt else _mma_sync_snippet(spec)
        mma = _native(product, key + "_mma", _stub_mma(IN, SAR, ACP, SBR, BCP, ACC, TM, TN))
        own_store = _native(_own_store_snippet(spec), key + "_sstore", _stub_own_store(OUT, ACC, TM, TN))
        wait_prev = _native((_WAIT_PROXY if spec.wgmma else _WAIT).format(N=S - 2), key + "_waitp", _stub_int())
    STAGED = OWN and staged_store(spec)
    if STAGED:
        tstore = _native(_staged_store_snippet(spec), key + "_tstore", _stub_staged_store(IN, SAR, ACP, OUT, ACC, TM,
                                                                                         TN))
    ZERO_ACC, STORE = zero_acc_snippet, native_store(spec)
    if ZERO_ACC:
        zero_acc = _native(_ZERO_ACC.format(N16=TM * TNC * ITEM_BYTES[spec.acc_dtype] // 16), key + "_zero_acc",
                           _stub_acc(ACC, TM, TNC))
    if STORE:
        store = _native(_store_snippet(spec), key + "_store", _stub_store(OUT, ACC, TM, TNC))
    elif not OWN:
        epilogue = _epilogue(spec)

    def gemm(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        tiles_m: int,
        tiles_n: int,
        group_m: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
        bias: wp.array2d(dtype=OUT),
    ):
        bi, t = wp.tid()
        i, j = grouped_tile(t, tiles_m, tiles_n, group_m)
        m0 = i * TM
        n0 = j * TN
        Ab = A[wp.min(bi, a_nb - 1)]
        Bb = B[wp.min(bi, b_nb - 1)]
        # The shared tiles are made here, in the kernel body, and only passed to the helpers: Warp then
        # allocates them once per block (a tile made inside a wp.func lives for one call).
        # Every element a tile_matmul reads is written by a copy first (zeros past the edges included; the
        # padding columns are never read): uninitialized where Warp allows it (HAS_TILE_EMPTY).
        if wp.static(EMPTY):
            ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
            bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        else:
            ba = wp.tile_zeros(shape=(SAR, ACP), dtype=IN, storage="shared")
            bb = wp.tile_zeros(shape=(SBR, BCP), dtype=IN, storage="shared")
        if wp.static(PAD_C):
            if wp.static(ZERO_ACC):
                acc_s = wp.tile_empty(shape=(TM, TNC), dtype=ACC, storage="shared")
                zero_acc(acc_s)
            else:
                acc_s = wp.tile_zeros(shape=(TM, TNC), dtype=ACC, storage="shared")
            acc = wp.tile_view(acc_s, offset=(0, 0), shape=(TM, TN))
        else:
            # pad_c == 0: Warp's default (register) storage, as in the tiled family's dense kernels; the
            # exact-fp32 and fp64 kernels then fit two or three blocks per SM.
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        # Prologue: K tiles 0 .. S-2 into stages 0 .. S-2, one commit group each (empty past k_tiles, so
        # the group count -- and the wait below -- stays the same).
        for p in range(S - 1):
            if p < k_tiles:
                copy_stage(ba, bb, Ab, Bb, p, p, m0, n0)
            commit(0)
        if wp.static(OWN):
            # One barrier per K step (the SIMT and mma.sync products have none of their own, unlike tile_matmul):
            # wait for K tile k's group (S - 2 younger ones may stay in flight) with a block sync, after which every
            # thread is done with the stage K tile k-1 used, then refill that stage with K tile k + S - 1.
            for k in range(k_tiles):
                wait_prev(0)
                kn = k + S - 1
                if wp.static(REFILL):
                    if kn < k_tiles:
                        copy_stage(ba, bb, Ab, Bb, kn % S, kn, m0, n0)
                commit(0)
                mma(ba, bb, acc, k % S)
        else:
            # k_tiles is a runtime value on purpose: Warp unrolls short constant-trip loops and then
            # allocates every iteration's tiles in shared memory.
            for k in range(k_tiles):
                # Refill the stage that K tile k-1 used (tile_matmul ended with a block sync) with K tile
                # k + S - 1, then wait for K tile k's group: S - 1 younger groups may stay in flight.
                kn = k + S - 1
                if kn < k_tiles:
                    copy_stage(ba, bb, Ab, Bb, kn % S, kn, m0, n0)
                commit(0)
                wait(0)
                s = k % S
                if wp.static(TRANS_A):
                    a = wp.tile_transpose(wp.tile_view(ba, offset=(s * AR, 0), shape=(AR, AC)))
                else:
                    a = wp.tile_view(ba, offset=(s * AR, 0), shape=(AR, AC))
                if wp.static(TRANS_B):
                    b = wp.tile_transpose(wp.tile_view(bb, offset=(s * BR, 0), shape=(BR, BC)))
                else:
                    b = wp.tile_view(bb, offset=(s * BR, 0), shape=(BR, BC))
                if wp.static(TF32):
                    wp.tile_matmul(a, b, acc, precision="tf32")
                else:
                    wp.tile_matmul(a, b, acc)
        wait0(0)  # no copy outlives the kernel (all groups past k_tiles are empty; cheap)
        if wp.static(STAGED):
            tstore(D[bi], acc, ba, alpha, m0, n0)  # through the A stages (every copy done: wait0's barrier)
        elif wp.static(OWN):
            own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, m0, n0)  # acc: this thread's registers
        elif wp.static(STORE):
            store(D[bi], acc_s, alpha, m0, n0)  # tile_matmul ended with a block sync: acc is complete
        else:
            epilogue(D, C, bias, acc, alpha, beta, bi, c_nb, m0, n0)

    bounds = (spec.block_dim, spec.min_blocks) if spec.min_blocks else None
    if spec.stream_k:
        sk = _stream_k_kernel(spec, copy_stage, mma, own_store, commit, wait_prev, wait0)
        return _compat.make_kernel(sk, key, bounds)
    if not spec.persistent:
        return _compat.make_kernel(gemm, key, bounds)
    if OWN:  # simt/mma (a wgmma spec refuses persistent blocks): the register accumulator re-zeroed per tile
        zero = _native(_SK_ZERO, key + "_skzero", _stub_sk_zero(ACC, TM, TN))
    else:
        sync = _native(_SYNC, key + "_sync", _stub_int())

    # Persistent: a grid of `grid` blocks; block g takes the output tiles g, g + grid, g + 2 grid, ... (over
    # batch entries and grouped tiles, in that order), their K tiles as one sequence of `iters` steps. The
    # copies run S - 1 steps ahead of the product across tile boundaries, so the next tile's first stages load
    # while this tile's last steps multiply and its epilogue stores (a kernel of one tile per block waits for
    # them after each launch of a block: its prologue). The accumulator is stored and zeroed in place: tile_matmul's
    # shared one by the store/epilogue and the zero-fill snippet; the simt/mma.sync kernels' registers by their own
    # store and _SK_ZERO (round 15; the loop stream-K shares, without its split tiles).
    def gemm_persistent(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        tiles_m: int,
        tiles_n: int,
        group_m: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
        bias: wp.array2d(dtype=OUT),
        grid: int,
    ):
        _z, g0 = wp.tid()
        mine = (D.shape[0] * tiles_m * tiles_n - g0 + grid - 1) // grid
        iters = mine * k_tiles
        ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
        bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        if wp.static(OWN):
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        else:
            acc_s = wp.tile_empty(shape=(TM, TNC), dtype=ACC, storage="shared")
            zero_acc(acc_s)
            acc = wp.tile_view(acc_s, offset=(0, 0), shape=(TM, TN))
        for p in range(S - 1):
            if p < iters:
                bp, ip, jp = persistent_tile(g0 + (p // k_tiles) * grid, tiles_m, tiles_n, group_m)
                copy_stage(ba, bb, A[wp.min(bp, a_nb - 1)], B[wp.min(bp, b_nb - 1)], p, p % k_tiles, ip * TM,
                           jp * TN)
            commit(0)
        for it in range(iters):
            if wp.static(OWN):
                wait_prev(0)  # K step it's stage is in, and every thread is done with the stage step it - 1 used
            kn = it + S - 1
            if kn < iters:
                bn, i_n, j_n = persistent_tile(g0 + (kn // k_tiles) * grid, tiles_m, tiles_n, group_m)
                copy_stage(ba, bb, A[wp.min(bn, a_nb - 1)], B[wp.min(bn, b_nb - 1)], kn % S, kn % k_tiles,
                           i_n * TM, j_n * TN)
            commit(0)
            s = it % S
            if wp.static(OWN):
                mma(ba, bb, acc, s)
            else:
                wait(0)
                if wp.static(TRANS_A):
                    a = wp.tile_transpose(wp.tile_view(ba, offset=(s * AR, 0), shape=(AR, AC)))
                else:
                    a = wp.tile_view(ba, offset=(s * AR, 0), shape=(AR, AC))
                if wp.static(TRANS_B):
                    b = wp.tile_transpose(wp.tile_view(bb, offset=(s * BR, 0), shape=(BR, BC)))
                else:
                    b = wp.tile_view(bb, offset=(s * BR, 0), shape=(BR, BC))
                if wp.static(TF32):
                    wp.tile_matmul(a, b, acc, precision="tf32")
                else:
                    wp.tile_matmul(a, b, acc)
            if it % k_tiles == k_tiles - 1:  # the tile's last K step: store it (tile_matmul ended with a block sync)
                bi, i, j = persistent_tile(g0 + (it // k_tiles) * grid, tiles_m, tiles_n, group_m)
                if wp.static(OWN):
                    own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, i * TM, j * TN)  # this thread's
                    zero(acc)
                else:
                    if wp.static(STORE):
                        store(D[bi], acc_s, alpha, i * TM, j * TN)
                    else:
                        epilogue(D, C, bias, acc, alpha, beta, bi, c_nb, i * TM, j * TN)
                    sync(0)  # every thread has read the accumulator
                    zero_acc(acc_s)
        wait0(0)

    return _compat.make_kernel(gemm_persistent, key, bounds)


def _stream_k_kernel(spec: PipeSpec, copy_stage, mma, own_store, commit, wait_prev, wait0):
    """The stream-K kernel of a simt/mma spec (``spec.stream_k``; not a default, round 14; not yet run on a GPU).

    The K steps of every output tile, tile after tile (batch entries, then grouped tiles: :func:`persistent_tile`),
    form one sequence of ``total`` iterations, which a grid of ``grid`` blocks shares evenly: block g takes
    iterations ``[g * total // grid, (g + 1) * total // grid)`` (at least one each: the launch keeps grid <= total),
    with the copies ``stages - 1`` iterations ahead across tile boundaries. Where a block's run of a tile ends:
    - the run is the whole tile: it stores the tile (alpha, beta * C, the cast: the kernel's own store);
    - the run ends before the tile does (the block's last run): the partial sums go to the block's contributor slot
      ``2 g`` with its flag;
    - the run ends the tile but began after its first K step (the block's first run): the block is the tile's
      finisher; its partial sums go to its own slot ``2 g + 1`` and, after its last iteration, it waits for the flags
      of the lower blocks that hold the tile's earlier K steps, adds their slots in block order, then its own, and
      stores the tile. It waits only on lower blocks, which start no later and end their runs at about the same
      time; on the CPU (blocks one after another in index order) their flags are always set.
    The sum of a tile split across blocks is the same in every launch of the same grid (a fixed order)."""
    TM, TN, S = spec.tm, spec.tn, spec.stages
    IN, OUT, ACC = WP_DTYPES[spec.in_dtype], WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    AR, AC = spec.a_tile()
    BR, BC = spec.b_tile()
    ACP, BCP = spec.stage_cols()
    SAR, SBR = S * AR, S * BR
    key = spec.key
    zero = _native(_SK_ZERO, key + "_skzero", _stub_sk_zero(ACC, TM, TN))
    spill = _native(_SK_SPILL, key + "_skspill", _stub_sk_slot(ACC, TM, TN))
    add = _native(_SK_ADD, key + "_skadd", _stub_sk_slot(ACC, TM, TN))

    def gemm_stream_k(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        tiles_m: int,
        tiles_n: int,
        group_m: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
        bias: wp.array2d(dtype=OUT),
        grid: int,
        ws: wp.array(dtype=wp.float32),
        flags: wp.array(dtype=wp.int32),
    ):
        _z, g = wp.tid()
        total = D.shape[0] * tiles_m * tiles_n * k_tiles
        s0 = (g * total) // grid
        iters = ((g + 1) * total) // grid - s0
        ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
        bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        for p in range(S - 1):
            if p < iters:
                tp = (s0 + p) // k_tiles
                bp, ip, jp = persistent_tile(tp, tiles_m, tiles_n, group_m)
                copy_stage(ba, bb, A[wp.min(bp, a_nb - 1)], B[wp.min(bp, b_nb - 1)], p, s0 + p - tp * k_tiles,
                           ip * TM, jp * TN)
            commit(0)
        finisher = int(0)
        for q in range(iters):
            wait_prev(0)  # K step q's stage is in, and every thread is done with the stage step q - 1 used
            kn = q + S - 1
            if kn < iters:
                tn_ = (s0 + kn) // k_tiles
                bn, i_n, j_n = persistent_tile(tn_, tiles_m, tiles_n, group_m)
                copy_stage(ba, bb, A[wp.min(bn, a_nb - 1)], B[wp.min(bn, b_nb - 1)], kn % S, s0 + kn - tn_ * k_tiles,
                           i_n * TM, j_n * TN)
            commit(0)
            mma(ba, bb, acc, q % S)
            t = (s0 + q) // k_tiles
            kk = s0 + q - t * k_tiles
            if kk == k_tiles - 1 or q == iters - 1:  # this run of tile t ends here
                head = s0 <= t * k_tiles  # the run began at the tile's first K step
                if kk == k_tiles - 1 and head:
                    bi, i, j = persistent_tile(t, tiles_m, tiles_n, group_m)
                    own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, i * TM, j * TN)
                elif kk == k_tiles - 1:
                    spill(acc, ws, flags, 2 * g + 1, -1)  # the finisher's own part, added at the end
                    finisher = 1
                else:
                    spill(acc, ws, flags, 2 * g, g)  # a contributor's part, flagged
                zero(acc)
        wait0(0)
        if finisher == 1:
            t = s0 // k_tiles
            c = g - 1  # the lowest block whose run reaches into tile t: its range holds the tile's first K step
            while c > 0 and (c * total) // grid > t * k_tiles:
                c -= 1
            while c < g:
                add(acc, ws, flags, 2 * c, c)
                c += 1
            add(acc, ws, flags, 2 * g + 1, -1)
            bi, i, j = persistent_tile(t, tiles_m, tiles_n, group_m)
            own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, i * TM, j * TN)

    return gemm_stream_k


@wp.func
def persistent_tile(lin: int, tiles_m: int, tiles_n: int, group_m: int):
    """``(batch entry, tile row, tile column)`` of a persistent block's linear tile index ``lin``: batch
    entries one after another, each in :func:`grouped_tile` order."""
    tiles = tiles_m * tiles_n
    bi = lin // tiles
    i, j = grouped_tile(lin - bi * tiles, tiles_m, tiles_n, group_m)
    return bi, i, j


def _stage_copier(spec: PipeSpec, cp_a, cp_b):
    """The kernel's ``@wp.func`` ``copy_stage(ba, bb, Ab, Bb, st, kt, m0, n0)``: starts the copies of K
    tile ``kt`` of A and B (the block's rows ``m0`` / columns ``n0``) into stage ``st`` of the shared
    buffers ``ba``/``bb`` (made in the kernel); the caller commits the group."""
    TK = spec.tk
    IN = WP_DTYPES[spec.in_dtype]
    TRANS_A = spec.layout_a == "T"
    TRANS_B = spec.layout_b == "T"
    AR, AC = spec.a_tile()
    BR, BC = spec.b_tile()
    SAR, SBR = spec.stages * AR, spec.stages * BR
    ACP, BCP = spec.stage_cols()

    def copy_stage(ba: wp.tile(dtype=IN, shape=(SAR, ACP), storage="shared"),
                   bb: wp.tile(dtype=IN, shape=(SBR, BCP), storage="shared"),
                   Ab: wp.array2d(dtype=IN), Bb: wp.array2d(dtype=IN), st: int, kt: int, m0: int, n0: int):
        if wp.static(TRANS_A):
            cp_a(ba, st * AR, Ab, kt * TK, m0)
        else:
            cp_a(ba, st * AR, Ab, m0, kt * TK)
        if wp.static(TRANS_B):
            cp_b(bb, st * BR, Bb, n0, kt * TK)
        else:
            cp_b(bb, st * BR, Bb, kt * TK, n0)

    name = func_name(spec.key, "copy_stage")
    copy_stage.__name__ = copy_stage.__qualname__ = name
    return wp.func(copy_stage, name=name)


def _epilogue(spec: PipeSpec):
    """The kernel's ``@wp.func`` ``epilogue(D, C, bias, acc, alpha, beta, bi, c_nb, m0, n0)``:
    ``D = act(alpha * acc + beta * C + bias)`` for the block's output tile, in the accumulator dtype,
    then cast. ``acc`` is the kernel's accumulator, passed by reference (the parameter's annotation
    spells out its shared layout, so that the views below are typed exactly as in the kernel)."""
    TM, TN = spec.tm, spec.tn
    OUT = WP_DTYPES[spec.out_dtype]
    ACC = WP_DTYPES[spec.acc_dtype]
    TNC = TN + spec.pad_c
    ACC_OWNER = spec.pad_c == 0  # pad_c: a view into the wider shared tile; else the (shared) tile itself
    AXPBY = spec.epilogue == "axpby"
    CAST_OUT = spec.out_dtype != spec.acc_dtype
    EPI_CHUNKS = TM > ER and TM % ER == 0
    ER_ = ER if EPI_CHUNKS else TM  # rows per epilogue chunk
    BIAS = spec.bias
    ACT = spec.activation is not None
    if ACT:
        from .epilogue import activation_func

        act = activation_func(spec.activation, WP_DTYPES[spec.acc_dtype])
    else:
        act = None

    def epilogue(D: wp.array3d(dtype=OUT), C: wp.array3d(dtype=OUT), bias: wp.array2d(dtype=OUT),
                 acc: wp.tile(dtype=ACC, shape=(TM, TN), storage="shared", strides=(TNC, 1), owner=ACC_OWNER),
                 alpha: ACC, beta: ACC, bi: int, c_nb: int, m0: int, n0: int):
        # Epilogue in ER-row chunks (register pressure, see ER; tiles of at most ER rows: one chunk):
        # D = act(alpha * acc + beta * C + bias), in the accumulator dtype, then cast. Rows/columns past
        # M/N are dropped by the checked tile_store; C's and bias's are read as zeros by tile_load.
        if wp.static(BIAS):
            brow = wp.tile_astype(wp.tile_load(bias, shape=(1, TN), offset=(0, n0)), ACC)
        for e in range(TM // ER_):
            r0 = m0 + e * ER_
            if wp.static(EPI_CHUNKS):
                r = wp.tile_view(acc, offset=(e * ER_, 0), shape=(ER_, TN)) * alpha
            else:
                r = acc * alpha
            if wp.static(AXPBY):
                c = wp.tile_load(C[wp.min(bi, c_nb - 1)], shape=(ER_, TN), offset=(r0, n0))
                if wp.static(CAST_OUT):
                    r = wp.tile_map(wp.add, r, wp.tile_astype(c, ACC) * beta)
                else:
                    r = wp.tile_map(wp.add, r, c * beta)
            if wp.static(BIAS):
                r = wp.tile_map(wp.add, r, wp.tile_broadcast(brow, shape=(ER_, TN)))
            if wp.static(ACT):
                r = wp.tile_map(act, r)
            if wp.static(CAST_OUT):
                wp.tile_store(D[bi], wp.tile_astype(r, OUT), offset=(r0, n0))
            else:
                wp.tile_store(D[bi], r, offset=(r0, n0))

    name = func_name(spec.key, "epilogue")
    epilogue.__name__ = epilogue.__qualname__ = name
    return wp.func(epilogue, name=name)


def _stub_copy(IN, R, CP):
    def stub(dst: wp.tile(dtype=IN, shape=(R, CP)), d0: int, src: wp.array2d(dtype=IN), r0: int, c0: int): ...

    return stub


def _stub_acc(ACC, R, CP):
    def stub(acc: wp.tile(dtype=ACC, shape=(R, CP))): ...

    return stub


def _stub_store(OUT, ACC, R, CP):
    def stub(dst: wp.array2d(dtype=OUT), acc: wp.tile(dtype=ACC, shape=(R, CP)), alpha: ACC, m0: int, n0: int): ...

    return stub


def _stub_mma(IN, SAR, ACP, SBR, BCP, ACC, TM, TN):
    def stub(ba: wp.tile(dtype=IN, shape=(SAR, ACP)), bb: wp.tile(dtype=IN, shape=(SBR, BCP)),
             acc: wp.tile(dtype=ACC, shape=(TM, TN)), s: int): ...

    return stub


def _stub_own_store(OUT, ACC, TM, TN):
    def stub(dst: wp.array2d(dtype=OUT), src: wp.array2d(dtype=OUT), acc: wp.tile(dtype=ACC, shape=(TM, TN)),
             alpha: ACC, beta: ACC, m0: int, n0: int): ...

    return stub


def _stub_staged_store(IN, SAR, ACP, OUT, ACC, TM, TN):
    def stub(dst: wp.array2d(dtype=OUT), acc: wp.tile(dtype=ACC, shape=(TM, TN)),
             stage: wp.tile(dtype=IN, shape=(SAR, ACP)), alpha: ACC, m0: int, n0: int): ...

    return stub


def _stub_sk_zero(ACC, TM, TN):
    def stub(acc: wp.tile(dtype=ACC, shape=(TM, TN))): ...

    return stub


def _stub_sk_slot(ACC, TM, TN):
    def stub(acc: wp.tile(dtype=ACC, shape=(TM, TN)), ws: wp.array(dtype=wp.float32), flags: wp.array(dtype=wp.int32),
             slot: int, flag: int): ...

    return stub


def _stub_int():
    def stub(x: int): ...

    return stub


# --- launch ---------------------------------------------------------------------------------------------
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def stream_k_sizes(spec: PipeSpec, M: int, N: int, K: int, batch: int, device) -> tuple[int, int, int]:
    """``(grid, workspace floats, flags)`` of a stream-K launch (``spec.stream_k``): the grid is ``stream_k`` blocks
    per SM (4 SMs on the CPU) but at most one per K step of the whole problem; each block has two slots of every
    thread's accumulator registers; one flag per block (int32 zeros, left zero by every launch). ``(0, 0, 0)`` where
    the launch takes the one-tile-per-block kernel instead: not stream-K, K == 0, or an index past int32."""
    if not spec.stream_k:
        return 0, 0, 0
    total = int(batch) * _cdiv(M, spec.tm) * _cdiv(N, spec.tn) * _cdiv(K, spec.tk)
    cpu = getattr(device, "is_cpu", False)
    grid = max(1, min(total, spec.stream_k * (4 if cpu else _compat.sm_count(device))))
    if total == 0 or (grid + 1) * total >= 2**31:
        return 0, 0, 0
    block = spec.block_dim  # a slot is every thread's registers: ceil(tm * tn / block) each (Warp's register tiles)
    return grid, 2 * grid * _cdiv(spec.tm * spec.tn, block) * block, grid


def launch_args(spec: PipeSpec, A, B, C, D, alpha: float, beta: float, M: int, N: int, K: int, batch: int,
                a_nb: int, b_nb: int, c_nb: int, group_m: int = 8, bias=None, workspace=None, flags=None):
    """``(kernel, dim, inputs, block_dim)`` for ``wp.launch_tiled(kernel, dim=dim, inputs=inputs,
    block_dim=block_dim, device=...)``.

    A, B, C, D: Warp 3-D arrays ``(batch, rows, cols)``; A is ``(a_nb, M, K)`` (layout T: ``(a_nb, K,
    M)``), B ``(b_nb, K, N)`` (T: ``(b_nb, N, K)``), C ``(c_nb, M, N)`` or None for "scale", D ``(batch,
    M, N)``; a/b/c_nb is the batch count or 1 (broadcast). Rows must satisfy ``spec.chunk`` (see
    :func:`max_chunk`). K == 0 gives ``alpha * 0 (+ beta * C)``. ``bias``: ``spec.bias`` kernels only,
    a Warp array of ``spec.out_dtype`` of shape ``(1, N)`` or ``(N,)`` (any strides). On the CPU the
    block size is 1. Stream-K kernels (``spec.stream_k``) also take ``workspace`` (float32) and ``flags`` (int32
    zeros) of at least :func:`stream_k_sizes` elements.
    """
    if spec.stream_k:
        grid, n_ws, n_flags = stream_k_sizes(spec, M, N, K, batch, D.device)
        if not grid:
            return launch_args(dataclasses.replace(spec, stream_k=0), A, B, C, D, alpha, beta, M, N, K, batch, a_nb,
                               b_nb, c_nb, group_m, bias)
        for name, arr, dt, n in (("workspace", workspace, wp.float32, n_ws), ("flags", flags, wp.int32, n_flags)):
            if arr is None or arr.dtype != dt or arr.ndim != 1 or arr.shape[0] < n:
                got = None if arr is None else (tuple(arr.shape), arr.dtype)
                raise ValueError(f"{spec.key} M={M} N={N} K={K} batch={batch}: stream-K needs a {name} of at least "
                                 f"{n} {dt.__name__}; got {got}")
    if bool(spec.bias) != (bias is not None):
        raise ValueError(f"{spec.key}: bias given: {bias is not None}, spec.bias: {spec.bias}")
    if bias is not None and bias.ndim == 1:
        bias = wp.array(ptr=bias.ptr, dtype=bias.dtype, shape=(1, bias.shape[0]), strides=(0, bias.strides[0]),
                        device=bias.device)
    k = get_kernel(spec)
    if spec.wgmma and not D.device.is_cpu:
        _load_arch_specific(k, spec, D.device)
    tiles_m, tiles_n, k_tiles = _cdiv(M, spec.tm), _cdiv(N, spec.tn), _cdiv(K, spec.tk)
    c = C if C is not None else D
    inputs = [A, B, c, D, alpha, beta, k_tiles, tiles_m, tiles_n, max(1, int(group_m)),
              int(a_nb), int(b_nb), int(c_nb if C is not None else 1), bias]
    block = 1 if D.device.is_cpu else spec.block_dim
    if spec.persistent:
        if k_tiles == 0:  # nothing to loop over: the one-tile-per-block kernel stores alpha * 0 (+ beta * C)
            return launch_args(dataclasses.replace(spec, persistent=0), A, B, C, D, alpha, beta, M, N, K, batch,
                               a_nb, b_nb, c_nb, group_m, bias)
        sms = 4 if D.device.is_cpu else _compat.sm_count(D.device)
        grid = max(1, min(int(batch) * tiles_m * tiles_n, spec.persistent * sms))
        return k, (1, grid), inputs + [grid], block
    if spec.stream_k:
        return k, (1, grid), inputs + [grid, workspace, flags], block
    return k, (int(batch), tiles_m * tiles_n), inputs, block


_ARCH_SPECIFIC_LOADED: set = set()


def _load_arch_specific(kernel, spec: PipeSpec, device) -> None:
    """Load the wgmma kernel's module on ``device`` compiled for sm_90a (wgmma is an arch-specific feature): Warp
    takes the suffix from ``wp.config.cuda_arch_suffix`` at compile time only, so it is "a" while this module loads
    (under the factory lock), then restored; later launches find the module loaded. Caveat: for that moment the
    setting is process-wide, and a module that another thread compiles then for a pre-sm_90 GPU would fail."""
    arch = getattr(device, "arch", 0)
    if arch != 90 or not _compat.HAS_CUDA_ARCH_SUFFIX:
        raise ValueError(f"{spec.key}: wgmma kernels need an sm_90 GPU (H100/H200) and a Warp with "
                         f"wp.config.cuda_arch_suffix; got sm_{arch}")
    key = (spec, str(device))
    if key in _ARCH_SPECIFIC_LOADED:  # every launch after the first (a set lookup, no lock)
        return
    with _factory_lock:
        if key in _ARCH_SPECIFIC_LOADED:
            return
        old = wp.config.cuda_arch_suffix
        wp.config.cuda_arch_suffix = "a"
        try:
            kernel.module.load(device, spec.block_dim)
        finally:
            wp.config.cuda_arch_suffix = old
        _ARCH_SPECIFIC_LOADED.add(key)


# --- where the family applies ---------------------------------------------------------------------------

@functools.cache
def _native_tile_args() -> bool:
    """Whether this Warp passes a shared tile to a ``wp.func_native`` snippet by reference with its
    storage reachable as ``.data.ptr`` (1.19 does). Probed by generating (not compiling) the CUDA source
    of a tiny kernel. (HAS_NATIVE_TILE_ARGS below; a candidate for _compat, which the lead owns.)"""
    try:
        snip = "#if defined(__CUDA_ARCH__)\n (void)dst.data.ptr;\n#endif\n"
        touch = _native(snip, "wg_pipe_probe_touch", _stub_copy(wp.float16, 16, 16))

        def probe(a: wp.array2d(dtype=wp.float16)):
            t = wp.tile_zeros(shape=(16, 16), dtype=wp.float16, storage="shared")
            touch(t, 0, a, 0, 0)
            v = wp.tile_view(t, offset=(wp.tid() * 0, 0), shape=(8, 16))
            wp.tile_store(a, v, offset=(0, 0))

        k = _compat.make_kernel(probe, "wg_pipe_probe")
        src = cuda_source(k) or ""
        return "dst.data.ptr" in src and "wg_pipe_probe_touch" in src
    except Exception:
        return False


def has_native_tile_args() -> bool:
    # The factory's lock: the probe registers a native function in this module, like _build does.
    with _factory_lock:
        return _native_tile_args()


def applies(device, in_dtype: str, tf32: bool = False, chunk: int = 16, layout: str = "NN",
            simt: bool = False) -> bool:
    """Whether the pipelined family can run ``in_dtype`` on ``device`` (a Warp device): CUDA sm_80+
    (cp.async) or the CPU twin, a Warp that passes tiles to native snippets, tile_view/tile_astype, and
    tf32 only where ``precision="tf32"`` exists. Exact float32 with a transposed operand is refused on
    CUDA through tile_matmul: correct, but 4.8 (NT) and 10.9 (TN) TFLOP/s against 27.7 NN (H100, 4096^3);
    the SIMT kernel (``simt``) reads every layout from its stages directly."""
    if in_dtype not in WP_DTYPES or (tf32 and not (_compat.HAS_TF32 and in_dtype == "float32")):
        return False
    if device.is_cuda and in_dtype == "float32" and not tf32 and layout != "NN" and not simt:
        return False
    if chunk not in CHUNKS or chunk < ITEM_BYTES[in_dtype]:
        return False
    if device.is_cuda:
        if getattr(device, "arch", 0) < 80:
            return False
    elif not _compat.HAS_CPU_TILES:
        return False
    return has_warp_features()


def has_warp_features() -> bool:
    """Whether this Warp has what the family's code needs on any device (``applies`` without the
    device and dtype checks): tiles, tile_astype, tile_matmul of strided views, tiles passed to native
    snippets. tile_gemm_func picks its pipelined body by this."""
    if not (_compat.HAS_TILES and _compat.HAS_TILE_ASTYPE and _compat.HAS_STRIDED_MATMUL_OPERANDS):
        return False
    return has_native_tile_args()


# --- the checked copy (tile_gemm_func) -----------------------------------------------------------------
# Defined after the kernel factory so that the family's generated source (which quotes line numbers)
# stays byte-identical.

# The run-time alignment check of ``_copy_snippet(..., checked=True)`` (tile_gemm_func: users pass any
# 2-D array): the chunk loop of _COPY runs only where every row start is a multiple of CH bytes (base
# address and row stride), the column stride is one element and c0 starts a chunk; otherwise, and on
# CUDA before sm_80 (no cp.async), the element copy of _COPY_ELEMENTS does the same copy synchronously.
_COPY_CHECK = r"""    // Chunks only where each row start is CH-aligned, columns are contiguous and c0 starts a chunk
    // (checked once per call); else the element copy below. Before sm_80: always the element copy.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    const bool chunked = false;
#else
    const bool chunked = (size_t)base % {CH} == 0 && (nr <= 1 || ld % {CH} == 0) &&
                         (size_t)src.strides[1] == {ITEM} && c0 % {E} == 0;
#endif
    if (chunked)
"""

_COPY_ELEMENTS = r"""    else {{
        // One element per step with both strides, synchronous on every device; the same zero-fill.
        const size_t cs = (size_t)src.strides[1];
        for (int c = WP_TILE_THREAD_IDX; c < {ELEMS}; c += WP_TILE_BLOCK_DIM) {{
            const int r = c / {COLS};
            const int cc = c - r * {COLS};
            const int gr = r0 + r;
            const int gc = c0 + cc;
            {UT}* s = ({UT}*)(sbase + ((size_t)r * {DLD} + cc) * {ITEM});
            const bool in = gr < nr && gc < nc;
            *s = in ? *(const {UT}*)(base + (size_t)gr * ld + (size_t)gc * cs) : ({UT})0;
        }}
    }}
"""
_UINT = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


def _copy_check(it: int, ch: int, e: int, rows: int, cols: int, dld: int, checked: bool) -> dict:
    """The fields of _COPY that ``checked`` sets. Unchecked (the family's kernels, whose planner checked
    the operands with :func:`max_chunk`): cp.async for chunks of 4+ bytes, no check, no fallback -- the
    family's own text. Checked (tile_gemm_func, for arrays nobody has checked): the run-time test of
    _COPY_CHECK before the chunk loop, the element copy of _COPY_ELEMENTS after it, and cp.async only
    from sm_80 on."""
    if not checked:
        return dict(ASYNC=int(ch >= 4), CHECK="", FALLBACK="")
    f = dict(DLD=dld, ITEM=it, CH=ch, E=e, ELEMS=rows * cols, COLS=cols, UT=_UINT[it])
    return dict(ASYNC="(__CUDA_ARCH__ >= 800)" if ch >= 4 else 0, CHECK=_COPY_CHECK.format(**f),
                FALLBACK=_COPY_ELEMENTS.format(**f))


def _from_sm80(snippet: str) -> str:
    """``snippet`` (_COMMIT, _WAIT) with its cp.async PTX compiled only from sm_80 on: a user's module
    (tile_gemm_func) may be built for older GPUs, where ptxas rejects cp.async and the checked copy is
    synchronous."""
    guard = "#if defined(__CUDA_ARCH__)\n"
    assert snippet.count(guard) == 1, snippet
    return snippet.replace(guard, "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n")
