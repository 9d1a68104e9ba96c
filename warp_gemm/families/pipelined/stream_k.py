"""TODO"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import warp as wp

from ... import _compat
from ..common import native
from ..common.kernels import WP_DTYPES
from .snippets import _SK_ADD, _SK_SPILL, _SK_ZERO, _stub_sk_slot, _stub_sk_zero, persistent_tile
from .spec import PipeSpec


def _stream_k_kernel(spec: PipeSpec, copy_stage, mma, own_store, commit, wait_prev, wait0):
    """The stream-K kernel of a simt/mma spec (``spec.stream_k``; correct on the GPU:
    tests/families/test_pipelined.py::test_stream_k_forced_on_cuda). The exact-fp32 default where 64x128 tiles fit in
    one wave (H100 fp32 1000^3: 86.3 us over two blocks per SM against 92.0 one tile per block); slower on every
    16-bit grid measured.

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
        ws: wp.array(dtype=ACC),
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


# --- launch ---------------------------------------------------------------------------------------------
def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def stream_k_sizes(spec: PipeSpec, M: int, N: int, K: int, batch: int, device) -> tuple[int, int, int]:
    """``(grid, workspace elements (of the accumulator dtype), flags)`` of a stream-K launch (``spec.stream_k``): the grid is ``stream_k`` blocks
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

