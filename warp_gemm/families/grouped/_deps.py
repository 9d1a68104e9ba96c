"""Everything the grouped family's kernels take from the rest of warp_gemm, in one place: the pipelined
family's configuration record and its copy / product / store snippets, the stage copier, the kernel helpers.
When those modules move, only the imports below change."""

from warp_gemm import _compat  # noqa: F401
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
    native_acc,
    native_store,
    staged_store,
)
