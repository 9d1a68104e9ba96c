"""The tiled family: one Warp tile kernel per configuration, tile_load / tile_matmul / tile_store, split-K."""

from . import launch, rules
from .kernel import K_CHUNK_BYTES, KernelSpec, _build, get_kernel, occupancy_bound, smem_pads, spec_for
