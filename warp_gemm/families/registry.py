"""The family registry: planner order for ``core.plan``, lookup by name for ``core.execute``."""

from __future__ import annotations

from .base import Family
from .composite import peel, splitpipe
from .gemv import kernel as _gemv_kernel
from .gemv import launch as _gemv_launch
from .gemv import rules as _gemv_rules
from .hopper import launch as _hopper_launch
from .hopper import rules as _hopper_rules
from .pipelined import kernel as _pipelined_kernel
from .pipelined import rules as _pipelined_rules
from .skinny import kernel as _skinny_kernel
from .skinny import launch as _skinny_launch
from .skinny import rules as _skinny_rules
from .small import launch as _small_launch
from .small import rules as _small_rules
from .tiled import launch as _tiled_launch

#: Planner order: large 16-bit products on sm_90 (TMA + wgmma), batched small outputs, matrix-vector, a small side split over K, skinny, the pipelined family
#: (its edges peeled where that saves a wave); the tiled family takes the rest (``plan`` None: core.plan's
#: fallback).
REGISTRY: tuple[Family, ...] = (
    Family("hopper", _hopper_rules.plan, _hopper_launch.launches),
    Family("small", _small_rules.plan, _small_launch.launches),
    Family("gemv", _gemv_rules.plan, _gemv_launch.launches, 
           lambda dtypes, layouts, epilogues: _gemv_rules.precompile_jobs(dtypes, epilogues), _gemv_kernel.job_kernels),
    Family("splitpipe", splitpipe.plan, splitpipe.launches),
    Family("skinny", _skinny_rules.plan, _skinny_launch.launches, _skinny_rules.precompile_jobs,
           _skinny_kernel.job_kernels),
    Family("pipelined", peel.plan, peel.launches, _pipelined_rules.precompile_jobs, _pipelined_kernel.job_kernels),
    Family("tiled", None, _tiled_launch.launches),
)

_BY_NAME = {f.name: f for f in REGISTRY}


def get(name: str) -> Family:
    """The registered family called ``name``."""
    return _BY_NAME[name]


def find(name) -> Family | None:
    """The registered family called ``name``, or None."""
    return _BY_NAME.get(name) if isinstance(name, str) else None
