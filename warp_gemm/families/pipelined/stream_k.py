"""The pipelined family's stream-K kernel (``spec.stream_k``): whole waves of tiles one per block, then the last
tiles' K steps shared by a fixed grid, split tiles summed in block order; and its grid and workspace sizes."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import warp as wp

from ... import _compat
from ..common import native
from ..common.kernels import WP_DTYPES
from .snippets import _SK_ADD, _SK_SPILL, _SK_ZERO, _stub_sk_slot, _stub_sk_zero, persistent_tile
from .spec import PipeSpec


def _stream_k_kernel(spec: PipeSpec, copy_stage, mmas, own_store, commit, wait_prev, wait0):
    """The stream-K kernel of a simt/mma spec (``spec.stream_k``; correct on the GPU:
    tests/families/test_pipelined.py::test_stream_k_forced_on_cuda): a fixed grid of ``grid`` blocks, data-parallel
    waves first, then the last tiles' K steps shared evenly.

    - The first ``dp_tiles`` output tiles (a whole number of waves, :func:`stream_k_dp_tiles`) are whole tiles: block
      g takes tiles g, g + grid, ... (batch entries, then grouped tiles: :func:`persistent_tile`), as a grid of one tile
      per block would run them, so the blocks at work at one time share their rows of A and columns of B in L2.
    - The K steps of the other tiles, tile after tile, form one sequence of ``sk_total`` iterations: block g takes
      ``[g * sk_total // grid, (g + 1) * sk_total // grid)`` (at least one each, as grid <= sk_total; none at all
      where the tiles fill whole waves and every tile is run whole).
    Each run (a tile's whole K range, or the part of it in the block's range) has the K loop of the one-tile kernel:
    its own prologue, copies ``stages - 1`` steps ahead, one barrier per step. Where a run ends:
    - the run is the whole tile: it stores the tile (alpha, beta * C, the cast: the kernel's own store);
    - the run ends before the tile does (a block's last run, at most one per block): the partial sums go to the
      block's workspace slot ``g`` and its flag;
    - the run ends the tile but began after its first K step (a block's first run, taken last): the block is the
      tile's finisher: it waits for the flags of the lower blocks that hold the tile's earlier K steps, adds their
      slots in block order and stores the tile. Those blocks spill before their own last run, and wait only on lower
      blocks in turn; on the CPU (blocks one after another in index order) their flags are always set.
    The sum of a tile split across blocks is the same in every launch of the same grid (a fixed order). Why whole
    waves and runs: one loop over every tile's K steps (copies ahead across tile boundaries, every tile shared) ran
    fp64 128x64 tiles at 4096^3 at 38.7 TFLOP/s against 47.8 one tile per block, and 1000^3 at 80.7 us against 64.4
    for the runs (H200); there, blocks at work at one time are ~8 tiles apart (A and B not held in L2: the likely
    cause, not profiled)."""
    TM, TN, S = spec.tm, spec.tn, spec.stages
    mma, mma_a, mma_b = mmas  # the product, and its two halves where spec.interleave (else None)
    SPLIT = spec.interleave
    IN, OUT, ACC = WP_DTYPES[spec.in_dtype], WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype]
    AR, AC = spec.a_tile()
    BR, BC = spec.b_tile()
    ACP, BCP = spec.stage_cols()
    SAR, SBR = S * AR, S * BR
    key = spec.key
    zero = native.func(_SK_ZERO, key + "_skzero", _stub_sk_zero(ACC, TM, TN))
    at = "double" if spec.acc_dtype == "float64" else "float"  # the workspace: the accumulator's dtype
    spill = native.func(native.fill(_SK_SPILL, AT=at), key + "_skspill", _stub_sk_slot(ACC, TM, TN))
    add = native.func(native.fill(_SK_ADD, AT=at), key + "_skadd", _stub_sk_slot(ACC, TM, TN))

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
        dp_tiles: int,
        ws: wp.array(dtype=ACC),
        flags: wp.array(dtype=wp.int32),
    ):
        _z, g = wp.tid()
        tiles = D.shape[0] * tiles_m * tiles_n
        sk_total = (tiles - dp_tiles) * k_tiles
        base = dp_tiles * k_tiles
        s0 = (g * sk_total) // grid + base
        s1 = ((g + 1) * sk_total) // grid + base
        n_dp = dp_tiles // grid
        t_first = s0 // k_tiles
        n_sk = wp.max(0, (s1 - 1) // k_tiles - t_first + 1)
        if s1 == s0:
            n_sk = 0
        defer = int(0)  # the first run ends a tile it did not begin: the finisher's run, taken last
        if n_sk > 1 and s0 > t_first * k_tiles:
            defer = 1
        ba = wp.tile_empty(shape=(SAR, ACP), dtype=IN, storage="shared")
        bb = wp.tile_empty(shape=(SBR, BCP), dtype=IN, storage="shared")
        acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        for r in range(n_dp + n_sk):
            t = r * grid + g
            kb = int(0)
            ke = k_tiles
            if r >= n_dp:
                idx = r - n_dp + defer
                if idx == n_sk:
                    idx = 0
                t = t_first + idx
                kb = wp.max(s0, t * k_tiles) - t * k_tiles
                ke = wp.min(s1, (t + 1) * k_tiles) - t * k_tiles
            n = ke - kb
            bi, i, j = persistent_tile(t, tiles_m, tiles_n, group_m)
            Ab = A[wp.min(bi, a_nb - 1)]
            Bb = B[wp.min(bi, b_nb - 1)]
            m0 = i * TM
            n0 = j * TN
            for p in range(S - 1):
                if p < n:
                    copy_stage(ba, bb, Ab, Bb, p, kb + p, m0, n0)
                commit(0)
            for k in range(n):
                wait_prev(0)  # step k's stage is in, and every thread is done with the stage step k - 1 used
                kn = k + S - 1
                if wp.static(SPLIT):
                    mma_a(ba, bb, acc, k % S)
                if kn < n:
                    copy_stage(ba, bb, Ab, Bb, kn % S, kb + kn, m0, n0)
                commit(0)
                if wp.static(SPLIT):
                    mma_b(ba, bb, acc, k % S)
                else:
                    mma(ba, bb, acc, k % S)
            wait0(0)  # no copy in flight, and every thread is done with the stages (the next run's prologue)
            if ke == k_tiles:
                if kb > 0:  # the finisher: the lowest block whose range holds the tile's first K step, then on
                    c = g - 1
                    while c > 0 and (c * sk_total) // grid + base > t * k_tiles:
                        c -= 1
                    while c < g:
                        add(acc, ws, flags, c, c)
                        c += 1
                own_store(D[bi], C[wp.min(bi, c_nb - 1)], acc, alpha, beta, m0, n0)
            else:
                spill(acc, ws, flags, g, g)  # a contributor's part, flagged
            zero(acc)

    return gemm_stream_k


# --- launch ---------------------------------------------------------------------------------------------
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def stream_k_sizes(spec: PipeSpec, M: int, N: int, K: int, batch: int, device) -> tuple[int, int, int]:
    """``(grid, workspace elements (of the accumulator dtype), flags)`` of a stream-K launch (``spec.stream_k``): the grid is ``stream_k`` blocks
    per SM (4 SMs on the CPU) but at most one per K step of the whole problem; each block has one slot of every
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
    return grid, grid * _cdiv(spec.tm * spec.tn, block) * block, grid


def stream_k_dp_tiles(tiles: int, grid: int) -> int:
    """The output tiles that a stream-K launch of ``grid`` blocks runs whole, one per block and wave: every wave but
    the last full one where the tiles do not fill whole waves (the last full wave and the partial one are shared, so
    a tile is split over at most ~3 blocks), every tile where they do, none under two waves."""
    full, rest = divmod(int(tiles), int(grid))
    if rest == 0:
        return int(tiles)
    return (full - 1) * grid if full >= 2 else 0
