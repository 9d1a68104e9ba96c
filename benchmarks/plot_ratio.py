"""warp_gemm / cuBLAS per shape, one bar per run (several runs: how the ratio moved between them).

    python benchmarks/plot_ratio.py docs/img/ratio_fp16.png \
        "H100=benchmarks/results/h100-16bit/fp16_bf16_2026-11-27.json" \
        [--dtype float16]

Each run is a label and one or more runner JSON files (``benchmarks/run.py --json``); a shape's ratio is
cuBLAS's median time over warp_gemm's, from rows of the same file (the same run). Shapes missing from a
run are left empty.
"""

from __future__ import annotations

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def ratios(paths: list[str], dtype: str) -> dict[str, float]:
    out = {}
    for p in paths:
        d = json.load(open(p))
        rows = d["rows"] if isinstance(d, dict) else d
        t = {}
        for r in rows:
            if r.get("dtype") == dtype and r.get("status") == "ok" and r.get("median_ms"):
                t.setdefault(r["shape"], {})[r["provider"]] = r["median_ms"]
        for shape, v in t.items():
            if "warp_gemm" in v and "torch" in v:
                out[shape] = v["torch"] / v["warp_gemm"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+", help='"label=file.json,file2.json"')
    ap.add_argument("--dtype", default="float16")
    args = ap.parse_args(argv)
    runs = []
    for spec in args.runs:
        label, files = spec.split("=", 1)
        runs.append((label, ratios(files.split(","), args.dtype)))
    shapes = sorted({s for _, r in runs for s in r}, key=lambda s: -max(r.get(s, 0) for _, r in runs))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(shapes) + 1.2))
    h = 0.8 / len(runs)
    for i, (label, r) in enumerate(runs):
        ys = [j + i * h for j in range(len(shapes))]
        vals = [r.get(s, 0.0) for s in shapes]
        bars = ax.barh(ys, vals, height=h, label=label)
        for b, v in zip(bars, vals):
            if v:
                ax.text(v + 0.01, b.get_y() + h / 2, f"{v:.2f}", va="center", fontsize=7)
    ax.set_yticks([j + h * (len(runs) - 1) / 2 for j in range(len(shapes))], shapes, fontsize=8)
    ax.axvline(1.0, color="k", lw=0.8, ls="--")
    ax.set_xlabel(f"cuBLAS time / warp_gemm time ({args.dtype}; > 1: warp_gemm faster)")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("warp_gemm against cuBLAS in the same run, H100 (benchmark runner)", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
