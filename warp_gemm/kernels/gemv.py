"""The GEMV family: products whose smaller output side is exactly 1 (M == 1 or N == 1), bandwidth-bound.

A matrix-vector product does one multiply-add per element of its matrix, so its time is the time to
stream the matrix once: fp16 1x4096x4096 moves 32 MiB, ~11-13 us at 2.5-3 TB/s (cuBLAS 20.7 us on the
H100; the skinny family's 1x128 tiles through shared memory plus a K split took 31 us in the runner
with a cold L2). This family reads the matrix straight from global memory with 16-byte loads, keeps
the accumulator in registers and reduces across a warp with shuffles: no shared memory, no tiles.

Every case is one of three kernels over 2-D/3-D strided views of the operands (no copies):

- **rowdot** ``out[b, r] = sum_k Mat[b, r, k] * vec[b, k]``, Mat rows contiguous (unit stride along
  k): M == 1 with B stored ``(N, K)`` (layout_b "T": ``F.linear(x, W)``, the decode case) and N == 1
  with A stored ``(M, K)`` (layout_a "N"). One warp per output element: lane ``l`` takes the 16-byte
  chunks ``l, l + 32, ...`` of the row (``UNROLL`` chunks in flight), then an xor-shuffle sum.
- **colsum** ``out[b, r] = sum_k vec[b, k] * Mat[b, k, r]``, unit stride along r: M == 1 with B
  stored ``(K, N)`` and N == 1 with A stored transposed. One block covers a strip of ``cols``
  consecutive columns (``col_lanes`` 16-byte chunks: fp16 32, fp32 16, fp64 8): ``col_lanes`` threads
  read one row's strip with 16-byte loads (64 contiguous bytes), the block's ``block_dim / col_lanes``
  row groups take rows ``k0 + g, k0 + g + groups, ...`` (``UNROLL`` rows in flight), then the partial
  sums meet by warp shuffles and one pass through shared memory, and thread ``j`` writes column ``j``.
  (Round 5's first colsum gave each lane its own row's 32 bytes, a warp's load touching 32 rows: 20.5
  us by graph replay for fp16 1x4096x4096, slower than the skinny family's 15.5.)
- **bands** the colsum product for wide 16-bit matrices (CUDA): K split into bands of rows, each block's
  threads in ``band_groups`` row groups (4 since round 17), each group reading ``block_dim / band_groups``
  consecutive 16-byte chunks (1 KiB of an fp16 row) of every row of its share of the band, the groups' sums
  meeting in shared memory and written to the workspace, then a finishing kernel that sums the bands in a
  fixed order and applies the epilogue. Contiguous 4 KiB pieces of each row read cold from DRAM faster than colsum's
  64-byte strips walking every row (fp16 1x4096x4096 26.3 against 28.1 us with the L2 flushed).
  For one matrix (batch 1) of fewer column blocks than SMs since round 18 (``bands_choice``; built in round 14, not
  faster in round 15 with 256 bands per column block, faster with 16 row groups in round 18): the band kernel
  finishing in its own launch -- the last bands of each column block to arrive (arrival counters) sum the bands in
  band order and apply the epilogue, so there is no finishing kernel (see ``BANDS_FUSED`` and ``BANDS_FUSED_ONE``).

The vector operand may have any stride (A of layout T gives x with the row stride); it is read with
16-byte loads only where it is contiguous and aligned (rowdot), else with scalar loads (it is small
and cached). Vector loads of the matrix only where the row (rowdot) or the column group and the row
stride (colsum) are 16-byte aligned and the chunk is whole; everything else takes bounds-checked
scalar loads. Batch broadcast as elsewhere: ``min(b, nb - 1)`` for Mat, vec and C.

K is split across a third launch dimension where the output alone would leave the GPU idle: rowdot
where its rows give fewer than ``target_warps / ROWDOT_SPLIT_BELOW`` warps (``target_warps``: 64 per SM),
colsum where its strips fill under half the SMs. Each split writes its float32/float64 partial sums
into a caller-provided workspace ``W[s * batch + b, 0, r]`` / ``W[s * batch + b, r, 0]`` shaped
``(splits * batch, M, N)`` exactly like the skinny family's, and skinny's finishing pass
(``skinny.finish_launch``: ordered, deterministic) applies alpha, beta*C and the output cast. Without
a split the kernel applies the epilogue itself (in Warp code). fp16 1x4096x4096 takes one launch in
either layout (rowdot: 4096 warps; bands: two launches, 64 bands of 64 rows and the finishing kernel).
The constants below were measured on the H100 (benchmarks/results/round5/, round6/, round9/).

The CPU twin runs the same kernels with ``lanes == 1`` (one thread per output element / per column,
``cols == 1``): the snippets' plain C++ branches, so CPU CI runs the same indexing, splits and
epilogues. The workspace is the caller's (``workspace_shape``); this module never allocates it.
"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import dataclasses
import functools
import re
import threading
from dataclasses import dataclass

import warp as wp

from .. import _compat
from . import skinny
from .common import ITEM_BYTES, WP_DTYPES, acc_dtype_name, cuda_source, func_name

# --- configuration -------------------------------------------------------------------------------------
LANES = 32  # CUDA: one warp per output element (rowdot) / column group (colsum)
# Resident warps per SM the K split aims at (H100: 64, i.e. 2048 threads): 8448 warps on 132 SMs.
TARGET_WARPS_PER_SM = 64
# rowdot: 16-byte chunks each lane has in flight per step. fp16 1x4096x4096: 4096 warps (31 per SM) x
# 32 lanes x 4 x 16 B = 8 MiB requested per step, well over the ~3 MB that 3 TB/s x ~1 us of latency needs.
UNROLL = 4
# rowdot splits K only where batch * rows < target_warps / ROWDOT_SPLIT_BELOW (16 warps per SM).
ROWDOT_SPLIT_BELOW = 4
# colsum (CUDA): 16-byte chunks per row of a block's column strip (4: 64 contiguous bytes per row), and
# threads per block (the row groups are block_dim / col_lanes): 1024 where the strips fill one wave of SMs
# at one block each (half to all of the SMs), else 512. K is split only where the strips are under half the
# SMs (fewer than target_warps / COLSUM_SPLIT_BELOW warps of 512-thread blocks), then toward
# target_warps / COLSUM_SPLIT_TO warps. H100, fp16, graph replay (benchmarks/results/round6/r6.txt):
# 1x4096x4096 (128 strips) 10.4 us at 1024 threads, 12.2 at 512, 14.4 at 256 (skinny 16.0); 1x8192x8192
# (256 strips) 55.5 at 512, 57.8 at 1024 (skinny 66.3); fp32 1x4096x4096 27.8 at 512 (skinny 35.0);
# 1x512x16384 (16 strips) 9.0 us split toward 32 warps per SM, 13.2 toward 8 (skinny 16.3). 2, 4 or 8
# chunks per row and 4 or 8 rows in flight: within 0.4 us of each other.
COL_LANES = 4
COLSUM_BLOCK = 512
COLSUM_BLOCK_ONE_WAVE = 1024
COLSUM_SPLIT_BELOW = 8
COLSUM_SPLIT_TO = 2
# At most this many K splits: the finishing pass sums an output's slabs one after another (fp16 M == 1,
# N == 8, K == 2**20 in colsum would otherwise take 8192 splits of 128 rows).
MAX_SPLITS = 64
BLOCK_DIM = 256  # threads per block of the (non-tile) launch; a multiple of 32, so warps are whole
# bands (CUDA): colsum's product for 16-bit matrices of at least BANDS_MIN_BYTES and BANDS_MIN_COLS columns, K
# split into bands of rows. A block of BANDS_BLOCK threads reads BANDS_BLOCK consecutive 16-byte chunks of each
# row of its band (4 KiB of an fp16 row), BANDS_UNROLL rows in flight, and writes its partial sums to the
# workspace with 16-byte stores; the bands are as many as give about target_warps / BANDS_SPLIT_TO warps (at
# most BANDS_MAX_SPLITS); a second kernel of BANDS_FINISH_WARPS warps per 32 columns sums them in a fixed
# order and applies the epilogue. Cold L2, H100: the access patterns alone (Triton, results/round9/cp.txt):
# fp16 1x4096x4096 read in 16-row bands of 4 KiB per block 21.6 us, column strips walking every row
# (colsum's pattern) 49.9 and more, cuBLAS 21.4. The kernels (r15p.txt, r16p.txt; colsum in the same run):
# 1x4096x4096 26.3 against 28.1 cold (bands 8.9 + finishing 3.0 us warm, by the profiler), 1x8192x8192 64.7
# (8 finishing warps) against 67.6, batch 4 of 1x4096x4096 69.0 against 70.1; colsum ahead for narrower
# matrices (1x512x16384 19.9 against 23.5, 1x256x65536 31.4 against 56.2, 1x2048x2048 14.2 against 14.5)
# and, within noise, fp32 1x4096x4096 (38.3-43.1 against 41.9-42.6). 128 or 512 threads, 4 or 16 rows in
# flight: within noise; twice or half the bands: 30.6-32.3 at 1x4096x4096.
BANDS_BLOCK = 256
BANDS_UNROLL = 8
BANDS_SPLIT_TO = 2
BANDS_MAX_SPLITS = 512
BANDS_FINISH_WARPS = 8
BANDS_FINISH_UNROLL = 8  # band sums in flight per finishing thread (#pragma unroll)
BANDS_MIN_BYTES = 8 << 20
# bands with the finish in the same launch (``GemvSpec.fused``; built in round 14; on an H100 in round 15 its GPU tests
# passed and fp16 1x4096x4096 took 26.8 us cold against 26.5 for the two launches, with 256 bands of 16 rows; with row
# groups (round 17) each column block has 4-16x fewer bands to sum: the default for one matrix since round 18, see
# BANDS_FUSED_ONE; BANDS_FUSED takes it for every product): each band block writes its partial sums, then takes a
# rank from its column block's arrival counter; the
# last ``F`` arrivals wait until every band has arrived and each sums its slice of the column block's columns over
# the bands in band order (deterministic), applies the epilogue, and the last to leave resets the counters. F is at
# most BANDS_FINISHERS and small enough that the waiting blocks of every column block stay under the SM count (a
# waiting block must never keep a band block from starting). Saves the finishing kernel and its launch (3.0 us warm
# at 1x4096x4096, where the whole call takes 26.3 us cold); prediction 22-23 us. The counters live in their own
# zeroed buffer (``counters_len``), not in the workspace (other families' partial sums reuse that).
BANDS_FUSED = False
BANDS_FINISHERS = 64
BANDS_MIN_COLS = 4096
# bands (CUDA): row groups per block (round 17; ``GemvSpec.band_groups``). A block of BANDS_BLOCK threads is G groups
# of BANDS_BLOCK / G threads; each group reads its own rows (a contiguous 1/G of the block's band) of the block's
# BANDS_BLOCK / G * 8 columns, and the G partial sums meet in shared memory (in group order) before group 0 writes
# them. The blocks, the threads and the rows each thread reads stay as at G == 1; each row is read in pieces of
# 4 KiB / G, and the bands are G times taller, so the finishing kernel sums G times fewer partials per column
# (fp16 1x4096x4096: 256 bands of 16 rows at G == 1, 64 of 64 at G == 4). Round 15's profile put the gap to cuBLAS
# in that finish (3.0 us warm, 5.8 with the partials from DRAM), and round 16's fewer, taller bands lost because
# they had fewer blocks (probe set 31), which this keeps. H100, cold L2, cuBLAS in the same run (round 17,
# results/round17/r33p.txt): fp16 1x4096x4096 G 1/2/4/8/16: 26.4/26.0/25.3/25.5/25.3 us (graph replay 13.8 -> 10.9
# at 4), 1x8192x8192 and batch 4 within 1% of G 1; twice the bands (1024 blocks) 26.1-26.4. The runner: 25.2 and
# 25.4 us in two runs (cuBLAS 21.5). Finishing warps 2-8 and 512-thread blocks around G 4 (r35p.txt): 25.2-25.9.
BANDS_GROUPS = 4
# bands (CUDA), one matrix (batch 1) of fewer column blocks than SMs: the fused finish with 16 row groups (round 18),
# so each column block's finishers sum 16 bands, not 64, and there is no finishing kernel. H100, cuBLAS in the same
# run (results/round18/): the runner on fp16 1x4096x4096 23.3-24.3 us against 25.0-25.3 for the two launches with 4
# groups (cuBLAS 20.7-21.6), 1x8192x8192 61.7-62.3 against 64.0-64.1, 1x4096x1024 12.4-12.7 against 14.5,
# 1x4096x16384 61.3-61.9 against 63.7; probe set 36 (cold L2): 24.2 against 25.5, 62.6 against 64.8. Not taken
# (a) for batches: 4 x 1x4096x4096 took 70.1 us fused against 64.2 (the finishers of 4 matrices' column blocks
# must all wait under the SM count, so each column block gets one); (b) where the column blocks (128 columns each at
# 16 groups) reach the SM count, which leaves one finisher per column block: 1x24576x2048 (192 blocks) 58.8-59.6
# against 53.4, 1x16384x1024, 1x32768x4096 and 1x65536x512 even or within 2%; (c) with one finisher per column block
# on 1x4096x4096 (30.8 us) or with 4 or 8 groups (26.9, 31.3). With the matrix already in L2 (graph replay) the
# fused kernel is the slower one at 1x4096x4096 (13.5 against 11.1 us): its waiting finishers cost more than the
# second launch when reads are cheap.
BANDS_FUSED_ONE = True
BANDS_FUSED_GROUPS = 16


def bands_choice(batch: int, cols: int, sms: int) -> tuple[bool, int]:
    """``(fused, band_groups)`` of the bands kernels for ``batch`` matrices of ``cols`` output columns on a GPU of
    ``sms`` SMs: fused with BANDS_GROUPS everywhere where BANDS_FUSED (the probes' switch); else fused with
    BANDS_FUSED_GROUPS for one matrix whose column blocks at that grouping stay under the SM count where
    BANDS_FUSED_ONE; else the bands kernel and its finishing kernel with BANDS_GROUPS."""
    if BANDS_FUSED:
        return True, BANDS_GROUPS
    fused_cols = BANDS_BLOCK // BANDS_FUSED_GROUPS * 8  # 16-byte chunks of a 16-bit type (bands: 16-bit only)
    if BANDS_FUSED_ONE and batch == 1 and _ceil(cols, fused_cols) < sms:
        return True, BANDS_FUSED_GROUPS
    return False, BANDS_GROUPS


KINDS = ("rowdot", "colsum", "bands")


@dataclass(frozen=True)
class GemvSpec:
    """Every choice of one GEMV launch (hashable); ``kernel_key`` names the compiled kernel."""

    in_dtype: str
    out_dtype: str
    kind: str  # "rowdot", "colsum" or "bands"
    epilogue: str  # "scale" or "axpby"
    lanes: int = LANES  # rowdot: threads per output element, 32 on CUDA; 1 for the CPU twin (both kinds)
    block_dim: int = BLOCK_DIM  # rowdot: launch-time only; colsum (CUDA): a column strip's threads
    col_lanes: int = COL_LANES  # colsum (CUDA): 16-byte chunks per row of a strip
    target_warps: int = TARGET_WARPS_PER_SM * 132  # K is split until about this many warps (0: never)
    unroll: int = UNROLL
    fused: bool = False  # bands: the finish in the same launch (see BANDS_FUSED)
    band_groups: int = 1  # bands: row groups per block (see BANDS_GROUPS); 1 on the CPU twin

    @property
    def acc_dtype(self) -> str:
        return acc_dtype_name(self.in_dtype)

    @property
    def chunk(self) -> int:
        """Elements per 16-byte chunk."""
        return 16 // ITEM_BYTES[self.in_dtype]

    @property
    def cols(self) -> int:
        """colsum: columns per block (``col_lanes`` 16-byte chunks on CUDA; one column per thread on the CPU);
        bands: columns per block of a band (a 16-byte chunk per thread, ``block_dim`` threads; 1 on the CPU)."""
        if self.kind == "bands":
            return self.block_dim // self.band_groups * self.chunk
        return self.col_lanes * self.chunk if self.lanes > 1 else 1

    @property
    def group(self) -> int:
        """Threads that compute one output (rowdot) or one column strip (colsum) together: rowdot a warp's
        ``lanes``, colsum a whole block (CUDA); 1 on the CPU."""
        if self.lanes == 1 and self.kind != "bands":
            return 1
        return self.lanes if self.kind == "rowdot" else self.block_dim

    @property
    def row_groups(self) -> int:
        """colsum: rows a block reads per step (``block_dim / col_lanes`` on CUDA, 1 on the CPU)."""
        return self.block_dim // self.col_lanes if self.lanes > 1 else 1

    @property
    def kernel_key(self) -> str:
        """Names the compiled kernel: everything but the launch-time choices (target_warps; rowdot's
        block_dim)."""
        tail = f"_b{self.block_dim}_c{self.col_lanes}" if self.kind == "colsum" and self.lanes > 1 else ""
        tail += "_fused" if self.fused else ""
        tail += f"_g{self.band_groups}_b{self.block_dim}" if self.kind == "bands" and self.band_groups > 1 else ""
        return (f"wg_gemv_{self.kind}_{self.in_dtype}_{self.out_dtype}_{self.epilogue}_l{self.lanes}"
                f"_u{self.unroll}{tail}")

    @property
    def key(self) -> str:
        return f"{self.kernel_key}_b{self.block_dim}_t{self.target_warps}"


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def kind_for(layout_a: str, layout_b: str, M: int, N: int) -> str:
    """``"rowdot"`` where the matrix operand's rows run along K (M == 1: B stored ``(N, K)``; N == 1:
    A stored ``(M, K)``), else ``"colsum"``. M == 1 is read first (a 1x1 output: B is the matrix)."""
    if M == 1:
        return "rowdot" if layout_b == "T" else "colsum"
    return "rowdot" if layout_a == "N" else "colsum"


def splits(spec: GemvSpec, M: int, N: int, K: int, batch: int) -> tuple[int, int]:
    """``(splits, rows_per_split)``: K split until the launch has about ``spec.target_warps`` warps (at
    most ``MAX_SPLITS``), each split a multiple of the kernel's K step (rowdot ``lanes * chunk * unroll``
    elements, colsum ``row_groups`` rows), never an empty split. rowdot splits only where its rows give
    fewer than ``target_warps / ROWDOT_SPLIT_BELOW`` warps, colsum on CUDA where its blocks give fewer
    than ``target_warps / COLSUM_SPLIT_BELOW`` (the CPU twin: fewer than ``target_warps`` columns)."""
    R = N if M == 1 else M
    goal = spec.target_warps
    if spec.kind == "bands":  # always through the workspace: as many bands as give about goal / BANDS_SPLIT_TO warps
        warps = batch * _ceil(R, spec.cols) * max(1, spec.block_dim // 32)
        step = spec.unroll * spec.band_groups  # each row group's share of a band: whole unrolled steps
        if warps == 0 or K <= step:
            return 1, max(K, 1)
        s = max(1, min(_ceil(goal // BANDS_SPLIT_TO, warps), _ceil(K, step), BANDS_MAX_SPLITS))
        per = _ceil(_ceil(K, s), step) * step
        return _ceil(K, per), per
    if spec.kind == "rowdot":
        warps, step = batch * R, spec.lanes * spec.chunk * spec.unroll
        split = warps * ROWDOT_SPLIT_BELOW < spec.target_warps
    elif spec.lanes > 1:
        warps, step = batch * _ceil(R, spec.cols) * (spec.block_dim // 32), spec.row_groups
        split = warps < spec.target_warps // COLSUM_SPLIT_BELOW
        goal = spec.target_warps // COLSUM_SPLIT_TO
    else:
        warps, step = batch * R, 1
        split = warps < goal
    if not split or warps == 0 or K <= step:
        return 1, max(K, 1)
    s = min(_ceil(goal, warps), _ceil(K, step), MAX_SPLITS)
    per = _ceil(_ceil(K, s), step) * step
    return _ceil(K, per), per


def counters_len(spec: GemvSpec, M: int, N: int, batch: int) -> int:
    """The fused bands' counters (int32, zero before the first launch; each launch leaves them zero): two per
    thread of one band's launch rows and batch entry (the CPU twin's; CUDA uses two per column block); 0 unless
    ``spec.fused``."""
    if not (spec.kind == "bands" and spec.fused):
        return 0
    return 2 * batch * _ceil(N if M == 1 else M, spec.cols) * spec.group


def workspace_shape(spec: GemvSpec, M: int, N: int, K: int, batch: int):
    """``((splits * batch, M, N), acc_dtype)`` where K is split (bands: always), else None."""
    s, _ = splits(spec, M, N, K, batch)
    if s <= 1 and spec.kind != "bands":
        return None
    return (s * batch, M, N), spec.acc_dtype


def choose_spec(device, dtype: str, layout_a: str, layout_b: str, M: int, N: int, K: int, batch: int,
                out_dtype: str, epilogue: str):
    """The spec for this problem, or None where the family does not apply: the smaller output side not
    1, an epilogue other than scale/axpby, a dtype Warp lacks, or a Warp whose native snippets cannot
    return a value (:func:`has_native_returns`). CPU: the twin (``lanes`` 1); CUDA: rowdot a warp per
    output, colsum a block of 512 or 1024 threads per column strip, ``target_warps`` = 64 per SM.

    H100 (benchmarks/results/round5/, round6/): rowdot fp16 1x4096x4096 with B stored (N, K) (F.linear's
    case) 9.4 us by graph replay against the skinny family's 29.9, 4096x1x4096 21.1 us cold against
    cuBLAS's 23.4; colsum (B stored (K, N)) 10.4 us against skinny's 16.0 by graph replay, 27.6 against
    31.4 cold (cuBLAS 20.9), 1x8192x8192 55.5 / 67.7 against 66.3 / 77.1 (cuBLAS 58 cold)."""
    if epilogue not in ("scale", "axpby") or layout_a not in ("N", "T") or layout_b not in ("N", "T"):
        return None
    if dtype not in WP_DTYPES or out_dtype not in WP_DTYPES or min(M, N) != 1:
        return None
    kind = kind_for(layout_a, layout_b, M, N)
    if not has_native_returns():
        return None
    is_cpu = getattr(device, "is_cpu", False) or str(device) == "cpu"
    if is_cpu:
        return GemvSpec(dtype, out_dtype, kind, epilogue, lanes=1, block_dim=1,
                        target_warps=4 * max(1, (getattr(device, "cpu_count", 0) or 2)))
    sms = _compat.sm_count(device)
    spec = GemvSpec(dtype, out_dtype, kind, epilogue, block_dim=BLOCK_DIM, target_warps=TARGET_WARPS_PER_SM * sms)
    R = N if M == 1 else M
    if (kind == "colsum" and ITEM_BYTES[dtype] == 2 and R >= BANDS_MIN_COLS
            and batch * K * R * ITEM_BYTES[dtype] >= BANDS_MIN_BYTES):
        fused, groups = bands_choice(batch, R, sms)
        return dataclasses.replace(spec, kind="bands", block_dim=BANDS_BLOCK, unroll=BANDS_UNROLL, fused=fused,
                                   band_groups=groups)
    if kind == "colsum":
        strips = batch * _ceil(N if M == 1 else M, dataclasses.replace(spec, block_dim=COLSUM_BLOCK).cols)
        spec = dataclasses.replace(spec, block_dim=COLSUM_BLOCK_ONE_WAVE if sms // 2 <= strips <= sms else COLSUM_BLOCK)
    return spec


# --- the native snippets --------------------------------------------------------------------------------
_ROWDOT = r"""
    // sum_k Mat[bm, r, k] * vec[bv, k], k in [k0, k1), r = i: this lane's 16-byte chunks k0 + (lane + n *
    // LANES) * E, then (CUDA) the sum over the warp: every lane returns the total. Mat rows: unit stride
    // along k; vec: any stride. Assumes k0 is a multiple of E and the warp's 32 lanes call it together.
    // CUDA: 16-byte loads, U chunks in flight, where the row is 16-byte aligned (vec's too where it is
    // contiguous and aligned, else scalar); the rest scalar and bounds-checked. CPU (LANES 1): scalar.
    const char* row = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)i * Mat.strides[1];
    const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
    const size_t vs = (size_t)vec.strides[1];
    const int step = {LANES} * {E};
    int k = k0 + lane * {E};
    {ACC} s = {ACC}(0);
