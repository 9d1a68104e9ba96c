"""The skinny family: M <= 16 or N <= 16 (matrix-vector products included), bandwidth-bound.

A product with a side of at most 16 does ~16 multiply-adds per element of the big operand, far under
what the H100 can do per byte, so its time is the time to stream the big operand (B for small M, A
for small N) once: fp16 16x8192x8192 moves 128 MiB, ~40 us at ~3.3 TB/s (issue 18's floor of
~48 TFLOP/s). The kernel therefore

- walks the big operand in tiles that are whole inside the array wherever possible: Warp copies a
  tile with 16-byte vector loads only when every dimension is in bounds (native/tile.h), so the last
  tile row/column is moved back to end at the matrix edge (``m_clamp``/``n_clamp``; the overlap is
  computed twice and stored twice with the same values) where C cannot alias D's overlap;
- keeps the small side in one tile (``TM`` or ``TN`` = 16 for the MathDx GEMM, or the next power of
  two >= the side, down to 1, for Warp's scalar GEMM);
- splits K across blocks where the output tiles alone would leave the 132 multiprocessors idle: each
  split writes its float32/float64 partial tile into a caller-provided workspace slab
  ``W[s * batch + b]`` and a finishing pass sums the slabs in order (deterministic), applies alpha,
  beta*C and the output cast. Without a split the kernel applies the epilogue itself.

The workspace, ``(splits * batch, M, N)`` in the accumulator dtype, is the caller's
(``workspace_shape``); this module never allocates.
"""

# No `from __future__ import annotations`: Warp reads the kernel's annotations as objects.
import dataclasses
import functools
import threading
from dataclasses import dataclass

import warp as wp

from .. import _compat
from .common import WP_DTYPES, acc_dtype_name

# The family applies where the smaller output side is at most this.
MAX_SMALL = 16


@dataclass(frozen=True)
class SkinnySpec:
    tm: int
    tn: int
    tk: int
    in_dtype: str
    out_dtype: str
    layout_a: str  # "N" or "T"
    layout_b: str
    epilogue: str  # "scale" or "axpby"
    block_dim: int = 128
    mathdx: bool = True  # False: Warp's scalar tile GEMM (module option enable_mathdx_gemm=False)
    # Extra columns of the shared A/B tiles and of the accumulator (MathDx only): dense tiles whose rows
    # are a multiple of 128 bytes start every row on the same bank and MathDx's fragment loads
    # serialise (kernels/tiled.py measured 64 -> 234 TFLOP/s for the MathDx call alone). The tiles
    # are loaded whole (vectorized) into registers and assigned into the padded shared tiles.
    pad_ab: int = 0
    pad_c: int = 0
    # K is split until the launch has about this many blocks (0: never split).
    target_blocks: int = 1056

    @property
    def acc_dtype(self) -> str:
        return acc_dtype_name(self.in_dtype)

    @property
    def kernel_key(self) -> str:
        """Names the compiled kernel: everything but ``target_blocks`` (a launch-time choice)."""
        g = "dx" if self.mathdx else "sc"
        if self.pad_ab or self.pad_c:
            g += f"_p{self.pad_ab}-{self.pad_c}"
        return (f"wg_skinny_{self.in_dtype}_{self.out_dtype}_{self.layout_a}{self.layout_b}_"
                f"{self.tm}x{self.tn}x{self.tk}_{self.epilogue}_b{self.block_dim}_{g}")

    @property
    def key(self) -> str:
        return f"{self.kernel_key}_t{self.target_blocks}"


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def splits(spec: SkinnySpec, M: int, N: int, K: int, batch: int) -> tuple[int, int]:
    """``(splits, k_tiles_per_split)`` for this problem: enough K splits to bring the launch to about
    ``spec.target_blocks`` blocks, never an empty split."""
    k_tiles = _ceil(K, spec.tk)
    tiles = batch * _ceil(M, spec.tm) * _ceil(N, spec.tn)
    if k_tiles <= 1 or tiles == 0 or spec.target_blocks <= tiles:
        return 1, max(k_tiles, 0)
    s = min(k_tiles, _ceil(spec.target_blocks, tiles))
    per = _ceil(k_tiles, s)
    return _ceil(k_tiles, per), per


def workspace_shape(spec: SkinnySpec, M: int, N: int, K: int, batch: int):
    """``((splits * batch, M, N), acc_dtype)`` where K is split, else None."""
    s, _ = splits(spec, M, N, K, batch)
    if s <= 1:
        return None
    return (s * batch, M, N), spec.acc_dtype


# (small-side bucket, dtype group) -> (tm or tn for the small side, big side tile, tk, block_dim, mathdx,
# target_blocks). Provisional until the H100 sweep lands.
_RULES: dict = {
    "vec": (1, 128, 64, 128, False, 1056),  # small side 1..4: scalar GEMM, small side padded to 1/2/4
    "mat": (16, 128, 64, 128, True, 1056),  # small side 5..16: MathDx, 16-wide
}


