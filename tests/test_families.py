"""Every kernel family through the public call path (planner -> executor) on the CPU backend, forced with
``warp_gemm.options(family=...)``: the plan must name the family asked for (no silent fallback), and the
result must match float64 -- odd sizes, both layouts, batch broadcast, a broadcast bias (C written into
the output first) and a full C read in place, NaN-prefilled outputs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make, nan_like, to_f64

import warp_gemm
from warp_gemm.tools.tolerance import compare, random_operands, round_to

CASES = {  # id -> (family, (M, N, K, batch)): shapes the family takes
    "small": ("small", (19, 31, 40, 3)),
    "skinny-m": ("skinny", (3, 70, 90, 0)),
    "skinny-n": ("skinny", (70, 3, 33, 2)),
    "gemv-m": ("gemv", (1, 70, 90, 0)),
    "gemv-n": ("gemv", (70, 1, 33, 2)),
    "splitpipe": ("splitpipe", (6, 40, 512, 0)),
    "pipelined": ("pipelined", (64, 48, 72, 2)),
    "pipelined-staged": ("pipelined", (45, 37, 61, 2)),  # odd rows: A and B staged to 16-byte rows
}




@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("bias", ["row", "full"])
def test_family_through_the_api(case, dtype, layout, bias, rng, planned):
    family, (M, N, K, batch) = CASES[case]
    if family == "splitpipe" and dtype == "float64":
        pytest.skip("the K-slice plan's 16x128x128 float64 stages need 304 KB of shared memory: not planned")
    if family == "splitpipe" and layout == "tn":
        pytest.skip("op(A) stored transposed has rows of M = 6 elements: not 16-byte aligned, not planned")
    a, b = random_operands(M, N, K, dtype, rng, batch=batch)
    if batch:
        b = b[:1]  # B broadcasts over the batch
    c = round_to(rng.standard_normal(N if bias == "row" else ((batch, M, N) if batch else (M, N))), dtype)
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a, dtype, "warp", "cpu")
    B = make(np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b, dtype, "warp", "cpu")
    out = nan_like("warp", (batch, M, N) if batch else (M, N), dtype, "cpu")
    with warp_gemm.options(cpu_backend="tiles", family=family):
        warp_gemm.gemm(A, B, make(c, dtype, "warp", "cpu"), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb, out=out)
    families = [p.family for p in planned]  # (the planned fixture: conftest)
    assert families == [family], f"planned {families}, asked for {family}"
    cmp = compare(to_f64(out), 0.5 * np.matmul(a, b) + 2.0 * c, dtype)
    assert cmp.ok, f"{family} {dtype} {layout} {bias}: {cmp}"
