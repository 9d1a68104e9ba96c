"""Round 6 probes (H100): the redesigned colsum GEMV kernel, the split-K pipelined plan of 16-row products,
and the odd shapes after staging both operands in one launch.

Each variant patches module constants of the package in its own process (nothing in the package
changes), checks its product against float64 first, then times one whole call two ways: CUDA-graph replay
(GPU time, warm L2) and ``triton.testing.do_bench`` (L2 flushed between calls, launch included: the
benchmark runner's method), with cuBLAS (torch.matmul) timed by do_bench in the same process.

    python benchmarks/probes/round6.py warm -j 16        # compile every variant, parallel processes
    python benchmarks/probes/round6.py time --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _graph import replay_us  # noqa: E402

# case: (batch, M, N, K, dtype, layout of B ("N": (K, N), "T": (N, K)), options)
CASES = {
    "gemv_4096": (1, 1, 4096, 4096, "float16", "N"),
    "gemv_8192": (1, 1, 8192, 8192, "float16", "N"),
    "gemv_4096_f32": (1, 1, 4096, 4096, "float32", "N"),
    "gemv_512x16384": (1, 1, 512, 16384, "float16", "N"),
    "gemv_2048": (1, 1, 2048, 2048, "float16", "N"),
    "gemv_256x65536": (1, 1, 256, 65536, "float16", "N"),
    "gemv_4096_b4": (4, 1, 4096, 4096, "float16", "N"),
    "m16_8192": (1, 16, 8192, 8192, "float16", "N"),
    "odd_1023": (1, 1023, 1025, 1027, "float16", "N"),
    "odd_127": (1, 127, 4099, 1031, "float16", "N"),
    "odd_4095": (1, 4095, 4095, 4095, "float16", "N"),
    "odd_4095_dpad": (1, 4095, 4095, 4095, "float16", "N"),  # D: a view of rows 4096 wide (DPAD)
    "m127_1024": (1, 127, 4104, 1024, "float16", "N"),  # 127x4099x1031 with aligned rows and K
    "m256_2048": (1, 256, 2048, 2048, "float16", "N"),
    "m512_1024": (1, 512, 1024, 1024, "float16", "N"),
    "m128_4096": (1, 128, 4096, 4096, "float16", "N"),
    "sq_1000": (1, 1000, 1000, 1000, "float16", "N"),
    "sq_512": (1, 512, 512, 512, "float16", "N"),
    # a grid of exactly one block per SM (132 entries of one 128x128 output tile each), or two waves
    "b132_k128": (132, 128, 128, 128, "float16", "N"),
    "b132_k512": (132, 128, 128, 512, "float16", "N"),
    "b132_k2048": (132, 128, 128, 2048, "float16", "N"),
    "b264_k128": (264, 128, 128, 128, "float16", "N"),
    "b264_k2048": (264, 128, 128, 2048, "float16", "N"),
    "b528_64x32_k128": (528, 64, 32, 128, "float16", "N"),
    "b528_64x32_k1024": (528, 64, 32, 1024, "float16", "N"),
    "b4096_32": (4096, 32, 32, 32, "float16", "N"),
    "b64_256": (64, 256, 256, 256, "float16", "N"),
    # round 16's float32 '|family' buckets (benchmarks/results/round16/: tuner timings only)
    "f32_b256_64": (256, 64, 64, 64, "float32", "N"),
    "f32_b64_256": (64, 256, 256, 256, "float32", "N"),
    "f32_8x4096": (1, 8, 4096, 4096, "float32", "N"),
    "f32_16x8192": (1, 16, 8192, 8192, "float32", "N"),
    "odd_4097": (1, 4097, 4097, 4097, "float16", "N"),
    "odd_4097_bf16_T": (1, 4097, 4097, 4097, "bfloat16", "T"),
    "odd_2049": (1, 2049, 2049, 2049, "float16", "N"),
    "odd_2049_T": (1, 2049, 2049, 2049, "float16", "T"),
    "odd_4097_T": (1, 4097, 4097, 4097, "float16", "T"),
    "odd_4099": (1, 4099, 4099, 4099, "float16", "N"),
    "odd_4100": (1, 4100, 4100, 4100, "float16", "N"),
    "odd_4103": (1, 4103, 4103, 4103, "float16", "N"),
    "odd_4104": (1, 4104, 4104, 4104, "float16", "N"),
    "odd_8193x4097": (1, 8193, 4097, 4096, "float16", "N"),
    "sq_4096": (1, 4096, 4096, 4096, "float16", "N"),
    "sq_8192": (1, 8192, 8192, 8192, "float16", "N"),
    "tf32_4096": (1, 4096, 4096, 4096, "tf32", "N"),
    "tf32_4095": (1, 4095, 4095, 4095, "tf32", "N"),
    "tf32_4096_T": (1, 4096, 4096, 4096, "tf32", "T"),
    "tf32_1023": (1, 1023, 1025, 1027, "tf32", "N"),
    "tf32_2048": (1, 2048, 2048, 2048, "tf32", "N"),
    "tf32_1000": (1, 1000, 1000, 1000, "tf32", "N"),
    "sq_1536": (1, 1536, 1536, 1536, "float16", "N"),
    "m2048_1024": (1, 2048, 1024, 1024, "float16", "N"),  # B stored (N, K): no transposing copy in the mma.sync kernel
    "sq_8192_T": (1, 8192, 8192, 8192, "float16", "T"),
    "bf16_8192_T": (1, 8192, 8192, 8192, "bfloat16", "T"),
    "f64_4096": (1, 4096, 4096, 4096, "float64", "N"),
    "f32_4096": (1, 4096, 4096, 4096, "float32", "N"),
    "f32_4096_T": (1, 4096, 4096, 4096, "float32", "T"),
    "f32_8192": (1, 8192, 8192, 8192, "float32", "N"),
    "f32_4095": (1, 4095, 4095, 4095, "float32", "N"),
    "f32_1000": (1, 1000, 1000, 1000, "float32", "N"),
    "bf16_8192": (1, 8192, 8192, 8192, "bfloat16", "N"),
    "sq_4096_T": (1, 4096, 4096, 4096, "float16", "T"),
    "b1024_32": (1024, 32, 32, 32, "float16", "N"),
    "b256_32": (256, 32, 32, 32, "float16", "N"),
    "b4096_32_k128": (4096, 32, 32, 128, "float16", "N"),
    "b4096_24": (4096, 24, 24, 24, "float16", "N"),
    "b4096_16": (4096, 16, 16, 16, "float16", "N"),
    "b4096_32_bf16": (4096, 32, 32, 32, "bfloat16", "N"),
    "b4096_32_T": (4096, 32, 32, 32, "float16", "T"),
    "b4096_32_f32": (4096, 32, 32, 32, "float32", "N"),
    "b10000_16_f32": (10000, 16, 16, 16, "float32", "N"),
}
DPAD = {"odd_4095_dpad": 4096}  # case -> the row length of the buffer D is a view of
GEMV = ["gemv_4096", "gemv_8192", "gemv_4096_f32", "gemv_512x16384"]
# variant: (cases, {"family": ..., "gemv": {constant: value}, "skinny": {constant: value}})
VARIANTS = {
    "default": (GEMV + ["m16_8192", "odd_1023", "odd_127", "odd_4095"], {}),
    "cs_b512_c4_u4": (GEMV, {"family": "gemv"}),
    "cs_b256_c4_u4": (GEMV, {"family": "gemv", "gemv": {"COLSUM_BLOCK": 256}}),
    "cs_b1024_c4_u4": (GEMV, {"family": "gemv", "gemv": {"COLSUM_BLOCK": 1024}}),
    "cs_b512_c8_u4": (GEMV, {"family": "gemv", "gemv": {"COL_LANES": 8}}),
    "cs_b512_c2_u4": (GEMV, {"family": "gemv", "gemv": {"COL_LANES": 2}}),
    "cs_b512_c4_u8": (GEMV, {"family": "gemv", "gemv": {"UNROLL": 8}}),
    "cs_b256_c4_u8": (GEMV, {"family": "gemv", "gemv": {"COLSUM_BLOCK": 256, "UNROLL": 8}}),
    "cs_b512_c4_u4_s4": (GEMV, {"family": "gemv", "gemv": {"COLSUM_SPLIT_BELOW": 2}}),
    "sp_s4": (["m16_8192"], {"skinny": {"_SPLIT_BLOCKS": 256}}),
    "sp_s2": (["m16_8192"], {"skinny": {"_SPLIT_BLOCKS": 128}}),
    "sp_tk64_st3_s8": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tk": 64, "stages": 3}}}),
    "sp_tk64_st3_s4": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tk": 64, "stages": 3}, "_SPLIT_BLOCKS": 256}}),
    "sp_tk64_st4_s4": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tk": 64, "stages": 4}, "_SPLIT_BLOCKS": 256}}),
    "sp_tn64_s4": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tn": 64}, "_SPLIT_BLOCKS": 512}}),
    "sp_tn64_s2": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tn": 64}, "_SPLIT_BLOCKS": 256}}),
    "sp_tn256_b256_s4": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tn": 256, "tk": 64, "block_dim": 256},
                                                    "_SPLIT_BLOCKS": 128}}),
    "sp_b256_s4": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"block_dim": 256}, "_SPLIT_BLOCKS": 256}}),
}

# Second run (R6_SET=2): the package's new defaults (colsum planned, 4 K splits), skinny for reference, and
# the one-wave colsum block with more rows or chunks in flight; cold timings repeated 3x, interleaved
# with cuBLAS (the first run's cold cuBLAS times of one shape ranged 20.9-36.6 us across processes).
SET2 = {
    "default": (GEMV + ["m16_8192", "odd_1023", "odd_127"], {}),
    "skinny": (GEMV, {"family": "skinny"}),
    "cs_b1024_u8": (["gemv_4096"], {"family": "gemv", "gemv": {"COLSUM_BLOCK_ONE_WAVE": 1024, "UNROLL": 8}}),
    "cs_b1024_c8": (["gemv_4096"], {"family": "gemv", "gemv": {"COL_LANES": 8}}),
    "sp_tn64_st3_s2": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tn": 64, "stages": 3}}}),
    "sp_tn64_tk64_st4_s2": (["m16_8192"], {"skinny": {"SPLIT_PIPE": {"tn": 64, "tk": 64, "stages": 4}}}),
}
# Third run (R6_SET=3): colsum strips of other widths (col_lanes chunks per row: 8 = 128 bytes, 16 = 256,
# K split where the strips are few) and rows in flight, fields of the planner's spec replaced ("spec").
G2 = ["gemv_4096", "gemv_8192"]
SET3 = {
    "default": (G2, {}),
    "cs_c8": (G2, {"spec": {"col_lanes": 8}}),
    "cs_c16": (G2, {"spec": {"col_lanes": 16}}),
    "cs_c16_b512": (G2, {"spec": {"col_lanes": 16, "block_dim": 512}}),
    "cs_c8_b512": (G2, {"spec": {"col_lanes": 8, "block_dim": 512}}),
    "cs_u8": (G2, {"spec": {"unroll": 8}}),
    "cs_c2": (G2, {"spec": {"col_lanes": 2}}),
}
# Fourth run (R6_SET=4): small grids through the split-K pipelined plan (K slices as a batch into the
# workspace, skinny's finishing pass), its M limit lifted, against the default (64x32 tiles, one pass).
MID = ["m127_1024", "m256_2048", "m512_1024", "m128_4096"]
_SP = {"MAX_SMALL": 1024}
def _split(tm: int, tn: int, block: int, blocks: int) -> dict:
    return {"skinny": {**_SP, "SPLIT_PIPE": {"tm": tm, "tn": tn, "block_dim": block}, "_SPLIT_BLOCKS": blocks}}


SET4 = {
    "default": (MID, {}),
    "mid_128x64_s264": (MID, _split(128, 64, 256, 264)),
    "mid_128x64_s132": (MID, _split(128, 64, 256, 132)),
    "mid_128x128_s132": (MID, _split(128, 128, 256, 132)),
    "mid_64x64_s264": (MID, _split(64, 64, 128, 264)),
    "mid_64x64_s528": (MID, _split(64, 64, 128, 528)),
}
# Fifth run (R6_SET=5): more stages in flight for small grids (per-step latency, not the MMA, bounds
# them: 127x4099x1031 spends ~2.2 us per 128-deep K step with 64x32 tiles), through Options.pipe_config.
def pipe_variants(cases: list, *configs: str) -> dict:
    """One variant per ``Options.pipe_config`` text, named by its fields (``64x32x128_s3_b128_o1``)."""
    return {pc.replace("pipe/", "").replace("/", "_"): (cases, {"pipe": pc}) for pc in configs}


SMALLG = ["m127_1024", "odd_127", "m256_2048", "m512_1024", "m128_4096", "sq_1000", "sq_512"]
SET5 = {"default": (SMALLG, {}),
        **pipe_variants(SMALLG, "pipe/64x32x128/s3/b128/o1", "pipe/64x32x64/s4/b128/o1", "pipe/64x32x64/s3/b128/o2",
                        "pipe/64x64x64/s4/b128/o1", "pipe/128x64x64/s4/b256/o1", "pipe/64x64x128/s3/b128/o1")}
# Sixth run (R6_SET=6): where a block's time goes -- the fixed cost (launch, prologue, epilogue) against
# the cost per K step, from batched grids of one output tile per entry and K of 1 to 16 steps.
FIX = ["b132_k128", "b132_k512", "b132_k2048", "b264_k128", "b264_k2048"]
SET6 = {
    "t128": (FIX, {"pipe": "pipe/128x128x128/s2/b256/o1"}),
    "t64x32": (["b528_64x32_k128", "b528_64x32_k1024"], {"pipe": "pipe/64x32x128/s2/b128/o1"}),
}
# Seventh run (R6_SET=7, round 7): after the accumulator's snippet zero fill and the "scale" epilogue's snippet
# stores (kernels/pipelined.py) -- the defaults, and the pipelined family for the batched small products
# (the small family plans 4096 x 32^3; 128x128 tiles plan 64 x 256^3) now that a block's fixed cost fell.
SET7 = {"default": (["m16_8192", "odd_4095", "odd_4097", "sq_4096", "sq_1000", "sq_512", "odd_127", "odd_1023",
                     "b4096_32", "b64_256"], {}),
        **pipe_variants(["b4096_32"], "pipe/32x32x32/s2/b32/o0", "pipe/32x32x32/s2/b64/o0", "pipe/32x32x32/s2/b128/o0"),
        **pipe_variants(["b64_256"], "pipe/64x64x128/s2/b128/o2", "pipe/128x64x128/s2/b256/o1",
                        "pipe/64x128x128/s2/b128/o1", "pipe/64x64x64/s2/b128/o3", "pipe/128x128x64/s2/b256/o1",
                        "pipe/64x32x128/s2/b128/o1")}
# Eighth run (R6_SET=8): how far the pipelined 32x32x32 tiles' lead over the small family reaches (batch,
# K, sides, dtypes, a transposed B), and 16x16x16 tiles.
B32 = ["b4096_32", "b1024_32", "b256_32", "b4096_32_k128", "b4096_24", "b4096_32_bf16", "b4096_32_T", "b4096_32_f32"]
B16 = ["b4096_16", "b10000_16_f32"]
SET8 = {"default": (B32 + B16, {}), **pipe_variants(B32 + B16, "pipe/32x32x32/s2/b64/o0"),
        **pipe_variants(B32, "pipe/32x32x32/s2/b32/o0"),
        **pipe_variants(["b1024_32", "b256_32", "b4096_32_k128"], "pipe/32x32x32/s2/b128/o0"),
        **pipe_variants(["b4096_32_k128"], "pipe/32x32x64/s2/b64/o0"), **pipe_variants(B16, "pipe/16x16x16/s2/b32/o0")}
# Ninth run (R6_SET=9): the snippets of round 7 switched off one at a time (the pipelined module's
# native_store / native_acc replaced), on the split-K plan of 16x8192x8192 (slower after them?) and controls.
_OFF = lambda spec: False  # noqa: E731
R9 = ["m16_8192", "sq_4096", "b64_256", "sq_1000"]
SET9 = {"default": (R9, {}), "no_store": (R9, {"pipelined": {"native_store": _OFF}}),
        "no_snippets": (R9, {"pipelined": {"native_store": _OFF, "native_acc": _OFF}})}
# Tenth run (R6_SET=10): the store snippet over tile_zeros' accumulator (the new default), against the zero
# snippet too (round 7's first form) and neither (round 6's kernels).
R10 = R9 + ["odd_4095", "b4096_32", "sq_512"]
SET10 = {"default": (R10, {}), "zero_snippet": (R10, {"pipelined": {"ZERO_ACC_SNIPPET": True}}),
         "no_store": (R10, {"pipelined": {"native_store": _OFF}})}
# Eleventh run (R6_SET=11, round 8): the peeled last row/column (core/plan.py _peel: the pipelined kernel over
# the core, the GEMV family over the edge) -- peeling the row (default), the column, or nothing; and colsum
# strips a warp wide (col_lanes 32: 512 contiguous bytes of a row per warp load, K split into skinny's
# workspace), for its cold-L2 time against cuBLAS's.
P11 = ["odd_4097", "odd_4097_bf16_T", "odd_2049", "odd_8193x4097"]
SET11 = {"default": (P11 + ["sq_4096"] + G2, {}), "peel_col": (P11, {"plan": {"PEEL_FIRST": "col"}}),
         "nopeel": (P11, {"plan": {"PEEL_MIN_GAIN": 1.0}}),
         "cs_c32": (G2, {"spec": {"col_lanes": 32}}),
         "cs_c32_b512": (G2, {"spec": {"col_lanes": 32, "block_dim": 512}}),
         "cs_c32_b256": (G2, {"spec": {"col_lanes": 32, "block_dim": 256}}),
         "cs_c16_b256": (G2, {"spec": {"col_lanes": 16, "block_dim": 256}})}
# Twelfth run (R6_SET=12): after peeling only one-wide edges whose vector is contiguous (B stored (N, K) lets
# both sides peel: 2049^3 both, 4097^3 one) and edges of 2..8 by the skinny family (4099-4104).
P12 = ["odd_2049_T", "odd_4097_T", "odd_4099", "odd_4100", "odd_4103", "odd_4104"]
SET12 = {"default": (P12, {}), "nopeel": (P12, {"plan": {"PEEL_MIN_GAIN": 1.0}}),
         "peel_col": (["odd_4099", "odd_4104"], {"plan": {"PEEL_FIRST": "col"}})}
# Thirteenth run (R6_SET=13, round 9): 16x8192x8192 through the split-K plan with 32-row pipelined tiles (rows
# 16-31 of A zero-filled by the copies; tiles of 32 rows take the snippet zero fill and epilogue, which the
# 16-row tiles measured slower with), against the 16-row default.
M13 = ["m16_8192"]
_T32 = {"tm": 32}
SET13 = {"default": (M13, {}),
         "sp_tm32": (M13, {"skinny": {"SPLIT_PIPE": _T32}}),
         "sp_tm32_b256": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "block_dim": 256}}}),
         "sp_tm32_tn64_s512": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tn": 64}, "_SPLIT_BLOCKS": 512}}),
         "sp_tm32_tn256_b256": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tn": 256, "tk": 64, "block_dim": 256},
                                                 "_SPLIT_BLOCKS": 512}}),
         "sp_tm32_tk64_st3": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tk": 64, "stages": 3}}}),
         "sp_tm32_s8": (M13, {"skinny": {"SPLIT_PIPE": _T32, "_SPLIT_BLOCKS": 512}}),
         "sp_b256": (M13, {"skinny": {"SPLIT_PIPE": {"block_dim": 256}}})}
# Fourteenth run (R6_SET=14): D rows off the 8-byte grid (odd N) stored in whole words on the grid
# (pipelined.SHIFTED_STORE, the default now) against element stores, and D as a view of 16-byte aligned rows
# (no staging difference: what the stores alone cost); more 32-row split-K tiles for 16x8192x8192.
D14 = ["odd_4095", "odd_4095_dpad", "odd_4097", "odd_4099", "odd_1023", "odd_127", "odd_4097_bf16_T"]
SET14 = {"default": (D14 + M13, {}), "noshift": (D14, {"pipelined": {"SHIFTED_STORE": False}}),
         "sp_tm32_tk64_st3": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tk": 64, "stages": 3}}}),
         "sp_tm32_tk64_st4": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tk": 64, "stages": 4}}}),
         "sp_tm32_tk32_st4": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tk": 32, "stages": 4}}}),
         "sp_tm32_tk64_st3_s8": (M13, {"skinny": {"SPLIT_PIPE": {**_T32, "tk": 64, "stages": 3},
                                                  "_SPLIT_BLOCKS": 512}})}
# Fifteenth run (R6_SET=15): the bands GEMV (gemv.BANDS_*: K split into bands of rows, a block reading 4 KiB of
# each row, a finishing kernel) against colsum (BANDS_MIN_BYTES out of reach), and its constants.
G15 = ["gemv_4096", "gemv_8192", "gemv_4096_f32", "gemv_512x16384", "gemv_2048", "gemv_256x65536", "gemv_4096_b4",
       "odd_4097"]
G15s = ["gemv_4096", "gemv_8192", "gemv_4096_f32"]
SET15 = {"default": (G15, {}), "colsum": (G15, {"gemv": {"BANDS_MIN_BYTES": 1 << 62}}),
         "u4": (G15s, {"gemv": {"BANDS_UNROLL": 4}}), "u16": (G15s, {"gemv": {"BANDS_UNROLL": 16}}),
         "b128": (G15s, {"gemv": {"BANDS_BLOCK": 128}}), "b512": (G15s, {"gemv": {"BANDS_BLOCK": 512}}),
         "split1": (G15s, {"gemv": {"BANDS_SPLIT_TO": 1}}), "split4": (G15s, {"gemv": {"BANDS_SPLIT_TO": 4}}),
         "fin8": (G15s, {"gemv": {"BANDS_FINISH_WARPS": 8}})}
# Sixteenth run (R6_SET=16): bands with 16-byte stores of its partial sums (scalar stores in run 15).
SET16 = {"default": (G15, {}),
         "colsum": (G15s + ["gemv_512x16384", "gemv_256x65536"], {"gemv": {"BANDS_MIN_BYTES": 1 << 62}}),
         "fin8": (G15s, {"gemv": {"BANDS_FINISH_WARPS": 8}}), "u4": (G15s, {"gemv": {"BANDS_UNROLL": 4}})}
# Seventeenth run (R6_SET=17): the copy snippet's interior fast path (pipelined.FAST_COPY: a tile wholly inside
# its operand issues its cp.async chunks from one address, no per-chunk bounds arithmetic) against the
# per-chunk loop alone.
F17 = ["sq_4096", "odd_4095", "odd_4097", "sq_1000", "b64_256", "m16_8192", "b4096_32", "odd_1023", "odd_127"]
SET17 = {"default": (F17, {}), "nofast": (F17, {"pipelined": {"FAST_COPY": False}})}
# Eighteenth run (R6_SET=18): with the copies' fast path, the large problems' tiles again (shallower K steps
# with more stages, 128 threads); round 4's ranking was taken with the per-chunk copy loop.
L18 = ["sq_4096", "odd_4095", "sq_8192"]
SET18 = {"default": (L18, {}), **pipe_variants(L18, "pipe/128x128x64/s3/b256/o1", "pipe/128x128x64/s4/b256/o1",
                                               "pipe/128x128x128/s2/b128/o1", "pipe/128x128x32/s4/b256/o1")}
# Nineteenth run (R6_SET=19): 128 threads for the large fp16/bf16 tiles (the default after run 18) in other
# layouts and bf16, and for tf32 and fp64's tuned tiles.
B19 = ["sq_4096", "sq_4096_T", "bf16_8192", "odd_4097"]
SET19 = {"default": (B19 + ["tf32_4096", "tf32_4095", "f64_4096"], {}),
         **pipe_variants(B19, "pipe/128x128x128/s2/b256/o1"),
         **pipe_variants(["tf32_4096", "tf32_4095"], "pipe/128x128x64/s2/b128/o1"),
         **pipe_variants(["f64_4096"], "pipe/128x64x32/s2/b128/o1", "pipe/64x64x32/s2/b128/o1")}
# Twentieth run (R6_SET=20, round 10): the small batched grid 64 x 256^3 (two waves of one 128x128 block per SM,
# fixed cost per block dominating) over tiles that fit several blocks per SM; tf32's tiles with a register
# accumulator ("pspec": fields replaced in pipelined.default_spec) or shallower K steps; the bands GEMV's
# finishing kernel with more warps and more band sums in flight per thread (3.0 us by the profiler in round 9).
B20 = ["b64_256"]
T20 = ["tf32_4096"]
G20 = ["gemv_4096", "gemv_8192", "gemv_4096_b4", "odd_4097"]
SET20 = {"default": (B20 + T20 + G20, {}),
         **pipe_variants(B20, "pipe/128x128x128/s2/b256/o1", "pipe/128x128x64/s2/b128/o1", "pipe/128x128x64/s3/b256/o1",
                         "pipe/64x128x64/s2/b128/o2", "pipe/128x64x64/s2/b128/o2", "pipe/64x64x64/s3/b128/o3",
                         "pipe/64x64x64/s2/b128/o4", "pipe/64x64x128/s2/b128/o2", "pipe/64x128x128/s2/b128/o1",
                         "pipe/128x64x128/s2/b256/o1", "pipe/64x64x64/s4/b128/o2", "pipe/64x128x64/s2/b256/o2"),
         **pipe_variants(T20, "pipe/128x128x32/s3/b256/o1", "pipe/128x128x32/s4/b256/o1", "pipe/128x128x64/s2/b512/o1"),
         "tf32_regacc": (T20, {"pspec": {"pad_c": 0}}),
         "tf32_regacc_s3": (T20, {"pspec": {"pad_c": 0, "stages": 3}}),
         "fin16": (G20, {"gemv": {"BANDS_FINISH_WARPS": 16}}),
         "fin32": (G20, {"gemv": {"BANDS_FINISH_WARPS": 32}}),
         "fin16_u16": (G20, {"gemv": {"BANDS_FINISH_WARPS": 16, "BANDS_FINISH_UNROLL": 16}}),
         "fin8_u32": (G20, {"gemv": {"BANDS_FINISH_UNROLL": 32}}),
         "fin32_u4": (G20, {"gemv": {"BANDS_FINISH_WARPS": 32, "BANDS_FINISH_UNROLL": 4}})}
# Twenty-first run (R6_SET=21): persistent blocks (pipelined.PipeSpec.persistent: a grid of one block per SM,
# each looping over output tiles with its copies running ahead across tile boundaries) against one tile per
# block; for 64 x 256^3 also smaller tiles with several persistent blocks per SM; the 32x32 tiles of batched
# small products with 8 persistent blocks per SM.
P21 = ["sq_4096", "sq_8192", "odd_4095", "b64_256", "tf32_4096", "sq_1000", "f64_4096", "odd_4097", "bf16_8192"]
SET21 = {"default": (P21, {}), "per1": (P21, {"pspec": {"persistent": 1}}),
         "per2_128x64": (B20, {"pspec": {"persistent": 2}, "pipe": "pipe/128x64x64/s2/b128/o2"}),
         "per4_64x64": (B20, {"pspec": {"persistent": 4}, "pipe": "pipe/64x64x64/s2/b128/o4"}),
         "per2_64x128": (B20, {"pspec": {"persistent": 2}, "pipe": "pipe/64x128x64/s2/b128/o2"}),
         "per1_128x128x64": (B20, {"pspec": {"persistent": 1}, "pipe": "pipe/128x128x64/s3/b256/o1"}),
         "per8_tiny": (["b4096_32", "b1024_32"], {"pspec": {"persistent": 8}}),
         "default_tiny": (["b4096_32", "b1024_32"], {})}
# Twenty-second run (R6_SET=22, round 11): exact float32 through the SIMT kernel (pipelined.PipeSpec.simt: 8x8
# outputs per thread in registers, float32 FMAs over the cp.async stages, one barrier per K step) against the
# default (the tiled family's MathDx SIMT GEMM, 32.3 TFLOP/s at 4096^3 in round 9's runner; cuBLAS 51.6).
F22 = ["f32_4096", "f32_4096_T", "f32_8192", "f32_4095", "f32_1000"]
SET22 = {"default": (F22, {}),
         **pipe_variants(F22, "pipe/128x128x16/s3/b256/o2/simt", "pipe/128x128x16/s2/b256/o2/simt",
                         "pipe/128x128x16/s4/b256/o2/simt", "pipe/128x128x32/s3/b256/o1/simt",
                         "pipe/128x64x16/s3/b128/o3/simt", "pipe/64x64x32/s3/b64/o4/simt")}
# (ptxas 13.0 offline, sm_90, NN: 126-128 registers and no spill for the 128x128x16 ones under (256, 2); 128x128x32
# spills 60 bytes under (256, 2), so it runs one block per SM here with 168 registers.)
# Twenty-third run (R6_SET=23, round 12): 16-bit inputs through the mma.sync kernel (pipelined.PipeSpec.mma: ldmatrix
# fragments and mma.sync.m16n8k16 in block_dim / 32 warps, float32 sums in registers, one barrier per K step) against
# the default (tile_matmul; round 9's runner: fp16 4096^3 184.6-189.4 TFLOP/s, bf16 8192^3 193.1, cuBLAS ~700).
# ptxas 13.0 offline (sm_90, NN): 218 registers for 128x128 with 4 warps, 216-224 for 8 warps of 64x64, 176-187 for 8
# warps of 64x32; none spills (8 warps under (256, 2) spill 44-80 bytes: left out).
F23 = ["sq_4096", "sq_4096_T", "sq_8192", "bf16_8192", "odd_4095", "sq_1000", "b64_256"]
SET23 = {"default": (F23 + ["odd_1023"], {}),
         **pipe_variants(F23, "pipe/128x128x32/s3/b128/o2/mma", "pipe/128x128x32/s4/b128/o2/mma",
                         "pipe/128x128x64/s3/b128/o1/mma", "pipe/128x256x32/s3/b256/o1/mma",
                         "pipe/256x128x32/s3/b256/o1/mma", "pipe/128x128x64/s3/b256/o1/mma",
                         "pipe/128x64x32/s4/b128/o3/mma"),
         # the product alone (pipelined.DIAG_NO_REFILL: no copies after the prologue; results wrong, time only)
         "nocopy_128x128x32_s3_b128_o2_mma": (["sq_4096", "sq_8192", "tf32_4096"],
                                             {"pipe": "pipe/128x128x32/s3/b128/o2/mma",
                                              "pipelined": {"DIAG_NO_REFILL": True}}),
         "nocopy_128x256x32_s3_b256_o1_mma": (["sq_4096", "sq_8192"], {"pipe": "pipe/128x256x32/s3/b256/o1/mma",
                                                                       "pipelined": {"DIAG_NO_REFILL": True}}),
         # smaller tiles for the small grids (64 x 256^3: 0.50x cuBLAS, issue 18 wants 0.8; 1000^3)
         **pipe_variants(["b64_256", "sq_1000", "odd_1023"], "pipe/64x64x32/s4/b128/o4/mma",
                         "pipe/64x128x32/s4/b128/o3/mma", "pipe/128x64x64/s3/b128/o2/mma")}
# Twenty-fourth run (R6_SET=24): tf32 through the mma.sync kernel (m16n8k8 over stages copied K-contiguous, each
# fragment register rounded with cvt.rna) against the default (tile_matmul tf32: 97.0 TFLOP/s at 4096^3 in round 9's
# runner, 4095^3 0.64x cuBLAS). ptxas: 208-220 registers for 128x128x32 with 4 warps, 136-156 with 8, no spill. NN
# copies B (stored (K, N)) transposed, 4 bytes at a time; tf32_4096_T (B stored (N, K)) copies both in 16-byte chunks.
T24 = ["tf32_4096", "tf32_4096_T", "tf32_4095"]
SET24 = {"default": (T24, {}),
         **pipe_variants(T24, "pipe/128x128x32/s3/b128/o2/mma", "pipe/128x128x32/s3/b256/o1/mma",
                         "pipe/128x256x32/s3/b256/o1/mma", "pipe/128x128x64/s3/b256/o1/mma",
                         "pipe/128x64x32/s4/b128/o3/mma")}
# (Round 12's run of set 24 also held set 23's last eight variants, an editing slip since mended; its rows are in
# benchmarks/results/round12/r24p.txt. Since that round the "default" variants are the snippet defaults
# (pipelined.MMA_DEFAULT); {"pipelined": {"MMA_DEFAULT": False}} times tile_matmul's kernels.)
# Twenty-fifth run (R6_SET=25): 16-bit NT (B stored (N, K), as torch's linear weights) through the wgmma kernel
# (pipelined.PipeSpec.wgmma: sm_90a warpgroup MMAs from unpadded K-major core-matrix stages, one warpgroup per 64
# rows) against the default and the mma.sync kernel. Never run on a GPU before this probe: if its first row is an
# error or its err column is large, the GPU tests test_wgmma_forced_on_cuda say more. ptxas (sm_90a): 126-128
# registers for 128-column tiles, 184-198 for 256, no spill.
T25 = ["sq_4096_T", "sq_8192_T", "bf16_8192_T", "odd_4097_T"]
SET25 = {"default": (T25, {}),
         **pipe_variants(T25, "pipe/128x128x64/s3/b256/o1/wgmma", "pipe/128x256x64/s3/b256/o1/wgmma",
                         "pipe/128x256x32/s4/b256/o1/wgmma", "pipe/256x128x64/s3/b512/o1/wgmma",
                         "pipe/64x128x64/s4/b128/o2/wgmma", "pipe/128x128x32/s4/b256/o2/wgmma",
                         "pipe/128x128x32/s3/b128/o2/mma")}
# Twenty-sixth run (R6_SET=26, round 13): tf32 after (a) the mma.sync kernel's scalar fragment loads for operands
# stored with k across rows (B of layout N, A of layout T: copied as stored in 16-byte chunks, 32-bit shared loads,
# where round 12 copied them transposed 4 bytes at a time: NN 125.7 against NT 145.1) and (b) the shipped table's
# stale tf32 winners dropped (they put tile_matmul kernels over the mma.sync default: 96.6 in round 13's runner); the
# old table's choices forced for comparison. Exact fp32: other SIMT tiles, stages and occupancies (the default
# 128x64x16 s3 o3 measured 41.4 in round 13's runner against issue 16's 41.5).
T26 = ["tf32_4096", "tf32_4096_T", "tf32_4095", "tf32_2048", "tf32_1023"]
F26 = ["f32_4096", "f32_4095"]
SET26 = {"default": (T26 + F26, {}),
         "old_table": (["tf32_4096", "tf32_4095", "tf32_2048"], {"pipe": "pipe/128x128x64/s2/b256/o1"}),
         "old_table_1023": (["tf32_1023"], {"pipe": "pipe/128x96x64/s2/b256/o1"}),
         **pipe_variants(["tf32_4095", "tf32_2048", "tf32_1023"], "pipe/128x64x32/s4/b128/o3/mma",
                         "pipe/128x128x32/s4/b128/o1/mma"),
         **pipe_variants(F26, "pipe/128x64x16/s4/b128/o3/simt", "pipe/128x64x16/s3/b128/o4/simt",
                         "pipe/64x128x16/s3/b128/o3/simt", "pipe/128x64x32/s2/b128/o3/simt",
                         "pipe/128x64x32/s3/b128/o2/simt")}
# Twenty-seventh run (R6_SET=27; prepared in round 13, not yet run): the medium grids that still run tile_matmul
# kernels (round 13's runner: fp16 1536^3 0.25x cuBLAS on 96x128 tiles, 2048x1024x1024 0.47x, 1000^3 0.48x, 256 x
# 2048^2 0.39x; tf32 1000^3 0.50x, 1023x1025x1027 0.61x) through the mma.sync kernel's smaller tiles and two to
# four blocks per SM.
M27 = ["sq_1536", "m2048_1024", "sq_1000", "m256_2048", "odd_1023"]
SET27 = {"default": (M27 + ["tf32_1000", "tf32_1023"], {}),
         **pipe_variants(M27, "pipe/128x128x32/s3/b128/o2/mma", "pipe/128x64x32/s4/b128/o3/mma",
                         "pipe/64x128x32/s4/b128/o3/mma", "pipe/64x64x32/s4/b128/o4/mma",
                         "pipe/64x64x64/s3/b128/o4/mma"),
         **pipe_variants(["tf32_1000", "tf32_1023"], "pipe/128x64x32/s3/b128/o3/mma", "pipe/64x64x32/s4/b128/o4/mma",
                         "pipe/64x128x32/s3/b128/o3/mma")}
# Twenty-eighth run (R6_SET=28; prepared in round 14, not yet run): the bands GEMV with its finish in the same launch
# (gemv.BANDS_FUSED: arrival counters, the last BANDS_FINISHERS bands of a column block finishing it) against the
# two-launch default; issue 18 wants fp16 1x4096x4096 <= 25 us (26.4 in round 13's runner; cuBLAS 21.4). Prediction:
# 22-23 us cold. Every row is checked against float64 first; a wrong fused finish shows there.
G28 = ["gemv_4096", "gemv_8192", "gemv_4096_b4"]
SET28 = {"default": (G28, {}), "fused": (G28, {"gemv": {"BANDS_FUSED": True}}),
         "fused_f16": (["gemv_4096"], {"gemv": {"BANDS_FUSED": True, "BANDS_FINISHERS": 16}}),
         "fused_f32": (["gemv_4096"], {"gemv": {"BANDS_FUSED": True, "BANDS_FINISHERS": 32}})}
# Twenty-ninth run (R6_SET=29; prepared in round 14, not yet run): stream-K (PipeConfig /kN: a grid of N blocks per
# SM sharing every tile's K steps, split tiles summed by their finisher) on the grids whose waves are ragged or short
# -- fp16 1536^3 (144 tiles of 128x128 on 132 SMs), 1000^3 (64 tiles), 1023x1025x1027, 2048x1024^2 (128), 256x2048^2,
# 64 x 256^3 -- and 4096^3 (whole waves: the cost of the bookkeeping), beside the same tiles one per block.
# Prediction: 1536^3 46.5 -> ~30 us, 1000^3 21-24 -> ~15, 4096^3 within 3% of its tile's own time.
M29 = ["sq_1536", "sq_1000", "odd_1023", "m2048_1024", "m256_2048", "b64_256", "sq_4096"]
SET29 = {"default": (M29, {}),
         **pipe_variants(M29, "pipe/128x128x64/s3/b128/o1/k1/mma", "pipe/128x128x32/s3/b128/o2/mma",
                         "pipe/128x128x32/s3/b128/o2/k2/mma", "pipe/64x64x64/s3/b128/o4/mma",
                         "pipe/64x64x64/s3/b128/o4/k4/mma")}
# Thirtieth run (R6_SET=30, round 15): set 28 found the fused finish no faster (26.6 against 26.5 us cold) and its time
# growing ~2.5 us per 32-column group a finisher sums (16 finishers 34.8, 32 29.1, 64 26.8): each finishing thread
# sums its S / 8 = 32 bands BANDS_FINISH_UNROLL (8) at a time, 4 round trips to L2. Here every band sum of a thread
# in flight at once (16, 32), in the finishing kernel and the fused finish, and 16 band rows in flight in the band
# kernel; and for fp16 64 x 256^3 (set 29: 64x64x64 s3 o4 26.4 us cold, 128x128x32 s3 o2 31.6 cold but 20.9 by graph
# replay; Nsight Compute: long-scoreboard stalls lead) 4 stages, so that more of K=256 is in flight at once.
G30 = ["gemv_4096", "gemv_4096_b4", "gemv_8192"]
SET30 = {"default": (G30 + ["b64_256"], {}),
         "fu16": (G30, {"gemv": {"BANDS_FINISH_UNROLL": 16}}),
         "fu32": (G30, {"gemv": {"BANDS_FINISH_UNROLL": 32}}),
         "bu16": (G30, {"gemv": {"BANDS_UNROLL": 16}}),
         "fu32_bu16": (G30, {"gemv": {"BANDS_FINISH_UNROLL": 32, "BANDS_UNROLL": 16}}),
         "fused_fu32": (G30, {"gemv": {"BANDS_FUSED": True, "BANDS_FINISH_UNROLL": 32}}),
         **pipe_variants(["b64_256"], "pipe/64x64x64/s3/b128/o4/mma", "pipe/64x64x64/s4/b128/o3/mma",
                         "pipe/128x128x32/s4/b128/o2/mma", "pipe/128x128x64/s4/b128/o1/mma",
                         "pipe/64x64x32/s4/b128/o4/mma", "pipe/128x64x32/s4/b128/o3/mma",
                         "pipe/64x128x32/s4/b128/o3/mma")}
# Thirty-first run (R6_SET=31, prepared in round 15, not yet run): fewer, taller bands. Round 15's Nsight Compute
# run (results/round15/ncu15.txt, L2 flushed) timed the band kernel of fp16 1x4096x4096 at 15.5 us (68% of DRAM
# peak) -- as fast as cuBLAS's whole GEMV, one kernel of 64 blocks x 384 threads (16.2 us) -- and its finishing
# kernel at 5.8 (its 4.2 MB of partial sums from DRAM there; 3.0 us warm in round 9): the gap to cuBLAS is the finish
# over 256 bands' partial sums per column, which set 30 could not shorten by unrolling or fusing. Here the bands
# are 64, 32 or 17 (BANDS_SPLIT_TO 8, 16, 32; cuBLAS's grid suggests 16 K slices), with 8 or 16 rows in flight,
# separate or fused finish: each column's finish then sums 17-64 partials. Prediction: 22-24 us cold at 32 bands.
def _bands(split_to: int, **more) -> dict:
    return {"gemv": {"BANDS_SPLIT_TO": split_to, **more}}


SET31 = {"default": (G30, {}), "st8": (G30, _bands(8)), "st16": (G30, _bands(16)), "st32": (G30, _bands(32)),
         "st16_bu16": (G30, _bands(16, BANDS_UNROLL=16)), "st32_bu16": (G30, _bands(32, BANDS_UNROLL=16)),
         "st16_fused": (G30, _bands(16, BANDS_FUSED=True)), "st32_fused": (G30, _bands(32, BANDS_FUSED=True)),
         "st16_b512": (G30, _bands(16, BANDS_BLOCK=512))}
# Thirty-second run (R6_SET=32, prepared in round 15, not yet run): persistent mma.sync blocks (PipeConfig /pN with
# /mma: each block loops over the tiles g, g + grid, ..., its copies running ahead across them; round 15). cuBLAS
# runs fp16 64 x 256^3 on a persistent grid of 132 blocks (ncu15.txt), and stream-K, which shares this loop over
# tiles, measured ~55% slower than the plain kernel at 4096^3 (r29p.txt): beside the plain tiles, this says
# whether the loop over tiles or stream-K's split costs that, and whether a persistent grid helps 64 x 256^3.
M32 = ["b64_256", "sq_1000", "sq_1536", "m256_2048", "sq_4096"]
SET32 = {"default": (M32, {}),
         **pipe_variants(M32, "pipe/128x128x32/s4/b128/o2/mma", "pipe/128x128x32/s4/b128/o2/p1/mma",
                         "pipe/128x128x64/s3/b128/o1/mma", "pipe/128x128x64/s3/b128/o1/p1/mma",
                         "pipe/64x64x64/s3/b128/o4/mma", "pipe/64x64x64/s3/b128/o4/p1/mma",
                         # 5-6 stages (round 15; cuBLAS keeps 6 stages of K 64 on 64 x 256^3)
                         "pipe/128x128x32/s5/b128/o2/mma", "pipe/128x128x32/s6/b128/o1/mma",
                         "pipe/128x128x32/s6/b128/o1/p1/mma")}
# Thirty-third run (R6_SET=33, round 17): GEMV bands with row groups (gemv.BANDS_GROUPS). Probe set 31 made the bands
# taller by giving each block more rows, which halved the blocks in flight and lost (8 bands 36.8 us against 26.6).
# Here a block keeps its 256 threads and each thread its 16 rows, but the block's threads form G row groups over G
# times fewer columns (rows read in 4 KiB / G pieces), so the bands are G times taller and the finishing kernel
# sums 256 / G partials per column instead of 256, with the same 512 blocks (st1: twice the bands, 1024 blocks).
# Prediction: 24-25 us cold at G 4-8 (the finish's ~3 us halved or better). And the float32 '|family' buckets
# shipped in round 16 from tuner timings, beside the family the rules give them (rules_*).
G33 = ["gemv_4096", "gemv_4096_b4", "gemv_8192"]
F33T, F33S = ["f32_b256_64", "f32_b64_256"], ["f32_8x4096", "f32_16x8192"]
SET33 = {"default": (G33 + F33T + F33S, {}),
         **{f"g{g}": (G33, {"gemv": {"BANDS_GROUPS": g}}) for g in (2, 4, 8, 16)},
         **{f"g{g}_st1": (G33, {"gemv": {"BANDS_GROUPS": g, "BANDS_SPLIT_TO": 1}}) for g in (4, 8)},
         "rules_tiled": (F33T, {"family": "tiled"}), "rules_splitpipe": (F33S, {"family": "splitpipe"})}
# Thirty-fourth run (R6_SET=34, round 17): the mma.sync epilogue through shared memory (pipelined.STAGED_STORE).
# Nsight Compute (results/round17/ncu17.tgz) put 45% of fp16 64 x 256^3's stall samples and 55% of its instructions
# in the register epilogue's 4-byte stores; the staged one writes the tile to the free A stages and stores 16-byte
# chunks. Staged (default) against unstaged on the planner's choices, and staged tiles for 64 x 256^3 and 1000^3.
# Prediction: 64 x 256^3 from ~25 to ~19 us cold; the medium grids 10-25% faster; 4096^3 within noise.
M34 = ["b64_256", "sq_1000", "m256_2048", "m512_1024", "m2048_1024", "sq_1536", "odd_1023", "sq_4096"]
SET34 = {"default": (M34, {}), "nostage": (M34, {"pipelined": {"STAGED_STORE": False}}),
         **pipe_variants(["b64_256", "sq_1000"], "pipe/128x128x64/s2/b128/o2/mma", "pipe/128x128x64/s3/b128/o1/mma",
                         "pipe/64x64x64/s3/b128/o4/mma", "pipe/128x128x32/s4/b128/o2/mma",
                         "pipe/64x128x64/s3/b128/o3/mma", "pipe/128x64x64/s3/b128/o3/mma")}
# Thirty-fifth run (R6_SET=35, round 17): around the GEMV's new default (4 row groups: 25.2-25.4 us in the runner, the
# target 25): the finishing kernel's warps per 32 columns (it now sums 64 partials, not 256), and 512-thread blocks.
SET35 = {"default": (G33, {}), "fw4": (G33, {"gemv": {"BANDS_FINISH_WARPS": 4}}),
         "fw2": (G33, {"gemv": {"BANDS_FINISH_WARPS": 2}}), "g8_fw4": (G33, {"gemv": {"BANDS_GROUPS": 8,
                                                                                      "BANDS_FINISH_WARPS": 4}}),
         "b512": (G33, {"gemv": {"BANDS_BLOCK": 512}}), "b512_g8": (G33, {"gemv": {"BANDS_BLOCK": 512,
                                                                                 "BANDS_GROUPS": 8}})}
# Thirty-sixth run (R6_SET=36, prepared in round 17, not yet run): the fused finish with row groups. Sets 33 and 35
# left fp16 1x4096x4096 at 25.2-25.9 us (target 25): with 16 groups the finish sums only 16 partials per column and
# the time did not move, so what remains is the kernel boundary (the band kernel's tail, the second launch and its
# ramp), which the fused finish removes. Round 15's fused run (26.8 against 26.5) had 256 bands per column block to
# sum; here 64 (4 groups), 32 (8) or 16 (16), by 1 finisher per column block (the last arrival, no waiting) or the
# default rule (up to 64, under the SM count). Prediction: 23.5-24.5 us cold at 8-16 groups with one finisher.
SET36 = {"default": (G33, {}),
         **{f"fused_g{g}": (G33, {"gemv": {"BANDS_FUSED": True, "BANDS_GROUPS": g}}) for g in (4, 8, 16)},
         **{f"fused_g{g}_f1": (G33, {"gemv": {"BANDS_FUSED": True, "BANDS_GROUPS": g, "BANDS_FINISHERS": 1}})
            for g in (4, 8, 16)}}
# R6_SET -> (variants, cold repeats); unset: the first run's VARIANTS, one repeat.
SETS = {"13": (SET13, 3), "14": (SET14, 3), "15": (SET15, 3), "16": (SET16, 3), "17": (SET17, 3), "18": (SET18, 2),
        "19": (SET19, 2), "20": (SET20, 2), "21": (SET21, 2), "22": (SET22, 3), "23": (SET23, 2), "24": (SET24, 3),
        "25": (SET25, 2), "26": (SET26, 3), "27": (SET27, 3), "28": (SET28, 3), "29": (SET29, 3), "30": (SET30, 3),
        "31": (SET31, 3), "32": (SET32, 3), "33": (SET33, 3), "34": (SET34, 3), "35": (SET35, 3), "36": (SET36, 3),
        "2": (SET2, 3), "3": (SET3, 3), "4": (SET4, 2), "5": (SET5, 2),
        "6": (SET6, 2), "7": (SET7, 2), "8": (SET8, 2), "9": (SET9, 3), "10": (SET10, 3), "11": (SET11, 3),
        "12": (SET12, 3)}
VARIANTS, REPS = SETS.get(os.environ.get("R6_SET", ""), (VARIANTS, 1))


def patch(over: dict) -> None:
    from warp_gemm.core import plan
    from warp_gemm.families import gemv, pipelined, skinny

    for k, v in over.get("plan", {}).items():
        setattr(plan, k, v)
    for k, v in over.get("pipelined", {}).items():
        setattr(pipelined, k, v)
    for k, v in over.get("gemv", {}).items():
        setattr(gemv, k, v)
    if over.get("pspec"):
        import dataclasses

        porig = pipelined.default_spec

        def pchoose(*a, **k):
            return dataclasses.replace(porig(*a, **k), **over["pspec"])

        pipelined.default_spec = pchoose
    if over.get("spec"):
        import dataclasses

        orig = gemv.choose_spec

        def choose(*a, **k):
            spec = orig(*a, **k)
            return None if spec is None else dataclasses.replace(spec, **over["spec"])

        gemv.choose_spec = choose
    for k, v in over.get("skinny", {}).items():
        if k == "SPLIT_PIPE":
            skinny.SPLIT_PIPE = {**skinny.SPLIT_PIPE, **v}
        else:
            setattr(skinny, k, v)


def one(variant: str, case: str, timing: bool) -> dict:
    import torch

    import warp_gemm as wg

    B, M, N, K, dt, lb = CASES[case]
    over = VARIANTS[variant][1]
    tf32 = dt == "tf32"
    tdt = torch.float32 if tf32 else getattr(torch, dt)
    torch.backends.cuda.matmul.allow_tf32 = tf32  # cuBLAS in the same precision
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    lead = (B,) if B > 1 else ()
    a = torch.randn(*lead, M, K, device="cuda", generator=g).to(tdt)
    b = torch.randn(*lead, K, N, device="cuda", generator=g).to(tdt)
    if lb == "T":
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2)
    out = torch.full((*lead, M, DPAD.get(case, N)), float("nan"), device="cuda", dtype=tdt)[..., :N]
    fam = over.get("family")
    pc = over.get("pipe")
    if pc:
        fam = "pipelined"

    def call():
        with wg.options(family=fam, pipe_config=pc):
            wg.matmul(a, b, out=out, allow_tf32=tf32)

    call()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = float(((out.double() - ref).norm() / ref.norm()).item())
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate

    with wg.options(family=fam, pipe_config=pc) as o:
        pl = make_plan(validate(a, b, None, 1.0, 0.0, False, False, out, "matmul"), 1.0, 0.0, tf32, None, o)
    spec = pl.family_spec
    row = {"variant": variant, "case": case, "err": err, "family": pl.family,
           "spec": str(getattr(spec, "key", spec))[:200], "stage": list(pl.stage), "peel": list(pl.peel)}
    if not timing:
        return row
    import triton.testing as tt

    graph_us = replay_us(call)
    colds, cubs = [], []
    for _ in range(REPS):
        colds.append(tt.do_bench(call, warmup=25, rep=200) * 1e3)
        cubs.append(tt.do_bench(lambda: torch.matmul(a, b, out=out), warmup=25, rep=200) * 1e3)
    # the median of the repeats (with two, the upper one: read cold_min there)
    cold, cub = sorted(colds)[len(colds) // 2], sorted(cubs)[len(cubs) // 2]
    row.update(cold_all=colds, cublas_all=cubs, cold_min=min(colds), cublas_min=min(cubs))
    flops = 2 * B * M * N * K
    row.update(graph_us=graph_us, cold_us=cold, cublas_us=cub, tflops=flops / cold / 1e6,
               ratio=cub / cold)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["warm", "time", "child"])
    ap.add_argument("-j", type=int, default=16)
    ap.add_argument("--variant")
    ap.add_argument("--case")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated variants")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.mode == "child":
        patch(VARIANTS[args.variant][1])
        import warp_gemm as wg

        wg.init("cuda")
        cases = VARIANTS[args.variant][0] if args.case is None else [args.case]
        for c in cases:
            try:
                print("ROW", json.dumps(one(args.variant, c, args.timing)), flush=True)
            except Exception as e:  # noqa: BLE001
                print("ROW", json.dumps({"variant": args.variant, "case": c, "error": repr(e)[:300]}), flush=True)
        return 0

    todo = [v for v in VARIANTS if not args.only or v in args.only.split(",")]

    def run(v, timing, case=None):
        cmd = [sys.executable, __file__, "child", "--variant", v] + (["--timing"] if timing else [])
        cmd += [] if case is None else ["--case", case]
        r = subprocess.run(cmd, capture_output=True, text=True)
        rows = [json.loads(x[4:]) for x in r.stdout.splitlines() if x.startswith("ROW ")]
        return rows, r.stderr[-800:] if r.returncode else ""

    t = time.time()
    if args.mode == "warm":
        with ThreadPoolExecutor(args.j) as ex:
            jobs = [(v, c) for v in todo for c in VARIANTS[v][0]]
            for rows, err in ex.map(lambda j: run(j[0], False, j[1]), jobs):
                print(json.dumps(rows), err, flush=True)
        print(f"warm {time.time() - t:.0f}s")
        return 0
    allrows = []
    for v in todo:
        rows, err = run(v, True)
        allrows += rows
        if err:
            print(v, err)
        if args.json:
            Path(args.json).write_text(json.dumps(allrows, indent=1))
    print(f"{'variant':18} {'case':15} {'graph':>7} {'cold':>7} {'min':>7} {'cuBLAS':>7} {'ratio':>6} {'TF':>6} "
          f"{'err':>8}")
    for r in allrows:
        if "error" in r:
            print(f"{r['variant']:18} {r['case']:15} ERROR {r['error'][:90]}")
            continue
        print(f"{r['variant']:18} {r['case']:15} {r['graph_us']:7.1f} {r['cold_us']:7.1f} {r['cold_min']:7.1f} "
              f"{r['cublas_us']:7.1f} {r['ratio']:6.2f} {r['tflops']:6.1f} {r['err']:8.1e}")
    print(f"time {time.time() - t:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
