"""The pipelined family's peeled edges (core/plan.py ``_peel``): a side a little over a multiple of the
tile runs as the pipelined kernel over the core plus the GEMV (one wide) or skinny family over the last
rows or columns, on views of the same (possibly staged) operands. The time model's decisions (pure arithmetic), the whole call path on the CPU backend
(``Options.peel_on_cpu``: the CPU twin's 32x32 tiles) against float64 with NaN-prefilled outputs, and on
CUDA a shape the model peels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import set_options
from conftest import make, nan_like, to_f64

import warp_gemm
from warp_gemm import _compat
from warp_gemm.families.composite import peel as plan_mod
from warp_gemm.families import pipelined
from warp_gemm.tools.tolerance import compare, random_operands, round_to

pytestmark = pytest.mark.skipif(not pipelined.has_native_tile_args(),
                                reason="the pipelined family needs Warp 1.19-class tiles")


def _stored(a, b, layout: str, dtype: str, device: str):
    """A and B as Warp arrays stored for ``layout`` ("nn", "tn", ...: a "t" stores the transpose), and the
    gemm's trans_a / trans_b."""
    ta, tb = layout[0] == "t", layout[1] == "t"
    A = make(np.ascontiguousarray(np.swapaxes(a, -1, -2)) if ta else a, dtype, "warp", device)
    B = make(np.ascontiguousarray(np.swapaxes(b, -1, -2)) if tb else b, dtype, "warp", device)
    return A, B, ta, tb


def _spec(M, N, K):
    return pipelined.default_spec("float16", M=M, N=N, K=K)


@pytest.mark.parametrize("M,N,K,rows,cols,pays", [
    (4097, 4097, 4097, 1, 0, True),  # 33 x 32 blocks: 8 waves, like 4096^3; 33 x 33: 9
    (4097, 4097, 4097, 0, 1, True),
    (4097, 4097, 4097, 1, 1, True),  # also pays, by less (two GEMVs)
    (2049, 2049, 1024, 1, 1, True),  # 96x128 tiles, 3 waves -> 128x128, 2 waves
    (2049, 2049, 1024, 1, 0, False),  # 96-row tiles stay: nothing saved
    (2049, 2049, 64, 1, 1, False),  # one K step: the GEMVs' launches cost more than the wave saved
    (4097, 4096, 4096, 1, 0, False),  # 33 x 32 = 1056 blocks is 8 waves already
    (1025, 1025, 1025, 1, 1, False),  # the small-problem configuration (128x64): not modelled
    (4099, 4099, 4099, 3, 0, True),  # three rows (skinny): 8 waves against 9
    (4104, 4104, 4104, 0, 8, True),
    (2051, 2051, 1024, 3, 3, False),
])
def test_peel_time_model(M, N, K, rows, cols, pays):
    t = plan_mod.peel_time(_spec(M, N, K), _spec(M - rows, N - cols, K), M, N, K, 1, rows, cols, 2, 132)
    assert (t is not None) == pays, t


def test_peel_model_prefers_one_gemv_at_4097():
    t1 = plan_mod.peel_time(_spec(4097, 4097, 4097), _spec(4096, 4097, 4097), 4097, 4097, 4097, 1, 1, 0, 2, 132)
    t2 = plan_mod.peel_time(_spec(4097, 4097, 4097), _spec(4096, 4096, 4097), 4097, 4097, 4097, 1, 1, 1, 2, 132)
    assert t1 < t2


