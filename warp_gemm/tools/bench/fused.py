"""The ``fused`` benchmark suite: a GEMM with its epilogue inside one user Warp kernel (``warp_gemm.fused_gemm``:
the Hopper family's TMA + wgmma loop; ``warp_gemm.tile_gemm_func`` for float32) against the unfused pair
(``warp_gemm.matmul`` / ``warp_gemm.linear`` and a separate elementwise or reduction kernel) and against torch
(``F.linear`` / ``torch.matmul`` plus the activation). Issue 43's target rows first.

    warp-gemm bench --suite fused                          # every row on CUDA: a table (--json PATH: the rows)
    python -m warp_gemm.tools.bench.fused --rows silu4096 --json rows.json

Each row is one layer as a user would fuse it: ``silu(A @ B)``; ``gelu(x @ W.T + b)`` (``linear``); ``A @ B + R``
(a residual); ``sum_j exp(s (A @ B)[i, j])`` (a softmax denominator: the product is never stored). Providers:
``fused`` (the user kernel of this module on ``fused_gemm``'s ``g.func``, one block per output tile, the epilogue
in Warp tile code), ``fused_persistent`` / ``fused_persistent_256`` (16-bit rows: the same layer on ``g.tile_func``
at ``tn=128`` / 256, a persistent loop with each consumer thread's sums in registers, changed in place and stored
with ``g.store_frag``; ``--tn-regs``, ``--pingpong`` choose the first one's configuration), ``warp_gemm+ew``
(warp_gemm's product, then torch's elementwise or reduction kernel on its output; ``linear`` rows:
``warp_gemm.linear(..., activation=)``, its own epilogue), ``torch``. The fused providers are called as
docs/tile_func.md's fast pattern: operands described and the launch recorded on the first call, one replay per call
after (an operand staged into an aligned copy: ``operands`` and the launch per call). Every provider's result is
checked first on a sample of output rows against a float64 reference; a wrong one is reported "WRONG" and not timed.
Times: the runner's timer, ``triton.testing.do_bench`` (calls back to back, the L2 flushed before each, the host's
work overlapping the GPU's: median / p20 / p80 ms), every provider of a row in one process; ``ms_sync``: the median
of CUDA events around each call with a synchronisation between calls (the suite's earlier timer, for the record).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass

from .env import time_cuda
from .grouped import _time


@dataclass(frozen=True)
class Row:
    name: str
    op: str  # silu / linear_gelu / residual / rowsum
    dtype: str
    M: int
    N: int
    K: int
    target: str = ""


ROWS = [
    Row("silu4096", "silu", "float16", 4096, 4096, 4096, ">= 1.0x warp_gemm+ew"),
    Row("silu4095", "silu", "float16", 4095, 4095, 4095, ">= 1.0x warp_gemm+ew"),
    Row("gelu_bf16", "linear_gelu", "bfloat16", 4096, 4096, 4096, ">= 0.95x warp_gemm.linear"),
    Row("gelu_fp16", "linear_gelu", "float16", 4096, 4096, 4096),
    Row("gelu_bf16_odd", "linear_gelu", "bfloat16", 4095, 4097, 4095),
    Row("silu_bf16_2048", "silu", "bfloat16", 2048, 2048, 2048),
    Row("residual", "residual", "float16", 4096, 4096, 4096),
    Row("rowsum", "rowsum", "float16", 4096, 4096, 4096),
    Row("rowsum_odd", "rowsum", "bfloat16", 4095, 4095, 4095),
    Row("silu_fp32", "silu", "float32", 2048, 2048, 2048),
]

ER = 32  # rows of the accumulator per epilogue step: a (32, 128) float32 register tile is 11 values per thread
SCALE = 1.0 / 64.0
#: output tile columns of the 16-bit user kernels (fused_gemm's tn; 256 ran 0.911 ms against 0.457 at fp16 silu 4096^3,
#: H100: benchmarks/results/h100-fused/)
TN = 128  # the rowsum rows' exp(s * x): s = 1 / sqrt(4096), as attention scores
#: output tile columns of the persistent (tile_func) user kernels, and their consumers' ping-pong (None: fused_gemm's
#: default, on for 128 columns)
TN_REGS = 128
PINGPONG = None
#: the user kernels' silu with wp.div_approx (False: warp_gemm's activation_func, an IEEE division)
SILU_APPROX = True


# --- the user kernels ---------------------------------------------------------------------------------------------
_CACHE: dict = {}


def _act(op: str):
    """The user kernels' activation: gelu (warp_gemm's), or silu written as docs/tile_func.md's fast pattern does,
    ``x / (1 + exp(-x))`` with Warp's approximate division (``wp.div_approx``: 2 ulp, no branch). The IEEE
    division's slow-path branch (ptxas sm_90a: a BSSY/CALL per element) keeps the compiler from overlapping the 128
    sums of a thread; ``warp_gemm``'s own silu keeps the IEEE division."""
    import warp as wp

    from warp_gemm import _compat
    from warp_gemm.families.common.epilogue import activation_func

    if op != "silu" or not SILU_APPROX or not _compat.HAS_DIV_APPROX:
        return activation_func("gelu" if op == "linear_gelu" else "silu", wp.float32)
    if "silu" not in _CACHE:
        def silu_approx(x: float):
            return wp.div_approx(x, 1.0 + wp.exp(-x))

        _CACHE["silu"] = wp.func(silu_approx)
    return _CACHE["silu"]


