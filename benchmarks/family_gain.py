"""The family tuner's winners against the planner's rules, and the buckets worth shipping.

    python benchmarks/family_gain.py rows.jsonl                        # the table: rule, winner, times
    python benchmarks/family_gain.py rows.jsonl --out fam.json          # also a table of the buckets that gain
    python benchmarks/ship_table.py fam.json --groups family --note "..."

``rows.jsonl`` is ``warp-gemm tune --family families --rows``'s output (one timed, checked row per shape and
family). For each shape it prints the family the rules (core/plan.py) choose for it on the tuned GPU's
architecture -- planned on a stand-in device (tests/conftest.CudaLike), nothing launched -- the ``'|family'``
bucket's winner (:func:`warp_gemm.tools.tune._winners`) and the fastest family with their times. ``--out``
writes a tuning table of the buckets whose winner differs from the rules' family and beats it by at least
``--min-gain`` on every tuned shape of the bucket: a bucket the rules already serve, or serve within the
margin, stays with the rules (a table entry forces its family on every shape of the bucket, tuned or not).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rows", help="warp-gemm tune --family families --rows output (JSON lines)")
    ap.add_argument("--out", help="write the buckets that gain as a tuning table (for benchmarks/ship_table.py)")
    ap.add_argument("--min-gain", type=float, default=0.15, help="the winner's least speed-up over the rules' "
                    "family on each tuned shape of its bucket (default 0.15)")
    args = ap.parse_args(argv)
    for p in (ROOT, ROOT / "tests"):
        sys.path.insert(0, str(p))
    import numpy as np
    from _pytest.monkeypatch import MonkeyPatch
    from conftest import cuda_like_problem

    from warp_gemm.config import tables
    from warp_gemm.core import plan as _plan
    from warp_gemm.core.options import Options
    from warp_gemm.tools.tune import _winners

    rows = [json.loads(line) for line in Path(args.rows).read_text().splitlines() if line.strip()]
    winners = _winners(rows)
    times: dict[tuple, dict[str, float]] = {}  # (arch, dtype, layout, batch, M, N, K) -> family -> us
    for r in rows:
        if r.get("family") == "families" and r.get("status") == "ok":
            key = (r["arch"], r["dtype"], r["layout"], r.get("batch") or 1, r["M"], r["N"], r["K"])
            times.setdefault(key, {})[r["config"]] = r["ms"] * 1e3
    mp = MonkeyPatch()
    # the rules alone: no '|family' table (the user's or the shipped one, which may hold these very buckets)
    mp.setattr(tables, "lookup_family", lambda *args, **kwargs: None)
    gains: dict[tuple[str, str], list[float]] = {}  # (group, bucket) -> winner's speed-up over the rules, per shape
    print(f"{'dtype':9} {'shape':>20}  {'rules':>16}  {'table':>16}  {'fastest':>16}")
    for (arch, dtype, layout, b, M, N, K), t in sorted(times.items()):
        npdt = {"float16": np.float16, "float32": np.float32, "float64": np.float64}.get(dtype)
        if npdt is None or layout != "NN":
            continue  # the stand-in plans numpy operands: bfloat16 and other layouts are left out of the report
        a = np.zeros((b, M, K) if b > 1 else (M, K), npdt)
        bm = np.zeros((b, K, N) if b > 1 else (K, N), npdt)
        p = cuda_like_problem(mp, a, bm)
        rule = _plan.make_plan(p, 1.0, 0.0, False, None, Options()).family
        group = f"{arch}|{dtype}|{layout}{tables.FAMILY}"
        bucket = ",".join(map(str, tables.family_bucket(M, N, K, b)))
        win = winners.get(group, {}).get(bucket)
        best = min(t, key=t.get)
        if win is not None and win != rule:
            gains.setdefault((group, bucket), []).append(t.get(rule, float("inf")) / t.get(win, float("inf")))
        shape = f"{b}x{M}x{N}x{K}" if b > 1 else f"{M}x{N}x{K}"

        def cell(f):
            return f"{f or '-':>9} {t[f]:6.1f}" if f in t else f"{f or '-':>9} {'-':>6}"

        print(f"{dtype:9} {shape:>20}  {cell(rule)}  {cell(win)}  {cell(best)}")
    mp.undo()
    keep: dict[str, dict[str, str]] = {}
    for (group, bucket), g in sorted(gains.items()):
        if min(g) >= 1.0 + args.min_gain:
            keep.setdefault(group, {})[bucket] = winners[group][bucket]
    print(f"\nbuckets whose winner beats the rules' family by >= {args.min_gain:.0%} on each tuned shape:")
    for group, buckets in keep.items():
        for bucket, fam in buckets.items():
            print(f"  {group} {bucket}: {fam} ({', '.join(f'{x:.2f}x' for x in gains[(group, bucket)])})")
    if args.out:
        warp = next((r.get("warp") for r in rows if r.get("warp")), None)
        Path(args.out).write_text(json.dumps({"format": tables.FORMAT, "warp": warp, "entries": keep}, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
