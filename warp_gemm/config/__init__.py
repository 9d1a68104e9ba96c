"""Tile configurations (configs.py: Config, candidates, the heuristic) and the tuned tables
(tables.py: per-GPU winners, shipped and user-measured). Depends only on ``_compat``."""

from warp_gemm.config.choice import choose, reachable_configs  # noqa: F401
from warp_gemm.config.configs import Config, candidate_configs, heuristic  # noqa: F401
