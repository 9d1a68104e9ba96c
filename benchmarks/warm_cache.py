"""Fill Warp's kernel cache for a list of shapes and dtypes in parallel processes, so a timing run that
follows loads every kernel in ~0.2 s instead of compiling it for 20-60 s in turn (16-core GPU host).

    python benchmarks/warm_cache.py --shapes 4096x4096x4096,1000x1000x1000 --dtype fp16,bf16,tf32 -j 16

Each job is one warp_gemm call of that shape and dtype (torch CUDA operands, random data) in its own
process; what it compiles is what a warp_gemm call of that shape compiles. Extra jobs: ``--linear``
adds ``warp_gemm.linear`` with bias and each activation given.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = r"""
import sys, torch, warp_gemm
from warp_gemm.tools.shapes import parse_shape
s = parse_shape(sys.argv[1]); dt = sys.argv[2]; act = sys.argv[3] if len(sys.argv) > 3 else ""
tf32 = dt == "tf32"
tdt = getattr(torch, {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "float32", "fp64": "float64"}[dt])
a = torch.randn(*((s.batch,) if s.batch else ()), s.M, s.K, device="cuda", dtype=tdt)
b = torch.randn(s.K, s.N, device="cuda", dtype=tdt)
if act:
    w = b.T.contiguous(); bias = torch.randn(s.N, device="cuda", dtype=tdt)
    warp_gemm.linear(a, w, bias, activation=None if act == "none" else act)
else:
    warp_gemm.matmul(a, b, allow_tf32=tf32)
torch.cuda.synchronize()
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--linear", default="", help="comma-separated activations for warp_gemm.linear jobs")
    ap.add_argument("-j", type=int, default=16)
    args = ap.parse_args(argv)
    jobs = [(s, d, "") for s in args.shapes.split(",") for d in args.dtype.split(",")]
    jobs += [(s, d, a) for s in args.shapes.split(",") for d in args.dtype.split(",") for a in args.linear.split(",") if a]
    t0 = time.time()

    def one(job):
        r = subprocess.run([sys.executable, "-c", JOB, *[x for x in job if x]], cwd=ROOT, capture_output=True, text=True)
        return job, r.returncode, r.stderr[-400:]

    with ThreadPoolExecutor(args.j) as ex:
        for job, rc, err in ex.map(one, jobs):
            print(f"warm {job}: {'ok' if rc == 0 else 'FAILED ' + err}", flush=True)
    print(f"warmed {len(jobs)} jobs in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