def choose_spec(device, dtype: str, layout_a: str, layout_b: str, M: int, N: int, K: int, batch: int,
                out_dtype: str, epilogue: str):
    """The spec for this problem, or None where the family does not apply (both sides over 16, an
    epilogue it does not have, or a Warp without ``tile_astype``). Where M <= 16 the kernel streams B,
    else (N <= 16) it streams A. For batched products with both sides <= 64 prefer kernels/small.py."""
    if epilogue not in ("scale", "axpby") or layout_a not in ("N", "T") or layout_b not in ("N", "T"):
        return None
    if dtype not in WP_DTYPES or out_dtype not in WP_DTYPES or not _compat.HAS_TILE_ASTYPE:
        return None
    if min(M, N) > MAX_SMALL or min(M, N, batch) < 1:
        return None
    small = min(M, N)
    is_cpu = getattr(device, "is_cpu", False) or str(device) == "cpu"
    side, big, tk, block_dim, mathdx, target = _RULES["vec" if small <= 4 else "mat"]
    if not mathdx or is_cpu:
        side = _pow2_at_least(small)
        mathdx = False
    if is_cpu:
        block_dim = 1
        target = 4 * max(1, (getattr(device, "cpu_count", 0) or 2))
    else:
        target = max(target, 8 * _compat.sm_count(device))
    if M <= N:
        return SkinnySpec(side, big, tk, dtype, out_dtype, layout_a, layout_b, epilogue, block_dim, mathdx, target)
    return SkinnySpec(big, side, tk, dtype, out_dtype, layout_a, layout_b, epilogue, block_dim, mathdx, target)


def launch_args(spec: SkinnySpec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb, workspace=None):
    """``[(kernel, dim, inputs, block_dim_or_None)]``: the GEMM launch over (batch, output tiles, K
    splits), then, where K is split, the finishing pass over (batch, M, N)."""
    if batch == 0 or M == 0 or N == 0:
        return []
    if spec.epilogue == "axpby" and C is None:
        raise ValueError("the axpby epilogue needs C")
    tiles_m, tiles_n = _ceil(M, spec.tm), _ceil(N, spec.tn)
    k_tiles = _ceil(K, spec.tk)
    s, per = splits(spec, M, N, K, batch)
    # Move the last tile row/column back to end at the edge (loads stay whole, hence vectorized),
    # except where beta*C is read in this kernel: C may be D, and a block would then read C values a
    # neighbour already overwrote. With K split the kernel writes partial sums only.
    clamp = s > 1 or spec.epilogue == "scale"
    m_clamp = M - spec.tm if clamp and M >= spec.tm else 1 << 30
    n_clamp = N - spec.tn if clamp and N >= spec.tn else 1 << 30
    cc = C if C is not None else D
    c_n = c_nb if C is not None else 1
    if s <= 1:
        inputs = [A, B, cc, D, D, float(alpha), float(beta), k_tiles, max(per, 1), tiles_n, batch,
                  a_nb, b_nb, c_n, m_clamp, n_clamp]
        return [(get_kernel(spec, False), (batch, tiles_m * tiles_n, 1), inputs, spec.block_dim)]
    want = (s * batch, M, N)
    if workspace is None or tuple(workspace.shape) != want or workspace.dtype != WP_DTYPES[spec.acc_dtype]:
        got = None if workspace is None else (tuple(workspace.shape), workspace.dtype)
        raise ValueError(f"skinny {spec.key} M={M} N={N} K={K} batch={batch} needs a workspace of shape {want}, "
                         f"{spec.acc_dtype}; got {got}")
    inputs = [A, B, cc, D, workspace, float(alpha), float(beta), k_tiles, per, tiles_n, batch,
              a_nb, b_nb, c_n, m_clamp, n_clamp]
    fin = [D, workspace, cc, float(alpha), float(beta), s, batch, c_n, int(spec.epilogue == "axpby")]
    return [(get_kernel(spec, True), (batch, tiles_m * tiles_n, s), inputs, spec.block_dim),
            (_finish_kernel(spec.acc_dtype, spec.out_dtype), (batch, M, N), fin, None)]


_factory_lock = threading.Lock()


def get_kernel(spec: SkinnySpec, partial: bool = False):
    """The GEMM kernel for ``spec`` (``partial``: the K-split variant that writes partial sums into the
    workspace), built once per process (thread-safe)."""
    with _factory_lock:
        return _build(dataclasses.replace(spec, target_blocks=0), partial)


