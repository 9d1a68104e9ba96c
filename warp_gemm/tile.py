"""``tile_gemm_func``: warp_gemm's GEMM main loop as a Warp function for users' own tile kernels.

    mma = warp_gemm.tile_gemm_func(64, 64, 32, wp.float32)

    @wp.func
    def relu(x: float):
        return wp.max(x, 0.0)

    @wp.kernel
    def my_layer(A: wp.array2d(dtype=float), B: wp.array2d(dtype=float), C: wp.array2d(dtype=float)):
        i, j = wp.tid()
        acc = mma(A, B, i * 64, j * 64)  # (64, 64) tile of A[i*64:, :] @ B[:, j*64:], all of K
        wp.tile_store(C, wp.tile_map(relu, acc), offset=(i * 64, j * 64))

    wp.launch_tiled(my_layer, dim=(ceil(M / 64), ceil(N / 64)), inputs=[A, B, C], block_dim=128)

See docs/tile_func.md.
"""

# No `from __future__ import annotations`: Warp reads the function's annotations as objects.
import functools
import threading

import warp as wp

from . import _compat
from .families import pipelined
from .families.common import native
from .families.common.kernels import ITEM_BYTES

_NAMES = {"float16": "float16", "half": "float16", "fp16": "float16", "f16": "float16",
          "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float32": "float32", "float": "float32", "fp32": "float32", "f32": "float32",
          "float64": "float64", "double": "float64", "fp64": "float64", "f64": "float64"}

# Extra columns of the shared A and B tiles on CUDA where tile_matmul takes strided operands (Warp
# 1.19+): 16 bytes per row for 16-bit data, 32 for float64 -- the paddings warp_gemm's own kernels
# measured best (docs/performance.md). Exact float32 stays dense there too (no tensor cores; padding
# lost 9% in warp_gemm's tuner).
_PAD_AB = {"float16": 8, "bfloat16": 8, "float32": 0, "float64": 4}


def _wp_dtypes() -> dict:
    d = {"float16": wp.float16, "float32": wp.float32, "float64": wp.float64}
    if _compat.HAS_BF16:
        d["bfloat16"] = wp.bfloat16
    return d


def dtype_name(dtype) -> str:
    """The warp_gemm name of ``dtype``: a Warp scalar type (``wp.float16`` ...), Python ``float``
    (Warp's float32), or a name (``"float16"``, ``"bf16"``, ``"fp32"``, ...)."""
    if dtype is float:
        return "float32"
    if isinstance(dtype, str):
        name = _NAMES.get(dtype.lower())
    else:
        name = next((n for n, t in _wp_dtypes().items() if dtype is t), None)
    if name is None:
        raise TypeError(f"tile_gemm_func: unsupported dtype {dtype!r}; use float16, bfloat16, float32 "
                        "or float64 (a Warp type or its name)")
    return name


def _default_acc(in_name: str) -> str:
    return "float64" if in_name == "float64" else "float32"


