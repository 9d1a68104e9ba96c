"""The GEMV family's native snippets (``native/*.cuh``: rowdot, colsum, bands) filled for one spec."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
from ..common import native
from ..common.kernels import ITEM_BYTES
from .spec import BANDS_FINISH_UNROLL, GemvSpec

# every snippet of native/*.cuh, by name
_SNIPPETS = {name: text for cuh in ("bands.cuh", "colsum.cuh", "rowdot.cuh")
             for name, text in native.load(__file__, cuh).items()}
_ROWDOT = _SNIPPETS["rowdot"]
_COLSUM_SCALAR = _SNIPPETS["colsum_scalar"]
_COLSUM = _SNIPPETS["colsum"]
_BANDS = _SNIPPETS["bands"]
_BANDS_GROUPS = _SNIPPETS["bands_groups"]
_BANDS_GROUPS_LEAVE = {False: dict(THEN="", CUDA_LEAVE="    if (grp > 0) return;\n", CPU_LEAVE="        return;\n"),
                       True: dict(THEN=" Then the fused finish: every thread goes on.", CUDA_LEAVE="",
                                  CPU_LEAVE="")}
_BANDS_GROUP0_OPEN = "    if (grp == 0) {\n"
_BANDS_GROUP0_CLOSE = _SNIPPETS["bands_group0_close"]
# After _BANDS' vector stores: return (the partial sums are all), or fall through to the fused finish (the scalar
# stores become the else branch).
_BANDS_VEC_RETURN = "        return;\n    }\n"
_BANDS_VEC_ELSE = "    } else\n"
_BANDS_SUM = _SNIPPETS["bands_sum"]
_BANDS_FUSED_TAIL = _SNIPPETS["bands_fused_tail"]
_BANDS_FUSED_STORE = _SNIPPETS["bands_fused_store"]
_BANDS_FUSED_AXPBY = _SNIPPETS["bands_fused_axpby"]


def _snippet(spec: GemvSpec) -> str:
    it = ITEM_BYTES[spec.in_dtype]
    if spec.kind == "bands":
        rg = spec.band_groups
        if rg > 1 and (spec.block_dim % rg or spec.block_dim // rg < 1):
            raise ValueError(f"gemv bands: {rg} row groups need a block_dim ({spec.block_dim}) they divide")
        fields = dict(ACC=native.C_TYPES[spec.acc_dtype], E=spec.chunk, RG=rg, GT=spec.block_dim // max(rg, 1))
        groups = opened = closed = ""
        if rg > 1:
            groups = native.fill(_BANDS_GROUPS, **fields, **_BANDS_GROUPS_LEAVE[spec.fused])
            if spec.fused:
                opened, closed = _BANDS_GROUP0_OPEN, native.fill(_BANDS_GROUP0_CLOSE, RG=rg)
        band = native.fill(_BANDS, T=native.C_TYPES[spec.in_dtype], ACC=native.C_TYPES[spec.acc_dtype], ITEM=it, E=spec.chunk,
                             U=spec.unroll, VEC_DONE=_BANDS_VEC_ELSE if spec.fused else _BANDS_VEC_RETURN,
                             GROUPS=groups, STORE_OPEN=opened, STORE_CLOSE=closed)
        return band + _fused_tail(spec) if spec.fused else band
    if spec.kind == "rowdot":
        return native.fill(_ROWDOT, T=native.C_TYPES[spec.in_dtype], ACC=native.C_TYPES[spec.acc_dtype], ITEM=it, E=spec.chunk,
                              LANES=spec.lanes, U=spec.unroll)
    if spec.lanes == 1:  # the CPU twin: one thread per column
        return native.fill(_COLSUM_SCALAR, T=native.C_TYPES[spec.in_dtype], ACC=native.C_TYPES[spec.acc_dtype], ITEM=it, COLS=1)
    if spec.block_dim % 32 or 32 % spec.col_lanes or spec.block_dim < 32:
        raise ValueError(f"gemv colsum: block_dim {spec.block_dim} must be a multiple of 32 and col_lanes "
                         f"{spec.col_lanes} divide 32")
    return native.fill(_COLSUM, T=native.C_TYPES[spec.in_dtype], ACC=native.C_TYPES[spec.acc_dtype], ITEM=it, COLS=spec.cols,
                          E=spec.chunk, CL=spec.col_lanes, RG=spec.row_groups, NW=spec.block_dim // 32,
                          BLOCK=spec.block_dim, U=spec.unroll)


def _fused_tail(spec: GemvSpec) -> str:
    """:data:`_BANDS_FUSED_TAIL` for ``spec``: what follows the partial sums of a fused bands kernel."""
    if spec.block_dim % 32 or spec.block_dim < 32:
        raise ValueError(f"gemv bands (fused): block_dim {spec.block_dim} must be a whole number of warps")
    acc, ot = native.C_TYPES[spec.acc_dtype], native.C_TYPES[spec.out_dtype]
    axpby = spec.epilogue == "axpby"
    store = native.fill(_BANDS_FUSED_STORE, ACC=acc, OT=ot, AXPBY=native.fill(_BANDS_FUSED_AXPBY, ACC=acc, OT=ot) if axpby else "")
    return native.fill(_BANDS_FUSED_TAIL, BLOCK=spec.block_dim, NW=spec.block_dim // 32, COLS=spec.cols, ACC=acc, OT=ot,
                                    FU=BANDS_FINISH_UNROLL, E=spec.chunk, STORE=store,
                                    AXPBY_DOC=" + beta * C[b, col]" if axpby else "")