#if defined(__CUDA_ARCH__)
    const bool vv = vs == {ITEM} && (size_t)(v + (size_t)k0 * {ITEM}) % 16 == 0;
    if ((size_t)(row + (size_t)k0 * {ITEM}) % 16 == 0) {{
        for (; k + ({U} - 1) * step + {E} <= k1; k += {U} * step) {{
            uint4 a[{U}], x[{U}];
#pragma unroll
            for (int u = 0; u < {U}; ++u) {{
                const int kk = k + u * step;
                a[u] = __ldg((const uint4*)(row + (size_t)kk * {ITEM}));
                if (vv) x[u] = __ldg((const uint4*)(v + (size_t)kk * {ITEM}));
                else for (int e = 0; e < {E}; ++e)
                    (({T}*)&x[u])[e] = *(const {T}*)(v + (size_t)(kk + e) * vs);
            }}
#pragma unroll
            for (int u = 0; u < {U}; ++u)
#pragma unroll
                for (int e = 0; e < {E}; ++e)
                    s += {ACC}(((const {T}*)&a[u])[e]) * {ACC}(((const {T}*)&x[u])[e]);
        }}
    }}
#endif
    for (; k < k1; k += step)
        for (int e = 0; e < {E} && k + e < k1; ++e)
            s += {ACC}(*(const {T}*)(row + (size_t)(k + e) * {ITEM}))
                 * {ACC}(*(const {T}*)(v + (size_t)(k + e) * vs));
