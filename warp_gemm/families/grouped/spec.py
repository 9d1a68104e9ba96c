"""What the grouped family computes, and the checks that come before any launch.

Four operand cases, as ``torch.nn.functional.grouped_mm`` (``offs``: cumulative int32 group ends, 1-D,
non-decreasing, at most the split extent; rows / columns after ``offs[-1]`` are zeros in the result, K after
it is ignored)::

    case   mat_a        mat_b        offs splits             result
    2d3d   (Mt, K)      (G, K, N)    A's rows                (Mt, N)      rows s:e = A[s:e] @ B[g]
    3d2d   (G, M, K)    (K, Nt)      B's columns             (M, Nt)      cols s:e = A[g] @ B[:, s:e]
    2d2d   (M, Kt)      (Kt, N)      the shared K            (G, M, N)    [g] = A[:, s:e] @ B[s:e]
    3d3d   (G, M, K)    (G, K, N)    -- (offs must be None)  (G, M, N)    [g] = A[g] @ B[g]

:class:`Layout` records, for one operand, how the kernel reads its groups: the layout ("N": unit column
stride, "T": unit row stride, read through the transpose), the stored row stride, and the byte steps from
one group to the next (``gs``: batch stride) and per unit of the split dimension (``js``). A split along the
stored rows (``js`` = the row stride) keeps every group's rows 16-byte aligned; a split along the stored
columns (``js`` = one element) does not, and the launch then takes the checked copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._deps import ITEMSIZE, Operand, describe

CASES = ("2d3d", "3d2d", "2d2d", "3d3d")
FNAME = "grouped_mm"


@dataclass(frozen=True)
class Layout:
    layout: str  # "N" | "T" | "copy" (neither dimension has unit stride: the launcher copies it)
    ld: int  # stored row stride, elements
    gs: int  # bytes from group g to g + 1 (a 3-D operand's batch stride; 0 otherwise)
    js: int  # bytes per unit of the split dimension (0 where the operand is not split)


@dataclass(frozen=True)
class GroupedProblem:
    """A validated grouped product: sizes, dtypes and how each operand is addressed per group."""

    case: str
    G: int
    M: int  # fixed sizes (the split one is `total`; for 2d3d M is unused, for 3d2d N, for 2d2d K)
    N: int
    K: int
    total: int  # extent of the split dimension (Mt, Nt, Kt; 0 for 3d3d)
    in_dtype: str
    out_dtype: str
    out_shape: tuple[int, ...]
    a: Layout
    b: Layout

    @property
    def jag(self) -> int:
        return {"2d3d": 1, "3d2d": 2, "2d2d": 3, "3d3d": 0}[self.case]


def _shape(op: Operand) -> str:
    return "x".join(map(str, op.shape))


def _desc(x, name: str, fname: str) -> Operand:
    try:
        return describe(x, name)
    except TypeError as e:
        raise TypeError(f"{fname}: {e}") from None


def _stored(shape2: tuple[int, int], strides2: tuple[int, int]) -> tuple[str, int]:
    """(layout, stored row stride in elements) of a matrix's last two dimensions."""
    (r, c), (sr, sc) = shape2, strides2
    if c <= 1:
        sc = 1
    if r <= 1:
        sr = max(c, 1) if sc == 1 else 1
    if sc == 1:
        return "N", max(sr, c, 1)
    if sr == 1:
        return "T", max(sc, r, 1)
    return "copy", 0


def operand_layout(op: Operand, split: str) -> Layout:
    """How the kernel reads ``op``'s groups. ``split``: which of the matrix dimensions the groups split
    ("rows", "cols") or "batch" (a 3-D operand) or "" (one matrix shared by every group)."""
    it = ITEMSIZE[op.dtype]
    shape2, strides2 = op.shape[-2:], op.strides[-2:]
    lay, ld = _stored(shape2, strides2)
    gs = op.strides[0] * it if split == "batch" else 0
    js = 0
    if split == "rows":  # the stored rows when N, the stored columns when T
        js = strides2[0] * it if lay == "N" else it
    elif split == "cols":
        js = it if lay == "N" else strides2[1] * it
    return Layout(lay, ld, gs, js)


