"""Fit a linear model ``y = X @ W + b`` with ``wp.Tape`` and warp_gemm, by plain gradient descent.

The forward pass is one ``warp_gemm.gemm(X, W, b, beta=1.0)`` (the bias ``b`` of shape ``(out,)``
broadcasts over the rows) followed by a mean-squared-error kernel; ``tape.backward(loss)`` runs the
kernel's adjoint and warp_gemm's own backward (``dW = X^T @ dY``, ``db = dY`` summed over rows, both
computed by warp_gemm's tile GEMMs), and the SGD update is a Warp kernel. The data come from a known
``W_true``, ``b_true`` plus a little noise, so the fit can be checked at the end.

    python examples/05_tape_fit.py
    python examples/05_tape_fit.py --device cpu --steps 100 --samples 512 --features 32 --outputs 8
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import warp as wp

import warp_gemm
from warp_gemm.tools.explain import backend


@wp.kernel
def mse_kernel(pred: wp.array2d(dtype=wp.float32), target: wp.array2d(dtype=wp.float32), scale: wp.float32,
               loss: wp.array(dtype=wp.float32)):
    # loss = scale * sum((pred - target)^2); with scale = 1/rows it is the per-sample squared error.
    i, j = wp.tid()
    d = pred[i, j] - target[i, j]
    wp.atomic_add(loss, 0, scale * d * d)


@wp.kernel
def sgd_kernel(param: wp.array(dtype=wp.float32), grad: wp.array(dtype=wp.float32), lr: wp.float32):
    i = wp.tid()
    param[i] = param[i] - lr * grad[i]


def default_device() -> str:
    return "cuda" if wp.get_cuda_device_count() > 0 else "cpu"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="cuda, cuda:1 or cpu (default: cuda if available, else cpu)")
    p.add_argument("--steps", type=int, default=60, help="gradient-descent steps (default: %(default)s)")
    p.add_argument("--samples", type=int, default=300, help="rows of X (default: %(default)s)")
    p.add_argument("--features", type=int, default=17, help="columns of X, rows of W (default: %(default)s)")
    p.add_argument("--outputs", type=int, default=5, help="columns of W and y (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.25, help="learning rate (default: %(default)s)")
    p.add_argument("--noise", type=float, default=1e-3,
                   help="std of the noise added to y (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def sgd_step(param: wp.array, lr: float) -> None:
    """``param -= lr * param.grad`` (flattened views: one kernel for the matrix and the vector)."""
    wp.launch(sgd_kernel, dim=param.size, inputs=[param.flatten(), param.grad.flatten(), lr],
              device=param.device)


def main(argv=None) -> int:
    args = parse_args(argv)
    wp.init()
    device = args.device or default_device()
    print(f"backend: {backend(device)}")
    rng = np.random.default_rng(args.seed)
    n, fin, fout = args.samples, args.features, args.outputs

    w_true = rng.standard_normal((fin, fout)).astype(np.float32)
    b_true = rng.standard_normal(fout).astype(np.float32)
    x = rng.standard_normal((n, fin)).astype(np.float32)
    y = (x @ w_true + b_true + args.noise * rng.standard_normal((n, fout))).astype(np.float32)

    X = wp.array(x, device=device)  # data: no gradient
    Y = wp.array(y, device=device)
    W = wp.zeros((fin, fout), dtype=wp.float32, device=device, requires_grad=True)
    b = wp.zeros(fout, dtype=wp.float32, device=device, requires_grad=True)
    loss = wp.zeros(1, dtype=wp.float32, device=device, requires_grad=True)

    print(f"fitting y = X @ W + b: X {n}x{fin}, W {fin}x{fout}, b ({fout},), float32 on {device}, "
          f"{args.steps} steps of SGD with lr={args.lr}")
    tape = wp.Tape()
    losses = []
    report_every = max(1, args.steps // 10)
    for step in range(args.steps):
        loss.zero_()
        tape.reset()
        with tape:
            pred = warp_gemm.gemm(X, W, b, beta=1.0)  # records its own backward on the tape
            wp.launch(mse_kernel, dim=pred.shape, inputs=[pred, Y, 1.0 / n], outputs=[loss], device=device)
        tape.backward(loss)
        sgd_step(W, args.lr)
        sgd_step(b, args.lr)
        tape.zero()
        losses.append(float(loss.numpy()[0]))
        if step % report_every == 0 or step == args.steps - 1:
            print(f"  step {step:4d}  loss {losses[-1]:.6e}")

    w_err = float(np.linalg.norm(W.numpy() - w_true) / np.linalg.norm(w_true))
    b_err = float(np.linalg.norm(b.numpy() - b_true) / np.linalg.norm(b_true))
    drop = losses[0] / max(losses[-1], 1e-30)
    print(f"initial loss {losses[0]:.6e}  final loss {losses[-1]:.6e}  (dropped {drop:.3g}x)")
    print(f"relative error vs the true W: {w_err:.3e}, vs the true b: {b_err:.3e}")
    ok = np.isfinite(losses[-1]) and losses[-1] < losses[0]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
