"""The ``warp-gemm`` console script: ``info``, ``check``, ``bench``, ``tune``, ``precompile``.

Also ``python -m warp_gemm <command>``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from warp_gemm.tools import dtypes as _dt
from warp_gemm.tools import shapes as _shapes


def _info(args) -> int:
    from warp_gemm import __version__
    from warp_gemm import _compat

    _compat.init()
    import warp as wp

    print(f"warp_gemm {__version__}")
    print(f"warp-lang {_compat.WARP_VERSION} (supported: {_compat.SUPPORTED})")
    for dev in wp.get_devices():
        extra = f", arch sm{dev.arch}, {_compat.sm_count(dev)} SMs" if dev.is_cuda else ""
        print(f"device {dev}: {dev.name}{extra}")
    for mod in ("torch", "triton", "numpy"):
        try:
            m = __import__(mod)
            print(f"{mod} {m.__version__}")
        except ImportError:
            print(f"{mod}: not installed")
    print("features:")
    for k, v in _compat.features().items():
        print(f"  {k} = {v}")
    if wp.get_cuda_device_count():
        from warp_gemm.config import tables

        print(f"tuning cache: {tables.user_cache_path(wp.get_device('cuda'))}")
    return 0


def _check(rest: list[str]) -> int:
    from warp_gemm.tools import check

    return check.main(rest)


def _bench(rest: list[str]) -> int:
    from warp_gemm.tools import bench

    return bench.main(rest)


def _tune(args) -> int:
    from warp_gemm.config import tables
    from warp_gemm.tools import tune as tuner
    from warp_gemm.tools.devices import require_cuda

    shapes, dtypes = args.shape_list, ",".join(args.dtype_list)
    require_cuda(args.device, "warp-gemm tune (the CPU uses one configuration)")
    configs = [c.strip() for c in args.configs.split(";") if c.strip()] if args.configs else None
    stream = open(args.rows, "a") if args.rows else None

    def on_row(r):  # one JSON line per measured row, flushed: a run cut short keeps what it measured
        stream.write(json.dumps(r) + "\n")
        stream.flush()

    try:
        rows = tuner.tune(dtypes.split(","), shapes=shapes, device=args.device, workers=args.workers,
                         configs=configs, persist=not args.no_save, rep_ms=args.rep_ms, family=args.family,
                         on_row=on_row if stream else None)
    finally:
        if stream:
            stream.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    best: dict = {}
    for r in rows:
        if r.get("status") == "ok" and r["tflops"] > best.get((r["dtype"], r["shape"]), (0, ""))[0]:
            best[(r["dtype"], r["shape"])] = (r["tflops"], r["config"])
    print(f"{'dtype':9} {'shape':24} {'TFLOP/s':>8}  config")
    for (dt, sid), (tf, cfg) in sorted(best.items()):
        print(f"{dt:9} {sid:24} {tf:8.1f}  {cfg}")
    if not args.no_save:
        import warp as wp

        print(f"winners saved to {tables.user_cache_path(wp.get_device(args.device))}")
    return 0


def _precompile(args) -> int:
    from warp_gemm import _compat
    from warp_gemm.tools.devices import require_cuda
    from warp_gemm.tools.precompile import job_label, precompile

    archs = args.arch_list
    if archs and not _compat.HAS_COMPILE_AOT:
        print(f"warp-lang {_compat.WARP_VERSION} has no wp.compile_aot_module (1.9+): compiling on the "
              "current CUDA device instead", file=sys.stderr)
        archs = None
    if not archs:
        require_cuda("cuda", "warp-gemm precompile without --arch (it builds for the current CUDA device)")
    layouts = tuple(x.strip().upper() for x in args.layouts.split(","))
    epilogues = tuple(x.strip() for x in args.epilogues.split(","))
    families = tuple(x.strip() for x in args.family.split(","))
    res = precompile(args.dtype_list, archs, workers=args.workers, layouts=layouts, epilogues=epilogues,
                     module_dir=args.module_dir, k_tail=args.k_tail, families=families)
    failed = [r for r in res if r[2]]
    for job, sec, err in sorted(res, key=lambda r: job_label(r[0])):
        print(f"{'FAIL' if err else 'ok':4} {job_label(job):70} {sec:6.1f}s {err}")
    print(f"{len(res) - len(failed)} built, {len(failed)} failed")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="warp-gemm", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="versions, devices and the probed Warp features")
    sub.add_parser("check", help="cross-check warp_gemm vs Triton vs float64 (see `warp-gemm check -h`)",
                   add_help=False)
    sub.add_parser("bench", help="benchmark providers (see `warp-gemm bench -h`)", add_help=False)
    t = sub.add_parser("tune", help="autotune tile configurations on this GPU and save the winners")
    t.add_argument("--family", default="tiled", choices=["tiled", "pipelined", "families"],
                   help="kernel family to tune: tiled (Config candidates), pipelined (tile shape, stages, "
                        "block size and blocks per SM; winners in the table's '|pipe' groups), or families "
                        "(the choice between the kernel families, each forced with its own defaults; winners "
                        "in the '|family' groups, which the planner consults before its rules)")
    t.add_argument("--dtype", default=None, help=f"comma-separated: {_dt.SPELLINGS}; default: fp16,bf16,fp32,tf32,"
                   "fp64 (tiled, families); fp16,bf16,tf32,fp64 (pipelined; exact fp32 on request: the SIMT "
                   "kernel, planned from 264 output tiles)")
    t.add_argument("--shapes", default=None, help=f"comma-separated set names or {_shapes.FORMAT} (default: "
                   "benchmark sets for tiled, tune-pipe for pipelined, tune-family for families)")
    t.add_argument("--configs", default=None, help="';'-separated candidates to time instead of the default "
                   "list (e.g. 'pipe/128x128x128/s2/b256/o1;pipe/128x128x64/s3/b256/o1'; families: "
                   "'skinny;gemv')")
    t.add_argument("--device", default="cuda")
    t.add_argument("--workers", type=int, default=None, help="parallel compile processes (default: cores)")
    t.add_argument("--rep-ms", type=float, default=100)
    t.add_argument("--json", default=None, help="write every measured row here (at the end)")
    t.add_argument("--rows", default=None, help="append every row here as it is measured (JSON lines)")
    t.add_argument("--no-save", action="store_true", help="do not write the tuning cache")
    p = sub.add_parser("precompile", help="build kernels ahead of time into Warp's kernel cache")
    p.add_argument("--arch", default="80,90", help="CUDA archs for offline builds ('' = current device)")
    p.add_argument("--dtype", default="fp16,bf16,fp32", help=f"comma-separated: {_dt.SPELLINGS}")
    p.add_argument("--layouts", default="NN,TN,NT,TT")
    p.add_argument("--epilogues", default="scale,axpby")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--module-dir", default=None, help="output folder (default: Warp's kernel cache)")
    p.add_argument("--family", default="tiled,pipelined,gemv",
                   help="kernel families to build (tiled, pipelined, gemv)")
    p.add_argument("--k-tail", action="store_true", help="also build the kernels for K not a multiple of the "
                   "tile depth (padded CUDA kernels; otherwise such a shape compiles its kernel on first use)")
    from warp_gemm._compat import UnsupportedWarpError
    from warp_gemm.tools.devices import Unavailable

    cmd = argv[0] if argv else None
    try:
        if cmd in ("check", "bench"):
            return _check(argv[1:]) if cmd == "check" else _bench(argv[1:])
        args = ap.parse_args(argv)
        _parse_lists(args, {"tune": t, "precompile": p}.get(args.cmd))
        return {"info": _info, "tune": _tune, "precompile": _precompile}[args.cmd](args)
    except (Unavailable, UnsupportedWarpError) as e:  # a missing device or Warp: one line, no traceback
        print(f"warp-gemm {cmd}: error: {e}", file=sys.stderr)
        return 2


def _parse_lists(args, parser) -> None:
    """``--dtype``, ``--shapes`` and ``--arch`` as lists; a bad entry is a usage error naming the format."""
    if parser is None:
        return
    try:
        if args.cmd == "tune":
            default = "fp16,bf16,tf32,fp64" if args.family == "pipelined" else "fp16,bf16,fp32,tf32,fp64"
            args.dtype_list = _dt.parse_list(args.dtype or default)
            args.shape_list = _shapes.get_set(args.shapes) if args.shapes else None
        else:
            args.dtype_list = _dt.parse_list(args.dtype)
    except ValueError as e:
        parser.error(str(e))
    if args.cmd == "precompile":
        try:
            args.arch_list = [int(a) for a in args.arch.split(",") if a.strip()] if args.arch else None
        except ValueError:
            parser.error(f"--arch {args.arch!r}: expected comma-separated compute capabilities such as 80,90 "
                         "('' for the current device)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
