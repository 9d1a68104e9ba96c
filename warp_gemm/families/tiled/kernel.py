"""The Warp tile GEMM kernel family and its memoized factory.

One kernel computes, for every batch index ``b`` and output tile ``(i, j)``::

    D[b] = alpha * op(A[b]) @ op(B[b])            (epilogue "scale")
    D[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b]   (epilogue "axpby")

Tile shapes are compile-time constants captured from the factory's closure; M, N and K are not:
the launch grid and the K loop are ceil-divisions, and the last row/column/K tile of a non-multiple
problem takes Warp's checked path (loads outside the array read zeros, stores outside it are dropped).
Every kernel keeps ``bounds_check`` at its default (checked): unchecked loads on a non-multiple shape
corrupt the heap on Warp 1.9-1.19 (see tests/test_safety.py).

Layouts: ``"N"`` reads the operand from row-major storage as is; ``"T"`` reads the *transposed*
storage (the operand's transpose is row-major) in tiles of the transposed shape and transposes the
tile in the block, so global loads stay coalesced either way.

Batching: operands are 3-D arrays; a batch count of 1 broadcasts (``A[min(b, a_nb - 1)]``).

Padded shared layouts (``pad_ab``/``pad_c`` > 0, CUDA on Warp 1.19+): the A and B tiles are loaded
``pad_ab`` columns wider than needed (the neighbouring tile's columns, or zeros at the edge, so the
copy stays one vectorized ``tile_load``) and the accumulator is allocated ``pad_c`` columns wider;
``tile_matmul`` gets ``tile_view``s of the needed part, whose row stride is no longer a power of two.
With dense tiles every row starts on the same shared-memory bank and the MathDx GEMM's fragment loads
serialise: on the H100 the MathDx call alone ran at 64 TFLOP/s (fp16, 128x128x256 tiles, data already
in shared memory) and at 234 with 16-byte A/B and 32-byte accumulator padding; the whole fp16 4096^3
kernel runs at 99 TFLOP/s padded against 50 dense (docs/performance.md).
"""

# No `from __future__ import annotations` here: Warp reads the kernels' annotations as objects,
# and closure variables used only in annotations must stay real references.
import functools
import threading
from dataclasses import dataclass

import warp as wp

from warp_gemm import _compat
from warp_gemm.families.common.kernels import (  # noqa: F401
    ITEM_BYTES,
    WP_DTYPES,
    acc_dtype_name,
    epilogue_store,
    func_name,
    grouped_tile,
    spec_types,
)

# A clamped last K tile zeroes its overlap in chunks of this many bytes per row; the launcher clamps
# only where the overlap is a whole number of chunks (core.plan.k_clamp).
K_CHUNK_BYTES = 16


@dataclass(frozen=True)
class KernelSpec:
    tm: int
    tn: int
    tk: int
    in_dtype: str
    out_dtype: str
    layout_a: str  # "N" or "T"
    layout_b: str
    epilogue: str  # "scale", "axpby" or "splitk" (atomic add of the partial sum into D, no scaling)
    tf32: bool = False
    pad_ab: int = 0  # extra columns of the shared A and B tiles (see smem_pads)
    pad_c: int = 0  # extra columns of the shared accumulator
    min_blocks: int = 0  # CUDA __launch_bounds__(block_dim, min_blocks); 0: none
    block_dim: int = 0  # only with min_blocks (the bound needs the launch's block size)
    # Clamp a partial last K tile and zero its overlap (k_clamp; padded kernels only). A separate kernel:
    # the clamp's code cost 3-5% on tile-multiple K (fp16 8192^3 127 -> 121, H100), so shapes that
    # do not need it keep the plain loop.
    k_tail: bool = False

    @property
    def acc_dtype(self) -> str:
        return acc_dtype_name(self.in_dtype)

    @property
    def key(self) -> str:
        tf = "_tf32" if self.tf32 else ""
        pad = f"_p{self.pad_ab}-{self.pad_c}" if self.pad_ab or self.pad_c else ""
        occ = f"_o{self.min_blocks}b{self.block_dim}" if self.min_blocks else ""
        kt = "_kt" if self.k_tail else ""
        return (f"wg_gemm_{self.in_dtype}_{self.out_dtype}_{self.layout_a}{self.layout_b}_"
                f"{self.tm}x{self.tn}x{self.tk}_{self.epilogue}{tf}{pad}{occ}{kt}")