#if defined(__CUDA_ARCH__)
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
#endif
    return s;
"""

_COLSUM_SCALAR = r"""
    // column i + lane (lane < COLS) of the strip at i: sum_k vec[bv, k] * Mat[bm, k, i + lane], k in [k0, k1);
    // other lanes return 0. Scalar loads: the CPU twin (one thread per column), and the CPU build of a
    // CUDA spec (its threads run one at a time: thread j < COLS of each strip takes column j).
    const int R = Mat.shape[2];
    {ACC} out = {ACC}(0);
    if (lane < {COLS} && i + lane < R) {{
        const char* p = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)(i + lane) * {ITEM};
        const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
        for (int k = k0; k < k1; ++k)
            out += {ACC}(*(const {T}*)(v + (size_t)k * vec.strides[1]))
                   * {ACC}(*(const {T}*)(p + (size_t)k * Mat.strides[1]));
    }}
    return out;
"""

_COLSUM = r"""
    // sum_k vec[bv, k] * Mat[bm, k, i + j] for the COLS columns j of the strip at i, k in [k0, k1), by the
    // block's {BLOCK} threads (lane: the thread's index in the block; every thread of the block calls
    // this: there is a __syncthreads). Thread lane reads 16-byte chunk cl = lane % {CL} of the rows
    // k0 + g, k0 + g + {RG}, ... (row group g = lane / {CL}), {U} rows in flight; the sums of one chunk's
    // columns meet over the warp's row groups (xor shuffles), then over the block's {NW} warps (shared
    // memory). Thread j < COLS returns column i + j, the others 0. Vector loads where the chunk is whole
    // and its start and the row stride are 16-byte aligned; else scalar, bounds-checked loads.