def out_dtype_name(out_dtype, in_dtype: str, fname: str = FNAME) -> str:
    """The result's dtype name: ``in_dtype`` when None; else a torch / NumPy / Warp dtype or its name.
    16-bit inputs may give float32 results; other inputs their own dtype."""
    if out_dtype is None:
        return in_dtype
    name = getattr(out_dtype, "__name__", None) or str(out_dtype)
    name = name.replace("torch.", "")
    name = {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)
    allowed = (in_dtype, "float32") if in_dtype in ("float16", "bfloat16") else (in_dtype,)
    if name not in allowed:
        raise TypeError(f"{fname}: out_dtype {name} is not available for {in_dtype} inputs (allowed: "
                        f"{', '.join(allowed)})")
    return name


def offs_info(offs, fname: str = FNAME):
    """``(G, device, host values or None)`` of ``offs``, which must be a 1-D int32 torch tensor, wp.array or
    NumPy array; host values are read only where ``offs`` is in host memory."""
    import sys

    import numpy as np
    import warp as wp

    torch = sys.modules.get("torch")
    if isinstance(offs, np.ndarray):
        dt, ndim, dev, host = str(offs.dtype), offs.ndim, "cpu", offs
    elif torch is not None and isinstance(offs, torch.Tensor):
        dt, ndim = str(offs.dtype).replace("torch.", ""), offs.dim()
        dev = "cpu" if offs.device.type == "cpu" else f"cuda:{offs.device.index if offs.device.index is not None else torch.cuda.current_device()}"
        host = offs.detach().numpy() if offs.device.type == "cpu" and dt == "int32" and ndim == 1 else None
    elif isinstance(offs, wp.array):
        dt = {wp.int32: "int32", wp.int64: "int64"}.get(offs.dtype, getattr(offs.dtype, "__name__", str(offs.dtype)))
        ndim, dev = offs.ndim, str(offs.device)
        host = offs.numpy() if offs.device.is_cpu and dt == "int32" and ndim == 1 else None
    else:
        raise TypeError(f"{fname}: offs is a {type(offs).__module__}.{type(offs).__name__}; pass a 1-D int32 "
                        "torch.Tensor, wp.array or numpy.ndarray")
    if dt != "int32":
        raise TypeError(f"{fname}: offs must be int32, got {dt} of shape {list(offs.shape)}")
    if ndim != 1:
        raise ValueError(f"{fname}: offs must be 1-D, got shape {list(offs.shape)}")
    return int(offs.shape[0]), dev, host


def check_offs_values(host, total: int, what: str, fname: str = FNAME) -> None:
    """ValueError unless ``host`` (int32 group ends) is non-negative, non-decreasing and at most ``total``."""
    import numpy as np

    if host is None or len(host) == 0:
        return
    v = np.asarray(host, dtype=np.int64)
    if v[0] < 0:
        raise ValueError(f"{fname}: offs starts at {int(v[0])}; group ends must be >= 0")
    d = np.diff(v)
    if (d < 0).any():
        i = int(np.argmax(d < 0))
        raise ValueError(f"{fname}: offs decreases at index {i + 1} ({int(v[i])} then {int(v[i + 1])}); group "
                         "ends must be non-decreasing")
    if v[-1] > total:
        raise ValueError(f"{fname}: offs[-1] = {int(v[-1])} is past the {total} {what} it splits")


