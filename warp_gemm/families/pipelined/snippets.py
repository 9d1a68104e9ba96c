"""The pipelined family's native snippets (``native/*.cuh``) filled for one spec: copies into the shared stages, the
SIMT / mma.sync / wgmma / DMMA products of a K step, the register-accumulator stores, and their Warp stubs."""

# No `from __future__ import annotations`: Warp reads the kernels' annotations as objects.
import warp as wp

from ..common import native
from ..common.kernels import ITEM_BYTES, grouped_tile
from .spec import MMA_TYPES, SIMT_TILE, PipeSpec, interleave_split, mma_warps, simt_threads, wgmma_threads

# every snippet of native/*.cuh, by name
_SNIPPETS = {name: text for cuh in ("copy.cuh", "mma_sync.cuh", "simt.cuh", "store.cuh", "stream_k.cuh", "wgmma.cuh",
                                    "dmma.cuh") for name, text in native.load(__file__, cuh).items()}
_COPY = _SNIPPETS["copy"]
_COPY_FAST = _SNIPPETS["copy_fast"]
_COPY_EDGE = _SNIPPETS["copy_edge"]
_COMMIT = _SNIPPETS["commit"]
_SYNC = _SNIPPETS["sync"]
_WAIT = _SNIPPETS["wait"]
_SK_ZERO = _SNIPPETS["sk_zero"]
_SK_SPILL = _SNIPPETS["sk_spill"]
_SK_ADD = _SNIPPETS["sk_add"]
_ZERO_ACC = _SNIPPETS["zero_acc"]
_STORE = _SNIPPETS["store"]
_COPY_T = _SNIPPETS["copy_t"]
_SIMT_GEOMETRY = _SNIPPETS["simt_geometry"]
_SIMT_MMA = _SNIPPETS["simt_mma"]
_MMA_GEOMETRY = _SNIPPETS["mma_geometry"]
_MMA_SYNC = _SNIPPETS["mma_sync"]
_MMA_CVT = _SNIPPETS["mma_cvt"]
_MMA_CPU_CVT = _SNIPPETS["mma_cpu_cvt"]

# ldmatrix addressing per operand and storage (_MMA_SYNC): the element offset in the stage of row {I} of x4 matrix
# {J} at (rb, cb) (rb: the first row of A / column of B, cb: the first k), the .trans flag, and, for the CPU, which
# row (i) and column of matrix j hold element e of lane L's register (P elements per register; KH: the k offset of
# the second matrix along k).
_LDSM = {
    # k along the stage's rows (A of layout N, B of layout T; tf32: every layout): plain ldmatrix
    ("A", False): ("(rb + 8 * ({J} % 2) + {I}) * {LD} + cb + {KH} * ({J} / 2)", "", "L / 4", "{P} * (L % 4) + e"),
    ("B", False): ("(rb + 8 * ({J} / 2) + {I}) * {LD} + cb + {KH} * ({J} % 2)", "", "L / 4", "{P} * (L % 4) + e"),
    # k down the stage's columns (16-bit A of layout T, B of layout N): ldmatrix .trans
    ("A", True): ("(cb + 8 * ({J} / 2) + {I}) * {LD} + rb + 8 * ({J} % 2)", ".trans", "2 * (L % 4) + e", "L / 4"),
    ("B", True): ("(cb + 8 * ({J} % 2) + {I}) * {LD} + rb + 8 * ({J} / 2)", ".trans", "2 * (L % 4) + e", "L / 4"),
    # k down the stage's columns, tf32 (A of layout T, B of layout N): one 32-bit load per register; lane L holds
    # A(row L / 4 (+ 8), k L % 4 (+ 4)) and B(k L % 4 (+ 4), column L / 4), so {I} is the k (L % 4) and L / 4 the
    # column added to the offset
    ("A", "s"): ("(cb + 4 * ({J} / 2) + {I}) * {LD} + rb + 8 * ({J} % 2)", "", "L % 4", "L / 4"),
    ("B", "s"): ("(cb + 4 * ({J} % 2) + {I}) * {LD} + rb + 8 * ({J} / 2)", "", "L % 4", "L / 4"),
}


