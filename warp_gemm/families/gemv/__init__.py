"""The GEMV family: matrix-vector products (a smaller output side of 1) streamed with 16-byte loads, no tiles."""

from . import launch, rules
from .kernel import get_kernel, kernels
from .launch import launch_args
from .snippets import _snippet
from .spec import (
    BANDS_BLOCK,
    BANDS_FINISH_WARPS,
    BANDS_FINISHERS,
    BANDS_FUSED_GROUPS,
    BANDS_GROUPS,
    BANDS_MAX_SPLITS,
    BANDS_MIN_BYTES,
    BANDS_SPLIT_TO,
    BANDS_UNROLL,
    BLOCK_DIM,
    COLSUM_BLOCK,
    COLSUM_BLOCK_ONE_WAVE,
    KINDS,
    MAX_SPLITS,
    TARGET_WARPS_PER_SM,
    UNROLL,
    GemvSpec,
    bands_choice,
    choose_spec,
    counters_len,
    has_native_returns,
    kind_for,
    splits,
    workspace_shape,
)