def tile_gemm_func(tm: int, tn: int, tk: int, dtype, acc_dtype=None, *, stages: int = 2):
    """A Warp function ``mma(A, B, row, col) -> tile`` for use inside a tile kernel: the ``(tm, tn)``
    tile of ``A @ B`` whose first element is ``(row, col)``, summed over all of K, in the accumulator
    dtype.

    Args:
        tm, tn, tk: the output tile's rows and columns and the K step (compile-time tile shapes; any
            positive sizes, e.g. 64, 64, 32; on CUDA they set the shared memory the block needs, below).
        dtype: the element type of ``A`` and ``B``: ``wp.float16``, ``wp.bfloat16``, ``wp.float32``,
            ``wp.float64`` (or ``float``), or its name.
        acc_dtype: the accumulator and returned tile's type; float32 for 16-bit and float32 inputs,
            float64 for float64 (the default; no other choice is accepted).
        stages: 2-4 K tiles of A and B in flight in the pipelined body (ignored by the synchronous
            body of older Warps).

    The function takes ``A: wp.array2d(dtype=dtype)`` of shape (M, K), ``B: wp.array2d(dtype=dtype)``
    of shape (K, N) (any strides: views are fine) and two non-negative ``int`` offsets, and returns a
    ``(tm, tn)`` tile of ``acc_dtype`` (a block-shared tile that Warp copies into the caller's variable;
    use it with ``wp.tile_store``/``wp.tile_map``/``wp.tile_view``). Shapes need not be tile multiples:
    rows/columns of A and B beyond M, N or K read as zeros, so an edge tile holds zeros past the matrix
    (where A has an infinity in a valid element the out-of-range part may hold NaN), and
    ``wp.tile_store`` of it drops the out-of-range part. Call it from a kernel launched with
    ``wp.launch_tiled`` on the CPU (any ``block_dim``) or CUDA (``block_dim`` a multiple of 32: on the
    H100 cuBLASDx refused a one-thread block, "Failed to compile LTO 'dot_32_32_16_90_1_...'"); every
    thread of the block must call it (a block-wide collective).

    Bodies (``mma.pipelined``, ``mma.stages``, ``mma.smem_bytes`` say which was built):

    - Pipelined (Warp 1.19-class: ``kernels.pipelined.has_warp_features()``; both devices): the K loop
      of warp_gemm's pipelined family. ``stages`` K tiles of A and B live in two shared buffers; each
      thread of the block copies its share of 16-byte chunks with ``cp.async`` (sm_80+) straight into
      them, zero-filling past M, N and K, so K tile ``k + stages - 1`` is in flight while
      ``tile_matmul`` works on K tile ``k``. The copy checks each array once per call: where a row start
      (base address or row stride) is not a multiple of the chunk, the column stride is not one element
      (e.g. ``A[:, ::2]``) or ``col`` is not on the chunk grid, and on GPUs before sm_80, it copies
      element by element with both strides, synchronously (correct, no overlap: odd-length 16-bit rows
      take this path). The CPU runs the same loop with plain copies. 16-bit and float64 stages are
      padded by 16/32 bytes per row (bank conflicts in the MathDx GEMM).
    - Synchronous (older Warps): ``tile_load`` -> ``tile_matmul`` per K step (dense tiles before 1.19).

    Shared memory per block on CUDA (``mma.smem_bytes``): ``stages*(tm*(tk+p) + tk*(tn+p))*itemsize +
    tm*tn*acc_itemsize``, p = 8 for 16-bit, 4 for float64, 0 for float32 inputs; the caller's tile that
    receives the result adds ``tm*tn*acc_itemsize`` (64x64x32 float16, 2 stages: 35,840 + 16,384 bytes).

    bfloat16: Warp (1.14+) multiplies bfloat16 tiles only in modules without backward code, and a Warp
    function cannot set its caller's module options. Define the calling kernel with
    ``@wp.kernel(module="unique", module_options={"enable_backward": False})`` (Warp 1.13+), or call
    ``wp.set_module_options({"enable_backward": False})`` at the top of its Python module.
    ``@wp.kernel(enable_backward=False)`` alone is not enough: ``tile_matmul`` checks the module's
    option.

    Releases: float16 and bfloat16 inputs need ``wp.tile_astype``'s release (1.8+; Warp 1.7 would
    accumulate them in 16 bit), bfloat16 needs 1.13+ (``wp.bfloat16``); float32/float64 work from 1.7.

    The function is built once per ``(tm, tn, tk, dtype, acc_dtype, stages)`` and cached; it is
    thread-safe.
    """
    if isinstance(stages, bool) or not isinstance(stages, int) or not 2 <= stages <= 4:
        raise ValueError(f"tile_gemm_func: stages must be an int from 2 to 4, got {stages!r}")
    for v, n in ((tm, "tm"), (tn, "tn"), (tk, "tk")):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"tile_gemm_func: {n} must be a positive int, got {v!r}")
    in_name = dtype_name(dtype)
    acc_name = _default_acc(in_name) if acc_dtype is None else dtype_name(acc_dtype)
    if acc_name != _default_acc(in_name):
        raise ValueError(f"tile_gemm_func: {in_name} inputs accumulate in {_default_acc(in_name)}, "
                         f"not {acc_name}")
    _compat.require_supported()
    if in_name == "bfloat16":
        _compat.bf16_dtype()
    if in_name in ("float16", "bfloat16") and not _compat.HAS_TILE_ASTYPE:
        raise _compat.UnsupportedWarpError(
            f"tile_gemm_func: {in_name} inputs need warp-lang >= 1.8 (Warp {_compat.WARP_VERSION} "
            "accumulates 16-bit tiles in 16 bit); use float32 or upgrade warp-lang")
    with _lock:
        if pipelined.has_warp_features():
            return _build_pipelined(int(tm), int(tn), int(tk), in_name, acc_name, int(stages))
        return _build(int(tm), int(tn), int(tk), in_name, acc_name)


