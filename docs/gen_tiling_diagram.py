"""Draw docs/img/tiling.png: how warp_gemm tiles a GEMM whose sizes are not tile multiples.

    python docs/gen_tiling_diagram.py            # writes docs/img/tiling.png (needs matplotlib)

D = A @ B with M=150, N=100, K=100 and 64x64x64 tiles (TM x TN x TK). The grid is ceil(M/TM) x
ceil(N/TN) = 3 x 2 blocks, and each block runs ceil(K/TK) = 2 K steps. Partial edge tiles are shaded;
their part outside the matrix (hatched) is read as zeros by tile_load and dropped by tile_store.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

M, N, K = 150, 100, 100
TM, TN, TK = 64, 64, 64
GAP = 40  # space between A and D, and between B and D

FULL = "#dbe9f6"  # a tile entirely inside the matrix
PARTIAL = "#f9c98b"  # an edge tile: its in-bounds part
OUTSIDE = "#eeeeee"  # an edge tile: its out-of-bounds part (zero-filled / masked)
HIGHLIGHT = "#c0392b"


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def draw_matrix(ax, x0, y0, rows, cols, tr, tc, name, row_label, col_label, highlight=None,
                label_tiles=False):
    """A rows x cols matrix with its top-left corner at (x0, y0) (y grows downwards), tiled tr x tc."""
    nr, nc = ceil_div(rows, tr), ceil_div(cols, tc)
    for i in range(nr):
        for j in range(nc):
            x, y = x0 + j * tc, y0 + i * tr
            h_in, w_in = min(tr, rows - i * tr), min(tc, cols - j * tc)
            partial = h_in < tr or w_in < tc
            # The whole tile footprint: the out-of-bounds part shows through, hatched.
            ax.add_patch(Rectangle((x, y), tc, tr, facecolor=OUTSIDE, edgecolor="#888888", lw=0.8,
                                   hatch="///" if partial else None, ls="--", zorder=1))
            ax.add_patch(Rectangle((x, y), w_in, h_in, facecolor=PARTIAL if partial else FULL,
                                   edgecolor="none", zorder=2))
            if label_tiles:
                ax.text(x + w_in / 2, y + h_in / 2, f"({i},{j})", ha="center", va="center", fontsize=9,
                        color="#333333", zorder=5)
    # The matrix itself.
    ax.add_patch(Rectangle((x0, y0), cols, rows, fill=False, edgecolor="black", lw=2, zorder=4))
    # Tile grid lines inside the matrix.
    for i in range(1, nr):
        ax.plot([x0, x0 + nc * tc], [y0 + i * tr] * 2, color="#555555", lw=0.8, zorder=3)
    for j in range(1, nc):
        ax.plot([x0 + j * tc] * 2, [y0, y0 + nr * tr], color="#555555", lw=0.8, zorder=3)
    if highlight is not None:
        hx, hy, hw, hh = highlight
        ax.add_patch(Rectangle((x0 + hx, y0 + hy), hw, hh, fill=False, edgecolor=HIGHLIGHT, lw=2.5, zorder=6))
    ax.text(x0 + cols / 2, y0 - 6, name, ha="center", va="bottom", fontsize=12, weight="bold")
    ax.text(x0 - 6, y0 + rows / 2, row_label, ha="right", va="center", fontsize=9, rotation=90)
    ax.text(x0 + cols / 2, y0 + max(rows, nr * tr) + 6, col_label, ha="center", va="top", fontsize=9)


def main(argv=None) -> int:
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent / "img" / "tiling.png"
    fig, ax = plt.subplots(figsize=(10, 9.2), dpi=110)
    ax.set_aspect("equal")
    ax.axis("off")

    ktiles = ceil_div(K, TK)
    bx, by = ktiles * TK + GAP, 0  # B (K x N) above D, clear of A's last (partial) K tile
    ax_, ay = 0, ktiles * TK + GAP  # A (M x K) left of D, below B's last K tile
    dx, dy = bx, ay  # D (M x N)
    i_hi, j_hi = 2, 1  # the highlighted output tile: the bottom-right corner, partial in both dimensions

    draw_matrix(ax, bx, by, K, N, TK, TN, "B  (K x N)", f"K = {K}", f"N = {N}",
                highlight=(j_hi * TN, 0, TN, ktiles * TK))
    draw_matrix(ax, ax_, ay, M, K, TM, TK, "A  (M x K)", f"M = {M}", f"K = {K}",
                highlight=(0, i_hi * TM, ktiles * TK, TM))
    draw_matrix(ax, dx, dy, M, N, TM, TN, "D = A @ B  (M x N)", f"M = {M}", f"N = {N}",
                highlight=(j_hi * TN, i_hi * TM, TN, TM), label_tiles=True)

    # Annotate the K loop of the highlighted block, in the middle of each tile's in-bounds part.
    def mid(lo: int, tile: int, extent: int) -> float:
        return (lo + min(lo + tile, extent)) / 2

    for k in range(ktiles):
        style = dict(ha="center", va="center", fontsize=10, color=HIGHLIGHT, weight="bold", zorder=7)
        ax.text(ax_ + mid(k * TK, TK, K), ay + mid(i_hi * TM, TM, M), f"k={k}", **style)
        ax.text(bx + mid(j_hi * TN, TN, N), by + mid(k * TK, TK, K), f"k={k}", **style)

    text = (f"tiles TM x TN x TK\n  = {TM} x {TN} x {TK}\n\n"
            f"grid: ceil({M}/{TM}) x ceil({N}/{TN})\n  = {ceil_div(M, TM)} x {ceil_div(N, TN)} blocks\n\n"
            f"K loop: ceil({K}/{TK})\n  = {ktiles} steps per block\n\n"
            f"red: block (2,1) multiplies\nA's row panel by B's\ncolumn panel, k = 0, 1")
    ax.text(0, 0, text, ha="left", va="top", fontsize=10, family="monospace")

    handles = [
        Rectangle((0, 0), 1, 1, facecolor=FULL, edgecolor="#888888"),
        Rectangle((0, 0), 1, 1, facecolor=PARTIAL, edgecolor="#888888"),
        Rectangle((0, 0), 1, 1, facecolor=OUTSIDE, edgecolor="#888888", hatch="///"),
    ]
    labels = ["full tile", "partial edge tile (in bounds)",
              "outside the matrix: tile_load reads zeros, tile_store drops the writes"]
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.02), ncol=1, frameon=False,
              fontsize=10)

    width = dx + ceil_div(N, TN) * TN
    height = dy + ceil_div(M, TM) * TM
    ax.set_xlim(-20, width + 10)
    ax.set_ylim(height + 20, -20)  # y grows downwards, like matrix rows
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, bbox_inches="tight")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
