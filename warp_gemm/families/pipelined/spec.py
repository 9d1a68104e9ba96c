"""What a pipelined kernel is: ``PipeSpec`` (every compile-time choice), the measured defaults per dtype, layout and
grid (``default_spec``), shared-memory sizes and the checks that refuse a spec before any compile."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
from dataclasses import dataclass

from ... import _compat
from ...core.options import options
from ..common import native
from ..common.kernels import ITEM_BYTES, WP_DTYPES, acc_dtype_name

# --- configuration -------------------------------------------------------------------------------------
# The tile_matmul kernels (H100, warp-lang 1.19.0, TFLOP/s): fp16 4096^3 NN 150, NT 166 (cuBLAS 758); the same
# kernels with the copies removed (a copy-free ceiling) run NN 234 / NT 261 at 4096^3 and 241 / 283 at 8192^3: the K loop reaches ~64% of tile_matmul's own rate
# per tile, so the copies are not fully hidden. The accumulator must be a shared tile (a register one
# measured 111 against 150), which caps the tile at 128x128 with two 128-deep stages (204 KB of 227): every
# SM then pulls 64 KB per 4.2 MFLOP K step. tf32 87 (ceiling 141-149), fp64 25 (36-37), exact fp32 28 (33-34).
# Padding of the shared tiles, in elements: 16 bytes per A/B row for 16-bit data and tf32, 32 bytes for
# float64, 32 bytes per accumulator row (bank conflicts in MathDx's fragment loads: fp16 4096^3 50 -> 99 TFLOP/s in the tiled family, H100). The async probe confirmed the
# accumulator pad: 8 floats 165.9 TFLOP/s, 4 floats 146.9 (fp16 4096^3, 128x128x128, 2 stages).
# Exact float32 is dense in the tiled family (padding lost 26.0 -> 23.7 there); here the pad is a spec
# field and the benchmark script measures both.
PAD_AB = {"float16": 8, "bfloat16": 8, "float32": 4, "float64": 4}


PAD_C = {"float32": 8, "float64": 4}


# Epilogue rows per chunk: a whole 128x128 fp32 register tile costs ~96 registers per thread at block
# 256 (fp16 4096^3 64.4 -> 96.9 TFLOP/s in 32-row chunks, tiled family, H200).
ER = 32


CHUNKS = (16, 8, 4, 2)


# K tiles in flight at most: cuBLAS's fp16 64 x 256^3 kernel keeps 6 stages of K 64 (Nsight Compute, H100), where a
# 128x128x32 mma.sync block with 3 stages is latency-bound.
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
    activation: str | None = None  # None/relu/gelu/gelu_tanh/silu/tanh (families/common/epilogue.py), last
    persistent: int = 0  # > 0: a grid of persistent * SMs blocks, each looping over output tiles (see _build)
    simt: bool = False  # exact float32 through the _SIMT_MMA snippet (CUDA-core FMAs) instead of tile_matmul
    mma: int = 0  # > 0: 16-bit inputs through the _MMA_SYNC snippet (mma.sync tensor cores) in this many warps
    wgmma: bool = False  # 16-bit NT through the _WGMMA snippet (sm_90a warpgroup MMAs on core-matrix stages)
    stream_k: int = 0  # > 0 (simt/mma): a grid of stream_k * SMs blocks sharing every tile's K steps (see _build)
    mma_k: int = 0  # float64 mma kernels: k of the sm_90 MMA (m16n8k4/8/16); 0: m8n8k4 pairs (as on sm_80)
    swizzle: bool = False  # float64 mma kernels: unpadded stages, 16-byte chunks XOR-permuted by row (swizzled)
    interleave: bool = False  # simt / float64 mma: the next stage's copies between two halves of a K step's product
    edge_copy: bool = False  # simt / mma: tiles crossing an operand's edge copied as interior ones, chunks predicated
    simt_rows: int = 8  # simt: rows of outputs per thread (SIMT_ROWS: 8 or 16), of SIMT_TILE columns each

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
        act += f"_k{self.mma_k}" if self.mma_k else ""
        act += "_sw" if self.swizzle else ""
        act += "_il" if self.interleave else ""
        act += "_ec" if self.edge_copy else ""
        act += f"_r{self.simt_rows}" if self.simt and self.simt_rows != SIMT_TILE else ""
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
    """The measured best configuration per dtype on an H100 (warp-lang 1.19.0); ``over`` replaces fields. On CUDA
    with the family's snippets (``Options.pipe_snippets``, no fused activation) 16-bit and tf32 inputs take the
    mma.sync kernel in every grid (``_mma_16bit``, ``_mma_tf32``): with ``M``/``N`` given, 64x64 tiles where 128x64
    tiles fit in one wave or fill under half the SMs (16-bit also where 96-row tiles would replace one wave of
    128x128 tiles, ``_narrow_rows``), 128x128x32 s4 tiles for 16-bit K of at most ``SHORT_K_STEPS`` 128-deep steps,
    32x32 tiles for outputs of at most 32x32 (batched small products; 16-bit K tiles of 64 where ``K`` > 32), else
    the large 128x128 tiles. Without the snippets: tile_matmul's configurations (``_base_16bit``, ``_base_tf32``).
    On the CPU: 32x32x32 tiles, block 1, no padding (nothing to tune, and compiles stay short)."""
    out_dtype = out_dtype or in_dtype
    # The small-problem configuration (128x64 tiles, one block per SM) only where its blocks fit in one wave:
    # 1023x1025x1027 fp16 (136 blocks of 128x64 for 132 SMs) took 72.9 us against 58.7 with 128x128 tiles (72
    # blocks); 1000^3 (128 blocks) 26.5 against 37.4 (H100, graph replay of the whole call).
    blocks64 = -(-M // 128) * -(-N // 64) * max(1, batch) if M is not None and N is not None else 1 << 30
    blocks128 = -(-M // 128) * -(-N // 128) * max(1, batch) if M is not None and N is not None else 1 << 30
    grid = _Grid(small=blocks64 <= sm_count, quarter=blocks64 <= sm_count // 2,
                 narrow=blocks64 > sm_count and _narrow_rows(M, N, batch, sm_count),
                 short_k=K is not None and K <= SHORT_K_STEPS * 128, tiny=M is not None and N is not None
                 and max(M, N) <= TINY_SIDE, deep_k=K is not None and K > 32, one_wave=blocks128 <= sm_count,
                 tiles128=blocks128, k=K or 0, full256=_full_waves_256(M, N, batch, sm_count))
    snippets = options().pipe_snippets and not device_is_cpu and over.get("activation") is None
    if device_is_cpu:
        base = dict(tm=32, tn=32, tk=32, stages=2, block_dim=1, pad_ab=0, pad_c=0)
    elif in_dtype in ("float16", "bfloat16"):
        base = _base_16bit(grid, snippets)
    elif in_dtype == "float32" and tf32:
        base = _base_tf32(grid, snippets)
    elif in_dtype == "float32":
        base = _base_fp32(grid, snippets, layout)
    else:
        base = _base_fp64(grid, snippets, layout)
    if base.get("edge_copy") and not _has_edges(base, M, N, K):
        base["edge_copy"] = False  # no tile crosses an edge: the kernel measured without the edge path
    base.update(over)
    return PipeSpec(in_dtype=in_dtype, out_dtype=out_dtype, layout_a=layout[0], layout_b=layout[1],
                    epilogue=epilogue, tf32=tf32, chunk=chunk, **base)


@dataclass(frozen=True)
class _Grid:
    """How a problem's grid looks to :func:`default_spec`'s rules."""

    small: bool  # 128x64 tiles fit in one wave
    quarter: bool  # 128x64 tiles fill under half the SMs
    narrow: bool  # 96-row tiles save a wave over 128-row ones (_narrow_rows)
    short_k: bool  # at most SHORT_K_STEPS 128-deep K steps
    tiny: bool  # both output sides at most TINY_SIDE (batched small products)
    deep_k: bool  # K > 32
    one_wave: bool  # 128x128 tiles fit in one wave
    tiles128: int  # 128x128 output tiles (batch included)
    k: int  # K (0: not given)
    full256: bool = False  # whole 128x256 tiles filling at least SIMT256_FILL of whole waves (_full_waves_256)


#: exact float32 NN takes 16 x 8 outputs per thread on 128x256 tiles where M and N are whole tiles and the tiles
#: fill at least this share of whole waves of one block per SM
SIMT256_FILL = 0.95
SIMT256_MIN_K = 2048  # the smallest K timed (2048^3)


def _full_waves_256(M, N, batch: int, sm_count: int) -> bool:
    """Whether ``M x N`` (``batch`` entries) is whole 128x256 tiles filling at least :data:`SIMT256_FILL` of whole
    waves of one block per SM on ``sm_count`` SMs (4096^3: 512 tiles in 4 waves of 132, 97%; 2048^3: 128 in one)."""
    if M is None or N is None or M % 128 or N % 256:
        return False
    tiles = (M // 128) * (N // 256) * max(1, batch)
    waves = -(-tiles // sm_count)
    return tiles >= SIMT256_FILL * waves * sm_count


def _base_16bit(g: _Grid, snippets: bool) -> dict:
    """float16 / bfloat16 (H100, TFLOP/s at 4096^3 / 8192^3 unless us)."""
    if snippets:
        return _mma_16bit(g)
    # tile_matmul kernels (pipe_snippets=False): 128x128x128, 2 stages, one block/SM: NN 150/161, NT 166/167 (bf16
    # 165/174); 128x128x64 with 3-4 stages 118-132. Small: 128x64x128 (128 blocks): 70 NN, 73 NT against 50-53 for
    # 128x128x128. 96x128 where its waves are fewer: 1023x1025x1027 52.2 us against 58.7, 1536^3 80.9 against 96.3.
    # 128 threads for the 128x128 tiles: 4096^3 755 against 775 us (256); 256 where each tile has at most
    # SHORT_K_STEPS K steps, whose fixed cost (first copies, zero fill, epilogue) then weighs most: 64 x 256^3 22.6 us
    # against 25.4 (graph replay).
    base = dict(tm=96 if g.narrow else 128, tn=64 if g.small else 128, tk=128, stages=2,
                block_dim=256 if g.narrow or g.small or g.short_k else 128, min_blocks=1, pad_ab=8, pad_c=8)
    if g.quarter:
        # grids under half the SMs: 64x32 tiles, block 128, several per SM: 127x4099x1031 37.9 -> 30.8 us,
        # 256x2048x2048 44.6 -> 31.2, 128x4096x4096 81.7 -> 53.7 (graph replay; 64x64 and 128x32 within 10%)
        base.update(tm=64, tn=32, block_dim=128)
    if g.tiny:
        # Batched small products (tiny_batched): one 32x32 tile per entry, 64 threads, many blocks per SM: 4096 x
        # 32^3 14.2 / 20.2 us graph / cold (small family 19.9 / 27.2, cuBLAS 20.9); 4096 x 32x32x128 with 64-deep K
        # tiles 32.9 / 41.1, 32-deep 36.3 / 44.6.
        base.update(tm=32, tn=32, tk=64 if g.deep_k else 32, block_dim=64, min_blocks=0)
    return base


def _mma_16bit(g: _Grid) -> dict:
    """float16 / bfloat16 on the mma.sync kernel (spec.mma), every grid: a cold first call compiles in 1-2 s against
    21-25 s for a tile_matmul kernel (H100, warp-lang 1.19.0, empty kernel cache)."""
    if g.tiny:
        # Batched products of sides 17-32 (tiny_batched): one 32x32 tile per entry in 2 warps of 32x16 outputs,
        # 64-deep K tiles past K 32, as the tile_matmul configuration they replace (4096 x 32^3: 14.2 us graph
        # replay there); the mma.sync tile's own time is not measured.
        return dict(tm=32, tn=32, tk=64 if g.deep_k else 32, stages=2, block_dim=64, min_blocks=0, pad_ab=8, pad_c=0,
                    mma=2)
    if g.small or g.quarter or (g.narrow and g.one_wave):
        # 64x64x64 s3, 4 warps, four blocks/SM where 128x64 tiles fit in one wave, fill under half the SMs, or
        # 96-row tiles would replace one wave of 128x128 tiles; the fastest of 18 candidates on every such shape
        # tuned (graph replay, us, against the best tile_matmul candidate): 1000^3 20.0 / 23.1, 1023x1025x1027 30.3
        # / 33.8, 256x2048x2048 20.0 / 26.4, 512x1024x1024 12.8 / 16.3, 127x4099x1031 26.4 / 26.4
        # (benchmarks/results/tuning/pipelined_16bit_medium.jsonl).
        return dict(tm=64, tn=64, tk=64, stages=3, block_dim=128, min_blocks=4, pad_ab=8, pad_c=0, mma=4)
    if g.short_k:
        # at most SHORT_K_STEPS 128-deep K steps: 128x128x32 s4, two blocks/SM: 64 x 256^3 21.3 us on s3 against
        # 24.3 for the best tile_matmul kernel (tuning rows), and 18.8 against 25.5 on s4 against s3 with the
        # staged epilogue (benchmarks/results/tuning/staged_epilogue_stages_2026-11-23.txt).
        return dict(tm=128, tn=128, tk=32, stages=4, block_dim=128, min_blocks=2, pad_ab=8, pad_c=0, mma=4)
    # 128x128x64 s3, 4 warps of 64x64, one block/SM: 4096^3 NN 303.8 / NT 305.0 (tile_matmul 183.9 / 193.4), 8192^3
    # 320.9, bf16 8192^3 330.2, 4095^3 staged 243.4 (1.61x cuBLAS); 128x128x32 s3 o2 299.8; 128x256x32 267; 8 warps
    # 252 (H100, cold L2). 1536^3 (96-row tiles would save a wave of 128-row tiles, narrow): 42.2 us against 65.5
    # for 64x64x64 and 65.7 for the 96x128 tile_matmul kernel (tuning rows).
    return dict(tm=128, tn=128, tk=64, stages=3, block_dim=128, min_blocks=1, pad_ab=8, pad_c=0, mma=4)


def _base_tf32(g: _Grid, snippets: bool) -> dict:
    """float32 on tf32 tensor cores (H100, TFLOP/s at 4096^3 / 8192^3)."""
    if snippets:
        return _mma_tf32(g)
    # tile_matmul kernels (pipe_snippets=False): 128x128x64 s2: NN 82/85, NT 87/86-89; 128x128x32 s3/s4 66-68. Small:
    # 128x64x64 s3: 44 NN.
    return dict(tm=128, tn=64 if g.small else 128, tk=64, stages=3 if g.small else 2, block_dim=256, min_blocks=1,
                pad_ab=4, pad_c=8)


def _mma_tf32(g: _Grid) -> dict:
    """float32 inputs on the tf32 mma.sync kernel (m16n8k8), every grid: a cold first call compiles in seconds where a
    tile_matmul kernel takes 21-25 s (H100, warp-lang 1.19.0, empty kernel cache)."""
    if g.tiny:
        # batched products of outputs up to 32x32: one 32x32 tile per entry in 2 warps, as the 16-bit tiny tiles
        # (the 128x128 tiles below would leave 15/16 of each block idle); its time is not measured.
        return dict(tm=32, tn=32, tk=32, stages=2, block_dim=64, min_blocks=0, pad_ab=4, pad_c=0, mma=2)
    if g.small or g.quarter:
        # grids of one wave of 128x64 tiles or less: the 16-bit small-grid tile (64x64, 4 warps) with the tf32 kernel's
        # 32-deep K tiles; not measured against tile_matmul's 64x64x64 s2 o2 (tf32 1000^3 41.4 us graph replay, the
        # shipped table's entry for that bucket, which stands over this default).
        return dict(tm=64, tn=64, tk=32, stages=3, block_dim=128, min_blocks=4, pad_ab=4, pad_c=0, mma=4)
    # 128x128x32 s3, 4 warps, two blocks/SM, B read as stored with 32-bit loads: 4096^3 NN 140.3, 4095^3 120.0 (0.89x
    # cuBLAS), 2048^3 130.8; 128x256x32 113.7-140.8, 8 warps 91.6-113.7.
    return dict(tm=128, tn=128, tk=32, stages=3, block_dim=128, min_blocks=2, pad_ab=4, pad_c=0, mma=4)


def _has_edges(base: dict, M: int | None, N: int | None, K: int | None) -> bool:
    """Whether a problem of ``M`` x ``N`` x ``K`` has tiles of ``base``'s shape that cross an operand's edge (an
    unknown size counts as none)."""
    return any(x is not None and x % t for x, t in ((M, base["tm"]), (N, base["tn"]), (K, base["tk"])))


def _base_fp64(g: _Grid, snippets: bool, layout: str = "NN") -> dict:
    """float64 (TFLOP/s at 4096^3 / us at 1000^3; benchmarks/results/tuning/dmma_simt_probe_2026-11-26.txt on an H100,
    dmma_stream_k_2026-11-27.txt and dmma_swizzle_2026-11-27.txt on an H200, dmma_edge_2026-11-27.txt on an H100).
    ``edge_copy`` here means: where the problem has tiles crossing an edge (default_spec drops it elsewhere)."""
    if snippets:
        # The DMMA kernel (mma.sync .f64; DMMA_DEFAULT_K): 128x64x16, 4 warps of 64 x 32, two blocks/SM, 4 stages
        # of swizzled unpadded rows (spec.swizzle: 96 KiB a block; padded rows would take 114 and one block/SM):
        # 4096^3 49.0 TFLOP/s (0.894x cuBLAS's 54.8) against 47.4-47.7 (0.864-0.870x) for 3 padded stages timed first
        # and last in the same process, 48.4 for 3 swizzled stages, 48.5 for 128x128 of 8 warps on 4 swizzled stages
        # (H200, benchmarks/results/tuning/dmma_swizzle_2026-11-27.txt). cuBLAS runs the same tile, stages and warps
        # (sm90_xmma_gemm_f64f64_..._tilesize128x64x16_stage3_warpsize2x2x1_tensor16x8x8, unpadded 72 KiB stages,
        # Nsight Compute). Earlier (3 padded stages, H100): NT 46.2 = 0.95x, TN 0.91x, TT 0.87x with m16n8k16; 128x128
        # with 8 warps 45.3, 64x64 45.5, 128x64x32 s2 45.7, padded 4 stages 36.6 (one block/SM); stream-K over two
        # blocks per SM 45.0; the tile_matmul kernels 31.3 (runner).
        base = dict(tm=128, tn=64, tk=16, stages=4, block_dim=128, min_blocks=2, pad_ab=0, pad_c=0, mma=4,
                    mma_k=DMMA_DEFAULT_K, swizzle=True)
        if layout != "TT":
            # NN, NT, TN: 32-deep K tiles on 2 swizzled stages (96 KiB, two blocks/SM), m16n8k16, interleaved K steps
            # (spec.interleave), edge copies where tiles cross an edge (spec.edge_copy). H100, cuBLAS in the same
            # process (benchmarks/results/tuning/dmma_edge_2026-11-27.txt), against the 16-deep 4-stage tiles above:
            # 4096^3 NN 50.3-51.6 TFLOP/s (0.91-0.94x) against 46.9-49.2 (0.85-0.89x) in three processes; NT 50.8-51.3
            # against 46.6-49.7, TN 41.4-42.1 against 38.8-38.9; 2048^3 48.2-48.6 against 45.0-47.6; with edge copies
            # 4095^3 48.8-49.9 against 41.5-46.6, 333x4096x4096 30.9-31.0 against 24.4-25.8. 4096^3 with edge copies
            # compiled in (no tile crosses an edge there): 47.1 against 50.3 without, hence only where edges exist.
            # 16-deep 4-stage tiles interleaved: 4096^3 50.3-50.5. TT keeps the tiles above: 41.8 against 40.6 (32-deep,
            # 72 bytes of stack), 40.7 with interleave and edge copies, 40.5 with edge copies.
            base.update(tk=32, stages=2, mma_k=16, interleave=True, edge_copy=True)
        if g.small:
            # 128x64 tiles in one wave: 64x64x16 (4 warps of 32 x 32, m16n8k8), stream-K over three blocks per SM:
            # 1000^3 60.1-60.5 us (0.70-0.72x cuBLAS) against 65.4-70.7 for the 64x64x32 tiles one per block (0.61-0.64x);
            # m16n8k16 60.6, m16n8k4 60.9, 64x64x32 s2 61.2, two blocks per SM 72.1, 128x64 / 64x128 tiles over two
            # blocks per SM 64.4 / 64.0, 2-warp 64x32 / 32x64 tiles over four 81-83 (H200, cuBLAS in the same process;
            # benchmarks/results/tuning/dmma_stream_k_2026-11-27.txt)
            # Swizzled stages lost here: 67.7 us on 3, 63.9 on 4 against 62.1-63.7 padded (H200, same process).
            # Interleaved K steps (no stack: 168 registers against 168 and 32 bytes of stack) and edge copies: 1000^3
            # 54.5-55.1 us (0.80-0.88x cuBLAS) against 62.2-67.5 (0.70-0.76x), 1023x1025x1027 62.3 against 68.9-75.5,
            # TN 56.7 against 61.9, TT 55.8 against 67.0; 1024^3 (no edges) interleaved 55.3-58.2 against 57.7-61.4
            # (H100, benchmarks/results/tuning/dmma_edge_2026-11-27.txt). cuBLAS's 128x64x32 tile of 8 warps (one block
            # per SM, no K split) ran 1000^3 at 74.1-75.2 us, 59.1 with edge copies, 52.2-52.8 at 1024^3.
            base.update(tm=64, tn=64, tk=16, stages=3, min_blocks=3, pad_ab=4, mma_k=8, stream_k=3, swizzle=False,
                        interleave=True, edge_copy=True)
        if g.quarter:
            # grids under half the SMs: 64x32 tiles of 2 warps (four times the blocks of 128x64; not timed there)
            base.update(tm=64, tn=32, tk=16, stages=3, block_dim=64, mma=2, min_blocks=4, pad_ab=4, mma_k=16,
                        stream_k=0, swizzle=False, interleave=False, edge_copy=False)
        return base
    # tile_matmul: 64x64x32, 2 stages, block 128, two blocks/SM: 24.5/25.1 TFLOP/s at 4096^3/8192^3 (NT 25.3/25.7),
    # 1000^3 20.5; one block/SM 23.2-23.9, 3 stages 17-18, 128x64x32 23.3-24.1.
    return dict(tm=64, tn=64, tk=32, stages=2, block_dim=128, min_blocks=2, pad_ab=4, pad_c=4)


#: exact float32 with B stored (N, K) (NT, TT) takes 16 x 8 outputs per thread on 128x128 tiles from this many
#: 128x128 output tiles and K (4095^3 the smallest problem timed)
SIMT16_MIN_TILES = 1024
SIMT16_MIN_K = 4000


def _base_fp32(g: _Grid, snippets: bool, layout: str = "NN") -> dict:
    """Exact float32 (H100, TFLOP/s at 4096^3 / 8192^3)."""
    if snippets:
        # The SIMT kernel: 64x128x16 s3, 128 threads (2 x 2 warps of 32 x 64 outputs), three blocks/SM: 4096^3 44.9,
        # 4095^3 41.9 (0.86x cuBLAS), every layout; 128x64x16 41.7, 128x128x16 s2-s4 39.6-40.7; again 44.7 (0.87x;
        # TN, no transposing copy, 46.7 = 0.90x; 4 stages 45.3, 64x128x32 38.7, tk 8 37.2-39.3). Stream-K over three
        # blocks per SM (4 whole waves, the last 1.2 shared): 43.5 against 44.7-44.8 (TN 47.8 against 46.7, H200).
        # 16 x 8 outputs per thread (simt_rows 16, 213-229 registers) on 128x128x16 tiles of 128 threads, two blocks
        # per SM: 4096^3 NN 45.1 against 45.1-45.4 for this tile timed first and last, 4095^3 41.4 against 42.2-43.3,
        # 8192^3 45.5 against 44.3-45.0, 2048^3 43.3 against 43.1-43.7, 1536^3 24.9 against 31.4-31.5; NT 41.3
        # against 37.1, TN 44.7 against 47.1, TT 44.9 against 38.2 (4096^3 only); 128x256 of 256 threads, one
        # block per SM, 46.6 (0.905x, 4096^3 NN only, one process); 256x128 42.6, 64x128 / 128x64 of 64 threads
        # 43.4 / 42.3, tk 8 39.6, tk 32 43.6-43.7 (H100, cuBLAS in the same process, dmma_bench.py set 11).
        base = dict(tm=64, tn=128, tk=16, stages=3, block_dim=128, min_blocks=3, pad_ab=4, pad_c=0, simt=True)
        if g.small:
            # 128x64 tiles in one wave: the same tile, stream-K over three blocks per SM: 1000^3 69.5-69.8 us (0.86-0.88x
            # cuBLAS) against 72.1-76.2 over two (0.79-0.85x), 91.8-94.2 one tile per block, 70.7 with 4 stages, 80.0 for
            # 128x128 tiles over two, 78.8 for 64x64 tiles over six (H200, cuBLAS in the same process;
            # benchmarks/results/tuning/dmma_stream_k_2026-11-27.txt); the tiled family's tile_matmul kernel ran at 0.60x.
            # Edge copies where tiles cross an edge (spec.edge_copy): 1000^3 68.1 us (0.89x) against 71.8 (0.84x); the
            # large tiles at 4095^3 42.7 TFLOP/s with them against 43.3 without (H100, dmma_edge_2026-11-27.txt): not
            # there.
            base.update(stream_k=3, edge_copy=True)
        if g.quarter:
            # grids under half the SMs: 32x64 tiles of one warp (four times the blocks; not timed there)
            base.update(tm=32, tn=64, block_dim=32, min_blocks=0, stream_k=0, edge_copy=False)
        if layout == "NN" and g.full256 and g.k >= SIMT256_MIN_K:
            # whole 128x256 tiles in full waves: 16 x 8 outputs per thread, 256 threads, one block per SM: 4096^3
            # 46.1-46.2 against 45.2-45.5 for the 64x128 tile first and last (0.896-0.897x cuBLAS against
            # 0.877-0.884x), 2048^3 44.7 against 43.7, 8192^3 46.3-46.7 against 44.0-46.7; 4095^3 (edge tiles) 42.3
            # against 43.3-43.4 and 3072^3 (2.2 waves) 0.78x against 0.99x keep 64x128 (H100, cuBLAS in the same
            # process, dmma_bench.py sets 12 and 13). 32-deep K tiles with the next stage's copies between the two
            # halves of a K step's product (interleave): 4096^3 47.3 against 46.2-46.5 (0.913x), 8192^3 47.5 against
            # 46.7; interleaved 16-deep ones 44.8-44.9 (H100, dmma_bench.py set 14)
            base.update(tm=128, tn=256, tk=32, block_dim=256, min_blocks=1, simt_rows=16, interleave=True)
        if layout[1] == "T" and g.tiles128 >= SIMT16_MIN_TILES and g.k >= SIMT16_MIN_K:
            # B's 128 columns copied transposed, 4 bytes per cp.async, weigh on the 64x128 tile: 16 x 8 outputs per
            # thread on 128x128 tiles, two blocks per SM: TT 4096^3 44.6 against 38.2 (0.90x cuBLAS against 0.77x),
            # 4095^3 40.7 against 36.0, 8192^3 45.2 (0.89x); NT 41.4 against 37.1, 4095^3 38.2 against 35.1, 8192^3
            # 41.7 (0.81x) (H100, cuBLAS in the same process, dmma_bench.py set 12)
            base.update(tm=128, tn=128, block_dim=128, min_blocks=2, simt_rows=16)
        return base
    # tile_matmul's SIMT path: 128x64x32 s2 dense, register accumulator: 27.9/28.7, 1000^3 20.3. NN only: NT measured
    # 4.8 and TN 10.9 (transposed views in that path).
    return dict(tm=128, tn=64, tk=32, stages=2, block_dim=256, min_blocks=0, pad_ab=0, pad_c=0)


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
# 80.9 against 96.3 us, both two waves). It pays where the 128x128
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


# --- exact float32 on CUDA cores (spec.simt; H100: 44.9 TFLOP/s at 4096^3, the default for large problems) -------
# tile_matmul's exact-fp32 GEMM (MathDx's SIMT path) ran at 33-40 TFLOP/s on these tiles with its operands already
# in shared memory, against an fp32 FMA peak of ~67 and cuBLAS's 51.5 (H100; docs/performance.md, "Where the tile
# API is the wall"): a ceiling under issue 16's 41.5 for every kernel built on it. _SIMT_MMA replaces the
# tile_matmul of a K step by the register-blocked outer product of SIMT GEMMs: each thread keeps an 8x8 block of
# outputs in registers and, per k, reads 8 values of A and 8 of B with four 16-byte shared loads for 64 FMAs
# (spec.simt_rows 16: a 16x8 block, 16 values of A and 8 of B, six loads for 128 FMAs, warps of 64 x 64 outputs).
# Both stages are K-major, (TK, TM) and (TK, TN), whatever the layout: A stored (M, K) and B stored (N, K) are
# copied transposed, 4 bytes per cp.async (_COPY_T). Read K-contiguous instead, the compiler merged four k's
# loads into one 16-byte load and kept them live: 168-254 registers (ptxas 13.0, sm_90, NN/NT 128x128x16), or
# spills under __launch_bounds__(256, 2); K-major stages: 128 registers, no spill. Warps are 4 x 8 lanes over
# 32 x 64 outputs (simt_rows 16: 64 x 64); a thread's rows and columns are groups of 4 contiguous ones (two of
# columns, two or four of rows), 16 rows and 32 columns apart, so a warp's loads of one k read 64 (A) and 128 (B)
# contiguous bytes: no bank conflict. The accumulator is the
# register tile's own storage (acc.data) in this order, so only these snippets may read it; the epilogue is
# _OWN_STORE (alpha, beta * C, the output cast; no bias or activation). One barrier per K step: the K loop waits
# for stage k (and syncs) before refilling the stage the previous step read (_build).
SIMT_TILE = 8  # columns of outputs per thread, and the default rows (spec.simt_rows)


SIMT_ROWS = (8, 16)  # the rows of outputs per thread the SIMT kernel takes (spec.simt_rows)


MMA_TYPES = {"float16": "f16", "bfloat16": "bf16"}


# The k of the sm_90 float64 MMAs (mma.sync m16n8k4 / k8 / k16 .f64; spec.mma_k); sm_80 has m8n8k4 only.
DMMA_K = (4, 8, 16)


def interleave_split(spec: PipeSpec) -> int:
    """The k (within a K tile) where an interleaved kernel's product is split (spec.interleave): its first half of
    whole steps (SIMT: one k; float64 mma: one MMA's k), then the next stage's copies, then the rest; 0 where the K
    tile holds a single step. Issued right after the barrier, the copies' address arithmetic and cp.async stand
    between the barrier and the first MMA (SASS); cuBLAS's fp64 kernel of the same tile, stages and warps
    (sm90_xmma_gemm_f64f64_..._tilesize128x64x16_stage3_warpsize2x2x1_tensor16x8x8) reaches 94% SM compute throughput
    against 77% for ours in that order, at the same occupancy and issue rate (Nsight Compute, H200, 4096^3)."""
    step = 1 if spec.simt else max(4, spec.mma_k)
    return (spec.tk // step // 2) * step


# Swizzled float64 stages (spec.swizzle): rows of whole groups of this many doubles (128 bytes, the 32 banks), in
# which 16-byte chunk c of stage row r lies at chunk c ^ (2 (r % 4)): element (r, c) at r * cols + (c ^ (4 (r % 4))).
# A half warp's 8-byte fragment loads (lanes 4 g + t: rows g, k t; or rows k t, columns g) then hit 16 distinct
# 8-byte bank pairs without padding, in 16% less shared memory than rows padded by 4 doubles (128x64x16: 72 against
# 85.5 KiB a block on 3 stages, 96 against 114 on 4, where two blocks of 4 stages fit an SM only swizzled).
SWIZZLE_COLS = 16


# The float64 mma.sync kernels' sm_90 MMA on 16-deep K tiles (default_spec, configurations): m16n8k8. H100, 128x64x16
# tiles at 4096^3: k8 47.6 TFLOP/s, k16 46.3, k4 41.9, m8n8k4 pairs 29.2; 64x64x16: k8 45.5, k16 43.9. The 32-deep
# large-grid default takes m16n8k16: 4096^3 interleaved on 2 swizzled stages 51.0 against 48.7 for k8 (H100).
DMMA_DEFAULT_K = 8


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


def wgmma_threads(spec: PipeSpec) -> int:
    """Threads of the wgmma kernel: one warpgroup (128) per 64 rows of the tile; the CUDA block size."""
    return 128 * (spec.tm // 64)


def staged_store(spec: PipeSpec) -> bool:
    """Whether the kernel's epilogue is :data:`_STAGED_STORE`: a plain (not persistent, not stream-K) mma.sync or
    SIMT kernel with the "scale" epilogue, whose A stage buffer holds the output tile as ``tm`` rows of ``tn``
    elements plus 16 bytes, and ``tn`` whole 16-byte chunks. Else :data:`_OWN_STORE`."""
    if not options().staged_store or not (spec.mma > 0 or spec.simt) or spec.wgmma or spec.persistent or spec.stream_k:
        return False
    it = ITEM_BYTES[spec.out_dtype]
    if spec.epilogue != "scale" or spec.bias or spec.activation or (spec.tn * it) % 16:
        return False
    a_bytes = spec.stages * spec.a_tile()[0] * spec.stage_cols()[0] * ITEM_BYTES[spec.in_dtype]
    return spec.tm * (spec.tn * it + 16) <= a_bytes


def simt_threads(spec: PipeSpec) -> int:
    """Threads of the SIMT kernel's tile (:data:`_SIMT_MMA`): one per ``simt_rows`` x 8 outputs; the CUDA block size."""
    return spec.tm * spec.tn // (spec.simt_rows * SIMT_TILE)


# Tiles of fewer rows keep tile_zeros and Warp's epilogue: the split-K plan's 16x128 tiles ran slower with
# either snippet, for reasons not found (the K loop's source is identical, the shared memory too):
# 16x8192x8192 60.4-60.7 us without them against 72.2-73.3 with one or both (H100, graph replay).
SNIPPET_MIN_TM = 32


def _acc_rows_16(spec: PipeSpec) -> bool:
    """A shared accumulator (``pad_c > 0``) of at least SNIPPET_MIN_TM rows of whole 16-byte words."""
    return (spec.pad_c > 0 and spec.tm >= SNIPPET_MIN_TM
            and (spec.tn + spec.pad_c) * ITEM_BYTES[spec.acc_dtype] % 16 == 0)


def native_acc(spec: PipeSpec) -> bool:
    """Whether the kernel zero-fills its shared accumulator with :data:`_ZERO_ACC` (tile_empty, then 16-byte
    stores) rather than ``tile_zeros``. With the store snippet, against neither (H100, graph replay): 4096^3 fp16 837-844 us against 851-853, 64 x 256^3
    23.6-24.5 against 27.1-29.6, 4096 x 32^3 14.2 against 20.6, 4095^3 900 against 922; the store snippet
    alone: 858, 25.6, 15.4, 920."""
    return options().zero_acc_snippet and _compat.HAS_TILE_EMPTY and _acc_rows_16(spec)


def native_store(spec: PipeSpec) -> bool:
    """Whether the kernel's epilogue is the :data:`_STORE` snippet: a shared accumulator (``_acc_rows_16``),
    the "scale" epilogue, no bias, no activation, a store of at most 16 bytes per thread (16-bit inputs into a
    float64 output would need 32: Warp's tile epilogue, :func:`_epilogue`, as for the others)."""
    e = 16 // ITEM_BYTES[spec.acc_dtype]
    return (_acc_rows_16(spec) and spec.epilogue == "scale" and not spec.bias and spec.activation is None
            and spec.tn % e == 0 and e * ITEM_BYTES[spec.out_dtype] in native.VEC_TYPES)


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
    if spec.mma_k and not spec.mma:
        raise ValueError(f"{spec}: mma_k is the float64 mma.sync kernel's (mma > 0)")
    if spec.interleave and (spec.persistent or not (spec.simt or (spec.mma and spec.in_dtype == "float64"))
                            or interleave_split(spec) == 0):
        raise ValueError(f"{spec}: interleaved copies are for the SIMT and float64 mma.sync kernels (not persistent), "
                         "whose K tile holds at least two steps of their product")
    if spec.edge_copy and not (spec.simt or spec.mma):
        raise ValueError(f"{spec}: predicated edge copies (edge_copy) are for the SIMT and mma.sync kernels")
    if spec.swizzle and not (spec.mma and spec.in_dtype == "float64"):
        raise ValueError(f"{spec}: swizzled stages are the float64 mma.sync kernel's (mma > 0, float64 inputs)")
    if (spec.simt + bool(spec.mma) + spec.wgmma) > 1:
        raise ValueError(f"{spec}: simt, mma and wgmma are different products: give one")
    if spec.wgmma:
        _check_wgmma(spec)
    if spec.simt:
        _check_simt(spec)
    if spec.mma:
        _check_mma(spec)
    if spec.activation is not None:
        from ..common.epilogue import check_activation

        check_activation(spec.activation)


def _check_simt(spec: PipeSpec) -> None:
    if spec.in_dtype != "float32" or spec.tf32:
        raise ValueError(f"{spec}: the SIMT kernel (simt) is for exact float32 inputs only")
    if spec.simt_rows not in SIMT_ROWS:
        raise ValueError(f"{spec}: the SIMT kernel keeps {SIMT_ROWS} rows of outputs per thread, got simt_rows "
                         f"{spec.simt_rows}")
    if spec.tm % (4 * spec.simt_rows) or spec.tn % 64:
        raise ValueError(f"{spec}: the SIMT kernel needs tm a multiple of {4 * spec.simt_rows} and tn of 64 (warps of "
                         f"4 x 8 lanes, {spec.simt_rows} x {SIMT_TILE} outputs per thread)")
    if spec.block_dim not in (1, simt_threads(spec)):
        raise ValueError(f"{spec}: the SIMT kernel's {spec.tm}x{spec.tn} tile takes block_dim {simt_threads(spec)} "
                         f"(one thread per {spec.simt_rows}x{SIMT_TILE} outputs; 1 on the CPU), got {spec.block_dim}")
    if spec.pad_c or spec.bias or spec.activation is not None:
        raise ValueError(f"{spec}: the SIMT kernel keeps its accumulator in registers and stores it itself: no pad_c, "
                         "bias or activation")
    if spec.chunk != 16 or (spec.pad_ab * 4) % 16:
        raise ValueError(f"{spec}: the SIMT kernel reads B in 16-byte words: chunk 16 and pad_ab a multiple of 4")


def _check_mma(spec: PipeSpec) -> None:
    f64 = spec.in_dtype == "float64"
    if spec.in_dtype not in MMA_TYPES and not spec.tf32 and not f64:
        raise ValueError(f"{spec}: the mma.sync kernel (mma) is for float16, bfloat16, tf32 and float64 inputs only")
    if not 0 < spec.mma <= 16 or mma_warps(spec) is None:
        raise ValueError(f"{spec}: the mma.sync kernel splits the {spec.tm}x{spec.tn} tile among its {spec.mma} warps "
                         "in warp tiles of whole 16 x 16 outputs (1-16 warps); this split has none")
    if spec.mma_k and (not f64 or spec.mma_k not in DMMA_K):
        raise ValueError(f"{spec}: mma_k (the sm_90 float64 MMA's k) is one of {DMMA_K} and for float64 inputs only")
    step = max(4, spec.mma_k) if f64 else 16
    if spec.tk % step:
        raise ValueError(f"{spec}: the mma.sync kernel takes K tiles of whole {step}-deep MMA steps (tk a multiple of "
                         f"{step})")
    if spec.block_dim not in (1, 32 * spec.mma):
        raise ValueError(f"{spec}: the mma.sync kernel's {spec.mma} warps take block_dim {32 * spec.mma} (1 on the "
                         f"CPU), got {spec.block_dim}")
    if spec.pad_c or spec.bias or spec.activation is not None:
        raise ValueError(f"{spec}: the mma.sync kernel keeps its accumulator in registers and stores it itself: no "
                         "pad_c, bias or activation")
    if spec.chunk != 16 or (spec.pad_ab * ITEM_BYTES[spec.in_dtype]) % 16:
        raise ValueError(f"{spec}: the mma.sync kernel's ldmatrix reads 16-byte rows: chunk 16 and pad_ab a whole "
                         "number of 16 bytes")
    if spec.swizzle and (spec.pad_ab or any(c % SWIZZLE_COLS for _, c in (spec.a_tile(), spec.b_tile()))):
        raise ValueError(f"{spec}: swizzled float64 stages are unpadded (pad_ab 0) rows of whole {SWIZZLE_COLS}-"
                         "element (128-byte) groups: tk, tm and tn multiples of 16")


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

