"""One kernel of the fused suite's fp16 silu(A @ B) 4096^3 row per process, for Nsight Compute; or all of them timed.

    PYTHONPATH=. python scripts/fused_profile.py --build            # compile every variant (fills Warp's cache)
    PYTHONPATH=. python scripts/fused_profile.py --time             # GPU ms per kernel, 20 back-to-back calls
    ncu --set full -k regex:r_silu -c 1 -o pp python scripts/fused_profile.py --run pp

Variants: "func" (g.func, one block per tile, the epilogue in Warp tile code), "pp" (the suite's g.tile_func
kernel, ping-pong, 128 x 128, stores through g.store_frag), "pp_elem" (the same with one 2-byte store per sum),
"coop" (both consumers on one 128 x 128 tile), "coop256" / "coop256_elem" (both on one 128 x 256 tile),
"pp_nostore" (the element kernel's arithmetic, its stores behind a test that never passes), "mm"
(warp_gemm.matmul: the Hopper family's kernel, 128 x 256 at this size), "mm128" (the same family forced to 128 x
128 tiles), "silu" (torch's silu on the product).
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
VARIANTS = ("func", "pp", "pp_elem", "coop", "coop256", "coop256_elem", "mm", "mm128", "silu")


def elem_kernel(g):
    frag, origin, coord, FR, R, C = g.tile_func, g.tile_origin, g.tile_coord, g.frag, g.buf_rows, g.buf_cols
    act = activation_func("silu", wp.float32)

    def r_silu_elem(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                    Y: wp.array2d(dtype=wp.float16)):
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)
            o = origin(M, N, t)
            for i in range(FR):
                rc = coord(o, i)
                if rc[0] < M and rc[1] < N:
                    Y[rc[0], rc[1]] = wp.float16(act(acc[i]))

    return wp.kernel(r_silu_elem, module="unique", module_options={"enable_backward": False})


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


_IN: dict = {}


def setup(variant):
    dev = wp.get_device("cuda:0")
    if not _IN:
        _IN["a"] = (torch.randn(M, K, device="cuda") * K ** -0.25).half()
        _IN["b"] = (torch.randn(K, N, device="cuda") * K ** -0.25).half()
        _IN["y"] = torch.empty(M, N, device="cuda", dtype=torch.float16)
    a, b, y = _IN["a"], _IN["b"], _IN["y"]
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
    if variant == "mm128":
        from warp_gemm.families.hopper import rules

        rules.tile_choice = lambda *a, **kw: (128, 128, 1)
        return lambda: warp_gemm.matmul(a, b)
    tn = 256 if variant.startswith("coop256") else 128
    g = warp_gemm.fused_gemm(wp.float16, layout_b="N", tn=tn, pingpong=False if variant.startswith("coop") else None)
    if variant in ("pp", "coop", "coop256"):
        g, k = S._kernels("silu", "float16", "N", "regs", tn, False if variant.startswith("coop") else None)
    else:
        k = {"pp_elem": elem_kernel, "coop256_elem": elem_kernel, "pp_nostore": nostore_kernel}[variant](g)
    ops = g.operands(wa, wb)
    g.load(k, dev)
    args = ops.args + [wy]
    return lambda: wp.launch_tiled(k, dim=(ops.grid,), inputs=args, block_dim=g.block_dim, device=dev, stream=ts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run", choices=VARIANTS)
    p.add_argument("--build", action="store_true")
    p.add_argument("--time", action="store_true")
    p.add_argument("--only", nargs="*", default=None)
    args = p.parse_args()
    wp.init()
    if args.run:
        fn = setup(args.run)
        torch.cuda.synchronize()
        fn()
        torch.cuda.synchronize()
        return 0
    rows = []
    ref = None
    for v in args.only or [v for v in VARIANTS if v != "mm128"]:
        try:
            fn = setup(v)
        except Exception as e:  # noqa: BLE001 - one variant's failure is reported, the others still run
            print(f"{v}: {type(e).__name__}: {e}", flush=True)
            continue
        if fn is None or not args.time:
            continue
        err = ""
        if v not in ("mm", "mm128", "silu"):  # the fused kernels write y: silu(A @ B) against float32 torch
            if ref is None:
                ref = F.silu(_IN["a"].float() @ _IN["b"].float())
            _IN["y"].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = f"rel. err {float((_IN['y'].float() - ref).norm() / ref.norm()):.1e}"
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            fn()
        e.record()
        torch.cuda.synchronize()
        rows.append((v, s.elapsed_time(e) / 20, err))
    print(torch.cuda.get_device_name())
    for v, ms, err in rows:
        print(f"| {v} | {ms:.3f} ms/kernel (20 back to back) | {err} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
