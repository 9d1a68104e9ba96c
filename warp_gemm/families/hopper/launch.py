"""Launches of the Hopper kernels: tensor maps, the persistent grid, the inputs in the kernel's order."""

from __future__ import annotations

import warp as wp

from warp_gemm import _compat

from ...core.operands import raw_view
from . import tma
from .kernel import get_kernel, load, transpose_launch
from .spec import HopperSpec, k_ranges

# tile rows per group of the grouped order (Triton tutorial 03's GROUP_SIZE_M); in the probe's design, grouping 8 ran
# 501 / 506 TFLOP/s at fp16 4096^3 / 8192^3 against 513 / 461-485 row by row (H100)
GROUP_M = 8


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grid_size(spec: HopperSpec, M: int, N: int, batch: int, device) -> int:
    """Blocks of the persistent grid: one per SM, fewer where there are fewer work items (output tiles times K
    splits). (One block per output tile, ``grid = batch * tiles``, is the same kernel: 647 / 633 TFLOP/s against
    624 / 625 persistent at fp16 4096^3 / 8192^3 on an H200, inside the run-to-run spread.)"""
    if spec.cluster == 2:  # clusters of two blocks, one per pair item (two tiles sharing an operand tile)
        tm, tn = _pair_tiles(spec, M, N)
        return 2 * max(1, min(int(batch) * tm * tn * spec.splits, _compat.sm_count(device) // 2))
    tiles = int(batch) * _cdiv(M, spec.bm) * _cdiv(N, spec.bn) * spec.splits
    return max(1, min(tiles, _compat.sm_count(device)))


def _pair_tiles(spec: HopperSpec, M: int, N: int) -> tuple[int, int]:
    """The kernel's grid of work tiles: output tiles, or with clusters of two pair items (tile rows, or with pair
    "N" tile columns, two by two)."""
    tm, tn = _cdiv(M, spec.bm), _cdiv(N, spec.bn)
    if spec.cluster == 2:
        return (_cdiv(tm, 2), tn) if spec.pair == "M" else (tm, _cdiv(tn, 2))
    return tm, tn


def launch_args(spec: HopperSpec, A, B, C, D, alpha: float, beta: float, M: int, N: int, K: int, batch: int,
                a_nb: int, b_nb: int, c_nb: int, group_m: int = GROUP_M, grid: int | None = None, workspace=None):
    """``[(kernel, dim, inputs, block_dim)]`` for ``wp.launch_tiled(kernel, dim=dim, inputs=inputs,
    block_dim=block_dim, device=D.device)``: one launch; with ``spec.splits > 1`` two: the kernel storing float32
    partial sums into ``workspace`` (float32 ``(splits * batch, M, N)``, contiguous rows), then the finishing pass
    (``block_dim`` None: ``wp.launch``) summing them into D with alpha, ``beta * C`` and the cast.

    A: Warp 3-D view ``(a_nb, M, K)``; B ``(b_nb, K, N)`` (``spec.layout_b == "N"``) or ``(b_nb, N, K)`` ("T");
    C ``(c_nb, M, N)`` or None (``spec.epilogue == "scale"``); D ``(batch, M, N)``; a/b/c_nb the batch count or
    1 (broadcast). The operands must pass :func:`rules.applies` (sm_90, 16-byte aligned rows). ``grid``: blocks
    (default :func:`grid_size`, one per SM; ``batch * tiles`` gives one block per output tile; clusters of two: an
    even count: an odd one gets one more block). Loads the module
    (sm_90a) and builds or finds the two tensor maps.
    """
    if (C is not None) != (spec.epilogue == "axpby"):
        raise ValueError(f"hopper.launch_args: {spec.key} takes C only with epilogue 'axpby'; got C "
                         f"{None if C is None else tuple(C.shape)}")
    b_shape = (K, N) if spec.layout_b == "N" else (N, K)
    if tuple(A.shape[1:]) != (M, K) or tuple(B.shape[1:]) != b_shape or tuple(D.shape) != (batch, M, N):
        raise ValueError(f"hopper.launch_args: {spec.key} M={M} N={N} K={K} batch={batch}: got A "
                         f"{tuple(A.shape)}, B {tuple(B.shape)}, D {tuple(D.shape)} (B is (nb, K, N) for layout N, "
                         f"(nb, N, K) for T)")
    splits, kt_per = k_ranges(K, spec.splits, spec.bk)
    W = None
    if spec.splits > 1:
        if splits != spec.splits:
            raise ValueError(f"hopper.launch_args: {spec.key} K={K}: {spec.splits} K ranges of whole {spec.bk}-deep K tiles "
                             f"leave an empty one (hopper.spec.k_ranges gives {splits})")
        want = (splits * int(batch), int(M), int(N))
        if (workspace is None or tuple(workspace.shape) != want or workspace.dtype != wp.float32
                or int(workspace.strides[2]) != 4):
            raise ValueError(f"hopper.launch_args: {spec.key} M={M} N={N} K={K} batch={batch} needs a float32 "
                             f"workspace {want} with contiguous rows; got "
                             f"{None if workspace is None else (tuple(workspace.shape), workspace.dtype)}")
        W = workspace
    device = D.device
    k = get_kernel(spec)
    load(spec, device)
    # clusters: the shared tile is copied in halves (pair M: B's rows of layout T; layout N copies whole boxes)
    half_a = spec.cluster == 2 and spec.pair == "N"
    half_b = spec.cluster == 2 and spec.pair == "M" and spec.layout_b == "T"
    ta = tma.tensor_map(A, spec.bm // 2 if half_a else spec.bm)
    tb = tma.tensor_map(B, 64 if spec.layout_b == "N" else spec.bn // 2 if half_b else spec.bn)
    tiles_m, tiles_n = _pair_tiles(spec, M, N)
    g = grid_size(spec, M, N, batch, device) if grid is None else max(1, int(grid))
    if spec.cluster == 2:
        g = 2 * _cdiv(g, 2)  # whole clusters
    tail = [max(1, int(group_m)), splits, kt_per, g]
    if W is None:
        inputs = [ta, tb, C if C is not None else D, D, float(alpha), float(beta), int(M), int(N), int(K), int(batch),
                  int(a_nb), int(b_nb), int(c_nb if C is not None else 1), tiles_m, tiles_n, *tail]
        return [(k, (g,), inputs, spec.block_dim)]
    from ..skinny.kernel import finish_launch

    inputs = [ta, tb, W, W, 1.0, 0.0, int(M), int(N), int(K), int(batch), int(a_nb), int(b_nb), 1, tiles_m, tiles_n,
              *tail]
    return [(k, (g,), inputs, spec.block_dim),
            finish_launch(D, W, C, alpha, beta, splits, int(batch), int(c_nb if C is not None else 1), "float32",
                          spec.out_dtype)]


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """``[(kernel, dim, inputs, block_dim, tiled)]`` for a planned problem (``rules.plan``)."""
    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    spec = plan.family_spec
    if any(plan.peel):  # the core on this family, the last row or column on the GEMV family (rules.peel_choice)
        from ..composite.peel import peeled_launches

        def core(Ac, Bc, Cc, Dc, Mc, Nc):
            return [(*args, True) for args in launch_args(
                spec, Ac, Bc, Cc if spec.epilogue == "axpby" else None, Dc, alpha, beta, Mc, Nc, p.K, p.batch,
                Ac.shape[0], Bc.shape[0], c_nb)]

        return peeled_launches(plan, p, Av, Bv, Cv, c_nb, Dk, alpha, beta, env, core)
    ws = env.workspace(p.A.device, *plan.workspace, "hopper_split") if spec.splits > 1 else None
    pre = []
    if spec.transpose_b:  # tf32, B stored (K, N): a K-major copy, rows padded to 128-byte lines (workspaces)
        nb, k, n = (int(s) for s in Bv.shape)
        kp = -(-k // 32) * 32
        buf = env.workspace(p.A.device, (nb, n, kp), "float32", "hopper_bt")
        Bt = raw_view(buf.ptr, wp.float32, (nb, n, k), (n * kp * 4, kp * 4, 4), buf.device)
        pre.append((*transpose_launch(Bv, Bt), True))
        Bv = Bt
    return pre + [(*args, True) for args in launch_args(spec, Av, Bv, Cv if spec.epilogue == "axpby" else None, Dk,
                                                         alpha, beta, plan.M, plan.N, p.K, p.batch, Av.shape[0],
                                                         Bv.shape[0], c_nb, workspace=ws)]
