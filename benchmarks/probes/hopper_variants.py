"""What a Hopper-family kernel waits on: kernel times of variants without part of its copies or without its products.

``python hopper_variants.py [--shape 1000x1000x1000] [--dtype float16] [--layout N] [--tiles default|128|cl2|cl2sn]
[--variants base,nowg,nlST,nlST_nowg,nl1_nowg,nl0_nowg] [--warm] [--out DIR]`` on an sm_90 GPU. ``--check`` builds the
variants offline for sm_90a instead (no GPU).

Each variant is the kernel's text with one of two edits (asserted: a change of the kernel text shows here first):

- ``nlN``: the producer copies only the item's first N K tiles (``nlST``: as many as there are stages); for later
  K tiles it arrives on the stage's full barrier without bytes, so the consumers multiply what the stage still holds;
- ``nowg``: the consumers issue no wgmma (their waits, commits and releases stay);
- ``entry`` / ``setup``: every thread returns at the kernel's entry / after the barrier set-up (with clusters, after
  the cluster barrier that follows it): the launch's floor and the set-up's cost.

Both give wrong sums by design (only ``base`` is checked against float64). Printed: each variant's kernel time from
CUPTI (``torch.profiler``, the median of 40 calls, the L2 flushed before each as the runner does; ``--warm``: also
without the flush), then cuBLAS's the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

# the producer's expect_tx on a stage's full barrier (gemm.cuh's tma_stage and tma_stage_cluster): the copies of the
# stage run from it to the stage counter's step
EXPECT = ('asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n"\n'
          '                                 :: "r"(fb), "r"(STAGE) : "memory");\n')
NEXT_STAGE = "if (++s == ST)"
ARRIVE = 'asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(fb) : "memory");\n'
# one wgmma of gemm.cuh's wgmma_stage (the predicate block, the instruction and its operands)
# the barrier set-up's end: the cluster barrier's wait where the kernel has clusters, else the block barrier
ENTRY = "    const int wg = tid / 128;\n"
CLUSTER_WAIT = 'asm volatile("barrier.cluster.wait.acquire;\\n" ::: "memory");\n'
BLOCK_SYNC = "    __syncthreads();"
RETURN = "    if (tid >= 0) return;\n"  # a condition, so that the code after it still compiles as reachable
WGMMA = re.compile(r'asm volatile\("\{\\n\.reg \.pred p;\\nsetp\.ne\.b32 p, %\d+, 0;\\n"\s*"wgmma\.mma_async[^;]*?;'
                   r'.*?: "l"\(da\), "l"\(db\), "r"\(acc\)\);\n', re.DOTALL)


def edit(text: str, variant: str) -> str:
    """The kernel text of ``variant`` ("base", "entry", "setup", "nowg", "nl<N>", "nlST", joined by "_");
    AssertionError where an edit finds nothing to change."""
    for part in variant.split("_"):
        if part == "base":
            continue
        if part in ("entry", "setup"):
            anchor = ENTRY if part == "entry" else CLUSTER_WAIT if CLUSTER_WAIT in text else BLOCK_SYNC + "\n"
            assert anchor in text, f"hopper_variants: no anchor for {part!r} in the kernel text"
            text = text.replace(anchor, anchor + RETURN, 1)
            continue
        if part == "nowg":
            text, n = WGMMA.subn("(void)da; (void)db; (void)acc;\n", text)
            assert n >= 1, "hopper_variants: no wgmma in the kernel text"
            continue
        m = re.fullmatch(r"nl(ST|\d+)", part)
        assert m, f"hopper_variants: unknown variant {part!r}"
        pieces = text.split(EXPECT)
        assert len(pieces) >= 2, "hopper_variants: no expect_tx in the kernel text"
        out = pieces[0]
        for p in pieces[1:]:
            i = p.index(NEXT_STAGE)
            out += f"if (kt < kt0 + {m.group(1)}) {{\n{EXPECT}{p[:i]}}} else {ARRIVE}{p[i:]}"
        text = out
    return text


def _variant_class():
    """A HopperSpec subclass whose ``variant`` selects the edited text (and its own kernel key)."""
    from warp_gemm.families.hopper import kernel as HK
    from warp_gemm.families.hopper import spec as HS

    @dataclasses.dataclass(frozen=True)
    class Variant(HS.HopperSpec):
        variant: str = "base"

        @property
        def key(self):
            return super().key + ("" if self.variant == "base" else "_" + self.variant)

    plain = HK.snippet

    def snippet(spec):
        return edit(plain(spec), getattr(spec, "variant", "base"))

    HK.snippet = snippet
    return Variant


def _as(cls, spec, variant: str):
    return cls(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}, variant=variant)


def check(variants) -> int:
    """Offline sm_90a builds of the variants at fp16 1000^3, both B layouts, the default tiles."""
    from warp_gemm import _compat

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hopper_timeline import _specs, build_offline

    Variant = _variant_class()
    for layout in ("N", "T"):
        for v in variants:
            build_offline(_as(Variant, _specs("default", "float16", layout, 1000, 1000, 1000), v))
    return 0 if _compat.HAS_COMPILE_AOT else 1


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from hopper_timeline import add_problem_args, cublas_call, kernel_us, problem, save

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_problem_args(ap)
    ap.add_argument("--variants", default="base,nowg,nlST,nlST_nowg,nl1_nowg,nl0_nowg")
    ap.add_argument("--warm", action="store_true", help="also time base and cuBLAS without the L2 flush")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if args.check:
        return check(variants)

    import torch

    M, N, _, base, a, b_st, ref, flush = problem(args)
    import hopper_bench as hb

    Variant = _variant_class()

    rows = {"tiles": base.key, "shape": args.shape, "dtype": args.dtype, "layout": args.layout, "kernel_us": {}}
    print(f"{base.key} {args.dtype} {args.layout} {args.shape}: kernel times (CUPTI, L2 flushed), us")
    for v in variants:
        out = torch.full((1, M, N), float("nan"), device="cuda", dtype=hb.TORCH[args.dtype])
        go = hb.family_fn(_as(Variant, base, v), a, b_st, out)
        go()
        torch.cuda.synchronize()
        if v == "base":
            err = ((out[0].double() - ref).norm() / ref.norm()).item()
            assert err < 1e-2, err
        rows["kernel_us"][v] = kernel_us(go, flush)
        print(f"  {v:14s} {rows['kernel_us'][v]:7.2f}", flush=True)
        if v == "base" and args.warm:
            rows["kernel_us"]["base_warm"] = kernel_us(go, flush, flushed=False)
            print(f"  {'base, warm L2':14s} {rows['kernel_us']['base_warm']:7.2f}", flush=True)
    cublas = cublas_call(args, a, b_st)
    rows["kernel_us"]["cublas"] = kernel_us(cublas, flush)
    print(f"  {'cublas':14s} {rows['kernel_us']['cublas']:7.2f}")
    if args.warm:
        rows["kernel_us"]["cublas_warm"] = kernel_us(cublas, flush, flushed=False)
        print(f"  {'cublas, warm':14s} {rows['kernel_us']['cublas_warm']:7.2f}")
    save(args, "variants", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
