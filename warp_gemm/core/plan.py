"""Problem -> Plan: which kernel family, which configuration, which operand transforms, workspaces and
epilogue, and the launch grid. Pure: it allocates nothing and launches nothing (``core.execute`` does),
so a plan can be inspected (``warp_gemm.explain``-style tooling, tests) and a family added by adding
one branch to :func:`make_plan`.

Families today: ``"host"`` (the CPU's BLAS, kernels/host.py), ``"tiled"`` (the Warp tile kernel,
kernels/tiled.py), ``"pipelined"``, ``"splitpipe"``, ``"small"``, ``"skinny"``, ``"gemv"`` (kernels/
pipelined.py, small.py, skinny.py, gemv.py; chosen in :func:`_plan_family`) and ``"fill"`` (no product:
K == 0 or alpha == 0).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from warp_gemm import _compat
from warp_gemm.config import choice, tables
from warp_gemm.config import configs as _config
from warp_gemm.config.configs import Config, PipeConfig
from warp_gemm.core.operands import Operand, as3d
from warp_gemm.core.options import Options
from warp_gemm.core.problem import Problem
from warp_gemm.kernels import tiled
from warp_gemm.kernels.common import ITEM_BYTES, acc_dtype_name

NO_CLAMP = 2**30


@dataclass(frozen=True)
class Plan:
    """Everything ``core.execute`` needs to run one problem. Operands are the problem's, after the
    layout swap (a column-major ``out`` is computed as ``D^T = op(B)^T @ op(A)^T``)."""

    family: str  # "host" | "tiled" | "pipelined" | "splitpipe" | "small" | "skinny" | "gemv" | "fill"
    A: Operand
    B: Operand
    C: Operand | None
    D: Operand
    M: int
    N: int
    use_c: bool  # beta != 0 and C given
    out_k: str  # dtype the kernels write (the output's, or the accumulator's for a temporary output)
    tmp_out: bool  # the kernels write a temporary, converted into D at the end
    d3: tuple  # D as (shape, element strides), 3-D
    # --- tiled family (None/unused elsewhere) ---
    widen: bool = False  # Warp 1.7: 16-bit operands widened to float32 first
    cfg: Config | None = None
    spec: tiled.KernelSpec | None = None
    padded: bool = False  # A and B copied into zero-padded tile-multiple buffers
    splits: int = 1
    k_per_split: int = 1
    k_tiles: int = 0
    tiles_m: int = 0
    tiles_n: int = 0
    workspace: tuple | None = None  # (shape, zeroed) of the accumulator-dtype workspace
    c_into_d: bool = False  # C first written into the output, which the kernel reads back
    clamps: tuple = (NO_CLAMP, NO_CLAMP, NO_CLAMP)  # m_clamp, n_clamp, k_clamp
    # --- the other device families (pipelined, small, skinny, gemv): their spec; workspace is (shape, dtype)
    family_spec: object = None
    stage: tuple = (False, False)  # A / B copied into a cached buffer with 16-byte aligned rows first
    activation: str | None = None  # applied to the result (kernels/epilogue.py)
    fused_activation: bool = False  # in the kernel's epilogue; else one elementwise pass after it
    # --- pipelined: the last row / column peeled off to the GEMV family (:func:`_peel`) ---
    peel: tuple = (0, 0)  # (rows, columns) peeled, 0..PEEL_MAX each; family_spec covers (M - rows) x (N - cols)
    edge_specs: tuple = (None, None)  # the peeled rows' (rows x N) and columns' spec: gemv one wide, else skinny
    edge_ws: tuple = (None, None)  # their workspaces ((shape, dtype) where K is split, else None)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (max(self.D.shape[0], 1) if self.D.ndim == 3 else 1, self.tiles_m * self.tiles_n, self.splits)


def make_plan(p: Problem, alpha: float, beta: float, allow_tf32: bool, config: Config | None,
              opts: Options, activation: str | None = None) -> Plan:
    """The plan for ``p``: the family first, then that family's decisions."""
    A, B, C, D, M, N = _swap_for_column_major_out(p)
    dev = p.A.device
    use_c = C is not None and beta != 0.0
    (dnb, dr, dc), (_, _, sdc) = as3d(D)
    # Without tile_astype the kernel's output dtype must be its accumulator dtype; a D without unit
    # column stride (after the swap) is written through a temporary.
    acc = acc_dtype_name(p.in_dtype)
    tmp_out = (not _compat.HAS_TILE_ASTYPE and p.out_dtype != acc) or (dc > 1 and sdc != 1)
    out_k = acc if tmp_out and not _compat.HAS_TILE_ASTYPE else p.out_dtype
    base = Plan("fill", A, B, C, D, M, N, use_c, out_k, tmp_out, as3d(D), activation=activation)
    if p.K == 0 or alpha == 0.0:
        return base
    if dev.is_cpu and opts.cpu_backend == "host" and opts.family in (None, "host") and config is None:
        return replace(base, family="host", tmp_out=False, out_k=p.out_dtype)
    if config is None and opts.family != "tiled":
        other = _plan_family(base, p, allow_tf32, opts)
        if other is not None:
            return other
    return _plan_tiled(base, p, alpha, allow_tf32, config, opts)


