"""One kernel of the fused suite's fp16 silu(A @ B) 4096^3 row per process, for Nsight Compute; or all of them timed.

    PYTHONPATH=. python scripts/fused_profile.py --build            # compile every variant (fills Warp's cache)
    PYTHONPATH=. python scripts/fused_profile.py --time             # GPU ms per kernel, 20 back-to-back calls
    ncu --set full -k regex:r_silu -c 1 -o pp python scripts/fused_profile.py --run pp

Variants: "func" (g.func, one block per tile, the epilogue in Warp tile code), "pp" (g.tile_func, ping-pong),
"coop" (g.tile_func, both consumers on one tile), "pp_nostore" (pp with the stores behind a test that never
passes: the epilogue's arithmetic without its stores), "pp_frag" (pp storing through g.store_frag, where it
exists), "mm" (warp_gemm.matmul: the Hopper family's kernel), "silu" (torch's silu on the product).
"""
import argparse
import sys

import torch
import torch.nn.functional as F
import warp as wp

import warp_gemm
from warp_gemm.families.common.epilogue import activation_func
from warp_gemm.tools.bench import fused as S

M = N = K = 4096
VARIANTS = ("func", "pp", "coop", "pp_nostore", "pp_frag", "mm", "silu")


def nostore_kernel(g):
    frag, origin, coord, FR, R, C = g.tile_func, g.tile_origin, g.tile_coord, g.frag, g.buf_rows, g.buf_cols
    act = activation_func("silu", wp.float32)

    def r_silu_nostore(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                       Y: wp.array2d(dtype=wp.float16)):
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)
            o = origin(M, N, t)
            for i in range(FR):
                rc = coord(o, i)
                v = act(acc[i])
                if rc[0] < M and rc[1] < N and v == 12345.0:
                    Y[rc[0], rc[1]] = wp.float16(v)

    return wp.kernel(r_silu_nostore, module="unique", module_options={"enable_backward": False})


def frag_kernel(g):
    frag, origin, FR, R, C = g.tile_func, g.tile_origin, g.frag, g.buf_rows, g.buf_cols
    store = g.store_frag
    act = activation_func("silu", wp.float32)

    def r_silu_frag(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                    Y: wp.array2d(dtype=wp.float16)):
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)
            for i in range(FR):
                acc[i] = act(acc[i])
            store(Y, acc, origin(M, N, t))

    return wp.kernel(r_silu_frag, module="unique", module_options={"enable_backward": False})


def setup(variant):
    dev = wp.get_device("cuda:0")
    a = (torch.randn(M, K, device="cuda") * K ** -0.25).half()
    b = (torch.randn(K, N, device="cuda") * K ** -0.25).half()
    y = torch.empty(M, N, device="cuda", dtype=torch.float16)
    wa, wb, wy = wp.from_torch(a), wp.from_torch(b), wp.from_torch(y)
    ts = wp.stream_from_torch(torch.cuda.current_stream())
    if variant == "mm":
        return lambda: warp_gemm.matmul(a, b)
    if variant == "silu":
        z = a @ b
        return lambda: F.silu(z)
    if variant == "func":
        g, k = S._kernels("silu", "float16", "N", "tile")
        ops = g.operands(wa, wb)
        g.load(k, dev)
        return lambda: wp.launch_tiled(k, dim=g.grid(M, N), inputs=[ops.a, ops.b, ops.K, wy],
                                       block_dim=g.block_dim, device=dev, stream=ts)
    S.PINGPONG = False if variant == "coop" else None
    if variant in ("pp_nostore", "pp_frag"):
        g = warp_gemm.fused_gemm(wp.float16, layout_b="N")
        if variant == "pp_frag" and not hasattr(g, "store_frag"):
            return None
        k = nostore_kernel(g) if variant == "pp_nostore" else frag_kernel(g)
    else:
        g, k = S._kernels("silu", "float16", "N", "regs")
    ops = g.operands(wa, wb)
    g.load(k, dev)
    args = ops.args + [wy]
    return lambda: wp.launch_tiled(k, dim=(ops.grid,), inputs=args, block_dim=g.block_dim, device=dev, stream=ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run", choices=VARIANTS)
    p.add_argument("--build", action="store_true")
    p.add_argument("--time", action="store_true")
    args = p.parse_args()
    wp.init()
    if args.run:
        fn = setup(args.run)
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        return 0
    rows = []
    for v in VARIANTS:
        try:
            fn = setup(v)
        except Exception as e:  # noqa: BLE001 - one variant's failure is reported, the others still run
            print(f"{v}: {type(e).__name__}: {e}", flush=True)
            continue
        if fn is None or not args.time:
            continue
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            fn()
        e.record()
        torch.cuda.synchronize()
        rows.append((v, s.elapsed_time(e) / 20))
    print(torch.cuda.get_device_name())
    for v, ms in rows:
        print(f"| {v} | {ms:.3f} ms/kernel (20 back to back) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