def _kernels(op: str, dtype: str, layout_b: str, form: str = "tile", tn: int | None = None,
             pingpong: bool | None = None):
    """``(FusedGemm, kernel)``: the fused kernel of ``op`` written as a user would, built once. ``form`` "regs":
    the persistent loop over output tiles with ``g.tile_func`` (each consumer thread's sums in registers, the
    epilogue element by element, the stores through ``g.store_frag``) on ``fused_gemm(tn=, pingpong=)`` (default:
    ``TN_REGS``, ``PINGPONG``); "tile": ``g.func`` (the tile in the shared buffer, Warp tile code on ``ER``-row
    steps)."""
    tn = TN_REGS if tn is None else tn
    pingpong = PINGPONG if pingpong is None and tn == TN_REGS else pingpong
    key = (op, dtype, layout_b, form, tn, pingpong, SILU_APPROX)
    if key not in _CACHE:
        _CACHE[key] = (_build_regs(op, dtype, layout_b, tn, pingpong) if form == "regs"
                       else _build_kernel(op, dtype, layout_b))
    return _CACHE[key]


def _typed(f, T):
    """``f`` with its annotations that name ``T`` evaluated (this module's annotations are strings, and Warp resolves
    them from the function's closure, which holds ``T`` only where the body uses it)."""
    import warp as wp

    for k, v in f.__annotations__.items():
        if isinstance(v, str) and "dtype=T" in v:
            f.__annotations__[k] = eval(v, {"wp": wp, "T": T})  # noqa: S307 - this module's own annotation text
    return f


