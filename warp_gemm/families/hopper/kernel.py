"""The Hopper kernel factory: one Warp tile kernel per :class:`HopperSpec`, its body the ``native/gemm.cuh`` snippet.

The kernel is a Warp tile kernel (``wp.launch_tiled``, one block of ``spec.block_dim`` threads per output-tile
sequence) whose only statements are a ``wp.tile_empty`` shared buffer (Warp sizes the block's dynamic shared
memory from it) and one ``wp.func_native`` call that does the whole GEMM (native/gemm.cuh). Tile sizes, dtypes and
the B layout are compile-time constants filled into the template; ``__launch_bounds__(block, 1)`` gives ptxas the
register cap that ``setmaxnreg`` needs. Modules compile for sm_90a (wgmma and setmaxnreg are arch-specific):
:func:`load` sets ``wp.config.cuda_arch_suffix`` while the module loads.
"""


import functools
import threading

import warp as wp

from warp_gemm import _compat

from ..common import native
from .spec import ITEM_BYTES, PTX_TYPES, HopperSpec, unfit

_lock = threading.RLock()


def fields(spec: HopperSpec) -> dict:
    """The ``gemm`` template's tile, dtype and epilogue fields of ``spec`` (the kernel body without its work-item
    fields: :func:`snippet` adds the dense ones, the grouped family's Hopper kernel its own)."""
    why = unfit(spec)
    if why:
        raise ValueError(f"hopper.kernel: cannot build {spec}: {why}")
    sn = native.load(__file__, "gemm.cuh")
    nr = spec.wg_n // 2
    out_t = {"float16": "f16", "bfloat16": "bf16"}.get(spec.out_dtype)
    store = native.fill(sn["store_16"], OUT_T=out_t) if out_t else sn["store_f32"]
    axpby = ""
    if spec.epilogue == "axpby":
        axpby = sn["axpby_" + {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}[spec.out_dtype]]
    b_mn = spec.layout_b == "N"
    f = {
        "BM": spec.bm, "BN": spec.bn, "ST": spec.stages, "NC": spec.consumers, "WGM": spec.wg_m,
        "WGN": 2 if spec.split_n else 1, "CBN": spec.wg_n, "STAGE": spec.stage_bytes,
        "SMEM": spec.smem_bytes, "IN_T": PTX_TYPES[spec.in_dtype], "OUT_BYTES": ITEM_BYTES[spec.out_dtype],
        "B_MN": int(b_mn), "B_STEP": "2048u" if b_mn else "32u", "B_LBO": "8192" if b_mn else "16", "BK": spec.bk,
        # 32 bytes of K per wgmma: k16 of 16-bit inputs (with the transpose bits), k8 of tf32 (K-major only)
        "KI": 8 if spec.in_dtype == "float32" else 16, "TRANS": "" if spec.in_dtype == "float32" else f", 0, {int(b_mn)}",
        "DREGS": ", ".join(f"%{i}" for i in range(nr)), "NA": nr, "NB": nr + 1, "NS": nr + 2,
        "DOUTS": ", ".join(f'"+f"(d[h][{i}])' for i in range(nr)), "AXPBY": axpby, "STORE": store,
        "VEC16": int(out_t is not None), "OUT_T": out_t or "f16", "QUAD": sn["quad_exchange"],
        "STAGED": int(spec.staged_store), "EPITCH": spec.epi_pitch,
        "HELPERS": sn["helpers"], "EMPTY_COUNT": "2 * NC" if spec.cluster == 2 else "NC",
        "CLUSTER_EXIT": sn["cluster_exit"] if spec.cluster == 2 else "",
        "PRODUCER_SETMAXNREG": (f'asm volatile("setmaxnreg.dec.sync.aligned.u32 {spec.producer_regs};\\n");'
                             if spec.setmaxnreg else ""),
        "CONSUMER_SETMAXNREG": (f'asm volatile("setmaxnreg.inc.sync.aligned.u32 {spec.consumer_regs};\\n");'
                             if spec.setmaxnreg else "")}
    # consumer c's A rows (its m64 blocks), or with split_n its B columns: CBN c 128-byte rows of a K-major B stage,
    # or boxes CBN c / 64 .. (8 KB each) of an N-major one; an item's first k16 step overwrites the sums
    f["C_STAGE"] = wgmma_stage(f, a_off="(unsigned)(WGN == 1 ? c * WGM : 0) * 8192u",
                               b_off="(unsigned)(WGN == 1 ? 0 : c * CBN) * 128u", acc="(kt != kt0) | (kk != 0)",
                               lead="lt == 0", cluster=spec.cluster == 2)
    return f


