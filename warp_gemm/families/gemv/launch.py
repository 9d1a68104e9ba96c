"""Launching the GEMV family: operand views as vectors, the arguments of one launch (``launch_args``), split-K
counters, and the launches of a plan."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import warp as wp

from .. import skinny
from ..common.kernels import ITEM_BYTES, WP_DTYPES
from .kernel import _finish_warps, bands_finish_kernel, get_kernel
from .spec import BANDS_FINISHERS, TARGET_WARPS_PER_SM, GemvSpec, _ceil, _factory_lock, counters_len, splits


# --- launch ---------------------------------------------------------------------------------------------
def _view(x, shape: tuple, strides: tuple):
    """A non-owning Warp view of array ``x``'s memory (strides in bytes)."""
    item = wp.types.type_size_in_bytes(x.dtype)
    extent = sum((n - 1) * s for n, s in zip(shape, strides)) + item if all(shape) else item
    return wp.array(ptr=x.ptr, dtype=x.dtype, shape=tuple(shape), strides=tuple(strides), capacity=extent,
                    device=x.device)


def _vector(X, K: int):
    """``(nb, K)`` view of a ``(nb, 1, K)`` or ``(nb, K, 1)`` operand."""
    k_dim = 2 if X.shape[2] == K else 1
    if X.shape[3 - k_dim] != 1 or X.shape[k_dim] != K:
        raise ValueError(f"gemv: the vector operand has shape {tuple(X.shape)}, expected (nb, 1, {K}) or "
                         f"(nb, {K}, 1)")
    return _view(X, (X.shape[0], K), (X.strides[0], X.strides[k_dim]))


def operand_views(spec: GemvSpec, A, B, M: int, N: int, K: int):
    """``(Mat, vec, m_is_a)``: the matrix as ``(nb, R, K)`` (rowdot) or ``(nb, K, R)`` (colsum) and the
    vector as ``(nb, K)``, views of the 3-D kernel operands A (``(a_nb, M, K)``, layout T ``(a_nb, K,
    M)``) and B (``(b_nb, K, N)``, T ``(b_nb, N, K)``); R is N for M == 1, else M."""
    mat, vec = (B, A) if M == 1 else (A, B)
    R = N if M == 1 else M
    want = (R, K) if spec.kind == "rowdot" else (K, R)
    if tuple(mat.shape[1:]) != want:
        raise ValueError(f"gemv {spec.kind}: the matrix operand has shape {tuple(mat.shape)}, expected "
                         f"(nb, {want[0]}, {want[1]}) for M={M} N={N} K={K}")
    return mat, _vector(vec, K), M != 1


def _side(X, M: int):
    """``(nb, R)`` view of a ``(nb, M, N)`` output-shaped array with M == 1 or N == 1."""
    d = 2 if M == 1 else 1
    return _view(X, (X.shape[0], X.shape[d]), (X.strides[0], X.strides[d]))


def _no_workspace(dtype: str, device):
    """An empty 2-D array of ``dtype`` on ``device`` (one per process), for the unsplit kernel's W."""
    key = (dtype, str(device))
    with _factory_lock:
        if key not in _empty:
            _empty[key] = wp.empty((0, 0), dtype=WP_DTYPES[dtype], device=device)
        return _empty[key]


