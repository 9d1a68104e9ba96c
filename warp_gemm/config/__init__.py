"""Tile configurations (configs.py: Config, candidates, the heuristic) and the tuned tables
(tables.py: per-GPU winners, shipped and user-measured). Depends only on ``_compat``."""

from warp_gemm.config.configs import Config, candidate_configs, choose, heuristic  # noqa: F401