def _build_regs(op: str, dtype: str, layout_b: str, tn: int, pingpong: bool | None):
    import warp as wp

    import warp_gemm

    T = {"float16": wp.float16, "bfloat16": wp.bfloat16}[dtype]
    g = warp_gemm.fused_gemm(T, layout_b=layout_b, tn=tn, pingpong=pingpong)
    frag, origin, coord, FR, R, C = g.tile_func, g.tile_origin, g.tile_coord, g.frag, g.buf_rows, g.buf_cols
    act = _act(op)
    S = float(SCALE)
    NR = g.bn // 2  # entries per m64 block of a thread's fragment
    EPR = g.bn // 4  # entries per row
    RS = FR // EPR  # rows per thread
    opts = {"enable_backward": False}

    store = g.store_frag
    if op == "silu":
        def r_silu(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int, Y: wp.array2d(dtype=T)):
            buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
            for t in range(wp.tid(), items, G):
                acc = frag(buf, ta, tb, K, M, N, t, G)
                o = origin(M, N, t)
                if o[0] < M:  # a consumer thread with sums (the producer's threads: row 2^30)
                    for i in range(FR):
                        acc[i] = act(acc[i])
                    store(Y, acc, o)

        return g, wp.kernel(_typed(r_silu, T), module="unique", module_options=opts)
    if op == "linear_gelu":
        def r_lin(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                  bias: wp.array2d(dtype=T), Y: wp.array2d(dtype=T)):
            buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
            for t in range(wp.tid(), items, G):
                acc = frag(buf, ta, tb, K, M, N, t, G)
                o = origin(M, N, t)
                if o[0] < M:
                    for i in range(FR):
                        c = wp.min(coord(o, i)[1], N - 1)  # columns past N: any bias (store_frag drops them)
                        acc[i] = act(acc[i] + float(bias[0, c]))
                    store(Y, acc, o)

        return g, wp.kernel(_typed(r_lin, T), module="unique", module_options=opts)
    if op == "residual":
        def r_res(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                  Rm: wp.array2d(dtype=T), Y: wp.array2d(dtype=T)):
            buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
            for t in range(wp.tid(), items, G):
                acc = frag(buf, ta, tb, K, M, N, t, G)
                o = origin(M, N, t)
                if o[0] < M:
                    for i in range(FR):
                        rc = coord(o, i)
                        if rc[0] < M and rc[1] < N:
                            acc[i] = acc[i] + float(Rm[rc[0], rc[1]])
                    store(Y, acc, o)

        return g, wp.kernel(_typed(r_res, T), module="unique", module_options=opts)

    def r_rowsum(ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int, items: int, G: int,
                 out: wp.array(dtype=float)):
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        for t in range(wp.tid(), items, G):
            acc = frag(buf, ta, tb, K, M, N, t, G)
            o = origin(M, N, t)
            # a thread's entries lie on RS rows: entry h * NR + 4 j + 2 e + q on row coord(o, h * NR + 2 e)[0]
            for rs in range(RS):
                h = rs // 2
                e = rs % 2
                sm = wp.float32(0.0)
                for jq in range(EPR):
                    i = h * NR + 4 * (jq // 2) + 2 * e + jq % 2
                    if coord(o, i)[1] < N:
                        sm += wp.exp(S * acc[i])
                r = coord(o, h * NR + 2 * e)[0]
                if r < M:
                    wp.atomic_add(out, r, sm)

    return g, wp.kernel(r_rowsum, module="unique", module_options=opts)


def _build_kernel(op: str, dtype: str, layout_b: str):
    import warp as wp

    import warp_gemm

    T = {"float16": wp.float16, "bfloat16": wp.bfloat16}[dtype]
    g = warp_gemm.fused_gemm(T, layout_b=layout_b, tn=TN)
    gemm, BM, BN, R, C = g.func, g.bm, g.bn, g.buf_rows, g.buf_cols
    act = _act(op)
    S = float(SCALE)
    opts = {"enable_backward": False}

    if op == "silu":
        def k_silu(ta: wp.uint64, tb: wp.uint64, K: int, Y: wp.array2d(dtype=T)):
            i, j = wp.tid()
            buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
            gemm(buf, ta, tb, K, i * BM, j * BN)
            for e in range(BM // ER):
                v = wp.tile_view(buf, offset=(e * ER, 0), shape=(ER, BN))
                wp.tile_store(Y, wp.tile_astype(wp.tile_map(act, v), T), offset=(i * BM + e * ER, j * BN))

        return g, wp.kernel(k_silu, module="unique", module_options=opts)
    if op == "linear_gelu":
        def k_lin(ta: wp.uint64, tb: wp.uint64, K: int, bias: wp.array2d(dtype=T), Y: wp.array2d(dtype=T)):
            i, j = wp.tid()
            buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
            gemm(buf, ta, tb, K, i * BM, j * BN)
            brow = wp.tile_astype(wp.tile_load(bias, shape=(1, BN), offset=(0, j * BN)), float)
            bb = wp.tile_broadcast(brow, shape=(ER, BN))
            for e in range(BM // ER):
                v = wp.tile_view(buf, offset=(e * ER, 0), shape=(ER, BN))
                y = wp.tile_map(act, wp.tile_map(wp.add, v, bb))
                wp.tile_store(Y, wp.tile_astype(y, T), offset=(i * BM + e * ER, j * BN))

        return g, wp.kernel(k_lin, module="unique", module_options=opts)
    if op == "residual":
        def k_res(ta: wp.uint64, tb: wp.uint64, K: int, Rm: wp.array2d(dtype=T), Y: wp.array2d(dtype=T)):
            i, j = wp.tid()
            buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
            gemm(buf, ta, tb, K, i * BM, j * BN)
            for e in range(BM // ER):
                v = wp.tile_view(buf, offset=(e * ER, 0), shape=(ER, BN))
                r = wp.tile_astype(wp.tile_load(Rm, shape=(ER, BN), offset=(i * BM + e * ER, j * BN)), float)
                wp.tile_store(Y, wp.tile_astype(wp.tile_map(wp.add, v, r), T), offset=(i * BM + e * ER, j * BN))

        return g, wp.kernel(k_res, module="unique", module_options=opts)

    @wp.func
    def exp_s(x: float):
        return wp.exp(S * x)

    def k_rowsum(ta: wp.uint64, tb: wp.uint64, K: int, N: int, out: wp.array(dtype=float)):
        i, j = wp.tid()
        buf = wp.tile_empty(shape=(R, C), dtype=float, storage="shared")
        gemm(buf, ta, tb, K, i * BM, j * BN)
        # columns past N hold zeros, and exp(0) = 1 must not count: subtract them
        pad = float(wp.max(0, j * BN + BN - N))
        for e in range(BM // ER):
            v = wp.tile_view(buf, offset=(e * ER, 0), shape=(ER, BN))
            s = wp.tile_sum(wp.tile_map(exp_s, v), axis=1)
            s = wp.tile_map(wp.sub, s, wp.tile_ones(shape=(ER,), dtype=float) * pad)
            wp.tile_atomic_add(out, s, offset=(i * BM + e * ER,))

    return g, wp.kernel(k_rowsum, module="unique", module_options=opts)


def _fp32_kernel():
    """float32 ``silu(A @ B)`` through ``tile_gemm_func`` (the Hopper loop takes 16-bit inputs only)."""
    import warp as wp

    import warp_gemm
    from warp_gemm.families.common.epilogue import activation_func

    if "fp32" in _CACHE:
        return _CACHE["fp32"]
    TM, TN = 128, 128
    mma = warp_gemm.tile_gemm_func(TM, TN, 32, wp.float32)
    act = activation_func("silu", wp.float32)

    def k32(A: wp.array2d(dtype=float), B: wp.array2d(dtype=float), Y: wp.array2d(dtype=float)):
        i, j = wp.tid()
        acc = mma(A, B, i * TM, j * TN)
        wp.tile_store(Y, wp.tile_map(act, acc), offset=(i * TM, j * TN))

    _CACHE["fp32"] = (TM, TN, wp.kernel(k32, module="unique"))
    return _CACHE["fp32"]


# --- one row ------------------------------------------------------------------------------------------------------
_BOUND = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 1e-5}


def _rel_err(out, ref) -> float:
    return float((out.double() - ref).norm() / max(ref.norm(), 1e-30))


def run_row(row: Row, reps: int, device: str = "cuda", time: bool = True, persistent: bool = True,
            passes: int = 1) -> list[dict]:
    """The providers' records of ``row`` on ``device`` (``time`` False: the checks only, e.g. on the CPU);
    ``persistent``: also the ``fused_persistent`` provider (the user kernel on ``g.tile_func``, 16-bit rows).
    ``passes``: every provider is checked first, then timed ``passes`` times in turn (provider 1, 2, ..., 1, 2, ...);
    its ``ms`` is the median of its passes' medians (``ms_passes``), so that a drift of the SM clock during the row
    (H100: 1980 -> 1680 MHz within one process) reaches every provider alike."""
    import contextlib

    import torch
    import torch.nn.functional as F
    import warp as wp

    import warp_gemm

    tdt = getattr(torch, row.dtype)
    M, N, K = row.M, row.N, row.K
    gen = torch.Generator(device=device).manual_seed(hash(row.name) % 2**31)
    a = (torch.randn(M, K, device=device, generator=gen) * K ** -0.25).to(tdt)
    lin = row.op == "linear_gelu"
    w = (torch.randn(N, K, device=device, generator=gen) * K ** -0.25).to(tdt)  # linear: W (N, K); else B = W.T
    b = w.T.contiguous() if not lin else None  # B (K, N)
    bias = torch.randn(N, device=device, generator=gen).to(tdt)
    res = torch.randn(M, N, device=device, generator=gen).to(tdt)
    pick = torch.arange(0, M, max(1, M // 61), device=device)[:64]
    pick = torch.unique(torch.cat([pick, torch.tensor([M - 1], device=device)]))
    z = a[pick].double() @ w.double().T
    if row.op == "silu":
        ref = z * torch.sigmoid(z)
    elif lin:
        zb = z + bias.double()
        ref = 0.5 * zb * (1.0 + torch.erf(zb / math.sqrt(2.0)))
    elif row.op == "residual":
        ref = z + res[pick].double()
    else:
        ref = torch.exp(SCALE * z).sum(1)
    flops = 2.0 * M * N * K
    dev = "cpu" if device == "cpu" else wp.device_from_torch(a.device)
    tstream = None if device == "cpu" else wp.stream_from_torch(torch.cuda.current_stream())

    def scope():
        """Warp's launches on torch's current stream (the one the CUDA events time)."""
        return contextlib.nullcontext() if tstream is None else wp.ScopedStream(tstream)
    wa, wb, ww = wp.from_torch(a), (wp.from_torch(b) if b is not None else None), wp.from_torch(w)

    def torch_fn():
        if row.op == "silu":
            return F.silu(a @ b)
        if lin:
            return F.gelu(F.linear(a, w, bias))
        if row.op == "residual":
            return torch.addmm(res, a, b)
        return torch.exp(SCALE * (a @ b).float()).sum(1)

    def unfused():
        if lin:
            return warp_gemm.linear(a, w, bias, activation="gelu")
        y = warp_gemm.matmul(a, b)
        if row.op == "silu":
            return F.silu(y)
        if row.op == "residual":
            return y.add_(res)
        return torch.exp(SCALE * y.float()).sum(1)

    if row.dtype == "float32":
        TM, TN, k32 = _fp32_kernel()
        y32 = torch.empty(M, N, device=device, dtype=tdt)
        wy32 = wp.from_torch(y32)

        def fused():
            with scope():
                wp.launch_tiled(k32, dim=(-(-M // TM), -(-N // TN)), inputs=[wa, wb, wy32], block_dim=256,
                                 device=dev)
            return y32
    else:
        y = torch.empty(M, N, device=device, dtype=tdt)
        wy = wp.from_torch(y)
        rs = torch.empty(M, device=device, dtype=torch.float32)
        wrs = wp.from_torch(rs)
        wbias = wp.from_torch(bias.reshape(1, N))
        wres = wp.from_torch(res)
        last = [wrs] if row.op == "rowsum" else [wy] if row.op == "silu" else [wbias if lin else wres, wy]

        wB = ww if lin else wb
        cmds: dict = {}

        def layer(form: str, tn: int | None = None):
            """The user's layer call (the fast pattern of docs/tile_func.md): operands whose rows TMA reads in
            place are described once and the launch recorded once, each call replays it (one native launch);
            an operand staged into an aligned copy is staged again per call (its values may change)."""
            def call():
                if row.op == "rowsum":
                    rs.zero_()
                cmd = cmds.get((form, tn))
                if cmd is not None:
                    cmd.launch()
                    return rs if row.op == "rowsum" else y
                g, kern = _kernels(row.op, row.dtype, "T" if lin else "N", form, tn)
                ops = g.operands(wa, wB)
                if form == "regs":
                    inputs = ops.args + last
                    go = lambda r: g.launch_tiles(kern, ops, inputs, device=dev, record_cmd=r)  # noqa: E731
                else:
                    inputs = [ops.a, ops.b, ops.K] + ([N, wrs] if row.op == "rowsum" else last)
                    go = lambda r: g.launch(kern, M, N, inputs, device=dev, record_cmd=r)  # noqa: E731
                if not ops.staged:  # both read in place: record
                    cmds[(form, tn)] = go(True)
                    cmds[(form, tn)].launch()
                else:
                    go(False)
                return rs if row.op == "rowsum" else y

            def fn():
                with scope():
                    return call()
            return fn

        fused = layer("tile")
        fused_persistent = layer("regs")
        fused_persistent_256 = layer("regs", 256)

    out = []
    timed = []  # (record, fn) of the providers that passed their check
    provs = [("fused", fused), ("warp_gemm+ew", unfused), ("torch", torch_fn)]
    if row.dtype != "float32" and persistent:
        provs[1:1] = [("fused_persistent", fused_persistent)] + (
            [("fused_persistent_256", fused_persistent_256)] if TN_REGS != 256 and row.op != "rowsum" else [])
    for name, fn in provs:
        rec = {"row": row.name, "op": row.op, "dtype": row.dtype, "M": M, "N": N, "K": K, "provider": name,
               "target": row.target}
        try:
            if name.startswith("fused"):
                (y32 if row.dtype == "float32" else rs if row.op == "rowsum" else y).fill_(float("nan"))
            r = fn()
            if device != "cpu":
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported per provider
            out.append(dict(rec, status=f"error: {type(e).__name__}: {str(e)[:160]}"))
            continue
        err = _rel_err(r[pick], ref)
        if not math.isfinite(err) or err > _BOUND[row.dtype]:
            out.append(dict(rec, status=f"WRONG (rel. error {err:.1e})"))
            continue
        out.append(dict(rec, status="ok", rel_err=err))
        if time:
            timed.append((out[-1], fn))
    # the runner's timer (triton.testing.do_bench: back-to-back calls, the host's work overlapping the GPU's, L2
    # flushed between calls), the providers in turn in each pass
    runs: dict = {id(r): [] for r, _ in timed}
    for _ in range(max(1, passes)):
        for r, fn in timed:
            runs[id(r)].append(time_cuda(fn, "cuda", warmup_ms=25.0, rep_ms=100.0))
    for r, fn in timed:
        ts = sorted(runs[id(r)], key=lambda t: t.median_ms)
        t = ts[len(ts) // 2]
        # for the record the per-call-synchronised events of earlier versions
        r.update(ms=t.median_ms, p20=t.p20_ms, p80=t.p80_ms, tflops=flops / t.median_ms / 1e9,
                 ms_passes=[x.median_ms for x in runs[id(r)]], ms_sync=_time(fn, reps)[0])
    return out


def table(rows: list[dict]) -> str:
    """Markdown: one line per provider; "pair ÷ this": the unfused pair's time over this provider's (above 1: this
    one is faster); "sync ms": the same provider timed with a synchronisation between calls (earlier method)."""
    lines = ["| row | dtype | M×N×K | provider | ms | TFLOP/s | pair ÷ this | sync ms | status |",
             "|---|---|---|---|---|---|---|---|---|"]
    pair = {r["row"]: r.get("ms") for r in rows if r["provider"] == "warp_gemm+ew"}
    for r in rows:
        ms = r.get("ms")
        f = pair.get(r["row"])
        ratio = f"{f / ms:.2f}×" if ms and f and r["provider"] != "warp_gemm+ew" else ""
        t = "" if ms is None else f"{ms:.3f} | {r['tflops']:.0f}"
        sync = f"{r['ms_sync']:.3f}" if r.get("ms_sync") else ""
        lines.append(f"| {r['row']} | {r['dtype']} | {r['M']}×{r['N']}×{r['K']} | {r['provider']} | "
                     f"{t or ' | '} | {ratio} | {sync} | {r['status']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m warp_gemm.tools.bench.fused", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", nargs="*", default=None, help=f"row names (default: all): {[r.name for r in ROWS]}")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--check-only", action="store_true",
                   help="build every provider and check it against float64, no timing (e.g. to fill Warp's kernel "
                        "cache from parallel processes first)")
    p.add_argument("--no-persistent", action="store_true",
                   help="skip the fused_persistent provider (g.tile_func's persistent kernels)")
    p.add_argument("--tn-regs", type=int, default=TN_REGS,
                   help="tn of the fused_persistent provider's fused_gemm (128, 256)")
    p.add_argument("--pingpong", type=int, choices=(0, 1), default=None,
                   help="the fused_persistent provider's fused_gemm pingpong (default: fused_gemm's)")
    p.add_argument("--passes", type=int, default=3,
                   help="times every provider of a row is timed, in turn; its ms: the median pass")
    p.add_argument("--silu-ieee", action="store_true",
                   help="the fused kernels' silu with warp_gemm's activation (an IEEE division) instead of "
                        "wp.div_approx")
    args = p.parse_args(argv)
    globals()["SILU_APPROX"] = not args.silu_ieee
    globals()["TN_REGS"] = args.tn_regs
    globals()["PINGPONG"] = None if args.pingpong is None else bool(args.pingpong)
    import torch
    import warp as wp

    wp.init()
    if not torch.cuda.is_available():
        p.exit(2, "the fused suite times CUDA events: it needs torch with CUDA and a GPU\n")
    rows = [r for r in ROWS if args.rows is None or r.name in args.rows]
    out = []
    for r in rows:
        res = run_row(r, args.reps, time=not args.check_only, persistent=not args.no_persistent,
                      passes=args.passes)
        out += res
        for x in res:
            print(json.dumps(x), flush=True)
    print(f"\n{torch.cuda.get_device_name()}")
    print(table(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