def launch_args(spec: GemvSpec, A, B, C, D, alpha, beta, M, N, K, batch, a_nb, b_nb, c_nb, workspace=None,
                counters=None):
    """``[(kernel, dim, inputs, block_dim_or_None)]`` in launch order: the GEMV kernel over (batch,
    K splits, outputs or column groups x lanes), then, where K is split, skinny's finishing pass over
    (batch, M, N). These are plain (SIMT) kernels: launch each with ``wp.launch(kernel, dim=dim,
    inputs=inputs, block_dim=block_dim)`` (None: Warp's default), never ``launch_tiled``.

    A, B, C, D: 3-D Warp arrays as in the other families (A ``(a_nb, M, K)``, layout T ``(a_nb, K, M)``;
    B ``(b_nb, K, N)``, T ``(b_nb, N, K)``; C ``(c_nb, M, N)`` or None for "scale" (C may be D); D
    ``(batch, M, N)``), with ``min(M, N) == 1`` and the layouts ``spec.kind`` was chosen for. Where K is
    split, ``workspace`` is a ``workspace_shape`` array; the fused bands (``spec.fused``) also take ``counters``, an
    int32 array of ``counters_len`` zeros (kept by the caller: every launch leaves it zero)."""
    if batch == 0 or M == 0 or N == 0:
        return []
    if min(M, N) != 1:
        raise ValueError(f"gemv needs M == 1 or N == 1, got M={M} N={N}")
    if spec.epilogue == "axpby" and C is None:
        raise ValueError("the axpby epilogue needs C")
    mat, vec, m_is_a = operand_views(spec, A, B, M, N, K)
    m_nb, v_nb = (a_nb, b_nb) if m_is_a else (b_nb, a_nb)
    R = N if M == 1 else M
    groups = R if spec.kind == "rowdot" else _ceil(R, spec.cols)
    s, per = splits(spec, M, N, K, batch)
    cc = C if C is not None else D
    c_n = c_nb if C is not None else 1
    block = spec.block_dim if spec.lanes > 1 else None
    # The lanes' index last: Warp's launch index varies fastest in its last dimension, and the warp
    # shuffles need one output's 32 lanes in one warp (rowdot), a column strip's threads in one block
    # (colsum: the last dimension is a whole number of blocks, so no block straddles two strips).
    dim = (batch, s, groups * spec.group)
    D2, C2 = _side(D, M), _side(cc, M)
    if s <= 1 and spec.kind != "bands":
        inputs = [mat, vec, C2, D2, _no_workspace(spec.acc_dtype, D.device), float(alpha), float(beta), per,
                  batch, m_nb, v_nb, c_n]
        return [(get_kernel(spec, False), dim, inputs, block)]
    want = (s * batch, M, N)
    if workspace is None or tuple(workspace.shape) != want or workspace.dtype != WP_DTYPES[spec.acc_dtype]:
        got = None if workspace is None else (tuple(workspace.shape), workspace.dtype)
        raise ValueError(f"gemv {spec.key} M={M} N={N} K={K} batch={batch} needs a workspace of shape "
                         f"{want}, {spec.acc_dtype}; got {got}")
    it = ITEM_BYTES[spec.acc_dtype]
    W2 = _view(workspace, (s * batch, R), (R * it, it))
    if spec.kind == "bands" and spec.fused:
        n = counters_len(spec, M, N, batch)
        if counters is None or tuple(counters.shape) != (n,) or counters.dtype != wp.int32:
            got = None if counters is None else (tuple(counters.shape), counters.dtype)
            raise ValueError(f"gemv {spec.key} M={M} N={N} batch={batch} needs {n} int32 counters; got {got}")
        # finishers per column block: at most BANDS_FINISHERS, and all of them waiting at once under the SM count
        sms = spec.target_warps // TARGET_WARPS_PER_SM
        nfin = max(1, min(s, BANDS_FINISHERS, (sms - 1) // max(1, batch * _ceil(R, spec.cols))))
        return [(get_kernel(spec, True), dim, [mat, vec, W2, counters, C2, D2, float(alpha), float(beta), per, batch,
                                               m_nb, v_nb, c_n, nfin], block)]
    if spec.kind == "bands":
        fb = 32 * _finish_warps(spec)
        return [(get_kernel(spec, True), dim, [mat, vec, W2, per, batch, m_nb, v_nb], block),
                (bands_finish_kernel(spec), (batch, _ceil(R, 32) * fb), [W2, C2, D2, float(alpha), float(beta), s,
                                                                       batch, c_n], fb if spec.lanes > 1 else None)]
    inputs = [mat, vec, C2, D2, W2, 1.0, 0.0, per, batch, m_nb, v_nb, c_n]
    c_fin = C if spec.epilogue == "axpby" else None
    return [(get_kernel(spec, True), dim, inputs, block),
            skinny.finish_launch(D, workspace, c_fin, alpha, beta, s, batch, c_n, spec.acc_dtype,
                                 spec.out_dtype)]







_empty: dict = {}




def counters(env, dev, spec: GemvSpec, M: int, N: int, batch: int, slot: str = "cnt") -> dict:
    """``{"counters": ...}`` for a launch whose spec needs them (the fused bands), else ``{}``: int32 zeros of this
    device, stream, slot and thread, kept like the workspaces; every launch of the kernel leaves them zero."""
    n = counters_len(spec, M, N, batch)
    return {"counters": env.zeroed_ints(dev, n, slot)} if n else {}


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """``[(kernel, dim, inputs, block_dim, tiled)]`` for ``plan``: plain (SIMT) kernels, not tile launches."""
    dev = p.A.device
    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    ws = env.workspace(dev, *plan.workspace) if plan.workspace else None
    todo = launch_args(plan.family_spec, Av, Bv, Cv, Dk, alpha, beta, plan.M, plan.N, p.K, p.batch, Av.shape[0],
                       Bv.shape[0], c_nb, workspace=ws, **counters(env, dev, plan.family_spec, plan.M, plan.N, p.batch))
    return [(*args, False) for args in todo]