def wgmma_stage(f: dict, a_off: str, b_off: str, acc: str, lead: str, cluster: bool = False) -> str:
    """A consumer's products of one K tile from a stage (native/gemm.cuh's ``wgmma_stage``): ``f`` the tile, dtype
    and register fields (:func:`fields`, or the fused functions'), then the C++ expressions of the warpgroup's byte
    offsets into the stage's A and B, the accumulate flag and the thread that releases the stage (``cluster``: on
    both blocks of a cluster of two). The dense and grouped kernels' K loop and the fused functions' (fused.py)
    share it."""
    sn = native.load(__file__, "gemm.cuh")
    release = sn["release_cluster" if cluster else "release_cta"]
    return native.fill(sn["wgmma_stage"], **f, A_OFF=a_off, B_OFF=b_off, ACC=acc, LEAD=lead, RELEASE=release)


def tma_stage(spec, a_row: str, map_a: str = "tma_a", map_b: str = "tma_b", b_col: str = "tn * BN",
              a_batch: str = "ba", b_batch: str = "bb") -> str:
    """The producer's copies of one K tile into a stage (native/gemm.cuh's ``tma_stage``) for a kernel body whose A
    row, B column and batch coordinates are the C++ expressions given: the dense and grouped kernels' K loop and
    the fused functions' (fused.py) share it. ``spec``: anything with ``layout_b``."""
    sn = native.load(__file__, "gemm.cuh")
    f = dict(B_MN=int(spec.layout_b == "N"), MAP_A=map_a, MAP_B=map_b, A_ROW=a_row, B_COL=b_col, A_BATCH=a_batch,
             B_BATCH=b_batch)
    return native.fill(sn["tma_stage"], **f, **_tma_copies(sn, f))


def _tma_copies(sn: dict, f: dict) -> dict:
    """The plain TMA copies of A and B (native/gemm.cuh's ``tma_a``, ``tma_b``) filled with ``f``, as the stage
    snippets' TMA_A and TMA_B."""
    return dict(TMA_A=native.fill(sn["tma_a"], **f), TMA_B=native.fill(sn["tma_b"], **f))


def tma_stage_cluster(spec: HopperSpec, a_row: str, b_col: str) -> str:
    """The producer's copies of one K tile for clusters of two (native/gemm.cuh's ``tma_stage_cluster``): the
    unshared tile alone, this block's half of the shared one multicast into both blocks."""
    sn = native.load(__file__, "gemm.cuh")
    f = dict(B_MN=int(spec.layout_b == "N"), SHARE_B=int(spec.pair == "M"), MAP_A="tma_a", MAP_B="tma_b", A_ROW=a_row,
             B_COL=b_col, A_BATCH="ba", B_BATCH="bb")
    return native.fill(sn["tma_stage_cluster"], **f, **_tma_copies(sn, f))


def snippet(spec: HopperSpec) -> str:
    """The CUDA body of ``spec``'s kernel (native/gemm.cuh filled in with the dense work items: batch entries, tile
    rows and columns, K ranges; split-K: :attr:`HopperSpec.kernel_spec`'s; clusters of two: pair items, see
    :class:`HopperSpec`)."""
    why = unfit(spec)
    if why:
        raise ValueError(f"hopper.kernel: cannot build {spec}: {why}")
    spec = spec.kernel_spec
    sn = native.load(__file__, "gemm.cuh")
    items = {"SCHED": sn["dense_sched"], "TILE_OF": sn["dense_tile_of"], "AFTER_SYNC": "", "P_ITEM": sn["dense_p_item"],
             "P_STAGE": tma_stage(spec, "tm * BM"), "C_ITEM": sn["dense_c_item"], "C_DRAIN": sn["dense_c_drain"],
             "D_OFFSET": "(size_t)(sp * batch + b) * (size_t)D.strides[0]", "M_END": "M"}
    if spec.cluster == 2:
        # a partner tile past the edge copies tile row (column) 0 instead: its bytes are expected, its sums not stored
        pick = native.fill(sn["cluster_item"], PAIR_M=int(spec.pair == "M"))
        items.update(SCHED=sn["dense_sched"] + "\n" + sn["cluster_sched"], AFTER_SYNC=sn["cluster_sync"],
                     P_ITEM=sn["dense_p_item"] + "\n" + pick, C_ITEM=sn["dense_c_item"] + "\n" + pick,
                     C_DRAIN=sn["cluster_c_drain"],
                     P_STAGE=tma_stage_cluster(spec, "(tm * BM < M ? tm * BM : 0)", "(tn * BN < N ? tn * BN : 0)"))
    return native.fill(sn["gemm"], **fields(spec), **items)


