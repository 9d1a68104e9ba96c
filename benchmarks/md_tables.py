"""Markdown tables (one per dtype) from benchmark-runner JSON files.

    python benchmarks/md_tables.py benchmarks/results/h100-16bit/fp16_bf16_2026-11-27.json more.json

One table per dtype: median TFLOP/s of warp_gemm (its default choice), the Triton reference and
torch.matmul, and warp_gemm / cuBLAS, in the order the runner measured the shapes. A later file's row
replaces an earlier one for the same dtype, shape and provider (a re-measured dtype).
"""

from __future__ import annotations

import json
import sys


def tables(paths: list[str]) -> str:
    rows = []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        rows += d["rows"] if isinstance(d, dict) else d
    by = {}
    order: dict[str, list[str]] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        dt, shape = r["dtype"], r["shape"]
        by[(dt, shape, r["provider"])] = r["tflops"]
        if shape not in order.setdefault(dt, []):
            order[dt].append(shape)
    out = []
    for dt, shapes in order.items():
        out += [f"### {dt}", "", "| shape | warp_gemm | Triton reference | torch.matmul (cuBLAS) | warp_gemm / cuBLAS |",
                "|---|---|---|---|---|"]
        for s in shapes:
            w, t, c = (by.get((dt, s, p)) for p in ("warp_gemm", "triton", "torch"))
            cell = [f"{x:.1f}" if x is not None else "—" for x in (w, t, c)]
            ratio = f"{w / c:.2f}" if w and c else "—"
            out.append(f"| {s} | {' | '.join(cell)} | {ratio} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(tables(sys.argv[1:]))
