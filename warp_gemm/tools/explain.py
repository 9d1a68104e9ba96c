"""Which backend and kernel family a call runs on, for ``warp-gemm check`` and the examples to print.

:func:`backend` names what products on a device go to under the current :func:`warp_gemm.options`;
:func:`family` plans one call as ``warp_gemm.gemm`` would (validation and the planner, which launches
nothing) and names the kernel family it chose, with the tiled family's configuration.
"""

from __future__ import annotations


def backend(device) -> str:
    """``"cpu: host BLAS"``, ``"cpu: Warp tile kernels"`` or ``"cuda:0 (sm_90): Warp tile kernels"``."""
    import warp as wp

    from warp_gemm import _compat
    from warp_gemm.core.options import options

    _compat.init()
    dev = wp.get_device(device)
    if dev.is_cpu:
        if options().cpu_backend == "host":
            return "cpu: host BLAS (NumPy/torch; warp_gemm.options(cpu_backend='tiles') for the Warp tile kernels)"
        return "cpu: Warp tile kernels (the CUDA kernels' CPU twin)"
    return f"{dev} (sm_{dev.arch}, {dev.name}): Warp tile kernels"


def family(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
           out=None, allow_tf32: bool = False, config=None, activation: str | None = None) -> str:
    """The kernel family ``warp_gemm.gemm`` plans for these arguments (e.g. ``"host"``, ``"gemv"``,
    ``"tiled 32x32x32/b1/g8"``); the arguments are those of :func:`warp_gemm.gemm`. Allocates the result
    when ``out`` is None (validation does), launches nothing."""
    from warp_gemm.api import _config_arg
    from warp_gemm.core.options import options
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate

    config = _config_arg(config, "gemm")
    p = validate(a, b, c, alpha, beta, trans_a, trans_b, out, "gemm")
    plan = make_plan(p, float(alpha), float(beta), allow_tf32, config, options(), activation)
    if plan.family == "tiled" and plan.cfg is not None:
        return f"tiled {plan.cfg}"
    return plan.family
