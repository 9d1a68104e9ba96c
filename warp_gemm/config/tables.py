"""Autotuner: pick the fastest tile configuration per (GPU arch, dtype, layout, shape bucket).

``warp_gemm.tune(...)`` / ``warp-gemm tune`` compile every candidate of :func:`candidate_configs` in
parallel processes (a cold MathDx GEMM compile costs ~60 s, so serial compiles would dominate), time
each candidate on each shape in one process with CUDA events, and persist the winners in a JSON file per
Warp release and GPU under ``~/.cache/warp_gemm`` (``WARP_GEMM_CACHE_DIR`` overrides). Lookups consult
that file first and then the shipped default table measured on an H100 (``data/tuned_sm90.json``).
A corrupt or stale file is ignored with a warning, never a crash.

Shape buckets: ``(ceil(log2 M), ceil(log2 N), ceil(log2 K))`` with M clamped to >= 16 so all skinny
problems share buckets, and the batch folded into M. A tiled-family lookup takes the nearest tuned bucket
within L1 distance 2 (a factor of 4 in one dimension); further away the heuristic decides. A pipelined
lookup (the ``|pipe`` groups) takes its own bucket only (tile choices there follow wave counts).

File layout (``FORMAT`` 1): ``{"format": 1, "entries": {group: {"m,n,k": configuration}}, ...}``. A group
``"sm90|float16|NN"`` holds tiled-family :class:`Config` strings (``128x128x64/b256/g8/o2``); a group with
the suffix ``"|pipe"`` (``"sm90|float16|NN|pipe"``) holds the pipelined family's :class:`PipeConfig`
strings (``pipe/128x128x128/s2/b256/o1``; :func:`lookup_pipe`). Files without pipe groups are the same
as before. A group with the suffix ``"|family"`` (``"sm90|float16|NN|family"``) holds kernel family names
(``"skinny"``, ``"tiled"``, ...: :data:`FAMILY_NAMES`) keyed ``"m,n,k,b"`` (``b``: 1 for a batch of several
products, else 0): the family that measured fastest in that bucket (``warp-gemm tune --family families``;
:func:`lookup_family`, consulted first by the planner's family choice, ``core.plan._plan_family``).
``benchmarks/ship_table.py`` copies a tuned file's groups into the shipped table.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import threading
import time
import warnings
from importlib import resources
from pathlib import Path

from warp_gemm import _compat
from warp_gemm.config.configs import Config, PipeConfig, candidate_configs

FORMAT = 1  # bump when the file layout changes; other formats are ignored as stale
PIPE = "|pipe"  # suffix of the groups that hold pipelined-family configurations
FAMILY = "|family"  # suffix of the groups that hold the fastest kernel family per bucket
#: The families a ``|family`` group may name (those ``Options.family`` forces on CUDA; core/plan.py).
FAMILY_NAMES = ("tiled", "pipelined", "splitpipe", "small", "skinny", "gemv", "hopper")
_lock = threading.Lock()
_tables: dict[str, dict] = {}  # path -> parsed entries


def bucket(M: int, N: int, K: int, batch: int = 1) -> tuple[int, int, int]:
    m = max(M, 1) * max(batch, 1)
    return (max(4, math.ceil(math.log2(max(m, 16)))), math.ceil(math.log2(max(N, 1))),
            math.ceil(math.log2(max(K, 1))))


def family_bucket(M: int, N: int, K: int, batch: int = 1) -> tuple[int, int, int, int]:
    """:func:`bucket` with M's side not raised to 16, plus 1 for a batch of several products, else 0: the family that
    wins a bucket differs between a batch and one product of the same folded size (64 x 256^3 against 16384 x 256 x
    256), and between M = 1, 2-8 and 9-16 (a GEMV, splitpipe's narrow rows; tuning on the H100 put
    1 x 8192^2 (gemv, 55 us) and 16 x 8192^2 (splitpipe, 60 us) in one bucket, whose winner "tiled" -- the one
    family that planned both -- ran them at 110 and 103 us)."""
    m = max(M, 1) * max(batch, 1)
    return (math.ceil(math.log2(m)),) + bucket(M, N, K, batch)[1:] + (1 if batch > 1 else 0,)


def _family_name(text: str) -> str:
    if text not in FAMILY_NAMES:
        raise ValueError(f"unknown kernel family {text!r} (one of {', '.join(FAMILY_NAMES)})")
    return text


def arch_of(device) -> str:
    """``sm90`` etc. for a Warp CUDA device."""
    arch = getattr(device, "arch", None)
    return f"sm{arch}" if arch else "unknown"


def cache_dir() -> Path:
    return Path(os.environ.get("WARP_GEMM_CACHE_DIR", Path.home() / ".cache" / "warp_gemm"))


def user_cache_path(device) -> Path:
    name = "".join(ch if ch.isalnum() else "-" for ch in getattr(device, "name", "gpu")).strip("-")
    return cache_dir() / f"tuned-warp{_compat.WARP_VERSION}-{arch_of(device)}-{name}.json"


def _shipped_path(arch: str) -> Path | None:
    try:
        p = resources.files("warp_gemm.config") / "data" / f"tuned_{arch}.json"
        return Path(str(p)) if p.is_file() else None
    except (ModuleNotFoundError, FileNotFoundError):
        return None


def _load(path: Path | None) -> dict:
    """Entries of one table file: {"arch|dtype|layout": {"m,n,k": "config"}}; {} if absent/bad."""
    if path is None:
        return {}
    key = str(path)
    with _lock:
        if key in _tables:
            return _tables[key]
        entries: dict = {}
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                if not isinstance(data, dict) or data.get("format") != FORMAT:
                    raise ValueError(f"format {data.get('format') if isinstance(data, dict) else '?'} != {FORMAT}")
                for group, rows in data["entries"].items():
                    fam = group.endswith(FAMILY)
                    parse = _family_name if fam else PipeConfig.parse if group.endswith(PIPE) else Config.parse
                    entries[group] = {_bucket_key(b, 4 if fam else 3): parse(c) for b, c in rows.items()}
            except Exception as e:  # corrupt or stale: ignore, never crash a GEMM call
                warnings.warn(f"warp_gemm: ignoring tuning table {path}: {type(e).__name__}: {e}", stacklevel=3)
                entries = {}
        _tables[key] = entries
        return entries


def _bucket_key(text: str, fields: int = 3) -> tuple[int, ...]:
    key = tuple(int(x) for x in text.split(","))
    if len(key) != fields:
        raise ValueError(f"bucket {text!r}: {fields} comma-separated integers expected")
    return key


def _nearest(rows: dict, b: tuple[int, int, int], reach: int = 2) -> Config | None:
    """The entry of the nearest bucket within L1 distance ``reach``, or None."""
    best, best_d = None, reach + 1
    for bb, cfg in rows.items():
        d = sum(abs(x - y) for x, y in zip(bb, b))
        if d < best_d:
            best, best_d = cfg, d
    return best


_memo: dict[tuple, Config | None] = {}  # lookup results; cleared whenever a table is saved
#: Called after every save (layers above register here; this module imports none of them).
on_save: list = []


def lookup(device, dtype: str, layout: str, M: int, N: int, K: int, batch: int, tf32: bool = False) -> Config | None:
    """The tuned configuration for a problem, or None (then the heuristic decides).

    Memoized per (GPU, dtype, layout, bucket): resolving the table paths costs ~40 us, which matters
    next to a 1000^3 GEMM's ~100 us on an H100."""
    return _memoized(device, dtype, layout, bucket(M, N, K, batch), tf32, "")


