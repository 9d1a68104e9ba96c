"""One tolerance model for the tests, ``warp-gemm check`` and the benchmark runner's correctness gate.

Inputs are drawn as ``randn * K**-0.25`` for both factors, so every element of ``A @ B`` has unit
variance whatever K is, and the bounds below do not need to grow with K. The float64 reference is
computed from the inputs *after* rounding them to the tested dtype, so what remains is the kernel's own
error: accumulation order (float32 for 16-bit inputs, float64 for float64) and the final rounding.

The bounds (unit roundoff u of the output type):
- float16: u = 4.9e-4; rounding the result alone gives a relative Frobenius error near 2.8e-4.
  Accumulating in float16 (Warp 1.7's behaviour) gives ~u*sqrt(K) = 1.6e-2 at K=1027 and fails.
- bfloat16: u = 3.9e-3.
- float32 exact: accumulation error ~u*sqrt(K) = 6e-8*105 = 6e-6 at K=11008.
- tf32: inputs rounded to 10 mantissa bits (u = 4.9e-4) before the product.
- float64: u = 1.1e-16.

The Frobenius bound is relative to the reference's norm, floored at FRO_FLOOR_RMS (a quarter of the model's unit RMS)
per element: ``||out - ref||_F <= fro * max(||ref||_F, FRO_FLOOR_RMS * sqrt(size))``. An element's rounding error
scales with ``sum |a_i b_i|`` (about ``0.64 sqrt(K)`` here), not with the element itself, so an output of one or a
few elements that happens to cancel (a 1x1 product of K 53 came out at -3.0e-4 against ``sum |a_i b_i|`` = 4.6, and
numpy's own float64 reference was 4.5e-14 off in relative terms) can fail a bound relative to its own norm with a
kernel that rounds as well as the reference does. The floor binds only where the output's RMS is under a quarter of
the model's: for one element 20% of draws, for 8 elements 1.3e-4 (a chi-square with 8 degrees of freedom under
0.5), for 16 6e-8, so the bound is unchanged for outputs of any realistic size. The elementwise bound is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DTYPES = ("float16", "bfloat16", "float32", "float64")
FRO_FLOOR_RMS = 0.25  # the Frobenius bound's floor on the reference's RMS (see the module's docstring)


@dataclass(frozen=True)
class Tol:
    rtol: float  # elementwise: |out - ref| <= atol + rtol * |ref|
    atol: float
    fro: float  # ||out - ref||_F / max(||ref||_F, FRO_FLOOR_RMS * sqrt(size)) <= fro


TOLERANCES: dict[str, Tol] = {
    "float16": Tol(rtol=2e-3, atol=2e-3, fro=1e-3),
    "bfloat16": Tol(rtol=1.6e-2, atol=1.6e-2, fro=8e-3),
    "float32": Tol(rtol=5e-5, atol=5e-5, fro=1e-5),
    "tf32": Tol(rtol=2e-2, atol=2e-2, fro=5e-3),
    "float64": Tol(rtol=1e-12, atol=1e-12, fro=1e-13),
}


def tolerance(dtype: str, tf32: bool = False) -> Tol:
    """The bound for results of ``dtype`` (a name in :data:`DTYPES`)."""
    if tf32 and dtype == "float32":
        return TOLERANCES["tf32"]
    return TOLERANCES[dtype]


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to ``dtype`` (round to nearest even) and returned as float64."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x.copy()
    if dtype == "float32":
        return x.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return bf16_bits_to_f64(f64_to_bf16_bits(x))
    raise ValueError(f"unknown dtype {dtype!r}")


def f64_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of ``x``, rounded to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    rounded[nan] = 0x7FC0
    return rounded


def bf16_bits_to_f64(bits: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(np.asarray(bits, dtype=np.uint16))
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def random_operands(M: int, N: int, K: int, dtype: str, rng: np.random.Generator, batch: int = 0):
    """Fresh ``A (M, K)``, ``B (K, N)`` in float64, already rounded to ``dtype``, scaled so that
    every element of ``A @ B`` has unit variance (``randn * K**-0.25`` per factor)."""
    s = max(K, 1) ** -0.25
    lead = (batch,) if batch else ()
    a = round_to(rng.standard_normal(lead + (M, K)) * s, dtype)
    b = round_to(rng.standard_normal(lead + (K, N)) * s, dtype)
    return a, b


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs: float
    rel_fro: float
    bound: float  # the Frobenius bound
    nonfinite: int  # elements that are NaN/Inf where the reference is finite
    worst_excess: float  # max over elements of |out-ref| / (atol + rtol*|ref|); <= 1 passes

    def __str__(self) -> str:
        verdict = "pass" if self.ok else "FAIL"
        return (f"{verdict}: rel_fro={self.rel_fro:.2e} (bound {self.bound:.0e}), max_abs={self.max_abs:.2e}, "
                f"elementwise {self.worst_excess:.2f}x of bound, non-finite={self.nonfinite}")


def compare(out, ref, dtype: str, tf32: bool = False) -> Comparison:
    """Compare a result with its float64 reference under the model's bound for ``dtype``."""
    tol = tolerance(dtype, tf32)
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        raise ValueError(f"result shape {out.shape} != reference shape {ref.shape}")
    if out.size == 0:
        return Comparison(True, 0.0, 0.0, tol.fro, 0, 0.0)
    finite_ref = np.isfinite(ref)
    # Where the reference is NaN/Inf (NaN/Inf inputs), the result must match it exactly.
    special_ok = bool(np.all((out[~finite_ref] == ref[~finite_ref]) | (np.isnan(out[~finite_ref]) & np.isnan(ref[~finite_ref]))))
    o, r = out[finite_ref], ref[finite_ref]
    nonfinite = int(np.count_nonzero(~np.isfinite(o)))
    diff = np.abs(o - r)
    if nonfinite:
        diff = np.where(np.isfinite(diff), diff, np.inf)
    max_abs = float(diff.max()) if diff.size else 0.0
    norm_ref = float(np.linalg.norm(r))
    denom = max(norm_ref, FRO_FLOOR_RMS * float(np.sqrt(r.size)))
    rel_fro = float(np.linalg.norm(diff) / denom) if norm_ref > 0 else max_abs
    excess = float((diff / (tol.atol + tol.rtol * np.abs(r))).max()) if diff.size else 0.0
    ok = special_ok and nonfinite == 0 and excess <= 1.0 and (rel_fro <= tol.fro or norm_ref == 0)
    return Comparison(ok, max_abs, rel_fro, tol.fro, nonfinite, excess)
