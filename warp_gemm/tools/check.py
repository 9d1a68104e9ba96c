"""``warp-gemm check``: cross-validate warp_gemm against Triton and a float64 ground truth.

For every shape x dtype x layout it draws fresh inputs (:func:`warp_gemm.tools.tolerance.random_operands`, a
new seed per case), stores them in the layout's order (``tn``: A stored as ``(K, M)`` and passed with
``trans_a=True``; first letter A, second B), runs

- ``warp_gemm.gemm`` into an output pre-filled with NaN (an unwritten element fails),
- the Triton reference (:func:`warp_gemm.tools.reference.triton_gemm`; on CPU under Triton's interpreter),
- :func:`warp_gemm.tools.reference.float64_gemm` on the same (rounded) inputs,

and compares each path with the float64 result under :func:`warp_gemm.tools.tolerance.compare`. It prints one
row per case, a summary line, and returns 0 only if nothing failed (skips are not failures).

On the CPU, ``--backend host`` (the default, as for the library) checks the host BLAS path and
``--backend tiles`` the Warp tile kernels (the CUDA kernels' CPU twin); the header names the backend and
every row the kernel family warp_gemm planned.

Usage::

    warp-gemm check --device cpu --shapes small --dtype fp32,fp16
    warp-gemm check --device cpu --backend tiles --shapes 7x13x97,65x33x129
    warp-gemm check --shapes odd,4096x4096x4096 --layouts nn,tn --json check.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from warp_gemm.tools import dtypes as dtypes_mod
from warp_gemm.tools import reference
from warp_gemm.tools import shapes
from warp_gemm.tools import tolerance
from warp_gemm.tools.shapes import Shape

LAYOUTS = ("nn", "tn", "nt", "tt")
PATHS = ("warp_gemm", "triton")


# --- options ------------------------------------------------------------------------------------------


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _warp_cuda() -> bool:
    from warp_gemm.tools.devices import cuda_count

    try:
        return cuda_count() > 0
    except Exception:  # noqa: BLE001 - a Warp that cannot start offers no CUDA device
        return False


def _cuda_available() -> bool:
    """CUDA through torch when installed (it does not import triton), else through Warp."""
    if _has_torch():
        import torch

        return torch.cuda.is_available()
    return _warp_cuda()


def cuda_problem() -> str | None:
    """Why ``--device cuda`` cannot run here (one line), or None."""
    if not _warp_cuda():
        return "no CUDA device here (Warp sees none); use --device cpu"
    if _has_torch():
        import torch

        if not torch.cuda.is_available():
            return (f"torch {torch.__version__} has no CUDA (a CPU build), and check makes its CUDA operands "
                    "with torch: install a CUDA build of torch, or use --device cpu")
    return None


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="warp-gemm check", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where to run (default: cuda if available, else cpu)")
    p.add_argument("--backend", choices=("host", "tiles"), default=None,
                   help="CPU products: host (the host BLAS, the library's default) or tiles (the Warp tile "
                        "kernels, warp_gemm.options(cpu_backend='tiles')); on CUDA the Warp kernels always run")
    p.add_argument("--dtype", default=None,
                   help=f"comma list of {dtypes_mod.SPELLINGS} (default: fp16, bf16, fp32, fp64 where available)")
    p.add_argument("--shapes", default=None,
                   help=f"comma list of set names ({', '.join(shapes.SETS)}) or {shapes.FORMAT} "
                        "(default: odd on cuda, small on cpu); 'odd' adds the tile edges of the "
                        "configurations warp_gemm can pick for the device and dtype")
    p.add_argument("--layouts", default=",".join(LAYOUTS),
                   help="comma list of nn, tn, nt, tt (first letter: A transposed or not; default: all)")
    p.add_argument("--json", metavar="PATH", default=None, help="also write every result to PATH as JSON")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton reference")
    p.add_argument("--seed", type=int, default=None,
                   help="base seed (case i uses seed+i; default: random, printed in the header)")
    args = p.parse_args(argv)

    args.device = args.device or ("cuda" if _cuda_available() else "cpu")
    if args.device == "cuda":
        why = cuda_problem()
        if why:
            p.exit(2, f"{p.prog}: error: --device cuda: {why}\n")
        if args.backend == "host":
            p.error("--backend host is the CPU's host BLAS; on CUDA the Warp kernels run (leave --backend out)")
    args.backend = args.backend or ("host" if args.device == "cpu" else "cuda")
    args.layouts = _csv(args.layouts)
    bad = [x for x in args.layouts if x not in LAYOUTS]
    if bad:
        p.error(f"unknown layout(s) {', '.join(bad)}; choose from {', '.join(LAYOUTS)}")
    if args.dtype is not None:
        try:
            args.dtype = dtypes_mod.parse_list(args.dtype)
        except ValueError as e:
            p.error(str(e))
    args.shapes = args.shapes or ("odd" if args.device == "cuda" else "small")
    try:
        shapes.get_set(args.shapes)
    except ValueError as e:
        p.error(str(e))
    if args.seed is None:
        args.seed = int(np.random.SeedSequence().entropy % 2**31)
    return args


# --- results ------------------------------------------------------------------------------------------


@dataclass
class PathResult:
    status: str  # "pass", "FAIL" or "skip"
    rel_fro: float | None = None
    bound: float | None = None
    max_abs: float | None = None
    worst_excess: float | None = None  # elementwise error as a multiple of its bound (<= 1 passes)
    nonfinite: int | None = None
    seconds: float | None = None
    reason: str | None = None  # why skipped, or the exception that failed it
    family: str | None = None  # the kernel family warp_gemm planned (warp_gemm path only)

    @classmethod
    def from_comparison(cls, cmp: tolerance.Comparison, seconds: float) -> PathResult:
        return cls("pass" if cmp.ok else "FAIL", cmp.rel_fro, cmp.bound, cmp.max_abs, cmp.worst_excess,
                   cmp.nonfinite, seconds)


@dataclass
class Case:
    shape: Shape
    dtype: str
    layout: str
    seed: int
    paths: dict[str, PathResult] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(r.status == "FAIL" for r in self.paths.values())

    def to_json(self) -> dict[str, Any]:
        return {"shape": self.shape.id, "M": self.shape.M, "N": self.shape.N, "K": self.shape.K,
                "batch": self.shape.batch, "dtype": self.dtype, "layout": self.layout, "seed": self.seed,
                "paths": {k: asdict(v) for k, v in self.paths.items()}}


# --- the environment ----------------------------------------------------------------------------------


class Env:
    """What can run here: the warp_gemm entry point, torch, the Triton reference, bfloat16."""

    def __init__(self, device: str, use_triton: bool):
        self.device = device
        # Triton reads TRITON_INTERPRET when its kernels are decorated; set it before anything imports
        # triton (only possible if nothing has yet).
        if device == "cpu" and use_triton:
            reference.enable_interpreter()
        self.torch = None
        if _has_torch():
            import torch

            self.torch = torch
        self.gemm = None
        self.gemm_error = None
        self.warp_version = None
        self.has_bf16_warp = True
        self.tiles = None  # (device, dtype) -> the (tm, tn, tk) tiles warp_gemm can pick
        try:
            import warp_gemm

            self.gemm = warp_gemm.gemm
            self.warp_version = str(getattr(warp_gemm, "WARP_VERSION", "?"))
            try:
                from warp_gemm.config.choice import reachable_configs

                self.tiles = lambda dev, dt: {(c.tm, c.tn, c.tk) for c in reachable_configs(dev == "cpu", dt)}
            except ImportError:
                pass
            try:
                from warp_gemm import _compat

                self.has_bf16_warp = bool(getattr(_compat, "HAS_BF16", True))
            except ImportError:
                pass
        except Exception as e:  # the API may be missing or broken: report it per case, keep checking
            self.gemm_error = f"warp_gemm.gemm is not importable ({type(e).__name__}: {e})"
        self.triton_ok, self.triton_why = (False, "--no-triton") if not use_triton else \
            reference.triton_available(device)

    def default_dtypes(self) -> list[str]:
        return [d for d in tolerance.DTYPES if self.dtype_skip(d) is None]

    def dtype_skip(self, dtype: str) -> str | None:
        """Why no path can run ``dtype`` here, or None."""
        dtype = dtypes_mod.storage(dtype)[0]
        if dtype == "bfloat16" and self.torch is None:
            return "bfloat16 operands need torch (numpy has no bfloat16)"
        if self.device == "cuda" and self.torch is None:
            return "CUDA operands need torch"
        return None

    def header(self, args) -> str:
        triton = "off (--no-triton)" if args.no_triton else (self.triton_why if self.triton_ok else
                                                              f"unavailable: {self.triton_why}")
        from warp_gemm.tools.explain import backend

        return (f"warp-gemm check: device={self.device} warp-lang={self.warp_version} "
                f"torch={getattr(self.torch, '__version__', None)} triton={triton} seed={args.seed} "
                f"python={platform.python_version()}\nbackend: {backend(self.device)}")


# --- one case -----------------------------------------------------------------------------------------


def _storage(x64: np.ndarray, trans: bool) -> np.ndarray:
    """The float64 array as stored: the transpose (of the last two dims), contiguous, when ``trans``."""
    return np.ascontiguousarray(np.swapaxes(x64, -1, -2)) if trans else np.ascontiguousarray(x64)


def _container(env: Env, x64: np.ndarray, dtype: str):
    """A torch tensor on the device (when torch is available) or a numpy array on the CPU. ``x64`` is
    already rounded to ``dtype``, so the conversion is exact."""
    if env.torch is not None:
        t = env.torch
        return t.from_numpy(x64).to(getattr(t, dtype)).to(env.device)
    return x64.astype(dtype)


def _nan_out(env: Env, shape: tuple[int, ...], dtype: str):
    if env.torch is not None:
        t = env.torch
        return t.full(shape, float("nan"), dtype=getattr(t, dtype), device=env.device)
    return np.full(shape, np.nan, dtype=dtype)


def _sync(env: Env) -> None:
    if env.torch is not None and env.device == "cuda":
        env.torch.cuda.synchronize()


def _error(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"


def run_case(env: Env, shape: Shape, dtype: str, layout: str, seed: int, use_triton: bool) -> Case:
    """One case; ``dtype`` a canonical name (``tf32``: float32 operands, TF32 products allowed, its bound)."""
    case = Case(shape, dtype, layout, seed)
    dtype, tf32 = dtypes_mod.storage(dtype)
    rng = np.random.default_rng(seed)
    a64, b64 = tolerance.random_operands(shape.M, shape.N, shape.K, dtype, rng, batch=shape.batch)
    ref = reference.float64_gemm(a64, b64)
    ta, tb = layout[0] == "t", layout[1] == "t"
    a = _container(env, _storage(a64, ta), dtype)
    b = _container(env, _storage(b64, tb), dtype)

    # warp_gemm
    if env.gemm is None:
        case.paths["warp_gemm"] = PathResult("skip", reason=env.gemm_error)
    elif dtype == "bfloat16" and not env.has_bf16_warp:
        case.paths["warp_gemm"] = PathResult("skip", reason="this warp-lang has no bfloat16")
    else:
        out = _nan_out(env, ref.shape, dtype)
        try:
            from warp_gemm.tools.explain import family

            fam = family(a, b, trans_a=ta, trans_b=tb, out=out, allow_tf32=tf32)
        except Exception:  # noqa: BLE001 - the call below reports what is wrong
            fam = None
        t0 = time.perf_counter()
        try:
            res = env.gemm(a, b, trans_a=ta, trans_b=tb, out=out, allow_tf32=tf32)
            _sync(env)
            dt = time.perf_counter() - t0
            case.paths["warp_gemm"] = PathResult.from_comparison(
                tolerance.compare(reference.to_float64(res), ref, dtype, tf32), dt)
        except Exception as e:
            case.paths["warp_gemm"] = PathResult("FAIL", reason=_error(e))
        case.paths["warp_gemm"].family = fam

    # Triton
    if not use_triton:
        case.paths["triton"] = PathResult("skip", reason="--no-triton")
    elif not env.triton_ok:
        case.paths["triton"] = PathResult("skip", reason=env.triton_why)
    elif env.torch is None:
        case.paths["triton"] = PathResult("skip", reason="the Triton reference needs torch")
    else:
        t0 = time.perf_counter()
        try:
            # One fixed configuration: autotuning would compile and time ~10 per new (M, N, K).
            res = reference.triton_gemm(a, b, trans_a=ta, trans_b=tb, tune=False, allow_tf32=tf32)
            _sync(env)
            dt = time.perf_counter() - t0
            case.paths["triton"] = PathResult.from_comparison(
                tolerance.compare(reference.to_float64(res), ref, dtype, tf32), dt)
        except TypeError as e:  # a dtype tl.dot does not take on this device (float64): not a failure
            case.paths["triton"] = PathResult("skip", reason=_error(e))
        except Exception as e:
            case.paths["triton"] = PathResult("FAIL", reason=_error(e))
    return case


# --- the run ------------------------------------------------------------------------------------------


def case_shapes(env: Env, names: str, dtype: str) -> list[Shape]:
    """The shapes of ``names``; with the "odd" set, plus the tile edges (tile-1, tile, tile+1) of every
    configuration warp_gemm's heuristic or shipped table can pick for this device and dtype (as
    tests/test_matmul.py does). Duplicates are dropped."""
    out = shapes.get_set(names)
    if "odd" in _csv(names) and env.tiles is not None:
        out = out + shapes.tile_edges(sorted(env.tiles(env.device, dtypes_mod.storage(dtype)[0])))
    return list(dict.fromkeys(out))


class Progress:
    """Progress on stderr: a tqdm bar on a terminal if tqdm is installed, else a counter (rewritten in
    place on a terminal, one line per 10% of the cases in a log)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.tty = sys.stderr.isatty()
        self.bar = None
        if self.tty:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, file=sys.stderr, unit="case", leave=False)
            except ImportError:
                pass

    def step(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)
        elif self.tty:
            print(f"\r[{self.done}/{self.total}] {label:<40}", end="", file=sys.stderr, flush=True)
        elif self.total >= 20 and self.done * 10 // self.total != (self.done - 1) * 10 // self.total:
            print(f"[{self.done}/{self.total}]", file=sys.stderr, flush=True)

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stdout)
        else:
            if self.tty and self.done:
                print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)
            print(line, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.tty and self.done:
            print(file=sys.stderr)


def _cell(r: PathResult) -> str:
    if r.status == "skip":
        return f"{'-':>9} {'-':>7} {'skip':<4}"
    if r.rel_fro is None:  # an exception
        return f"{'error':>9} {'-':>7} {r.status:<4}"
    return f"{r.rel_fro:9.2e} {r.bound:7.0e} {r.status:<4}"


def _row(case: Case, width: int) -> str:
    cells = "  ".join(_cell(case.paths[p]) for p in PATHS)
    fam = case.paths["warp_gemm"].family or "-"
    return f"{case.shape.id:<{width}}  {case.dtype:<8}  {case.layout:<6}  {cells}  {fam}"


def _header_rows(width: int) -> list[str]:
    sub = "  ".join(f"{'rel_err':>9} {'bound':>7} {'':<4}" for _ in PATHS)
    top = "  ".join(f"{p:<22}" for p in PATHS)
    pre = f"{'shape':<{width}}  {'dtype':<8}  {'layout':<6}  "
    return [" " * len(pre) + top, pre + sub + "  warp_gemm family", "-" * (len(pre) + len(sub) + 18)]


def main(argv: list[str] | None = None) -> int:
    """Run the check; returns the exit status (0: no failures, 1: a failure, 2: bad arguments)."""
    args = parse_args(argv)
    if args.device == "cpu":
        import warp_gemm

        with warp_gemm.options(cpu_backend=args.backend):
            return _run(args)
    return _run(args)


def _run(args) -> int:
    use_triton = not args.no_triton
    env = Env(args.device, use_triton)
    dtypes = args.dtype or env.default_dtypes()

    cases: list[tuple[Shape, str, str]] = []
    skipped_dtypes: dict[str, str] = {}
    for dtype in dtypes:
        why = env.dtype_skip(dtype)
        if why:
            skipped_dtypes[dtype] = why
            continue
        cases += [(s, dtype, lay) for s in case_shapes(env, args.shapes, dtype) for lay in args.layouts]

    print(env.header(args))
    for dtype, why in skipped_dtypes.items():
        print(f"skipping {dtype}: {why}")
    if env.gemm is None:
        print(f"note: {env.gemm_error}")
    width = max([len(s.id) for s, _, _ in cases] + [5])
    for line in _header_rows(width):
        print(line)

    results: list[Case] = []
    progress = Progress(len(cases))
    t_start = time.perf_counter()
    try:
        for i, (shape, dtype, layout) in enumerate(cases):
            case = run_case(env, shape, dtype, layout, args.seed + i, use_triton)
            results.append(case)
            progress.write(_row(case, width))
            for name in PATHS:
                r = case.paths[name]
                if r.status == "FAIL":
                    detail = r.reason or (f"max_abs={r.max_abs:.2e}, elementwise {r.worst_excess:.2f}x of "
                                          f"bound, non-finite={r.nonfinite}")
                    progress.write(f"    {name} FAILED ({shape.id} {dtype} {layout}, seed {case.seed}): "
                                   f"{detail}")
            progress.step(f"{shape.id} {dtype} {layout}")
    finally:
        progress.close()

    counts = {p: {"pass": 0, "FAIL": 0, "skip": 0} for p in PATHS}
    reasons: dict[str, set[str]] = {p: set() for p in PATHS}
    for c in results:
        for p, r in c.paths.items():
            counts[p][r.status] += 1
            if r.status == "skip" and r.reason:
                reasons[p].add(r.reason)
    for p in PATHS:
        for why in sorted(reasons[p]):
            print(f"{p} skipped: {why}")
        n = counts[p]
        print(f"{p}: {n['pass']} passed, {n['FAIL']} failed, {n['skip']} skipped")
    fams: dict[str, int] = {}
    for c in results:
        f = c.paths["warp_gemm"].family
        if f is not None:
            fams[f.split()[0]] = fams.get(f.split()[0], 0) + 1
    if fams:
        print("warp_gemm families: " + ", ".join(f"{f} {n}" for f, n in sorted(fams.items())))
    passed = sum(n["pass"] for n in counts.values())
    failed = sum(n["FAIL"] for n in counts.values())
    skipped = sum(n["skip"] for n in counts.values())
    elapsed = time.perf_counter() - t_start
    print(f"{passed} passed, {failed} failed, {skipped} skipped ({len(results)} cases, {elapsed:.1f} s)")

    if args.json:
        doc = {"device": env.device, "backend": args.backend, "seed": args.seed, "shapes": args.shapes, "dtypes": dtypes,
               "layouts": args.layouts, "warp_version": env.warp_version,
               "torch": getattr(env.torch, "__version__", None),
               "triton": env.triton_why if env.triton_ok else None,
               "summary": {"passed": passed, "failed": failed, "skipped": skipped, "per_path": counts},
               "cases": [c.to_json() for c in results]}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
