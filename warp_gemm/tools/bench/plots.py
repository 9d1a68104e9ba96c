"""TFLOP/s figures for benchmark rows: one PNG per dtype.

Each figure has a line panel (TFLOP/s against size, a line per provider) for the square shapes and a
grouped-bar panel for each of the odd, skinny, transformer and batched sets (and one for any other
shapes, e.g. --quick's). Re-plot a saved run with ``python -m warp_gemm.tools.bench.plots rows.json DIR``
(matplotlib: the ``bench`` extra).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display on CI or GPU hosts; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402

from warp_gemm.tools import shapes as shapes_mod  # noqa: E402

BAR_SETS = ("bench-odd", "bench-skinny", "bench-transformer", "bench-batched")
SWEEP_LABEL = "warp_gemm (best of sweep)"


def _as_dict(row: Any) -> dict[str, Any]:
    return asdict(row) if is_dataclass(row) else dict(row)


def panel_of(shape_id: str, M: int, N: int, K: int, batch: int) -> str:
    """'square' for the line panel, else the bench set whose bars show this shape ('other' if none)."""
    if shape_id in {s.id for s in shapes_mod.get_set("bench-square")}:
        return "square"
    for name in BAR_SETS:
        if shape_id in {s.id for s in shapes_mod.get_set(name)}:
            return name
    return "square" if M == N == K and not batch else "other"


def collapse_sweep(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replace the per-configuration warp_gemm rows of --sweep by their best one per shape and dtype, so that
    a sweep of dozens of configurations still gives a readable figure."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    out = []
    for r in rows:
        if not r["provider"].startswith("warp_gemm["):
            out.append(r)
            continue
        key = (r["shape"], r["dtype"])
        if key not in best or r["tflops"] > best[key]["tflops"]:
            best[key] = {**r, "provider": SWEEP_LABEL}
    return out + list(best.values())


def _providers(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["provider"] for r in rows))  # first-seen order, stable across panels


def _line_panel(ax, rows: list[dict[str, Any]], providers: list[str]) -> None:
    for p in providers:
        pts = sorted((r["M"], r["tflops"]) for r in rows if r["provider"] == p)
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=p)
    ax.set_xscale("log", base=2)
    sizes = sorted({r["M"] for r in rows})
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.minorticks_off()
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("square")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")


def _bar_panel(ax, title: str, rows: list[dict[str, Any]], providers: list[str]) -> None:
    shape_ids = list(dict.fromkeys(r["shape"] for r in rows))
    value = {(r["shape"], r["provider"]): r["tflops"] for r in rows}
    width = 0.8 / max(len(providers), 1)
    for i, p in enumerate(providers):
        xs = [j + (i - (len(providers) - 1) / 2) * width for j in range(len(shape_ids))]
        ax.bar(xs, [value.get((s, p), 0.0) for s in shape_ids], width=width, label=p)
    ax.set_xticks(range(len(shape_ids)))
    ax.set_xticklabels(shape_ids, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")


def plot_dtype(dtype: str, rows: list[dict[str, Any]], out_dir: Path, title: str = "") -> Path:
    providers = _providers(rows)
    panels: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        panels[panel_of(r["shape"], r["M"], r["N"], r["K"], r["batch"])].append(r)
    names = [n for n in ("square", *BAR_SETS, "other") if panels.get(n)]
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        if name == "square":
            _line_panel(ax, panels[name], providers)
        else:
            _bar_panel(ax, name, panels[name], providers)
    fig.suptitle(f"{dtype} GEMM throughput" + (f"\n{title}" if title else ""), fontsize="medium")
    fig.tight_layout()
    path = out_dir / f"tflops_{dtype}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(rows: list[Any], out_dir: str | Path, title: str = "") -> list[Path]:
    """One PNG per dtype from the rows that have a number (WRONG/ERROR rows have none and are left out)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    good = collapse_sweep([d for d in map(_as_dict, rows) if d.get("status") == "ok" and d.get("tflops")])
    by_dtype: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in good:
        by_dtype[r["dtype"]].append(r)
    return [plot_dtype(dtype, rs, out, title) for dtype, rs in by_dtype.items()]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m warp_gemm.tools.bench.plots ROWS.json OUT_DIR", file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text())
    h = data.get("header", {})
    title = f"{h.get('gpu') or h.get('cpu')} | commit {h.get('commit')}"
    for path in write_plots(data["rows"], argv[1], title):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
