"""The launcher's special paths on the CPU backend: split-K and zero-padded tile-multiple copies.

On CUDA these are chosen automatically (split-K when the output tiles cannot fill the GPU, padding
for large problems with misaligned rows); here they are forced so CI exercises their kernels.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DTYPES, make, nan_like, to_f64

import warp_gemm
from warp_gemm import Config, api
from warp_gemm.tolerance import compare, random_operands, round_to


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("split", [2, 3, 7])
@pytest.mark.parametrize("with_c", [False, True])
def test_split_k(dtype, split, with_c, rng):
    M, N, K = 37, 45, 7 * 32 + 5
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal(N), dtype)
    out = nan_like("warp", (M, N), dtype, "cpu")
    cfg = Config(32, 32, 32, 1, 8, split)
    args = (make(a, dtype, "warp", "cpu"), make(b, dtype, "warp", "cpu"))
    if with_c:
        warp_gemm.gemm(*args, make(c, dtype, "warp", "cpu"), alpha=1.25, beta=-0.5, out=out, config=cfg)
        ref = 1.25 * a @ b - 0.5 * c
    else:
        warp_gemm.matmul(*args, out=out, config=cfg)
        ref = a @ b
    cmp = compare(to_f64(out), ref, dtype)
    assert cmp.ok, f"split {split} {dtype}: {cmp}"


def test_split_k_batched_transposed(rng):
    a, b = random_operands(19, 23, 150, "float32", rng, batch=3)
    A = make(np.ascontiguousarray(np.swapaxes(a, 1, 2)), "float32", "warp", "cpu")
    res = warp_gemm.gemm(A, make(b, "float32", "warp", "cpu"), trans_a=True, config=Config(32, 32, 32, 1, 8, 4))
    assert compare(to_f64(res), np.matmul(a, b), "float32").ok


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("split", [1, 3])
def test_padded_copies(dtype, layout, split, rng, monkeypatch):
    monkeypatch.setattr(api, "PAD_ON_CPU", True)
    monkeypatch.setattr(api, "PAD_MIN_WORK", 1)
    M, N, K = 45, 37, 61  # odd leading dimensions: rows not 16-byte aligned
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal((M, N)), dtype)
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(a.T) if ta else a, dtype, "numpy", "cpu")
    B = make(np.ascontiguousarray(b.T) if tb else b, dtype, "numpy", "cpu")
    out = nan_like("numpy", (M, N), dtype, "cpu")
    warp_gemm.gemm(A, B, make(c, dtype, "numpy", "cpu"), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb, out=out,
                   config=Config(32, 32, 32, 1, 8, split))
    cmp = compare(out, 0.5 * a @ b + 2.0 * c, dtype)
    assert cmp.ok, f"{dtype} {layout}: {cmp}"