#if defined(__CUDA_ARCH__)
    const int R = Mat.shape[2];
    const size_t rs = (size_t)Mat.strides[1];
    const int cl = lane % {CL};
    const int c = i + cl * {E};
    const char* base = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)c * {ITEM};
    const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
    const size_t vs = (size_t)vec.strides[1];
    {ACC} acc[{E}];
#pragma unroll
    for (int e = 0; e < {E}; ++e) acc[e] = {ACC}(0);
    int k = k0 + lane / {CL};
    if (c + {E} <= R && ((size_t)base | rs) % 16 == 0) {{
        for (; k + ({U} - 1) * {RG} < k1; k += {U} * {RG}) {{
            uint4 q[{U}];
            {ACC} x[{U}];
#pragma unroll
            for (int u = 0; u < {U}; ++u) {{
                q[u] = __ldg((const uint4*)(base + (size_t)(k + u * {RG}) * rs));
                x[u] = {ACC}(*(const {T}*)(v + (size_t)(k + u * {RG}) * vs));
            }}
#pragma unroll
            for (int u = 0; u < {U}; ++u)
#pragma unroll
                for (int e = 0; e < {E}; ++e) acc[e] += x[u] * {ACC}(((const {T}*)&q[u])[e]);
        }}
    }}
    for (; k < k1; k += {RG}) {{
        const {ACC} x = {ACC}(*(const {T}*)(v + (size_t)k * vs));
        const char* p = base + (size_t)k * rs;
        for (int e = 0; e < {E} && c + e < R; ++e) acc[e] += x * {ACC}(*(const {T}*)(p + (size_t)e * {ITEM}));
    }}
    __shared__ {ACC} red[{NW}][{COLS}];
#pragma unroll
    for (int e = 0; e < {E}; ++e)
        for (int o = {CL}; o < 32; o <<= 1) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
    if (lane % 32 < {CL})
        for (int e = 0; e < {E}; ++e) red[lane / 32][cl * {E} + e] = acc[e];
    __syncthreads();
    {ACC} out = {ACC}(0);
    if (lane < {COLS})
        for (int w = 0; w < {NW}; ++w) out += red[w][lane];
    return out;
#else
""" + _COLSUM_SCALAR + """#endif
"""

_BANDS = r"""
    // W[wrow, c + e] = sum_k vec[bv, k] * Mat[bm, k, c + e] for the thread's {E} columns c + e < R (its 16-byte
    // chunk of each row), k in [k0, k1): one band's partial sums. CUDA: 16-byte loads, {U} rows in flight,
    // where the chunk is whole and its start, the column stride and the row stride allow; the rest (and the
    // CPU) scalar and bounds-checked.
    const int R = Mat.shape[2];
    const size_t rs = (size_t)Mat.strides[1];
    const size_t cs = (size_t)Mat.strides[2];
    const char* base = (const char*)Mat.data + (size_t)bm * Mat.strides[0] + (size_t)c * cs;
    const char* v = (const char*)vec.data + (size_t)bv * vec.strides[0];
    const size_t vs = (size_t)vec.strides[1];
#if defined(__CUDA_ARCH__)
    __align__(16) {ACC} acc[{E}];
#else
    {ACC} acc[{E}];
#endif
    for (int e = 0; e < {E}; ++e) acc[e] = {ACC}(0);
    int k = k0;
#if defined(__CUDA_ARCH__)
    if (c + {E} <= R && cs == {ITEM} && ((size_t)base | rs) % 16 == 0) {{
        for (; k + {U} <= k1; k += {U}) {{
            uint4 q[{U}];
            {ACC} x[{U}];
#pragma unroll
            for (int u = 0; u < {U}; ++u) {{
                q[u] = __ldg((const uint4*)(base + (size_t)(k + u) * rs));
                x[u] = {ACC}(*(const {T}*)(v + (size_t)(k + u) * vs));
            }}
#pragma unroll
            for (int u = 0; u < {U}; ++u)
#pragma unroll
                for (int e = 0; e < {E}; ++e) acc[e] += x[u] * {ACC}(((const {T}*)&q[u])[e]);
        }}
    }}
