"""What one Hopper kernel computes and how it is laid out: :class:`HopperSpec`."""

from __future__ import annotations

import dataclasses

from warp_gemm import _compat

#: Input dtypes: float16, bfloat16, and float32 multiplied on tf32 tensor cores (``tf32=True`` calls only; both
#: operands K-major: wgmma reads 32-bit operands in no other order).
IN_DTYPES = ("float16", "bfloat16", "float32")
OUT_DTYPES = ("float16", "bfloat16", "float32")
ITEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
#: PTX type names of the inputs (wgmma's .atype / .btype, cvt's destination)
PTX_TYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32"}
ROW_BYTES = 128  # bytes of K per stage row: the 128-byte swizzle's span
BK = 64  # K elements per stage of 16-bit inputs (tf32: 32)
SMEM_LIMIT = 232448  # dynamic shared memory a block may have on sm_90 (227 KB)
MBAR_BYTES = 16  # a full and an empty mbarrier per stage
MAX_SPLITS = 1024  # K splits of one output tile (split-K partial slabs in the workspace)
ALIGN_SLACK = 1024  # the stages start on a 1024-byte boundary inside Warp's shared tile


@dataclasses.dataclass(frozen=True)
class HopperSpec:
    """One kernel of the family (hashable: the kernel factory's key).

    ``D[b] = alpha * A[b] @ op(B[b])`` (``epilogue="scale"``) or ``... + beta * C[b]`` (``"axpby"``), A stored
    ``(M, K)`` row-major (``layout_a="N"``), B stored ``(K, N)`` (``layout_b="N"``) or ``(N, K)`` (``"T"``: B =
    W.T, F.linear's layout). Output tiles of ``bm x bn``, K tiles of 64 in ``stages`` shared stages; block of
    ``128 * (1 + consumers)`` threads: one producer warpgroup (TMA) and ``consumers`` warpgroups of
    ``bm / consumers`` rows each (wgmma m64nBNk16, ``bm / consumers / 64`` per k16 step), or with ``split_n`` two
    consumers of all ``bm`` rows and half the columns each (wgmma m64n(BN/2)k16: a 64 x 128 tile keeps both consumer
    warpgroups busy, twice the blocks of 128 x 128 tiles on small grids). ``setmaxnreg``: the
    producer gives registers to the consumers (40 / 232 per thread).

    ``cluster`` 2: thread-block clusters of two blocks that take neighbouring output tiles sharing one operand tile
    (``pair`` "M": tile rows 2 p and 2 p + 1 of one tile column, sharing the B tile; "N": tile columns 2 p and
    2 p + 1, sharing the A tile). Each block copies its own unshared tile and one half of the shared tile, the
    half multicast into both blocks' stages; a stage is overwritten only once the consumers of both blocks released
    it. The persistent grid walks pair items per cluster (a partner tile past the edge loads and is not stored).

    ``splits`` > 1 (split-K): the K tiles are cut into ``splits`` consecutive ranges; each (output tile, range) is
    one work item of the persistent grid, whose float32 partial sums the kernel stores (alpha 1, no C) into slab
    ``split * batch + b`` of a float32 workspace ``(splits * batch, M, N)``; a finishing pass (the skinny family's
    ``finish_launch``) sums the slabs in order and applies alpha, ``beta * C`` and the cast to ``out_dtype``. The
    compiled kernel is :attr:`kernel_spec`'s (every split count shares it).

    ``staged_store`` (16-bit outputs): each consumer warpgroup writes its packed sums into its own rows of a staging
    buffer after the mbarriers (:attr:`epi_pitch` bytes a row, ``stmatrix``), then copies the rows out with 16-byte
    stores, where D's rows start on 16 bytes and N is a multiple of 8 (else the stores from registers)."""

    in_dtype: str = "float16"
    out_dtype: str = "float16"
    layout_a: str = "N"
    layout_b: str = "T"
    bm: int = 128
    bn: int = 256
    stages: int = 4
    consumers: int = 2
    cluster: int = 1
    #: the direction of a cluster's two tiles ("M": they share the B tile, "N": the A tile); ignored for cluster 1
    pair: str = "M"
    epilogue: str = "scale"
    setmaxnreg: bool = True
    producer_regs: int = 40
    consumer_regs: int = 232
    splits: int = 1
    #: tf32 with B stored (K, N): B is first copied transposed into a workspace and the kernel reads it as layout T
    #: (``layout_b`` is then "T").
    transpose_b: bool = False
    #: the two consumers split the tile's columns (each all ``bm`` rows, ``bn / 2`` columns) instead of its rows
    split_n: bool = False
    #: 16-bit outputs stored through a shared staging buffer, whole rows at a time (see above)
    staged_store: bool = False

    @property
    def kernel_spec(self) -> HopperSpec:
        """The spec of the compiled kernel: this one, or with split-K its float32 ``scale`` kernel (splits 1); the
        B transposition is the launcher's, not the kernel's."""
        if self.cluster == 1 and self.pair != "M":  # pair means nothing without a cluster: one kernel
            return dataclasses.replace(self, pair="M").kernel_spec
        if self.splits == 1 and not self.transpose_b:
            return self
        if self.splits == 1:
            return dataclasses.replace(self, transpose_b=False)
        return dataclasses.replace(self, out_dtype="float32", epilogue="scale", splits=1, transpose_b=False,
                                   staged_store=False)

    @property
    def bk(self) -> int:
        """K elements per stage: one 128-byte row (64 16-bit, 32 tf32)."""
        return ROW_BYTES // ITEM_BYTES[self.in_dtype]

    @property
    def wg_m(self) -> int:
        """m64 blocks per consumer warpgroup."""
        return self.bm // (64 * (1 if self.split_n else self.consumers))

    @property
    def wg_n(self) -> int:
        """Columns of the tile per consumer warpgroup (the wgmma's n)."""
        return self.bn // 2 if self.split_n else self.bn

    @property
    def block_dim(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * ROW_BYTES

    @property
    def epi_pitch(self) -> int:
        """Bytes per row of the staged store's buffer: a warpgroup's 16-bit columns and 16 bytes of padding (the
        eight rows one store instruction writes fall on different banks)."""
        return 2 * self.wg_n + 16

    @property
    def epi_bytes(self) -> int:
        """The staged store's buffer (``staged_store``): every consumer warpgroup's rows; 0 without it."""
        return self.consumers * 64 * self.wg_m * self.epi_pitch if self.staged_store else 0

    @property
    def smem_bytes(self) -> int:
        """Shared memory the kernel's tile asks for: the stages, their mbarriers, the staged store's buffer and
        the alignment slack."""
        return self.stages * (self.stage_bytes + MBAR_BYTES) + self.epi_bytes + ALIGN_SLACK

    @property
    def key(self) -> str:
        """A readable name (kernel names, logs): ``hopper_f16_f32_NT_128x256_s4_c2_axpby``."""
        short = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}
        tail = ("" if self.setmaxnreg else "_nosetmaxnreg") + (f"_split{self.splits}" if self.splits > 1 else "")
        tail += "_bt" if self.transpose_b else ""
        tail += "_sn" if self.split_n else ""
        tail += "_ss" if self.staged_store else ""
        tail += f"_cl{self.cluster}{self.pair.lower()}" if self.cluster > 1 else ""
        return (f"hopper_{PTX_TYPES[self.in_dtype] if self.in_dtype == 'float32' else short[self.in_dtype]}_{short[self.out_dtype]}_{self.layout_a}{self.layout_b}_"
                f"{self.bm}x{self.bn}_s{self.stages}_c{self.consumers}_{self.epilogue}{tail}")


