"""Reliability on CUDA: graph capture and replay, outputs past 2**31 elements, torch stream ordering.

All CUDA tests carry the ``gpu`` marker (skipped without a GPU). ``wp.ScopedCapture`` also records
on the CPU since Warp 1.19, so its test runs on the CPU too.

- Graph capture: after a warm-up call (kernels compiled and loaded), capture one warp_gemm call
  with ``wp.ScopedCapture`` (wp.array operands) or ``torch.cuda.graph`` (torch tensors); then, twice,
  write new data into the same input buffers, NaN-fill the output, replay, and check against float64.
- Large output: fp16 ``65536 x 32769`` (2**31 + 65536 elements, 4.3 GB) with K = 16, inside a
  NaN-filled buffer with guard regions on both sides; every element written (no NaN left), nothing
  written outside, sampled rows and columns (including the last, past 2**31) right against float64.
- Stream ordering: on a non-default torch stream, a long torch op (a GPU spin, then the write of
  ``a``) followed by warp_gemm consuming ``a`` and a torch op consuming the result; the answer is the
  product of the *new* ``a``.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import warp as wp
from conftest import DEVICES, to_f64, torch

import warp_gemm
from warp_gemm.tools.tolerance import compare, random_operands, round_to

needs_torch_cuda = pytest.mark.skipif(torch is None or not torch.cuda.is_available(),
                                      reason="torch with CUDA not available")

VARIANTS = ["nn", "trans_b", "bias", "strided_a", "batched", "fp16"]


def _problem(variant: str, rng):
    """(dtype, a, b, c): float64 operands already rounded to dtype; c is a bias for "bias", else None."""
    dtype = "float16" if variant == "fp16" else "float32"
    M, N, K = 67, 45, 70
    batch = 3 if variant == "batched" else 0
    a, b = random_operands(M, N, K, dtype, rng, batch=batch)
    c = round_to(rng.standard_normal((N,)), dtype) if variant == "bias" else None
    return dtype, a, b, c


# --- wp.ScopedCapture ---------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_wp_scoped_capture_replay(device, variant, rng):
    dtype, a, b, c = _problem(variant, rng)
    wdt = getattr(wp, dtype)
    trans_b = variant == "trans_b"
    # Persistent buffers the graph reads and writes.
    if variant == "strided_a":  # a step-sliced view: the call copies it to a temporary inside the graph
        Abig = wp.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=wdt, device=device)
        A = Abig[:, ::2]
    else:
        A = wp.zeros(a.shape, dtype=wdt, device=device)
    B = wp.zeros(b.shape[:-2] + ((b.shape[-1], b.shape[-2]) if trans_b else b.shape[-2:]), dtype=wdt, device=device)
    C = wp.zeros(c.shape, dtype=wdt, device=device) if c is not None else None
    rshape = np.matmul(a, b).shape
    D = wp.zeros(rshape, dtype=wdt, device=device)

    def load(a, b, c):
        an = a.astype(dtype)
        if variant == "strided_a":
            big = np.zeros(Abig.shape, dtype)
            big[:, ::2] = an
            Abig.assign(big)
        else:
            A.assign(an)
        B.assign(np.ascontiguousarray(np.swapaxes(b, -1, -2) if trans_b else b).astype(dtype))
        if C is not None:
            C.assign(c.astype(dtype))
        D.fill_(float("nan"))

    def call():
        if variant in ("nn", "strided_a", "batched", "fp16"):
            warp_gemm.matmul(A, B, out=D)
        else:
            warp_gemm.gemm(A, B, C, alpha=1.25, beta=-0.5 if C is not None else 0.0, trans_b=trans_b, out=D)

    def ref(a, b, c):
        r = np.matmul(a, b)
        return r if variant in ("nn", "strided_a", "batched", "fp16") else 1.25 * r + (-0.5 * c if c is not None else 0)

    load(a, b, c)
    call()  # warm-up: compiles and loads every kernel the call uses
    wp.synchronize_device(device)
    assert compare(to_f64(D), ref(a, b, c), dtype).ok

    with wp.ScopedCapture(device=device) as cap:
        call()
    gc.collect()  # temporaries made during capture must be kept alive by the graph, not by Python
    for trial in range(2):
        _, a2, b2, c2 = _problem(variant, rng)
        load(a2, b2, c2)
        wp.capture_launch(cap.graph)
        wp.synchronize_device(device)
        cmp = compare(to_f64(D), ref(a2, b2, c2), dtype)
        assert cmp.ok, f"replay {trial} ({variant}): {cmp}"


# --- torch.cuda.graph -----------------------------------------------------------------------------------
@pytest.mark.gpu
@needs_torch_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("variant", ["matmul", "gemm_bias_tt"])
def test_torch_cuda_graph_replay(dtype, variant, rng):
    tdt = getattr(torch, dtype)
    M, N, K = 129, 95, 200
    tt = variant == "gemm_bias_tt"

    def host(dt_rng):
        a, b = random_operands(M, N, K, dtype, dt_rng)
        c = round_to(dt_rng.standard_normal((N,)), dtype)
        return a, b, c

    def dev(x):
        return torch.tensor(x, dtype=torch.float64).to(tdt).cuda()

    a, b, c = host(rng)
    # The buffers the graph reads: for "tt", contiguous a.T (K, M) and b.T (N, K) read with trans_a/trans_b.
    A = dev(a.T.copy()) if tt else dev(a)
    Bm = dev(b.T.copy()) if tt else dev(b)
    C = dev(c)
    D = torch.full((M, N), float("nan"), dtype=tdt, device="cuda")

    def call():
        if tt:
            warp_gemm.gemm(A, Bm, C, alpha=0.75, beta=2.0, trans_a=True, trans_b=True, out=D)
        else:
            warp_gemm.matmul(A, Bm, out=D)

    def ref(a, b, c):
        return 0.75 * (a @ b) + 2.0 * c if tt else a @ b

    # Warm-up on a side stream (torch's recipe for graph capture).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert compare(to_f64(D), ref(a, b, c), dtype).ok

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    for trial in range(2):
        a2, b2, c2 = host(rng)
        A.copy_(dev(a2.T.copy()) if tt else dev(a2))
        Bm.copy_(dev(b2.T.copy()) if tt else dev(b2))
        C.copy_(dev(c2))
        D.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        cmp = compare(to_f64(D), ref(a2, b2, c2), dtype)
        assert cmp.ok, f"{dtype} {variant} replay {trial}: {cmp}"


# --- outputs with more than 2**31 elements ------------------------------------------------------------
@pytest.mark.gpu
@needs_torch_cuda
def test_output_past_2_31_elements(rng):
    M, N, K = 65536, 32769, 16
    assert M * N > 2**31
    guard = 1 << 20
    need = (M * N + 2 * guard) * 2 + (8 << 30)  # the output, plus room for torch.isnan's temporaries
    free, _ = torch.cuda.mem_get_info()
    if free < max(need, 20 << 30):
        pytest.skip(f"needs >= 20 GB free GPU memory, {free / 2**30:.1f} GiB free")
    a, b = random_operands(M, N, K, "float16", rng)
    A = torch.tensor(a, dtype=torch.float16, device="cuda")
    B = torch.tensor(b, dtype=torch.float16, device="cuda")
    buf = torch.full((M * N + 2 * guard,), float("nan"), dtype=torch.float16, device="cuda")
    out = buf[guard:guard + M * N].view(M, N)
    res = warp_gemm.matmul(A, B, out=out)
    torch.cuda.synchronize()
    assert res is out
    # Every element written; nothing written in the guard regions before and after.
    assert not torch.isnan(out).any().item(), f"{torch.isnan(out).sum().item()} elements never written"
    assert torch.isnan(buf[:guard]).all().item() and torch.isnan(buf[-guard:]).all().item(), "wrote outside out"
    rows = sorted({0, 1, 127, 128, 32767, 32768, 65407, 65534, 65535, *rng.integers(0, M, 24).tolist()})
    cols = sorted({0, 1, 127, 128, 16384, 32767, 32768, *rng.integers(0, N, 24).tolist()})
    got_rows = out[rows].double().cpu().numpy()
    cmp = compare(got_rows, a[rows] @ b, "float16")
    assert cmp.ok, f"sampled rows {rows}: {cmp}"
    got_cols = out[:, cols].double().cpu().numpy()
    cmp = compare(got_cols, a @ b[:, cols], "float16")
    assert cmp.ok, f"sampled cols {cols}: {cmp}"
    # The very last element (linear index 2**31 + 65535) explicitly.
    assert abs(float(out[M - 1, N - 1]) - float(a[M - 1] @ b[:, N - 1])) < 5e-3


# --- ordering on a non-default torch stream ------------------------------------------------------------
@pytest.mark.gpu
@needs_torch_cuda
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_non_default_torch_stream_ordering(dtype, rng):
    tdt = getattr(torch, dtype)
    M, N, K = 1024, 768, 512
    a, b = random_operands(M, N, K, dtype, rng)
    A = torch.zeros(M, K, dtype=tdt, device="cuda")  # stale contents: zeros
    B = torch.tensor(b, dtype=tdt, device="cuda")
    new_a = torch.tensor(a, dtype=tdt, device="cuda")
    big = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    assert s != torch.cuda.default_stream()
    with torch.cuda.stream(s):
        # A long torch op on s: a GPU-side spin, then a chain of large products, then the write of A.
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles
        x = big
        for _ in range(8):
            x = torch.tanh(x @ big) * 0.01
        A.copy_(new_a + 0 * x[:1, :1].to(tdt))  # depends on the chain, so it runs after it
        D = warp_gemm.matmul(A, B)  # must be ordered after the copy on s
        E = D.float() * 2  # a torch consumer of warp_gemm's result, also on s
    s.synchronize()
    got = D.double().cpu().numpy()
    cmp = compare(got, a @ b, dtype)
    assert cmp.ok, f"warp_gemm did not see the new a (ran out of order?): {cmp}"
    assert torch.equal(E, D.float() * 2), "torch consumer on s read the result before warp_gemm wrote it"


@pytest.mark.gpu
@needs_torch_cuda
def test_non_default_stream_out_consumer(rng):
    """warp_gemm writes ``out`` on stream s; a torch op queued right after on s reads the new values."""
    M, N, K = 2048, 2048, 1024
    a, b = random_operands(M, N, K, "float32", rng)
    A = torch.tensor(a, dtype=torch.float32, device="cuda")
    B = torch.tensor(b, dtype=torch.float32, device="cuda")
    out = torch.full((M, N), float("nan"), device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(100_000_000)
        warp_gemm.matmul(A, B, out=out)
        nan_count = torch.isnan(out).sum()
        snapshot = out.clone()
    s.synchronize()
    assert nan_count.item() == 0, "a torch op on the same stream saw unwritten (NaN) output"
    assert compare(snapshot.double().cpu().numpy(), a @ b, "float32").ok


# --- the first calls of a fresh process ---------------------------------------------------------------
_FIRST_CALLS = r"""
import sys, torch, warp_gemm
torch.manual_seed(0)
dev = "cuda"
a = torch.randn(70, 50, device=dev, dtype=torch.float32)
b = torch.randn(50, 60, device=dev, dtype=torch.float32)
bias = torch.randn(60, device=dev, dtype=torch.float32)
ref = (a.double() @ b.double())
errs = []
def check(name, r, ref):
    e = float(((r.double() - ref).abs().max() / ref.abs().max()).item())
    errs.append((name, e))
for i in range(2):  # the second call of each kind takes the fast path
    check(f"matmul{i}", warp_gemm.matmul(a, b), ref)
    out = torch.full((70, 60), float("nan"), device=dev)
    check(f"out{i}", warp_gemm.matmul(a, b, out=out), ref)
    check(f"linear{i}", warp_gemm.linear(a, b.T.contiguous(), bias, activation="relu"),
          torch.relu(ref + bias.double()))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        r = warp_gemm.matmul(a, b)
    s.synchronize()
    check(f"stream{i}", r, ref)
torch.cuda.synchronize()
print(errs)
sys.exit(0 if all(e < 1e-5 for _, e in errs) else 1)
"""


@pytest.mark.gpu
@needs_torch_cuda
def test_first_calls_in_a_fresh_process():
    """A program's very first warp_gemm call may be on torch CUDA tensors, before Warp is initialised
    (the fast path once looked up a Warp stream for torch's before any Warp call and failed there)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _FIRST_CALLS], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
