"""Everything the grouped family takes from the rest of warp_gemm, in one place.

The pipelined family's building blocks (its configuration record, copy / product / store snippets, the stage
copier and the kernel helpers) and the core's operand and launch helpers. When those modules move, only the
imports below change.
"""

from warp_gemm import _compat  # noqa: F401
from warp_gemm.core.launches import convert, launch  # noqa: F401
from warp_gemm.core.operands import ITEMSIZE, Operand, describe, empty_like_caller, raw_view, wp_view  # noqa: F401
from warp_gemm.core.options import options  # noqa: F401
from warp_gemm.kernels.common import ITEM_BYTES, WP_DTYPES, acc_dtype_name, grouped_tile  # noqa: F401
from warp_gemm.kernels.pipelined import (  # noqa: F401
    _COMMIT as COMMIT,
    _WAIT as WAIT,
    _ZERO_ACC as ZERO_ACC,
    PipeSpec,
    _check as check_pipe_spec,
    _copy_snippet as copy_snippet,
    _copy_t_snippet as copy_t_snippet,
    _mma_sync_snippet as mma_sync_snippet,
    _native as native,
    _own_store_snippet as own_store_snippet,
    _simt_mma_snippet as simt_mma_snippet,
    _stage_copier as stage_copier,
    _staged_store_snippet as staged_store_snippet,
    _store_snippet as store_snippet,
    _stub_acc as stub_acc,
    _stub_copy as stub_copy,
    _stub_int as stub_int,
    _stub_mma as stub_mma,
    _stub_own_store as stub_own_store,
    _stub_staged_store as stub_staged_store,
    _stub_store as stub_store,
    has_warp_features,
    native_acc,
    native_store,
    smem_bytes,
    staged_store,
)
from warp_gemm.autograd import CONSUMES_OUTPUT_GRAD, _tape_paused as tape_paused, accumulate, active_tape  # noqa: F401
