"""The Hopper family: fp16/bf16 GEMM (float32 sums) on sm_90 GPUs through TMA copies and warpgroup MMAs.

Each block is warp-specialised: one producer warpgroup streams 64-deep K tiles of A and B into 128-byte-swizzled
shared stages with TMA (``cp.async.bulk.tensor``, tensor maps built by the driver and kept in device memory),
completion counted on mbarriers; two consumer warpgroups multiply the stages with ``wgmma.mma_async`` (float32 sums
in registers, registers moved from the producer with ``setmaxnreg``), release each stage on its own mbarrier and
store ``alpha * A @ op(B) (+ beta * C)`` from the registers, or for 16-bit outputs of the smaller tiles through a shared
staging buffer copied out a row at a time (``HopperSpec.staged_store``). Blocks are persistent (one per SM) and take the output
tiles in grouped order. It applies on CUDA sm_90 (H100/H200) to A stored (M, K) row-major and B stored (K, N) or
(N, K) (F.linear's B = W.T), 16-bit inputs whose base addresses and row strides are multiples of 16 bytes (TMA's
rule), any M, N, K >= 1 and batch (TMA zero-fills the edges; stores are masked), float16, bfloat16 or float32
outputs; everything else goes to the other families (:func:`rules.applies` says why). Grids with fewer output tiles
than SMs and long K split K (``HopperSpec.splits``): float32 partial sums into a workspace, then a finishing pass.
"""

from .kernel import get_kernel, load, snippet
from .launch import grid_size, launch_args
from .rules import applies, default_spec
from .spec import HopperSpec, k_ranges, unfit

__all__ = ["HopperSpec", "applies", "default_spec", "get_kernel", "grid_size", "k_ranges", "launch_args", "load",
           "snippet", "unfit"]
