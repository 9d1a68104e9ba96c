"""The grouped Hopper kernel against the dense one on the 8-expert MoE product (8192 tokens, K 4096, N 14336, weights
(G, N, K) used as W.T), with GPU time and host time apart, and the 64-expert bf16 row beside it.

Cases per dtype: ``dense`` (warp_gemm.matmul of x @ W[0].T), ``cublas`` (torch), ``G1`` (grouped_mm, one group of
all rows), ``tG1`` (F.grouped_mm, the same), ``U`` / ``tU`` (8 uneven groups, the ladder's split), ``U/checked``
(``U`` with the fast path's entries dropped before each call: the checks, problem description and rules every call);
``--moe64``: ``E64`` / ``tE64`` / ``E64/checked``, bf16, 64 experts (6 empty), N 2048.
Every sweep times each case once, interleaved (drift cancels in the medians):

- ``call``: CUDA events around one call, then a synchronisation (the grouped suite's timer: host time before the
  launch counts);
- ``burst``: events around ``--burst`` back-to-back calls, divided by it (the launches queue up: GPU time);
- ``host``: microseconds the host spends in one call on an idle stream;
- ``MHz`` / ``W``: mean SM clock and power (NVML, sampled every 10 ms by a thread) while the case's bursts ran.

``--prof``: each case once between cudaProfilerStart / Stop (for ``ncu --profile-from-start off``).

    python benchmarks/probes/grouped_moe8_split.py --dtypes float16,bfloat16 --sweeps 12
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time


class Sampler:
    """NVML SM clock (MHz) and power (W) every 10 ms, attributed to the label set at the time."""

    def __init__(self):
        self.label = None
        self.data: dict = {}
        self.stop = False
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as e:  # noqa: BLE001 - the timings stand without it
            print("no NVML:", e)
            self.nv = None
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop and self.nv is not None:
            lab = self.label
            if lab is not None:
                mhz = self.nv.nvmlDeviceGetClockInfo(self.h, self.nv.NVML_CLOCK_SM)
                w = self.nv.nvmlDeviceGetPowerUsage(self.h) / 1000.0
                self.data.setdefault(lab, []).append((mhz, w))
            time.sleep(0.01)

    def mean(self, lab):
        v = self.data.get(lab) or [(float("nan"), float("nan"))]
        return statistics.mean(a for a, _ in v), statistics.mean(b for _, b in v)


def main(argv=None) -> int:
    import numpy as np
    import torch
    import torch.nn.functional as F

    import warp_gemm
    from warp_gemm.tools.bench.grouped import _sizes

    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--sweeps", type=int, default=12)
    ap.add_argument("--burst", type=int, default=5)
    ap.add_argument("--moe64", type=int, default=1)
    ap.add_argument("--prof", action="store_true")
    args = ap.parse_args(argv)
    G, T, K, N = 8, 8192, 4096, 14336
    uneven = _sizes(np.random.default_rng(0), G, T, 0)
    print("split U:", uneven.tolist())
    from warp_gemm.core import grouped as core_grouped

    def checked(fn):
        def call():
            core_grouped._fast_mm.clear()
            return fn()

        return call

    flops8 = 2.0 * T * K * N
    allcases = []
    for dt in args.dtypes.split(","):
        tdt = getattr(torch, dt)
        gen = torch.Generator(device="cuda").manual_seed(1)
        x = (torch.randn(T, K, device="cuda", generator=gen) * K ** -0.25).to(tdt)
        w = (torch.randn(G, N, K, device="cuda", generator=gen) * K ** -0.25).to(tdt)
        wt = w.transpose(-2, -1)
        o1 = torch.tensor([T], dtype=torch.int32, device="cuda")
        ou = torch.tensor(np.cumsum(uneven), dtype=torch.int32, device="cuda")
        cases = {
            "dense": lambda x=x, wt=wt: warp_gemm.matmul(x, wt[0]),
            "cublas": lambda x=x, wt=wt: x @ wt[0],
            "G1": lambda x=x, wt=wt, o1=o1: warp_gemm.grouped_mm(x, wt[:1], offs=o1),
            "tG1": lambda x=x, wt=wt, o1=o1: F.grouped_mm(x, wt[:1], offs=o1),
            "U": lambda x=x, wt=wt, ou=ou: warp_gemm.grouped_mm(x, wt, offs=ou),
            "tU": lambda x=x, wt=wt, ou=ou: F.grouped_mm(x, wt, offs=ou),
        }
        cases["U/checked"] = checked(cases["U"])
        ref_u = cases["tU"]().double()
        ref_1 = (x.double() @ wt[0].double())
        for name, fn in cases.items():
            out = fn().double()
            ref = ref_1 if name in ("dense", "cublas", "G1", "tG1") else ref_u
            err = float((out - ref).norm() / ref.norm())
            assert err < 1e-2, (dt, name, err)
        del ref_u, ref_1
        allcases += [(dt, name, fn, flops8) for name, fn in cases.items()]
        del x, w
    if args.moe64:
        G64, N64 = 64, 2048
        s64 = _sizes(np.random.default_rng(0), G64, T, 6)
        gen = torch.Generator(device="cuda").manual_seed(2)
        x = (torch.randn(T, K, device="cuda", generator=gen) * K ** -0.25).to(torch.bfloat16)
        w = (torch.randn(G64, N64, K, device="cuda", generator=gen) * K ** -0.25).to(torch.bfloat16)
        wt = w.transpose(-2, -1)
        o64 = torch.tensor(np.cumsum(s64), dtype=torch.int32, device="cuda")
        c64 = {"E64": lambda: warp_gemm.grouped_mm(x, wt, offs=o64), "tE64": lambda: F.grouped_mm(x, wt, offs=o64)}
        c64["E64/checked"] = checked(c64["E64"])
        ref = c64["tE64"]().double()
        for name, fn in c64.items():
            err = float((fn().double() - ref).norm() / ref.norm())
            assert err < 1e-2, ("moe64", name, err)
        del ref
        allcases += [("bfloat16", n, f, 2.0 * T * K * N64) for n, f in c64.items()]
    torch.cuda.synchronize()
    if args.prof:
        for _dt, _name, fn, _ in allcases:
            fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for dt, name, fn, _ in allcases:
            torch.cuda.nvtx.range_push(f"{dt}:{name}")
            fn()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        torch.cuda.cudart().cudaProfilerStop()
        print("profiled:", [f"{d}:{n}" for d, n, _, _ in allcases])
        return 0
    samp = Sampler()
    res = {(d, n): {"call": [], "burst": [], "host": []} for d, n, _, _ in allcases}
    for _ in range(2):
        for _d, _n, fn, _ in allcases:
            fn()
    torch.cuda.synchronize()
    for _ in range(args.sweeps):
        for dt, name, fn, _ in allcases:
            r = res[(dt, name)]
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            r["call"].append(s.elapsed_time(e))
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            r["host"].append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
            samp.label = (dt, name)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(args.burst):
                fn()
            e.record()
            e.synchronize()
            samp.label = None
            r["burst"].append(s.elapsed_time(e) / args.burst)
    samp.stop = True
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, sweeps {args.sweeps}, burst {args.burst}")
    print(f"{'dtype':<9} {'case':<10} {'call ms':>8} {'burst ms':>8} {'p20':>7} {'p80':>7} {'TFLOP/s':>8} "
          f"{'host us':>8} {'MHz':>6} {'W':>6}")
    for dt, name, _, fl in allcases:
        r = res[(dt, name)]
        b = sorted(r["burst"])
        mb = statistics.median(b)
        mhz, wat = samp.mean((dt, name))
        print(f"{dt:<9} {name:<10} {statistics.median(r['call']):>8.3f} {mb:>8.3f} {b[len(b) // 5]:>7.3f} "
              f"{b[(4 * len(b)) // 5]:>7.3f} {fl / mb / 1e9:>8.1f} {statistics.median(r['host']):>8.1f} {mhz:>6.0f} "
              f"{wat:>6.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