#endif
    for (; k < k1; ++k) {{
        const {ACC} x = {ACC}(*(const {T}*)(v + (size_t)k * vs));
        const char* p = base + (size_t)k * rs;
        for (int e = 0; e < {E} && c + e < R; ++e) acc[e] += x * {ACC}(*(const {T}*)(p + (size_t)e * cs));
    }}
{GROUPS}{STORE_OPEN}    char* w = (char*)W.data + (size_t)wrow * W.strides[0] + (size_t)c * W.strides[1];
#if defined(__CUDA_ARCH__)
    if (c + {E} <= R && W.strides[1] == sizeof({ACC}) && (size_t)w % 16 == 0) {{  // 16-byte stores: coalesced
#pragma unroll
        for (int q = 0; q < {E} * (int)sizeof({ACC}) / 16; ++q) ((uint4*)w)[q] = ((const uint4*)acc)[q];
{VEC_DONE}#endif
    for (int e = 0; e < {E} && c + e < R; ++e) *({ACC}*)(w + (size_t)e * W.strides[1]) = acc[e];
{STORE_CLOSE}"""
# bands with row groups (GemvSpec.band_groups > 1), between _BANDS' sums and its stores: the groups' partial sums of
# one band meet. grp: this thread's row group; the thread's column c = (block column) + j * {E}. Two variants, by
# {CUDA_LEAVE} and {CPU_LEAVE}: the two-launch kernel's later groups return once their sums are handed on (group 0
# alone stores); before the fused finish (GemvSpec.fused) every thread goes on -- on CUDA the finish needs the whole
# block, and group 0 alone stores (_BANDS_GROUP0_OPEN / _CLOSE); on the CPU (threads in index order) only the last
# group, the band's last writer, goes on to count the band's arrival (_BANDS_GROUP0_CLOSE).
_BANDS_GROUPS = r"""
    // The block's {RG} row groups meet. CUDA: groups 1.. leave their sums in shared memory, group 0 adds them in
    // group order and stores them below. CPU (threads one at a time, in index order): group 0 stores below, each
    // later group adds its sums to what is there.{THEN}
#if defined(__CUDA_ARCH__)
    {{
        __shared__ {ACC} red[{RG} - 1][{E}][{GT}];
        const int j = (c / {E}) % {GT};
        if (grp > 0)
            for (int e = 0; e < {E}; ++e) red[grp - 1][e][j] = acc[e];
        __syncthreads();
        if (grp == 0)
            for (int h = 0; h < {RG} - 1; ++h)
#pragma unroll
                for (int e = 0; e < {E}; ++e) acc[e] += red[h][e][j];
    }}
{CUDA_LEAVE}#else
    if (grp > 0) {{
        char* wg = (char*)W.data + (size_t)wrow * W.strides[0] + (size_t)c * W.strides[1];
        for (int e = 0; e < {E} && c + e < R; ++e) *({ACC}*)(wg + (size_t)e * W.strides[1]) += acc[e];
{CPU_LEAVE}    }}
#endif
"""
_BANDS_GROUPS_LEAVE = {False: dict(THEN="", CUDA_LEAVE="    if (grp > 0) return;\n", CPU_LEAVE="        return;\n"),
                       True: dict(THEN=" Then the fused finish: every thread goes on.", CUDA_LEAVE="",
                                  CPU_LEAVE="")}
_BANDS_GROUP0_OPEN = "    if (grp == 0) {\n"
_BANDS_GROUP0_CLOSE = """    }}
#if !defined(__CUDA_ARCH__)
    if (grp < {RG} - 1)
        return;  // CPU: the band's last group counts its arrival
#endif
"""
# After _BANDS' vector stores: return (the partial sums are all), or fall through to the fused finish (the scalar
# stores become the else branch).
_BANDS_VEC_RETURN = "        return;\n    }\n"
_BANDS_VEC_ELSE = "    } else\n"

_BANDS_SUM = r"""
    // sum over the S bands of column i + lane % 32 of batch entry b: W[s * batch + b, i + lane % 32], in a fixed
    // order. CUDA (a block of {NW} warps per 32 columns): warp w sums bands w, w + {NW}, ..., the warps' sums
    // meet in shared memory in warp order, thread lane < 32 returns its column's total (the others 0; every
    // thread of the block calls this: there is a __syncthreads). CPU: thread lane < 32 sums every band in order.
    const int R = W.shape[1];
    const size_t s0 = (size_t)W.strides[0] * batch;
    const char* col = (const char*)W.data + (size_t)b * W.strides[0] + (size_t)(i + lane % 32) * W.strides[1];
#if defined(__CUDA_ARCH__)
    {ACC} acc = {ACC}(0);
    if (i + lane % 32 < R) {{
#pragma unroll {FU}
        for (int s = lane / 32; s < S; s += {NW}) acc += *(const {ACC}*)(col + (size_t)s * s0);
    }}
    __shared__ {ACC} red[{NW}][32];
    red[lane / 32][lane % 32] = acc;
    __syncthreads();
    {ACC} out = {ACC}(0);
    if (lane < 32)
        for (int w = 0; w < {NW}; ++w) out += red[w][lane];
    return out;
#else
    {ACC} out = {ACC}(0);
    if (lane < 32 && i + lane < R)
        for (int s = 0; s < S; ++s) out += *(const {ACC}*)(col + (size_t)s * s0);
    return out;
#endif
"""

# bands, fused (GemvSpec.fused): after _BANDS' partial sums, the finish in the same launch. cnt: the counters (two ints
# per column block of each batch entry on CUDA, per thread on the CPU), zero between launches; the launch's threads
# per (batch entry, band) (nthr), a whole number of blocks, so a CUDA block is one column block of one band; nfin: the
# finishers per column block.
_BANDS_FUSED_TAIL = r"""
    // The finish (fused): the last nfin of the S bands to arrive at this column block sum its columns over the bands,
    // in band order, and apply the epilogue: D[b, col] = {OT}(alpha * sum{AXPBY_DOC}).
#if defined(__CUDA_ARCH__)
    const int tb = t % {BLOCK};  // this thread in its block (nthr is a whole number of blocks)
    const int blk = t / {BLOCK};
    int* ctr = (int*)cnt.data + 2 * ((size_t)b * (nthr / {BLOCK}) + blk);
    __shared__ int wg_rank;
    __threadfence();  // this thread's partial sums are visible device-wide before the block arrives
    __syncthreads();
    if (tb == 0)
        wg_rank = atomicAdd(ctr, 1);
    __syncthreads();
    const int rank = wg_rank;
    if (rank < S - nfin)
        return;  // not a finisher (the whole block)
    if (tb == 0) {{
        while (*(volatile int*)ctr < S) {{
#if __CUDA_ARCH__ >= 700
            __nanosleep(64);
#endif
        }}
        __threadfence();
    }}
    __syncthreads();
    const int lane = tb % 32;
    const int wq = tb / 32;  // this thread's warp
    const int per_f = (({COLS} / 32 + nfin - 1) / nfin) * 32;  // columns per finisher, whole groups of 32
    const int c0 = blk * {COLS} + (rank - (S - nfin)) * per_f;
    const int cend = (blk + 1) * {COLS} < R ? (blk + 1) * {COLS} : R;
    const int c1 = c0 + per_f < cend ? c0 + per_f : cend;
    __shared__ {ACC} red[{NW}][32];
    for (int g = c0; g < c1; g += 32) {{
        const int col = g + lane;
        {ACC} a = {ACC}(0);
        if (col < c1) {{
            const char* src = (const char*)W.data + (size_t)b * W.strides[0] + (size_t)col * W.strides[1];
            const size_t s0 = (size_t)W.strides[0] * batch;
#pragma unroll {FU}
            for (int q = wq; q < S; q += {NW}) a += __ldcg((const {ACC}*)(src + (size_t)q * s0));
        }}
        red[wq][lane] = a;
        __syncthreads();
        if (wq == 0 && col < c1) {{
            {ACC} sum = {ACC}(0);
            for (int q = 0; q < {NW}; ++q) sum += red[q][lane];
{STORE}        }}
        __syncthreads();
    }}
    if (tb == 0 && atomicAdd(ctr + 1, 1) == nfin - 1) {{  // the last finisher to leave: counters back to zero
        ctr[0] = 0;
        ctr[1] = 0;
    }}
#else
    // CPU (threads one at a time): this thread's own counter; the last of its S bands sums them in band order.
    int* ctr = (int*)cnt.data + 2 * ((size_t)b * nthr + t);
    if (++ctr[0] < S)
        return;
    ctr[0] = 0;
    for (int e = 0; e < {E} && c + e < R; ++e) {{
        const int col = c + e;
        {ACC} sum = {ACC}(0);
        for (int q = 0; q < S; ++q)
            sum += *(const {ACC}*)((const char*)W.data + (size_t)(q * batch + b) * W.strides[0] +
                                   (size_t)col * W.strides[1]);
{STORE}    }}
#endif
"""
_BANDS_FUSED_STORE = """            {{
                {ACC} y = alpha * sum;
{AXPBY}                *({OT}*)((char*)D.data + (size_t)b * D.strides[0] + (size_t)col * D.strides[1]) = {OT}(y);
            }}
