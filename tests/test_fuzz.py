"""Property-based fuzzing of matmul/gemm against a float64 reference (hypothesis).

One drawn case fixes: M, N, K (0, 1, primes, CPU tile 32 +-1, 64 +-1, up to 70), a batch pattern
(2-D, 3-D, size-1 and missing batch dimensions that broadcast, stride-0 broadcast batches), the
dtype, each operand's container (numpy / torch / wp.array, mixed freely on the CPU), each operand's
layout (contiguous, transposed view, ``trans_a``/``trans_b``, a window inside a larger array, a
step-sliced view, negative strides), alpha/beta (0 included), ``c`` (absent, full, broadcast bias,
0-d) and ``out`` (absent, or NaN-prefilled: contiguous, column-major, a window or a step view inside
a NaN-filled parent whose other elements must stay NaN; sometimes of a wider or narrower dtype).

Two entry points share one body:

- ``test_fuzz_ci``: 300 examples, part of the default run (< ~90 s on a 2-core CPU once Warp's kernel
  cache is warm).
- ``test_fuzz_long`` (marker ``fuzz``): ``WARP_GEMM_FUZZ_EXAMPLES`` examples (default 10000); run with
  ``pytest -m fuzz tests/test_fuzz.py`` or ``scripts/fuzz.sh``.

The run is random (not derandomized); its seed is printed in the terminal report and in every failure.
Reproduce with ``WARP_GEMM_FUZZ_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import numpy as np
import pytest
import warp as wp
from conftest import DEVICES, DTYPES, kind_ok, make, to_f64, torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, note, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import warp_gemm  # noqa: E402
from warp_gemm.tools.tolerance import compare, round_to  # noqa: E402

SEED = int(os.environ.get("WARP_GEMM_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
CI_EXAMPLES = int(os.environ.get("WARP_GEMM_FUZZ_CI_EXAMPLES", "300"))
LONG_EXAMPLES = int(os.environ.get("WARP_GEMM_FUZZ_EXAMPLES", "10000"))
DEVICE = "cpu" if any(d.values[0] == "cpu" for d in DEVICES) else "cuda"

# The CPU tile is 32x32x32 (warp_gemm._config.CPU_CONFIG): tile-1/tile/tile+1 and 2*tile+-1.
SPECIAL_DIMS = [0, 1, 2, 3, 5, 7, 11, 13, 17, 31, 32, 33, 37, 47, 61, 63, 64, 65, 67, 70]
LOOSENESS = ["float64", "float32", "float16", "bfloat16"]  # tolerance order, tightest first


def _kinds(dtype: str) -> list[str]:
    return [k for k in ("numpy", "torch", "warp") if kind_ok(k, dtype, DEVICE) is None]


def _warp_step_slicing() -> bool:
    try:
        return wp.zeros((4, 4), dtype=wp.float32, device="cpu")[:, ::2].shape == (4, 2)
    except Exception:
        return False


WARP_STEP = _warp_step_slicing() if DEVICE == "cpu" else False

# --- the case -----------------------------------------------------------------------------------------
IN_LAYOUTS = ["contig", "tview", "window", "step_rows", "step_cols", "flip", "bcast"]
OUT_LAYOUTS = ["contig", "colmajor", "window", "step_cols"]
C_FORMS = ["full", "MN", "N", "1N", "M1", "scalar", "1MN"]


@dataclass(frozen=True)
class Case:
    M: int
    N: int
    K: int
    ba: int  # 0: 2-D operand; else its batch count
    bb: int
    dtype: str
    kind_a: str
    kind_b: str
    lay_a: str
    lay_b: str
    trans_a: bool
    trans_b: bool
    use_gemm: bool
    alpha: float
    beta: float
    c_form: str | None
    kind_c: str | None
    out_kind: str | None
    out_dtype: str | None
    out_layout: str | None
    data_seed: int


dims = st.one_of(st.sampled_from(SPECIAL_DIMS), st.integers(0, 70))


@st.composite
def cases(draw) -> Case:
    M, N, K = draw(dims), draw(dims), draw(dims)
    nb = draw(st.sampled_from([0, 0, 1, 2, 3]))
    if nb == 0:
        ba = bb = 0
    else:
        ba = draw(st.sampled_from([0, 1, nb]))
        bb = draw(st.sampled_from([0, 1, nb] if ba else [1, nb]))
    dtype = draw(st.sampled_from(DTYPES))
    kinds = _kinds(dtype)
    kind_a, kind_b = draw(st.sampled_from(kinds)), draw(st.sampled_from(kinds))
    lay_a, lay_b = draw(st.sampled_from(IN_LAYOUTS)), draw(st.sampled_from(IN_LAYOUTS))
    use_gemm = draw(st.booleans())
    trans_a = use_gemm and draw(st.booleans())
    trans_b = use_gemm and draw(st.booleans())
    alpha = draw(st.sampled_from([1.0, 0.0, -1.5, 0.5, 2.0])) if use_gemm else 1.0
    beta = draw(st.sampled_from([0.0, 1.0, -0.75, 0.5])) if use_gemm else 0.0
    out_kind = out_dtype = out_layout = None
    if draw(st.booleans()):
        out_dtype = draw(st.sampled_from([dtype, dtype, dtype] + list(DTYPES)))
        out_kind = draw(st.sampled_from(_kinds(out_dtype)))
        out_layout = draw(st.sampled_from(OUT_LAYOUTS))
    res_dtype = out_dtype or dtype
    c_form = kind_c = None
    if use_gemm and draw(st.booleans()):
        batched = bool(ba or bb)
        forms = [f for f in C_FORMS if batched or f not in ("MN", "1MN")]
        c_form = draw(st.sampled_from(forms))
        ck = [k for k in _kinds(res_dtype) if not (c_form == "scalar" and k == "warp")]
        kind_c = draw(st.sampled_from(ck))
    return Case(M, N, K, ba, bb, dtype, kind_a, kind_b, lay_a, lay_b, trans_a, trans_b, use_gemm, alpha, beta,
                c_form, kind_c, out_kind, out_dtype, out_layout, draw(st.integers(0, 2**32 - 1)))


# --- building containers ---------------------------------------------------------------------------
def _swap(x, kind: str):
    """Transpose the last two dimensions of a container (a view)."""
    if kind == "numpy":
        return np.swapaxes(x, -1, -2)
    if kind == "torch":
        return x.transpose(-1, -2)
    return x.transpose((1, 0) if x.ndim == 2 else (0, 2, 1))


def _layout_ok(layout: str, kind: str, shape: tuple[int, ...]) -> str:
    """Fall back to "contig" where the harness cannot build ``layout`` for ``kind``."""
    if layout == "flip" and kind != "numpy":  # only numpy has negative strides
        return "tview"
    if layout == "bcast" and (kind == "warp" or len(shape) < 3 or shape[0] < 2):
        return "contig"
    if kind == "warp" and layout in ("window", "step_rows", "step_cols"):
        # Warp cannot slice an empty range; step slicing needs a recent Warp.
        if 0 in shape or (layout != "window" and not WARP_STEP):
            return "contig"
    return layout


def build(x: np.ndarray, dtype: str, kind: str, layout: str, fill: float = 0.0):
    """A ``kind`` container equal to ``x`` (float64, rounded to ``dtype``) laid out as ``layout``.

    Returns (view, parent, mask): the parent owns the memory; ``mask`` marks which parent elements the
    view covers (None when the view covers all of it).
    """
    layout = _layout_ok(layout, kind, x.shape)
    lead = x.shape[:-2]
    R, C = x.shape[-2:]
    ell = (slice(None),) * len(lead)
    if layout == "contig":
        v = make(x, dtype, kind, DEVICE)
        return v, v, None
    if layout in ("tview", "colmajor"):
        p = make(np.ascontiguousarray(np.swapaxes(x, -1, -2)), dtype, kind, DEVICE)
        return _swap(p, kind), p, None
    if layout == "flip":
        p = make(np.ascontiguousarray(x[..., ::-1, :]), dtype, kind, DEVICE)
        return p[..., ::-1, :], p, None
    if layout == "bcast":  # x's batches are all equal (see _draw_operand): a stride-0 batch view
        p = make(np.ascontiguousarray(x[:1]), dtype, kind, DEVICE)
        v = np.broadcast_to(p, x.shape) if kind == "numpy" else p.expand(*x.shape)
        return v, p, None
    if layout == "window":
        big_shape, idx = lead + (R + 3, C + 5), ell + (slice(1, 1 + R), slice(2, 2 + C))
    elif layout == "step_rows":
        big_shape, idx = lead + (2 * R, C), ell + (slice(None, None, 2), slice(None))
    elif layout == "step_cols":
        big_shape, idx = lead + (R, 2 * C), ell + (slice(None), slice(None, None, 2))
    else:
        raise AssertionError(layout)
    big = np.full(big_shape, fill)
    big[idx] = x
    mask = np.zeros(big_shape, dtype=bool)
    mask[idx] = True
    p = make(big, dtype, kind, DEVICE)
    return p[idx], p, mask


def _draw_operand(rng, lead, R, C, dtype, layout, scale):
    x = rng.standard_normal(lead + (R, C)) * scale
    if layout == "bcast" and lead and lead[0] > 1:
        x = np.broadcast_to(x[:1], x.shape).copy()
    return round_to(x, dtype)


def _tol_dtype(*dts: str) -> str:
    return max(dts, key=LOOSENESS.index)


def _events(case: Case) -> None:
    """What the run covered (``--hypothesis-show-statistics`` prints the counts)."""
    work = case.M * case.N * case.K
    event(f"dtype={case.dtype}")
    event(f"containers={case.kind_a}/{case.kind_b}")
    event(f"layouts={case.lay_a}/{case.lay_b}")
    event("M*N*K=0" if work == 0 else "M*N*K<1e3" if work < 1e3 else "M*N*K<3e4" if work < 3e4 else "M*N*K>=3e4")
    event("batched" if case.ba or case.bb else "2-D")
    event(f"out={case.out_layout or 'none'}" + ("" if case.out_dtype in (None, case.dtype) else "+cast"))
    event(f"c={case.c_form or 'none'}")
    if case.use_gemm:
        event(f"trans={int(case.trans_a)}{int(case.trans_b)} alpha0={case.alpha == 0} beta0={case.beta == 0}")


def run_case(case: Case) -> None:
    note(f"WARP_GEMM_FUZZ_SEED={SEED}")
    _events(case)
    rng = np.random.default_rng(case.data_seed)
    M, N, K, dt = case.M, case.N, case.K, case.dtype
    s = max(K, 1) ** -0.25
    la = (case.ba,) if case.ba else ()
    lb = (case.bb,) if case.bb else ()
    # Math operands op(A) (la, M, K), op(B) (lb, K, N) in float64, rounded to dt.
    a = _draw_operand(rng, la, M, K, dt, case.lay_a, s)
    b = _draw_operand(rng, lb, K, N, dt, case.lay_b, s)
    sa = np.swapaxes(a, -1, -2) if case.trans_a else a  # what is stored
    sb = np.swapaxes(b, -1, -2) if case.trans_b else b
    A, _, _ = build(np.ascontiguousarray(sa), dt, case.kind_a, case.lay_a)
    B, _, _ = build(np.ascontiguousarray(sb), dt, case.kind_b, case.lay_b)

    batched = bool(case.ba or case.bb)
    nb = max(case.ba or 1, case.bb or 1)
    rshape = (nb, M, N) if batched else (M, N)
    res_dtype = case.out_dtype or dt
    ref = case.alpha * np.matmul(a, b)
    C = None
    if case.c_form is not None:
        cshape = {"full": rshape, "MN": (M, N), "N": (N,), "1N": (1, N), "M1": (M, 1), "scalar": (),
                  "1MN": (1, M, N)}[case.c_form]
        c = round_to(rng.standard_normal(cshape), res_dtype)
        C = make(c, res_dtype, case.kind_c, DEVICE)
        if case.beta != 0.0:
            ref = ref + case.beta * c
    ref = np.broadcast_to(ref, rshape)

    out = parent = mask = None
    if case.out_kind is not None:
        out, parent, mask = build(np.full(rshape, np.nan), case.out_dtype, case.out_kind, case.out_layout,
                                  fill=np.nan)

    if case.use_gemm:
        res = warp_gemm.gemm(A, B, C, alpha=case.alpha, beta=case.beta, trans_a=case.trans_a,
                             trans_b=case.trans_b, out=out)
    else:
        res = warp_gemm.matmul(A, B, out=out)

    if out is not None:
        assert res is out, "matmul/gemm must return the out it was given"
    else:
        want = {"numpy": np.ndarray, "warp": wp.array}.get(case.kind_a) or torch.Tensor
        assert isinstance(res, want), f"result is {type(res)}, a is {case.kind_a}"
    assert tuple(res.shape) == rshape, f"result shape {tuple(res.shape)} != {rshape}"
    tol_dt = _tol_dtype(dt, res_dtype)
    cmp = compare(to_f64(res), ref, tol_dt)
    assert cmp.ok, f"{case}: {cmp} [tolerance {tol_dt}; WARP_GEMM_FUZZ_SEED={SEED}]"
    if mask is not None:
        whole = to_f64(parent)
        assert np.isnan(whole[~mask]).all(), f"{case}: wrote outside the out view [WARP_GEMM_FUZZ_SEED={SEED}]"


# --- entry points -------------------------------------------------------------------------------------
_COUNT = {"n": 0}


def _say(config, msg: str) -> None:
    """Write past pytest's output capture, so the seed shows in every run's log."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    cm = config.pluginmanager.get_plugin("capturemanager")
    if tr is None:
        return
    if cm is not None:
        with cm.global_and_fixture_disabled():
            tr.write_line(msg)
    else:
        tr.write_line(msg)


@pytest.fixture(scope="module", autouse=True)
def _announce(pytestconfig):
    _say(pytestconfig, f"\nwarp_gemm fuzz: WARP_GEMM_FUZZ_SEED={SEED} device={DEVICE} "
         f"warp-lang {wp.config.version}")
    _COUNT["n"] = 0
    yield
    _say(pytestconfig, f"\nwarp_gemm fuzz: {_COUNT['n']} cases run, WARP_GEMM_FUZZ_SEED={SEED}")


def _body(case: Case) -> None:
    _COUNT["n"] += 1
    run_case(case)


_COMMON = dict(deadline=None, derandomize=False, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@seed(SEED)
@settings(max_examples=CI_EXAMPLES, **_COMMON)
@given(case=cases())
def test_fuzz_ci(case):
    _body(case)


@pytest.mark.fuzz
@seed(SEED)
@settings(max_examples=LONG_EXAMPLES, **_COMMON)
@given(case=cases())
def test_fuzz_long(case):
    _body(case)
