"""The family registry: planner order for ``core.plan``, lookup by name for ``core.execute``."""

from __future__ import annotations

from .base import Family
from .composite import peel, splitpipe
from .gemv import launch as _gemv_launch
from .gemv import rules as _gemv_rules
from .pipelined import launch as _pipelined_launch
from .skinny import launch as _skinny_launch
from .skinny import rules as _skinny_rules
from .small import launch as _small_launch
from .small import rules as _small_rules
from .tiled import launch as _tiled_launch

#: Planner order: batched small outputs, matrix-vector, a small side split over K, skinny, the pipelined family
#: (its edges peeled where that saves a wave); the tiled family takes the rest (``plan`` None: core.plan's
#: fallback).
REGISTRY: tuple[Family, ...] = (
    Family("small", _small_rules.plan, _small_launch.launches),
    Family("gemv", _gemv_rules.plan, _gemv_launch.launches),
    Family("splitpipe", splitpipe.plan, splitpipe.launches),
    Family("skinny", _skinny_rules.plan, _skinny_launch.launches),
    Family("pipelined", peel.plan, _pipelined_launch.launches),
    Family("tiled", None, _tiled_launch.launches),
)

_BY_NAME = {f.name: f for f in REGISTRY}


def get(name: str) -> Family:
    """The registered family called ``name``."""
    return _BY_NAME[name]
