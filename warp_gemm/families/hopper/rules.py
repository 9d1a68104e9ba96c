"""When the Hopper family applies, and its default kernel for a problem."""

from __future__ import annotations

from dataclasses import replace

from warp_gemm import _compat

from .spec import BK, IN_DTYPES, ITEM_BYTES, OUT_DTYPES, HopperSpec, cdiv, k_ranges, unfit

_TMA_ALIGN = 16  # TMA: global base addresses and byte strides are multiples of 16
_TMA_MAX_STRIDE = 1 << 40
_MAX_DIM = (1 << 31) - 1  # tile coordinates are 32-bit in the kernel


STAGES = {(128, 256): 4, (256, 128): 4, (128, 128): 6, (64, 128): 8}
#: K tiles (of 64) one split takes at least: 128x128x65536 fp16 ran 81.6 TFLOP/s in 64 splits of 16 K tiles against
#: 72.6 in 128 of 8 (H200).
SPLIT_MIN_KT = 16
#: The split-K time model (H200, fp16, 128x128 tiles, 6 stages): one 64-deep K tile of one output tile takes a block
#: 0.33 us (1024x1024x16384 unsplit: 64 blocks, 85.7 us for 256 K tiles), 1.1 times that with twice the blocks
#: running; splitting adds ~14 us (the finishing launch, the partial stores) plus 0.8 us per MB of float32 slabs
#: (fitted to 1024x1024x16384 in 2 / 4 splits: 66.0 / 73.1 us, 1024x1024x4096 in 2: 31.9, 128x128x65536 in 32 / 64
#: / 128: 26.6 / 26.3 / 29.6, 1000^3 in 2: 25.0).
T_KT_US = 0.33
SPLIT_SLOW = 1.1
SPLIT_FIXED_US = 14.0
SPLIT_US_PER_MB = 0.8