# (M, N, K, batch, expected (rows, cols) peeled): CPU twin tiles are 32x32; one wide: the GEMV family, else skinny
CASES = {
    "both": (65, 33, 40, 2, (1, 1)),
    "rows": (33, 48, 40, 0, (1, 0)),
    "cols": (48, 97, 24, 3, (0, 1)),
    "both-odd-k": (33, 65, 37, 2, (1, 1)),  # K odd: A and B staged to 16-byte rows first
    "wide": (36, 69, 40, 2, (4, 5)),
    "wide-odd-k": (40, 34, 37, 0, (8, 2)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
@pytest.mark.parametrize("bias", ["none", "row", "full"])
def test_peeled_through_the_api(case, dtype, layout, bias, rng, planned):
    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    M, N, K, batch, want = CASES[case]
    a, b = random_operands(M, N, K, dtype, rng, batch=batch)
    if batch:
        b = b[:1]  # B broadcasts over the batch
    A, B, ta, tb = _stored(a, b, layout, dtype, "cpu")
    out = nan_like("warp", (batch, M, N) if batch else (M, N), dtype, "cpu")
    ref = 0.5 * np.matmul(a, b)
    c = None
    if bias != "none":
        c = round_to(rng.standard_normal(N if bias == "row" else ((batch, M, N) if batch else (M, N))), dtype)
        ref = ref + 2.0 * c
        c = make(c, dtype, "warp", "cpu")
    with warp_gemm.options(cpu_backend="tiles", family="pipelined", peel_on_cpu=True):
        warp_gemm.gemm(A, B, c, alpha=0.5, beta=2.0 if c is not None else 0.0, trans_a=ta, trans_b=tb, out=out)
    assert [(p.family, p.peel) for p in planned] == [("pipelined", want)]
    cmp = compare(to_f64(out), ref, dtype)
    assert cmp.ok, f"{case} {dtype} {layout} {bias}: {cmp}"


def test_no_peel_without_the_option(rng, planned):
    a, b = random_operands(65, 33, 40, "float32", rng)
    out = nan_like("warp", (65, 33), "float32", "cpu")
    with warp_gemm.options(cpu_backend="tiles", family="pipelined"):
        warp_gemm.matmul(make(a, "float32", "warp", "cpu"), make(b, "float32", "warp", "cpu"), out=out)
    assert planned[-1].peel == (0, 0)
    assert compare(to_f64(out), a @ b, "float32").ok


def test_no_peel_with_a_fused_activation(rng, planned):
    a, b = random_operands(65, 33, 40, "float32", rng)
    with warp_gemm.options(cpu_backend="tiles", family="pipelined", peel_on_cpu=True):
        out = warp_gemm.linear(make(a, "float32", "warp", "cpu"),
                               make(np.ascontiguousarray(b.T), "float32", "warp", "cpu"), activation="relu")
    assert planned[-1].peel == (0, 0) and planned[-1].fused_activation
    assert compare(to_f64(out), np.maximum(a @ b, 0.0), "float32").ok


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,layout,M,N,K,want", [
    ("float16", "nn", 4097, 4097, 1601, (1, 0)),  # odd K: A and B staged; the row (A stored (M, K))
    ("bfloat16", "tt", 4097, 4097, 1601, (0, 1)),  # the column (B stored (N, K))
    ("float16", "nt", 2049, 2049, 1024, (1, 1)),  # both: 128x128 core, 2 waves, against 3 of 96x128 tiles
    ("float16", "tn", 4097, 4097, 1601, (0, 0)),  # both vectors strided: not peeled
    ("float16", "nn", 4099, 4099, 1601, (3, 0)),  # three rows: the skinny family
    ("bfloat16", "nt", 4104, 4104, 4104, (8, 0)),  # 16-byte rows (not staged), eight rows
], ids=str)
def test_peeled_on_cuda(dtype, layout, M, N, K, want, rng, planned, monkeypatch):
    """On CUDA the time model peels these (H100's 132 SMs; another GPU may differ: then only correctness
    is checked); each product against float64, NaN-prefilled, with C. The pipelined family's plan, as on GPUs
    without the Hopper family (which takes these products on sm_90)."""
    import warp as wp

    set_options(monkeypatch, hopper=False)

    if dtype == "bfloat16" and not _compat.HAS_BF16:
        pytest.skip("no bfloat16 in this Warp")
    a, b = random_operands(M, N, K, dtype, rng)
    c = round_to(rng.standard_normal((M, N)), dtype)
    A, B, ta, tb = _stored(a, b, layout, dtype, "cuda")
    out = nan_like("warp", (M, N), dtype, "cuda")
    warp_gemm.gemm(A, B, make(c, dtype, "warp", "cuda"), alpha=0.5, beta=2.0, trans_a=ta, trans_b=tb, out=out)
    assert planned[-1].family == "pipelined"
    if wp.get_device("cuda").sm_count == 132:
        assert planned[-1].peel == want, (M, N, K, layout, planned[-1].peel)
    cmp = compare(to_f64(out), 0.5 * (a @ b) + 2.0 * c, dtype)
    assert cmp.ok, f"{M}x{N}x{K} {dtype} {layout}: {cmp}"
