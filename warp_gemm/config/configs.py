"""Tile configurations and the per-problem choice among them.

``choose(...)`` returns one :class:`Config` for a problem: the tuned winner from the autotuner's cache
or the shipped default table when one matches (see :mod:`warp_gemm.config.tables`), else the heuristic below.
Every figure quoted here was measured on an H100 80GB with warp-lang 1.19 (docs/performance.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Config:
    tm: int
    tn: int
    tk: int
    block_dim: int
    group_m: int = 8
    split_k: int = 1  # K splits; 0 = automatic (see split_count)
    # Blocks per SM the compiler must leave registers for (CUDA ``__launch_bounds__(block_dim, n)``,
    # Warp 1.19+); 0 = no bound. See the 16-bit candidates for the measured reason.
    occupancy: int = 0

    def __str__(self) -> str:
        s = f"/s{self.split_k}" if self.split_k != 1 else ""
        o = f"/o{self.occupancy}" if self.occupancy else ""
        return f"{self.tm}x{self.tn}x{self.tk}/b{self.block_dim}/g{self.group_m}{s}{o}"

    def __post_init__(self):
        for name in ("tm", "tn", "tk", "block_dim", "group_m", "split_k", "occupancy"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"Config: {name} must be an integer, got {type(v).__name__} {v!r}")
        for name in ("tm", "tn", "tk", "block_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"Config: {name} must be positive, got {getattr(self, name)}")
        for name in ("group_m", "split_k", "occupancy"):
            if getattr(self, name) < 0:
                raise ValueError(f"Config: {name} must be 0 or more, got {getattr(self, name)}")

    #: The text form :meth:`parse` reads (and ``str`` writes).
    FORMAT = "TMxTNxTK[/bBLOCK][/gGROUP_M][/sSPLIT_K][/oOCCUPANCY], e.g. 128x128x64/b256/g8"

    @classmethod
    def parse(cls, text: str) -> Config:
        """Inverse of ``str``: ``128x128x64/b256/g8[/s0][/o2]`` (all but the tile shape optional). A string
        of another form is a ValueError naming :data:`FORMAT`; anything but a string a TypeError."""
        if not isinstance(text, str):
            raise TypeError(f"Config.parse takes a string ({cls.FORMAT}), got {type(text).__name__}")
        parts = text.strip().split("/")
        dims = parts[0].split("x")
        try:
            if len(dims) != 3:
                raise ValueError
            tm, tn, tk = (int(x) for x in dims)
        except ValueError:
            raise ValueError(f"bad configuration {text!r}: the tile shape {parts[0]!r} is not TMxTNxTK; "
                             f"expected {cls.FORMAT}") from None
        opts = {"b": 256, "g": 8, "s": 1, "o": 0}
        for part in parts[1:]:
            if not part or part[0] not in opts:
                raise ValueError(f"bad configuration {text!r}: unknown field {part!r}; expected {cls.FORMAT}")
            try:
                opts[part[0]] = int(part[1:])
            except ValueError:
                raise ValueError(f"bad configuration {text!r}: field {part!r} is not {part[0]} followed by an "
                                 f"integer; expected {cls.FORMAT}") from None
        try:
            return cls(tm, tn, tk, opts["b"], opts["g"], opts["s"], opts["o"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"bad configuration {text!r}: {e}") from None

    def to_json(self) -> str:
        return str(self)


# CPU: Warp runs one thread per block (block_dim is forced to 1 before 1.18's enable_cpu_blocks), so
# the tile shape only trades loop overhead against wasted work on partial tiles. One configuration
# keeps CPU use to one compiled kernel per dtype/layout/epilogue (~2 s each on a 2-core machine).
CPU_CONFIG = Config(32, 32, 32, 1, 8)

# CUDA candidates searched by the autotuner (warp_gemm.tune) and the benchmark sweep.
_CUDA_CANDIDATES_16 = [
    Config(128, 128, 64, 256),
    Config(128, 128, 128, 256),
    Config(128, 128, 256, 256),
    Config(128, 256, 64, 256),
    Config(256, 128, 64, 256),
    Config(64, 64, 128, 128),
    Config(64, 128, 128, 128),
    Config(64, 64, 256, 128),
    Config(64, 128, 64, 128),
    Config(128, 64, 64, 128),
    # Two or more blocks per SM where the padded tiles leave room (128x128x64: 105 KiB of shared
    # memory): one block's loads overlap another's MMAs. fp16 4096^3 with a 32-row-chunk epilogue:
    # 96.9 TFLOP/s with __launch_bounds__(256, 2), 64.6 without (the compiler then takes more than
    # 128 registers per thread and one block fits; H200).
    Config(128, 128, 64, 256, occupancy=2),
    Config(64, 64, 128, 128, occupancy=4),
    Config(64, 128, 64, 128, occupancy=3),
    Config(16, 128, 256, 128),
    Config(32, 128, 256, 128),
    Config(16, 128, 256, 128, 8, 0),
    Config(64, 64, 128, 128, 8, 0),
    Config(64, 128, 128, 128, 8, 0),
]
_CUDA_CANDIDATES_32 = [
    Config(128, 128, 32, 256),
    Config(128, 128, 64, 256),
    Config(64, 64, 64, 128),
    Config(64, 128, 64, 128),
    Config(64, 64, 32, 128),
    Config(16, 128, 128, 128),
    Config(128, 128, 128, 256),
    Config(64, 128, 128, 128),
    Config(16, 128, 128, 128, 8, 0),
    Config(64, 64, 64, 128, 8, 0),
    Config(128, 128, 32, 256, occupancy=2),  # 105 KiB padded (tf32): two blocks per SM fit
]
_CUDA_CANDIDATES_64 = [
    Config(64, 64, 32, 128),
    Config(64, 64, 64, 128),
    Config(128, 64, 32, 256),
    Config(32, 64, 64, 128),
    Config(16, 64, 64, 64),
    Config(16, 64, 64, 64, 8, 0),
    Config(64, 64, 32, 128, 8, 0),
    Config(64, 64, 128, 128),
    Config(128, 64, 64, 256),
    Config(128, 128, 32, 256),
    Config(64, 64, 64, 128, occupancy=2),
    Config(64, 64, 32, 128, occupancy=3),
]


def split_count(cfg: Config, tiles: int, k_tiles: int, sm_count: int) -> int:
    """How many K splits to launch. ``split_k == 0`` (automatic): when the output tiles cannot fill the
    GPU (fewer than ``sm_count``), split K so about four blocks per SM run, keeping >= 2 K tiles per
    split; 16x8192x8192 fp16 has 64 output tiles of 16x128 for 132 SMs."""
    if cfg.split_k >= 1:
        return max(1, min(cfg.split_k, k_tiles))
    if tiles >= sm_count or k_tiles < 4:
        return 1
    return max(1, min(-(-4 * sm_count // tiles), k_tiles // 2, 32))


def candidate_configs(device: str, dtype: str) -> list[Config]:
    """Every configuration the tuner may pick for ``dtype`` on ``device`` ("cpu" or "cuda")."""
    if device.startswith("cpu"):
        return [CPU_CONFIG]
    if dtype in ("float16", "bfloat16"):
        return list(_CUDA_CANDIDATES_16)
    if dtype == "float32":
        return list(_CUDA_CANDIDATES_32)
    return list(_CUDA_CANDIDATES_64)


def heuristic(device_is_cpu: bool, dtype: str, M: int, N: int, K: int, batch: int) -> Config:
    """The untuned choice. CUDA rules (H100, warp-lang 1.19):

    - Large 16-bit problems: 128x128x64 tiles, two blocks per SM (see _CUDA_CANDIDATES_16).
    - Skinny M (<= 16): a 16-row tile so 15/16 of every MMA is not wasted on zero rows.
    - Problems with too few 128x128 tiles to fill 132 SMs: 64x64 tiles.
    """
    if device_is_cpu:
        return CPU_CONFIG
    wide = dtype in ("float16", "bfloat16")
    tiles_128 = max(batch, 1) * -(-M // 128) * -(-N // 128)
    if M <= 16:
        # split_k=0: automatic K splits (too few output tiles to fill the SMs otherwise).
        return Config(16, 128, 256 if wide else 128, 128, 8, 0)
    if dtype == "float64":
        # padded tiles: 18.5 TFLOP/s at 4096^3 against 14.7 for 64x64x32 (H100)
        return Config(128, 64, 64, 256)
    if tiles_128 < 132:
        return Config(64, 64, 128 if wide else 64, 128, 8, 0)
    if wide:
        # Padded tiles, chunked epilogue, two blocks per SM: 100.9 TFLOP/s at fp16 4096^3 against 88.6
        # for 128x128x256 (H100 tuner, 2026-11-21).
        return Config(128, 128, 64, 256, occupancy=2)
    # float32/tf32: two blocks per SM; exact float32 32.4 TFLOP/s at 4096^3 against 28.8 for 128x128x64 and
    # 26.0 for the same tiles without the bound (H100 sweep, benchmarks/results/tuning/tiled_fp32_sweep.jsonl).
    return Config(128, 128, 32, 256, occupancy=2)


# --- the pipelined family's configurations ---------------------------------------------------------------
@dataclass(frozen=True, order=True)
class PipeConfig:
    """What the autotuner searches in the pipelined family (``families/pipelined/``): the output tile
    ``tm x tn``, the K tile ``tk``, the K tiles held in shared memory (``stages``, 2-8, as fit), threads per block
    and the blocks per SM the compiler must leave registers for (``min_blocks``, CUDA
    ``__launch_bounds__``; 0: no bound), and ``persistent`` (> 0: a grid of that many blocks per SM, each
    looping over output tiles, the copies running ahead across them; 0: one tile per block; not with wgmma or
    stream-K), ``simt`` (exact float32 only: the K steps' product
    in CUDA-core FMAs of 8x8 outputs per thread instead of ``tile_matmul``, so ``block_dim`` is ``tm * tn /
    64``; the A/B rows then take the fp32 padding of 4 elements and the accumulator lives in registers) and
    ``mma`` (float16/bfloat16/tf32/float64: the product in ``mma.sync`` tensor-core instructions of ``block_dim / 32``
    warps instead of ``tile_matmul``; the accumulator lives in registers) and ``wgmma`` (float16/bfloat16, layout
    NT, sm_90 only: Hopper warpgroup MMAs from unpadded core-matrix stages, one warpgroup per 64 rows, so
    ``block_dim`` is ``2 * tm``), and ``stream_k`` (> 0, simt and mma only: a grid of that many blocks per SM sharing
    the K steps of all output tiles evenly, partial tiles summed in a fixed order; not a default). The
    shared-tile paddings and the copy chunk stay the family's per-dtype defaults (``pipelined.default_spec``). Written
    ``pipe/128x128x128/s2/b256/o1`` (``/p1`` appended where persistent, ``/k1`` where stream-K, ``/simt``, ``/mma``
    or ``/wgmma`` where those products)."""

    tm: int
    tn: int
    tk: int
    stages: int = 2
    block_dim: int = 256
    min_blocks: int = 0
    persistent: int = 0
    simt: bool = False
    mma: bool = False
    wgmma: bool = False
    stream_k: int = 0

    def __post_init__(self):
        for name in ("tm", "tn", "tk", "stages", "block_dim", "min_blocks", "persistent", "stream_k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"PipeConfig: {name} must be an integer, got {v!r}")
        for name in ("tm", "tn", "tk"):
            v = getattr(self, name)
            if not (16 <= v <= 512 and v % 16 == 0):
                raise ValueError(f"PipeConfig: tile {name} must be a multiple of 16 in 16..512, got {v}")
        if not 2 <= self.stages <= 8:
            raise ValueError(f"PipeConfig: stages (s) must be 2-8, got {self.stages}")
        if not (32 <= self.block_dim <= 1024 and self.block_dim % 32 == 0):
            raise ValueError(f"PipeConfig: block_dim (b) must be a multiple of 32 in 32..1024, got {self.block_dim}")
        if not 0 <= self.min_blocks <= 32:
            raise ValueError(f"PipeConfig: min_blocks (o) must be 0-32, got {self.min_blocks}")
        if not 0 <= self.persistent <= 8:
            raise ValueError(f"PipeConfig: persistent (p) must be 0-8 blocks per SM, got {self.persistent}")
        if not isinstance(self.simt, bool):
            raise ValueError(f"PipeConfig: simt must be True or False, got {self.simt!r}")
        for name in ("mma", "wgmma"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"PipeConfig: {name} must be True or False, got {getattr(self, name)!r}")
        if self.simt + self.mma + self.wgmma > 1:
            raise ValueError("PipeConfig: simt, mma and wgmma are different products: give one")
        if self.wgmma and self.persistent:
            raise ValueError("PipeConfig: wgmma kernels have no persistent blocks (p)")
        if self.persistent and self.stream_k:
            raise ValueError("PipeConfig: persistent blocks (p) and stream-K (k) are different grids: give one")
        if not 0 <= self.stream_k <= 8:
            raise ValueError(f"PipeConfig: stream_k (k) must be 0-8 blocks per SM, got {self.stream_k}")
        if self.stream_k and not (self.simt or self.mma):
            raise ValueError("PipeConfig: stream-K (k) is for the simt and mma kernels (their accumulators are "
                             "registers that spill to the workspace)")
        if self.min_blocks * self.block_dim > 2048:
            raise ValueError(f"PipeConfig: min_blocks (o{self.min_blocks}) x block_dim (b{self.block_dim}) is more "
                             "than the 2048 threads an SM holds")

    def __str__(self) -> str:
        per = f"/p{self.persistent}" if self.persistent else ""
        per += f"/k{self.stream_k}" if self.stream_k else ""
        per += "/simt" if self.simt else ""
        per += "/mma" if self.mma else ""
        per += "/wgmma" if self.wgmma else ""
        return f"pipe/{self.tm}x{self.tn}x{self.tk}/s{self.stages}/b{self.block_dim}/o{self.min_blocks}{per}"

    @classmethod
    def parse(cls, text: str) -> PipeConfig:
        """Inverse of ``str``: ``pipe/128x128x128/s2/b256/o1``; the fields after the tile shape may come
        in any order or be left out (defaults s2, b256, o0, p0; ``simt``, ``mma``, ``wgmma`` bare flags). Errors
        name the bad field."""
        if not isinstance(text, str):
            raise ValueError(f"bad pipelined configuration {text!r}: not a string")
        parts = text.strip().split("/")
        if parts[0] != "pipe":
            raise ValueError(f"bad pipelined configuration {text!r}: must start with 'pipe/'")
        if len(parts) < 2:
            raise ValueError(f"bad pipelined configuration {text!r}: tile shape (TMxTNxTK) missing")
        dims = parts[1].split("x")
        try:
            tm, tn, tk = (int(x) for x in dims)
        except ValueError:
            raise ValueError(f"bad pipelined configuration {text!r}: tile shape {parts[1]!r} is not TMxTNxTK") from None
        names = {"s": "stages", "b": "block_dim", "o": "min_blocks", "p": "persistent", "k": "stream_k"}
        vals = {"stages": 2, "block_dim": 256, "min_blocks": 0, "persistent": 0, "stream_k": 0}
        seen = set()
        flags = {"simt": False, "mma": False, "wgmma": False}
        for part in parts[2:]:
            if part in flags:
                if flags[part]:
                    raise ValueError(f"bad pipelined configuration {text!r}: {part} given twice")
                flags[part] = True
                continue
            if not part or part[0] not in names:
                raise ValueError(f"bad pipelined configuration {text!r}: unknown field {part!r} (s, b, o, p, k, "
                                 "simt, mma, wgmma)")
            name = names[part[0]]
            if name in seen:
                raise ValueError(f"bad pipelined configuration {text!r}: {name} ({part[0]}) given twice")
            seen.add(name)
            try:
                vals[name] = int(part[1:])
            except ValueError:
                raise ValueError(f"bad pipelined configuration {text!r}: {name} ({part[0]}) is not an integer: "
                                 f"{part!r}") from None
        try:
            return cls(tm, tn, tk, **vals, **flags)
        except ValueError as e:
            raise ValueError(f"bad pipelined configuration {text!r}: {str(e).removeprefix('PipeConfig: ')}") from None

    def to_json(self) -> str:
        return str(self)

    def fields(self) -> dict:
        """The ``kernels.pipelined.PipeSpec`` fields this configuration sets."""
        return {"tm": self.tm, "tn": self.tn, "tk": self.tk, "stages": self.stages, "block_dim": self.block_dim,
                "min_blocks": self.min_blocks, "persistent": self.persistent, "simt": self.simt,
                "mma": self.block_dim // 32 if self.mma else 0, "wgmma": self.wgmma, "stream_k": self.stream_k}


def _pc(text: str) -> PipeConfig:
    return PipeConfig.parse(text)


# Candidates of the pipelined family's tuner, around the measured bests in ``families/pipelined/spec.py``'s
# ``default_spec`` (H100, warp-lang 1.19, TFLOP/s at 4096^3 / 8192^3, NN). Those whose shared memory exceeds the
# per-block limit are dropped by ``families.pipelined.rules.candidate_pipe_configs``. The ``/pN`` ones (persistent
# blocks looping over output tiles) and the ``/mma`` ones (the mma.sync product: the 16-bit and tf32 defaults) are
# measured beside the others.
PIPE_CANDIDATES = {
    # 16-bit: 128x128x128 s2 o1 150/161 (the default); 128x128x64 s3/s4 118-132; 128x128x96 s3 138/148;
    # block 128 143/154; 128x64x128 the one-wave small problems (1000^3 70 against 50-53); 96x128 where
    # 128-row tiles waste a wave (1023x1025x1027 52.2 us against 58.7); 128x256x64 s2 needs 234 KB.
    # 64x32 and 64x64 for grids under half the SMs (127x4099x1031 30.8-31.4 us against 37.9). 128x128x64 s4
    # (118-132) is left out: below the default every time measured. With the copies' fast path
    # 128x128x128 with block 128 is the default (4096^3 182 against 177 for block 256; 128x128x64 s3/s4 147).
    "16bit": [_pc(t) for t in (
        "pipe/128x128x128/s2/b128/o1", "pipe/128x128x128/s2/b256/o1", "pipe/128x128x64/s3/b256/o1",
        "pipe/128x64x128/s2/b256/o1", "pipe/128x64x128/s3/b256/o1", "pipe/96x128x128/s2/b256/o1",
        "pipe/128x96x128/s2/b256/o1", "pipe/64x128x64/s3/b128/o2", "pipe/64x32x128/s2/b128/o1",
        "pipe/64x64x128/s2/b256/o1", "pipe/128x256x64/s2/b256/o1",  # (128x256x64: dropped, 234 KB)
        "pipe/128x128x128/s2/b128/o1/p1", "pipe/128x64x64/s2/b128/o2/p2",
        # mma.sync (H100 4096^3 NN: 303.8 (the default), 299.8, 267.1; 64x64x32 for small grids). The medium grids
        # run tile_matmul defaults; against them (cold us, one run):
        # 64x64x64 s3 o4 1000^3 21.0 against 24.6, 256x2048x2048 22.7 against 27.8, 1023x1025x1027 33.7 against
        # 38.0; 128x128x32 s3 o2 1536^3 46.5 against 65.3 (but 45.6 at 1023x1025x1027); 128x64x64 s3 o2 1000^3
        # 23.4 / 26.3 (two runs). No one tile wins every medium grid: the tuner's table decides.
        # Not candidates: 128x256x32 s3 o1 mma (1000^3 48.6 us, 64 x 256^3 27.1: never ahead) and 128x128x96 s3
        # (tile_matmul, never a default) to keep the tuner's time per bucket at 17 candidates.
        # 128x128x32 s4 o2: fp16 64 x 256^3 26.0 us cold against 28.5 for the
        # default and 26.9-29.0 for the other mma.sync tiles; cuBLAS 15.2).
        "pipe/128x128x64/s3/b128/o1/mma", "pipe/128x128x32/s3/b128/o2/mma", "pipe/64x64x32/s4/b128/o4/mma",
        "pipe/64x64x64/s3/b128/o4/mma", "pipe/128x64x64/s3/b128/o2/mma", "pipe/128x128x32/s4/b128/o2/mma")],
    # tf32: 128x128x64 s2 82/85 (the default); 128x128x32 s3/s4 66-68; block 512 76/79; small problems
    # 128x64x64 s3 (1000^3 44 against 32-33 for 128x128x64).
    "tf32": [_pc(t) for t in (
        "pipe/128x128x64/s2/b256/o1", "pipe/128x128x64/s2/b512/o1", "pipe/128x128x32/s3/b256/o1",
        "pipe/128x128x32/s4/b256/o1", "pipe/128x64x64/s3/b256/o1", "pipe/128x64x64/s2/b256/o1",
        "pipe/96x128x64/s2/b256/o1", "pipe/128x96x64/s2/b256/o1", "pipe/64x64x64/s2/b128/o2",
        "pipe/128x128x64/s2/b256/o1/p1",
        # mma.sync m16n8k8 (H100 4096^3 NN: 125.7 (the default), 95.8, 99.8)
        "pipe/128x128x32/s3/b128/o2/mma", "pipe/128x128x32/s3/b256/o1/mma", "pipe/128x64x32/s4/b128/o3/mma")],
    # exact float32, the SIMT kernel (H100 4096^3 NN):
    # 64x128x16 s3 o3 44.9 (the default), 128x64x16 s3 o3 41.7, o4 41.8, s4 40.8, 128x64x32 s2 o3 41.2;
    # 128x128x16 s2-s4 b256 o2 39.6-40.7, 128x128x32 s3 o1 40.1. Stream-K over three blocks per SM: the small-grid
    # default (H200 1000^3 69.5 us against 91.8 one tile per block, 72.1 over two).
    "float32": [_pc(t) for t in (
        "pipe/64x128x16/s3/b128/o3/simt", "pipe/128x64x16/s3/b128/o3/simt", "pipe/128x64x16/s3/b128/o4/simt",
        "pipe/64x128x16/s4/b128/o3/simt", "pipe/64x128x32/s2/b128/o3/simt", "pipe/128x64x32/s2/b128/o3/simt",
        "pipe/128x128x16/s3/b256/o2/simt", "pipe/128x128x32/s3/b256/o1/simt", "pipe/64x128x16/s3/b128/o3/k3/simt")],
    # float64, the DMMA kernel (mma.sync .f64, m16n8k8 where the K tile allows, the default's m16n8k16 on 32-deep
    # tiles; swizzled stages, interleaved K steps and edge copies over the large-grid default, pipelined.rules):
    # 128x64x32 s2 o2 swizzled, interleaved, m16n8k16 50.3-51.6 (the NN/NT/TN default; H100 4096^3 NN) against
    # 46.9-49.2 for 128x64x16 s4 o2 swizzled (the TT default; H200: 49.0, against 47.4-47.7 for s3 padded, 48.4 s3
    # swizzled). Padded, H100 4096^3 NN: 128x64x16 s3 o2 47.6, 128x128x16 b256 45.3, 64x64x16 45.5, 128x64x32 s2
    # 45.7, 64x128x16 44.3, 64x32x16 b64 40.8;
    # 1000^3: 64x64x32 68.4 us (m16n8k16); 64x64x16 o3 under stream-K over three blocks per SM (the small-grid
    # default) 60.1 against 65.4 for 64x64x32 on an H200. tile_matmul: 64x64x32 s2 b128 o2 24.5/25.1, 128x64x32 23.3-24.1.
    "float64": [_pc(t) for t in (
        "pipe/128x64x16/s4/b128/o2/mma", "pipe/128x64x16/s3/b128/o2/mma", "pipe/64x64x32/s3/b128/o2/mma", "pipe/64x64x16/s3/b128/o2/mma",
        "pipe/128x128x16/s3/b256/o1/mma", "pipe/64x128x16/s3/b128/o2/mma", "pipe/128x64x32/s2/b128/o2/mma",
        "pipe/64x32x16/s3/b64/o4/mma", "pipe/128x64x16/s3/b128/o2/p2/mma", "pipe/64x64x32/s2/b128/o2",
        "pipe/128x64x32/s2/b256/o1", "pipe/64x64x16/s3/b128/o3/k3/mma")],
}


def pipe_candidate_list(dtype: str, tf32: bool = False) -> list[PipeConfig]:
    """The pipelined tuner's raw candidates for ``dtype`` (before the shared-memory check, which needs
    the kernels: ``core.plan.candidate_pipe_configs``). Exact float32: the SIMT kernel's."""
    if dtype in ("float16", "bfloat16"):
        return list(PIPE_CANDIDATES["16bit"])
    if dtype == "float32":
        return list(PIPE_CANDIDATES["tf32" if tf32 else "float32"])
    if dtype == "float64":
        return list(PIPE_CANDIDATES["float64"])
    raise ValueError(f"no pipelined candidates for dtype {dtype!r}")