_LDSM_X4 = _SNIPPETS['ldsm_x4']

_LDS_32 = _SNIPPETS['lds_32']

def _fragment_load(spec: PipeSpec, operand: str, trans, ld: int, k: dict) -> str:
    """CUDA source of one x4 fragment load of ``operand`` ("A": af[mi], "B": bf[nb]) for :data:`_MMA_SYNC`."""
    off = _LDSM[(operand, trans)][0]
    f, x = ("af", "mi") if operand == "A" else ("bf", "nb")
    base, item = ("sa" if operand == "A" else "sb"), ITEM_BYTES[spec.in_dtype]
    if trans == "s":
        return "".join(native.fill(_LDS_32, F=f, X=x, R=r, BASE=base, ITEM=item,
                                      OFF=off.format(J=r, I="l % 4", LD=ld, **k) + " + l / 4") for r in range(4))
    return native.fill(_LDSM_X4, TR=_LDSM[(operand, trans)][1], F=f, X=x, BASE=base, ITEM=item,
                           OFF=off.format(J="j", I="i", LD=ld, **k))


def _mma_fields(spec: PipeSpec) -> dict:
    wm, wn = mma_warps(spec)
    wtm, wtn = spec.tm // wm, spec.tn // wn
    ar, ac = spec.a_tile()
    br, bc = spec.b_tile()
    ald, bld = spec.stage_cols()
    tf = spec.tf32_mma
    p = 1 if tf else 2  # elements per 32-bit register
    kstep = 8 if tf else 16
    sa_, sb_ = spec.scalar_fragments()
    ta = "s" if sa_ else (not tf and spec.layout_a == "T")
    tb = "s" if sb_ else (not tf and spec.layout_b == "N")
    a_off, _, a_i, a_c = _LDSM[("A", ta)]  # (the .trans flag: _fragment_load)
    b_off, _, b_i, b_c = _LDSM[("B", tb)]
    k = dict(KH=4 * p, P=p)
    f = dict(VT=32 * spec.mma, NW=spec.mma, WM=wm, WN=wn, WTM=wtm, WTN=wtn, MI=wtm // 16, NJ=wtn // 8,
             NB=wtn // 16, PER=wtm * wtn // 32, KSTEP=kstep, KS=spec.tk // kstep, AR=ar, AC=ac, BR=br, BC=bc,
             ALD=ald, BLD=bld, SA=ar * ald, SB=br * bld, ITEM=ITEM_BYTES[spec.in_dtype],
             T="tf32" if tf else MMA_TYPES.get(spec.in_dtype, "f16"), SHAPE=f"m16n8k{kstep}",
             IT=native.C_TYPES[spec.in_dtype], A_OFF_CPU=a_off.format(J="j", I="i", LD=ald, **k), A_I=a_i,
             A_C=a_c.format(**k), B_OFF_CPU=b_off.format(J="j", I="i", LD=bld, **k), B_I=b_i, B_C=b_c.format(**k),
             A_LOAD=_fragment_load(spec, "A", ta, ald, k), B_LOAD=_fragment_load(spec, "B", tb, bld, k), **k,
             SCALAR_DOC=(" tf32 operands stored with k across rows: one 32-bit shared load per register instead (A: "
                         "row l / 4 + 8 (j % 2), k l % 4 + 4 (j / 2); B: k l % 4 + 4 (j % 2), column l / 4 + 8 (j / "
                         "2)); their rows are 8 or 24 words modulo 32, so the 32 loads hit 32 banks."
                         if sa_ or sb_ else ""),
             CVT_A=native.fill(_MMA_CVT, F="af", X="mi") if tf else "", CVT_B=native.fill(_MMA_CVT, F="bf", X="nb") if tf else "",
             CVT_DOC=" tf32: each register rounded to nearest (cvt.rna)." if tf else "",
             CPU_CVT=native.fill(_MMA_CPU_CVT) if tf else "", RND="tf32" if tf else "")
    f["GEOM"] = native.fill(_MMA_GEOMETRY, **f)
    return f