# Padding of the shared tiles, in elements (H100, fp16/tf32/fp64 at 4096^3): 16 bytes per A/B row for 16-bit data and tf32 (fp16 full kernel
# 50 -> 84 TFLOP/s with a 16-byte accumulator pad), 32 bytes per accumulator row (84 -> 99; tf32
# 47 -> 59), and 32 bytes per A/B row for float64 (64x64x32: 17.3 unpadded, 18.6 with 16 bytes, 19.5
# with 32). Exact float32 (no tensor cores) is left dense: padded, the tuner's best fell from 26.0
# to 23.7 TFLOP/s (H100).
_PAD_AB = {"float16": 8, "bfloat16": 8, "float32": 4, "float64": 4}
_PAD_C = {"float32": 8, "float64": 4}


def smem_pads(in_dtype: str, device_is_cpu: bool, tf32: bool = False) -> tuple[int, int]:
    """``(pad_ab, pad_c)`` for a kernel on this Warp and device: zero on the CPU (no banks), for exact
    float32, and where tile_matmul cannot take strided operands (Warp < 1.19, see _compat)."""
    if device_is_cpu or not _compat.HAS_STRIDED_MATMUL_OPERANDS or (in_dtype == "float32" and not tf32):
        return 0, 0
    return _PAD_AB[in_dtype], _PAD_C[acc_dtype_name(in_dtype)]


def occupancy_bound(cfg, device_is_cpu: bool) -> tuple[int, int]:
    """``(min_blocks, block_dim)`` of the spec for ``cfg``: its occupancy hint on CUDA where Warp has
    ``launch_bounds``, else ``(0, 0)``."""
    if device_is_cpu or not cfg.occupancy or not _compat.HAS_LAUNCH_BOUNDS:
        return 0, 0
    return cfg.occupancy, cfg.block_dim


def spec_for(cfg, dtype, layout="NN", epilogue="scale", tf32=False, device_is_cpu=False, k_tail=False):
    """The KernelSpec the launcher builds for a configuration and an input dtype on this Warp (for
    ahead-of-time builds): 16-bit inputs widened where tiles would accumulate in 16 bit, the output in
    the accumulator dtype where tile_astype is missing or for split-K partial sums."""
    in_k = "float32" if _compat.WIDEN_16BIT_INPUTS and dtype in ("float16", "bfloat16") else dtype
    out_k = in_k if _compat.HAS_TILE_ASTYPE and epilogue != "splitk" else acc_dtype_name(in_k)
    tf = bool(tf32 and _compat.HAS_TF32)
    pads = smem_pads(in_k, device_is_cpu, tf)
    return KernelSpec(cfg.tm, cfg.tn, cfg.tk, in_k, out_k, layout[0], layout[1], epilogue, tf,
                      *pads, *occupancy_bound(cfg, device_is_cpu), k_tail=bool(k_tail and pads[0]))


@wp.func
def _edge_shift(off: int, wide: int, extent: int, pad: int):
    """How far left to start a padded tile load so that it stays inside the array: ``pad`` columns
    where the wide tile at ``off`` would run past ``extent`` and there is room on the left, else 0.
    The kernel then views the needed columns at ``(0, shift)`` of the loaded tile. Warp copies a tile
    that is not wholly inside its array element by element (native/tile.h: the float4 path needs
    every dimension in bounds), so without the shift the last column of blocks and every block's
    last K step loaded scalar 2-byte elements on tile-multiple shapes."""
    if off + wide > extent and off >= pad:
        return pad
    return 0