def lookup_pipe(device, dtype: str, layout: str, M: int, N: int, K: int, batch: int,
                tf32: bool = False) -> PipeConfig | None:
    """The tuned pipelined-family configuration for a problem (the ``"...|pipe"`` groups), or None (then
    ``pipelined.default_spec`` decides). The same order and borrowing as :func:`lookup`: the user's table,
    then the shipped one; bfloat16 takes float16's winners where it has none; an untuned layout takes the
    NN winner of the bucket. Memoized the same way (a dictionary hit per planned call)."""
    return _memoized(device, dtype, layout, bucket(M, N, K, batch), tf32, PIPE)


def lookup_family(device, dtype: str, layout: str, M: int, N: int, K: int, batch: int,
                  tf32: bool = False) -> str | None:
    """The kernel family that measured fastest in the problem's bucket (the ``"...|family"`` groups:
    :func:`family_bucket`, that bucket only), or None (then the planner's rules decide). Borrowing and
    memoization as :func:`lookup_pipe`."""
    return _memoized(device, dtype, layout, family_bucket(M, N, K, batch), tf32, FAMILY)


def _memoized(device, dtype: str, layout: str, b: tuple[int, ...], tf32: bool, suffix: str):
    """:func:`_lookup`, memoized per (group kind, GPU, dtype, layout, bucket, tf32, cache dir); cleared on save."""
    key = (suffix, getattr(device, "arch", None), getattr(device, "name", None), dtype, layout, b, tf32,
           os.environ.get("WARP_GEMM_CACHE_DIR"))
    try:
        return _memo[key]
    except KeyError:
        pass
    hit = _lookup(device, dtype, layout, b, tf32, suffix)
    _memo[key] = hit
    return hit