"""
_BANDS_FUSED_AXPBY = ("                y += beta * {ACC}(*(const {OT}*)((const char*)C.data + "
                      "(size_t)(b < c_nb - 1 ? b : c_nb - 1) * C.strides[0] + (size_t)col * C.strides[1]));\n")

_CTYPES = {"float16": "wp::float16", "bfloat16": "wp::bfloat16", "float32": "wp::float32",
           "float64": "wp::float64"}


def _snippet(spec: GemvSpec) -> str:
    it = ITEM_BYTES[spec.in_dtype]
    if spec.kind == "bands":
        rg = spec.band_groups
        if rg > 1 and (spec.block_dim % rg or spec.block_dim // rg < 1):
            raise ValueError(f"gemv bands: {rg} row groups need a block_dim ({spec.block_dim}) they divide")
        fields = dict(ACC=_CTYPES[spec.acc_dtype], E=spec.chunk, RG=rg, GT=spec.block_dim // max(rg, 1))
        groups = opened = closed = ""
        if rg > 1:
            groups = _BANDS_GROUPS.format(**fields, **_BANDS_GROUPS_LEAVE[spec.fused])
            if spec.fused:
                opened, closed = _BANDS_GROUP0_OPEN, _BANDS_GROUP0_CLOSE.format(RG=rg)
        band = _BANDS.format(T=_CTYPES[spec.in_dtype], ACC=_CTYPES[spec.acc_dtype], ITEM=it, E=spec.chunk,
                             U=spec.unroll, VEC_DONE=_BANDS_VEC_ELSE if spec.fused else _BANDS_VEC_RETURN,
                             GROUPS=groups, STORE_OPEN=opened, STORE_CLOSE=closed)
        return band + _fused_tail(spec) if spec.fused else band
    if spec.kind == "rowdot":
        return _ROWDOT.format(T=_CTYPES[spec.in_dtype], ACC=_CTYPES[spec.acc_dtype], ITEM=it, E=spec.chunk,
                              LANES=spec.lanes, U=spec.unroll)
    if spec.lanes == 1:  # the CPU twin: one thread per column
        return _COLSUM_SCALAR.format(T=_CTYPES[spec.in_dtype], ACC=_CTYPES[spec.acc_dtype], ITEM=it, COLS=1)
    if spec.block_dim % 32 or 32 % spec.col_lanes or spec.block_dim < 32:
        raise ValueError(f"gemv colsum: block_dim {spec.block_dim} must be a multiple of 32 and col_lanes "
                         f"{spec.col_lanes} divide 32")
    return _COLSUM.format(T=_CTYPES[spec.in_dtype], ACC=_CTYPES[spec.acc_dtype], ITEM=it, COLS=spec.cols,
                          E=spec.chunk, CL=spec.col_lanes, RG=spec.row_groups, NW=spec.block_dim // 32,
                          BLOCK=spec.block_dim, U=spec.unroll)


def _fused_tail(spec: GemvSpec) -> str:
    """:data:`_BANDS_FUSED_TAIL` for ``spec``: what follows the partial sums of a fused bands kernel."""
    if spec.block_dim % 32 or spec.block_dim < 32:
        raise ValueError(f"gemv bands (fused): block_dim {spec.block_dim} must be a whole number of warps")
    acc, ot = _CTYPES[spec.acc_dtype], _CTYPES[spec.out_dtype]
    axpby = spec.epilogue == "axpby"
    store = _BANDS_FUSED_STORE.format(ACC=acc, OT=ot, AXPBY=_BANDS_FUSED_AXPBY.format(ACC=acc, OT=ot) if axpby else "")
    return _BANDS_FUSED_TAIL.format(BLOCK=spec.block_dim, NW=spec.block_dim // 32, COLS=spec.cols, ACC=acc, OT=ot,
                                    FU=BANDS_FINISH_UNROLL, E=spec.chunk, STORE=store,
                                    AXPBY_DOC=" + beta * C[b, col]" if axpby else "")


class _Named:
    """``@_Named(name).func_native(snippet)``: ``wp.func_native(snippet)`` registered under ``name``.

    Warp keys native functions by qualified name within the Python module, so each spec's snippet needs
    its own; and Warp reads a native function's return type only from a stub whose one decorator is,
    in its source, a call of an attribute named ``func_native`` (codegen's AST check; 1.7 also needs the
    annotation spelled ``wp.float32``/``wp.float64``), hence a decorator rather than a plain call."""

    def __init__(self, name: str):
        self.name = name

    def func_native(self, snippet: str):
        def register(stub):
            stub.__name__ = stub.__qualname__ = self.name
            return wp.func_native(snippet)(stub)

        return register


def _finish_warps(spec: GemvSpec) -> int:
    """bands: warps per 32 columns of the finishing kernel (CUDA); 1 on the CPU (threads run one at a time)."""
    return BANDS_FINISH_WARPS if spec.lanes > 1 else 1


def _native_func(spec: GemvSpec):
    """The kernel's snippet as a Warp function: rowdot ``dot(Mat, vec, bm, bv, r, k0, k1, lane)``,
    colsum ``csum(Mat, vec, bm, bv, c0, k0, k1, lane)``, returning the accumulator dtype; bands
    ``band(Mat, vec, W, bm, bv, c, k0, k1, wrow, grp)`` (writes W, returns nothing); bands fused ``fused(Mat, vec, W,
    cnt, D, C, alpha, beta, bm, bv, c, k0, k1, wrow, b, t, S, batch, c_nb, nthr, nfin, grp)`` (writes W, then D)."""
    IN = WP_DTYPES[spec.in_dtype]
    snip = _snippet(spec)
    name = re.sub(r"[^0-9A-Za-z_]", "_", spec.kernel_key + "_native")
    if spec.kind == "bands" and spec.fused:
        ACC, OUT = WP_DTYPES[spec.acc_dtype], WP_DTYPES[spec.out_dtype]

        def fused(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC),
                  cnt: wp.array(dtype=wp.int32), D: wp.array2d(dtype=OUT), C: wp.array2d(dtype=OUT), alpha: ACC,
                  beta: ACC, bm: int, bv: int, c: int, k0: int, k1: int, wrow: int, b: int, t: int, S: int,
                  batch: int, c_nb: int, nthr: int, nfin: int, grp: int): ...

        fused.__name__ = fused.__qualname__ = name
        return wp.func_native(snip)(fused)
    if spec.kind == "bands":
        ACC = WP_DTYPES[spec.acc_dtype]

        def band(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC), bm: int,
                 bv: int, c: int, k0: int, k1: int, wrow: int, grp: int): ...

        band.__name__ = band.__qualname__ = name
        return wp.func_native(snip)(band)
    if spec.acc_dtype == "float64":

        @_Named(name).func_native(snip)
        def f64(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), bm: int, bv: int, i: int, k0: int,
                k1: int, lane: int) -> wp.float64: ...

        return f64

    @_Named(name).func_native(snip)
    def f32(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), bm: int, bv: int, i: int, k0: int, k1: int,
            lane: int) -> wp.float32: ...

    return f32


def _native_sum(spec: GemvSpec):
    """bands' finishing snippet as a Warp function ``bsum(W, b, i, S, batch, lane)`` -> the accumulator dtype."""
    snip = _BANDS_SUM.format(ACC=_CTYPES[spec.acc_dtype], NW=_finish_warps(spec), FU=BANDS_FINISH_UNROLL)
    name = re.sub(r"[^0-9A-Za-z_]", "_", spec.kernel_key + "_sum_native")
    ACC = WP_DTYPES[spec.acc_dtype]
    if spec.acc_dtype == "float64":

        @_Named(name).func_native(snip)
        def f64(W: wp.array2d(dtype=ACC), b: int, i: int, S: int, batch: int, lane: int) -> wp.float64: ...

        return f64

    @_Named(name).func_native(snip)
    def f32(W: wp.array2d(dtype=ACC), b: int, i: int, S: int, batch: int, lane: int) -> wp.float32: ...

    return f32


# --- the kernel factory ---------------------------------------------------------------------------------
_factory_lock = threading.Lock()


