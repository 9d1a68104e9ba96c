"""The configuration for one problem: a tuned winner (the user's table, then the shipped one) for CUDA
devices, else the heuristic (configs.py)."""

from __future__ import annotations

from warp_gemm.config import tables
from warp_gemm.config.configs import Config, heuristic


def choose(device, dtype: str, layout: str, M: int, N: int, K: int, batch: int, tf32: bool = False) -> Config:
    """The configuration for one problem: a tuned winner (user cache, then the shipped table) for
    CUDA devices, else :func:`heuristic`. ``device`` is a Warp device."""
    if not device.is_cpu:
        hit = tables.lookup(device, dtype, layout, M, N, K, batch, tf32)
        if hit is not None:
            return hit
    return heuristic(device.is_cpu, dtype, M, N, K, batch)


def reachable_configs(device_is_cpu: bool, dtype: str) -> list[Config]:
    """Every configuration :func:`choose` can return for ``dtype`` without a user tuning cache: the
    heuristic's branches and the shipped table's entries. The tests take tile-1/tile/tile+1 shapes
    of each."""
    found = {heuristic(device_is_cpu, dtype, M, N, K, 1)
             for M in (8, 100, 4096) for N in (100, 4096) for K in (100, 4096)}
    if not device_is_cpu:
        found.update(tables.shipped_configs(dtype))
    return sorted(found)
