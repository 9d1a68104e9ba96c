"""Two benchmark suites about what a call costs before and around the GPU work.

``first-call``: each case in a fresh interpreter with an empty Warp kernel cache, as a new user meets it --
seconds to import torch, Warp and warp_gemm (``import warp_gemm`` alone too), ``wp.init()``, and the first
``warp_gemm.matmul`` on torch CUDA tensors (kernel builds included), then the second call. Also the wall
time of the README's main command (``python examples/02_odd_shapes.py``) on an empty cache.

``host``: host time per call in a plain Python loop over a pool of operand sets, synchronised once per
loop: warp_gemm on operands it has not seen (of a planned shape), the same with ``options(rebind=False)``
(validation and planning on every new operand set), on operands seen before, and ``torch.matmul``. The
loops of one case run back to back, three times; each side's best loop counts (the GPU host's speed drifts
by up to 2x over a minute).

    warp-gemm bench --suite first-call [--jobs 4] [--json rows.json]
    warp-gemm bench --suite host [--json rows.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_MARK = "##startup "

#: (label, dtype, batch, M, N, K): issue 40's cases.
FIRST_CALL_CASES = [
    ("fp16 4096^3", "float16", 0, 4096, 4096, 4096),
    ("bf16 4096^3", "bfloat16", 0, 4096, 4096, 4096),
    ("fp16 1023x1025x1027", "float16", 0, 1023, 1025, 1027),
    ("fp16 1x4096x4096", "float16", 0, 1, 4096, 4096),
    ("fp16 4096 x 32^3", "float16", 4096, 32, 32, 32),
    ("fp32 33x17x65", "float32", 0, 33, 17, 65),
] + [(f"{lab} {name}", dt, b, m, n, k)
     for lab, dt in (("fp16", "float16"), ("bf16", "bfloat16"), ("tf32", "tf32"), ("fp32", "float32"),
                     ("fp64", "float64"))
     for name, b, m, n, k in (("64^3", 0, 64, 64, 64), ("1000^3", 0, 1000, 1000, 1000),
                              ("4096^3", 0, 4096, 4096, 4096), ("1000 x 16^3", 1000, 16, 16, 16))
     if not (lab in ("fp16", "bf16") and name == "4096^3")]

#: (label, dtype, M, N, K, B = W.T, pool size): host time per call.
HOST_CASES = [
    ("fp32 64^3", "float32", 64, 64, 64, False, 1000),
    ("fp16 256^3", "float16", 256, 256, 256, False, 1000),
    ("bf16 16x4096x4096, B = W.T", "bfloat16", 16, 4096, 4096, True, 400),
]


def _torch_dtype(torch, name: str):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "tf32": torch.float32,
            "float32": torch.float32, "float64": torch.float64}[name]


# --- first-call -------------------------------------------------------------------------------------------
def child(spec: dict) -> dict:
    """One case in this (fresh) interpreter: seconds for each start-up step and the first two calls."""
    t0 = time.perf_counter()
    import torch

    t1 = time.perf_counter()
    import warp as wp

    t2 = time.perf_counter()
    import warp_gemm

    t3 = time.perf_counter()
    wp.init()
    t4 = time.perf_counter()
    dt, b, m, n, k = spec["dtype"], spec["batch"], spec["M"], spec["N"], spec["K"]
    g = torch.Generator(device="cuda").manual_seed(0)
    shape_a, shape_b = ((b, m, k), (b, k, n)) if b else ((m, k), (k, n))
    a = (torch.randn(shape_a, device="cuda", generator=g) * k ** -0.25).to(_torch_dtype(torch, dt))
    bb = (torch.randn(shape_b, device="cuda", generator=g) * k ** -0.25).to(_torch_dtype(torch, dt))
    torch.cuda.synchronize()
    t5 = time.perf_counter()
    r = warp_gemm.matmul(a, bb, allow_tf32=dt == "tf32")
    torch.cuda.synchronize()
    t6 = time.perf_counter()
    warp_gemm.matmul(a, bb, allow_tf32=dt == "tf32")
    torch.cuda.synchronize()
    t7 = time.perf_counter()
    ref = torch.matmul(a.double(), bb.double())
    err = float((r.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    from warp_gemm.tools.explain import family

    return {"import_torch_s": t1 - t0, "import_warp_s": t2 - t1, "import_warp_gemm_s": t3 - t2, "init_s": t4 - t3,
            "first_call_s": t6 - t5, "second_call_s": t7 - t6, "rel_err": err,
            "family": family(a, bb, allow_tf32=dt == "tf32")}


def _spawn(args: list[str], cache: str | None, timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ)
    if cache is not None:
        env["WARP_CACHE_PATH"] = cache
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)
    return time.perf_counter() - t, proc


def _first_call_case(case) -> dict:
    label, dt, b, m, n, k = case
    spec = {"dtype": dt, "batch": b, "M": m, "N": n, "K": k}
    with tempfile.TemporaryDirectory(prefix="warp_gemm_first_") as cache:
        # the file itself, not ``-m warp_gemm...``: that would import the package before the child times it
        wall, proc = _spawn([__file__, "--_child", json.dumps(spec)], cache)
    row = {"case": label, **spec, "process_s": wall}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARK):
            row.update(json.loads(line[len(_MARK):]))
            return row
    row["error"] = (proc.stderr.strip() or proc.stdout.strip())[-400:]
    return row


def first_call_suite(jobs: int = 1, readme: bool = True) -> list[dict]:
    rows = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for row in pool.map(_first_call_case, FIRST_CALL_CASES):
            rows.append(row)
            if "error" in row:
                print(f"{row['case']:<24} ERROR {row['error']}", flush=True)
            else:
                print(f"{row['case']:<24} first {row['first_call_s']:7.2f} s  second {row['second_call_s'] * 1e3:8.2f} ms"
                      f"  import warp_gemm {row['import_warp_gemm_s']:.2f} s  init {row['init_s']:.2f} s"
                      f"  {row['family']:<12} err {row['rel_err']:.1e}", flush=True)
    if readme:
        with tempfile.TemporaryDirectory(prefix="warp_gemm_first_") as cache:
            wall, proc = _spawn(["examples/02_odd_shapes.py"], cache, timeout=1800)
        rows.append({"case": "README main command (examples/02_odd_shapes.py)", "process_s": wall,
                     "returncode": proc.returncode, "output": proc.stdout.splitlines()[-20:]})
        print(f"README main command: {wall:.1f} s wall, exit {proc.returncode}", flush=True)
    return rows


# --- host -------------------------------------------------------------------------------------------------
def _pool(torch, dt: str, m: int, n: int, k: int, wt: bool, size: int):
    tdt = _torch_dtype(torch, dt)
    out = []
    for _ in range(size):
        a = torch.randn(m, k, device="cuda").to(tdt)
        b = torch.randn(n, k, device="cuda").to(tdt).T if wt else torch.randn(k, n, device="cuda").to(tdt)
        out.append((a, b))
    return out


def _loop(torch, fn, ops) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for a, b in ops:
        fn(a, b)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / len(ops) * 1e6


def host_suite(repeats: int = 3) -> list[dict]:
    import torch
    import warp as wp

    import warp_gemm
    from warp_gemm.core import execute

    wp.init()
    rows = []
    for label, dt, m, n, k, wt, size in HOST_CASES:
        ops = _pool(torch, dt, m, n, k, wt, size)
        warm = _pool(torch, dt, m, n, k, wt, 1)
        warp_gemm.matmul(*warm[0])  # plans the shape (kernel builds, the template)
        torch.matmul(*warm[0])
        best = {"new": float("inf"), "new_no_rebind": float("inf"), "seen": float("inf"), "torch": float("inf")}
        for _ in range(repeats):
            execute._fast.clear()  # forget the addresses (plans keyed on them), keep the re-bindable templates
            execute._plans.clear()
            best["new"] = min(best["new"], _loop(torch, warp_gemm.matmul, ops))
            best["seen"] = min(best["seen"], _loop(torch, warp_gemm.matmul, ops))
            execute._fast.clear()
            execute._plans.clear()
            with warp_gemm.options(rebind=False):
                best["new_no_rebind"] = min(best["new_no_rebind"], _loop(torch, warp_gemm.matmul, ops))
            best["torch"] = min(best["torch"], _loop(torch, torch.matmul, ops))
        row = {"case": label, "pool": size, **{f"{k}_us": v for k, v in best.items()},
               "new_over_torch": best["new"] / best["torch"]}
        rows.append(row)
        print(f"{label:<28} new {best['new']:7.1f} us  (no rebind {best['new_no_rebind']:7.1f})  seen "
              f"{best['seen']:6.1f}  torch {best['torch']:6.1f}  new/torch {row['new_over_torch']:.2f}", flush=True)
        del ops
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="warp-gemm bench --suite first-call|host", description=__doc__.splitlines()[0])
    p.add_argument("suite", nargs="?", choices=("first-call", "host"), default="first-call")
    p.add_argument("--jobs", type=int, default=1, help="first-call: cases run in this many processes at once "
                   "(default 1: each compile has the machine to itself)")
    p.add_argument("--no-readme", action="store_true", help="first-call: skip the README main command")
    p.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    p.add_argument("--_child", dest="child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(_MARK + json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    rows = first_call_suite(args.jobs, not args.no_readme) if args.suite == "first-call" else host_suite()
    if args.json:
        Path(args.json).write_text(json.dumps({"suite": args.suite, "jobs": args.jobs, "rows": rows}, indent=1))
        print(f"# wrote {args.json}")
    return 0 if all("error" not in r and r.get("returncode", 0) == 0 for r in rows) else 1


if __name__ == "__main__":
    # run as a file (the first-call children): its folder's modules must not shadow others
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.exit(main())