def split_count(tiles: int, M: int, N: int, K: int, batch: int, sm_count: int, bk: int = BK) -> int:
    """K splits for ``tiles`` 128x128 output tiles (batch included): as many as keep ``tiles * splits`` within one
    wave of ``sm_count`` blocks with at least ``SPLIT_MIN_KT`` K tiles each (normalised by :func:`spec.k_ranges`: no
    empty range), where the time model above says they save time; else 1. 1024x1024x16384: 2 (modelled 67 us against
    85; measured 521 TFLOP/s against 401 unsplit); 1024x1024x4096: 1 (modelled 32 against 21; measured 269 split in 2
    against 301); 128x128x65536: 64 (23 us against 338; measured 81.6 TFLOP/s against 7.1)."""
    k_tiles = cdiv(K, bk)  # tf32's 32-deep K tiles take about a 16-bit tile's time (half the rate, half the depth)
    s = min(sm_count // max(1, tiles), k_tiles // SPLIT_MIN_KT)
    if s < 2:
        return 1
    s, per = k_ranges(K, s, bk)
    split = per * T_KT_US * SPLIT_SLOW + SPLIT_FIXED_US + SPLIT_US_PER_MB * s * batch * M * N * 4 / 1e6
    return s if split < k_tiles * T_KT_US else 1


def tile_choice(M: int, N: int, K: int, batch: int, sm_count: int, split: bool = True,
                bk: int = BK) -> tuple[int, int, int]:
    """``(bm, bn, splits)``: 128x256 tiles where they fill the SMs, else 128x128 tiles (twice the blocks), split over K
    where :func:`split_count` says so (``split`` False: never). Measured (H200, fp16): 4097^3 360 TFLOP/s with
    128x256 tiles (561 tiles, 4.25 waves) against 301 with 128x128 (1089 tiles, 8.25 waves); 2048^3 (128 tiles of
    128x256) 467 against 478, inside the spread; 333x4096x4096 (B = W.T) 353 with 128x128 against 244 with 128x256 in
    2 K splits."""
    tiles = batch * cdiv(M, 128) * cdiv(N, 256)
    if tiles >= sm_count:
        return 128, 256, 1
    tiles = batch * cdiv(M, 128) * cdiv(N, 128)
    return 128, 128, split_count(tiles, M, N, K, batch, sm_count, bk) if split else 1


def wants_split_n(bm: int, bn: int, splits: int, M: int, N: int, batch: int, sm_count: int, rows_128: bool) -> bool:
    """Whether 64x128 tiles with the two consumers splitting the columns (``split_n``, 8 stages) replace unsplit
    128x128 tiles: at most half the SMs busy with 128x128 tiles, and every row of A and B on a 128-byte boundary
    (``rows_128``). Measured (H200, fp16, cuBLAS in the same process): 1024^3 171.6 TFLOP/s against 154.3,
    1024x1024x4096 342.8 against 303.3, 512x2048x2048 248.6 against 224.1; with rows off 128 bytes it lost: 1000^3
    122.1 against 127.3, 1000x1000x4000 217.0 against 247.3 (twice the B tiles read per output, rows split over two
    128-byte lines); 1536^3 (144 tiles) 244.9 against 275.9."""
    return (rows_128 and (bm, bn, splits) == (128, 128, 1)
            and batch * cdiv(M, 128) * cdiv(N, 128) <= sm_count // 2)


#: K from which :func:`wants_cluster` takes clusters, per B layout (below it they measured a tie or a loss).
CLUSTER_MIN_K = {"N": 2000, "T": 3000}


def wants_cluster(bm: int, bn: int, splits: int, M: int, N: int, K: int, batch: int, sm_count: int,
                  rows_128: bool, layout_b: str) -> bool:
    """Whether 64x128 tiles of one consumer warpgroup in clusters of two blocks sharing their B tile (``cluster=2``,
    pair M: each block multicasts half of it) replace unsplit 128x128 tiles: one product (batch 1) of more than 64
    rows (a partner tile always past the edge would only copy) with at most half the SMs busy with 128x128 tiles,
    rows of A or B off 128-byte boundaries (where ``split_n`` alone is not taken), K of at least
    ``CLUSTER_MIN_K[layout_b]``, a Warp with clusters (batches and M <= 64 are not measured). Measured (H100, kernels with cuBLAS in the same process, two
    runs each, TFLOP/s, against 128x128 tiles): fp16 B stored (K, N) 1000x1000xK, K = 1000: 125.8 / 126.5 against
    128.1 / 125.5 (a tie: not taken), 2000: 199.7 / 197.5 against 193.2 / 193.2, 4000: 273.8 / 273.5 against 251.8 /
    251.3, 8000: 334.2 / 334.0 against 283.3 / 283.4; bf16 1000x1000x4000 274.1 / 274.1 against 248.5 / 250.5;
    500x1000x4000 157.8 / 158.0 against 125.5 / 126.0. B = W.T: 1000x1000x2000 202.6 / 203.9 against 206.6 / 207.0
    (not taken), 4000: 289.4 / 291.4 against 278.7 / 279.6, 8000: 388.2 / 386.1 against 339.0 / 342.2; 777x1000x3000
    176.8 / 176.6 against 165.9 / 165.6. The two consumers splitting the columns (``split_n``) in the same clusters
    measured the same or up to 4% slower; with rows on 128 bytes clusters lost to split_n alone (1024^3 152.2
    against 168.2)."""
    return K >= CLUSTER_MIN_K.get(layout_b, 1 << 62) and _cluster_shape(bm, bn, splits, M, N, batch, sm_count, rows_128)


def _cluster_shape(bm: int, bn: int, splits: int, M: int, N: int, batch: int, sm_count: int, rows_128: bool) -> bool:
    """The clusters' conditions but K (:func:`wants_cluster`, :func:`wants_short_k_cluster`)."""
    return (_compat.HAS_CLUSTER_DIM and not rows_128 and (bm, bn, splits) == (128, 128, 1) and batch == 1 and M > 64
            and cdiv(M, 128) * cdiv(N, 128) <= sm_count // 2)


def wants_short_k_cluster(bm: int, bn: int, splits: int, M: int, N: int, K: int, batch: int, sm_count: int,
                          rows_128: bool, layout_b: str, out_dtype: str) -> bool:
    """Whether 16-bit outputs below :data:`CLUSTER_MIN_K` take 64x128 tiles in clusters of two sharing their B tile
    with the two consumers splitting the columns (each 64 x 64; ``split_n``, pair M) and the staged store, where
    :func:`wants_cluster` would take them but for K. Measured (H100, fp16 unless said, kernel times with the L2
    flushed before each call, two runs, µs, against the 128x128 tiles with the staged store): 1000^3 10.88 / 10.88
    against 11.20 / 11.17, B = W.T 10.69 / 10.72 against 10.72 / 11.01, bf16 10.82 / 10.78 against 11.14 / 11.17;
    1000x1000x64 4.74 / 4.74 against 4.93 / 4.93, x504 7.39 / 7.36 against 7.71 / 7.68, x768 8.38 / 8.48 against
    8.61 / 8.64; 777x1000x1000 10.46 / 10.43 against 11.10 / 11.10; B = W.T 1000x1000x2000 14.56 / 14.62 against
    15.01 / 15.17 (6 stages, stores from registers). (cuBLAS's kernel at 1000^3 has the same tiles and clusters.)"""
    return (out_dtype in ("float16", "bfloat16") and K < CLUSTER_MIN_K.get(layout_b, 1 << 62)
            and _cluster_shape(bm, bn, splits, M, N, batch, sm_count, rows_128))


#: Peeling (composite/peel.py's edges): a side one past a multiple of the tile (4097) costs a whole row or column of
#: output tiles, each a full K loop for one useful row. The model: rounds of the persistent grid (``ceil(items /
#: SMs)``) times PEEL_KT_S per 64-deep K tile of a 128x256 tile (scaled by tile area), against the same over the core
#: plus a GEMV streaming the other operand once (peel.PEEL_GEMV_BYTES_PER_S, peel.PEEL_LAUNCH_S). fp16 4097^3 (staged
#: rows), H200: 128x256 tiles, 5 rounds of 65 K tiles, 289 us (0.89 us each); peeled, a 256x128 core over 4096 x 4097
#: (16 x 33 = 528 tiles, 4 rounds) 253 us plus 20 us for the GEMV: 399 -> 417 TFLOP/s for the whole call.
PEEL_KT_S = 0.89e-6
PEEL_CORE_TILES = ((128, 256), (256, 128))


def peel_choice(spec: HopperSpec, M: int, N: int, K: int, batch: int, sm_count: int):
    """``(core spec, rows, cols)``: the last row (or, B stored (N, K), the last column) peeled off to the GEMV family
    and the core on the tiles of ``PEEL_CORE_TILES`` the model prefers, where that saves ``peel.PEEL_MIN_GAIN`` of the
    modelled time; else None. One-wide edges only: the skinny family's wider ones stream their operand at ~0.5 TB/s."""
    from ..composite import peel

    if spec.splits > 1 or spec.transpose_b or spec.in_dtype == "float32":
        return None
    kt = cdiv(K, spec.bk)

    def t(bm, bn, m, n):
        return cdiv(batch * cdiv(m, bm) * cdiv(n, bn), sm_count) * kt * PEEL_KT_S * bm * bn / (128 * 256)

    full = t(spec.bm, spec.bn, M, N)
    item = ITEM_BYTES[spec.in_dtype]
    best = None
    for bm, bn in PEEL_CORE_TILES:
        for pr, pc in ((int(M % bm == 1 and M > 1), 0), (0, int(N % bn == 1 and N > 1 and spec.layout_b == "T"))):
            if not (pr or pc):
                continue
            edge = batch * K * (N if pr else M) * item / peel.PEEL_GEMV_BYTES_PER_S + peel.PEEL_LAUNCH_S
            total = t(bm, bn, M - pr, N - pc) + edge
            if total <= (1 - peel.PEEL_MIN_GAIN) * full and (best is None or total < best[0]):
                # the cores' 128x256 / 256x128 tiles store from registers (with_staged_store leaves them)
                core = replace(spec, bm=bm, bn=bn, stages=STAGES[(bm, bn)], split_n=False, cluster=1,
                               staged_store=False)
                best = (total, core, pr, pc)
    return None if best is None else best[1:]


def with_staged_store(spec: HopperSpec, K: int) -> HopperSpec:
    """``spec`` with its 16-bit outputs stored through the shared staging buffer (``staged_store``) where that pays: the
    64x128 tiles of one consumer in clusters of two (8 stages and the buffer fit), and 128x128 tiles with K up to
    :data:`STAGED_STORE_MAX_K` (5 stages for 6: the buffer and 6 stages need 232544 bytes, over sm_90's 232448). H100,
    kernels with cuBLAS in the same process, two runs, µs, against the stores from registers: fp16 1000^3 15.0 / 15.1
    against 15.6 / 15.6, W.T 14.7 / 14.7 against 15.2 / 15.2, bf16 15.0 / 15.2 against 15.6 / 15.6, 1000x1000x64 8.7 /
    8.6 against 9.0 / 9.0, x504 11.5 / 11.5 against 11.9 / 11.9, 1024^3 13.5 / 13.5 against 14.2 / 14.2, 1536^3 25.6 /
    25.6 against 26.5 / 26.5; clusters 777x1000x3000 W.T 25.2 / 25.2 against 25.6 / 25.6, 1000x1000x4000 29.2 / 29.2
    against 29.3 / 29.2. Left out: 128x128 at 2048^3 33.7 / 33.7 against 33.2 / 33.2 and bf16 333x4096x4096 W.T 36.4 /
    36.4 against 34.4 / 34.0 (5 stages on long K). :func:`wants_short_k_cluster`'s tiles take it too."""
    if spec.out_dtype not in ("float16", "bfloat16") or spec.splits > 1 or spec.split_n:
        return spec
    if (spec.bm, spec.bn) == (128, 128) and spec.cluster == 1 and K <= STAGED_STORE_MAX_K:
        staged = replace(spec, stages=STAGED_STORE_STAGES_128, staged_store=True)
    elif (spec.bm, spec.bn, spec.cluster) == (64, 128, 2):
        staged = replace(spec, staged_store=True)
    else:
        return spec
    return spec if unfit(staged) else staged


#: 128x128 tiles with the staged store: 5 stages of 32 KB, the mbarriers and the 34 KB buffer
STAGED_STORE_STAGES_128 = 5
#: the longest K of 128x128 tiles with the staged store (1536 the largest measured gaining, 2048 lost)
STAGED_STORE_MAX_K = 1536


def default_spec(in_dtype: str, out_dtype: str, layout_b: str, M: int, N: int, K: int, batch: int, sm_count: int = 132,
                 use_c: bool = False, splits: bool = True, rows_128: bool = False) -> HopperSpec:
    """The kernel for a problem of this shape: :func:`tile_choice`'s tiles and K splits (``splits`` False: none).
    Measured (H200, fp16, cuBLAS in the same process): 128x256 tiles, 4 stages, 2 consumer warpgroups: 624/625
    TFLOP/s at 4096^3/8192^3 (B = W.T, float32 output) against 601/606 for 128x128 with 6 stages and 633/634 for
    256x128 (3 stages: 638/641, inside the 10% spread of one kernel between two processes, so the reference design's
    4 stages stay). Fewer tiles than SMs without K splits: 128x128 tiles, 6 stages: 406 TFLOP/s at 1024x1024x16384
    and 354 at 333x4096x4096 (B = W.T) against 219 and 226 with 128x256 and 350 and 304 with one 128x128 consumer
    warpgroup."""
    epi = "axpby" if use_c else "scale"
    transpose = in_dtype == "float32" and layout_b == "N"  # tf32 reads K-major B only: a transposed copy first
    bm, bn, s = tile_choice(M, N, K, batch, sm_count, splits, 128 // ITEM_BYTES[in_dtype])
    if in_dtype != "float32" and wants_split_n(bm, bn, s, M, N, batch, sm_count, rows_128):
        return HopperSpec(in_dtype, out_dtype, "N", layout_b, bm=64, bn=128, stages=STAGES[(64, 128)], epilogue=epi,
                          split_n=True)
    if in_dtype != "float32" and wants_short_k_cluster(bm, bn, s, M, N, K, batch, sm_count, rows_128, layout_b,
                                                        out_dtype):
        spec = HopperSpec(in_dtype, out_dtype, "N", layout_b, bm=64, bn=128, stages=STAGES[(64, 128)], epilogue=epi,
                          cluster=2, split_n=True, staged_store=True)
        if not unfit(spec):
            return spec
    if in_dtype != "float32" and wants_cluster(bm, bn, s, M, N, K, batch, sm_count, rows_128, layout_b):
        return with_staged_store(HopperSpec(in_dtype, out_dtype, "N", layout_b, bm=64, bn=128,
                                            stages=STAGES[(64, 128)], consumers=1, epilogue=epi, cluster=2), K)
    return with_staged_store(HopperSpec(in_dtype, out_dtype, "N", "T" if transpose else layout_b, bm=bm, bn=bn,
                                        stages=STAGES[(bm, bn)], epilogue=epi, splits=s, transpose_b=transpose), K)


def _operand_reason(name: str, view, item: int) -> str:
    """Why a 3-D Warp view cannot be a TMA source ("" when it can)."""
    if view is None:
        return f"{name} is missing"
    if view.ndim != 3:
        return f"{name} must be a 3-D view (batch, rows, cols); got {view.ndim}-D"
    nb, rows = int(view.shape[0]), int(view.shape[1])
    s0, s1, s2 = (int(s) for s in view.strides)
    if s2 != item:
        return f"{name}'s columns are not contiguous (column stride {s2} bytes, element {item})"
    if int(view.ptr) % _TMA_ALIGN:
        return f"{name}'s base address 0x{int(view.ptr):x} is not a multiple of 16 bytes (TMA)"
    if s1 % _TMA_ALIGN or not 0 < s1 < _TMA_MAX_STRIDE:
        return f"{name}'s row stride {s1} bytes is not a positive multiple of 16 (TMA; K or N not a multiple of 8?)"
    if nb > 1 and (s0 % _TMA_ALIGN or not 0 < s0 < _TMA_MAX_STRIDE):
        return f"{name}'s batch stride {s0} bytes is not a positive multiple of 16 (TMA)"
    if rows * s1 >= _TMA_MAX_STRIDE and nb == 1:
        return f"{name} spans {rows * s1} bytes: over TMA's 2^40-byte stride range"
    return ""


def applies(device, in_dtype: str, out_dtype: str, layout_a: str, layout_b: str, M: int, N: int, K: int, batch: int,
            A_view, B_view, D_view, use_c: bool) -> HopperSpec | str:
    """The family's kernel for this problem, or the reason it does not apply (a str).

    Needs: a CUDA sm_90 device (H100/H200) and a Warp that compiles sm_90a modules and passes shared tiles to native
    snippets; 16-bit inputs (or float32 as tf32), a float16/bfloat16/float32 output; A stored (M, K) row-major; B stored (K, N) ("N") or
    (N, K) ("T"); M, N, K >= 1; A and B views with unit column strides, 16-byte aligned base addresses and row (and
    batch) strides (TMA's rule: contiguous operands need K, and N for layout N, multiples of 8). D (and C) may have
    any strides."""
    if not getattr(device, "is_cuda", False):
        return f"device {device}: the family runs on CUDA sm_90 GPUs only"
    if getattr(device, "arch", 0) != 90:
        return f"device {device} is sm_{getattr(device, 'arch', 0)}: TMA + wgmma kernels are built for sm_90a"
    if not (_compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_EMPTY and _compat.HAS_LAUNCH_BOUNDS
            and _compat.HAS_TILE_FUNC_ARGS):
        return (f"warp-lang {_compat.WARP_VERSION} lacks cuda_arch_suffix, tile_empty, launch_bounds or tile "
                f"arguments of native functions (1.19 has them)")
    if in_dtype not in IN_DTYPES:
        return f"in_dtype {in_dtype}: the family multiplies float16, bfloat16 and float32 (as tf32)"
    if out_dtype not in OUT_DTYPES:
        return f"out_dtype {out_dtype}: one of {OUT_DTYPES}"
    if layout_a != "N":
        return f"layout_a {layout_a}: A must be stored (M, K) row-major"
    if layout_b not in ("N", "T"):
        return f"layout_b {layout_b}: N or T"
    if min(M, N, K, batch) < 1:
        return f"M={M} N={N} K={K} batch={batch}: empty problems and K == 0 go to the other families"
    if max(M, N, K) > _MAX_DIM:
        return f"M={M} N={N} K={K}: dimensions must fit 32-bit coordinates"
    item = ITEM_BYTES[in_dtype]
    for name, view in (("A", A_view), ("B", B_view)):
        if name == "B" and in_dtype == "float32" and layout_b == "N":
            continue  # copied transposed into an aligned workspace first
        why = _operand_reason(name, view, item)
        if why:
            return why
    if D_view is None or D_view.ndim != 3:
        return "D must be a 3-D view (batch, M, N)"
    spec = default_spec(in_dtype, out_dtype, layout_b, M, N, K, batch, _compat.sm_count(device), use_c)
    why = unfit(spec)
    return why or spec


#: batch * M * N * K from which the planner takes this family. Measured (H200, fp16, TFLOP/s; the pipelined family
#: through the public call, the Hopper kernel through recorded launches, which matched the public call within 4% for
#: the split kernels at 1000^3 and 1024^3): 1000^3 (2^29.9) 125 against 95, 1024^3 146 against 118, 2048x2048x1024
#: 325 against 249 (public call), 1024x1024x4096 301 against 130; 512^3 (2^27) 24.6 against 27.1 (both public):
#: smaller products stay with the pipelined family (2^27..2^29 not measured).
MIN_WORK = 2**29
#: The threshold of batched products (batch * M * N * K): batched products below 2^32 are not measured (64 x 256^3
#: fp16: 20.5 us through the pipelined family, H100) and stay with the other families.
BATCHED_MIN_WORK = 2**32
#: Below this product an output side under MIN_SIDE stays with the split-pipe, skinny and GEMV families (16x8192x8192
#: fp16: 65.5 us through the split pipe on the H100; the Hopper kernel's 128-row tiles there are not measured).
SMALL_SIDE_WORK = 2**32
MIN_SIDE = 64


def plan(ctx):
    """16-bit inputs (and float32 with ``allow_tf32``: B stored (K, N) is first copied transposed) on an sm_90 GPU, A
    stored (M, K), products of at least ``MIN_WORK`` (batched:
    ``BATCHED_MIN_WORK``; both output sides at least ``MIN_SIDE`` under ``SMALL_SIDE_WORK``; any size where
    ``Options.family`` forces the family): the TMA + wgmma kernel, with split-K a float32 workspace
    ``((splits * batch, M, N), "float32")`` and the finishing pass. Operands whose rows are not 16-byte aligned
    (TMA's rule) are staged into aligned copies first, as the pipelined family does (fp16 4095^3: 409 TFLOP/s with
    the copy, 144 for cuBLAS, H200)."""
    from ...core.operands import _max_chunk

    p, b, dev = ctx.p, ctx.base, ctx.dev
    if dev.is_cpu or not ctx.opts.hopper or p.in_dtype not in IN_DTYPES or p.out_dtype not in OUT_DTYPES:
        return None
    if p.in_dtype == "float32" and not ctx.tf32:
        return None  # exact float32 has no wgmma
    if ctx.la != "N" or ctx.lb not in ("N", "T"):
        return None
    if getattr(dev, "arch", 0) != 90 or not (_compat.HAS_CUDA_ARCH_SUFFIX and _compat.HAS_TILE_EMPTY
                                              and _compat.HAS_LAUNCH_BOUNDS and _compat.HAS_TILE_FUNC_ARGS):
        return None
    if max(b.M, b.N, p.K) > _MAX_DIM:
        return None
    spec = default_spec(p.in_dtype, p.out_dtype, ctx.lb, b.M, b.N, p.K, p.batch, _compat.sm_count(dev), b.use_c,
                        rows_128=_max_chunk(b.A, 128) == 128 and _max_chunk(b.B, 128) == 128)
    work = p.batch * b.M * b.N * p.K
    if ctx.want != "hopper" and (work < (MIN_WORK if p.batch == 1 else BATCHED_MIN_WORK)
                                 or (work < SMALL_SIDE_WORK and min(b.M, b.N) < MIN_SIDE)):
        return None
    if unfit(spec):
        return None
    ws = ((spec.splits * p.batch, b.M, b.N), "float32") if spec.splits > 1 else None
    planned = replace(b, family="hopper", family_spec=spec, c_into_d=ctx.c_into_d, workspace=ws,
                      stage=(_max_chunk(b.A) < 16, _max_chunk(b.B) < 16 and not spec.transpose_b))
    peeled = peel_choice(spec, b.M, b.N, p.K, p.batch, _compat.sm_count(dev)) if ctx.opts.peel else None
    if peeled is not None and not unfit(peeled[0]):
        from ..composite.peel import edge_plan

        return edge_plan(planned, p, ctx.la, ctx.lb, ctx.epi, *peeled) or planned
    return planned
