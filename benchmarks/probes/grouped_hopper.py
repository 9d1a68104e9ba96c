"""Purpose: which tiles the Hopper grouped kernel should take for the grouped suite's MoE rows, against
F.grouped_mm and the mma.sync grouped kernel in the same process (CUDA-event medians; every variant checked on a
sample of rows against float64 first).

    python benchmarks/probes/grouped_hopper.py                 # every MoE row, every variant
    python benchmarks/probes/grouped_hopper.py --rows moe64 --reps 30
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT)]

#: (bm, bn, stages) of the Hopper grouped kernel
VARIANTS = [(128, 256, 4), (128, 128, 6), (256, 128, 3)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="moe8,moe64,moe8_fp16,moe64_fp16,moe64_tf32,moe128")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    import numpy as np
    import torch
    import torch.nn.functional as F

    from warp_gemm.core import grouped as core
    from warp_gemm.families.grouped import rules
    from warp_gemm.families.grouped._deps import HopperSpec
    from warp_gemm.families.grouped.spec import problem
    from warp_gemm.tools.bench.grouped import ROWS, _sizes, _time

    print(f"gpu={torch.cuda.get_device_name()} torch={torch.__version__}", flush=True)
    for row in (r for r in ROWS if r.name in args.rows.split(",")):
        tf32 = row.dtype == "tf32"
        tdt = torch.float32 if tf32 else getattr(torch, row.dtype)
        rng = np.random.default_rng(0)
        sizes = _sizes(rng, row.G, row.tokens, row.empty)
        ends = np.cumsum(sizes)
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
        x = (torch.randn(row.tokens, row.K, device="cuda") * row.K ** -0.25).to(tdt)
        wt = (torch.randn(row.G, row.N, row.K, device="cuda") * row.K ** -0.25).to(tdt).transpose(-2, -1)
        starts = np.concatenate(([0], ends[:-1]))
        picks = [(g, np.arange(s, e)[:: max(1, (e - s) // 3)][:3]) for g, (s, e) in enumerate(zip(starts, ends)) if e > s]
        pick = torch.as_tensor(np.concatenate([p for _, p in picks]), device="cuda")
        ref = torch.cat([x[torch.as_tensor(p, device="cuda")].double() @ wt[g].double() for g, p in picks])
        flops = 2.0 * row.tokens * row.K * row.N
        p = problem("2d3d", row.G, tuple(x.shape), tuple(x.stride()), tuple(wt.shape), tuple(wt.stride()),
                    x.element_size(), "float32" if tf32 else row.dtype, "float32" if tf32 else row.dtype)
        default = rules.hopper_choice(p, torch.cuda.get_device_properties(0).multi_processor_count)
        cands = {"F.grouped_mm": lambda: F.grouped_mm(x, wt, offs=offs)} if not tf32 else {}
        cands["mma.sync"] = lambda: core.grouped_mm(x, wt, offs, None, None, allow_tf32=tf32,
                                                    spec=rules.choose_spec(p.in_dtype, p.out_dtype, tf32, "NT",
                                                                           False, 4096, 4096))
        for bm, bn, st in VARIANTS:
            spec = HopperSpec(p.in_dtype, p.out_dtype, "N", "T", bm=bm, bn=bn, stages=st)
            tag = f"hopper {bm}x{bn} s{st}" + (" (default)" if spec == default else "")
            cands[tag] = lambda spec=spec: core.grouped_mm(x, wt, offs, None, None, allow_tf32=tf32, spec=spec)
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        base = None
        for name, fn in cands.items():
            try:
                out = fn()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a variant that fails is reported, not fatal
                print(f"{row.name:<11} {name:<26} failed: {type(e).__name__}: {str(e)[:160]}", flush=True)
                continue
            err = float((out[pick].double() - ref).norm() / ref.norm())
            tail = int(ends[-1])
            zeros = bool((out[tail:] == 0).all()) if tail < out.shape[0] else True
            del out
            med, p20, p80 = _time(fn, args.reps)
            if name == "F.grouped_mm":
                base = med
            vs = f"{base / med:5.2f}x F" if base else ""
            print(f"{row.name:<11} {name:<26} {med:8.3f} ms {flops / med / 1e9:7.1f} TFLOP/s (p20 {p20:.3f} p80 "
                  f"{p80:.3f}) rel.err {err:.1e}{'' if zeros else ' TAIL NOT ZERO'} {vs}", flush=True)
        torch.backends.cuda.matmul.allow_tf32 = old
        x = wt = cands = None  # free the operands before the next row
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
