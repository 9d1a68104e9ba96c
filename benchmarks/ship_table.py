"""Copy tuned groups from a user tuning table into the shipped one (``warp_gemm/config/data/tuned_<arch>.json``).

    WARP_GEMM_CACHE_DIR=$OUT warp-gemm tune --family pipelined --dtype fp16,bf16,tf32,fp64 --json $OUT/rows.json
    python benchmarks/ship_table.py $OUT/tuned-warp1.19.0-sm90-NVIDIA-H100-80GB-HBM3.json \\
        --note "H100 80GB HBM3, warp-lang 1.19.0, <date>, warp-gemm tune --family pipelined (rows.json)"

By default only the pipelined family's groups (``"sm90|float16|NN|pipe"``, ...) are copied: each replaces
the shipped group of the same name whole (a fresh tuning run replaces the old one's buckets); the tiled
groups and every other key of the shipped file stay as they are. ``--groups family`` copies the family
groups (``"...|family"``, from ``warp-gemm tune --family families``) instead, ``--groups all`` every group.
The source must be a current-format table whose every entry parses; the result is re-read with
``warp_gemm.config.tables`` before this exits. ``--dry-run`` prints what would change.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="the tuned table (the user cache file warp-gemm tune wrote)")
    ap.add_argument("--into", default=None, help="the shipped table (default: warp_gemm/config/data/"
                    "tuned_<arch>.json, <arch> from the copied groups)")
    ap.add_argument("--groups", default="pipe", choices=["pipe", "family", "all"], help="which groups to copy")
    ap.add_argument("--note", default=None, help="provenance, stored under the 'pipe_measured' key ('family_measured' "
                    "for --groups family; default: "
                    "the source's file name, Warp version and save time)")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from warp_gemm.config import tables

    src = Path(args.source)
    data = json.loads(src.read_text())
    if not isinstance(data, dict) or data.get("format") != tables.FORMAT:
        print(f"{src}: not a format-{tables.FORMAT} tuning table", file=sys.stderr)
        return 1
    tables._tables.pop(str(src), None)
    parsed = tables._load(src)  # warns and returns {} on a bad entry
    suffix = {"pipe": tables.PIPE, "family": tables.FAMILY}.get(args.groups, "")
    groups = {g: rows for g, rows in data["entries"].items() if g.endswith(suffix)}
    if not groups or any(g not in parsed for g in groups):
        print(f"{src}: no {args.groups} groups to copy, or an entry that does not parse", file=sys.stderr)
        return 1
    archs = {g.split("|")[0] for g in groups}
    if args.into is None and len(archs) != 1:
        print(f"groups of several archs {sorted(archs)}: name the destination with --into", file=sys.stderr)
        return 1
    dst = Path(args.into) if args.into else ROOT / "warp_gemm" / "config" / "data" / f"tuned_{archs.pop()}.json"
    shipped = json.loads(dst.read_text()) if dst.is_file() else {"format": tables.FORMAT, "entries": {}}
    if shipped.get("format") != tables.FORMAT:
        print(f"{dst}: format {shipped.get('format')} != {tables.FORMAT}", file=sys.stderr)
        return 1
    for g, rows in sorted(groups.items()):
        old = shipped["entries"].get(g)
        print(f"{g}: {len(rows)} buckets" + (f" (replacing {len(old)})" if old else " (new)"))
        for b, c in sorted(rows.items()):
            was = (old or {}).get(b)
            print(f"  {b:10} {c}" + (f"   was {was}" if was and was != c else ""))
    if args.dry_run:
        return 0
    shipped["entries"].update(groups)
    key = {"pipe": "pipe_measured", "family": "family_measured"}.get(args.groups, "measured")
    shipped[key] = args.note or (f"{src.name}: warp-lang {data.get('warp')}, saved {data.get('saved')}, "
                                 f"compile {data.get('compile_s', 0):.0f} s")
    tmp = dst.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(shipped, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, dst)
    tables._tables.pop(str(dst), None)
    check = tables._load(dst)
    if any(g not in check for g in groups):
        print(f"{dst}: written, but it does not load back", file=sys.stderr)
        return 1
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
