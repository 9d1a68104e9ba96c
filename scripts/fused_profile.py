"""One kernel of the fused suite's fp16 silu(A @ B) 4096^3 row per process, for Nsight Compute; or all of them timed.

    PYTHONPATH=. python scripts/fused_profile.py --build            # compile every variant (fills Warp's cache)
    PYTHONPATH=. python scripts/fused_profile.py --time             # GPU ms per kernel, 20 back-to-back calls
    PYTHONPATH=. python scripts/fused_profile.py --time --n 4095 --only coop256 stage mm silu   # the odd row
    ncu --set full -k regex:r_silu -c 1 -o pp python scripts/fused_profile.py --run pp

Variants: "func" (g.func, one block per tile, the epilogue in Warp tile code), "pp" (the suite's g.tile_func
kernel, ping-pong, 128 x 128, stores through g.store_frag), "pp_elem" (the same with one 2-byte store per sum),
"coop" (both consumers on one 128 x 128 tile), "coop256" / "coop256_elem" (both on one 128 x 256 tile),
"pp_nostore" (the element kernel's arithmetic, its stores behind a test that never passes), "mm"
(warp_gemm.matmul: the Hopper family's kernel, 128 x 256 at this size), "mm128" (the same family forced to 128 x
128 tiles), "silu" (torch's silu on the product), "stage" (``g.operands`` of the 128 x 256 configuration alone: at
``--n 4095`` the two copies of A and B into aligned rows; the fused variants are timed on operands staged once).
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
VARIANTS = ("func", "pp", "pp_elem", "coop", "coop256", "coop256_rec", "coop256_elem", "mm", "mm128", "silu", "pair",
            "stage")


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
    if variant == "pair":
        return lambda: F.silu(warp_gemm.matmul(a, b))
    if variant == "func":
        g, k = S._kernels("silu", "float16", "N", "tile")
        ops = g.operands(wa, wb)
        g.load(k, dev)
        return lambda: wp.launch_tiled(k, dim=g.grid(M, N), inputs=[ops.a, ops.b, ops.K, wy],
                                       block_dim=g.block_dim, device=dev, stream=ts)
    if variant == "stage":
        g = warp_gemm.fused_gemm(wp.float16, layout_b="N", tn=256, pingpong=False)
        return lambda: g.operands(wa, wb)
    if variant == "mm128":
        from warp_gemm.families.hopper import rules

        rules.tile_choice = lambda *a, **kw: (128, 128, 1)
        return lambda: warp_gemm.matmul(a, b)
    tn = 256 if variant.startswith("coop256") else 128
    g = warp_gemm.fused_gemm(wp.float16, layout_b="N", tn=tn, pingpong=variant.startswith("pp"))
    if variant in ("pp", "coop", "coop256", "coop256_rec"):
        g, k = S._kernels("silu", "float16", "N", "regs", tn, variant.startswith("pp"))
    else:
        k = {"pp_elem": elem_kernel, "coop256_elem": elem_kernel, "pp_nostore": nostore_kernel}[variant](g)
    ops = g.operands(wa, wb)
    g.load(k, dev)
    args = ops.args + [wy]
    if variant == "coop256_rec":  # as the fused suite calls it: the recorded launch, on torch's stream
        cmd = g.launch_tiles(k, ops, args, device=dev, record_cmd=True)

        def rec():
            with wp.ScopedStream(ts):
                cmd.launch()
        return rec
    return lambda: wp.launch_tiled(k, dim=(ops.grid,), inputs=args, block_dim=g.block_dim, device=dev, stream=ts)


def _clock() -> str:
    """The SM clock (MHz) and board power (W) now, from NVML (empty where it does not import)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return (f"SM {pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)} MHz, "
                f"{pynvml.nvmlDeviceGetPowerUsage(h) / 1000:.0f} W")
    except Exception:  # noqa: BLE001 - the clock is a remark, not a result
        return ""


def main():
    global M, N, K
    p = argparse.ArgumentParser()
    p.add_argument("--run", choices=VARIANTS)
    p.add_argument("--build", action="store_true")
    p.add_argument("--time", action="store_true")
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--n", type=int, default=M, help="M = N = K (default 4096)")
    p.add_argument("--dobench", action="store_true",
                   help="time with the suite's timer (triton.testing.do_bench: 25 ms warm-up, 100 ms of calls, L2 "
                        "flushed per call) and read the SM clock and power after it (NVML)")
    p.add_argument("--flush", action="store_true",
                   help="time each call alone after zeroing 256 MB (the L2 flushed and dirty, as do_bench): median")
    args = p.parse_args()
    M = N = K = args.n
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
        if v not in ("mm", "mm128", "silu", "pair", "stage"):  # the fused kernels write y: silu(A @ B) against float32 torch
            if ref is None:
                ref = F.silu(_IN["a"].float() @ _IN["b"].float())
            _IN["y"].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = f"rel. err {float((_IN['y'].float() - ref).norm() / ref.norm()):.1e}"
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        if args.dobench:
            from warp_gemm.tools.bench.env import time_cuda

            t = time_cuda(fn, "cuda", warmup_ms=25.0, rep_ms=100.0)
            rows.append((v, t.median_ms, f"{err} p20 {t.p20_ms:.3f} p80 {t.p80_ms:.3f} {_clock()}"))
            continue
        if args.flush:
            cache = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(50)]
            for s, e in ev:
                cache.zero_()
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
            rows.append((v, sorted(s.elapsed_time(e) for s, e in ev)[len(ev) // 2], err))
            continue
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            fn()
        e.record()
        torch.cuda.synchronize()
        rows.append((v, s.elapsed_time(e) / 20, err))
    print(torch.cuda.get_device_name())
    how = ("do_bench" if args.dobench else "each alone after a 256 MB zero, median of 50" if args.flush
           else "20 back to back")
    for v, ms, err in rows:
        print(f"| {v} | {ms:.3f} ms/kernel ({how}) | {err} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
