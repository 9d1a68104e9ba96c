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

from ... import _compat
from ..common.kernels import WP_DTYPES, acc_dtype_name, check_pads, epilogue_store, gemm_tag, spec_types

# The smaller output side this kernel handles (any side up to 16 works; choose_spec picks it for <= 4).
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
    # serialise (families/tiled/ measured 64 -> 234 TFLOP/s for the MathDx call alone). The tiles
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
        g = gemm_tag(self.mathdx, self.pad_ab, self.pad_c)
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


# Measured on an H100 (warp 1.19.0; CUDA-graph timings with cuBLAS through torch in the same run):
# - small side <= 4: Warp's scalar tile GEMM with the small side padded to a power of two (1, 2, 4)
#   beats MathDx's 16-wide tiles: fp16 1x4096x4096 23.3 us (1x128x64 tiles, block 128, ~528 blocks)
#   against 43.5 (MathDx 16x128x128); fp16 4x8192x8192 64.9 us (4x128x128, ~528 blocks) against
#   141.3 (cuBLAS: 15.1 and 47.3 us). ~528 blocks (4 per SM) beat 264, 1056 and 2112 for both.
# - small side 5..16: this kernel's MathDx path is slow (fp16 16x8192x8192 139.6 us unpadded, 15.4
#   TFLOP/s; the tiled family did 115 us in issue 18). The pipelined family over K slices viewed as a
#   batch (``split_k_views`` + ``finish_launch`` below) did 74.5 us (28.8 TFLOP/s; cuBLAS 47.3):
#   choose_spec therefore declines small sides 5..16 and ``split_pipe_config`` describes that plan.
_SCALAR_MAX = 4
_RULES: dict = {
    # small side bucket -> (big-side tile, tk, block_dim, target_blocks)
    1: (128, 64, 128, 528),
    2: (128, 64, 128, 528),
    4: (128, 128, 128, 528),
    8: (128, 128, 128, 528),  # only for the pipelined family's peeled edges (core/plan.py _peel): max_side=8
}


