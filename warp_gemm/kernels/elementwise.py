"""Elementwise kernels the call path needs around a GEMM: dtype conversion with broadcasting (padded and
strided copies, C brought into the output), fills (K == 0), and the split-K finishing pass. Factories
only; ``core.launches`` launches them."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import functools
import threading

import warp as wp

from warp_gemm import _compat
from warp_gemm.kernels.common import WP_DTYPES

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
