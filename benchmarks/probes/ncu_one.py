"""Open question: where does one pipelined block's time go at medium sizes (fp16 64 x 256^3 is 0.81x cuBLAS)?

One forced pipelined launch for Nsight Compute: three calls of ``matmul`` on fp16 ``(B, M, K) @ (B, K, N)`` with
``options(family="pipelined", pipe_config=CONFIG)``; profile the last one. The stall counters worth reading are
listed in ``ncu_metrics.txt`` beside this file. Persistent (``/pN``) and stream-K (``/kN``) configurations lost to
the plain grid without a profile: they are the next cases to run through it.

    ncu --launch-skip 2 --launch-count 1 --metrics $(cat benchmarks/probes/ncu_metrics.txt) \
        python benchmarks/probes/ncu_one.py 64 256 256 256 pipe/128x128x32/s4/b128/o2/mma
"""

import sys

import torch

import warp_gemm as wg


def main(argv: list[str]) -> None:
    if len(argv) != 5:
        raise SystemExit(__doc__)
    B, M, N, K = (int(x) for x in argv[:4])
    wg.init("cuda")
    a = torch.randn(B, M, K, device="cuda").half()
    b = torch.randn(B, K, N, device="cuda").half()
    out = torch.empty(B, M, N, device="cuda", dtype=torch.half)
    with wg.options(family="pipelined", pipe_config=argv[4]):
        for _ in range(3):
            wg.matmul(a, b, out=out)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
