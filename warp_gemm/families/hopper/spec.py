"""What one Hopper kernel computes and how it is laid out: :class:`HopperSpec`."""

from __future__ import annotations

import dataclasses

IN_DTYPES = ("float16", "bfloat16")
OUT_DTYPES = ("float16", "bfloat16", "float32")
ITEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
#: PTX type names of the 16-bit inputs (wgmma's .atype / .btype, cvt's destination)
PTX_TYPES = {"float16": "f16", "bfloat16": "bf16"}
BK = 64  # K elements per stage: one 128-byte swizzle row of 16-bit elements
SMEM_LIMIT = 232448  # dynamic shared memory a block may have on sm_90 (227 KB)
MBAR_BYTES = 16  # a full and an empty mbarrier per stage
ALIGN_SLACK = 1024  # the stages start on a 1024-byte boundary inside Warp's shared tile


@dataclasses.dataclass(frozen=True)
class HopperSpec:
    """One kernel of the family (hashable: the kernel factory's key).

    ``D[b] = alpha * A[b] @ op(B[b])`` (``epilogue="scale"``) or ``... + beta * C[b]`` (``"axpby"``), A stored
    ``(M, K)`` row-major (``layout_a="N"``), B stored ``(K, N)`` (``layout_b="N"``) or ``(N, K)`` (``"T"``: B =
    W.T, F.linear's layout). Output tiles of ``bm x bn``, K tiles of 64 in ``stages`` shared stages; block of
    ``128 * (1 + consumers)`` threads: one producer warpgroup (TMA) and ``consumers`` warpgroups of
    ``bm / consumers`` rows each (wgmma m64nBNk16, ``bm / consumers / 64`` per k16 step). ``setmaxnreg``: the
    producer gives registers to the consumers (40 / 232 per thread). ``cluster`` is 1 (no multicast)."""

    in_dtype: str = "float16"
    out_dtype: str = "float16"
    layout_a: str = "N"
    layout_b: str = "T"
    bm: int = 128
    bn: int = 256
    stages: int = 4
    consumers: int = 2
    cluster: int = 1
    epilogue: str = "scale"
    setmaxnreg: bool = True
    producer_regs: int = 40
    consumer_regs: int = 232

    @property
    def bk(self) -> int:
        return BK

    @property
    def wg_m(self) -> int:
        """m64 blocks per consumer warpgroup."""
        return self.bm // (64 * self.consumers)

    @property
    def block_dim(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * BK * ITEM_BYTES[self.in_dtype]

    @property
    def smem_bytes(self) -> int:
        """Shared memory the kernel's tile asks for: the stages, their mbarriers and the alignment slack."""
        return self.stages * (self.stage_bytes + MBAR_BYTES) + ALIGN_SLACK

    @property
    def key(self) -> str:
        """A readable name (kernel names, logs): ``hopper_f16_f32_NT_128x256_s4_c2_axpby``."""
        short = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}
        tail = "" if self.setmaxnreg else "_nosetmaxnreg"
        return (f"hopper_{short[self.in_dtype]}_{short[self.out_dtype]}_{self.layout_a}{self.layout_b}_"
                f"{self.bm}x{self.bn}_s{self.stages}_c{self.consumers}_{self.epilogue}{tail}")


def unfit(spec: HopperSpec) -> str:
    """Why ``spec`` cannot be built ("" when it can): the names of the fields at fault."""
    if spec.in_dtype not in IN_DTYPES:
        return f"in_dtype {spec.in_dtype!r}: the family multiplies float16 and bfloat16 only"
    if spec.out_dtype not in OUT_DTYPES:
        return f"out_dtype {spec.out_dtype!r}: one of {OUT_DTYPES}"
    if spec.layout_a != "N":
        return f"layout_a {spec.layout_a!r}: A must be stored (M, K) row-major (layout N)"
    if spec.layout_b not in ("N", "T"):
        return f"layout_b {spec.layout_b!r}: N or T"
    if spec.epilogue not in ("scale", "axpby"):
        return f"epilogue {spec.epilogue!r}: scale or axpby"
    if spec.consumers not in (1, 2):
        return f"consumers {spec.consumers}: 1 or 2 warpgroups"
    if spec.bm % (64 * spec.consumers) or not 1 <= spec.wg_m <= 2:
        return f"bm {spec.bm}: 64 or 128 rows per consumer warpgroup ({spec.consumers} consumers)"
    if spec.bn not in (64, 128, 192, 256) or spec.bn * spec.wg_m > 256:
        return f"bn {spec.bn}: 64-256 in steps of 64, at most 128 float32 sums per thread (bn * wg_m <= 256)"
    if spec.bm > 256:
        return f"bm {spec.bm}: a TMA box has at most 256 rows"
    if spec.stages < 2:
        return f"stages {spec.stages}: at least 2"
    if spec.smem_bytes > SMEM_LIMIT:
        return f"{spec.stages} stages of {spec.stage_bytes} bytes: {spec.smem_bytes} > {SMEM_LIMIT} bytes of shared memory"
    if spec.cluster != 1:
        return f"cluster {spec.cluster}: thread-block clusters (TMA multicast) are not built"
    regs = 128 * spec.producer_regs + 128 * spec.consumers * spec.consumer_regs
    if spec.setmaxnreg and (regs > 65536 or spec.producer_regs % 8 or spec.consumer_regs % 8
                            or not 24 <= spec.producer_regs <= spec.consumer_regs <= 256):
        return (f"setmaxnreg {spec.producer_regs}/{spec.consumer_regs}: multiples of 8 in 24..256 whose sum over "
                f"the block ({regs}) fits 65536 registers")
    return ""