def choose_spec(device, dtype: str, layout_a: str, layout_b: str, M: int, N: int, K: int, batch: int,
                out_dtype: str, epilogue: str, max_side: int = _SCALAR_MAX):
    """The spec for this problem, or None where the family does not apply: the smaller output side
    over 4 (see ``split_pipe_config`` for 5..16), an epilogue other than scale/axpby, or a Warp without
    ``tile_astype`` or tile parameters in functions (1.7). Where M <= N the kernel streams B (tiles
    ``side x 128``), else A (``128 x side``).
    For batched products with both sides <= 32 prefer families/small/. float32/float64/bfloat16 take
    the fp16 rules (not measured separately). ``max_side`` 8: also sides 5..8 (scalar 8-row tiles), for
    the pipelined family's peeled edges."""
    if epilogue not in ("scale", "axpby") or layout_a not in ("N", "T") or layout_b not in ("N", "T"):
        return None
    if dtype not in WP_DTYPES or out_dtype not in WP_DTYPES or not _compat.HAS_TILE_ASTYPE:
        return None
    if not _compat.HAS_TILE_FUNC_ARGS:  # the epilogue is kernels.common.epilogue_store
        return None
    if min(M, N) > min(max_side, max(_RULES)) or min(M, N, batch) < 1:
        return None
    side = _pow2_at_least(min(M, N))
    big, tk, block_dim, target = _RULES[side]
    is_cpu = getattr(device, "is_cpu", False) or str(device) == "cpu"
    if is_cpu:
        block_dim = 1
        target = 4 * max(1, (getattr(device, "cpu_count", 0) or 2))
    else:
        target = max(target, 4 * _compat.sm_count(device))
    tm, tn = (side, big) if M <= N else (big, side)
    return SkinnySpec(tm, tn, tk, dtype, out_dtype, layout_a, layout_b, epilogue, block_dim=block_dim,
                      mathdx=False, target_blocks=target)


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
    if s <= 1:  # (the unsplit kernel does not touch W: an empty array of its dtype)
        inputs = [A, B, cc, D, _no_workspace(spec.acc_dtype, D.device), float(alpha), float(beta), k_tiles,
                  max(per, 1), tiles_n, batch,
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
_empty: dict = {}


def _no_workspace(dtype: str, device):
    """An empty 3-D array of ``dtype`` on ``device`` (one per process), for the unsplit kernel's W."""
    key = (dtype, str(device))
    with _factory_lock:
        if key not in _empty:
            _empty[key] = wp.empty((0, 0, 0), dtype=WP_DTYPES[dtype], device=device)
        return _empty[key]


def get_kernel(spec: SkinnySpec, partial: bool = False):
    """The GEMM kernel for ``spec`` (``partial``: the K-split variant that writes partial sums into the
    workspace), built once per process (thread-safe)."""
    with _factory_lock:
        return _build(dataclasses.replace(spec, target_blocks=0), partial)


@functools.cache
def _build(spec: SkinnySpec, partial: bool):
    IN, OUT, ACC, TRANS_A, TRANS_B = spec_types(spec, ("scale", "axpby"), "skinny-family")
    check_pads(spec)
    TM, TN, TK = spec.tm, spec.tn, spec.tk
    AXPBY = spec.epilogue == "axpby"
    PAD_AB, PAD_C = spec.pad_ab > 0, spec.pad_c > 0
    TKP, TNP, TNC = TK + spec.pad_ab, TN + spec.pad_ab, TN + spec.pad_c
    PARTIAL = partial
    epilogue = None if PARTIAL else epilogue_store(TM, TN, spec.acc_dtype, spec.out_dtype, AXPBY)  # (common)

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
            epilogue(D, C, bi, c_nb, acc * alpha, beta, m0, n0)

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


def finish_kernel(acc_dtype: str, out_dtype: str):
    """The finishing pass's kernel (the one :func:`finish_launch` launches), e.g. to precompile it."""
    return _finish_kernel(acc_dtype, out_dtype)


# --- small side 5..16: the pipelined family over K slices ------------------------------------------------
# Kernel modules import only _compat and common, so the planner composes this plan:
#   cfg = split_pipe_config(...)                       # or None: use the tiled family
#   A3, B3 = split_k_views(A, B, layout_a, layout_b, K, cfg["splits"])
#   W = workspace of split_pipe_workspace_shape(...)   # float32/float64 (splits, M, N), cached per device
#   pipelined.launch_args(PipeSpec(**cfg["pipe"], in_dtype=dtype, out_dtype=<acc>, layout_a=.., layout_b=..,
#                         epilogue="scale"), A3, B3, None, W, 1.0, 0.0, M, N, K // splits, splits, splits,
#                         splits, 1)
#   finish_launch(D, W, C, alpha, beta, splits, acc, out)
# Measured (fp16 16x8192x8192, H100): 8 splits 74.5 us, 16 88.5, 32 117.6 (2 stages); 3 stages 111.7,
# 4 stages 113.6; 16x256x64 tiles, 4 stages 86.4; M=4: 70.8 (the scalar kernel above: 64.9).
# 32-row tiles (rows 16-31 of A zero-filled by the copies; such tiles take the snippet zero fill and store)
# with 64-deep K steps, 3 stages: 16x8192x8192 71.7-72.6 us cold against 73.3-74.1 for 16x128x128 tiles in two
# runs (H100; 32-row tiles with 128-deep steps 72.0, 4 stages 74.4, 32-deep 79.4, 256 threads 95.9).
SPLIT_PIPE = dict(tm=32, tn=128, tk=64, stages=3, block_dim=128, pad_ab=8, pad_c=8, chunk=16)
# Blocks the K split aims at: 16x8192x8192 fp16 (64 column tiles) ran 75.8 us (graph replay) at 8 splits
# (512 blocks, more than the 2 per SM that fit: two waves), 65.5 at 4, 97.0 at 2 (H100;
# 3-4 stages of 64-deep K, 16x64 tiles or 256 threads: 65.3-66.7).
_SPLIT_BLOCKS = 256


def split_pipe_config(device, dtype: str, layout_a: str, layout_b: str, M: int, N: int, K: int, batch: int,
                      out_dtype: str, epilogue: str):
    """``{"splits": s, "pipe": PipeSpec fields}`` for a small side of 5..16 on CUDA (batch 1), or None
    where the plan does not apply (batched, CPU, K not a multiple of ``splits * tk``, or 16-byte
    alignment of the slices impossible: the planner still checks ``pipelined.max_chunk`` on the views).
    The pipelined tiles are ``SPLIT_PIPE``'s ``32 x 128`` (small M) or ``128 x 32`` (small N); N-small is
    unmeasured."""
    if epilogue not in ("scale", "axpby") or batch != 1 or dtype not in WP_DTYPES or out_dtype not in WP_DTYPES:
        return None
    if getattr(device, "is_cpu", False) or str(device) == "cpu" or not (4 < min(M, N) <= MAX_SMALL):
        return None
    pipe = dict(SPLIT_PIPE)
    if M > N:
        pipe["tm"], pipe["tn"] = pipe["tn"], pipe["tm"]
    # Pads as the pipelined family's defaults: exact float32 dense, float64 32 bytes per row.
    pipe["pad_ab"], pipe["pad_c"] = {"float16": (8, 8), "bfloat16": (8, 8), "float32": (0, 0),
                                     "float64": (4, 4)}[dtype]
    tiles = _ceil(M, pipe["tm"]) * _ceil(N, pipe["tn"])
    item = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}[dtype]
    s = 1
    while (tiles * s * 2 <= _SPLIT_BLOCKS and K % (s * 2 * pipe["tk"]) == 0
           and (K // (s * 2)) * item % 16 == 0):
        s *= 2
    if s == 1:
        return None
    return {"splits": s, "pipe": pipe}


def split_pipe_workspace_shape(M: int, N: int, splits: int, dtype: str):
    """``((splits, M, N), acc_dtype)``: the partial products of the K slices."""
    return (splits, M, N), acc_dtype_name(dtype)


def split_k_views(A, B, layout_a: str, layout_b: str, K: int, splits: int):
    """Views of batch-1 operands ``A`` and ``B`` whose batch entry ``s`` is K slice ``s`` (``K //
    splits`` long): ``A (1, M, K)`` -> ``(splits, M, K/s)`` (layout T: ``(1, K, M)`` -> ``(splits, K/s,
    M)``), ``B (1, K, N)`` -> ``(splits, K/s, N)`` (T: ``(1, N, K)`` -> ``(splits, N, K/s)``). No copies:
    strided Warp arrays over the same memory (the caller keeps the operands alive)."""
    if K % splits:
        raise ValueError(f"K={K} is not a multiple of splits={splits}")
    ks = K // splits

    def view(X, k_is_rows: bool):
        r, c = X.shape[1], X.shape[2]
        sr, sc = X.strides[1], X.strides[2]
        if k_is_rows:
            shape, strides = (splits, ks, c), (ks * sr, sr, sc)
        else:
            shape, strides = (splits, r, ks), (ks * sc, sr, sc)
        return wp.array(ptr=X.ptr, dtype=X.dtype, shape=shape, strides=strides, device=X.device)

    if A.shape[0] != 1 or B.shape[0] != 1:
        raise ValueError("K-slice views need batch-1 operands")
    return view(A, layout_a == "T"), view(B, layout_b == "N")


def finish_launch(D, W, C, alpha, beta, splits: int, batch: int, c_nb: int, acc_dtype: str, out_dtype: str):
    """``(kernel, dim, inputs, None)``: ``D[b] = alpha * sum_s W[s * batch + b] (+ beta * C[b])``, the
    slabs summed in order (deterministic)."""
    cc = C if C is not None else D
    inputs = [D, W, cc, float(alpha), float(beta), splits, batch, c_nb if C is not None else 1, int(C is not None)]
    return _finish_kernel(acc_dtype, out_dtype), (batch, D.shape[1], D.shape[2]), inputs, None


def job_kernels(job: tuple) -> list:
    """``[(kernel, block_dim)]`` of a precompile job ``("skinny", spec, partial)`` (with K split: its finishing pass,
    a plain kernel at Warp's default block size)."""
    spec, partial = job[1], job[2]
    if spec.in_dtype == "bfloat16":
        _compat.bf16_dtype()
    out = [(get_kernel(spec, partial), spec.block_dim)]
    if partial:
        out.append((finish_kernel(spec.acc_dtype, spec.out_dtype), 256))
    return out


