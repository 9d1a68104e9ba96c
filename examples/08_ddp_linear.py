"""Train a small MLP of ``warp_gemm.torch.Linear`` layers under ``DistributedDataParallel``, checked
against the same MLP built from ``torch.nn.Linear``.

Two (``--world-size``) processes each build both models from the same seed (``warp_gemm.torch.Linear``
draws its initial weights exactly as ``torch.nn.Linear`` does, so they start identical), wrap them in
``torch.nn.parallel.DistributedDataParallel`` and train them with SGD on the same data: a fixed
regression set, each rank taking its own shard of every batch. torch.distributed averages the gradients
(gloo on the CPU; NCCL when CUDA has at least ``--world-size`` GPUs, one per rank). After every step the
averaged losses of the two models and, at the end, every parameter are compared; the program prints
the largest differences and exits non-zero if any exceeds ``--tol`` (relative to the values' scale).

    python examples/08_ddp_linear.py                      # CUDA (NCCL) with enough GPUs, else the CPU (gloo)
    python examples/08_ddp_linear.py --device cpu --steps 20 --dtype float64 --tol 1e-10
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import warp_gemm.torch as wgt

# (in, out, activation) per layer; the last layer has no activation.
LAYERS = ((16, 32, "gelu"), (32, 32, "silu"), (32, 4, None))
TORCH_ACT = {"gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU,
             "relu": nn.ReLU, "tanh": nn.Tanh}


def build(kind: str, dtype, device) -> nn.Sequential:
    """The MLP from warp_gemm.torch.Linear (``kind="warp"``) or torch.nn.Linear + activation modules."""
    mods = []
    for fin, fout, act in LAYERS:
        if kind == "warp":
            mods.append(wgt.Linear(fin, fout, activation=act, device=device, dtype=dtype))
        else:
            mods.append(nn.Linear(fin, fout, device=device, dtype=dtype))
            if act is not None:
                mods.append(TORCH_ACT[act]())
    return nn.Sequential(*mods)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world-size", type=int, default=2, help="processes (default: %(default)s)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="cpu (gloo) or cuda (NCCL, one GPU per rank); default: cuda when it has >= world-size "
                        "GPUs, else cpu")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="torch.distributed backend; auto: nccl on cuda, gloo on cpu")
    p.add_argument("--steps", type=int, default=30, help="SGD steps (default: %(default)s)")
    p.add_argument("--batch", type=int, default=24, help="global batch, split over the ranks (default: %(default)s)")
    p.add_argument("--samples", type=int, default=240, help="data set size (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (default: %(default)s)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--tol", type=float, default=None,
                   help="largest accepted relative difference (default: 1e-4 for float32, 1e-10 for float64)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.tol is None:
        args.tol = 1e-4 if args.dtype == "float32" else 1e-10
    if args.batch % args.world_size:
        p.error(f"--batch {args.batch} is not a multiple of --world-size {args.world_size}")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.device is None:
        args.device = "cuda" if args.backend != "gloo" and gpus >= args.world_size and dist.is_nccl_available() \
            else "cpu"
    if args.device == "cuda" and gpus < args.world_size:
        p.exit(2, f"{p.prog}: error: --device cuda needs {args.world_size} CUDA GPUs (one per rank); torch sees "
                  f"{gpus}: use --device cpu\n")
    if args.backend == "auto":
        args.backend = "nccl" if args.device == "cuda" else "gloo"
    if (args.backend == "nccl") != (args.device == "cuda"):
        p.error(f"--backend {args.backend} does not run on --device {args.device} (nccl: cuda, gloo: cpu)")
    return args


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-30))


def worker(rank: int, args, backend: str, port: int) -> None:
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.world_size)
    try:
        ok = train(rank, args, backend)
        dist.barrier()  # no rank tears its process group down while another still uses it
    finally:
        dist.destroy_process_group()
    # Leave without the interpreter's teardown: once in 6 loaded runs a rank died in it with SIGABRT
    # ("terminate called without an active exception", a C++ thread destroyed at exit) after a
    # successful run; the result is already decided and printed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


def train(rank: int, args, backend: str) -> bool:
    dtype = getattr(torch, args.dtype)
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)
    model_w = build("warp", dtype, device)
    torch.manual_seed(args.seed)
    model_t = build("torch", dtype, device)
    start = [_rel(p.detach(), q.detach()) for p, q in zip(model_w.parameters(), model_t.parameters())]
    ddp_kw = {"device_ids": [rank]} if device.type == "cuda" else {}
    ddp_w = nn.parallel.DistributedDataParallel(model_w, **ddp_kw)
    ddp_t = nn.parallel.DistributedDataParallel(model_t, **ddp_kw)
    opt_w = torch.optim.SGD(ddp_w.parameters(), lr=args.lr)
    opt_t = torch.optim.SGD(ddp_t.parameters(), lr=args.lr)

    g = torch.Generator().manual_seed(args.seed + 1)  # the same data on every rank
    fin, fout = LAYERS[0][0], LAYERS[-1][1]
    x_all = torch.randn(args.samples, fin, generator=g, dtype=torch.float64)
    w_true = torch.randn(fin, fout, generator=g, dtype=torch.float64)
    y_all = torch.tanh(x_all @ w_true) + 0.01 * torch.randn(args.samples, fout, generator=g, dtype=torch.float64)
    x_all, y_all = x_all.to(device, dtype), y_all.to(device, dtype)

    per_rank = args.batch // args.world_size
    worst_loss = 0.0
    first = last = None
    for step in range(args.steps):
        lo = (step * args.batch) % (args.samples - args.batch + 1) + rank * per_rank
        xb, yb = x_all[lo:lo + per_rank], y_all[lo:lo + per_rank]
        losses = []
        for ddp, opt in ((ddp_w, opt_w), (ddp_t, opt_t)):
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(ddp(xb), yb)
            loss.backward()  # DDP all-reduces (averages) the gradients here
            opt.step()
            avg = loss.detach().clone()
            dist.all_reduce(avg)
            losses.append(avg / args.world_size)
        worst_loss = max(worst_loss, _rel(losses[0], losses[1]))
        first = first if first is not None else float(losses[1])
        last = float(losses[1])

    params = [_rel(p.detach(), q.detach()) for p, q in zip(model_w.parameters(), model_t.parameters())]
    worst = max(worst_loss, max(params), max(start))
    ok = worst <= args.tol and last < first
    if rank == 0:
        from warp_gemm.tools.explain import backend as wg_backend

        print(f"warp_gemm backend: {wg_backend(str(device))}")
        print(f"backend {backend}, {args.world_size} ranks, {args.dtype}, {args.steps} steps: "
              f"loss {first:.5f} -> {last:.5f} (torch.nn.Linear model)")
        print(f"largest relative difference warp_gemm vs torch: initial params {max(start):.2e}, "
              f"losses {worst_loss:.2e}, final params {max(params):.2e} (tolerance {args.tol:.0e})")
        print("OK" if ok else ("MISMATCH" if worst > args.tol else "LOSS DID NOT DECREASE"))
    return ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    args = parse_args(argv)
    backend = args.backend
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # two ranks on a small CPU: no oversubscription
    try:
        mp.spawn(worker, args=(args, backend, _free_port()), nprocs=args.world_size, join=True)
    except mp.ProcessExitedException as e:
        print(f"a rank failed: {e}", file=sys.stderr)
        return 1
    except mp.ProcessRaisedException as e:
        print(f"a rank raised: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
