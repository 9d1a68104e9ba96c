"""Times the Hopper family (warp_gemm/families/hopper) against torch.matmul (cuBLAS) in one process on an sm_90 GPU.

Modes (``python hopper_bench.py MODE [--probe PATH] [--out DIR]``):
  smoke   one small odd shape per dtype / B layout / output, float64-checked (a quick gate before timing)
  ladder  the design steps at fp16 4096^3 and 8192^3 (B = W.T, float32 output as the feasibility probe):
          the probe's kernel (``--probe``: path of tma_wgmma_probe.py), warp-specialised blocks one per tile,
          the persistent grid, without setmaxnreg, and other tiles / stage counts
  table   the family's default kernel on the issue's shapes (fp16 / bf16, B stored (K, N) and F.linear's (N, K),
          4095^3 / 4097^3 on padded rows and with the padding copy timed, K-heavy and short-M shapes)
Inputs are random, scaled by K^-1/4; every timed result is checked against a float64 product first (relative
Frobenius error printed); times are medians of triton.testing.do_bench; JSON rows go to ``--out`` (default $OUT).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import torch
import warp as wp
from triton.testing import do_bench

from warp_gemm import _compat
from warp_gemm.families import hopper as H

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
ROWS: list[dict] = []


def _ld8(n: int) -> int:
    return -(-n // 8) * 8


def operands(M, N, K, dt, layout_b, pad=False, batch=1):
    """A (batch, M, K) and B stored (batch, K, N) (layout N) or (batch, N, K) (T), as torch views whose rows are
    padded to 8 elements when ``pad``; plus the logical B (batch, K, N) for references."""
    s = K ** -0.25

    def mat(r, c):
        ld = _ld8(c) if pad else c
        t = torch.empty(batch, r, ld, device="cuda", dtype=TORCH[dt])
        t[:, :, :c] = torch.randn(batch, r, c, device="cuda") * s
        return t[:, :, :c]

    a = mat(M, K)
    b_st = mat(K, N) if layout_b == "N" else mat(N, K)
    b = b_st if layout_b == "N" else b_st.transpose(1, 2)
    return a, b_st, b


def family_fn(spec, a, b_st, out, alpha=1.0, grid=None, group_m=8):
    """A callable that launches ``spec`` on torch tensors (recorded launches on torch's current stream)."""
    wa = lambda t: wp.from_torch(t, dtype={torch.bfloat16: wp.bfloat16}.get(t.dtype))
    M, K = a.shape[1], a.shape[2]
    N = out.shape[2]
    stream = wp.stream_from_torch(torch.cuda.current_stream())
    launches = H.launch_args(spec, wa(a), wa(b_st), None, wa(out), alpha, 0.0, M, N, K, out.shape[0], a.shape[0],
                             b_st.shape[0], 1, grid=grid, group_m=group_m)
    dev = wp.device_from_torch(out.device)
    cmds = [wp.launch_tiled(k, dim=list(dim), inputs=inputs, block_dim=bd, device=dev, stream=stream,
                            record_cmd=True) for k, dim, inputs, bd in launches]

    def go():
        for c in cmds:
            c.launch()
    return go


def rel_err(out, a, b):
    ref = torch.matmul(a.double(), b.double())
    return ((out.double() - ref).norm() / ref.norm()).item()


def bench(fn, warmup=25, rep=120):
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def row(**r):
    ROWS.append(r)
    print(json.dumps(r), flush=True)


def time_spec(name, spec, M, N, K, layout_b, grid=None, pad=False, stage_copy=False, batch=1, cublas=True):
    """Check and time ``spec`` at (M, N, K); cuBLAS on contiguous operands of the same shape in the same process."""
    dt = spec.in_dtype
    a, b_st, b = operands(M, N, K, dt, layout_b, pad=pad, batch=batch)
    out = torch.full((batch, M, N), float("nan"), device="cuda", dtype=TORCH[spec.out_dtype])
    t0 = time.time()
    go = family_fn(spec, a, b_st, out, grid=grid)
    go()
    torch.cuda.synchronize()
    first = time.time() - t0
    err = rel_err(out, a, b)
    nan = int(torch.isnan(out).sum().item())
    fn = go
    if stage_copy:  # the caller's contiguous operands copied into the padded ones, then the kernel
        ac, bc = a.contiguous(), b_st.contiguous()

        def fn():
            a.copy_(ac)
            b_st.copy_(bc)
            go()
    ms = bench(fn)
    flops = 2.0 * M * N * K * batch
    r = {"name": name, "spec": spec.key, "shape": f"{batch}x{M}x{N}x{K}" if batch > 1 else f"{M}x{N}x{K}",
             "layout": "N" + layout_b, "err": float(f"{err:.2e}"), "nan": nan, "first_s": round(first, 2), "ms": round(ms, 4),
             "tflops": round(flops / ms / 1e9, 1)}
    if cublas:  # 2-D operands for one batch entry (torch.mm / F.linear), as callers pass them
        ac, bc = a.contiguous(), b_st.contiguous()
        if batch == 1:
            ac, bc = ac[0], bc[0]
        if layout_b == "N":
            cb = bench(lambda: torch.matmul(ac, bc))
        elif batch == 1:
            cb = bench(lambda: torch.nn.functional.linear(ac, bc))
        else:
            cb = bench(lambda: torch.matmul(ac, bc.transpose(-1, -2)))
        r.update(cublas_ms=round(cb, 4), cublas=round(flops / cb / 1e9, 1), ratio=round(cb / ms, 3))
    row(**r)
    return r


def smoke():
    for dt in ("float16", "bfloat16"):
        for lb in ("T", "N"):
            for ot in (dt, "float32"):
                spec = H.HopperSpec(in_dtype=dt, out_dtype=ot, layout_b=lb)
                a, b_st, b = operands(1023, 1025, 1027, dt, lb, pad=True, batch=2)
                out = torch.full((2, 1023, 1025), float("nan"), device="cuda", dtype=TORCH[ot])
                family_fn(spec, a, b_st, out)()
                torch.cuda.synchronize()
                row(name="smoke", spec=spec.key, err=float(f"{rel_err(out, a, b):.2e}"),
                    nan=int(torch.isnan(out).sum().item()))


def ladder(probe_path):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    f32 = {"in_dtype": "float16", "out_dtype": "float32", "layout_b": "T"}
    for M in (4096, 8192):
        if probe_path:
            spec_ = importlib.util.spec_from_file_location("tma_wgmma_probe", probe_path)
            probe = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(probe)
            old = wp.config.cuda_arch_suffix
            wp.config.cuda_arch_suffix = "a"
            try:  # 2 warpgroups, 128x256, 4 stages, grouped order 8: the probe's best at 4096^3
                r = probe.run(2, 1, 256, 4, M, M, M, group=8)
            finally:
                wp.config.cuda_arch_suffix = old
            row(name="1 probe: TMA+wgmma, block barrier per K step", spec=r["variant"], shape=r["shape"],
                err=r["err"], tflops=r["tflops"], cublas=r["cublas"], ratio=round(r["tflops"] / r["cublas"], 3))
        base = H.HopperSpec(**f32)
        tiles = (M // 128) * (M // 256)
        time_spec("2 warp-specialised + mbarrier pipeline, one block per tile", base, M, M, M, "T", grid=tiles)
        time_spec("3 + persistent grid (one block per SM), grouped order", base, M, M, M, "T", grid=sms)
        time_spec("3 without setmaxnreg", H.HopperSpec(setmaxnreg=False, **f32), M, M, M, "T")
        time_spec("3 with 128x256, 3 stages", H.HopperSpec(stages=3, **f32), M, M, M, "T")
        time_spec("3 with 128x128, 6 stages", H.HopperSpec(bn=128, stages=6, **f32), M, M, M, "T")
        time_spec("3 with 256x128, 4 stages", H.HopperSpec(bm=256, bn=128, **f32), M, M, M, "T")
        time_spec("3 with fp16 output", H.HopperSpec(in_dtype="float16", out_dtype="float16", layout_b="T"),
                  M, M, M, "T")


def table():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for dt in ("float16", "bfloat16"):
        for M in (4096, 8192):
            for lb in ("N", "T"):
                spec = H.default_spec(dt, dt, lb, M, M, M, 1, sms)
                time_spec(f"{dt} {M}^3", spec, M, M, M, lb)
    for M in (4095, 4097):
        spec = H.default_spec("float16", "float16", "N", M, M, M, 1, sms)
        time_spec(f"float16 {M}^3 padded rows", spec, M, M, M, "N", pad=True)
        time_spec(f"float16 {M}^3 + padding copy", spec, M, M, M, "N", pad=True, stage_copy=True, cublas=False)
    for dt, (M, N, K), lb in (("float16", (1024, 1024, 16384), "N"), ("bfloat16", (333, 4096, 4096), "T"),
                              ("float16", (333, 4096, 4096), "T")):
        spec = H.default_spec(dt, dt, lb, M, N, K, 1, sms)
        time_spec(f"{dt} {M}x{N}x{K} default", spec, M, N, K, lb)
        for over in ({"bm": 128, "bn": 256, "stages": 4}, {"bm": 128, "bn": 128, "stages": 6},
                     {"bm": 128, "bn": 128, "stages": 4, "consumers": 1}):
            alt = H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **over)
            if alt != spec:
                time_spec(f"{dt} {M}x{N}x{K} alt", alt, M, N, K, lb)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["smoke", "ladder", "table"])
    p.add_argument("--probe", default="")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    _compat.init()
    torch.manual_seed(0)
    dev = wp.get_device("cuda:0")
    print(f"# {torch.cuda.get_device_name(0)}, sm_{dev.arch}, {dev.sm_count} SMs; warp-lang {wp.config.version}, "
          f"torch {torch.__version__} (CUDA {torch.version.cuda})", flush=True)
    try:
        {"smoke": smoke, "ladder": lambda: ladder(args.probe), "table": table}[args.mode]()
    finally:
        with open(os.path.join(args.out, f"hopper_{args.mode}.json"), "w") as f:
            json.dump(ROWS, f, indent=1)
    print(f"\n{'name':58s} {'spec':42s} {'shape':16s} {'err':>8s} {'TFLOP/s':>8s} {'cuBLAS':>7s} {'ratio':>6s}")
    for r in ROWS:
        print(f"{r.get('name', '')[:58]:58s} {r.get('spec', '')[:42]:42s} {r.get('shape', ''):16s} "
              f"{r.get('err', ''):>8} {r.get('tflops', ''):>8} {r.get('cublas', ''):>7} {r.get('ratio', ''):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
