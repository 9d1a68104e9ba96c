"""The one shape list shared by the tests, ``warp-gemm check`` and the benchmarks.

A shape is ``(M, N, K)`` or ``(B, M, N, K)`` for a batched product. Each named set is a list of
:class:`Shape`; ``Shape.id`` gives readable test ids such as ``M1023-N1025-K1027``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int
    batch: int = 0  # 0: a plain 2-D product; >= 1: a 3-D batched product

    @property
    def id(self) -> str:
        b = f"B{self.batch}-" if self.batch else ""
        return f"{b}M{self.M}-N{self.N}-K{self.K}"

    @property
    def flops(self) -> int:
        return 2 * max(self.batch, 1) * self.M * self.N * self.K

    def __str__(self) -> str:
        return self.id


def _s(M: int, N: int, K: int, batch: int = 0) -> Shape:
    return Shape(M, N, K, batch)


#: How a literal shape is written on a command line.
FORMAT = "MxNxK or BxMxNxK (e.g. 1023x1025x1027, or 8x512x512x64 for a batch of 8)"


def parse_shape(text: str) -> Shape:
    """Parse ``MxNxK``, ``BxMxNxK`` or an id such as ``M7-N13-K97`` into a :class:`Shape`; ValueError naming
    :data:`FORMAT` otherwise."""
    t = text.strip()
    try:
        if t.upper().startswith(("M", "B")) and "-" in t:
            parts = {p[0].upper(): int(p[1:]) for p in t.split("-")}
            shape = Shape(parts["M"], parts["N"], parts["K"], parts.get("B", 0))
        else:
            dims = [int(x) for x in t.lower().replace("*", "x").split("x")]
            if len(dims) not in (3, 4):
                raise ValueError
            shape = Shape(*dims) if len(dims) == 3 else Shape(dims[1], dims[2], dims[3], dims[0])
    except (ValueError, KeyError, IndexError):
        raise ValueError(f"cannot parse shape {text!r}: expected {FORMAT}") from None
    if min(shape.M, shape.N, shape.K, shape.batch) < 0:
        raise ValueError(f"shape {text!r} has a negative size")
    return shape


def tile_edges(tiles: list[tuple[int, int, int]]) -> list[Shape]:
    """tile-1 / tile / tile+1 in every dimension at once for each (TM, TN, TK) tile."""
    out = []
    for tm, tn, tk in tiles:
        for d in (-1, 0, 1):
            out.append(_s(tm + d, tn + d, tk + d))
    return out


# Tiny and degenerate shapes: a 1x1x1 product, row/column vectors, primes, K below one K tile.
TINY = [
    _s(1, 1, 1),
    _s(1, 37, 1),
    _s(1, 1, 53),
    _s(37, 1, 1),
    _s(7, 13, 97),
    _s(13, 7, 5),
    _s(97, 251, 7),
    _s(251, 97, 13),
    _s(64, 64, 3),  # K smaller than one K tile
]

PRIMES = [
    _s(7, 7, 7),
    _s(13, 13, 13),
    _s(97, 97, 97),
    _s(251, 251, 251),
    _s(1021, 7, 13),
    _s(7, 1021, 97),
]

# Skinny M (1..16) with N, K >= 1000: the decode-style products.
SKINNY = [
    _s(1, 1000, 1024),
    _s(5, 1031, 1000),
    _s(16, 1024, 1021),
]

LARGE_ODD = [
    _s(1000, 500, 1500),
    _s(1023, 1025, 1027),
]

BATCHED = [
    _s(7, 13, 97, batch=3),
    _s(33, 17, 65, batch=2),
]

# The odd-shape matrix the tests and `warp-gemm check` run (tile edges are added per device from
# the configurations the heuristic can pick; see tests/conftest.py and warp_gemm.check).
ODD = TINY + PRIMES + SKINNY + LARGE_ODD

# A small representative subset: quick enough for the Triton interpreter and `check --shapes small`.
SMALL = [_s(1, 1, 1), _s(7, 13, 97), _s(64, 64, 3), _s(97, 251, 7), _s(65, 33, 129), _s(5, 300, 257)]

# Benchmark sets: squares, odd sides, skinny, transformer, batched, and a quick set.
BENCH_SQUARE = [_s(n, n, n) for n in (1024, 2048, 4096, 8192)]
BENCH_ODD = [_s(1000, 1000, 1000), _s(1023, 1025, 1027), _s(4095, 4095, 4095), _s(4097, 4097, 4097),
             _s(127, 4099, 1031)]
BENCH_SKINNY = [_s(16, 8192, 8192), _s(8192, 8192, 64), _s(1, 4096, 4096)]
BENCH_TRANSFORMER = [_s(4096, 11008, 4096), _s(4096, 4096, 11008)]
BENCH_BATCHED = [_s(512, 512, 512, batch=32)]
BENCH_QUICK = [_s(128, 128, 128), _s(127, 129, 131), _s(16, 512, 512)]
# The pipelined family's tuner (warp-gemm tune --family pipelined): one shape per shape bucket where the
# planner picks that family -- large squares, the one-wave small configuration (1000^3), the odd shape
# and the 2-wave shape of the 96-row rule (families/pipelined/), a batch of small products.
TUNE_PIPE = [_s(4096, 4096, 4096), _s(8192, 8192, 8192), _s(2048, 2048, 2048), _s(1536, 1536, 1536),
             _s(1000, 1000, 1000), _s(512, 512, 512), _s(1023, 1025, 1027), _s(2048, 1024, 1024),
             _s(256, 256, 256, batch=64)]
# The family tuner's default (``warp-gemm tune --family families``): small, batched, skinny and GEMV
# products and their neighbours, where the planner's rules choose among several families at their edges.
TUNE_FAMILY = [_s(32, 32, 32, batch=4096), _s(16, 16, 16, batch=10000), _s(16, 16, 16, batch=1000),
               _s(256, 256, 256, batch=64), _s(64, 64, 64, batch=256), _s(16, 8192, 8192), _s(8, 4096, 4096),
               _s(32, 4096, 4096), _s(1, 4096, 4096), _s(1, 8192, 8192), _s(4096, 1, 4096), _s(64, 64, 64),
               _s(256, 256, 256), _s(127, 4099, 1031), _s(128, 1024, 1024)]

SETS: dict[str, list[Shape]] = {
    "tiny": TINY,
    "primes": PRIMES,
    "skinny": SKINNY,
    "large": LARGE_ODD,
    "batched": BATCHED,
    "odd": ODD + BATCHED,
    "small": SMALL,
    "bench-square": BENCH_SQUARE,
    "bench-odd": BENCH_ODD,
    "bench-skinny": BENCH_SKINNY,
    "bench-transformer": BENCH_TRANSFORMER,
    "bench-batched": BENCH_BATCHED,
    "bench-quick": BENCH_QUICK,
    "tune-pipe": TUNE_PIPE,
    "tune-family": TUNE_FAMILY,
    "bench-all": BENCH_SQUARE + BENCH_ODD + BENCH_SKINNY + BENCH_TRANSFORMER + BENCH_BATCHED,
}


def get_set(names: str) -> list[Shape]:
    """Shapes of one or more comma-separated set names or literal shapes (``7x13x97``); ValueError naming the
    sets and :data:`FORMAT` for anything else."""
    out: list[Shape] = []
    for name in names.split(","):
        name = name.strip()
        if not name:
            continue
        if name in SETS:
            out.extend(SETS[name])
        else:
            try:
                out.append(parse_shape(name))
            except ValueError:
                raise ValueError(f"unknown shape {name!r}: expected a set name ({', '.join(SETS)}) or {FORMAT}, "
                                 "comma-separated") from None
    return out