def _wide_part(spec: KernelSpec, operand: str):
    """The ``@wp.func`` ``part(w, nz, s)`` of a padded kernel for operand ``"a"`` or ``"b"``: the operand
    tile inside ``w``, the wide shared tile just loaded for it in the kernel body (``pad_ab`` columns
    wider, loaded ``s`` columns to the left by the edge shift): the view of its needed columns at
    ``(0, s)``, transposed for layout T. In K-tail kernels it first zeroes the ``nz`` chunks of ``ZW`` K
    elements that the previous K tile already counted (``nz`` is 0 except on the clamped last K tile):
    rows ``[0, nz*ZW)`` where K runs along the rows of the stored tile, else columns
    ``[s, s + nz*ZW)``. The zero tiles are made inside those loops, so that they hold no registers
    through the main loop. The view is of the caller's tile (no copy)."""
    trans = (spec.layout_a if operand == "a" else spec.layout_b) == "T"
    # The tile as stored (rows x columns; layout T: the transpose), padded along its columns.
    R, C = {("a", False): (spec.tm, spec.tk), ("a", True): (spec.tk, spec.tm),
            ("b", False): (spec.tk, spec.tn), ("b", True): (spec.tn, spec.tk)}[(operand, trans)]
    IN = WP_DTYPES[spec.in_dtype]
    CP = C + spec.pad_ab
    TRANS, K_TAIL = trans, spec.k_tail
    K_ROWS = trans if operand == "a" else not trans  # K runs along the stored tile's rows
    ZW = K_CHUNK_BYTES // ITEM_BYTES[spec.in_dtype]
    Z0, Z1 = (ZW, CP) if K_ROWS else (R, ZW)  # (scalars: Warp takes no tuples from the closure)

    def part(w: wp.tile(dtype=IN, shape=(R, CP), storage="shared"), nz: int, s: int):
        if wp.static(K_TAIL and K_ROWS):
            for zc in range(nz):
                wp.tile_assign(w, wp.tile_zeros(shape=(Z0, Z1), dtype=IN), offset=(zc * ZW, 0))
        elif wp.static(K_TAIL):
            for zc in range(nz):
                wp.tile_assign(w, wp.tile_zeros(shape=(Z0, Z1), dtype=IN), offset=(0, s + zc * ZW))
        if wp.static(TRANS):
            return wp.tile_transpose(wp.tile_view(w, offset=(0, s), shape=(R, C)))
        else:
            return wp.tile_view(w, offset=(0, s), shape=(R, C))

    name = func_name(spec.key, operand, "part")
    part.__name__ = part.__qualname__ = name
    return wp.func(part, name=name)


_factory_lock = threading.Lock()


def get_kernel(spec: KernelSpec):
    """The kernel for ``spec``, built once per process (thread-safe)."""
    with _factory_lock:
        return _build(spec)


