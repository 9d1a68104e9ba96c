"""``fused_gemm``: the Hopper family's K loop (TMA + wgmma) inside a user's own Warp tile kernel.

    g = warp_gemm.fused_gemm(wp.float16)                   # B stored (K, N); layout_b="T" for W (N, K)
    gemm, BM, BN, ROWS, COLS = g.func, g.bm, g.bn, g.buf_rows, g.buf_cols

    @wp.kernel(module="unique", module_options={"enable_backward": False})
    def layer(ta: wp.uint64, tb: wp.uint64, K: int, Y: wp.array2d(dtype=wp.float16)):
        i, j = wp.tid()
        buf = wp.tile_empty(shape=(ROWS, COLS), dtype=float, storage="shared")
        gemm(buf, ta, tb, K, i * BM, j * BN)                # rows 0..BM-1 of buf: the float32 tile of A @ B
        acc = wp.tile_view(buf, offset=(0, 0), shape=(BM, BN))
        wp.tile_store(Y, wp.tile_astype(wp.tile_map(silu, acc), wp.float16), offset=(i * BM, j * BN))

    ops = g.operands(A, B)                                  # descriptors (and aligned copies where rows need them)
    g.launch(layer, M, N, inputs=[ops.a, ops.b, ops.K, Y])

See docs/tile_func.md.
"""

# No `from __future__ import annotations`: Warp reads the stub's annotations as objects.
import collections
import contextlib
import dataclasses
import functools
import threading

import numpy as np
import warp as wp

from . import _compat
from .families.common import native
from .families.hopper import kernel as _hkernel
from .families.hopper import spec as _hspec
from .tile import dtype_name

#: Stages per tile shape: the Hopper family's (hopper/rules.py STAGES): 128x256 4 stages, 128x128 6.
_STAGES = {256: 4, 128: 6}
#: Extra float32 columns per accumulator row: row stride 1056 / 544 bytes, so the eight rows one warp's float2
#: stores reach fall 32 bytes apart in the banks (every 128-byte wavefront whole).
_PAD = 8

#: tile_func's two ping-pong order mbarriers, after the stages' barriers
_ORDER_BYTES = 16
#: Tile rows per group of the persistent order (the Hopper family's launch.GROUP_M): neighbouring blocks share A rows
#: and B columns in L2.
_GROUP_M = 8

#: (A, B) descriptor pairs kept per configuration for operands read in place
_MAX_OPERANDS = 64

_lock = threading.Lock()
_cpu_lock = threading.Lock()


@dataclasses.dataclass
class Operands:
    """What :meth:`FusedGemm.operands` returns: the kernel arguments ``a``, ``b`` (``wp.uint64`` descriptors) and
    ``K``, and the arrays they point into (kept alive here: aligned copies, the CPU's descriptor words)."""

    a: int
    b: int
    K: int
    M: int
    N: int
    keep: tuple = ()
    #: work items of :attr:`FusedGemm.tile_func` (``ceil(tiles / FusedGemm.tiles_per_item)`` of the product's
    #: ``ceil(M / bm) * ceil(N / bn)`` output tiles) and the persistent grid (blocks) of :meth:`FusedGemm.launch_tiles`
    items: int = 0
    grid: int = 0
    #: an operand's rows were copied into an aligned buffer at this call: a recorded launch (``record_cmd``) would
    #: read that copy's values on every replay, so such operands need ``operands`` (and the launch) per call
    staged: bool = False

    @property
    def args(self) -> list:
        """The first seven inputs of a :attr:`FusedGemm.tile_func` kernel: ``ta, tb, K, M, N, items, G``."""
        return [self.a, self.b, self.K, self.M, self.N, self.items, self.grid]


