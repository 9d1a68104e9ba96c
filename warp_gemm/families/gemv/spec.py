"""What a GEMV kernel is: ``GemvSpec``, its kind per layout (rowdot, colsum, bands), the K split that fills the GPU,
workspace and counter sizes, and the measured constants behind them."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import dataclasses
import functools
import re
import threading
from dataclasses import dataclass

import warp as wp

from ... import _compat
from ...core.options import options
from ..common.kernels import ITEM_BYTES, WP_DTYPES, acc_dtype_name, cuda_source

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
# target_warps / COLSUM_SPLIT_TO warps. H100, fp16, graph replay:
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
# order and applies the epilogue. Cold L2, H100: the access patterns alone (Triton):
# fp16 1x4096x4096 read in 16-row bands of 4 KiB per block 21.6 us, column strips walking every row
# (colsum's pattern) 49.9 and more, cuBLAS 21.4. The kernels (colsum in the same run):
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


# bands with the finish in the same launch (``GemvSpec.fused``; the default for one matrix, see bands_choice; the
# option ``gemv_fused`` forces it either way): each band block writes its partial sums, then takes a rank from its
# column block's arrival counter; the last ``F`` arrivals wait until every band has arrived and each sums its slice of the column block's columns over
# the bands in band order (deterministic), applies the epilogue, and the last to leave resets the counters. F is at
# most BANDS_FINISHERS and small enough that the waiting blocks of every column block stay under the SM count (a
# waiting block must never keep a band block from starting). Saves the finishing kernel and its launch (3.0 us warm
# at 1x4096x4096). The counters live in their own
# zeroed buffer (``counters_len``), not in the workspace (other families' partial sums reuse that).
BANDS_FINISHERS = 64


BANDS_MIN_COLS = 4096


# bands (CUDA): row groups per block (``GemvSpec.band_groups``; option ``gemv_band_groups``). A block of BANDS_BLOCK threads is G groups
# of BANDS_BLOCK / G threads; each group reads its own rows (a contiguous 1/G of the block's band) of the block's
# BANDS_BLOCK / G * 8 columns, and the G partial sums meet in shared memory (in group order) before group 0 writes
# them. The blocks, the threads and the rows each thread reads stay as at G == 1; each row is read in pieces of
# 4 KiB / G, and the bands are G times taller, so the finishing kernel sums G times fewer partials per column
# (fp16 1x4096x4096: 256 bands of 16 rows at G == 1, 64 of 64 at G == 4). A profile put the gap to cuBLAS in that
# finish (3.0 us warm, 5.8 with the partials from DRAM); fewer, taller bands without groups lost because they had
# fewer blocks, which this keeps. H100, cold L2, cuBLAS in the same run: fp16 1x4096x4096 G 1/2/4/8/16: 26.4/26.0/25.3/25.5/25.3 us (graph replay 13.8 -> 10.9
# at 4), 1x8192x8192 and batch 4 within 1% of G 1; twice the bands (1024 blocks) 26.1-26.4. The runner: 25.2 and
# 25.4 us in two runs (cuBLAS 21.5). Finishing warps 2-8 and 512-thread blocks around G 4: 25.2-25.9.
BANDS_GROUPS = 4


# bands (CUDA), one matrix (batch 1) of fewer column blocks than SMs: the fused finish with 16 row groups,
# so each column block's finishers sum 16 bands, not 64, and there is no finishing kernel. H100, cuBLAS in the same
# run (benchmarks/results/h100-gemv/): the runner on fp16 1x4096x4096 23.3-24.3 us against 25.0-25.3 for the two launches with 4
# groups (cuBLAS 20.7-21.6), 1x8192x8192 61.7-62.3 against 64.0-64.1, 1x4096x1024 12.4-12.7 against 14.5,
# 1x4096x16384 61.3-61.9 against 63.7; a probe (cold L2): 24.2 against 25.5, 62.6 against 64.8. Not taken
# (a) for batches: 4 x 1x4096x4096 took 70.1 us fused against 64.2 (the finishers of 4 matrices' column blocks
# must all wait under the SM count, so each column block gets one); (b) where the column blocks (128 columns each at
# 16 groups) reach the SM count, which leaves one finisher per column block: 1x24576x2048 (192 blocks) 58.8-59.6
# against 53.4, 1x16384x1024, 1x32768x4096 and 1x65536x512 even or within 2%; (c) with one finisher per column block
# on 1x4096x4096 (30.8 us) or with 4 or 8 groups (26.9, 31.3). With the matrix already in L2 (graph replay) the
# fused kernel is the slower one at 1x4096x4096 (13.5 against 11.1 us): its waiting finishers cost more than the
# second launch when reads are cheap.
BANDS_FUSED_GROUPS = 16


def bands_choice(batch: int, cols: int, sms: int) -> tuple[bool, int]:
    """``(fused, band_groups)`` of the bands kernels for ``batch`` matrices of ``cols`` output columns on a GPU of
    ``sms`` SMs: fused with BANDS_FUSED_GROUPS for one matrix whose column blocks at that grouping stay under the SM
    count; else the bands kernel and its finishing kernel with BANDS_GROUPS. ``options(gemv_fused=True / False)``
    forces the fused / two-launch kernels, ``options(gemv_band_groups=G)`` the row groups."""
    opts = options()
    groups = opts.gemv_band_groups or BANDS_GROUPS
    if opts.gemv_fused is True:
        return True, groups
    fused_cols = BANDS_BLOCK // BANDS_FUSED_GROUPS * 8  # 16-byte chunks of a 16-bit type (bands: 16-bit only)
    if opts.gemv_fused is None and batch == 1 and _ceil(cols, fused_cols) < sms:
        return True, opts.gemv_band_groups or BANDS_FUSED_GROUPS
    return False, groups


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
    fused: bool = False  # bands: the finish in the same launch (see bands_choice)
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

    H100: rowdot fp16 1x4096x4096 with B stored (N, K) (F.linear's
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


# --- the kernel factory ---------------------------------------------------------------------------------
_factory_lock = threading.Lock()