def _lookup(device, dtype: str, layout: str, b: tuple[int, ...], tf32: bool, suffix: str = ""):
    arch = arch_of(device)
    dt = "tf32" if tf32 else dtype
    # bfloat16 borrows float16's winners where it has none of its own: the two measured within 2%
    # of each other on every tuned shape (H100, Warp 1.19).
    dts = (dt, "float16") if dt == "bfloat16" else (dt,)
    for table in (_load(user_cache_path(device)), _load(_shipped_path(arch))):
        for d in dts:
            for lay in (layout, "NN"):  # untuned layouts borrow the NN winner of the bucket
                rows = table.get(f"{arch}|{d}|{lay}{suffix}")
                if rows:
                    # Pipelined winners apply to their own bucket only: their tile shapes follow wave
                    # counts, which change abruptly between neighbouring buckets (fp16 256x2048x2048 took
                    # the 1023x1025x1027 bucket's 96x128 tiles at distance 2 and ran 54.9 us against 31.2
                    # with the built-in 64x32, H100).
                    # So do the family winners (the families' reach changes with wave counts as much).
                    hit = _nearest(rows, b, 2 if suffix == "" else 0)
                    if hit is not None:
                        return hit
    return None


def shipped_configs(dtype: str) -> list[Config]:
    """Every tiled-family configuration in the shipped tables for ``dtype`` (for tests and precompile)."""
    return sorted(_shipped(dtype, pipe=False))


def shipped_pipe_configs(dtype: str) -> list[PipeConfig]:
    """Every pipelined-family configuration in the shipped tables for ``dtype`` ("tf32" for float32 with
    tf32; bfloat16 includes float16's, which it borrows), for precompile and tests."""
    return sorted(_shipped(dtype, pipe=True))


def _shipped_files() -> list[Path]:
    data_dir = resources.files("warp_gemm.config") / "data"
    try:
        return [Path(str(p)) for p in data_dir.iterdir() if p.name.startswith("tuned_")]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _shipped(dtype: str, pipe: bool) -> set:
    out = set()
    for f in _shipped_files():
        for group, rows in _load(f).items():
            if group.endswith(PIPE) != pipe or group.endswith(FAMILY):
                continue
            want = (dtype, "float16" if dtype == "bfloat16" else dtype) if pipe else \
                (dtype, "tf32" if dtype == "float32" else dtype, "float16" if dtype == "bfloat16" else dtype)
            if group.split("|")[1] in want:
                out.update(rows.values())
    return out


# --- tuning -------------------------------------------------------------------------------------------
def save(path: Path, entries: dict, meta: dict | None = None) -> None:
    """Merge ``entries`` into the table at ``path`` (atomic replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("format") == FORMAT:
                old = data["entries"]
        except Exception:
            old = {}
    for g, rows in entries.items():
        old.setdefault(g, {}).update(rows)
    data = {"format": FORMAT, "warp": _compat.WARP_VERSION, "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
            **(meta or {}), "entries": old}
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
    with _lock:
        _tables.pop(str(path), None)
        _memo.clear()
    for fn in list(on_save):  # e.g. core.execute drops its call plans: they may hold the old choice
        fn()
