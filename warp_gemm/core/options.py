"""Planner options: the switches tests and benchmarks use to force a path, explicit and scoped.

``options()`` is the current :class:`Options`; ``override(**changes)`` scopes changes to a ``with``
block (per thread and per asyncio task: a ``contextvars`` variable), e.g. the CPU tests run the
padded-copy path with ``with override(pad_on_cpu=True, pad_min_work=1): ...``. Public as
``warp_gemm.options``. Every field is part of a call plan's key, so a plan made under one set of
options is never replayed under another.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace

from warp_gemm.config.configs import PipeConfig


@dataclass(frozen=True)
class Options:
    #: Replay recorded launches and whole call plans (core.launches, core.execute).
    record_launches: bool = True
    #: A call on new operands of a shape, layout, dtype and alignment already planned re-binds that plan's
    #: launches to the new addresses (core/rebind.py) instead of validating and planning again; False: it
    #: takes the full path (how the host suite measures the difference).
    rebind: bool = True
    #: M*N*K from which a CUDA problem that is not tile-aligned runs on zero-padded tile-multiple copies
    #: in the tiled family: they cost ~8 extra launches (~0.4 ms of host time) plus ~3 passes over the
    #: data and save about W*(1/22 - 1/50 TFLOP/s) -- equal near 2^33. 1000^3 fp16 fell from 10-16 to
    #: 3.8 TFLOP/s when padded (H100), 4095^3 rose from 21 to 42.
    pad_min_work: int = 2**33
    #: Run the CUDA-only paths on the CPU backend too (their logic then runs in CPU CI): padded copies,
    #: padded shared tiles (float32 with the tf32 kernels' padding), the edge clamps.
    pad_on_cpu: bool = False
    smem_pad_on_cpu: bool = False
    edge_clamp_on_cpu: bool = False
    #: The pipelined family's peeled last row/column (core/plan.py ``_peel``) on the CPU backend: whenever a
    #: side is one more than a multiple of the CPU twin's tiles (on CUDA a time model decides).
    peel_on_cpu: bool = False
    #: Peeled edges on CUDA where the families' time models say they pay (composite/peel.py, hopper.rules
    #: ``peel_choice``); False: never (how the benchmarks and tests compare both).
    peel: bool = True
    #: CPU products: "host" (the BLAS NumPy/torch already have, families/host/) or "tiles" (Warp's tile
    #: kernels on the CPU backend: the GPU kernels' twin, how CI checks the kernel logic).
    cpu_backend: str = "host"
    #: Force one kernel family where it applies ("tiled", "pipelined", ...); None: the planner chooses.
    family: str | None = None
    #: The pipelined family's configuration (a :class:`PipeConfig`; ``override`` also takes its text,
    #: ``"pipe/128x128x128/s2/b256/o1"``) used instead of the tuned table and ``pipelined.default_spec``
    #: whenever that family is planned: how the tuner times a candidate through the public call path.
    #: Combine with ``family="pipelined"`` to force the family. A configuration whose kernel does not
    #: fit (shared memory, the family's checks) raises ValueError instead of falling back. On the CPU
    #: backend the block stays one thread and the launch bound is dropped.
    pipe_config: PipeConfig | None = None
    #: The pipelined family's own products (mma.sync for 16-bit and tf32, SIMT for exact float32) in its default
    #: configurations on CUDA; False: ``tile_matmul``'s kernels (how the benchmarks time the MathDx path).
    pipe_snippets: bool = True
    #: The Hopper family (TMA + wgmma, sm_90) for the large 16-bit products it takes (``hopper.rules.plan``); False:
    #: those go to the pipelined family as on other GPUs.
    hopper: bool = True
    #: The mma.sync / SIMT kernels' "scale" epilogue through the free A stages in 16-byte stores
    #: (``pipelined.staged_store``); False: each thread stores its own outputs.
    staged_store: bool = True
    #: Zero-fill shared accumulators with the 16-byte-store snippet after ``tile_empty`` (``pipelined.native_acc``);
    #: False: ``tile_zeros``.
    zero_acc_snippet: bool = True
    #: The GEMV bands kernels' finish: None: the planner's rule (``gemv.bands_choice``); True: always in the same
    #: launch; False: always a second launch.
    gemv_fused: bool | None = None
    #: Row groups per GEMV bands block; None: the rule's (4 for two launches, 16 fused).
    gemv_band_groups: int | None = None

    def __hash__(self) -> int:
        # Part of every call plan's key: hashed once per object, not per call (frozen, so it cannot change).
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))
            object.__setattr__(self, "_hash", h)
        return h


_current: contextvars.ContextVar[Options] = contextvars.ContextVar("warp_gemm_options", default=Options())


def options() -> Options:
    return _current.get()


#: The values ``Options.family`` takes: None (the planner chooses), "host" (the CPU's BLAS) or a kernel family.
def family_names() -> tuple[str, ...]:
    from warp_gemm.config.tables import FAMILY_NAMES

    return ("host", *FAMILY_NAMES)


_BOOL_FIELDS = ("record_launches", "rebind", "pad_on_cpu", "smem_pad_on_cpu", "edge_clamp_on_cpu", "peel_on_cpu", "peel")


def validated(changes: dict) -> dict:
    """``changes`` checked against :class:`Options`' fields (and ``pipe_config`` text parsed): an unknown
    name or a value outside a field's range is a ValueError naming it, a value of the wrong type a
    TypeError."""
    fields = Options.__dataclass_fields__
    unknown = sorted(k for k in changes if k not in fields)
    if unknown:
        raise ValueError(f"options: unknown option(s) {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(fields)}")
    out = dict(changes)
    for name in _BOOL_FIELDS:
        if name in out and not isinstance(out[name], bool):
            raise TypeError(f"options: {name} must be True or False, got {type(out[name]).__name__} "
                            f"{out[name]!r}")
    if "pad_min_work" in out:
        v = out["pad_min_work"]
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"options: pad_min_work must be an integer, got {type(v).__name__} {v!r}")
        if v < 0:
            raise ValueError(f"options: pad_min_work must be 0 or more, got {v}")
    if "cpu_backend" in out and out["cpu_backend"] not in ("host", "tiles"):
        raise ValueError(f"options: cpu_backend must be 'host' or 'tiles', got {out['cpu_backend']!r}")
    if "family" in out and out["family"] is not None and out["family"] not in family_names():
        raise ValueError(f"options: family must be None or one of {', '.join(map(repr, family_names()))}, "
                         f"got {out['family']!r}")
    pc = out.get("pipe_config")
    if isinstance(pc, str):
        out["pipe_config"] = PipeConfig.parse(pc)
    elif pc is not None and not isinstance(pc, PipeConfig):
        raise TypeError(f"options: pipe_config must be a PipeConfig, its text or None, got {type(pc).__name__}")
    return out


def override(**changes):
    """Scope option changes to a ``with`` block: ``with warp_gemm.options(cpu_backend="tiles"): ...``.
    The changes are checked when ``options(...)`` is called (:func:`validated`), before the block."""
    return _scoped(validated(changes))


@contextlib.contextmanager
def _scoped(changes: dict):
    token = _current.set(replace(_current.get(), **changes))
    try:
        yield _current.get()
    finally:
        _current.reset(token)