@functools.cache
def _build(spec: KernelSpec):
    IN, OUT, ACC, TRANS_A, TRANS_B = spec_types(spec, ("scale", "axpby", "splitk"), "kernel")
    if spec.tf32 and not (_compat.HAS_TF32 and spec.in_dtype == "float32"):
        raise ValueError(f"tf32 kernels need float32 inputs and a Warp with precision='tf32': {spec}")
    TM, TN, TK = spec.tm, spec.tn, spec.tk
    AXPBY = spec.epilogue == "axpby"
    SPLITK = spec.epilogue == "splitk"
    if SPLITK and spec.out_dtype != spec.acc_dtype:
        raise ValueError(f"{spec}: split-K partial sums are accumulated in the accumulator dtype")
    TF32 = spec.tf32
    if (spec.pad_ab or spec.pad_c) and not _compat.HAS_STRIDED_MATMUL_OPERANDS:
        raise ValueError(f"{spec}: padded shared tiles need a Warp whose tile_matmul takes strided operands")
    PAD_AB = spec.pad_ab > 0
    PADV = spec.pad_ab
    K_TAIL = spec.k_tail
    if K_TAIL and not PAD_AB:
        raise ValueError(f"{spec}: the clamped K tail is zeroed in the padded shared tiles only")
    # K-tail zeroing chunk: 16 bytes of the input dtype (the zeroing itself: _wide_part).
    ZW = K_CHUNK_BYTES // ITEM_BYTES[spec.in_dtype]
    PAD_C = spec.pad_c > 0
    # The wide tile shapes as closure constants (Warp needs compile-time tile shapes and does not
    # fold TK + pad inside the kernel).
    TMP, TNP, TKP, TNC = TM + spec.pad_ab, TN + spec.pad_ab, TK + spec.pad_ab, TN + spec.pad_c
    # The epilogue runs ER rows at a time where tile_matmul's strided-operand support (1.19) shows tile
    # views are solid and the tile has more than ER rows; else on the whole tile at once. A whole 128x128
    # fp32 register tile (plus its converted copy) costs ~96 registers per thread at block_dim 256, which
    # took away the second block per SM that 128x128x64 tiles need: 64.4 TFLOP/s whole-tile against 96.9
    # in 32-row chunks (fp16 4096^3, H200).
    ER = 32
    EPI_CHUNKS = _compat.HAS_STRIDED_MATMUL_OPERANDS and TM > ER and TM % ER == 0
    CAST_OUT = spec.out_dtype != spec.acc_dtype
    if CAST_OUT and not _compat.HAS_TILE_ASTYPE:
        raise ValueError(f"{spec} needs tile_astype (warp-lang >= 1.8); the launcher must use a temporary")
    if not _compat.HAS_TILE_ASTYPE and spec.in_dtype != spec.acc_dtype:
        raise ValueError(f"{spec}: 16-bit tiles would accumulate in 16 bit on this Warp; widen first")

    # The kernel's helpers (_wide_part, kernels.common). The tiles that live in shared memory -- the
    # accumulator, the loaded A and B tiles -- are made in the kernel body and only passed to them:
    # a tile made inside a wp.func is allocated per call and freed on return, and Warp infers a tile's
    # storage from its uses in the function that makes it (a tile_load returned from a helper came
    # back as a second shared tile and was copied into the kernel's: docs/design.md).
    a_part = _wide_part(spec, "a") if PAD_AB else None
    b_part = _wide_part(spec, "b") if PAD_AB else None
    # The epilogue is kernels.common.epilogue_store where Warp's functions take tile parameters; on 1.7
    # (no tile parameters, _compat.HAS_TILE_FUNC_ARGS) the kernel writes the same code out itself.
    EPI_FUNC = _compat.HAS_TILE_FUNC_ARGS
    epi_rows = ER if EPI_CHUNKS else TM
    epilogue = None
    if EPI_FUNC and not SPLITK:
        epilogue = epilogue_store(epi_rows, TN, spec.acc_dtype, spec.out_dtype, AXPBY)

    def gemm(A: wp.array3d(dtype=IN), B: wp.array3d(dtype=IN), C: wp.array3d(dtype=OUT),
             D: wp.array3d(dtype=OUT), alpha: ACC, beta: ACC, k_tiles: int, k_per_split: int, tiles_m: int,
             tiles_n: int, group_m: int, a_nb: int, b_nb: int, c_nb: int, m_clamp: int, n_clamp: int,
             k_clamp: int):
        bi, t, split = wp.tid()
        i, j = grouped_tile(t, tiles_m, tiles_n, group_m)
        # The tile's first row and column. The launcher clamps the last tile row/column to end at the
        # matrix edge (m_clamp = M - TM) where overlapping tiles are safe: the overlap is computed twice
        # and stored twice with the same values, and every load stays inside the arrays, on Warp's
        # vectorized path. Else m_clamp/n_clamp are past any tile.
        m0 = wp.min(i * TM, m_clamp)
        n0 = wp.min(j * TN, n_clamp)
        Ab = A[wp.min(bi, a_nb - 1)]
        Bb = B[wp.min(bi, b_nb - 1)]
        if wp.static(PAD_C):
            acc = wp.tile_view(wp.tile_zeros(shape=(TM, TNC), dtype=ACC, storage="shared"),
                               offset=(0, 0), shape=(TM, TN))
        else:
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        # k_tiles is a runtime value on purpose: Warp unrolls short constant-trip loops and then
        # allocates every iteration's tiles in shared memory.
        # Split s covers K tiles [s*k_per_split, (s+1)*k_per_split) (one split: all of them).
        # K-tail kernels (spec.k_tail): the last K tile is clamped to end at K (k_clamp), in bounds;
        # its first columns of A / rows of B, already counted by the previous tile, are zeroed before
        # the MMA (_wide_part).
        for k in range(split * k_per_split, wp.min(k_tiles, (split + 1) * k_per_split)):
            kk = k * TK
            nz = int(0)
            if wp.static(K_TAIL):
                kk = wp.min(k * TK, k_clamp)
                nz = (k * TK - kk) // ZW  # overlap chunks to zero: 0 except on the clamped last K tile
            if wp.static(PAD_AB and TRANS_A):
                s = _edge_shift(m0, TMP, Ab.shape[1], PADV)
                a = a_part(wp.tile_load(Ab, shape=(TK, TMP), offset=(kk, m0 - s), storage="shared"), nz, s)
            elif wp.static(PAD_AB):
                s = _edge_shift(kk, TKP, Ab.shape[1], PADV)
                a = a_part(wp.tile_load(Ab, shape=(TM, TKP), offset=(m0, kk - s), storage="shared"), nz, s)
            elif wp.static(TRANS_A):
                a = wp.tile_transpose(wp.tile_load(Ab, shape=(TK, TM), offset=(k * TK, m0)))
            else:
                a = wp.tile_load(Ab, shape=(TM, TK), offset=(m0, k * TK))
            if wp.static(PAD_AB and TRANS_B):
                s = _edge_shift(kk, TKP, Bb.shape[1], PADV)
                b = b_part(wp.tile_load(Bb, shape=(TN, TKP), offset=(n0, kk - s), storage="shared"), nz, s)
            elif wp.static(PAD_AB):
                s = _edge_shift(n0, TNP, Bb.shape[1], PADV)
                b = b_part(wp.tile_load(Bb, shape=(TK, TNP), offset=(kk, n0 - s), storage="shared"), nz, s)
            elif wp.static(TRANS_B):
                b = wp.tile_transpose(wp.tile_load(Bb, shape=(TN, TK), offset=(n0, k * TK)))
            else:
                b = wp.tile_load(Bb, shape=(TK, TN), offset=(k * TK, n0))
            if wp.static(TF32):
                wp.tile_matmul(a, b, acc, precision="tf32")
            else:
                wp.tile_matmul(a, b, acc)
        if wp.static(SPLITK):
            # Partial sums of the K splits meet in D (zeroed by the launcher); a finishing pass
            # applies alpha, beta*C and the output dtype.
            wp.tile_atomic_add(D[bi], acc, offset=(m0, n0))
        elif wp.static(EPI_CHUNKS):  # (ER rows at a time: register pressure, see ER)
            for e in range(TM // ER):
                r = wp.tile_view(acc, offset=(e * ER, 0), shape=(ER, TN)) * alpha
                epilogue(D, C, bi, c_nb, r, beta, m0 + e * ER, n0)
        elif wp.static(EPI_FUNC):
            epilogue(D, C, bi, c_nb, acc * alpha, beta, m0, n0)
        else:  # Warp 1.7: epilogue_store written out (see EPI_FUNC)
            if wp.static(AXPBY):
                c = wp.tile_load(C[wp.min(bi, c_nb - 1)], shape=(TM, TN), offset=(m0, n0))
                if wp.static(CAST_OUT):
                    r = wp.tile_map(wp.add, acc * alpha, wp.tile_astype(c, ACC) * beta)
                else:
                    r = wp.tile_map(wp.add, acc * alpha, c * beta)
            else:
                r = acc * alpha
            if wp.static(CAST_OUT):
                wp.tile_store(D[bi], wp.tile_astype(r, OUT), offset=(m0, n0))
            else:
                wp.tile_store(D[bi], r, offset=(m0, n0))

    bounds = (spec.block_dim, spec.min_blocks) if spec.min_blocks else None
    return _compat.make_kernel(gemm, spec.key, bounds)
