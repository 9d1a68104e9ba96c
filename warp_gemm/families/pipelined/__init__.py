"""The pipelined family: cp.async copies into shared stages overlapped with the product (mma.sync -- float64: DMMA --,
SIMT or tile_matmul)."""

from . import launch, rules
from .kernel import _factory_lock, get_kernel
from .launch import applies, has_native_tile_args, has_warp_features, launch_args
from .snippets import _COMMIT, _COPY, _WAIT, _copy_snippet, _from_sm80, _stub_copy, _stub_int
from .spec import (
    CHUNKS,
    DMMA_DEFAULT_K,
    DMMA_K,
    MMA_TYPES,
    NARROW_COST,
    PAD_AB,
    PAD_C,
    SHORT_K_STEPS,
    SIMT_ROWS,
    SIMT_TILE,
    SMEM_LIMIT,
    TINY_MIN_BATCH,
    PipeSpec,
    _check,
    default_spec,
    max_chunk,
    mma_warps,
    native_acc,
    native_store,
    simt_threads,
    smem_bytes,
    staged_store,
    tiny_batched,
    unfit,
)
from .stream_k import stream_k_dp_tiles, stream_k_sizes