def get_kernel(spec: GemvSpec, partial: bool = False):
    """The kernel for ``spec`` (``partial``: the K-split variant that writes partial sums into the
    workspace), built once per process (thread-safe)."""
    with _factory_lock:
        # colsum's block is its column strip; the fused bands' finish reads its block size
        keep = (spec.kind == "colsum" and spec.lanes > 1) or (spec.kind == "bands" and (spec.fused or
                                                                                         spec.band_groups > 1))
        return _build(dataclasses.replace(spec, block_dim=spec.block_dim if keep else 0, target_warps=0), partial)


def bands_finish_kernel(spec: GemvSpec):
    """bands: the kernel that sums the bands' partial sums and applies the epilogue (thread-safe, cached)."""
    with _factory_lock:
        return _build_sum(dataclasses.replace(spec, block_dim=0, target_warps=0))


def kernels(spec: GemvSpec, partial: bool = False) -> list:
    """Every kernel a launch of ``spec`` may use: the GEMV kernel, and with ``partial`` skinny's
    finishing pass (for ``warp-gemm precompile``); bands: its two kernels."""
    if spec.kind == "bands":
        return [get_kernel(spec, True)] if spec.fused else [get_kernel(spec, True), bands_finish_kernel(spec)]
    ks = [get_kernel(spec, partial)]
    if partial:
        ks.append(skinny.finish_kernel(spec.acc_dtype, spec.out_dtype))
    return ks


@functools.cache
def _native_cached(spec: GemvSpec):
    return _native_func(spec)


def _store_func(spec: GemvSpec, name: str, partial: bool):
    """``store(D, C, W, acc, alpha, beta, b, s, batch, c_nb, r)``: one output element -- the partial sum into
    the workspace (``partial``: K split), else the epilogue (alpha, beta * C, the output cast)."""
    OUT, ACC = WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    AXPBY = spec.epilogue == "axpby"
    PARTIAL = partial

    def store(D: wp.array2d(dtype=OUT), C: wp.array2d(dtype=OUT), W: wp.array2d(dtype=ACC), acc: ACC,
              alpha: ACC, beta: ACC, b: int, s: int, batch: int, c_nb: int, r: int):
        if wp.static(PARTIAL):
            W[s * batch + b, r] = acc
        else:
            y = alpha * acc
            if wp.static(AXPBY):
                y = y + beta * ACC(C[wp.min(b, c_nb - 1), r])
            D[b, r] = OUT(y)

    store_name = func_name(name, "store")
    store.__name__ = store.__qualname__ = store_name
    return wp.func(store, name=store_name)


def _band_rows_func(spec: GemvSpec, name: str):
    """bands with row groups: ``rows(t, s, per, K) -> vec4i(c, k0, k1, grp)`` for launch thread ``t`` of band ``s``:
    its block column ``blk`` and row group ``grp`` (``block_dim / band_groups`` threads each), its first column ``c =
    blk * cols + j * chunk`` (j: its place in the group) and its rows ``[k0, k1)``, the grp-th of the band's
    ``band_groups`` contiguous pieces (empty past K). With one group: ``c = t * chunk``, the band's rows."""
    E, RG, COLS = spec.chunk, spec.band_groups, spec.cols
    BD = max(spec.block_dim, 1)
    GT = BD // RG

    def rows(t: int, s: int, per: int, K: int):
        blk = t // BD
        tl = t - blk * BD
        grp = tl // GT
        sub = (per + RG - 1) // RG
        k0 = s * per + grp * sub
        return wp.vec4i(blk * COLS + (tl - grp * GT) * E, k0, wp.min(K, wp.min(s * per + per, k0 + sub)), grp)

    rows_name = func_name(name, "rows")
    rows.__name__ = rows.__qualname__ = rows_name
    return wp.func(rows, name=rows_name)


@functools.cache
def _build(spec: GemvSpec, partial: bool):
    if spec.kind not in KINDS or spec.epilogue not in ("scale", "axpby"):
        raise ValueError(f"bad gemv spec {spec}")
    IN, OUT, ACC = WP_DTYPES[spec.in_dtype], WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    G, COLS = spec.group, spec.cols
    native = _native_cached(spec)
    name = spec.kernel_key + ("_part" if partial else "")
    if spec.kind == "bands" and spec.fused:
        rows = _band_rows_func(spec, name)

        def bands_fused(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC),
                        cnt: wp.array(dtype=wp.int32), C: wp.array2d(dtype=OUT), D: wp.array2d(dtype=OUT), alpha: ACC,
                        beta: ACC, per: int, batch: int, m_nb: int, v_nb: int, c_nb: int, nfin: int):
            b, s, t = wp.tid()
            r = rows(t, s, per, Mat.shape[1])  # (c, k0, k1, grp)
            native(Mat, vec, W, cnt, D, C, alpha, beta, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), r[0], r[1], r[2],
                   s * batch + b, b, t, W.shape[0] // batch, batch, c_nb, cnt.shape[0] // (2 * batch), nfin, r[3])

        return _compat.make_kernel(bands_fused, name)
    if spec.kind == "bands":
        E, RG = spec.chunk, spec.band_groups
        rows = _band_rows_func(spec, name)

        def bands(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), W: wp.array2d(dtype=ACC), per: int,
                  batch: int, m_nb: int, v_nb: int):
            # t last: consecutive threads take consecutive 16-byte chunks of a row
            b, s, t = wp.tid()
            if wp.static(RG == 1):  # (built without its block size: c = t * E, the whole band)
                k0 = s * per
                native(Mat, vec, W, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), t * E, k0,
                       wp.min(Mat.shape[1], k0 + per), s * batch + b, 0)
            else:
                r = rows(t, s, per, Mat.shape[1])  # (c, k0, k1, grp)
                native(Mat, vec, W, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), r[0], r[1], r[2], s * batch + b, r[3])

        return _compat.make_kernel(bands, name)

    store = _store_func(spec, name, partial)
    # The two kinds differ only in which Mat dimension runs along K and in a group's outputs: rowdot one
    # (every lane holds the warp's total; lane 0 stores it), colsum a strip of COLS (thread j stores j).
    ROWDOT = spec.kind == "rowdot"
    PER_GROUP = 1 if ROWDOT else COLS

    def gemv(Mat: wp.array3d(dtype=IN), vec: wp.array2d(dtype=IN), C: wp.array2d(dtype=OUT),
             D: wp.array2d(dtype=OUT), W: wp.array2d(dtype=ACC), alpha: ACC, beta: ACC, per: int,
             batch: int, m_nb: int, v_nb: int, c_nb: int):
        # t last: Warp's fastest-varying index, so a group's threads (a warp's lanes, a block) are consecutive t
        b, s, t = wp.tid()
        g = t // G
        lane = t - g * G
        k0 = s * per
        if wp.static(ROWDOT):
            k1 = wp.min(Mat.shape[2], k0 + per)
            outs = Mat.shape[1]
        else:
            k1 = wp.min(Mat.shape[1], k0 + per)
            outs = Mat.shape[2]
        acc = native(Mat, vec, wp.min(b, m_nb - 1), wp.min(b, v_nb - 1), g * PER_GROUP, k0, k1, lane)
        r = g * PER_GROUP + lane
        if lane < PER_GROUP and r < outs:
            store(D, C, W, acc, alpha, beta, b, s, batch, c_nb, r)

    return _compat.make_kernel(gemv, name)


@functools.cache
def _build_sum(spec: GemvSpec):
    OUT, ACC = WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    FB = 32 * _finish_warps(spec)
    native = _native_sum(spec)
    name = spec.kernel_key + "_sum"
    store = _store_func(spec, name, False)  # the epilogue, as the unsplit kernels apply it

    def bands_sum(W: wp.array2d(dtype=ACC), C: wp.array2d(dtype=OUT), D: wp.array2d(dtype=OUT), alpha: ACC,
                  beta: ACC, S: int, batch: int, c_nb: int):
        b, t = wp.tid()
        g = t // FB
        lane = t - g * FB
        acc = native(W, b, g * 32, S, batch, lane)
        r = g * 32 + lane
        if lane < 32 and r < D.shape[1]:
            store(D, C, W, acc, alpha, beta, b, 0, batch, c_nb, r)

    return _compat.make_kernel(bands_sum, name)


