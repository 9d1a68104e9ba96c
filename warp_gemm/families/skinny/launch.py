"""Skinny family: its launches for one plan (tile launches of ``kernel.launch_args``)."""

from __future__ import annotations

from ..common.kernels import tile_launches
from .kernel import launch_args

launches = tile_launches(launch_args)
