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

    @classmethod
    def parse(cls, text: str) -> Config:
        """Inverse of ``str``: ``128x128x64/b256/g8[/s0][/o2]`` (all but the tile shape optional)."""
        parts = text.strip().split("/")
        tm, tn, tk = (int(x) for x in parts[0].split("x"))
        opts = {"b": 256, "g": 8, "s": 1, "o": 0}
        for part in parts[1:]:
            if not part or part[0] not in opts:
                raise ValueError(f"bad configuration {text!r}: unknown field {part!r}")
            opts[part[0]] = int(part[1:])
        return cls(tm, tn, tk, opts["b"], opts["g"], opts["s"], opts["o"])

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
    # 128 registers per thread and one block fits), results/lever_probe_h200_r5.json.
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
        # padded tiles: 18.5 TFLOP/s at 4096^3 against 14.7 for 64x64x32 (results/round1-tuning/tune_h100_run3.jsonl)
        return Config(128, 64, 64, 256)
    if tiles_128 < 132:
        return Config(64, 64, 128 if wide else 64, 128, 8, 0)
    if wide:
        # Padded tiles, chunked epilogue, two blocks per SM: 100.9 TFLOP/s at fp16 4096^3 against 88.6
        # for 128x128x256 (H100 tuner, 2026-11-21).
        return Config(128, 128, 64, 256, occupancy=2)
    # float32/tf32: two blocks per SM; exact float32 32.4 TFLOP/s at 4096^3 against 28.8 for 128x128x64 and
    # 26.0 for the same tiles without the bound (H100 sweep, benchmarks/results/round1-tuning/sweep_h100_s1.jsonl).
    return Config(128, 128, 32, 256, occupancy=2)
