"""Times the Hopper family (warp_gemm/families/hopper) against torch.matmul (cuBLAS) in one process on an sm_90 GPU.

Modes (``python hopper_bench.py MODE [--probe PATH] [--out DIR]``):
  smoke   one small odd shape per dtype / B layout / output, float64-checked (a quick gate before timing)
  ladder  the design steps at fp16 4096^3 and 8192^3 (B = W.T, float32 output as the feasibility probe):
          the probe's kernel (``--probe``: path of tma_wgmma_probe.py), warp-specialised blocks one per tile,
          the persistent grid, without setmaxnreg, and other tiles / stage counts
  table   the family's default kernel on the issue's shapes (fp16 / bf16, B stored (K, N) and F.linear's (N, K),
          4095^3 / 4097^3 on padded rows and with the padding copy timed, K-heavy and short-M shapes)
  split   split-K and tile variants of the kernel (launch_args, workspace and finishing pass included) on the
          K-heavy, short-M, medium and 4097^3 shapes
  planner the public call (warp_gemm.matmul on Warp views, out preallocated, Warp on torch's stream) as planned,
          with the Hopper family forced and with it off (the pipelined family), on the threshold shapes
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
    """A callable that launches ``spec`` on torch tensors (recorded launches on torch's current stream; split-K
    specs with a float32 workspace and the finishing pass)."""
    wa = lambda t: wp.from_torch(t, dtype={torch.bfloat16: wp.bfloat16}.get(t.dtype))
    M, K = a.shape[1], a.shape[2]
    N = out.shape[2]
    stream = wp.stream_from_torch(torch.cuda.current_stream())
    ws = None
    if spec.splits > 1:
        ws = wp.from_torch(torch.full((spec.splits * out.shape[0], M, N), float("nan"), device=out.device))
    launches = H.launch_args(spec, wa(a), wa(b_st), None, wa(out), alpha, 0.0, M, N, K, out.shape[0], a.shape[0],
                             b_st.shape[0], 1, grid=grid, group_m=group_m, workspace=ws)
    dev = wp.device_from_torch(out.device)
    cmds = [wp.launch(k, dim=list(dim), inputs=inputs, device=dev, stream=stream, record_cmd=True) if bd is None
            else wp.launch_tiled(k, dim=list(dim), inputs=inputs, block_dim=bd, device=dev, stream=stream,
                                 record_cmd=True) for k, dim, inputs, bd in launches]

    def go(keep=ws):  # the workspace lives as long as the launches that write it
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


_CUBLAS: dict = {}


def cublas_tflops(a, b_st, layout_b, batch, flops):
    """cuBLAS (torch.matmul / F.linear) on contiguous 2-D operands of the same shape (once per shape and dtype)."""
    key = (tuple(a.shape), tuple(b_st.shape), a.dtype, layout_b)
    if key not in _CUBLAS:
        ac, bc = a.contiguous(), b_st.contiguous()
        if batch == 1:
            ac, bc = ac[0], bc[0]
        if layout_b == "N":
            cb = bench(lambda: torch.matmul(ac, bc))
        elif batch == 1:
            cb = bench(lambda: torch.nn.functional.linear(ac, bc))
        else:
            cb = bench(lambda: torch.matmul(ac, bc.transpose(-1, -2)))
        _CUBLAS[key] = cb
    cb = _CUBLAS[key]
    return cb, flops / cb / 1e9


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
        cb, ct = cublas_tflops(a, b_st, layout_b, batch, flops)
        r.update(cublas_ms=round(cb, 4), cublas=round(ct, 1), ratio=round(cb / ms, 3))
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


def split():
    """Split-K and tile variants on torch operands (rows padded to 8 elements where K or N is odd, as staged)."""
    f = lambda dt, lb, **o: H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **o)
    t256, t128 = {"bm": 128, "bn": 256, "stages": 4}, {"bm": 128, "bn": 128, "stages": 6}
    cases = [  # (dtype, M, N, K, layout_b, [(tiles, splits)])
        ("float16", 1024, 1024, 16384, "N", [(t256, 4), (t128, 2), (t128, 1), (t128, 4)]),
        ("float16", 128, 128, 65536, "N", [(t128, 128), (t128, 64), (t128, 32), (t128, 1)]),
        ("float16", 1024, 1024, 4096, "N", [(t256, 4), (t128, 2), (t128, 1)]),
        ("bfloat16", 333, 4096, 4096, "T", [(t256, 2), (t128, 1)]),
        ("float16", 4097, 4097, 4097, "N", [(t128, 1), (t256, 1)]),
        ("float16", 2048, 2048, 2048, "N", [(t256, 1), (t128, 1)]),
        ("float16", 1000, 1000, 1000, "N", [(t128, 2), (t128, 1)]),
        ("float16", 1024, 1024, 1024, "N", [(t128, 2), (t128, 1)]),
        ("float16", 4096, 4096, 4096, "N", [(t256, 1)]),
    ]
    for dt, M, N, K, lb, variants in cases:
        for tiles, s in variants:
            spec = f(dt, lb, splits=H.k_ranges(K, s)[0], **tiles)
            try:
                time_spec(f"{dt} {M}x{N}x{K} N{lb}", spec, M, N, K, lb, pad=(K % 8 or N % 8) != 0)
            except Exception as e:  # noqa: BLE001 -- one failing variant must not hide the others
                row(name=f"{dt} {M}x{N}x{K} N{lb}", spec=spec.key, error=repr(e)[:300])


def planner():
    """The public call as planned (default), with the Hopper family forced (``family="hopper"``) and off
    (``hopper=False``), against cuBLAS on the same torch operands; each result checked against float64."""
    import warp_gemm
    from warp_gemm.core import execute
    from warp_gemm.core.options import override

    planned = []
    make_plan = execute.make_plan

    def spy(*args, **kw):  # the family (and spec) each first call plans
        plan = make_plan(*args, **kw)
        fs = plan.family_spec
        planned.append(f"{plan.family}:{getattr(fs, 'key', '')}")
        return plan

    execute.make_plan = spy
    wp.set_stream(wp.stream_from_torch(torch.cuda.current_stream()))
    shapes = [("float16", 1000, 1000, 1000, "N"), ("float16", 1024, 1024, 1024, "N"), ("float16", 512, 512, 512, "N"),
              ("float16", 2048, 2048, 1024, "N"), ("bfloat16", 333, 4096, 4096, "T"), ("float16", 128, 128, 65536, "N"),
              ("float16", 1024, 1024, 16384, "N"), ("float16", 1024, 1024, 4096, "N"), ("float16", 2048, 2048, 2048, "N"),
              ("float16", 4097, 4097, 4097, "N"), ("bfloat16", 4097, 4097, 4097, "N"), ("float16", 4095, 4095, 4095, "N"),
              ("float16", 4096, 4096, 4096, "N"), ("bfloat16", 4096, 4096, 4096, "N"),
              ("float16", 16, 8192, 8192, "N")]
    for dt, M, N, K, lb in shapes:
        a, b_st, b = operands(M, N, K, dt, lb)
        a2, b2 = a[0].contiguous(), b[0]  # b2: (K, N), a transposed view of W for layout T
        wa = lambda t: wp.from_torch(t, dtype={torch.bfloat16: wp.bfloat16}.get(t.dtype))
        A, B = wa(a2), wa(b2)
        flops = 2.0 * M * N * K
        ref = torch.matmul(a2.double(), b2.double())
        cb, ct = cublas_tflops(a, b_st, lb, 1, flops)
        r = {"name": "planner", "shape": f"{M}x{N}x{K}", "dtype": dt, "layout": "N" + lb, "cublas": round(ct, 1)}
        for mode, opts in (("default", {}), ("hopper", {"family": "hopper"}), ("off", {"hopper": False})):
            out = torch.full((M, N), float("nan"), device="cuda", dtype=TORCH[dt])
            O = wa(out)
            try:
                with override(**opts):
                    planned.clear()
                    t0 = time.time()
                    warp_gemm.matmul(A, B, out=O)
                    torch.cuda.synchronize()
                    first = time.time() - t0
                    err = ((out.double() - ref).norm() / ref.norm()).item()
                    nan = int(torch.isnan(out).sum().item())
                    ms = bench(lambda A=A, B=B, O=O: warp_gemm.matmul(A, B, out=O))
                r.update({f"{mode}_plan": ",".join(planned), f"{mode}_tflops": round(flops / ms / 1e9, 1),
                          f"{mode}_err": float(f"{err:.2e}"), f"{mode}_nan": nan, f"{mode}_first_s": round(first, 2),
                          f"{mode}_ratio": round(cb / ms, 3)})
            except Exception as e:  # noqa: BLE001 -- one failing mode must not hide the others
                r[f"{mode}_error"] = repr(e)[:300]
        row(**r)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["smoke", "ladder", "table", "split", "planner"])
    p.add_argument("--probe", default="")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    _compat.init()
    torch.manual_seed(0)
    dev = wp.get_device("cuda:0")
    print(f"# {torch.cuda.get_device_name(0)}, sm_{dev.arch}, {dev.sm_count} SMs; warp-lang {wp.config.version}, "
          f"torch {torch.__version__} (CUDA {torch.version.cuda})", flush=True)
    try:
        {"smoke": smoke, "ladder": lambda: ladder(args.probe), "table": table, "split": split,
         "planner": planner}[args.mode]()
    finally:
        with open(os.path.join(args.out, f"hopper_{args.mode}.json"), "w") as f:
            json.dump(ROWS, f, indent=1)
    if args.mode == "planner":
        print(f"\n{'shape':18s} {'dtype':9s} {'cuBLAS':>7s} " + " ".join(f"{m:>16s}" for m in ("default", "hopper", "off")))
        for r in ROWS:
            cells = [f"{r.get(m + '_tflops', 'ERR')!s:>7} {r.get(m + '_ratio', '')!s:>7}  " for m in ("default", "hopper", "off")]
            print(f"{r['shape']:18s} {r['dtype'] + ' N' + r['layout'][1]:9s} {r['cublas']:>7} " + " ".join(cells))
            print("    " + " | ".join(f"{m}: {r.get(m + '_plan', r.get(m + '_error', ''))}" for m in ("default", "hopper", "off")))
        return 0
    print(f"\n{'name':58s} {'spec':42s} {'shape':16s} {'err':>8s} {'TFLOP/s':>8s} {'cuBLAS':>7s} {'ratio':>6s}")
    for r in ROWS:
        print(f"{r.get('name', '')[:58]:58s} {r.get('spec', '')[:42]:42s} {r.get('shape', ''):16s} "
              f"{r.get('err', ''):>8} {r.get('tflops', ''):>8} {r.get('cublas', ''):>7} {r.get('ratio', ''):>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