@functools.cache
def _build(spec: SkinnySpec, partial: bool):
    if spec.layout_a not in "NT" or spec.layout_b not in "NT" or spec.epilogue not in ("scale", "axpby"):
        raise ValueError(f"bad skinny-family spec {spec}")
    TM, TN, TK = spec.tm, spec.tn, spec.tk
    IN = WP_DTYPES[spec.in_dtype]
    OUT = WP_DTYPES[spec.out_dtype]
    ACC = WP_DTYPES[spec.acc_dtype]
    TRANS_A = spec.layout_a == "T"
    TRANS_B = spec.layout_b == "T"
    AXPBY = spec.epilogue == "axpby"
    CAST_OUT = spec.out_dtype != spec.acc_dtype
    if (spec.pad_ab or spec.pad_c) and not _compat.HAS_STRIDED_MATMUL_OPERANDS:
        raise ValueError(f"{spec}: padded shared tiles need a Warp whose tile_matmul takes strided operands")
    PAD_AB, PAD_C = spec.pad_ab > 0, spec.pad_c > 0
    TKP, TNP, TNC = TK + spec.pad_ab, TN + spec.pad_ab, TN + spec.pad_c
    PARTIAL = partial

    def gemm(
        A: wp.array3d(dtype=IN),
        B: wp.array3d(dtype=IN),
        C: wp.array3d(dtype=OUT),
        D: wp.array3d(dtype=OUT),
        W: wp.array3d(dtype=ACC),
        alpha: ACC,
        beta: ACC,
        k_tiles: int,
        k_per_split: int,
        tiles_n: int,
        batch: int,
        a_nb: int,
        b_nb: int,
        c_nb: int,
        m_clamp: int,
        n_clamp: int,
    ):
        bi, t, s = wp.tid()
        m0 = wp.min((t // tiles_n) * TM, m_clamp)
        n0 = wp.min((t % tiles_n) * TN, n_clamp)
        Ab = A[wp.min(bi, a_nb - 1)]
        Bb = B[wp.min(bi, b_nb - 1)]
        if wp.static(PAD_C):
            acc = wp.tile_view(wp.tile_zeros(shape=(TM, TNC), dtype=ACC, storage="shared"),
                               offset=(0, 0), shape=(TM, TN))
        else:
            acc = wp.tile_zeros(shape=(TM, TN), dtype=ACC)
        if wp.static(PAD_AB):
            a_s = wp.tile_zeros(shape=(TM, TKP), dtype=IN, storage="shared")
            b_s = wp.tile_zeros(shape=(TK, TNP), dtype=IN, storage="shared")
            a_v = wp.tile_view(a_s, offset=(0, 0), shape=(TM, TK))
            b_v = wp.tile_view(b_s, offset=(0, 0), shape=(TK, TN))
        # Runtime trip count on purpose (Warp unrolls short constant loops).
        for k in range(s * k_per_split, wp.min(k_tiles, (s + 1) * k_per_split)):
            if wp.static(TRANS_A):
                a = wp.tile_transpose(wp.tile_load(Ab, shape=(TK, TM), offset=(k * TK, m0)))
            else:
                a = wp.tile_load(Ab, shape=(TM, TK), offset=(m0, k * TK))
            if wp.static(TRANS_B):
                b = wp.tile_transpose(wp.tile_load(Bb, shape=(TN, TK), offset=(n0, k * TK)))
            else:
                b = wp.tile_load(Bb, shape=(TK, TN), offset=(k * TK, n0))
            if wp.static(PAD_AB):
                wp.tile_assign(a_s, a, offset=(0, 0))
                wp.tile_assign(b_s, b, offset=(0, 0))
                wp.tile_matmul(a_v, b_v, acc)
            else:
                wp.tile_matmul(a, b, acc)
        if wp.static(PARTIAL):
            wp.tile_store(W[s * batch + bi], acc, offset=(m0, n0))
        else:
            if wp.static(AXPBY):
                c = wp.tile_load(C[wp.min(bi, c_nb - 1)], shape=(TM, TN), offset=(m0, n0))
                if wp.static(CAST_OUT):
                    r = wp.tile_map(wp.add, acc * alpha, wp.tile_astype(c, ACC) * beta)
                else:
                    r = wp.tile_map(wp.add, acc * alpha, c * beta)
            else:
                r = acc * alpha
            if wp.static(CAST_OUT):
                wp.tile_store(D[bi], wp.tile_astype(r, OUT), offset=(m0, n0))
            else:
                wp.tile_store(D[bi], r, offset=(m0, n0))

    name = spec.kernel_key + ("_part" if partial else "")
    k = _compat.make_kernel(gemm, name)
    if not spec.mathdx:
        # Warp 1.12+ reads this module option at compile time; older releases ignore it (MathDx).
        k.module.options["enable_mathdx_gemm"] = False
    return k


@functools.cache
def _finish_kernel_built(acc_dtype: str, out_dtype: str):
    W_T = WP_DTYPES[acc_dtype]
    OUT = WP_DTYPES[out_dtype]

    def finish(D: wp.array3d(dtype=OUT), W: wp.array3d(dtype=W_T), C: wp.array3d(dtype=OUT),
               alpha: W_T, beta: W_T, splits: int, batch: int, c_nb: int, use_c: int):
        b, i, j = wp.tid()
        acc = W_T(0.0)
        for s in range(splits):  # in split order: the result does not depend on block timing
            acc += W[s * batch + b, i, j]
        r = alpha * acc
        if use_c != 0:
            r = r + beta * W_T(C[wp.min(b, c_nb - 1), i, j])
        D[b, i, j] = OUT(r)

    return _compat.make_kernel(finish, f"wg_skinny_finish_{acc_dtype}_{out_dtype}")


def _finish_kernel(acc_dtype: str, out_dtype: str):
    with _factory_lock:
        return _finish_kernel_built(acc_dtype, out_dtype)