_lock = threading.Lock()


@wp.func
def _edge_shift(off: int, wide: int, extent: int, pad: int):
    """How far left to start a padded tile load: ``pad`` columns where the wide tile at ``off`` would
    run past ``extent`` and there is room on the left, else 0 (Warp copies a tile that is not wholly
    inside its array element by element)."""
    if off + wide > extent and off >= pad:
        return pad
    return 0


@functools.cache
def _build(tm: int, tn: int, tk: int, in_name: str, acc_name: str):
    _compat.init()
    dtypes = _wp_dtypes()
    IN = dtypes[in_name]
    ACC = dtypes[acc_name]
    TM, TN, TK = tm, tn, tk
    # Padded shared A/B tiles (see _PAD_AB) where tile_matmul reads strided operands. One source
    # serves CPU and CUDA, so the CPU pays the wider loads too (a few per cent of a path that is not
    # the CPU's fast one); tile_view of the needed columns keeps the arithmetic the same.
    PADV = _PAD_AB[in_name] if _compat.HAS_STRIDED_MATMUL_OPERANDS else 0
    PAD = PADV > 0
    # Warp 1.7 (no tile_astype: the release marker) cannot compile the adjoint of a function that
    # returns the shared accumulator (`adj += adj_ret` on a shared tile): return a register copy there.
    COPY_OUT = not _compat.HAS_TILE_ASTYPE
    TKP, TNP = TK + PADV, TN + PADV  # wide tile shapes as closure constants (Warp folds no sums)

    def gemm_tile(A: wp.array2d(dtype=IN), B: wp.array2d(dtype=IN), row: int, col: int):
        acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        # A runtime trip count on purpose: Warp unrolls short constant loops and then allocates every
        # iteration's tiles in shared memory.
        k_tiles = (A.shape[1] + (TK - 1)) // TK
        for k in range(k_tiles):
            if wp.static(PAD):
                # Wide tiles shifted left at the right edge (_edge_shift), so that they stay inside
                # the array and on Warp's vectorized copy; the view picks the needed columns.
                sa = _edge_shift(k * TK, TKP, A.shape[1], PADV)
                aw = wp.tile_load(A, shape=(TM, TKP), offset=(row, k * TK - sa), storage="shared")
                a = wp.tile_view(aw, offset=(0, sa), shape=(TM, TK))
                sb = _edge_shift(col, TNP, B.shape[1], PADV)
                bw = wp.tile_load(B, shape=(TK, TNP), offset=(k * TK, col - sb), storage="shared")
                b = wp.tile_view(bw, offset=(0, sb), shape=(TK, TN))
                wp.tile_matmul(a, b, acc)
            else:
                a = wp.tile_load(A, shape=(TM, TK), offset=(row, k * TK))
                b = wp.tile_load(B, shape=(TK, TN), offset=(k * TK, col))
                wp.tile_matmul(a, b, acc)
        if wp.static(COPY_OUT):
            return acc * ACC(1.0)
        else:
            return acc

    key = f"warp_gemm_tile_{in_name}_{acc_name}_{tm}x{tn}x{tk}" + (f"_p{PADV}" if PAD else "")
    gemm_tile.__name__ = gemm_tile.__qualname__ = key
    fn = wp.func(gemm_tile, name=key)
    fn.pipelined, fn.stages = False, None
    fn.smem_bytes = (tm * TKP + tk * TNP) * ITEM_BYTES[in_name] + tm * tn * ITEM_BYTES[acc_name]
    return fn


def _chunk(tk: int, tn: int, in_name: str, pad: int) -> int:
    """The widest copy chunk (16/8/4/2 bytes, at least one element) that splits the rows of both stages
    (``tk`` columns of A, ``tn`` of B) and their padding: 16 for the usual tile sizes (multiples of 8
    16-bit, 4 float32, 2 float64 elements)."""
    it = ITEM_BYTES[in_name]
    return next(c for c in pipelined.CHUNKS if c >= it and (tk * it) % c == 0 and (tn * it) % c == 0
                and (pad * it) % c == 0)


