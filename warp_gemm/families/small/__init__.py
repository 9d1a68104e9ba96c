"""The small family: batched products whose whole outputs fit one tile, several matrices per block."""

from .kernel import SmallSpec, choose_spec, launch_args, workspace_shape
