"""Round 15 (H100): one launch of each, between cudaProfilerStart/Stop, for Nsight Compute (L2 flushed by ncu's
default cache control): warp_gemm's fp16 1x4096x4096 GEMV (band kernel + finishing kernel), cuBLAS's (torch.matmul)
on the same operands, and cuBLAS's fp16 64 x 256^3 batched product -- the kernels, grids and times issue 18's two
misses are measured against. Also prints which pipelined configuration the planner takes for round 15's tuned
buckets (the shipped table's float16 NN '|pipe' groups).

    ncu --clock-control none --profile-from-start off --metrics ... python3 benchmarks/probes/ncu_round15.py
"""
import sys

import torch

import warp_gemm as wg

wg.init("cuda")
x = torch.randn(1, 4096, device="cuda").half()
B = torch.randn(4096, 4096, device="cuda").half()
y = torch.empty(1, 4096, device="cuda", dtype=torch.half)
a64 = torch.randn(64, 256, 256, device="cuda").half()
b64 = torch.randn(64, 256, 256, device="cuda").half()
o64 = torch.empty(64, 256, 256, device="cuda", dtype=torch.half)
ops = {"wg_gemv": lambda: wg.matmul(x, B, out=y), "cublas_gemv": lambda: torch.matmul(x, B, out=y),
       "cublas_b64": lambda: torch.matmul(a64, b64, out=o64), "wg_b64": lambda: wg.matmul(a64, b64, out=o64)}
for f in ops.values():
    for _ in range(3):
        f()
torch.cuda.synchronize()
import warp as wp  # noqa: E402

from warp_gemm.core import plan  # noqa: E402

for M, N, K, nb in [(1000, 1000, 1000, 1), (1536, 1536, 1536, 1), (2048, 2048, 2048, 1), (256, 64, 256, 64),
                    (1023, 1025, 1027, 1), (4096, 4096, 4096, 1)]:
    s = plan.choose_pipe_spec(wp.get_device("cuda"), "float16", "float16", False, "NN", "scale", M, N, K, nb)
    print("PLAN", f"{nb}x{M}x{N}x{K}", s.kernel_key if hasattr(s, "kernel_key") else s, flush=True)
for name in sys.argv[1:] or list(ops):
    torch.cuda.profiler.start()
    ops[name]()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