def _plan_family(base: Plan, p: Problem, allow_tf32: bool, opts: Options) -> Plan | None:
    """The pipelined, small, gemv, splitpipe or skinny family where one applies (CUDA; on the CPU backend
    only when ``opts.family`` names it, for tests), else None (the tiled family).

    Rules (H100, warp-lang 1.19; docs/performance.md): batched 16-bit products of 17-32 output sides,
    K <= 128, >= 256 entries, aligned rows -> pipelined (32x32 tiles); other batched products whose
    outputs are at most 32x32 -> small; a smaller output side of exactly 1 -> gemv; one output side at
    most 16 -> splitpipe or skinny; else the pipelined family where its copies can be asynchronous
    (rows 4-, 8- or 16-byte aligned) and there are enough 128x128 output tiles (:func:`pipelined_min_tiles`:
    16-bit products from 1 where K <= 2048, from 4 above, other dtypes from 24), its last
    1-8 rows or columns peeled off to the GEMV or skinny family where that saves a wave (:func:`_peel`);
    the rest (tiny, 2-byte-aligned rows, strided operands, old Warp) -> tiled.

    Before the rules: on CUDA, a family the tuning tables name for the problem's bucket (the ``"...|family"``
    groups, ``warp-gemm tune --family families``; float32 buckets ship) is planned as if forced (``Options.family``),
    where it plans the problem; a table naming ``"tiled"`` sends it to the tiled family."""
    from warp_gemm.kernels import gemv, pipelined, skinny, small

    dev = p.A.device
    if (dev.is_cpu and opts.family is None) or base.tmp_out or _compat.WIDEN_16BIT_INPUTS:
        return None
    la, lb = _layout(base.A, False)[0], _layout(base.B, False)[0]
    if "copy" in (la, lb) or any(_needs_copy(op) for op in (base.A, base.B)):
        return None
    M, N, K = base.M, base.N, p.K
    epi = "axpby" if base.use_c else "scale"
    tf32 = bool(allow_tf32 and p.in_dtype == "float32" and _compat.HAS_TF32 and not dev.is_cpu)
    if opts.family is None and opts.pipe_config is None:
        # the tables' '|family' winner for this bucket (user's table, then the shipped one; untuned layouts borrow NN)
        fam = tables.lookup_family(dev, p.in_dtype, la + lb, M, N, K, p.batch, tf32)
        if fam == "tiled":
            return None
        if fam is not None:
            forced = _plan_family(base, p, allow_tf32, replace(opts, family=fam))
            if forced is not None and forced.family == fam:
                return forced
    c_into_d = base.use_c and not c_in_place(base.C, p.out_dtype, M, N)
    want = opts.family
    spec = None
    # Batched 16-bit products of 17-32 output sides with 16-byte-aligned rows: the pipelined family's 32x32
    # tiles beat the small family's (pipelined.tiny_batched; 4096 x 32^3 20.2 us cold L2 against 27.2).
    tiny = (want is None and not dev.is_cpu and pipelined.tiny_batched(p.in_dtype, M, N, K, p.batch)
            and min(_max_chunk(base.A), _max_chunk(base.B)) >= 16
            and pipelined.applies(dev, p.in_dtype, False, 16, la + lb))
    if want in (None, "small") and p.batch > 1 and not tf32 and not tiny:
        spec, fam = small.choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi), "small"
    if spec is None and want in (None, "gemv") and min(M, N) == 1:
        # A matrix-vector product (smaller output side exactly 1) is bandwidth-bound: kernels/gemv.py
        # streams the matrix with 16-byte loads and warp shuffles, no tiles or shared memory, where the
        # skinny family's 1x128 tiles took 31 us for fp16 1x4096x4096 (cold L2, H100; cuBLAS 20.7). After
        # small: batched products whose whole outputs and K fit small's tiles stay there (a warp per
        # output would idle most lanes at K <= 128). tf32 too: the exact fp32 GEMV loses nothing.
        spec = gemv.choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi)
        if spec is not None:
            return replace(base, family="gemv", family_spec=spec, c_into_d=c_into_d,
                           workspace=gemv.workspace_shape(spec, M, N, K, p.batch))
    if spec is None and want in (None, "splitpipe") and not tf32:
        sp = _plan_split_pipe(base, p, la, lb, epi, c_into_d, want)
        if sp is not None:
            return sp
    if spec is None and want in (None, "skinny") and not tf32:
        spec, fam = skinny.choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi), "skinny"
        if spec is not None:
            ws = skinny.workspace_shape(spec, M, N, K, p.batch)
            return replace(base, family=fam, family_spec=spec, c_into_d=c_into_d, workspace=ws)
    if spec is not None:
        return replace(base, family=fam, family_spec=spec, c_into_d=c_into_d)
    if want not in (None, "pipelined"):
        return None
    tiles = p.batch * -(-M // 128) * -(-N // 128)
    exact32 = p.in_dtype == "float32" and not tf32
    # exact float32 on CUDA without a fused activation: pipelined.default_spec's SIMT kernel
    simt32 = exact32 and not dev.is_cpu and pipelined.MMA_DEFAULT and base.activation is None
    if exact32 and want is None and not (simt32 and tiles >= SIMT_MIN_TILES):
        # exact float32 through tile_matmul (MathDx SIMT): at most 32 TFLOP/s in this family, the tiled family's
        # kernel 32.5: tiled. The SIMT kernel (pipelined default_spec) takes the large problems on CUDA: 44.9 at
        # 4096^3 against 32.5 (H100, round 13), but 1000^3 (64 tiles; round 12's 128x64 tiles) 17.8 against 19.1.
        return None
    ca, cb = _max_chunk(base.A), _max_chunk(base.B)
    # Operands whose rows are not 16-byte aligned are first copied (staged) into a cached buffer whose
    # rows are: fp16 4095^3 ran at 138 TFLOP/s staged against 18 with 2-byte synchronous copies, tf32
    # 77 against 46 with 4-byte cp.async (H100; benchmarks/results/pipelined/).
    stage = (ca < 16, cb < 16)
    simt = opts.pipe_config.simt if opts.pipe_config is not None else simt32
    if not pipelined.applies(dev, p.in_dtype, tf32, 16, la + lb, simt):
        return None
    if want is None and tiles < pipelined_min_tiles(p.in_dtype, K):
        return None
    spec = choose_pipe_spec(dev, p.in_dtype, p.out_dtype, tf32, la + lb, epi, M, N, K, p.batch, base.activation,
                            opts.pipe_config)
    if pipelined.smem_bytes(spec) > pipelined.SMEM_LIMIT:
        return None
    plan = replace(base, family="pipelined", family_spec=spec, c_into_d=c_into_d, stage=stage,
                   fused_activation=base.activation is not None)
    return _peel(plan, p, la, lb, epi, tf32, opts) or plan


# The peel's time model (H100, fp16, one block per SM): a 128-deep K step of a 128x128 block takes ~3.3 us
# (4096^3: 846 us for 8 waves of 32 steps, runner), a 96x128 block pipelined.NARROW_COST of that; the GEMV
# family streams its matrix at ~2.5 TB/s (fp16 1x4096x4096 colsum 32 MiB in ~13 us from DRAM), plus ~3 us a
# launch. A peel is kept where the model says it saves over PEEL_MIN_GAIN of the time.
PEEL_STEP_S = 3.3e-6
PEEL_GEMV_BYTES_PER_S = 2.5e12
PEEL_LAUNCH_S = 3e-6
PEEL_MIN_GAIN = 0.02
# Where peeling one side is enough and either would do (4097^3: 33 x 32 = 1056 blocks is 8 waves too), which:
# "row" (a 1 x N GEMV over B) or "col" (an (M - 1) x 1 GEMV over A).
PEEL_FIRST = "row"
# Widest edge peeled (rows or columns past the core's last multiple of 32): 1 the GEMV family, 2..8 skinny.
PEEL_MAX = 8
# The skinny family's edges stream their big operand far slower than a GEMV: fp16 4099^3's three peeled rows
# and 4104^3's eight took ~70 us over 32 MiB of B (H100, benchmarks/results/round8/r12p.txt): ~0.5 TB/s.
PEEL_SKINNY_BYTES_PER_S = 0.5e12


def peel_time(full, core, M: int, N: int, K: int, batch: int, rows: int, cols: int, item: int,
              sms: int) -> float | None:
    """The peel's time model (seconds): pipelined spec ``core`` over (M - rows) x (N - cols), in waves of one
    block per SM, plus the edges (the peeled rows stream all of B, K x N; the columns A's core rows) at
    the GEMV or skinny family's rate -- or None where that does not beat ``full`` over M x N by
    ``PEEL_MIN_GAIN``. Only the large configuration's tiles (128x128 and 96x128, one block per SM) are
    modelled; anything else: None."""
    from warp_gemm.kernels import pipelined

    cost = {(128, 128): 1.0, (96, 128): pipelined.NARROW_COST}
    if any((s.tm, s.tn) not in cost or s.min_blocks > 1 for s in (full, core)):
        return None

    def waves(s, m, n):
        return -(-batch * -(-m // s.tm) * -(-n // s.tn) // sms)

    per_wave = -(-K // 128) * PEEL_STEP_S
    t_full = waves(full, M, N) * cost[(full.tm, full.tn)] * per_wave

    def edge(width, big):  # seconds for one edge: stream its big operand (big x K) once, plus launches
        if not width:
            return 0.0
        rate, launches = (PEEL_GEMV_BYTES_PER_S, 1) if width == 1 else (PEEL_SKINNY_BYTES_PER_S, 2)
        return big * K * item * batch / rate + launches * PEEL_LAUNCH_S

    edges = edge(rows, N) + edge(cols, M - rows)
    t = waves(core, M - rows, N - cols) * cost[(core.tm, core.tn)] * per_wave + edges
    return t if t <= (1 - PEEL_MIN_GAIN) * t_full else None


def _edge_family(width: int):
    """The module that computes a peeled edge of ``width`` rows/columns: the GEMV family for 1, else skinny."""
    from warp_gemm.kernels import gemv, skinny

    return gemv if width == 1 else skinny


def _edge_spec(dev, p: Problem, la: str, lb: str, M: int, N: int, K: int, epi: str):
    if min(M, N) == 1:
        return _edge_family(1).choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi)
    return _edge_family(2).choose_spec(dev, p.in_dtype, la, lb, M, N, K, p.batch, p.out_dtype, epi, max_side=PEEL_MAX)


def _peel(plan: Plan, p: Problem, la: str, lb: str, epi: str, tf32: bool, opts: Options) -> Plan | None:
    """``plan`` with its last output rows and/or columns peeled off, or None where that does not pay. A
    side a little over a multiple of the tile (4097 with 128-row tiles) costs a whole row (column) of
    output tiles whose blocks do a full K loop for a few useful rows: 4097^3 fp16 is 33 x 33 = 1089
    blocks, 9 waves on 132 SMs, against 8 for the 32 x 33 blocks of a 4096 x 4097 core. The peeled rows
    are a ``rows x N`` product over all of B, the columns an ``(M - rows) x cols`` product over A's core
    rows: the GEMV family where one wide (rowdot/colsum), else the skinny family (up to ``PEEL_MAX``), on
    views of the same (possibly staged) operands, launched after the core kernel.

    Where: 16-bit inputs on CUDA whose core and full plans both use the large configuration (128x128 or
    96x128 tiles, one block per SM), no activation (the edge kernels have no fused one), the edge families
    available, a one-wide edge's vector contiguous (the row where A is stored (M, K), the column where B
    is stored (N, K)), and the time model (:func:`peel_time`) saying the core plus the edges save at least
    ``PEEL_MIN_GAIN``. H100, fp16 (cold L2, cuBLAS in the same run; benchmarks/results/round8/):
    4097^3 1025.6 -> 943.8 us (0.99 -> 1.07x cuBLAS), bf16 4097^3 with B stored (N, K) 978.9 -> 892.7
    (1.20 -> 1.32x), 8193x4097x4096 1814.5 -> 1724.8 (1.13 -> 1.19x); 2049^3 with B stored (N, K), both
    sides, 182.6 -> 156.2 (1.04 -> 1.22x); skinny edges: 4099^3 1029.9 -> 999.1 (0.99 -> 1.02x), 4103^3
    1028.6 -> 1007.9. On the CPU backend only with ``Options.peel_on_cpu`` (then every edge of
    1..PEEL_MAX past the CPU twin's 32x32 tiles, no model): how CPU CI runs this path."""
    from warp_gemm.kernels import pipelined

    dev = p.A.device
    M, N, K, batch = plan.M, plan.N, p.K, p.batch
    spec = plan.family_spec
    if plan.activation is not None or opts.pipe_config is not None or tf32:
        return None
    if dev.is_cpu:
        if not opts.peel_on_cpu:
            return None
        pr, pc = M % spec.tm, N % spec.tn
    else:
        if p.in_dtype not in ("float16", "bfloat16"):
            return None
        pr, pc = M % 32, N % 32
        # A one-wide edge is a GEMV: only where its vector operand is contiguous (the row's: A's last row,
        # layout N; the column's: B's last column, B stored (N, K), layout T). A strided vector costs the
        # GEMV a scalar load per element per output: peeling 4097^3 NN's column took 998 us against 944
        # for its row (H100, benchmarks/results/round8/r11p.txt). Wider edges go to the skinny family.
        pr = 0 if pr == 1 and la != "N" else pr
        pc = 0 if pc == 1 and lb != "T" else pc
    pr = pr if 0 < pr <= PEEL_MAX and M > pr else 0
    pc = pc if 0 < pc <= PEEL_MAX and N > pc else 0
    if not (pr or pc):
        return None
    best = None
    one = [(pr, 0), (0, pc)] if PEEL_FIRST == "row" else [(0, pc), (pr, 0)]
    for r, c in dict.fromkeys([(pr, pc)] + one):  # both sides, or one (the model picks; ties: the first)
        if not (r or c):
            continue
        core = choose_pipe_spec(dev, p.in_dtype, p.out_dtype, tf32, la + lb, epi, M - r, N - c, K, batch)
        if pipelined.smem_bytes(core) > pipelined.SMEM_LIMIT:
            continue
        # CPU: the widest peel (no model); CUDA: the least modelled time
        t = -(r + c) if dev.is_cpu else peel_time(spec, core, M, N, K, batch, r, c, ITEM_BYTES[p.in_dtype],
                                                   _compat.sm_count(dev))
        if t is not None and (best is None or t < best[0]):
            best = (t, r, c, core)
    if best is None:
        return None
    _, pr, pc, core = best
    row = _edge_spec(dev, p, la, lb, pr, N, K, epi) if pr else None
    col = _edge_spec(dev, p, la, lb, M - pr, pc, K, epi) if pc else None
    if (pr and row is None) or (pc and col is None):
        return None
    ws = (_edge_family(pr).workspace_shape(row, pr, N, K, batch) if pr else None,
          _edge_family(pc).workspace_shape(col, M - pr, pc, K, batch) if pc else None)
    return replace(plan, family_spec=core, peel=(pr, pc), edge_specs=(row, col), edge_ws=ws)


def choose_pipe_spec(dev, in_dtype: str, out_dtype: str, tf32: bool, layout: str, epilogue: str, M: int, N: int,
                     K: int, batch: int, activation: str | None = None, forced: PipeConfig | None = None):
    """The pipelined family's kernel for one problem: ``pipelined.default_spec`` (the measured H100 choices),
    with a configuration's fields applied over it (:func:`pipe_spec`): ``forced`` (``Options.pipe_config``:
    raises ValueError where its kernel does not fit), else on CUDA the tuned winner of the problem's bucket
    (``tables.lookup_pipe``), kept only where its kernel fits (else the default stands). Both lookups are
    memoized, and a repeated call does not plan at all (core/execute.py's call plans)."""
    from warp_gemm.kernels import pipelined

    spec = pipelined.default_spec(in_dtype, out_dtype, tf32=tf32, layout=layout, epilogue=epilogue, chunk=16,
                                  device_is_cpu=dev.is_cpu, M=M, N=N, batch=batch, K=K,
                                  sm_count=_compat.sm_count(dev) if not dev.is_cpu else 132, activation=activation)
    if forced is not None:
        tuned = pipe_spec(spec, forced, dev.is_cpu)
        if tuned is None:
            raise ValueError(f"pipe_config {forced}: {pipelined.unfit(_with_pipe_config(spec, forced, dev.is_cpu))} "
                             f"({in_dtype}{' tf32' if tf32 else ''}, layout {layout})")
        return tuned
    if not dev.is_cpu:
        hit = tables.lookup_pipe(dev, in_dtype, layout, M, N, K, batch, tf32)
        if hit is not None:
            return pipe_spec(spec, hit, False) or spec
    return spec


def _with_pipe_config(spec, cfg: PipeConfig, device_is_cpu: bool):
    from warp_gemm.kernels import pipelined

    fields = cfg.fields()
    if cfg.simt or cfg.mma:  # snippet products: padded A/B rows (bank-conflict-free), the accumulator in registers
        fields.update(pad_ab=pipelined.PAD_AB.get(spec.in_dtype, 0), pad_c=0)
    if cfg.wgmma:  # unpadded core-matrix stages, the accumulator in registers
        fields.update(pad_ab=0, pad_c=0)
    if not (cfg.simt or cfg.mma or cfg.wgmma) and (spec.simt or spec.mma or spec.wgmma) and not device_is_cpu:
        # a tile_matmul configuration over a snippet default: tile_matmul's paddings (shared accumulator)
        fields.update(pad_ab=pipelined.PAD_AB[spec.in_dtype], pad_c=pipelined.PAD_C[spec.acc_dtype])
        if spec.in_dtype == "float32" and not spec.tf32:  # exact fp32 through tile_matmul: dense, register acc
            fields.update(pad_ab=0, pad_c=0)
    if device_is_cpu:  # one thread per block on the CPU (default_spec's CPU spec); no launch bound
        fields.update(block_dim=spec.block_dim, min_blocks=0)
        # persistent tile_matmul blocks re-zero a shared accumulator: give it one (simt/mma: registers)
        if cfg.persistent and not spec.pad_c and not (cfg.simt or cfg.mma):
            fields.update(pad_c=pipelined.PAD_C[spec.acc_dtype])
    return replace(spec, **fields)


@functools.lru_cache(maxsize=1024)
def pipe_spec(spec, cfg: PipeConfig, device_is_cpu: bool = False):
    """``spec`` (a ``pipelined.PipeSpec``) with ``cfg``'s tile shape, stages, block size and blocks per SM
    (dtypes, layouts, epilogue, paddings and chunk kept), or None where that kernel does not fit: more
    shared memory than ``pipelined.SMEM_LIMIT`` or a spec the family refuses (``pipelined.unfit``). On the
    CPU the block stays ``spec``'s (one thread) and there is no launch bound."""
    from warp_gemm.kernels import pipelined

    out = _with_pipe_config(spec, cfg, device_is_cpu)
    return None if pipelined.unfit(out) else out


def candidate_pipe_configs(dtype: str, tf32: bool = False) -> list[PipeConfig]:
    """The pipelined family's tuner candidates for ``dtype`` (``config.configs.PIPE_CANDIDATES``: 8-17
    around the measured bests) whose CUDA kernel fits in every layout: shared memory within
    ``pipelined.SMEM_LIMIT`` with the dtype's default paddings, and the family's checks. Exact float32: the
    SIMT kernel's (the planner's choice for its large problems on CUDA)."""
    from warp_gemm.kernels import pipelined

    out = []
    for cfg in _config.pipe_candidate_list(dtype, tf32):
        if all(pipe_spec(pipelined.default_spec(dtype, tf32=tf32, layout=lay), cfg) is not None
               for lay in ("NN", "NT", "TN", "TT")):
            out.append(cfg)
    return out


def _plan_split_pipe(base: Plan, p: Problem, la: str, lb: str, epi: str, c_into_d: bool, want) -> Plan | None:
    """A small side of 5..16 (batch 1): the pipelined kernel over K slices as a batch (zero-copy strided
    views), partial products into the cached workspace, then skinny's finishing pass. 16x8192x8192 fp16
    on the H100: 74.5 us against 139.6 for the skinny family's MathDx tiles and 115 for the tiled
    family (benchmarks/results/small_skinny/NOTES.md); 65.5 us with 4 slices instead of 8 (round 6,
    ``skinny._SPLIT_BLOCKS``). Larger M through this plan (small grids, 128x64 tiles) measured slower
    than the pipelined family's 64x32 tiles (benchmarks/results/round6/r6d.txt)."""
    import types

    from warp_gemm.kernels import pipelined, skinny

    dev = p.A.device
    rules_dev = types.SimpleNamespace(is_cpu=False) if dev.is_cpu and want == "splitpipe" else dev
    # Measured and checked on the H100 for a small M with A in row-major storage only: with A stored
    # transposed (layout T) the 16-row pipelined tiles gave wrong products on CUDA (rel. error 0.3,
    # tests/test_small_skinny.py::test_split_pipe_composition, xfail there) -- never planned.
    if la != "N" or base.M > base.N:
        return None
    cfg = skinny.split_pipe_config(rules_dev, p.in_dtype, la, lb, base.M, base.N, p.K, p.batch, p.out_dtype, epi)
    if cfg is None:
        return None
    chunk = min(_max_chunk(base.A), _max_chunk(base.B))
    if chunk < 16 or not pipelined.applies(dev, p.in_dtype, False, 16):
        return None
    pipe = dict(cfg["pipe"])
    if dev.is_cpu:
        pipe["block_dim"] = 1
    spec = pipelined.PipeSpec(in_dtype=p.in_dtype, out_dtype=acc_dtype_name(p.in_dtype), layout_a=la, layout_b=lb,
                              epilogue="scale", **pipe)
    if pipelined.smem_bytes(spec) > pipelined.SMEM_LIMIT:  # float64 with 128-deep K tiles: 304 KB
        return None
    s = cfg["splits"]
    return replace(base, family="splitpipe", family_spec=(spec, s), c_into_d=c_into_d,
                   workspace=skinny.split_pipe_workspace_shape(base.M, base.N, s, p.in_dtype))


#: Output tiles of 128x128 from which the pipelined family (its small-problem configuration where 128x64 tiles fit
#: in one wave)
#: is chosen over the tiled family's smaller tiles and split-K. fp16 1000^3 (64 tiles): 68.6 TFLOP/s
#: pipelined against 47 tiled; 127x4099x1031 (33 tiles, odd K) ran 4.2 TFLOP/s on the tiled family's
#: element-wise loads (H100, benchmarks/results/round2/).
#: Round 5: with the 64x32 tiles for grids under half the SMs, 16-bit inputs take the pipelined family from
#: 4 output tiles (256^2): fp16 256^3 8.2 us against 9.7, 384^3 9.5 against 12.5, 500^3 17.5 against 34.8
#: (staging included), 512^3 10.9 against 18.3 (H100, graph replay, benchmarks/results/round5/diag6.txt).
#: Other dtypes keep 24 (unmeasured below it).
PIPELINED_MIN_TILES = {"float16": 4, "bfloat16": 4, "other": 24}
#: Round 16: 16-bit products of 1-3 output tiles whose K is at most this take the pipelined family too (its 64x32
#: small-grid tiles): 1.6-2.9x faster than the tiled family, e.g. fp16 64^3 20.7 -> 7.8 us, 128^3 17.5 -> 7.1,
#: 100x200x300 36.3 -> 12.6, 64x64x1024 36.7 -> 12.5 (cuBLAS 6.1 / 5.7 / 8.2 / 7.6); at 48x80x4000 the tiled
#: family's split-K stays ahead (38.6 against 42.3 us). H100, runner, benchmarks/results/round16/r17b_*.txt.
PIPELINED_FEW_TILES_MAX_K = 2048


def pipelined_min_tiles(dtype: str, K: int) -> int:
    """The fewest 128x128 output tiles for which the planner's rules take the pipelined family (unforced)."""
    if dtype in ("float16", "bfloat16") and K <= PIPELINED_FEW_TILES_MAX_K:
        return 1
    return PIPELINED_MIN_TILES.get(dtype, PIPELINED_MIN_TILES["other"])


# Exact float32 goes to the pipelined family's SIMT kernel from this many 128x128 output tiles (two waves of 132
# SMs); measured: 1024 tiles and more win (4095^3, 4096^3, 8192^3), 64 lose (1000^3); between them, not measured.
SIMT_MIN_TILES = 264


def _needs_copy(op: Operand) -> bool:
    from warp_gemm.core.operands import layout_view

    return layout_view(op)[0] is None


def _max_chunk(op: Operand) -> int:
    """The widest copy chunk (bytes) every row of the kernel's view of ``op`` allows."""
    from warp_gemm.core.operands import layout_view

    view, _ = layout_view(op)
    it = ITEM_BYTES[op.dtype]
    vals = [view.ptr] + [st for st, n in zip(view.strides[:-1], view.shape[:-1]) if n > 1]
    for c in (16, 8, 4, 2):
        if c >= it and all(v % c == 0 for v in vals):
            return c
    return it


def _swap_for_column_major_out(p: Problem):
    """A column-major out (unit row stride): compute D^T = op(B)^T @ op(A)^T into its row-major
    transpose, so the kernel's stores stay coalesced."""
    A, B, C, D, M, N = p.A, p.B, p.C, p.D, p.M, p.N
    (_, dr, dc), (_, sdr, sdc) = as3d(D)
    if dc > 1 and sdc != 1 and (sdr == 1 or dr == 1):
        A, B, D = p.B.transposed(), p.A.transposed(), D.transposed()
        C = C.transposed() if C is not None and C.ndim >= 2 else C
        if C is not None and C.ndim == 1:  # a (N,) bias becomes a column: (N, 1)
            C = replace(C, shape=(C.shape[0], 1), strides=(C.strides[0], 0))
        M, N = N, M
    return A, B, C, D, M, N


def _layout(op: Operand, widen: bool) -> tuple[str, bool]:
    """(layout the kernel reads, whether the array it reads has 16-byte aligned rows). A strided operand
    is read from a contiguous copy ("N"); a widened one (Warp 1.7) from a contiguous float32 copy."""
    from warp_gemm.core.operands import layout_view

    view, lay = layout_view(op)
    if view is None:
        (nb, r, c), _ = as3d(op)
        lay, ptr, shape, item = "N", 0, (nb, r, c), ITEM_BYTES[op.dtype]
        strides = (r * c * item, c * item, item)
    else:
        ptr, shape, strides = view.ptr, view.shape, view.strides
    if widen:
        ptr, strides = 0, (shape[1] * shape[2] * 4, shape[2] * 4, 4)
    return lay, not (ptr % 16 or strides[1] % 16 or (shape[0] > 1 and strides[0] % 16))


def _plan_tiled(base: Plan, p: Problem, alpha: float, allow_tf32: bool, config: Config | None,
                opts: Options) -> Plan:
    dev = p.A.device
    M, N, K = base.M, base.N, p.K
    widen = _compat.WIDEN_16BIT_INPUTS and p.in_dtype in ("float16", "bfloat16")
    in_k = "float32" if widen else p.in_dtype
    acc = acc_dtype_name(p.in_dtype)
    (la, a_aligned), (lb, b_aligned) = _layout(base.A, widen), _layout(base.B, widen)
    tf32 = bool(allow_tf32 and p.in_dtype == "float32" and _compat.HAS_TF32 and not dev.is_cpu)
    cfg = config or choice.choose(dev, p.in_dtype, la + lb, M, N, K, p.batch, tf32)
    pad = (not dev.is_cpu or opts.pad_on_cpu) and M * N * K >= opts.pad_min_work
    padded = pad and bool(M % cfg.tm or N % cfg.tn or K % cfg.tk or not (a_aligned and b_aligned))
    pads = tiled.smem_pads(in_k, dev.is_cpu and not opts.smem_pad_on_cpu, tf32 or opts.smem_pad_on_cpu)
    tiles_m, tiles_n, k_tiles = -(-M // cfg.tm), -(-N // cfg.tn), -(-K // cfg.tk)
    # Automatic splits only on CUDA; an explicit split_k (tests, tuning) is honoured anywhere.
    if dev.is_cpu and cfg.split_k == 0:
        splits = 1
    else:
        splits = _config.split_count(cfg, p.batch * tiles_m * tiles_n, k_tiles, _compat.sm_count(dev))
    k_per_split = -(-k_tiles // splits)
    splits = -(-k_tiles // k_per_split)  # no empty splits
    (dnb, dr, dc), _ = base.d3
    workspace = None
    c_into_d = False
    if splits > 1 or padded:
        # Split-K partial sums meet in a zeroed accumulator-dtype workspace (tile-multiple sized when
        # padded); one finishing pass applies alpha, beta*C and the output dtype.
        epilogue, kernel_out = ("splitk" if splits > 1 else "scale"), acc
        workspace = ((dnb, tiles_m * cfg.tm, tiles_n * cfg.tn) if padded else (dnb, dr, dc), splits > 1)
    else:
        epilogue, kernel_out = ("axpby" if base.use_c else "scale"), base.out_k
        c_into_d = base.use_c and not c_in_place(base.C, base.out_k, M, N)
    k_clamp = NO_CLAMP if padded else k_clamp_for(K, cfg, pads[0], in_k, dev.is_cpu, opts)
    spec = tiled.KernelSpec(cfg.tm, cfg.tn, cfg.tk, in_k, kernel_out, la, lb, epilogue, tf32, *pads,
                            *tiled.occupancy_bound(cfg, dev.is_cpu), k_tail=k_clamp != NO_CLAMP)
    rows_cols = workspace[0][1:] if workspace else (dr, dc)
    m_clamp, n_clamp = edge_clamps(rows_cols, cfg, epilogue, c_into_d or workspace is not None, dev.is_cpu, opts)
    return replace(base, family="tiled", widen=widen, cfg=cfg, spec=spec, padded=bool(padded), splits=splits,
                   k_per_split=k_per_split, k_tiles=k_tiles, tiles_m=tiles_m, tiles_n=tiles_n,
                   workspace=workspace, c_into_d=c_into_d, clamps=(m_clamp, n_clamp, k_clamp))


def c_in_place(C: Operand, out_k: str, M: int, N: int) -> bool:
    """Whether the kernel reads C in place: C has the kernel's dtype, N columns with unit stride, and
    M rows or one row that broadcasts (a bias: read through a zero row stride, no extra pass). Anything
    else (a column bias, a strided view, another dtype) is first written into the output, which the
    kernel then reads back tile by tile before overwriting that same tile."""
    shape = (1,) * (3 - C.ndim) + tuple(C.shape)
    strides = (0,) * (3 - C.ndim) + tuple(C.strides)
    return shape[1] in (1, M) and shape[2] == N and (strides[2] == 1 or N == 1) and C.dtype == out_k


def edge_clamps(rows_cols, cfg: Config, epilogue: str, c_is_d: bool, is_cpu: bool, opts: Options) -> tuple[int, int]:
    """The kernel's ``m_clamp``/``n_clamp``: the last tile row (column) starts at ``M - tm`` (``N - tn``)
    instead of running past the edge, so its loads stay inside the arrays and take Warp's vectorized
    path (a tile not wholly inside its array is copied element by element). fp16 on the H100: 1024^3
    ran in 41 us, 1000x1024x1024 in 74 and 1024x1000x1024 in 78 -- the edge blocks with scalar loads
    finished last (benchmarks/results/probes/edges_h100.json).

    The overlapping rows are computed by two blocks and stored twice with the same values, which is
    safe for the plain and axpby epilogues reading a separate C; not for split-K (atomic adds) nor
    when C was first copied into D (one block would read C after the other overwrote it). CUDA only:
    on the CPU backend the copies are scalar either way and the overlap is extra work."""
    rows, cols = rows_cols
    if (is_cpu and not opts.edge_clamp_on_cpu) or epilogue == "splitk" or (epilogue == "axpby" and c_is_d):
        return NO_CLAMP, NO_CLAMP
    return (rows - cfg.tm if rows >= cfg.tm else NO_CLAMP), (cols - cfg.tn if cols >= cfg.tn else NO_CLAMP)


def k_clamp_for(K: int, cfg: Config, pad_ab: int, in_dtype: str, is_cpu: bool, opts: Options) -> int:
    """The kernel's ``k_clamp``: with K not a multiple of ``tk``, the last K tile starts at ``K - tk``
    (in bounds, so Warp copies it with vector loads) and the kernel zeroes its first ``tk - K % tk``
    columns of A / rows of B, which the previous tile already counted. Padded-shared-tile kernels only
    (where the tiles are shared and can be zeroed in place), and only when the overlap is a whole
    number of 16-byte chunks (``tiled.K_CHUNK_BYTES``). fp16 on the H100: the partial last K tile
    cost 13 us of 55 at 1024x1024x1000 (benchmarks/results/probes/edges_h100_after_clamp.json)."""
    chunk = tiled.K_CHUNK_BYTES // ITEM_BYTES[in_dtype]
    r = K % cfg.tk
    if (is_cpu and not opts.edge_clamp_on_cpu) or not pad_ab or K <= cfg.tk or r == 0 or (cfg.tk - r) % chunk:
        return NO_CLAMP
    return K - cfg.tk
