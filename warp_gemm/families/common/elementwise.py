"""Elementwise kernels the call path needs around a GEMM: dtype conversion with broadcasting (padded and
strided copies, C brought into the output), staging into 16-byte aligned rows, fills (K == 0), and the
split-K finishing pass. Factories only; ``core.launches`` launches them."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import functools
import threading

import warp as wp

from warp_gemm import _compat
from warp_gemm.families.common import native
from warp_gemm.families.common.kernels import WP_DTYPES

lock = threading.Lock()  # held while a factory builds (Warp's codegen is not thread-safe)


@functools.cache
def convert_kernel(src_dtype: str, dst_dtype: str):
    SRC = WP_DTYPES[src_dtype]
    DST = WP_DTYPES[dst_dtype]
    # Scale in float64 for float64 data, float32 otherwise (16-bit data is exact in float32).
    F = wp.float64 if "float64" in (src_dtype, dst_dtype) else wp.float32

    def convert(dst: wp.array3d(dtype=DST), src: wp.array3d(dtype=SRC), scale: F):
        b, i, j = wp.tid()
        # A source dimension of extent 1 broadcasts.
        sb = wp.min(b, src.shape[0] - 1)
        si = wp.min(i, src.shape[1] - 1)
        sj = wp.min(j, src.shape[2] - 1)
        dst[b, i, j] = DST(F(src[sb, si, sj]) * scale)

    return _compat.make_kernel(convert, f"wg_convert_{src_dtype}_{dst_dtype}")


@functools.cache
def finish_kernel(acc_dtype: str, out_dtype: str):
    W_T = WP_DTYPES[acc_dtype]
    OUT = WP_DTYPES[out_dtype]

    def finish(dst: wp.array3d(dtype=OUT), w: wp.array3d(dtype=W_T), c: wp.array3d(dtype=OUT),
               alpha: W_T, beta: W_T, use_c: int):
        b, i, j = wp.tid()
        r = alpha * w[b, i, j]
        if use_c != 0:
            r = r + beta * W_T(c[wp.min(b, c.shape[0] - 1), wp.min(i, c.shape[1] - 1), wp.min(j, c.shape[2] - 1)])
        dst[b, i, j] = OUT(r)

    return _compat.make_kernel(finish, f"wg_finish_{acc_dtype}_{out_dtype}")


@functools.cache
def fill_kernel(dtype: str):
    T = WP_DTYPES[dtype]

    def fill(dst: wp.array3d(dtype=T), value: float):
        b, i, j = wp.tid()
        dst[b, i, j] = T(value)

    return _compat.make_kernel(fill, f"wg_fill_{dtype}")


# --- staging: operands copied into rows that start on 16-byte boundaries ----------------------------------
# One thread per 16-byte chunk of a destination row: the chunk's elements are read one by one (the source
# rows are only element-aligned), packed, and stored with one 16-byte store; past the source row's end the
# chunk is zero-filled (the destination's padding columns). fp16 4095x4095 on an H100: 26 us (2.6 TB/s)
# against 112 us for convert_kernel's element-per-thread copy. A and B are
# staged by one launch (a 1-D grid over both operands' chunks): the second launch cost ~2.7 us of a 45 us
# fp16 1023x1025x1027 call (H100).
_STAGE = native.load(__file__, "stage.cuh")["stage"]
_BITS = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


@functools.cache
def stage_kernel(dtype: str):
    """``stage(dst_a, src_a, dst_b, src_b, n_a)`` launched over ``n_a + n_b`` threads, ``n_x`` being
    ``dst_x``'s 16-byte chunks: each ``src_x`` (any strides) into the first ``c`` columns of ``dst_x``
    (``(nb, r, cp)``, 16-byte aligned rows), zeros after. One operand: ``n_b = 0`` (b's arrays unread)."""
    T = WP_DTYPES[dtype]
    item = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]

    def stub(dst: wp.array3d(dtype=T), src: wp.array3d(dtype=T), t: int): ...

    stub.__name__ = stub.__qualname__ = f"wg_stage_chunk_{dtype}"
    chunk = wp.func_native(native.fill(_STAGE, E=16 // item, ITEM=item, BITS=_BITS[item]))(stub)

    def stage(dst_a: wp.array3d(dtype=T), src_a: wp.array3d(dtype=T), dst_b: wp.array3d(dtype=T),
              src_b: wp.array3d(dtype=T), n_a: int):
        t = wp.tid()
        if t < n_a:
            chunk(dst_a, src_a, t)
        else:
            chunk(dst_b, src_b, t - n_a)

    return _compat.make_kernel(stage, f"wg_stage_{dtype}")
