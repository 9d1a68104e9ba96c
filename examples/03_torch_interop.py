"""warp_gemm on torch tensors: zero-copy, on torch's current stream, transposed views welcome.

A linear layer ``y = x @ w.T + bias`` computed three ways with warp_gemm on torch tensors, each checked
against torch in float64:

1. ``matmul(x, w.T)``: ``w.T`` is a non-contiguous view; warp_gemm reads it in place (no copy).
2. ``gemm(x, w, bias, beta=1.0, trans_b=True)``: the bias broadcasts over the rows.
3. The same into a preallocated ``out``, on a side CUDA stream: warp_gemm launches on torch's *current*
   stream, so the work orders with the torch ops around it without any synchronization.

Results are torch tensors on the operands' device. Default dtype: float16 on CUDA, float32 on CPU.

    python examples/03_torch_interop.py
    python examples/03_torch_interop.py --device cpu --dtype float32 --batch 8 --in-features 300
"""

from __future__ import annotations

import argparse
import sys

try:
    import torch
except ImportError:  # torch is optional for warp_gemm; this example needs it
    torch = None

import warp as wp

import warp_gemm
from warp_gemm.tools.dtypes import storage_arg
from warp_gemm.tools.explain import backend
from warp_gemm.tools.tolerance import compare


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--dtype", default=None, type=storage_arg,
                   help="default: float16 on CUDA, float32 on CPU")
    p.add_argument("--batch", type=int, default=1000, help="rows of x (default: %(default)s)")
    p.add_argument("--in-features", type=int, default=1025, help="columns of x, of w (default: %(default)s)")
    p.add_argument("--out-features", type=int, default=771, help="rows of w (default: %(default)s)")
    return p.parse_args(argv)


def check(what: str, y: torch.Tensor, ref: torch.Tensor, dtype: str) -> bool:
    result = compare(y.double().cpu().numpy(), ref.cpu().numpy(), dtype)
    print(f"  {what}: {type(y).__name__} {tuple(y.shape)} {y.dtype} on {y.device}: {result}")
    return result.ok


def main(argv=None) -> int:
    args = parse_args(argv)
    if torch is None:
        print("This example needs torch: pip install torch (or pip install -e '.[torch]')")
        return 2
    wp.init()
    device = args.device or default_device()
    print(f"backend: {backend(device)}")
    on_cuda = device.startswith("cuda")
    dtype = args.dtype or ("float16" if on_cuda else "float32")
    tdt = getattr(torch, dtype)
    M, K, N = args.batch, args.in_features, args.out_features
    g = torch.Generator().manual_seed(0)
    s = K**-0.25  # unit-variance products: the scale of warp_gemm's tolerance model
    x = (torch.randn(M, K, generator=g, dtype=torch.float64) * s).to(device=device, dtype=tdt)
    w = (torch.randn(N, K, generator=g, dtype=torch.float64) * s).to(device=device, dtype=tdt)
    bias = torch.randn(N, generator=g, dtype=torch.float64).to(device=device, dtype=tdt)
    # float64 references from the same (rounded) inputs.
    xd, wd, bd = x.double(), w.double(), bias.double()
    ref = xd @ wd.T
    ref_bias = ref + bd
    print(f"x {tuple(x.shape)}, w {tuple(w.shape)}, bias {tuple(bias.shape)}; {dtype} on {device}")

    ok = True
    # 1. A transposed view is passed as is: w.T has strides (1, K) and is read without a copy.
    y = warp_gemm.matmul(x, w.T)
    ok &= check("matmul(x, w.T)", y, ref, dtype)

    # 2. BLAS-style: alpha * x @ op(w) + beta * bias, with op = transpose and the bias broadcast.
    y = warp_gemm.gemm(x, w, bias, beta=1.0, trans_b=True)
    ok &= check("gemm(x, w, bias, beta=1, trans_b=True)", y, ref_bias, dtype)

    # 3. Into a preallocated out, on whatever stream torch is using at the call.
    out = torch.empty(M, N, device=device, dtype=tdt)
    if on_cuda:
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))  # x, w, bias were made on the default stream
        with torch.cuda.stream(side):
            warp_gemm.gemm(x, w, bias, beta=1.0, trans_b=True, out=out)
            y = torch.relu(out)  # ordered after warp_gemm's kernel on `side`: no synchronize needed
        torch.cuda.current_stream(device).wait_stream(side)
    else:
        warp_gemm.gemm(x, w, bias, beta=1.0, trans_b=True, out=out)
        y = torch.relu(out)
    ok &= check("relu(gemm(..., out=out))", y, torch.relu(ref_bias), dtype)

    # For comparison: torch's own result in the same dtype has the same kind of rounding error.
    if dtype != "float16" or on_cuda:  # half matmul on CPU is slow or missing in older torch
        ok &= check("torch.nn.functional.linear (for comparison)",
                    torch.nn.functional.linear(x, w, bias), ref_bias, dtype)
    print("all results within tolerance" if ok else "SOME RESULTS OUT OF TOLERANCE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
