"""Everything the grouped family's kernels take from the rest of warp_gemm, in one place: the pipelined
family's configuration record and its copy / product / store snippets, the stage copier, the kernel helpers.
When those modules move, only the imports below change."""

from warp_gemm import _compat  # noqa: F401
from warp_gemm.families.common.kernels import ITEM_BYTES, WP_DTYPES, acc_dtype_name, grouped_tile  # noqa: F401
from warp_gemm.families.common.native import fill  # noqa: F401
from warp_gemm.families.common.native import func as native  # noqa: F401
from warp_gemm.families.common.native import load as native_load  # noqa: F401

# the Hopper family's kernel body (TMA + wgmma), its configuration record and tensor maps: the grouped Hopper kernel
from warp_gemm.families.hopper import tma  # noqa: F401
from warp_gemm.families.hopper.kernel import __file__ as hopper_kernel_file  # noqa: F401
from warp_gemm.families.hopper.kernel import fields as hopper_fields  # noqa: F401
from warp_gemm.families.hopper.kernel import tma_stage as hopper_tma_stage  # noqa: F401
from warp_gemm.families.hopper.rules import STAGES as HOPPER_STAGES  # noqa: F401
from warp_gemm.families.hopper.spec import SMEM_LIMIT, HopperSpec  # noqa: F401
from warp_gemm.families.hopper.spec import unfit as hopper_unfit  # noqa: F401
from warp_gemm.families.pipelined.kernel import _stage_copier as stage_copier  # noqa: F401
from warp_gemm.families.pipelined.snippets import (  # noqa: F401
    _COMMIT as COMMIT,
)
from warp_gemm.families.pipelined.snippets import (
    _WAIT as WAIT,
)
from warp_gemm.families.pipelined.snippets import (
    _ZERO_ACC as ZERO_ACC,
)
from warp_gemm.families.pipelined.snippets import (
    _copy_snippet as copy_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _copy_t_snippet as copy_t_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _mma_sync_snippet as mma_sync_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _own_store_snippet as own_store_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _simt_mma_snippet as simt_mma_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _staged_store_snippet as staged_store_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _store_snippet as store_snippet,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_acc as stub_acc,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_copy as stub_copy,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_int as stub_int,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_mma as stub_mma,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_own_store as stub_own_store,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_staged_store as stub_staged_store,
)
from warp_gemm.families.pipelined.snippets import (
    _stub_store as stub_store,
)
from warp_gemm.families.pipelined.spec import PipeSpec, native_acc, native_store, staged_store  # noqa: F401
from warp_gemm.families.pipelined.spec import _check as check_pipe_spec  # noqa: F401