def _wp_dtype(name: str):
    return {"float16": wp.float16, "float32": wp.float32}.get(name) or _compat.bf16_dtype()


def smem_rows(spec: HopperSpec) -> int:
    """Rows of 64 float16 (128 bytes) of the kernel's shared tile."""
    return -(-spec.smem_bytes // 128)


@functools.cache
def _build(spec: HopperSpec):
    OT = _wp_dtype(spec.out_dtype)
    rows = smem_rows(spec)

    def stub(buf: wp.tile(dtype=wp.float16, shape=(rows, 64)), tma_a: wp.uint64, tma_b: wp.uint64,
             C: wp.array3d(dtype=OT), D: wp.array3d(dtype=OT), alpha: float, beta: float, M: int, N: int, K: int,
             batch: int, a_nb: int, b_nb: int, c_nb: int, tiles_m: int, tiles_n: int, group_m: int, splits: int,
             kt_per: int, t0: int, grid: int): ...

    stub.__name__ = stub.__qualname__ = spec.key + "_body"
    body = wp.func_native(snippet(spec))(stub)

    def kern(tma_a: wp.uint64, tma_b: wp.uint64, C: wp.array3d(dtype=OT), D: wp.array3d(dtype=OT), alpha: float,
             beta: float, M: int, N: int, K: int, batch: int, a_nb: int, b_nb: int, c_nb: int, tiles_m: int,
             tiles_n: int, group_m: int, splits: int, kt_per: int, grid: int):
        buf = wp.tile_empty(shape=(rows, 64), dtype=wp.float16, storage="shared")
        body(buf, tma_a, tma_b, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb, tiles_m, tiles_n, group_m,
             splits, kt_per, wp.tid(), grid)

    return _compat.make_kernel(kern, spec.key, launch_bounds=(spec.block_dim, 1), cluster_dim=spec.cluster)


def get_kernel(spec: HopperSpec):
    """The Warp kernel of ``spec`` (built once per :attr:`HopperSpec.kernel_spec`: split counts share one kernel;
    nothing is compiled until it loads)."""
    with _lock:
        return _build(spec.kernel_spec)


_loaded: set = set()


def load(spec: HopperSpec, device) -> None:
    """Load ``spec``'s module on ``device`` compiled for sm_90a. Warp reads ``wp.config.cuda_arch_suffix`` when it
    compiles, so it is "a" while this module loads (under the factory lock) and restored after; later launches find
    the module loaded. For that moment the setting is process-wide: a module another thread compiles meanwhile for a
    GPU before sm_90 would fail (the family's launches load their module before their first launch, not in it)."""
    spec = spec.kernel_spec
    key = (spec, str(device))
    if key in _loaded:
        return
    if getattr(device, "arch", 0) != 90 or not _compat.HAS_CUDA_ARCH_SUFFIX:
        raise ValueError(f"hopper.kernel.load: {spec.key} needs an sm_90 GPU (H100/H200) and a Warp with "
                         f"wp.config.cuda_arch_suffix; got {device} (sm_{getattr(device, 'arch', 0)})")
    k = get_kernel(spec)
    with _lock:
        if key in _loaded:
            return
        _compat.load_arch_specific(k.module, device, spec.block_dim)
        _loaded.add(key)


#: Side of the square tiles the transposing copy moves through shared memory: 64 (256 threads) moved fp32 4096^2 in
#: 85 us against 97-108 for 32 and 120 for 64 with 512 threads (H200; torch's copy of the transposed view 128).
T_TILE = 64


@functools.cache
def _transpose_kernel():
    def transpose_b(src: wp.array3d(dtype=wp.float32), dst: wp.array3d(dtype=wp.float32)):
        b, i, j = wp.tid()
        t = wp.tile_load(src[b], shape=(T_TILE, T_TILE), offset=(i * T_TILE, j * T_TILE), storage="shared")
        wp.tile_store(dst[b], wp.tile_transpose(t), offset=(j * T_TILE, i * T_TILE))

    return _compat.make_kernel(transpose_b, "hopper_transpose_f32")


def transpose_launch(src, dst):
    """``(kernel, dim, inputs, block_dim)``: ``dst[b] = src[b].T`` for float32 ``(nb, K, N)`` -> ``(nb, N, K)`` views
    (any strides; edges bounds-checked), 64x64 tiles through shared memory (tf32 products of B stored (K, N))."""
    nb, k, n = (int(s) for s in src.shape)
    with _lock:
        kern = _transpose_kernel()
    return kern, (nb, -(-k // T_TILE), -(-n // T_TILE)), [src, dst], 256
