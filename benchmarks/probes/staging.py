"""How fast can an operand with 2-byte aligned rows be staged into 16-byte aligned rows? (fp16, CUDA)

The pipelined family copies operands whose rows are not 16-byte aligned (an odd leading dimension in
fp16) into a cached buffer with aligned rows first (``core.execute._staged``, the element-per-thread
convert kernel). This probe times, on the same source and padded destination:

- ``convert``: the package's staging kernel (one element per thread, with scale and broadcast);
- ``row8``: a Warp kernel copying 8 consecutive elements per thread (scalar loads and stores);
- ``row8v``: the same with the 8 elements packed into one 16-byte store (a native snippet);
- ``torch``: ``dst[..., :c].copy_(src)`` (a reference for the achievable rate).

    python benchmarks/probes/staging.py [--json out.json]
"""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import argparse
import json
import sys
from pathlib import Path

import warp as wp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SHAPES = [(4095, 4095), (1027, 1025), (1023, 1027), (8191, 8191), (4099, 1031)]

_SNIP = r"""
#if defined(__CUDA_ARCH__)
    const int nc = src.shape[2];
    const char* s = (const char*)src.data + (size_t)b * src.strides[0] + (size_t)i * src.strides[1];
    unsigned short v[8];
    for (int e = 0; e < 8; ++e) {
        const int c = j + e;
        v[e] = c < nc ? *(const unsigned short*)(s + (size_t)c * 2) : (unsigned short)0;
    }
    char* d = (char*)dst.data + (size_t)b * dst.strides[0] + (size_t)i * dst.strides[1] + (size_t)j * 2;
    *(uint4*)d = *(const uint4*)v;
#endif
"""


def kernels():
    def row8(dst: wp.array3d(dtype=wp.float16), src: wp.array3d(dtype=wp.float16)):
        b, i, j8 = wp.tid()
        j = j8 * 8
        for e in range(8):
            if j + e < src.shape[2]:
                dst[b, i, j + e] = src[b, i, j + e]

    def stub(dst: wp.array3d(dtype=wp.float16), src: wp.array3d(dtype=wp.float16), b: int, i: int, j: int): ...

    stub.__name__ = stub.__qualname__ = "wg_probe_pack8"
    pack8 = wp.func_native(_SNIP)(stub)

    def row8v(dst: wp.array3d(dtype=wp.float16), src: wp.array3d(dtype=wp.float16)):
        b, i, j8 = wp.tid()
        pack8(dst, src, b, i, j8 * 8)

    from warp_gemm import _compat

    return _compat.make_kernel(row8, "wg_probe_row8"), _compat.make_kernel(row8v, "wg_probe_row8v")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch

    from warp_gemm.families.common.elementwise import convert_kernel

    wp.init()
    k8, k8v = kernels()
    conv = convert_kernel("float16", "float16")
    rows = []

    def st():  # the current torch stream (the capture stream inside torch.cuda.graph)
        return wp.stream_from_torch(torch.cuda.current_stream())

    for r, c in SHAPES:
        cp = -(-c // 8) * 8
        src_t = torch.randn(1, r, c, device="cuda").half()
        dst_t = torch.full((1, r, cp), float("nan"), device="cuda", dtype=torch.float16)
        src = wp.from_torch(src_t)
        dst_full = wp.from_torch(dst_t)
        dst = wp.array(ptr=dst_full.ptr, dtype=wp.float16, shape=(1, r, c), strides=dst_full.strides,
                       device=dst_full.device)
        fns = {
            "convert": lambda: wp.launch(conv, dim=(1, r, c), inputs=[dst, src, 1.0], stream=st()),
            "row8": lambda: wp.launch(k8, dim=(1, r, cp // 8), inputs=[dst_full, src], stream=st()),
            "row8v": lambda: wp.launch(k8v, dim=(1, r, cp // 8), inputs=[dst_full, src], stream=st()),
            "torch": lambda: dst_t[..., :c].copy_(src_t),
        }
        for name, fn in fns.items():
            dst_t.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            ok = bool(torch.equal(dst_t[..., :c], src_t))
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(20):
                    fn()
            g.replay()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ts = []
            for _ in range(7):
                e0.record()
                g.replay()
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) / 20 * 1e3)
            us = sorted(ts)[3]
            gbs = 2 * r * c * 2 / us / 1e3
            rows.append({"shape": f"{r}x{c}", "kernel": name, "us": us, "GB/s": gbs, "exact": ok})
            print(f"{r}x{c:<6} {name:8} {us:9.2f} us {gbs:8.0f} GB/s exact={ok}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
