"""A fused layer in your own Warp kernel: warp_gemm's GEMM loop + your activation + your store.

``y = silu(x @ W)`` in one tile kernel, three ways (``--body``):

- ``fused-persistent`` (16-bit inputs on sm_90 and the CPU; the default for them): ``g =
  warp_gemm.fused_gemm(dtype, tn=256)``; one block per SM loops over work items ``t``; ``g.tile_func(buf, ta, tb,
  K, M, N, t, G)`` returns this thread's float32 sums of its output tile in registers (wgmma's fragment order), the
  kernel applies silu to each in place and ``g.store_frag(Y, acc, g.tile_origin(M, N, t))`` stores them (16-byte
  stores after a shuffle inside each quad of threads) while the producer warpgroup loads the next tile. The launch
  is recorded once (``g.launch_tiles(..., record_cmd=True)``) and replayed per call: one native launch. silu is
  written with ``wp.div_approx`` (no branch per sum). H100, fp16 4096^3: 0.200-0.204 ms of GPU time against 0.192 +
  0.026 for ``warp_gemm.matmul`` + torch's silu (docs/tile_func.md).
- ``fused``: ``g.func(buf, ta, tb, K, row, col)`` runs the same K loop for one output tile per block and leaves the
  float32 (128, 128) tile of ``A @ B`` in the kernel's shared ``buf`` for Warp's tile operations (``tile_map``,
  ``tile_store``); ``g.operands(A, B)`` gives the descriptors (staging operands whose rows TMA cannot read),
  ``g.launch`` compiles for sm_90a and launches one block per output tile (H200, fp16 4096^3: 0.293 ms).
- ``tile`` (every dtype; the default for float32 / float64): ``mma = tile_gemm_func(TM, TN, TK, dtype)``;
  ``mma(A, B, row, col)`` returns the (TM, TN) accumulator tile of ``A @ B`` over all of K.

Every way the kernel applies its own activation and stores the result itself, so the GEMM result never goes
through global memory; edges are zero-filled (any M, N, K).

Checks the fused result against float64 NumPy, and with ``--time`` (the default on CUDA) times it
against the unfused pair ``warp_gemm.matmul`` + a separate elementwise Warp kernel (``--repeats`` calls back to
back, one synchronisation at the end: a layer called in a loop). On Warp 1.19 the
function has warp_gemm's pipelined K loop (asynchronous copies, ``--stages`` K tiles in flight); the
first line says which body was built.

    python examples/07_fused_layer.py                           # CUDA if present: fp16 4096^3, timed
    python examples/07_fused_layer.py --device cpu --size 300 --dtype float32
    python examples/07_fused_layer.py --device cuda --size 1000 --dtype bfloat16 --tiles 64x64x64
"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import argparse
import sys
import time

import numpy as np
import warp as wp

import warp_gemm
from warp_gemm import _compat
from warp_gemm.tile import tile_gemm_func  # also exported as warp_gemm.tile_gemm_func
from warp_gemm.tools.dtypes import storage_arg
from warp_gemm.tools.tolerance import compare, round_to


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--size", default=None,
                   help="n for n x n x n, or MxNxK (default: 4096 on CUDA, 300x200x257 on the CPU)")
    p.add_argument("--dtype", default=None, type=storage_arg,
                   help="input and output dtype (default: float16 on CUDA, float32 on the CPU)")
    p.add_argument("--tiles", default=None,
                   help="TMxTNxTK (default on CUDA: 128x128x64 16-bit, 128x128x32 float32, 64x64x32 float64; "
                        "32x32x32 on the CPU)")
    p.add_argument("--block-dim", type=int, default=None, help="threads per block (default: 256 CUDA, 64 CPU)")
    p.add_argument("--stages", type=int, default=2,
                   help="K tiles of A and B in flight in the pipelined body, 2-4 (default: %(default)s)")
    p.add_argument("--epilogue-rows", type=int, default=0,
                   help="apply the activation to row chunks of this many rows (0: the whole tile; default)")
    p.add_argument("--body", choices=("fused", "fused-persistent", "tile"), default=None,
                   help="fused-persistent: warp_gemm.fused_gemm's tile_func (sums in registers, stored with "
                        "store_frag; float16/bfloat16's default); fused: fused_gemm's func (the tile in shared "
                        "memory); tile: tile_gemm_func")
    p.add_argument("--time", action="store_true", help="time it (always on CUDA)")
    p.add_argument("--repeats", type=int, default=20, help="timed launches per variant (default: %(default)s)")
    return p.parse_args(argv)


def wp_dtype(name: str):
    return _compat.bf16_dtype() if name == "bfloat16" else getattr(wp, name)


def build_kernels(tm: int, tn: int, tk: int, dtype: str, epilogue_rows: int = 0, stages: int = 2):
    """The fused layer kernel and the unfused pair's elementwise kernel, for ``dtype`` in and out.
    ``epilogue_rows`` > 0: the activation and store run on row chunks of the accumulator (``tile_view``s)
    instead of the whole tile at once (fewer live registers on large tiles)."""
    IN = wp_dtype(dtype)
    ACC = wp.float64 if dtype == "float64" else wp.float32
    CAST = dtype in ("float16", "bfloat16")  # the float32 accumulator is stored in 16 bit
    TM, TN = tm, tn
    ER = epilogue_rows
    if ER and (ER > tm or tm % ER):
        raise ValueError(f"--epilogue-rows {ER} must divide the tile's {tm} rows")
    mma = tile_gemm_func(tm, tn, tk, IN, stages=stages)

    def silu(x: ACC):
        # The user's activation: x * sigmoid(x).
        return x / (ACC(1.0) + wp.exp(-x))

    silu.__name__ = silu.__qualname__ = f"silu_{dtype}"
    act = wp.func(silu, name=f"example_silu_{dtype}")

    def fused_layer(A: wp.array2d(dtype=IN), B: wp.array2d(dtype=IN), Y: wp.array2d(dtype=IN)):
        i, j = wp.tid()
        acc = mma(A, B, i * TM, j * TN)  # (TM, TN) tile of A @ B, all of K
        if wp.static(ER > 0):
            for e in range(TM // ER):
                y = wp.tile_map(act, wp.tile_view(acc, offset=(e * ER, 0), shape=(ER, TN)))
                if wp.static(CAST):
                    wp.tile_store(Y, wp.tile_astype(y, IN), offset=(i * TM + e * ER, j * TN))
                else:
                    wp.tile_store(Y, y, offset=(i * TM + e * ER, j * TN))
        else:
            y = wp.tile_map(act, acc)
            if wp.static(CAST):
                wp.tile_store(Y, wp.tile_astype(y, IN), offset=(i * TM, j * TN))
            else:
                wp.tile_store(Y, y, offset=(i * TM, j * TN))

    def silu_inplace(X: wp.array2d(dtype=IN)):
        i, j = wp.tid()
        X[i, j] = IN(act(ACC(X[i, j])))

    fused_layer.__name__ = fused_layer.__qualname__ = f"fused_layer_{dtype}_{tm}x{tn}x{tk}_e{ER}_s{stages}"
    silu_inplace.__name__ = silu_inplace.__qualname__ = f"silu_inplace_{dtype}"
    # bfloat16 tiles are multiplied only in modules without backward code (Warp 1.14+); this layer
    # is forward-only anyway.
    if _compat.HAS_MODULE_OPTIONS_KW:
        opts = {"module": "unique", "module_options": {"enable_backward": False}}
        return wp.kernel(fused_layer, **opts), wp.kernel(silu_inplace, **opts)
    kernels = (wp.kernel(fused_layer, module="unique"), wp.kernel(silu_inplace, module="unique"))
    for k in kernels:
        k.module.options.update({"enable_backward": False})
    return kernels


def build_persistent_kernel(dtype: str):
    """The layer on ``warp_gemm.fused_gemm``'s persistent ``tile_func``: ``(g, kernel)``. Block ``b`` of ``G`` takes
    output tiles ``b, b + G, ...``; each consumer thread gets its ``g.frag`` float32 sums of the tile in registers,
    applies ``silu`` to each and stores them with ``g.store_frag`` (entries outside Y are not stored)."""
    IN = wp_dtype(dtype)
    g = warp_gemm.fused_gemm(IN, tn=256)
    frag, origin, store, FR = g.tile_func, g.tile_origin, g.store_frag, g.frag
    ROWS, COLS = g.buf_rows, g.buf_cols  # closure constants

    @wp.func
    def silu(x: float):
        # the approximate division (2 ulp) has no slow-path branch: the compiler overlaps a thread's 128 sums
        return wp.div_approx(x, 1.0 + wp.exp(-x))

    def fused_layer(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                    Y: wp.array2d(dtype=IN)):
        buf = wp.tile_empty(shape=(ROWS, COLS), dtype=float, storage="shared")  # the stages and their barriers
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)  # this thread's sums of output tile t
            o = origin(M, N, t)
            if o[0] < M:  # a consumer thread with sums (the producer warpgroup's threads get row 2^30)
                for i in range(FR):  # unrolled: the sums stay in registers
                    acc[i] = silu(acc[i])
                store(Y, acc, o)

    fused_layer.__name__ = fused_layer.__qualname__ = f"fused_gemm_tiles_layer_{dtype}"
    return g, wp.kernel(fused_layer, module="unique", module_options={"enable_backward": False})


def build_fused_kernel(dtype: str, epilogue_rows: int = 32):
    """The layer on ``warp_gemm.fused_gemm``'s function: ``(g, kernel)``; the activation and store run on
    ``epilogue_rows``-row views of the float32 tile that the function leaves in ``buf``."""
    IN = wp_dtype(dtype)
    g = warp_gemm.fused_gemm(IN)
    gemm, BM, BN, ROWS, COLS = g.func, g.bm, g.bn, g.buf_rows, g.buf_cols  # closure constants for Warp
    ER = epilogue_rows or BM

    @wp.func
    def silu(x: float):
        return wp.div_approx(x, 1.0 + wp.exp(-x))

    def fused_layer(ta: wp.uint64, tb: wp.uint64, K: int, Y: wp.array2d(dtype=IN)):
        i, j = wp.tid()
        buf = wp.tile_empty(shape=(ROWS, COLS), dtype=float, storage="shared")
        gemm(buf, ta, tb, K, i * BM, j * BN)  # rows 0 .. BM - 1 of buf: the tile of A @ B, float32
        for e in range(BM // ER):
            v = wp.tile_view(buf, offset=(e * ER, 0), shape=(ER, BN))
            wp.tile_store(Y, wp.tile_astype(wp.tile_map(silu, v), IN), offset=(i * BM + e * ER, j * BN))

    fused_layer.__name__ = fused_layer.__qualname__ = f"fused_gemm_layer_{dtype}_e{ER}"
    return g, wp.kernel(fused_layer, module="unique", module_options={"enable_backward": False})


def to_wp(x: np.ndarray, dtype: str, device: str) -> wp.array:
    if dtype == "bfloat16":
        return wp.array(x.astype(np.float32), dtype=wp_dtype(dtype), device=device)
    return wp.array(x.astype(dtype), dtype=wp_dtype(dtype), device=device)


def to_f64(y: wp.array, dtype: str) -> np.ndarray:
    v = y.numpy()
    if dtype == "bfloat16":  # raw bits
        return (v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return v.astype(np.float64)


def timed(fn, repeats: int, device: str) -> float:
    """Seconds per call of ``repeats`` calls back to back (the host's work overlapping the GPU's), after warm-up."""
    for _ in range(3):
        fn()
    wp.synchronize_device(device)
    t = time.perf_counter()
    for _ in range(repeats):
        fn()
    wp.synchronize_device(device)
    return (time.perf_counter() - t) / repeats


def main(argv=None) -> int:
    args = parse_args(argv)
    _compat.init()
    device = args.device or default_device()
    cuda = device.startswith("cuda")
    if cuda:
        _compat.init(device)
    dtype = args.dtype or ("float16" if cuda else "float32")
    size = args.size or ("4096" if cuda else "300x200x257")
    M, N, K = (int(v) for v in size.split("x")) if "x" in size else (int(size),) * 3
    # CUDA defaults that fit one block's 227 KB with the stages, the function's accumulator and the
    # kernel's result tile: 16-bit 128x128x64 (201 KB), float32 128x128x32 (199 KB; 128x128x64 needs 262 KB),
    # float64 64x64x32 (135 KB).
    cuda_tiles = {"float32": "128x128x32", "float64": "64x64x32"}.get(dtype, "128x128x64")
    tm, tn, tk = (int(v) for v in (args.tiles or (cuda_tiles if cuda else "32x32x32")).split("x"))
    block_dim = args.block_dim or (256 if cuda else 64)
    if dtype in ("float16", "bfloat16") and not _compat.HAS_TILE_ASTYPE:
        print(f"{dtype} needs warp-lang >= 1.8 (tile_astype); installed {_compat.WARP_VERSION}")
        return 1

    rng = np.random.default_rng(0)
    s = K**-0.25
    a = round_to(rng.standard_normal((M, K)) * s, dtype)
    b = round_to(rng.standard_normal((K, N)) * s, dtype)
    A, B = to_wp(a, dtype, device), to_wp(b, dtype, device)
    Y = to_wp(np.full((M, N), np.nan), dtype, device)
    sixteen = dtype in ("float16", "bfloat16")
    fused_ok = sixteen and _compat.HAS_TILE_EMPTY and _compat.HAS_TILE_FUNC_ARGS and (
        not cuda or wp.get_device(device).arch == 90)
    body_kind = args.body or (("fused-persistent" if cuda or _compat.HAS_CPU_BLOCKS else "fused") if fused_ok
                              else "tile")
    if body_kind.startswith("fused") and not sixteen:
        print(f"--body {body_kind} multiplies float16 and bfloat16, not {dtype}")
        return 1
    _, silu_k = build_kernels(tm, tn, tk, dtype, args.epilogue_rows, args.stages)
    if body_kind == "fused-persistent":
        g, fused = build_persistent_kernel(dtype)
        print(f"y = silu(A @ B): A {M}x{K}, B {K}x{N}, {dtype} on {device}; fused_gemm tile_func {g.bm}x{g.bn}, "
              f"{g.stages} stages, block_dim {g.block_dim}, persistent; warp-lang {_compat.WARP_VERSION}")

        ops = g.operands(A, B)  # descriptors, aligned copies where rows need them; the grid
        # rows TMA reads in place: record the launch once, replay it per call (one native launch); staged operands
        # (odd K or N) are copied again per call, as their values may change
        cmd = None if ops.staged else g.launch_tiles(fused, ops, ops.args + [Y], device=device, record_cmd=True)

        def run_fused():
            if cmd is not None:
                cmd.launch()
                return
            o = g.operands(A, B)
            g.launch_tiles(fused, o, o.args + [Y], device=device)
    elif body_kind == "fused":
        g, fused = build_fused_kernel(dtype, args.epilogue_rows or 32)
        print(f"y = silu(A @ B): A {M}x{K}, B {K}x{N}, {dtype} on {device}; fused_gemm {g.bm}x{g.bn}, "
              f"{g.stages} stages, block_dim {g.block_dim}, shared buffer {g.smem_bytes} bytes; "
              f"warp-lang {_compat.WARP_VERSION}")

        def run_fused():
            ops = g.operands(A, B)  # descriptors (cached), aligned copies where rows need them
            g.launch(fused, M, N, [ops.a, ops.b, ops.K, Y], device=device)
    else:
        fused, _ = build_kernels(tm, tn, tk, dtype, args.epilogue_rows, args.stages)
        grid = (-(-M // tm), -(-N // tn))
        mma = tile_gemm_func(tm, tn, tk, wp_dtype(dtype), stages=args.stages)  # the cached function
        body = f"pipelined, {mma.stages} stages" if mma.pipelined else "synchronous tile_load"
        print(f"y = silu(A @ B): A {M}x{K}, B {K}x{N}, {dtype} on {device}; tiles {tm}x{tn}x{tk}, "
              f"block_dim {block_dim}, epilogue rows {args.epilogue_rows or tm}, grid {grid}; "
              f"warp-lang {_compat.WARP_VERSION}")
        print(f"  tile_gemm_func body: {body}; its shared memory {mma.smem_bytes} bytes per block "
              f"(+ {tm * tn * (8 if dtype == 'float64' else 4)} for the kernel's result tile)")

        def run_fused():
            wp.launch_tiled(fused, dim=grid, inputs=[A, B, Y], block_dim=block_dim, device=device)

    t = time.perf_counter()
    run_fused()
    wp.synchronize_device(device)
    print(f"  first fused launch (compiles on a cold cache): {time.perf_counter() - t:.1f} s")
    z = a @ b
    ref = z / (1.0 + np.exp(-z))
    result = compare(to_f64(Y, dtype), ref, dtype)
    print(f"  fused kernel vs float64:   {result}")
    ok = result.ok

    # The unfused pair: warp_gemm.matmul into a buffer, then the activation in place.
    T = to_wp(np.full((M, N), np.nan), dtype, device)

    def run_pair():
        warp_gemm.matmul(A, B, out=T)
        wp.launch(silu_k, dim=(M, N), inputs=[T], device=device)

    t = time.perf_counter()
    run_pair()
    wp.synchronize_device(device)
    print(f"  first unfused pair (compiles on a cold cache): {time.perf_counter() - t:.1f} s")
    result = compare(to_f64(T, dtype), ref, dtype)
    print(f"  matmul + silu vs float64:  {result}")
    ok &= result.ok

    if args.time or cuda:
        flops = 2.0 * M * N * K
        tf = timed(run_fused, args.repeats, device)
        tp = timed(run_pair, args.repeats, device)
        unit, scale = ("TFLOP/s", 1e12) if cuda else ("GFLOP/s", 1e9)
        print(f"  fused layer:               {tf * 1e3:9.3f} ms  {flops / tf / scale:8.2f} {unit}")
        print(f"  warp_gemm.matmul + silu:   {tp * 1e3:9.3f} ms  {flops / tp / scale:8.2f} {unit}")
        print(f"  unfused / fused time:      {tp / tf:.2f}x")
    print("all results within tolerance" if ok else "SOME RESULTS OUT OF TOLERANCE (FAIL)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