class FusedGemm:
    """One ``(dtype, layout_b, tn)`` configuration of :func:`fused_gemm` (built once, cached)."""

    def __init__(self, in_name: str, layout_b: str, tn: int, pingpong: bool):
        self.dtype = in_name
        #: tile_func's consumers: ping-pong (each warpgroup a whole tile, one multiplying while the other runs the
        #: caller's epilogue) or sharing each tile
        self.pingpong = pingpong
        #: output tiles per tile_func work item (one per consumer warpgroup in ping-pong)
        self.layout_b = layout_b
        self.bm, self.bn = 128, tn
        self.consumers = 2
        self.stages = _STAGES[tn]
        self.block_dim = 128 * (1 + self.consumers)
        stage = (self.bm + self.bn) * 64 * 2
        self.buf_cols = tn + _PAD
        need = self.stages * (stage + _hspec.MBAR_BYTES) + _ORDER_BYTES + _hspec.ALIGN_SLACK
        self.buf_rows = max(self.bm, -(-need // (4 * self.buf_cols)))
        #: shared memory of the caller's buffer (bytes): the stages, their barriers and the 1024-byte alignment
        self.smem_bytes = self.buf_rows * self.buf_cols * 4
        assert self.bm * self.buf_cols * 4 <= self.stages * stage  # the sums never reach the barriers
        self.tiles_per_item = self.consumers if pingpong else 1
        self.key = f"warp_gemm_fused_{in_name}_{layout_b}_{self.bm}x{tn}_s{self.stages}"
        #: sums per thread of :attr:`tile_func` (a consumer warpgroup's wgmma fragment: a whole tile in ping-pong,
        #: half of one otherwise)
        self.frag = self.bm // (64 * (1 if pingpong else self.consumers)) * (tn // 2)
        self._maps: collections.OrderedDict = collections.OrderedDict()
        self.func = self._build()
        #: the persistent form: ``tile_func(buf, ta, tb, K, M, N, t, G)`` -> this thread's ``frag`` float32 sums,
        #: ``tile_origin(M, N, t)`` / ``tile_coord(o, i)`` their rows and columns, ``store_frag(Y, vals, o)`` stores
        #: ``frag`` float32 values in that order into Y (the configuration's dtype; 16-byte stores where Y's rows
        #: are aligned, nothing outside Y)
        self.tile_func, self.tile_origin, self.tile_coord, self.store_frag = self._build_tiles()

    def _build(self):
        sn = native.load(_hspec.__file__, "block.cuh")
        f = self._fields()
        # the sums start at zero (block_gemm zeroes them): every k16 step accumulates
        stage = _hkernel.wgmma_stage(f, a_off="(unsigned)(c * WGM) * 8192u", b_off="0u", acc="1",
                                     lead="tid % 128 == 0")
        text = native.fill(sn["block_gemm"], TWIN=native.fill(sn["twin_dot"], **f), C_STAGE=stage, **f)
        R, C = self.buf_rows, self.buf_cols

        def stub(buf: wp.tile(dtype=wp.float32, shape=(R, C)), ta: wp.uint64, tb: wp.uint64, K: int, row: int,
                 col: int): ...

        return native.func(text, self.key, stub)

    def _fields(self) -> dict:
        nr = self.bn // 2
        b_mn = self.layout_b == "N"
        return {"BM": self.bm, "BN": self.bn, "ST": self.stages, "NC": self.consumers,
                "WGM": self.bm // (64 * self.consumers), "GM": _GROUP_M, "FR": self.frag, "ROWS": self.buf_rows,
                "COLS": self.buf_cols, "IN_T": _hspec.PTX_TYPES[self.dtype], "IT": native.C_TYPES[self.dtype],
                "B_MN": int(b_mn), "B_STEP": "2048u" if b_mn else "32u", "B_LBO": "8192" if b_mn else "16",
                "DREGS": ", ".join(f"%{i}" for i in range(nr)), "NA": nr, "NB": nr + 1, "NS": nr + 2,
                "DOUTS": ", ".join(f'"+f"(d[h][{i}])' for i in range(nr)),
                "CBN": self.bn, "KI": 16, "TRANS": f", 0, {int(b_mn)}",
                "HELPERS": native.load(_hkernel.__file__, "gemm.cuh")["helpers"],
                "P_STAGE": _hkernel.tma_stage(self, "row", map_a="ta", map_b="tb", b_col="col", a_batch="0",
                                              b_batch="0")}

    def _build_tiles(self):
        sn = native.load(_hspec.__file__, "block.cuh")
        pp = self.pingpong
        f = {**self._fields(), "PP": int(pp), "TW": self.tiles_per_item, "NE": 1 if pp else self.consumers,
             "WGM": self.bm // (64 * (1 if pp else self.consumers))}
        rc = native.fill(sn["frag_rc"], **f)
        # arow: the consumer's first m64 block of A (ping-pong: a whole tile each); a tile's first k16 step overwrites
        stage = _hkernel.wgmma_stage(f, a_off="arow", b_off="0u", acc="(kt != 0) | (kk != 0)", lead="tid % 128 == 0")
        frag_text = native.fill(sn["tile_frag"], RC=rc, TWIN=native.fill(sn["twin_dot"], **f), C_STAGE=stage, **f)
        origin_text = native.fill(sn["tile_origin"], RC=rc)
        coord_text = native.fill(sn["tile_coord"], RC=rc)
        R, C = self.buf_rows, self.buf_cols
        vec = wp.types.vector(length=self.frag, dtype=wp.float32)

        name = self.key + ("_pp" if pp else "_coop")

        @_named.func_native(frag_text, name + "_frag")
        def frag(buf: wp.tile(dtype=wp.float32, shape=(R, C)), ta: wp.uint64, tb: wp.uint64, K: int, M: int, N: int,
                 t: int, G: int) -> vec: ...

        @_named.func_native(origin_text, name + "_origin")
        def origin(M: int, N: int, t: int) -> wp.vec2i: ...

        @_named.func_native(coord_text, name + "_coord")
        def coord(o: wp.vec2i, i: int) -> wp.vec2i: ...

        T = wp.float16 if self.dtype == "float16" else _compat.bf16_dtype()
        store_text = native.fill(sn["store_frag"], RC=rc, OUT_T=_hspec.PTX_TYPES[self.dtype],
                                 OT=native.C_TYPES[self.dtype], QUAD=native.load(_hkernel.__file__, "gemm.cuh")[
                                     "quad_exchange"], **f)

        def store(Y: wp.array2d(dtype=T), v: vec, o: wp.vec2i): ...

        return frag, origin, coord, native.func(store_text, name + "_store", store)

    # --- host side ---------------------------------------------------------------------------------------------
    def operands(self, A: wp.array, B: wp.array, grid: int | None = None) -> Operands:
        """The descriptors of ``A`` (M, K) and ``B`` ((K, N) for ``layout_b="N"``, (N, K) for "T"), 2-D Warp arrays
        of the configuration's dtype, any strides. CUDA: TMA maps (cached per pointer, shape and strides, as the
        Hopper family's); an operand whose rows TMA cannot read (base or row stride not a multiple of 16 bytes,
        columns not contiguous: e.g. odd K) is first copied into an aligned buffer (16-byte chunks, rows padded to
        128 bytes, 16 under 1 KB; one launch for both operands) on the device's current stream -- the staging
        ``warp_gemm.matmul`` does; the copy reflects the values at this call. The buffer is the Operands' until it is
        dropped, then serves the next call on that stream (same address: its TMA map is made already); launch on
        the stream of the ``operands`` call. CPU: host words (pointer, extents, byte strides) for the twin.
        ``items``, ``grid``: :attr:`tile_func`'s work items and the blocks of :meth:`launch_tiles` (``grid``, else one
        per SM on CUDA, 2 on the CPU; never more than the items)."""
        name = "fused_gemm.operands"
        for n, x in (("A", A), ("B", B)):
            if not isinstance(x, wp.array) or x.ndim != 2:
                raise TypeError(f"{name}: {n} must be a 2-D wp.array, got {type(x).__name__} "
                                f"{getattr(x, 'shape', '')}")
            if dtype_name(x.dtype) != self.dtype:
                raise TypeError(f"{name}: {n} has dtype {dtype_name(x.dtype)}, this function multiplies {self.dtype}")
        M, K = (int(s) for s in A.shape)
        kb, N = (int(s) for s in B.shape) if self.layout_b == "N" else (int(B.shape[1]), int(B.shape[0]))
        if kb != K:
            raise ValueError(f"{name}: A {tuple(A.shape)} and B {tuple(B.shape)} (layout_b {self.layout_b}) "
                             f"disagree on K ({K} against {kb})")
        if A.device != B.device:
            raise ValueError(f"{name}: A is on {A.device}, B on {B.device}")
        if min(M, N, K) < 1:
            raise ValueError(f"{name}: M={M} N={N} K={K}: every side must be at least 1")
        if grid is not None and (not isinstance(grid, (int, np.integer)) or grid < 1):
            raise ValueError(f"{name}: grid must be a positive int, got {grid!r}")
        gm, gn = self.grid(M, N)
        items = -(-gm * gn // self.tiles_per_item)
        if grid is None:
            grid = 2 if A.device.is_cpu else _compat.sm_count(A.device)
        grid = min(int(grid), items)
        if A.device.is_cpu:
            words = [np.array([x.ptr, x.shape[0], x.shape[1], x.strides[0], x.strides[1]], dtype=np.int64)
                     for x in (A, B)]
            return Operands(int(words[0].ctypes.data), int(words[1].ctypes.data), K, M, N, (A, B, *words), items,
                            grid)
        from .families.hopper import tma

        if getattr(A.device, "arch", 0) != 90 or not _compat.HAS_CUDA_ARCH_SUFFIX:
            raise ValueError(f"{name}: the TMA + wgmma loop needs an sm_90 GPU (H100/H200) and Warp 1.19+; "
                             f"got {A.device} (sm_{getattr(A.device, 'arch', 0)}); use warp_gemm.tile_gemm_func")
        key = (str(A.device), A.ptr, A.shape, A.strides, B.ptr, B.shape, B.strides)
        with _lock:
            hit = self._maps.get(key)
            if hit is not None:
                self._maps.move_to_end(key)
        if hit is not None:  # both operands TMA-readable in place, their maps made before
            return Operands(hit[0], hit[1], K, M, N, (A, B), items, grid)
        a, b, leases = _aligned(A, B)
        ta = tma.tensor_map(_view3(a), self.bm)
        tb = tma.tensor_map(_view3(b), 64 if self.layout_b == "N" else self.bn)
        if a is A and b is B:
            # the maps depend on the pointers, shapes and strides only (tma.py keeps them): the next call with the
            # same operands skips the views and the map lookups
            with _lock:
                self._maps[key] = (ta, tb)
                if len(self._maps) > _MAX_OPERANDS:
                    self._maps.popitem(last=False)
        return Operands(ta, tb, K, M, N, (a, b, *leases), items, grid, staged=a is not A or b is not B)

    def grid(self, M: int, N: int) -> tuple[int, int]:
        """The launch grid of one block per output tile: ``(ceil(M / bm), ceil(N / bn))``."""
        return -(-int(M) // self.bm), -(-int(N) // self.bn)

    def load(self, kernel, device=None) -> None:
        """Compile and load ``kernel``'s module for ``device``: sm_90a on CUDA (wgmma), with ``__launch_bounds__``
        of ``block_dim`` threads where the kernel names none (384 threads leave 170 registers each), and the module
        option ``max_unroll`` raised to :attr:`frag` (a ``for i in range(g.frag)`` loop over :attr:`tile_func`'s
        sums is unrolled: the sums stay in registers). CPU: with ``block_dim`` fibers (:func:`_cpu_blocks`)."""
        device = wp.get_device(device)
        opts = kernel.module.options
        if int(opts.get("max_unroll", wp.config.max_unroll)) < self.frag:
            opts["max_unroll"] = self.frag
        if device.is_cpu:
            with _cpu_blocks():
                kernel.module.load(device, self.block_dim)
            return
        kernel.options.setdefault("launch_bounds", (self.block_dim, 1))
        _compat.load_arch_specific(kernel.module, device, self.block_dim)

    def launch_tiles(self, kernel, ops, inputs: list, device=None, stream=None, record_cmd: bool = False):
        """``wp.launch_tiled`` of a :attr:`tile_func` kernel over ``ops.grid`` blocks (``ops``: the
        :class:`Operands`, or a block count) of ``block_dim`` threads, after :meth:`load`; ``inputs`` are the
        kernel's whole list (usually ``ops.args + [...]``). On the CPU the blocks run ``block_dim`` fibers
        (``wp.config.enable_cpu_blocks`` is set for the launch). ``record_cmd``: launch nothing, return the
        recorded launch (Warp's ``wp.Launch`` with the arrays it points into), whose ``.launch(stream=None)``
        replays it with the same arguments as one native launch; the descriptors and aligned copies in ``ops``
        stay as they were made: record again when A's or B's pointer, shape or strides change, and do not record
        where ``ops.staged`` (a copy holds the values at the ``operands`` call)."""
        device = wp.get_device(device)
        grid = int(ops.grid if isinstance(ops, Operands) else ops)
        self.load(kernel, device)
        with _cpu_blocks() if device.is_cpu else contextlib.nullcontext():
            cmd = wp.launch_tiled(kernel, dim=(grid,), inputs=inputs, block_dim=self.block_dim, device=device,
                                  stream=stream, record_cmd=record_cmd)
        return _Recorded(cmd, ops) if record_cmd else None

    def launch(self, kernel, M: int, N: int, inputs: list, device=None, stream=None, record_cmd: bool = False):
        """``wp.launch_tiled`` of ``kernel`` over :meth:`grid` with ``block_dim`` threads, after :meth:`load`;
        ``record_cmd``: launch nothing, return the recorded launch (:meth:`launch_tiles`)."""
        device = wp.get_device(device)
        self.load(kernel, device)
        cmd = wp.launch_tiled(kernel, dim=self.grid(M, N), inputs=inputs, block_dim=self.block_dim, device=device,
                              stream=stream, record_cmd=record_cmd)
        return _Recorded(cmd, inputs) if record_cmd else None


class _Recorded:
    """A recorded ``wp.Launch`` of a fused kernel and what its arguments point into (kept alive with it).
    ``launch(stream=None)``: one native launch on ``stream`` (default: the device's current stream); on the CPU
    with ``wp.config.enable_cpu_blocks`` set for it (the persistent form's 384 fibers)."""

    def __init__(self, cmd, keep):
        self.cmd, self.keep = cmd, keep

    def launch(self, stream=None) -> None:
        if self.cmd.device.is_cpu:
            with _cpu_blocks():
                self.cmd.launch()
            return
        self.cmd.launch(stream)


class _Named:
    """``@_named.func_native(snippet, name)``: :func:`native.func` as a decorator. Warp takes a native function's
    return annotation only from a stub decorated ``@<...>.func_native(...)`` in its source (codegen's
    emit_FunctionDef reads the decorator's attribute name); without it the function is compiled returning void."""

    @staticmethod
    def func_native(snippet: str, name: str):
        return lambda stub: native.func(snippet, name, stub)


_named = _Named()


@contextlib.contextmanager
def _cpu_blocks():
    """``wp.config.enable_cpu_blocks`` on for the block (CPU launches with ``block_dim`` fibers: the twin of
    :attr:`FusedGemm.tile_func` gives each of the 384 threads its own sums), restored after, under one lock."""
    if not _compat.HAS_CPU_BLOCKS:
        raise _compat.UnsupportedWarpError(
            f"fused_gemm: warp-lang {_compat.WARP_VERSION} has no CPU blocks of several threads "
            "(wp.config.enable_cpu_blocks); the CPU twin of tile_func needs them")
    with _cpu_lock:
        old = wp.config.enable_cpu_blocks
        wp.config.enable_cpu_blocks = True
        try:
            yield
        finally:
            wp.config.enable_cpu_blocks = old


def _view3(x: wp.array) -> wp.array:
    """``x`` (2-D) as a ``(1, rows, cols)`` view with the same strides."""
    return wp.array(ptr=x.ptr, dtype=x.dtype, shape=(1, *x.shape), strides=(x.strides[0] * x.shape[0], *x.strides),
                    device=x.device)


#: At most this many free staging buffers are kept per (device, stream, shape, dtype).
_POOL_DEPTH = 2
#: Aligned staging buffers free for reuse, per (device, stream handle, rows, padded columns, dtype). A staged
#: operand's buffer comes back here when the Operands holding it is dropped, so the next call on that stream stages
#: into the same address and finds its TMA map made: a new address costs a map and a device synchronisation
#: (hopper.tma.tensor_map), which serialised the host's work and the GPU's (fp16 silu 4095^3 in the fused suite, H100,
#: providers timed in turn: 0.42-0.50 ms per call with a new buffer per call against 0.28 when the addresses recurred).
_pool: dict = {}


class _Lease:
    """One staging buffer, held by an :class:`Operands`; back to its stream's pool when the Operands is dropped.
    Reuse on the same stream only: the next staging copy into it runs after every launch before it on that stream."""

    def __init__(self, key: tuple, buf: wp.array):
        self.key, self.buf = key, buf

    def __del__(self):
        # no lock here: a finalizer may run inside any ``with _lock:`` of this thread (a garbage collection during
        # a kernel build), and a lock taken there would never be released; deque.append is atomic
        try:
            _returned.append((self.key, self.buf))
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing to keep
            pass


#: Buffers of dropped leases, moved into :data:`_pool` by the next :func:`_aligned`.
_returned: collections.deque = collections.deque()


def _take(key: tuple):
    """A free staging buffer for ``key`` or None (caller holds ``_lock``); first files the returned ones."""
    while _returned:
        k, buf = _returned.popleft()
        free = _pool.setdefault(k, [])
        if len(free) < _POOL_DEPTH:
            free.append(buf)
    free = _pool.get(key)
    return free.pop() if free else None


def _readable(x: wp.array) -> bool:
    """TMA can read ``x``'s rows in place: 16-byte base and row stride, contiguous columns."""
    return x.strides[1] == 2 and x.ptr % 16 == 0 and (x.shape[0] <= 1 or x.strides[0] % 16 == 0)


def _aligned(A: wp.array, B: wp.array) -> tuple:
    """``(a, b, leases)``: each of ``A``, ``B`` where TMA can read its rows, else a copy of it in an aligned buffer
    whose rows are padded to 128 bytes (16 bytes for rows under 1 KB; returned as the unpadded view), both copies made
    by one launch of the stage kernel on the device's current stream; ``leases`` hold the buffers (one per copy)."""
    need = [x for x in (A, B) if not _readable(x)]
    if not need:
        return A, B, []
    from .families.common.elementwise import stage_kernel

    dev = A.device
    stream = wp.get_stream(dev).cuda_stream if dev.is_cuda else 0
    out, jobs, leases = {}, [], []
    for x in need:
        r, c = int(x.shape[0]), int(x.shape[1])
        # rows of 1 KB or more padded to 128 bytes, as the Hopper family stages them (a TMA box row otherwise touches
        # two 128-byte lines: its fp16 4097^3 kernel 377 -> 289 us, H200); shorter rows to 16 bytes
        cp = -(-c // 64) * 64 if 2 * c >= 1024 else -(-c // 8) * 8
        key = (str(dev), int(stream), r, cp, dtype_name(x.dtype))
        with _lock:
            buf = _take(key)
        if buf is None:
            buf = wp.empty((1, r, cp), dtype=x.dtype, device=dev)
        leases.append(_Lease(key, buf))
        jobs.append((buf, _view3(x), r * cp // 8))
        out[id(x)] = buf[0, :, :c]
    (da, sa, na), (db, sb, nb) = jobs[0], jobs[-1] if len(jobs) == 2 else (jobs[0][0], jobs[0][1], 0)
    wp.launch(stage_kernel(dtype_name(A.dtype)), dim=na + nb, inputs=[da, sa, db, sb, na], device=dev)
    return out.get(id(A), A), out.get(id(B), B), leases


@functools.cache
def _get(in_name: str, layout_b: str, tn: int, pingpong: bool) -> FusedGemm:
    return FusedGemm(in_name, layout_b, tn, pingpong)


def fused_gemm(dtype, *, layout_b: str = "N", tn: int = 128, pingpong: bool | None = None) -> FusedGemm:
    """The Hopper family's GEMM loop for one output tile, as a Warp function for the caller's tile kernel.

    Returns a :class:`FusedGemm` ``g`` whose ``g.func(buf, ta, tb, K, row, col)`` leaves the float32 tile
    ``sum_k A[row + r, k] * B[k, col + c]`` (``r < g.bm`` = 128, ``c < g.bn`` = ``tn``) in rows ``0 .. g.bm - 1`` of
    ``buf``, the caller's ``wp.tile_empty(shape=(g.buf_rows, g.buf_cols), dtype=float, storage="shared")`` (the
    function's stages live in it during the call); read it as ``wp.tile_view(buf, offset=(0, 0), shape=(g.bm,
    g.bn))``. Past M, N and K the sums are zeros (TMA reads zeros there); ``wp.tile_store`` drops the outputs past the
    matrix. ``ta``, ``tb``, ``K``: :meth:`FusedGemm.operands`. Every thread of the block calls it (barriers); the
    block has ``g.block_dim`` (384) threads: launch with :meth:`FusedGemm.launch` (sm_90a build, launch bounds).

    Args:
        dtype: ``wp.float16`` or ``wp.bfloat16`` (or a name); A and B have this dtype, the sums are float32.
        layout_b: ``"N"``: B stored (K, N) (``A @ B``); ``"T"``: B stored (N, K) (``A @ W.T``, ``F.linear``'s weight).
        tn: output tile columns: 128 (6 stages, the default) or 256 (4 stages). ``g.func`` (H100, fp16 silu(A @ B)
            4096^3 in the fused suite): 0.457 ms with 128 against 0.911 with 256, whose 128 float32 sums per consumer
            thread meet the register cap of a 384-thread block (ptxas: 168 registers and a 784-byte stack frame,
            against 72 bytes at 128; the Hopper family's kernel lifts the cap with setmaxnreg, which this function
            does not use: the caller's code after it runs on every warpgroup). ``g.tile_func`` with ``g.store_frag``
            (GPU time back to back, same product): 0.223 ms with 256, 0.234 with 128 (H200, an IEEE-division silu).
        pingpong: :attr:`FusedGemm.tile_func`'s consumers each on a whole 128 x 128 tile (``tn=128`` only), one
            multiplying while the other runs the caller's epilogue; default False (both consumers on one tile):
            same product with ``g.store_frag`` and a ``wp.div_approx`` silu, H100, GPU time back to back: 0.211 ms
            ping-pong against 0.202 for shared 128 x 256 tiles.

    CUDA: sm_90 (H100/H200) and warp-lang 1.19+. CPU: a twin of the same function (element by element) for tests.
    bfloat16 kernels need ``module_options={"enable_backward": False}`` (docs/tile_func.md).
    """
    name = dtype_name(dtype)
    if name not in ("float16", "bfloat16"):
        raise TypeError(f"fused_gemm: dtype {name}: the TMA + wgmma loop multiplies float16 and bfloat16; "
                        "use warp_gemm.tile_gemm_func for float32 and float64")
    if layout_b not in ("N", "T"):
        raise ValueError(f"fused_gemm: layout_b must be 'N' (B stored (K, N)) or 'T' (B stored (N, K)), got "
                         f"{layout_b!r}")
    if tn not in _STAGES:
        raise ValueError(f"fused_gemm: tn must be 256 or 128, got {tn!r}")
    if pingpong is None:
        pingpong = False
    if pingpong and tn != 128:
        raise ValueError(f"fused_gemm: pingpong needs tn=128 (a consumer's whole 128 x {tn} tile would be "
                         f"{tn} float32 sums per thread), got tn={tn}")
    _compat.require_supported()
    if not (_compat.HAS_TILE_EMPTY and _compat.HAS_TILE_FUNC_ARGS):
        raise _compat.UnsupportedWarpError(
            f"fused_gemm: warp-lang {_compat.WARP_VERSION} cannot pass shared tiles to native functions "
            "(1.19 can); use warp_gemm.tile_gemm_func")
    if name == "bfloat16":
        _compat.bf16_dtype()
    with _lock:
        return _get(name, layout_b, int(tn), bool(pingpong))