def _mma_sync_snippet(spec: PipeSpec, part: int | None = None) -> str:
    """The mma.sync product of a K step; float64 with ``part`` 0 / 1: the first / second half of its k slices
    (:func:`interleave_split`)."""
    if spec.in_dtype == "float64":
        f = _dmma_fields(spec)
        lo, hi = _part_range(f["KS"], interleave_split(spec) // 4, part)
        return native.fill(_DMMA, KS0=lo, KS1=hi, **f)
    return native.fill(_MMA_SYNC, **_mma_fields(spec))


def _part_range(n: int, split: int, part: int | None) -> tuple[int, int]:
    """Steps ``[0, n)`` of a K step's product, or its first (``part`` 0) / second (1) part, split at ``split``."""
    return (0, n) if part is None else ((0, split) if part == 0 else (split, n))


_DMMA = _SNIPPETS['dmma']

_DMMA_SM90 = _SNIPPETS['dmma_sm90']


def _dmma_fields(spec: PipeSpec) -> dict:
    """The fields of :data:`_DMMA` (float64 mma.sync): the 16-bit kernel's warp geometry and accumulator order, an
    element offset per operand and layout (A(r, k): ``r`` the tile row, ``k`` the stage's k; B(k, n)), and the sm_90
    instruction (``spec.mma_k``; 0: the m8n8k4 pairs of sm_80 there too)."""
    wm, wn = mma_warps(spec)
    wtm, wtn = spec.tm // wm, spec.tn // wn
    (ar, ac), (br, bc) = spec.a_tile(), spec.b_tile()
    ald, bld = spec.stage_cols()
    ki = max(1, spec.mma_k // 4)
    a_off = "(k) * {LD} + ({R})" if spec.layout_a == "T" else "({R}) * {LD} + (k)"
    b_off = "(n) * {LD} + (k)" if spec.layout_b == "T" else "(k) * {LD} + (n)"
    if spec.swizzle:
        # Element (row, col) of a swizzled stage lies at row * LD + (col ^ (4 (row % 4))) (SWIZZLE_COLS). A fragment's
        # rows r = wr + 16 mi + g (+ 8) and n = wc + 8 nj + g are g (mod 4), its k = 4 kk + t is t (mod 4): the
        # permutation is written with the lane's g & 3 and t. The lane-dependent offsets cost registers: 128x64x16 NN
        # takes 255 against 226 with padded rows (ptxas 13, sm_90; with row % 4 per fragment instead: 244).
        a_off = "(k) * {LD} + (({R}) ^ (4 * t))" if spec.layout_a == "T" else "({R}) * {LD} + ((k) ^ (4 * (g & 3)))"
        b_off = "(n) * {LD} + ((k) ^ (4 * (g & 3)))" if spec.layout_b == "T" else "(k) * {LD} + ((n) ^ (4 * t))"
    f = dict(VT=32 * spec.mma, NW=spec.mma, WM=wm, WN=wn, WTM=wtm, WTN=wtn, MI=wtm // 16, NJ=wtn // 8,
             PER=wtm * wtn // 32, TK=spec.tk, KS=spec.tk // 4, KI=ki, KI4=4 * ki, AR=ar, AC=ac, BR=br, BC=bc,
             ALD=ald, BLD=bld, SA=ar * ald, SB=br * bld, KMAP="4 * kk + t",
             A_OFF=a_off.format(R="r", LD=ald), A_OFF8=a_off.format(R="r + 8", LD=ald), B_OFF=b_off.format(LD=bld))
    f["GEOM"] = native.fill(_MMA_GEOMETRY, **f)
    if spec.mma_k:
        a_in = [f'"d"(af[{u}][mi][{h}])' for u in range(ki) for h in range(2)]
        b_in = [f'"d"(bf[{u}][nj])' for u in range(ki)]
        f["SM90"] = native.fill(_DMMA_SM90, KI=ki, KI4=4 * ki,
                                AREGS=", ".join(f"%{4 + i}" for i in range(2 * ki)),
                                BREGS=", ".join(f"%{4 + 2 * ki + i}" for i in range(ki)),
                                AIN=", ".join(a_in), BIN=", ".join(b_in))
        f["SM90_IF"] = "__CUDA_ARCH__ >= 900"
    else:  # m8n8k4 pairs on sm_90 too: the sm_80 branch
        f.update(SM90="", SM90_IF="0")
    return f


_WGMMA_GEOMETRY = _SNIPPETS['wgmma_geometry']

_WGMMA = _SNIPPETS['wgmma']

_WAIT_PROXY = _SNIPPETS['wait_proxy']

def _wgmma_fields(spec: PipeSpec) -> dict:
    it = ITEM_BYTES[spec.in_dtype]
    n_d = spec.tn // 2  # float32 sums per thread
    f = dict(VT=wgmma_threads(spec), TM=spec.tm, TN=spec.tn, TK=spec.tk, KS=spec.tk // 16, PER=n_d,
             SBO=(spec.tk * it // 16) * 128, SA=spec.tm * spec.tk * it, SB=spec.tn * spec.tk * it,
             T=MMA_TYPES.get(spec.in_dtype, "f16"), IT=native.C_TYPES[spec.in_dtype],
             DREGS=", ".join(f"%{i}" for i in range(n_d)), NA=n_d, NB=n_d + 1, NS=n_d + 2,
             DOUTS=", ".join(f'"+f"(d[{i}])' for i in range(n_d)))
    f["GEOM"] = native.fill(_WGMMA_GEOMETRY, **f)
    return f


def _wgmma_snippet(spec: PipeSpec) -> str:
    return native.fill(_WGMMA, **_wgmma_fields(spec))


_OWN_STORE = _SNIPPETS['own_store']

_OWN_AXPBY = _SNIPPETS['own_axpby']

_STAGED_STORE = _SNIPPETS['staged_store']

def _own_order(spec: PipeSpec) -> tuple[dict, dict]:
    """The product snippet's fields and where its output o of a thread lies (``ROW``, ``COL``, ``V`` consecutive
    columns, ``PER`` per thread): for :data:`_OWN_STORE` and :data:`_STAGED_STORE`."""
    if spec.simt:
        f = _simt_fields(spec)
        order = dict(ORDER="_SIMT_MMA", PER=f["PER"], V=4, ROW="row0 + (o / 8) % 4 + 16 * (o / 32)",
                     COL="col0 + o % 4 + 32 * ((o % 8) / 4)")
    elif spec.wgmma:
        f = _wgmma_fields(spec)
        order = dict(ORDER="_WGMMA", PER=f["PER"], V=2, ROW="wr + l / 4 + 8 * ((o % 4) / 2)",
                     COL="8 * (o / 4) + 2 * (l % 4) + o % 2")
    else:
        f = _dmma_fields(spec) if spec.in_dtype == "float64" else _mma_fields(spec)
        order = dict(ORDER="_MMA_SYNC", PER=f["PER"], V=2,
                     ROW=f"wr + 16 * (o / {4 * f['NJ']}) + l / 4 + 8 * ((o % 4) / 2)",
                     COL=f"wc + 8 * ((o / 4) % {f['NJ']}) + 2 * (l % 4) + o % 2")
    return f, order


def _acc_c_type(spec: PipeSpec) -> str:
    """The C type of a register accumulator's elements: double for float64 inputs, float for the others (spelled
    as before, so the other kernels' source is unchanged)."""
    return "double" if spec.acc_dtype == "float64" else "float"


def _staged_store_snippet(spec: PipeSpec) -> str:
    f, order = _own_order(spec)
    it = ITEM_BYTES[spec.out_dtype]
    vb = order["V"] * it
    return native.fill(_STAGED_STORE, OT=native.C_TYPES[spec.out_dtype], AT=_acc_c_type(spec), VT=f["VT"], GEOM=f["GEOM"], TM=spec.tm,
                                TN=spec.tn, RS=spec.tn * it + 16, IT=it, VB=vb, VTYPE=native.VEC_TYPES[vb], CH=16 // it,
                                CPR=spec.tn * it // 16, **order)


def _own_store_snippet(spec: PipeSpec) -> str:
    """:data:`_OWN_STORE` for the kernels whose product is a snippet (SIMT, mma.sync) and whose accumulator is the
    register tile's storage in that snippet's order."""
    ot = native.C_TYPES[spec.out_dtype]
    axpby = spec.epilogue == "axpby"
    f, order = _own_order(spec)
    vb = order["V"] * ITEM_BYTES[spec.out_dtype]
    at = _acc_c_type(spec)
    return native.fill(_OWN_STORE, OT=ot, AT=at, AXPBY=native.fill(_OWN_AXPBY, OT=ot, AT=at) if axpby else "", VT=f["VT"], GEOM=f["GEOM"],
                             AXPBY_DOC=" + beta * src[m0 + r, n0 + c]" if axpby else "", VB=vb,
                             VTYPE=native.VEC_TYPES[vb], **order)


def _simt_fields(spec: PipeSpec) -> dict:
    tr = spec.simt_rows
    # A's values of one k: tr / 4 16-byte loads, 16 rows apart (the 8-row kernel's two lines as they always read)
    aloads = "".join(f"            *(float4*){'a' if g == 0 else f'(a + {4 * g})'} = "
                     f"*(const float4*)(pa + ${{ALD}} * k{'' if g == 0 else f' + {16 * g}'});\n" for g in range(tr // 4))
    f = dict(VT=simt_threads(spec), WN=spec.tn // 64, WR=4 * tr, TR=tr, PER=tr * SIMT_TILE, NLD=tr // 4 + 2,
             TK=spec.tk, ALD=spec.tm + spec.pad_ab, BLD=spec.tn + spec.pad_ab)
    f["ALOADS"] = native.fill(aloads, ALD=f["ALD"])
    f.update(SA=spec.tk * f["ALD"], SB=spec.tk * f["BLD"], GEOM=native.fill(_SIMT_GEOMETRY, **f))
    return f


def _simt_mma_snippet(spec: PipeSpec, part: int | None = None) -> str:
    """The SIMT product of a K step; ``part`` 0 / 1: the first / second half of its k (:func:`interleave_split`)."""
    lo, hi = _part_range(spec.tk, interleave_split(spec), part)
    return native.fill(_SIMT_MMA, K0=lo, K1=hi, **_simt_fields(spec))


def _copy_t_snippet(spec: PipeSpec, rows: int, cols: int, dld: int) -> str:
    """:data:`_COPY_T` for a ``rows x cols`` region of a float32 operand (the SIMT kernel's A stored (M, K), B
    stored (N, K)) into a K-major stage of row stride ``dld``."""
    bd = spec.block_dim
    nw, bpr = bd // 32, cols // 8  # warps; blocks of 4 x 8 elements per 4 rows
    fast = bd % 32 == 0 and rows % 4 == 0 and cols % 8 == 0 and dld % 8 == 4
    if fast and nw % bpr == 0 and rows % (4 * nw // bpr) == 0:  # warps over the columns, then down the rows
        f = dict(RW=f"4 * (w / {bpr})", CW=f"8 * (w % {bpr})", Q1=rows // (4 * nw // bpr), RSTEP=4 * nw // bpr,
                 Q2=1, CSTEP=0)
    elif fast and bpr % nw == 0:  # warps across the columns, every warp down all rows
        f = dict(RW="0", CW="8 * w", Q1=rows // 4, RSTEP=4, Q2=bpr // nw, CSTEP=8 * nw)
    else:
        fast = False
        f = dict(RW="0", CW="0", Q1=0, RSTEP=0, Q2=0, CSTEP=0)
    return native.fill(_COPY_T, ROWS=rows, COLS=cols, DLD=dld, FAST="true" if fast else "false", **f)


def _store_snippet(spec: PipeSpec) -> str:
    ai, oi = ITEM_BYTES[spec.acc_dtype], ITEM_BYTES[spec.out_dtype]
    e = 16 // ai
    return native.fill(_STORE, OT=native.C_TYPES[spec.out_dtype], AT=native.C_TYPES[spec.acc_dtype], TM=spec.tm, TN=spec.tn,
                         TNC=spec.tn + spec.pad_c, E=e, VW=e * oi, VT=native.VEC_TYPES[e * oi], OI=oi,
                         TOTAL=spec.tm * (spec.tn // e), CPR=spec.tn // e)


def _copy_snippet(spec: PipeSpec, rows: int, cols: int, dld: int, checked: bool = False, core: bool = False) -> str:
    it = ITEM_BYTES[spec.in_dtype]  # checked: tile_gemm_func's run-time alignment check (_copy_check)
    ch = spec.chunk
    e = ch // it
    cpr, total, bd = cols // e, rows * (cols // e), spec.block_dim
    # the interior fast path: asynchronous whole chunks, each thread's the same count, rows of a whole block
    fast = (not checked and ch >= 4 and bd > 1 and total % bd == 0 and bd % cpr == 0)
    f = dict(DLD=dld, ITEM=it, TOTAL=total, CPR=cpr, E=e, CH=ch, CG="cg" if ch == 16 else "ca")
    per = bd // cpr if bd > 1 else 1
    if core:  # the wgmma kernel's core-matrix stage (_core_offset): a chunk's place, and q's rows PER apart
        f["DST"] = _core_offset("r", "cc", cols, it)
        qoff = f"{per // 8} * {(cols * it // 16) * 128}"
        fast = fast and per % 8 == 0
    elif getattr(spec, "swizzle", False):  # swizzled float64 stages (SWIZZLE_COLS): chunk c of row r at c ^ 2 (r % 4)
        f["DST"] = f"((size_t)r * {dld} + (cc ^ (4 * (r % 4)))) * {it}"
        qoff = f"{per} * {dld} * {it}"
        fast = fast and per % 4 == 0  # a thread's chunks a multiple of 4 rows apart: the same permutation
    else:
        f["DST"] = f"((size_t)r * {dld} + cc) * {it}"
        qoff = f"{per} * {dld} * {it}"
    g = dict(PER=per, NQ=total // bd, ROWS=rows, COLS=cols, QOFF=qoff, **f)
    # spec.edge_copy: regions crossing the operand's edge take the fast path's chunks too (_COPY_EDGE)
    edge = "\n" + native.fill(_COPY_EDGE, **g).rstrip("\n") if getattr(spec, "edge_copy", False) else ""
    path = native.fill(_COPY_FAST, EDGE=edge, **g) if fast else ""
    return native.fill(_COPY, FASTPATH=path, **f, **_copy_check(it, ch, e, rows, cols, dld, checked))


def _core_offset(r: str, c: str, cols: int, item: int) -> str:
    """Byte offset of element (r, c) (c a multiple of 16 bytes' elements for a chunk) in a stage of ``cols``
    elements per row stored as wgmma's K-major core matrices without swizzle (:data:`_WGMMA`): 8 rows x 16 bytes
    contiguous (128 bytes), the K-adjacent core matrix 128 bytes on (LBO), the next 8 rows cols * item / 16 core
    matrices on (SBO)."""
    e = 16 // item
    return (f"((size_t)(({c}) / {e}) * 128 + (size_t)(({r}) / 8) * {(cols * item // 16) * 128} + "
            f"(size_t)(({r}) % 8) * 16 + (size_t)(({c}) % {e}) * {item})")




_COPY_CHECK = _SNIPPETS['copy_check']

_COPY_ELEMENTS = _SNIPPETS['copy_elements']

_UINT = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


def _copy_check(it: int, ch: int, e: int, rows: int, cols: int, dld: int, checked: bool) -> dict:
    """The fields of _COPY that ``checked`` sets. Unchecked (the family's kernels, whose planner checked
    the operands with :func:`max_chunk`): cp.async for chunks of 4+ bytes, no check, no fallback -- the
    family's own text. Checked (tile_gemm_func, for arrays nobody has checked): the run-time test of
    _COPY_CHECK before the chunk loop, the element copy of _COPY_ELEMENTS after it, and cp.async only
    from sm_80 on."""
    if not checked:
        return dict(ASYNC=int(ch >= 4), CHECK="", FALLBACK="")
    f = dict(DLD=dld, ITEM=it, CH=ch, E=e, ELEMS=rows * cols, COLS=cols, UT=_UINT[it])
    return dict(ASYNC="(__CUDA_ARCH__ >= 800)" if ch >= 4 else 0, CHECK=native.fill(_COPY_CHECK, **f),
                FALLBACK=native.fill(_COPY_ELEMENTS, **f))


def _from_sm80(snippet: str) -> str:
    """``snippet`` (_COMMIT, _WAIT) with its cp.async PTX compiled only from sm_80 on: a user's module
    (tile_gemm_func) may be built for older GPUs, where ptxas rejects cp.async and the checked copy is
    synchronous."""
    guard = "#if defined(__CUDA_ARCH__)\n"
    assert snippet.count(guard) == 1, snippet
    return snippet.replace(guard, "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n")



@wp.func
def persistent_tile(lin: int, tiles_m: int, tiles_n: int, group_m: int):
    """``(batch entry, tile row, tile column)`` of a persistent block's linear tile index ``lin``: batch
    entries one after another, each in :func:`grouped_tile` order."""
    tiles = tiles_m * tiles_n
    bi = lin // tiles
    i, j = grouped_tile(lin - bi * tiles, tiles_m, tiles_n, group_m)
    return bi, i, j


def _stub_copy(IN, R, CP):
    def stub(dst: wp.tile(dtype=IN, shape=(R, CP)), d0: int, src: wp.array2d(dtype=IN), r0: int, c0: int): ...

    return stub


def _stub_acc(ACC, R, CP):
    def stub(acc: wp.tile(dtype=ACC, shape=(R, CP))): ...

    return stub


def _stub_store(OUT, ACC, R, CP):
    def stub(dst: wp.array2d(dtype=OUT), acc: wp.tile(dtype=ACC, shape=(R, CP)), alpha: ACC, m0: int, n0: int): ...

    return stub


def _stub_mma(IN, SAR, ACP, SBR, BCP, ACC, TM, TN):
    def stub(ba: wp.tile(dtype=IN, shape=(SAR, ACP)), bb: wp.tile(dtype=IN, shape=(SBR, BCP)),
             acc: wp.tile(dtype=ACC, shape=(TM, TN)), s: int): ...

    return stub


def _stub_own_store(OUT, ACC, TM, TN):
    def stub(dst: wp.array2d(dtype=OUT), src: wp.array2d(dtype=OUT), acc: wp.tile(dtype=ACC, shape=(TM, TN)),
             alpha: ACC, beta: ACC, m0: int, n0: int): ...

    return stub


def _stub_staged_store(IN, SAR, ACP, OUT, ACC, TM, TN):
    def stub(dst: wp.array2d(dtype=OUT), acc: wp.tile(dtype=ACC, shape=(TM, TN)),
             stage: wp.tile(dtype=IN, shape=(SAR, ACP)), alpha: ACC, m0: int, n0: int): ...

    return stub


def _stub_sk_zero(ACC, TM, TN):
    def stub(acc: wp.tile(dtype=ACC, shape=(TM, TN))): ...

    return stub


def _stub_sk_slot(ACC, TM, TN):
    def stub(acc: wp.tile(dtype=ACC, shape=(TM, TN)), ws: wp.array(dtype=ACC), flags: wp.array(dtype=wp.int32),
             slot: int, flag: int): ...

    return stub


def _stub_int():
    def stub(x: int): ...

    return stub