def validate(mat_a, mat_b, offs, bias, out_dtype, fname: str = FNAME):
    """``(problem, A, B, offs (G, device, host values), bias Operand or None)`` for a grouped product, or
    TypeError / ValueError naming the shapes and dtypes. Nothing is allocated or launched."""
    A = _desc(mat_a, "mat_a", fname)
    B = _desc(mat_b, "mat_b", fname)
    if A.ndim not in (2, 3) or B.ndim not in (2, 3):
        raise ValueError(f"{fname}: mat_a and mat_b must be 2-D or 3-D; got mat_a {list(A.shape)}, mat_b "
                         f"{list(B.shape)}")
    if A.dtype != B.dtype:
        raise TypeError(f"{fname}: mat_a is {A.dtype}{list(A.shape)} but mat_b is {B.dtype}{list(B.shape)}; "
                        "both must have one dtype")
    if A.kind != B.kind:
        raise TypeError(f"{fname}: mat_a is a {A.kind} array and mat_b a {B.kind} array; pass one container type")
    if str(A.device) != str(B.device):
        raise ValueError(f"{fname}: mat_a is on {A.device} and mat_b on {B.device}; both must be on one device")
    case = f"{A.ndim}d{B.ndim}d"
    if case == "2d2d":
        K, K2 = A.shape[1], B.shape[0]
    else:
        K, K2 = A.shape[-1], B.shape[-2]
    if K != K2:
        raise ValueError(f"{fname}: contraction dimensions differ: mat_a {A.dtype}{list(A.shape)}, mat_b "
                         f"{B.dtype}{list(B.shape)} ({K} != {K2})")
    if case == "3d3d":
        if offs is not None:
            raise ValueError(f"{fname}: offs is given, but 3-D x 3-D operands (mat_a {list(A.shape)}, mat_b "
                             f"{list(B.shape)}) take none")
        if A.shape[0] != B.shape[0]:
            raise ValueError(f"{fname}: group counts differ: mat_a {list(A.shape)} has {A.shape[0]}, mat_b "
                             f"{list(B.shape)} has {B.shape[0]}")
        G, odev, host = A.shape[0], None, None
    else:
        if offs is None:
            raise ValueError(f"{fname}: mat_a {list(A.shape)} and mat_b {list(B.shape)} need offs (a 2-D operand "
                             "is split into groups)")
        G, odev, host = offs_info(offs, fname)
        if odev != str(A.device) and not (odev == "cpu" and A.device.is_cpu):
            raise ValueError(f"{fname}: offs is on {odev} but the operands are on {A.device}; put offs on their "
                             "device")
        three = A if case == "3d2d" else B
        if case in ("2d3d", "3d2d") and three.shape[0] != G:
            raise ValueError(f"{fname}: group counts differ: offs has {G} groups, "
                             f"{'mat_a' if case == '3d2d' else 'mat_b'} {list(three.shape)} has {three.shape[0]}")
    out_dt = out_dtype_name(out_dtype, A.dtype, fname)
    if case == "2d3d":
        total, M, N = A.shape[0], A.shape[0], B.shape[2]
        shape = (total, N)
        la, lb = operand_layout(A, "rows"), operand_layout(B, "batch")
        check_offs_values(host, total, "rows of mat_a", fname)
    elif case == "3d2d":
        total, M, N = B.shape[1], A.shape[1], B.shape[1]
        shape = (M, total)
        la, lb = operand_layout(A, "batch"), operand_layout(B, "cols")
        check_offs_values(host, total, "columns of mat_b", fname)
    elif case == "2d2d":
        total, M, N = A.shape[1], A.shape[0], B.shape[1]
        shape = (G, M, N)
        la, lb = operand_layout(A, "cols"), operand_layout(B, "rows")
        check_offs_values(host, total, "columns of mat_a (rows of mat_b)", fname)
    else:
        total, M, N = 0, A.shape[1], B.shape[2]
        shape = (G, M, N)
        la, lb = operand_layout(A, "batch"), operand_layout(B, "batch")
    Bi = None
    if bias is not None:
        Bi = _desc(bias, "bias", fname)
        if Bi.dtype != out_dt:
            raise TypeError(f"{fname}: bias is {Bi.dtype}{list(Bi.shape)} but the result is {out_dt}; pass a bias "
                            "of the result's dtype")
        if str(Bi.device) != str(A.device):
            raise ValueError(f"{fname}: bias is on {Bi.device} but the operands are on {A.device}")
        cols = shape[-1]
        ok = Bi.shape in ((cols,), (1, cols)) or (case != "3d2d" and Bi.shape == (G, cols))
        if not ok:
            allowed = f"({cols},)" + ("" if case == "3d2d" else f", (1, {cols}) or ({G}, {cols}) (one row per group)")
            raise ValueError(f"{fname}: bias has shape {list(Bi.shape)}; for mat_a {list(A.shape)} and mat_b "
                             f"{list(B.shape)} it must be {allowed}")
    p = GroupedProblem(case, G, M, N, K, total, A.dtype, out_dt, shape, la, lb)
    return p, A, B, (G, odev, host), Bi
