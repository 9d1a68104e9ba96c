"""The runner's inputs: random operand sets sized to defeat the L2 cache, float64 reference rows, the check."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from warp_gemm.tools import tolerance
from warp_gemm.tools.shapes import Shape

from .env import DType, _torch, _wp, numpy_dtype, torch_dtype, torch_on

REF_ROWS = 64  # rows of the float64 reference for a large product (all N columns)


FULL_REF_FLOPS = 1 << 28  # below this the whole product is checked


MAX_INPUT_SETS = 1024


# ----------------------------------------------------------------------------------------------------------
# inputs and the float64 reference


@dataclass
class Inputs:
    """Several copies of one random (A, B), cycled through while timing so that small inputs are not served
    from cache; ``ref`` is the float64 product of copy 0 on rows ``rows`` (all rows when ``rows`` is None)."""

    sets: list[tuple[Any, Any]]  # torch tensors on the device, or host numpy arrays when torch cannot be used
    rows: np.ndarray | None
    ref: np.ndarray
    set_bytes: int


def input_set_count(shape: Shape, dtype: DType, cache_bytes: int) -> int:
    """One set when A and B overflow the cache; else enough copies to exceed 4x the cache (200 MB on an
    H100) so that every timed call reads its inputs from memory."""
    set_bytes = (shape.M * shape.K + shape.K * shape.N) * max(shape.batch, 1) * dtype.elem_bytes
    if set_bytes == 0 or 2 * set_bytes >= 2 * cache_bytes:  # i.e. 2*(MK+KN)*bytes >= 100 MB on an H100
        return 1
    return min(MAX_INPUT_SETS, math.ceil(4 * cache_bytes / set_bytes))


def reference_rows(shape: Shape, rng: np.random.Generator) -> np.ndarray | None:
    """Rows of C to check: all of them for a small product, else a random sample of REF_ROWS rows."""
    if shape.M <= REF_ROWS or shape.flops <= FULL_REF_FLOPS:
        return None
    return np.sort(rng.choice(shape.M, size=REF_ROWS, replace=False))


def make_inputs(shape: Shape, dtype: DType, device: str, n_sets: int, seed: int, layout: str = "nn") -> Inputs:
    """``layout`` "nt": B is stored (N, K) and passed as its transposed view (``F.linear``'s ``W.T``); "nn": (K, N).
    Copies keep the layout (torch's ``clone`` and NumPy's ``copy(order="K")`` keep strides)."""
    rng = np.random.default_rng(seed)
    rows = reference_rows(shape, rng)
    if torch_on(device):
        a, b, ref = _torch_operands(shape, dtype, device, rows, seed)
    else:
        a, b, ref = _numpy_operands(shape, dtype, rows, rng)
    if layout == "nt":
        b = b.transpose(-1, -2).contiguous().transpose(-1, -2) if hasattr(b, "clone") else \
            np.swapaxes(np.ascontiguousarray(np.swapaxes(b, -1, -2)), -1, -2)
    elif layout != "nn":
        raise ValueError(f"make_inputs: layout must be 'nn' or 'nt', got {layout!r}")
    copies = [(a, b)] + [(a.clone(), b.clone()) if hasattr(a, "clone") else (a.copy(order="K"), b.copy(order="K"))
                         for _ in range(n_sets - 1)]
    set_bytes = (a.size if isinstance(a, np.ndarray) else a.numel()) * dtype.elem_bytes
    set_bytes += (b.size if isinstance(b, np.ndarray) else b.numel()) * dtype.elem_bytes
    return Inputs(copies, rows, ref, set_bytes)


def _torch_operands(shape: Shape, dtype: DType, device: str, rows: np.ndarray | None, seed: int):
    """randn * K**-0.25 (tolerance.random_operands' scaling) drawn on the device, so large shapes cost no
    host work; the reference uses the rounded operands, as the tolerance model expects."""
    torch = _torch()
    gen = torch.Generator(device=device).manual_seed(seed)
    lead = (shape.batch,) if shape.batch else ()
    draw_dtype = torch.float64 if dtype.name == "float64" else torch.float32
    scale = max(shape.K, 1) ** -0.25

    def draw(*dims: int):
        return (torch.randn(lead + dims, generator=gen, device=device, dtype=draw_dtype) * scale).to(
            torch_dtype(dtype))

    a, b = draw(shape.M, shape.K), draw(shape.K, shape.N)
    a_rows = a if rows is None else a[..., torch.as_tensor(rows, device=device), :]
    ref = torch.matmul(a_rows.double(), b.double()).cpu().numpy()
    return a, b, ref


def _numpy_operands(shape: Shape, dtype: DType, rows: np.ndarray | None, rng: np.random.Generator):
    a64, b64 = tolerance.random_operands(shape.M, shape.N, shape.K, dtype.name, rng, batch=shape.batch)
    ref = (a64 if rows is None else a64[..., rows, :]) @ b64
    return a64.astype(numpy_dtype(dtype)), b64.astype(numpy_dtype(dtype)), ref


def to_float64(x, rows: np.ndarray | None = None) -> np.ndarray:
    """A provider's result (torch tensor, wp.array or numpy array) as a host float64 numpy array, only the
    given rows of each matrix (all when None). A wp.array goes through torch where it can (zero-copy),
    so that only the sampled rows of a large result leave the GPU."""
    torch = _torch()
    if not isinstance(x, np.ndarray) and not hasattr(x, "detach") and torch is not None:
        x = _wp().to_torch(x)
    if hasattr(x, "detach"):  # torch
        if rows is not None:
            x = x[..., torch.as_tensor(rows, device=x.device), :]
        return x.detach().to(dtype=torch.float64).cpu().numpy()
    if not isinstance(x, np.ndarray):  # a wp.array without torch
        wp = _wp()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bfloat16 comes back as its raw uint16 bits, as wanted here
            x = tolerance.bf16_bits_to_f64(x.numpy()) if x.dtype == wp.bfloat16 else x.numpy()
    x = x if rows is None else x[..., rows, :]
    return x.astype(np.float64)


def check(out, inputs: Inputs, dtype: DType) -> tolerance.Comparison:
    return tolerance.compare(to_float64(out, inputs.rows), inputs.ref, dtype.name, tf32=dtype.tf32)


# ----------------------------------------------------------------------------------------------------------
# providers


def cycle_calls(sets: list[tuple[Any, Any]], call: Callable[[Any, Any], Any]) -> Callable[[], Any]:
    """A no-argument callable that runs ``call`` on the next input set (set 0 first) and returns the
    result."""
    it = itertools.cycle(sets)

    def fn():
        a, b = next(it)
        return call(a, b)

    return fn


def out_shape(shape: Shape) -> tuple[int, ...]:
    return ((shape.batch,) if shape.batch else ()) + (shape.M, shape.N)


def to_warp(x, device: str):
    wp = _wp()
    if isinstance(x, np.ndarray):
        return wp.array(x, device=device)
    return wp.from_torch(x)  # zero-copy view of the torch tensor


def to_torch(x, device: str):
    torch = _torch()
    return torch.from_numpy(x).to(device) if isinstance(x, np.ndarray) else x


def to_numpy(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else x.numpy()  # a CPU torch tensor: zero-copy