def unfit(spec: HopperSpec) -> str:
    """Why ``spec`` cannot be built ("" when it can): the names of the fields at fault."""
    if not isinstance(spec.splits, int):
        return f"splits {spec.splits!r}: an int"
    if spec.in_dtype not in IN_DTYPES:
        return f"in_dtype {spec.in_dtype!r}: the family multiplies float16, bfloat16 and float32 (as tf32) only"
    if spec.out_dtype not in OUT_DTYPES:
        return f"out_dtype {spec.out_dtype!r}: one of {OUT_DTYPES}"
    if spec.layout_a != "N":
        return f"layout_a {spec.layout_a!r}: A must be stored (M, K) row-major (layout N)"
    if spec.layout_b not in ("N", "T"):
        return f"layout_b {spec.layout_b!r}: N or T"
    if spec.in_dtype == "float32" and spec.layout_b != "T":
        return "layout_b 'N' with tf32: wgmma reads 32-bit operands K-major only (transpose_b copies B first)"
    if spec.transpose_b and spec.in_dtype != "float32":
        return "transpose_b: only tf32 products copy B transposed"
    if spec.epilogue not in ("scale", "axpby"):
        return f"epilogue {spec.epilogue!r}: scale or axpby"
    if spec.consumers not in (1, 2):
        return f"consumers {spec.consumers}: 1 or 2 warpgroups"
    if spec.split_n and (spec.consumers != 2 or spec.bn not in (128, 256)):
        return f"split_n: two consumers of bn / 2 columns each, bn 128 or 256 (got {spec.consumers}, bn {spec.bn})"
    if spec.bm % (64 * (1 if spec.split_n else spec.consumers)) or not 1 <= spec.wg_m <= 2:
        return f"bm {spec.bm}: 64 or 128 rows per consumer warpgroup ({spec.consumers} consumers)"
    if spec.bn not in (64, 128, 192, 256) or spec.wg_n * spec.wg_m > 256:
        return f"bn {spec.bn}: 64-256 in steps of 64, at most 128 float32 sums per thread (bn * wg_m <= 256)"
    if spec.bm > 256:
        return f"bm {spec.bm}: a TMA box has at most 256 rows"
    if spec.staged_store and spec.out_dtype not in ("float16", "bfloat16"):
        return f"staged_store: 16-bit outputs only (got {spec.out_dtype})"
    if spec.stages < 2:
        return f"stages {spec.stages}: at least 2"
    if spec.smem_bytes > SMEM_LIMIT:
        return f"{spec.stages} stages of {spec.stage_bytes} bytes: {spec.smem_bytes} > {SMEM_LIMIT} bytes of shared memory"
    if not 1 <= spec.splits <= MAX_SPLITS:
        return f"splits {spec.splits}: 1..{MAX_SPLITS} K ranges per output tile"
    if spec.cluster not in (1, 2):
        return f"cluster {spec.cluster}: 1 (no cluster) or 2 (two blocks sharing one operand tile by TMA multicast)"
    if spec.cluster == 2:
        if not _compat.HAS_CLUSTER_DIM:
            return (f"cluster 2: warp-lang {_compat.WARP_VERSION} has no cluster_dim kernel option (thread-block "
                    f"clusters; 1.19 has it)")
        if spec.in_dtype == "float32":
            return "cluster 2: 16-bit inputs only (tf32 kernels in clusters are not tested)"
        if spec.pair not in ("M", "N"):
            return f"pair {spec.pair!r}: 'M' (the cluster's blocks share the B tile) or 'N' (the A tile)"
        if spec.pair == "M" and spec.layout_b == "N" and spec.bn % 128:
            return (f"cluster 2, pair 'M', layout_b 'N': bn {spec.bn} must be a multiple of 128 (each block copies "
                    f"half of the B tile's 64-column boxes)")
    regs = 128 * spec.producer_regs + 128 * spec.consumers * spec.consumer_regs
    if spec.setmaxnreg and (regs > 65536 or spec.producer_regs % 8 or spec.consumer_regs % 8
                            or not 24 <= spec.producer_regs <= spec.consumer_regs <= 256):
        return (f"setmaxnreg {spec.producer_regs}/{spec.consumer_regs}: multiples of 8 in 24..256 whose sum over "
                f"the block ({regs}) fits 65536 registers")
    return ""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def k_ranges(K: int, splits: int, bk: int = BK) -> tuple[int, int]:
    """``(splits, k_tiles_per_split)`` with every range non-empty: ``splits`` (asked) K ranges of whole ``bk``-deep K
    tiles become ``cdiv(k_tiles, per)`` ranges of ``per = cdiv(k_tiles, splits)`` tiles (the last may be shorter)."""
    k_tiles = max(1, cdiv(K, bk))
    per = cdiv(k_tiles, max(1, min(int(splits), k_tiles)))
    return cdiv(k_tiles, per), per
