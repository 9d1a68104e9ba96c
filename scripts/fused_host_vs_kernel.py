"""GPU time and host time per call of the fused suite's silu kernels, warp_gemm.matmul (+ silu) and torch.

    PYTHONPATH=. python scripts/fused_host_vs_kernel.py       # CUDA, sm_90; prints a table

Each variant runs 10 times back to back between two CUDA events after 3 warm-up calls: the GPU column is the
events' time / 10 (the host's work overlaps the GPU's while the host keeps ahead), the host column the wall time of
the 10 calls / 10 without waiting. The fused suite's timing (events around each call, a synchronisation between
calls) counts the host work before the launch as well: fused suite time ~ GPU time + host time of that work.
Variants: "launch only" (descriptors made and the module loaded before; wp.launch_tiled alone) and "suite call" (the
suite's per-call work: operands, launch_tiles, under a ScopedStream of torch's stream) of the ping-pong (pp) and
shared-tile (coop) tile_func kernels on 128 x 128 tiles and the shared-tile one on 128 x 256 tiles (the Hopper
family's tile at this size); the g.func kernel ("tile", launch only); matmul; matmul + silu; torch.
"""
import time

import torch
import torch.nn.functional as F
import warp as wp

import warp_gemm
from warp_gemm.tools.bench import fused as S


def bench(fn, n: int = 10) -> tuple[float, float]:
    """(GPU ms per call of n back-to-back calls between two events, host ms per call) after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    s.record()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n * 1e3
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n, host


def main() -> None:
    wp.init()
    dev = wp.get_device("cuda:0")
    ts = wp.stream_from_torch(torch.cuda.current_stream())
    M = N = K = 4096
    out = []
    for dt, lb in (("float16", "N"), ("bfloat16", "T")):
        tdt = getattr(torch, dt)
        a = (torch.randn(M, K, device="cuda") * K ** -0.25).to(tdt)
        w = (torch.randn(N, K, device="cuda") * K ** -0.25).to(tdt)
        b = w.T.contiguous()
        wa, wb, ww = wp.from_torch(a), wp.from_torch(b), wp.from_torch(w)
        y = torch.empty(M, N, device="cuda", dtype=tdt)
        wy = wp.from_torch(y)
        B = wb if lb == "N" else ww
        for name, pp, tn in (("pp", True, 128), ("coop", False, 128), ("coop 128x256", None, 256)):
            S.PINGPONG, S.TN_REGS = pp, tn
            g, k = S._kernels("silu", dt, lb, "regs")
            ops = g.operands(wa, B)
            g.load(k, dev)
            args = ops.args + [wy]

            def launch(g=g, k=k, ops=ops, args=args):
                wp.launch_tiled(k, dim=(ops.grid,), inputs=args, block_dim=g.block_dim, device=dev, stream=ts)

            def full(g=g, k=k, B=B, wa=wa, wy=wy):
                with wp.ScopedStream(ts):
                    o = g.operands(wa, B)
                    g.launch_tiles(k, o, o.args + [wy], device=dev)

            out.append((dt, lb, name + " launch only", *bench(launch)))
            out.append((dt, lb, name + " suite call", *bench(full)))
        S.PINGPONG, S.TN_REGS = None, 128
        g, k = S._kernels("silu", dt, lb, "tile")
        ops = g.operands(wa, B)
        g.load(k, dev)

        def launch_t(g=g, k=k, ops=ops, wy=wy):
            wp.launch_tiled(k, dim=g.grid(M, N), inputs=[ops.a, ops.b, ops.K, wy], block_dim=g.block_dim,
                            device=dev, stream=ts)

        out.append((dt, lb, "tile launch only", *bench(launch_t)))
        bb = b if lb == "N" else w.T
        out.append((dt, lb, "warp_gemm.matmul", *bench(lambda a=a, bb=bb: warp_gemm.matmul(a, bb))))
        out.append((dt, lb, "matmul+silu", *bench(lambda a=a, bb=bb: F.silu(warp_gemm.matmul(a, bb)))))
        out.append((dt, lb, "torch mm", *bench(lambda a=a, bb=bb: a @ bb)))
    print(torch.cuda.get_device_name())
    print("| dtype | B | what | GPU ms/call (back-to-back) | host ms/call |")
    print("|---|---|---|---|---|")
    for r in out:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} |")


if __name__ == "__main__":
    main()