# --- launch ---------------------------------------------------------------------------------------------
def _view(x, shape: tuple, strides: tuple):
    """A non-owning Warp view of array ``x``'s memory (strides in bytes)."""
    item = wp.types.type_size_in_bytes(x.dtype)
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + item if all(shape) else item
    return wp.array(ptr=x.ptr, dtype=x.dtype, shape=tuple(shape), strides=tuple(strides), capacity=extent,
                    device=x.device)


def _vector(X, K: int):
    """``(nb, K)`` view of a ``(nb, 1, K)`` or ``(nb, K, 1)`` operand."""
    k_dim = 2 if X.shape[2] == K else 1
    if X.shape[3 - k_dim] != 1 or X.shape[k_dim] != K:
        raise ValueError(f"gemv: the vector operand has shape {tuple(X.shape)}, expected (nb, 1, {K}) or "
                         f"(nb, {K}, 1)")
    return _view(X, (X.shape[0], K), (X.strides[0], X.strides[k_dim]))


def operand_views(spec: GemvSpec, A, B, M: int, N: int, K: int):
    """``(Mat, vec, m_is_a)``: the matrix as ``(nb, R, K)`` (rowdot) or ``(nb, K, R)`` (colsum) and the
    vector as ``(nb, K)``, views of the 3-D kernel operands A (``(a_nb, M, K)``, layout T ``(a_nb, K,
    M)``) and B (``(b_nb, K, N)``, T ``(b_nb, N, K)``); R is N for M == 1, else M."""
    mat, vec = (B, A) if M == 1 else (A, B)
    R = N if M == 1 else M
    want = (R, K) if spec.kind == "rowdot" else (K, R)
    if tuple(mat.shape[1:]) != want:
        raise ValueError(f"gemv {spec.kind}: the matrix operand has shape {tuple(mat.shape)}, expected "
                         f"(nb, {want[0]}, {want[1]}) for M={M} N={N} K={K}")
    return mat, _vector(vec, K), M != 1


def _side(X, M: int):
    """``(nb, R)`` view of a ``(nb, M, N)`` output-shaped array with M == 1 or N == 1."""
    d = 2 if M == 1 else 1
    return _view(X, (X.shape[0], X.shape[d]), (X.strides[0], X.strides[d]))


_empty: dict = {}


def _no_workspace(dtype: str, device):
    """An empty 2-D array of ``dtype`` on ``device`` (one per process), for the unsplit kernel's W."""
    key = (dtype, str(device))
    with _factory_lock:
        if key not in _empty:
            _empty[key] = wp.empty((0, 0), dtype=WP_DTYPES[dtype], device=device)
        return _empty[key]


def launch_args(spec: GemvSpec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb, workspace=None,
                counters=None):
    """``[(kernel, dim, inputs, block_dim_or_None)]`` in launch order: the GEMV kernel over (batch,
    K splits, outputs or column groups x lanes), then, where K is split, skinny's finishing pass over
    (batch, M, N). These are plain (SIMT) kernels: launch each with ``wp.launch(kernel, dim=dim,
    inputs=inputs, block_dim=block_dim)`` (None: Warp's default), never ``launch_tiled``.

    A, B, C, D: 3-D Warp arrays as in the other families (A ``(a_nb, M, K)``, layout T ``(a_nb, K, M)``;
    B ``(b_nb, K, N)``, T ``(b_nb, N, K)``; C ``(c_nb, M, N)`` or None for "scale" (C may be D); D
    ``(batch, M, N)``), with ``min(M, N) == 1`` and the layouts ``spec.kind`` was chosen for. Where K is
    split, ``workspace`` is a ``workspace_shape`` array; the fused bands (``spec.fused``) also take ``counters``, an
    int32 array of ``counters_len`` zeros (kept by the caller: every launch leaves it zero)."""
    if batch == 0 or M == 0 or N == 0:
        return []
    if min(M, N) != 1:
        raise ValueError(f"gemv needs M == 1 or N == 1, got M={M} N={N}")
    if spec.epilogue == "axpby" and C is None:
        raise ValueError("the axpby epilogue needs C")
    mat, vec, m_is_a = operand_views(spec, A, B, M, N, K)
    m_nb, v_nb = (a_nb, b_nb) if m_is_a else (b_nb, a_nb)
    R = N if M == 1 else M
    groups = R if spec.kind == "rowdot" else _ceil(R, spec.cols)
    s, per = splits(spec, M, N, K, batch)
    cc = C if C is not None else D
    c_n = c_nb if C is not None else 1
    block = spec.block_dim if spec.lanes > 1 else None
    # The lanes' index last: Warp's launch index varies fastest in its last dimension, and the warp
    # shuffles need one output's 32 lanes in one warp (rowdot), a column strip's threads in one block
    # (colsum: the last dimension is a whole number of blocks, so no block straddles two strips).
    dim = (batch, s, groups * spec.group)
    D2, C2 = _side(D, M), _side(cc, M)
    if s <= 1 and spec.kind != "bands":
        inputs = [mat, vec, C2, D2, _no_workspace(spec.acc_dtype, D.device), float(alpha), float(beta), per,
                  batch, m_nb, v_nb, c_n]
        return [(get_kernel(spec, False), dim, inputs, block)]
    want = (s * batch, M, N)
    if workspace is None or tuple(workspace.shape) != want or workspace.dtype != WP_DTYPES[spec.acc_dtype]:
        got = None if workspace is None else (tuple(workspace.shape), workspace.dtype)
        raise ValueError(f"gemv {spec.key} M={M} N={N} K={K} batch={batch} needs a workspace of shape "
                         f"{want}, {spec.acc_dtype}; got {got}")
    it = ITEM_BYTES[spec.acc_dtype]
    W2 = _view(workspace, (s * batch, R), (R * it, it))
    if spec.kind == "bands" and spec.fused:
        n = counters_len(spec, M, N, batch)
        if counters is None or tuple(counters.shape) != (n,) or counters.dtype != wp.int32:
            got = None if counters is None else (tuple(counters.shape), counters.dtype)
            raise ValueError(f"gemv {spec.key} M={M} N={N} batch={batch} needs {n} int32 counters; got {got}")
        # finishers per column block: at most BANDS_FINISHERS, and all of them waiting at once under the SM count
        sms = spec.target_warps // TARGET_WARPS_PER_SM
        nfin = max(1, min(s, BANDS_FINISHERS, (sms - 1) // max(1, batch * _ceil(R, spec.cols))))
        return [(get_kernel(spec, True), dim, [mat, vec, W2, counters, C2, D2, float(alpha), float(beta), per, batch,
                                               m_nb, v_nb, c_n, nfin], block)]
    if spec.kind == "bands":
        fb = 32 * _finish_warps(spec)
        return [(get_kernel(spec, True), dim, [mat, vec, W2, per, batch, m_nb, v_nb], block),
                (bands_finish_kernel(spec), (batch, _ceil(R, 32) * fb), [W2, C2, D2, float(alpha), float(beta), s,
                                                                       batch, c_n], fb if spec.lanes > 1 else None)]
    inputs = [mat, vec, C2, D2, W2, 1.0, 0.0, per, batch, m_nb, v_nb, c_n]
    c_fin = C if spec.epilogue == "axpby" else None
    return [(get_kernel(spec, True), dim, inputs, block),
            skinny.finish_launch(D, workspace, c_fin, alpha, beta, s, batch, c_n, spec.acc_dtype,
                                 spec.out_dtype)]


# --- where the family applies ---------------------------------------------------------------------------
@functools.cache
def _native_returns() -> bool:
    """Whether this Warp's ``wp.func_native`` snippets return a value (the stub's return annotation
    becomes the C++ return type). Probed by generating (not compiling) a tiny kernel's CUDA source."""
    try:

        @_Named("wg_gemv_probe_ret").func_native("    return x.shape[0] > 0 ? 1.0f : 0.0f;\n")
        def ret(x: wp.array2d(dtype=wp.float32), i: int) -> wp.float32: ...

        def probe(x: wp.array2d(dtype=wp.float32)):
            x[0, 0] = ret(x, 0)

        k = _compat.make_kernel(probe, "wg_gemv_probe")
        src = cuda_source(k)
        return src is not None and re.search(r"wp::float32\s+wg_gemv_probe_ret\w*\(", src) is not None
    except Exception:
        return False


def has_native_returns() -> bool:
    # The factory's lock: the probe registers a native function in this module, like _build does.
    with _factory_lock:
        return _native_returns()
