"""What the grouped family computes: the four operand cases and how each operand is addressed per group.

As ``torch.nn.functional.grouped_mm`` (``offs``: cumulative int32 group ends, 1-D, non-decreasing, at most
the split extent; groups may be empty; rows / columns after ``offs[-1]`` are zeros in the result, K after it
is ignored)::

    case   mat_a        mat_b        offs splits             result
    2d3d   (Mt, K)      (G, K, N)    A's rows                (Mt, N)      rows s:e = A[s:e] @ B[g]
    3d2d   (G, M, K)    (K, Nt)      B's columns             (M, Nt)      cols s:e = A[g] @ B[:, s:e]
    2d2d   (M, Kt)      (Kt, N)      the shared K            (G, M, N)    [g] = A[:, s:e] @ B[s:e]
    3d3d   (G, M, K)    (G, K, N)    -- (offs must be None)  (G, M, N)    [g] = A[g] @ B[g]

with ``s = offs[g - 1]`` (0 for the first group), ``e = offs[g]``.

:class:`Layout` records, for one operand, how the kernel reads its groups: the layout ("N": unit column
stride, "T": unit row stride, read through the transpose; "copy": neither, the caller makes a contiguous
copy), the stored row stride, and the byte steps from one group to the next (``gs``, a batch stride) and per
unit of the split dimension (``js``). A split along the stored rows (``js`` = the row stride) keeps every
group's rows 16-byte aligned where the operand's are; a split along the stored columns (``js`` = one element)
does not, and the launch then takes the checked copies (:func:`aligned`).
"""

from __future__ import annotations

from dataclasses import dataclass

#: what the groups split in each operand: matrix "rows", "cols", a 3-D "batch"
SPLITS = {"2d3d": ("rows", "batch"), "3d2d": ("batch", "cols"), "2d2d": ("cols", "rows"),
          "3d3d": ("batch", "batch")}
#: the group table kernel's `jag` (kernel.py): which size varies per group
JAG = {"2d3d": 1, "3d2d": 2, "2d2d": 3, "3d3d": 0}


@dataclass(frozen=True)
class Layout:
    layout: str  # "N" | "T" | "copy"
    ld: int  # stored row stride, elements
    gs: int  # bytes from group g to g + 1 (a 3-D operand's batch stride; 0 otherwise)
    js: int  # bytes per unit of the split dimension (0 where the operand is not split)


@dataclass(frozen=True)
class GroupedProblem:
    """A grouped product's sizes, dtypes and operand addressing (no pointers: those are the launch's)."""

    case: str
    G: int
    M: int  # the sizes that do not vary; the varying one (2d3d: M, 3d2d: N, 2d2d: K) is `total` in all
    N: int
    K: int
    total: int  # extent of the split dimension (0 for 3d3d)
    in_dtype: str
    out_dtype: str
    out_shape: tuple[int, ...]
    a: Layout
    b: Layout

    @property
    def jag(self) -> int:
        return JAG[self.case]


def stored(shape2, strides2) -> tuple[str, int]:
    """``(layout, stored row stride in elements)`` of a matrix of shape ``shape2`` and element strides
    ``strides2``: "N" (unit column stride), "T" (unit row stride) or ("copy", 0). Extents of 1 take any stride."""
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


def operand_layout(shape, strides, item: int, split: str) -> Layout:
    """How the kernel reads the groups of an operand of ``shape`` / element ``strides`` (2-D or 3-D), items of
    ``item`` bytes. ``split``: "rows" / "cols" (the groups split that matrix dimension), "batch" (a 3-D
    operand's groups) or "" (one matrix)."""
    shape2, strides2 = tuple(shape[-2:]), tuple(strides[-2:])
    lay, ld = stored(shape2, strides2)
    gs = strides[0] * item if split == "batch" else 0
    js = 0
    if split == "rows":  # the stored rows when N, the stored columns when T
        js = strides2[0] * item if lay == "N" else item
    elif split == "cols":
        js = item if lay == "N" else strides2[1] * item
    return Layout(lay, ld, gs, js)


def problem(case: str, G: int, a_shape, a_strides, b_shape, b_strides, item: int, in_dtype: str,
            out_dtype: str) -> GroupedProblem:
    """The :class:`GroupedProblem` of operands of these shapes / element strides (already checked to agree)."""
    sa, sb = SPLITS[case]
    la = operand_layout(a_shape, a_strides, item, sa)
    lb = operand_layout(b_shape, b_strides, item, sb)
    if case == "2d3d":
        total, M, N, K = a_shape[0], a_shape[0], b_shape[2], a_shape[1]
        shape = (total, N)
    elif case == "3d2d":
        total, M, N, K = b_shape[1], a_shape[1], b_shape[1], a_shape[2]
        shape = (M, total)
    elif case == "2d2d":
        total, M, N, K = a_shape[1], a_shape[0], b_shape[1], a_shape[1]
        shape = (G, M, N)
    else:
        total, M, N, K = 0, a_shape[1], b_shape[2], a_shape[2]
        shape = (G, M, N)
    return GroupedProblem(case, G, M, N, K, total, in_dtype, out_dtype, shape, la, lb)


def aligned(ptr: int, lay: Layout, item: int) -> bool:
    """Whether every row of every group of an operand at ``ptr`` starts on a 16-byte boundary (base, stored row
    stride, batch stride, and a split along the stored rows): its copies may then skip the run-time check."""
    return (ptr % 16 == 0 and (lay.ld * item) % 16 == 0 and lay.gs % 16 == 0
            and lay.js in (0, lay.ld * item))


def typical_sizes(p: GroupedProblem) -> tuple[int, int]:
    """Typical group output sides ``(M, N)`` for the configuration rules: the split side's mean."""
    mean = max(1, p.total // max(p.G, 1))
    return (mean if p.case == "2d3d" else p.M), (mean if p.case == "3d2d" else p.N)
