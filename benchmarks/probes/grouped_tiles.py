"""Purpose: which tile configuration the grouped kernel should take for the bf16 MoE rows (grouped suite's
moe8 / moe64): the rules' default against two blocks per SM (128x128x32, 4 stages) and 64-row tiles.

    python benchmarks/probes/grouped_tiles.py             # CUDA: one line per (row, variant)
    python benchmarks/probes/grouped_tiles.py --precompile 90
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

VARIANTS = {
    "default": {},
    "128x128x32_s4_o2": dict(tm=128, tn=128, tk=32, stages=4, min_blocks=2),
    "64x128x64_s3_o2": dict(tm=64, tn=128, tk=64, stages=3, min_blocks=2),
}


def spec_for(name: str, dtype: str = "bfloat16"):
    from warp_gemm.families.grouped import rules

    return replace(rules.choose_spec(dtype, dtype, False, "NT", False, 4096, 4096), **VARIANTS[name])


def main() -> int:
    if "--precompile" in sys.argv:
        import warp as wp

        from warp_gemm import _compat
        from warp_gemm.families.grouped import kernel as K

        _compat.init()
        arch = int(sys.argv[sys.argv.index("--precompile") + 1])
        for name in VARIANTS:
            spec = spec_for(name)
            k = K.get_kernel(spec, False)
            k.module.options["block_dim"] = spec.block_dim
            wp.compile_aot_module(k.module, arch=[arch])
            print("built", name, flush=True)
        return 0
    import numpy as np
    import torch

    from warp_gemm.tools.bench.grouped import ROWS, _sizes, _time
    from warp_gemm.core import grouped as core

    for row in (r for r in ROWS if r.name in ("moe8", "moe64")):
        rng = np.random.default_rng(0)
        sizes = _sizes(rng, row.G, row.tokens, row.empty)
        offs = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
        x = torch.randn(row.tokens, row.K, device="cuda").to(torch.bfloat16)
        w = torch.randn(row.G, row.N, row.K, device="cuda").to(torch.bfloat16).transpose(-2, -1)
        ref = core.grouped_mm(x, w, offs, None, None)
        for name in VARIANTS:
            spec = spec_for(name)
            out = core.grouped_mm(x, w, offs, None, None, spec=spec)
            err = float((out.float() - ref.float()).norm() / ref.float().norm())
            med, p20, p80 = _time(lambda spec=spec: core.grouped_mm(x, w, offs, None, None, spec=spec), 15)
            tf = 2.0 * row.tokens * row.K * row.N / med / 1e9
            print(f"{row.name:<6} {name:<18} {med:8.3f} ms  {tf:6.1f} TFLOP/s  (p20 {p20:.3f}, p80 {p80:.3f}; "
                  f"rel. diff to default {err:.1e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