@functools.cache
def _build_pipelined(tm: int, tn: int, tk: int, in_name: str, acc_name: str, stages: int):
    """The pipelined body: the K loop of warp_gemm's pipelined family (families/pipelined/) inside the
    function. ``stages`` K tiles of A and B live in two shared buffers made here (block-shared for the
    call); the copy snippets start K tile k + stages - 1 while tile_matmul works on K tile k. The
    copies check the arrays' alignment at run time (``_copy_snippet(..., checked=True)``)."""
    _compat.init()
    dtypes = _wp_dtypes()
    IN = dtypes[in_name]
    ACC = dtypes[acc_name]
    TM, TN, TK, S = tm, tn, tk, stages
    PAD = _PAD_AB[in_name]
    spec = pipelined.PipeSpec(tm=tm, tn=tn, tk=tk, in_dtype=in_name, out_dtype=acc_name, stages=S,
                              chunk=_chunk(tk, tn, in_name, PAD), pad_ab=PAD)
    pipelined._check(spec)
    # Stage buffers (closure scalars: Warp needs constant tile shapes and folds no sums): A stages
    # S*TM x (TK + PAD), B stages S*TK x (TN + PAD).
    SAR, ACP, SBR, BCP = S * TM, TK + PAD, S * TK, TN + PAD
    key = (f"warp_gemm_tile_pipe_{in_name}_{acc_name}_{tm}x{tn}x{tk}_s{S}_c{spec.chunk}"
           + (f"_p{PAD}" if PAD else ""))
    P = pipelined
    with P._factory_lock:  # the snippets are registered in the pipelined module, as its factory's are
        cp_a = native.func(P._copy_snippet(spec, TM, TK, ACP, checked=True), key + "_cp_a",
                         P._stub_copy(IN, SAR, ACP))
        cp_b = native.func(P._copy_snippet(spec, TK, TN, BCP, checked=True), key + "_cp_b",
                         P._stub_copy(IN, SBR, BCP))
        commit = native.func(P._from_sm80(P._COMMIT), key + "_commit", P._stub_int())
        wait = native.func(P._from_sm80(native.fill(P._WAIT, N=S - 1)), key + "_wait", P._stub_int())
        wait0 = native.func(P._from_sm80(native.fill(P._WAIT, N=0)), key + "_wait0", P._stub_int())

    def gemm_tile(A: wp.array2d(dtype=IN), B: wp.array2d(dtype=IN), row: int, col: int):
        # Block-shared for this call (a tile made in a function lives until it returns). Warp 1.19
        # zero-fills them once per call (an assignment ending in a block sync; tile_empty is not
        # public): shared stores of `stages` K steps once per output tile, and the sync orders the
        # first copies after any earlier reader of this shared memory.
        ba = wp.tile_zeros(shape=(SAR, ACP), dtype=IN, storage="shared")
        bb = wp.tile_zeros(shape=(SBR, BCP), dtype=IN, storage="shared")
        acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        # A runtime trip count on purpose: Warp unrolls short constant loops and then allocates every
        # iteration's tiles in shared memory.
        k_tiles = (A.shape[1] + (TK - 1)) // TK
        # Prologue: K tiles 0 .. S-2 into stages 0 .. S-2, one commit group each (empty past k_tiles,
        # so the group count -- and the wait below -- stays the same).
        for p in range(S - 1):
            if p < k_tiles:
                cp_a(ba, p * TM, A, row, p * TK)
                cp_b(bb, p * TK, B, p * TK, col)
            commit(0)
        for k in range(k_tiles):
            # Refill the stage K tile k-1 used (tile_matmul ended with a block sync) with K tile
            # k + S - 1, then wait for K tile k's group: S - 1 younger groups may stay in flight.
            kn = k + S - 1
            if kn < k_tiles:
                st = kn % S
                cp_a(ba, st * TM, A, row, kn * TK)
                cp_b(bb, st * TK, B, kn * TK, col)
            commit(0)
            wait(0)
            s = k % S
            a = wp.tile_view(ba, offset=(s * TM, 0), shape=(TM, TK))
            b = wp.tile_view(bb, offset=(s * TK, 0), shape=(TK, TN))
            wp.tile_matmul(a, b, acc)
        wait0(0)  # no copy outlives the call (the groups past k_tiles are empty)
        return acc

    gemm_tile.__name__ = gemm_tile.__qualname__ = key
    fn = wp.func(gemm_tile, name=key)
    # Observable: which body the function has (tests, docs/tile_func.md) and its own shared memory on
    # CUDA (stage buffers plus accumulator; MathDx may add scratch).
    fn.pipelined, fn.stages = True, S
    fn.smem_bytes = pipelined.smem_bytes(spec) + tm * tn * ITEM_BYTES[acc_name]
    return fn
