"""Launches of the Hopper kernels: tensor maps, the persistent grid, the inputs in the kernel's order."""

from __future__ import annotations

from warp_gemm import _compat

from . import tma
from .kernel import get_kernel, load
from .spec import HopperSpec

# tile rows per group of the grouped order (Triton tutorial 03's GROUP_SIZE_M); in the probe's design, grouping 8 ran
# 501 / 506 TFLOP/s at fp16 4096^3 / 8192^3 against 513 / 461-485 row by row (H100)
GROUP_M = 8


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def grid_size(spec: HopperSpec, M: int, N: int, batch: int, device) -> int:
    """Blocks of the persistent grid: one per SM, fewer where there are fewer output tiles. (One block per output
    tile, ``grid = batch * tiles``, is the same kernel: 647 / 633 TFLOP/s against 624 / 625 persistent at fp16
    4096^3 / 8192^3 on an H200, inside the run-to-run spread.)"""
    tiles = int(batch) * _cdiv(M, spec.bm) * _cdiv(N, spec.bn)
    return max(1, min(tiles, _compat.sm_count(device)))


def launch_args(spec: HopperSpec, A, B, C, D, alpha: float, beta: float, M: int, N: int, K: int, batch: int,
                a_nb: int, b_nb: int, c_nb: int, group_m: int = GROUP_M, grid: int | None = None):
    """``[(kernel, dim, inputs, block_dim)]`` for ``wp.launch_tiled(kernel, dim=dim, inputs=inputs,
    block_dim=block_dim, device=D.device)``: one launch.

    A: Warp 3-D view ``(a_nb, M, K)``; B ``(b_nb, K, N)`` (``spec.layout_b == "N"``) or ``(b_nb, N, K)`` ("T");
    C ``(c_nb, M, N)`` or None (``spec.epilogue == "scale"``); D ``(batch, M, N)``; a/b/c_nb the batch count or
    1 (broadcast). The operands must pass :func:`rules.applies` (sm_90, 16-byte aligned rows). ``grid``: blocks
    (default :func:`grid_size`, one per SM; ``batch * tiles`` gives one block per output tile). Loads the module
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
    device = D.device
    k = get_kernel(spec)
    load(spec, device)
    ta = tma.tensor_map(A, spec.bm)
    tb = tma.tensor_map(B, 64 if spec.layout_b == "N" else spec.bn)
    tiles_m, tiles_n = _cdiv(M, spec.bm), _cdiv(N, spec.bn)
    g = grid_size(spec, M, N, batch, device) if grid is None else max(1, int(grid))
    inputs = [ta, tb, C if C is not None else D, D, float(alpha), float(beta), int(M), int(N), int(K), int(batch),
              int(a_nb), int(b_nb), int(c_nb if C is not None else 1), tiles_m, tiles_n, max(1, int(group_m)), g]
    return [(k, (g,), inputs, spec.block_dim)]


def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
    """``[(kernel, dim, inputs, block_dim, tiled)]`` for a planned problem (``rules.plan``)."""
    Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
    spec = plan.family_spec
    return [(*args, True) for args in launch_args(spec, Av, Bv, Cv if spec.epilogue == "axpby" else None, Dk, alpha,
                                                   beta, plan.M, plan.N, p.K, p.batch, Av.shape[0], Bv.shape[0], c_nb)]
