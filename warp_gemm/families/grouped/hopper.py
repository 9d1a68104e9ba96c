"""The grouped Hopper kernel: the mixture-of-experts product (2-D A split by ``offs`` x 3-D B) on TMA + wgmma.

The kernel body is the Hopper family's (``families/hopper/native/gemm.cuh``: TMA into 128-byte-swizzled stages, one
producer and two consumer warpgroups, a persistent grid, the epilogue from the registers) with its work-item
fields filled from ``native/hopper_grouped.cuh`` instead of the dense ones:

- one tensor map for A over all M rows (``(K, M, 1)``), one 3-D map for B with the group as its batch (``(K, N, G)``
  for B stored ``(G, N, K)``, i.e. ``W.T`` of expert weights; ``(N, K, G)`` for B stored ``(G, K, N)``);
- every block's warp 0 reads ``offs`` (on the device: no host synchronisation) into a group table in shared memory:
  each group's first tile row (an exclusive prefix sum of ``ceil(rows / BM)`` by a warp scan) and first row. Work
  item ``t`` of ``tile rows * tiles_n`` is group ``g`` (a binary search over the first tile rows), tile row ``tm``
  and tile column ``tn`` inside it in the dense kernel's grouped order; its A rows start at the group's first row +
  ``tm * BM`` (TMA coordinates need no alignment), rows past the group's end are loaded but never stored;
- the rows after ``offs[-1]`` (the tail) are items with no K tile: zeros; ``offs`` decreasing, negative or past M
  make the whole result NaN (one group over all rows, scaled by NaN), as the mma.sync kernel does.

The producer and the consumers compute the same item sequence from the same table. Bias is the grouped family's
bias pass after the product; results of float16, bfloat16 or float32 (16-bit inputs; tf32 inputs give float32).
"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import functools
import threading

import warp as wp

from . import _deps
from ._deps import HopperSpec

#: Groups one launch takes: the group table (2 G + 3 ints) lives in shared memory after the stages.
MAX_GROUPS = 2048
TABLE_BYTES = 4 * (2 * MAX_GROUPS + 3)
#: Tile rows per group of the grouped order inside one group (the dense Hopper kernel's GROUP_M).
GROUP_M = 8

_lock = threading.RLock()


def unfit(spec: HopperSpec) -> str:
    """Why ``spec`` cannot be a grouped Hopper kernel ("" when it can)."""
    why = _deps.hopper_unfit(spec)
    if why:
        return why
    if spec.splits != 1 or spec.transpose_b or spec.epilogue != "scale" or spec.cluster != 1:
        return "the grouped Hopper kernel takes splits 1, no B transposition, the 'scale' epilogue and no cluster"
    if spec.smem_bytes + TABLE_BYTES > _deps.SMEM_LIMIT:
        return (f"{spec.stages} stages of {spec.stage_bytes} bytes and the group table ({TABLE_BYTES}): "
                f"{spec.smem_bytes + TABLE_BYTES} > {_deps.SMEM_LIMIT} bytes of shared memory")
    return ""


def key_of(spec: HopperSpec) -> str:
    return "wg_grouped_" + spec.key


def snippet(spec: HopperSpec) -> str:
    """The CUDA body of the grouped kernel of ``spec``: gemm.cuh with the grouped work items."""
    why = unfit(spec)
    if why:
        raise ValueError(f"grouped.hopper: cannot build {spec}: {why}")
    sn = _deps.native_load(__file__, "hopper_grouped.cuh")
    dense = _deps.native_load(_deps.hopper_kernel_file, "gemm.cuh")
    f = _deps.hopper_fields(spec)
    items = {"SCHED": sn["grouped_sched"], "TILE_OF": sn["grouped_tile_of"],
             "AFTER_SYNC": _deps.fill(sn["grouped_after_sync"], OUT_BYTES=f["OUT_BYTES"]),
             "P_ITEM": sn["grouped_p_item"], "P_STAGE": _deps.hopper_tma_stage(spec, "row0 + tm * BM"),
             "C_ITEM": sn["grouped_c_item"],
             "C_DRAIN": dense["dense_c_drain"], "D_OFFSET": "(size_t)row0 * (size_t)D.strides[1]", "M_END": "mg"}
    return _deps.fill(dense["gemm"], **f, **items)


def _wp_dtype(name: str):
    return {"float16": wp.float16, "float32": wp.float32}.get(name) or _deps._compat.bf16_dtype()


def smem_rows(spec: HopperSpec) -> int:
    """Rows of 64 float16 (128 bytes) of the kernel's shared tile: the stages, mbarriers and the group table."""
    return -(-(spec.smem_bytes + TABLE_BYTES) // 128)


@functools.cache
def _build(spec: HopperSpec):
    OT = _wp_dtype(spec.out_dtype)
    rows = smem_rows(spec)

    def stub(buf: wp.tile(dtype=wp.float16, shape=(rows, 64)), tma_a: wp.uint64, tma_b: wp.uint64,
             offs: wp.array(dtype=wp.int32), C: wp.array3d(dtype=OT), D: wp.array3d(dtype=OT), alpha: float,
             beta: float, M: int, N: int, K: int, batch: int, a_nb: int, b_nb: int, c_nb: int, tiles_m: int,
             tiles_n: int, group_m: int, splits: int, kt_per: int, G: int, t0: int, grid: int): ...

    stub.__name__ = stub.__qualname__ = key_of(spec) + "_body"
    body = wp.func_native(snippet(spec))(stub)

    def kern(tma_a: wp.uint64, tma_b: wp.uint64, offs: wp.array(dtype=wp.int32), D: wp.array3d(dtype=OT),
             alpha: float, M: int, N: int, K: int, G: int, tiles_n: int, group_m: int, grid: int):
        buf = wp.tile_empty(shape=(rows, 64), dtype=wp.float16, storage="shared")
        body(buf, tma_a, tma_b, offs, D, D, alpha, 0.0, M, N, K, 1, 1, G, 1, 0, tiles_n, group_m, 1, 0, G,
             wp.tid(), grid)

    return _deps._compat.make_kernel(kern, key_of(spec), launch_bounds=(spec.block_dim, 1))


def get_kernel(spec: HopperSpec):
    """The Warp kernel of ``spec`` (built once per process; nothing compiles until it loads)."""
    with _lock:
        return _build(spec)


_loaded: set = set()


def load(spec: HopperSpec, device) -> None:
    """Load ``spec``'s module on ``device`` compiled for sm_90a (``_compat.load_arch_specific``), once."""
    key = (spec, str(device))
    if key in _loaded:
        return
    k = get_kernel(spec)
    with _lock:
        if key in _loaded:
            return
        _deps._compat.load_arch_specific(k.module, device, spec.block_dim)
        _loaded.add(key)


def grid_size(spec: HopperSpec, G: int, M: int, N: int, sm_count: int) -> int:
    """Blocks of the persistent grid: one per SM, fewer where the work items' bound (``ceil(M / BM) + G`` tile
    rows: each group adds at most one partial tile row; the tail at most one more) is smaller."""
    bound = (-(-M // spec.bm) + G + 1) * -(-N // spec.bn)
    return max(1, min(bound, int(sm_count)))


def launch_args(spec: HopperSpec, A, B, D, offs, G: int, M: int, N: int, K: int, sm_count: int):
    """``(kernel, dim, inputs, block_dim)`` of the grouped product: ``A`` a Warp view ``(1, M, K)``, ``B`` ``(G, N, K)``
    (``spec.layout_b == "T"``) or ``(G, K, N)`` ("N"), both with unit column strides and 16-byte aligned rows;
    ``D`` ``(1, M, N)``; ``offs`` the int32 group ends (G of them). Loads the module and finds the tensor maps."""
    load(spec, D.device)
    ta = _deps.tma.tensor_map(A, spec.bm)
    tb = _deps.tma.tensor_map(B, 64 if spec.layout_b == "N" else spec.bn)
    g = grid_size(spec, G, M, N, sm_count)
    tiles_n = -(-N // spec.bn)
    inputs = [ta, tb, offs, D, 1.0, int(M), int(N), int(K), int(G), tiles_n, GROUP_M, g]
    return get_kernel(spec), (g,), inputs, spec.block_dim
