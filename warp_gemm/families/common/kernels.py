"""What every kernel family shares: dtype tables, the accumulator rule, and the small ``@wp.func``s that
the kernel bodies call (grouped tile order, the alpha/beta epilogue)."""

# No `from __future__ import annotations`: Warp reads the functions' annotations as objects.
import functools
import re
import threading

import warp as wp

from ... import _compat

WP_DTYPES = {"float16": wp.float16, "float32": wp.float32, "float64": wp.float64}
if _compat.HAS_BF16:
    WP_DTYPES["bfloat16"] = wp.bfloat16

ITEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def acc_dtype_name(in_dtype: str) -> str:
    """16-bit and float32 inputs accumulate in float32; float64 in float64."""
    return "float64" if in_dtype == "float64" else "float32"


def gemm_tag(mathdx: bool, pad_ab: int, pad_c: int) -> str:
    """The kernel-name part for the tile GEMM used: ``dx`` (MathDx) or ``sc`` (Warp's scalar GEMM), and
    the shared-tile pads when there are any (``dx_p8-8``)."""
    g = "dx" if mathdx else "sc"
    return f"{g}_p{pad_ab}-{pad_c}" if pad_ab or pad_c else g


def spec_types(spec, epilogues: tuple, family: str) -> tuple:
    """``(IN, OUT, ACC, TRANS_A, TRANS_B)`` of a family's kernel spec (Warp dtypes and whether A/B are
    read transposed), after checking its layouts and epilogue; the factories' common preamble."""
    if spec.layout_a not in "NT" or spec.layout_b not in "NT" or spec.epilogue not in epilogues:
        raise ValueError(f"bad {family} spec {spec}")
    return (WP_DTYPES[spec.in_dtype], WP_DTYPES[spec.out_dtype], WP_DTYPES[spec.acc_dtype],
            spec.layout_a == "T", spec.layout_b == "T")


def check_pads(spec) -> None:
    """Padded shared tiles need a Warp whose tile_matmul takes strided operands (1.19+)."""
    if (spec.pad_ab or spec.pad_c) and not _compat.HAS_STRIDED_MATMUL_OPERANDS:
        raise ValueError(f"{spec}: padded shared tiles need a Warp whose tile_matmul takes strided operands")


# --- helpers shared by the kernel bodies ------------------------------------------------------------
# Helpers whose code depends on compile-time constants are built per set of constants by a cached
# factory and registered under a name that spells those constants out (``wp.func(..., name=...)``):
# Warp keys functions by name within their Python module, so two sets of constants never share a
# function object, and the generated code stays readable.


@wp.func
def grouped_tile(t: int, tiles_m: int, tiles_n: int, group_m: int):
    """Output tile ``(i, j)`` of block ``t`` in grouped order (Triton's GROUP_SIZE_M): consecutive
    blocks walk ``group_m`` tile rows column by column, so the A rows and B columns they share stay
    in L2."""
    per_group = group_m * tiles_n
    first_m = (t // per_group) * group_m
    rows = wp.min(tiles_m - first_m, group_m)
    return first_m + (t % per_group) % rows, (t % per_group) // rows


_helper_lock = threading.Lock()


def func_name(*parts: str) -> str:
    """A C++-safe name for a ``@wp.func`` built per configuration (kernel keys contain ``-`` and
    ``.``; Warp uses a ``name=`` as given)."""
    return re.sub(r"[^0-9A-Za-z_]", "_", "_".join(parts))


def epilogue_store(rows: int, cols: int, acc_dtype: str, out_dtype: str, axpby: bool):
    """The ``@wp.func`` ``store(D, C, bi, c_nb, r, beta, r0, c0)`` that finishes a ``rows x cols``
    part of an output tile: ``r`` is ``alpha * acc`` (a register tile of ``acc_dtype``); with ``axpby``
    the C tile ``C[min(bi, c_nb - 1)]`` at ``(r0, c0)`` is added times ``beta`` (in the accumulator
    dtype); the result is cast to ``out_dtype`` where it differs and stored into ``D[bi]`` at
    ``(r0, c0)``. Rows and columns past the arrays are read as zeros and dropped (checked tiles).
    Built once per set of arguments (thread-safe). Needs a Warp whose functions take tile parameters
    (``_compat.HAS_TILE_FUNC_ARGS``; not 1.7)."""
    if not _compat.HAS_TILE_FUNC_ARGS:
        raise _compat.UnsupportedWarpError("epilogue_store needs a Warp whose functions take tile parameters "
                                           f"(warp-lang {_compat.WARP_VERSION} has none)")
    with _helper_lock:
        return _epilogue_store(int(rows), int(cols), acc_dtype, out_dtype, bool(axpby))


@functools.cache
def _epilogue_store(rows: int, cols: int, acc_dtype: str, out_dtype: str, axpby: bool):
    R, N = rows, cols
    ACC = WP_DTYPES[acc_dtype]
    OUT = WP_DTYPES[out_dtype]
    AXPBY = axpby
    CAST_OUT = out_dtype != acc_dtype

    def store(D: wp.array3d(dtype=OUT), C: wp.array3d(dtype=OUT), bi: int, c_nb: int,
              r: wp.tile(dtype=ACC, shape=(R, N)), beta: ACC, r0: int, c0: int):
        # (no `y = r` rebinding of the parameter: Warp would emit a copy of the tile)
        if wp.static(AXPBY):
            c = wp.tile_load(C[wp.min(bi, c_nb - 1)], shape=(R, N), offset=(r0, c0))
            if wp.static(CAST_OUT):
                y = wp.tile_map(wp.add, r, wp.tile_astype(c, ACC) * beta)
                wp.tile_store(D[bi], wp.tile_astype(y, OUT), offset=(r0, c0))
            else:
                y = wp.tile_map(wp.add, r, c * beta)
                wp.tile_store(D[bi], y, offset=(r0, c0))
        elif wp.static(CAST_OUT):
            wp.tile_store(D[bi], wp.tile_astype(r, OUT), offset=(r0, c0))
        else:
            wp.tile_store(D[bi], r, offset=(r0, c0))

    name = f"wg_epilogue_{acc_dtype}_{out_dtype}_{R}x{N}_{'axpby' if AXPBY else 'scale'}"
    store.__name__ = store.__qualname__ = name
    return wp.func(store, name=name)


def cuda_source(kernel) -> str | None:
    """The CUDA source Warp generates for ``kernel``'s module (generated, not compiled: no GPU needed), or
    None where this Warp's module builder cannot be reached. For capability probes."""
    try:
        from warp._src.context import ModuleBuilder  # 1.13+ layout
    except ImportError:
        try:
            from warp.context import ModuleBuilder  # type: ignore[no-redef]
        except ImportError:
            return None
    return ModuleBuilder(kernel.module, kernel.module.options).codegen("cuda")


def tile_launches(launch_args):
    """A family's ``launches(plan, p, Dk, alpha, beta, env)`` for a ``launch_args(spec, A, B, C, D, alpha, beta, M, N,
    K, batch, a_nb, b_nb, c_nb, workspace=None)`` of tile launches (the small and skinny families')."""

    def launches(plan, p, Dk, alpha: float, beta: float, env) -> list:
        Av, Bv, Cv, c_nb = env.views(plan, p, Dk)
        ws = env.workspace(p.A.device, *plan.workspace) if plan.workspace else None
        todo = launch_args(plan.family_spec, Av, Bv, Cv, Dk, alpha, beta, plan.M, plan.N, p.K, p.batch, Av.shape[0],
                           Bv.shape[0], c_nb, workspace=ws)
        return [(*args, True) for args in todo]

    return launches
