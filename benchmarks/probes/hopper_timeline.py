"""Where a Hopper-family kernel's time goes: per-block time stamps at its phases, and kernel times against cuBLAS.

``python hopper_timeline.py [--shape 1000x1000x1000] [--dtype float16] [--layout N] [--tiles default|128|cl2|cl2sn]
[--reps 30] [--out DIR]`` on an sm_90 GPU. ``--check`` builds the instrumented kernels offline for sm_90a instead
(no GPU; the anchors below and the CUDA they insert are checked).

An instrumented copy of the kernel (the snippet's text with stamp statements inserted at fixed anchors of
``families/hopper/native/gemm.cuh``, asserted: a change of the kernel text shows here first) writes ``%clock64`` and
``%globaltimer`` into a scratch array passed as C (the "scale" epilogue never reads C), 16 words per block. Stamps:
0 entry (thread 0), 1 the producer's loop starts (its first copy next), 2 its last copy issued, 3 the first stage
arrived (consumer warpgroup 1, thread 0), 4 its K loop drained, 5 its staged rows written (staged store only),
6 its rows stored (staged store only), 7 exit (consumer thread 0, after the cluster barrier if any). Printed: the
median over blocks and calls (the L2 flushed before each call, as the runner does) of each stamp after the block's
entry, in cycles and µs; then the kernel time of the plain kernel and of cuBLAS from CUPTI (``torch.profiler``) and
from ``triton.testing.do_bench``, both with the L2 flushed before each call. The stamps cost a few cycles each.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

PHASES = ["entry", "producer_start", "producer_done", "first_stage", "drained", "rows_staged", "stored", "exit"]


def _stamp(slot: int, cond: str) -> str:
    return (f'{{ if ({cond}) {{ unsigned long long _c, _g; asm volatile("mov.u64 %0, %%clock64;" : "=l"(_c) :: "memory"); '
            f'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(_g) :: "memory"); TL_[{slot}] = _c; '
            f'TL_[{slot + 8}] = _g; }} }}\n')


# (anchor, where, slot, condition, required): the stamp goes before or after the anchor's first occurrence
ANCHORS = [
    ("    const int wg = tid / 128;\n", "after", 0, "tid == 0", True),
    ("        if (tid == 0) {\n            unsigned s = 0, ph = 0;\n", "after", 1, "true", True),
    ("    } else {\n        // ---- consumers ----", "before", 2, "tid == 0", True),
    ("                wait(full0 + 8 * s, ph);\n", "after", 3, "tid == 128 && kt == kt0", True),
    ("            // the sums are written by the asynchronous wgmma", "before", 4, "tid == 128", True),
    ('"r"(1 + c) : "memory");  // the warpgroup\'s rows complete\n', "after", 5, "tid == 128", False),
    ('"r"(1 + c) : "memory");  // the rows are free for the next item\n', "after", 6, "tid == 128", False),
]
POINTER = "    unsigned long long* TL_ = (unsigned long long*)C.data + (size_t)blockIdx.x * 16;\n"


def instrument(text: str) -> str:
    """The kernel text with the stamps inserted (raises AssertionError naming a required anchor that is missing)."""
    for anchor, where, slot, cond, required in ANCHORS:
        if anchor not in text:
            assert not required, f"hopper_timeline: anchor of stamp {slot} ({PHASES[slot]}) not in the kernel text"
            continue
        add = (POINTER if slot == 0 else "") + _stamp(slot, cond)
        text = text.replace(anchor, anchor + add if where == "after" else add + anchor, 1)
    head, sep, tail = text.rpartition("#endif")
    assert sep, "hopper_timeline: the kernel text has no final #endif"
    return head + _stamp(7, "tid == 128") + sep + tail


def _specs(tiles: str, dtype: str, layout: str, M: int, N: int, K: int):
    from warp_gemm.families.hopper import rules as R

    d = R.default_spec(dtype, dtype, layout, M, N, K, 1)
    over = {"default": {}, "128": dict(bm=128, bn=128, stages=5, consumers=2, cluster=1, split_n=False, splits=1,
                                      staged_store=dtype != "float32"),
            "cl2": dict(bm=64, bn=128, stages=8, consumers=1, cluster=2, pair="M", split_n=False, splits=1,
                        staged_store=True),
            "cl2sn": dict(bm=64, bn=128, stages=8, consumers=2, cluster=2, pair="M", split_n=True, splits=1,
                          staged_store=True)}[tiles]
    return dataclasses.replace(d, **over)


def _timed_class():
    """A HopperSpec subclass whose ``timeline`` flag selects the instrumented text (and its own kernel key)."""
    from warp_gemm.families.hopper import kernel as HK
    from warp_gemm.families.hopper import spec as HS

    @dataclasses.dataclass(frozen=True)
    class Timed(HS.HopperSpec):
        timeline: bool = False

        @property
        def key(self):
            return super().key + ("_timeline" if self.timeline else "")

    plain = HK.snippet

    def snippet(spec):
        text = plain(spec)
        return instrument(text) if getattr(spec, "timeline", False) else text

    HK.snippet = snippet
    return Timed


def _as(Timed, spec, timeline: bool):
    return Timed(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}, timeline=timeline)


def build_offline(spec) -> None:
    """Build ``spec``'s Hopper kernel for sm_90a into a temporary directory (no GPU needed), printing its key."""
    import tempfile

    import warp as wp

    from warp_gemm.families.hopper import kernel as HK

    k = HK.get_kernel(spec)
    k.module.options["block_dim"] = spec.block_dim
    old = wp.config.cuda_arch_suffix
    wp.config.cuda_arch_suffix = "a"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wp.compile_aot_module(k.module, arch=[90], module_dir=tmp)
    finally:
        wp.config.cuda_arch_suffix = old
    print(f"built {spec.key}", flush=True)


def kernel_us(fn, flush, flushed: bool = True) -> float:
    """Median CUPTI duration (``torch.profiler``) of the kernels ``fn`` launches over 40 calls, the L2 flushed before
    each (``flush.zero_()``) unless ``flushed`` is False; the flush's own kernels are left out."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(40):
            if flushed:
                flush.zero_()
            fn()
        torch.cuda.synchronize()
    d = sorted(e.time_range.elapsed_us() for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA and "elementwise" not in e.name
               and "fill" not in e.name.lower())
    return d[len(d) // 2]


def check() -> int:
    """Offline sm_90a builds of the instrumented kernel for each tile choice at 1000^3 (float16, both B layouts)."""
    from warp_gemm import _compat

    Timed = _timed_class()
    for layout in ("N", "T"):
        for tiles in ("default", "128", "cl2", "cl2sn"):
            build_offline(_as(Timed, _specs(tiles, "float16", layout, 1000, 1000, 1000), True))
    return 0 if _compat.HAS_COMPILE_AOT else 1


def add_problem_args(ap) -> None:
    """The probes' problem options: shape, dtype, B layout, tile choice (:func:`_specs`)."""
    ap.add_argument("--shape", default="1000x1000x1000")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--layout", default="N", choices=["N", "T"])
    ap.add_argument("--tiles", default="default", choices=["default", "128", "cl2", "cl2sn"])


def problem(args):
    """``(M, N, K, spec, a, b_st, ref, flush)`` for parsed problem options: the tile choice's spec, random operands
    (torch views, rows padded to 8 elements), the float64 product and a 256 MB buffer whose zeroing flushes the L2."""
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import hopper_bench as hb

    from warp_gemm import _compat

    _compat.init()
    M, N, K = (int(x) for x in args.shape.split("x"))
    spec = _specs(args.tiles, args.dtype, args.layout, M, N, K)
    a, b_st, b = hb.operands(M, N, K, args.dtype, args.layout, pad=True)
    ref = torch.matmul(a.double()[0], b.double()[0])
    flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
    return M, N, K, spec, a, b_st, ref, flush



def cublas_call(args, a, b_st):
    """cuBLAS on the problem's operands: ``torch.matmul`` (layout N) or ``F.linear`` (layout T, B = W.T)."""
    import torch

    ac, bc = a[0].contiguous(), b_st[0].contiguous()
    return (lambda: torch.matmul(ac, bc)) if args.layout == "N" else (lambda: torch.nn.functional.linear(ac, bc))


def save(args, stem: str, rows) -> None:
    """``rows`` as ``<out>/<stem>_<tiles>_<dtype>_<layout>_<shape>.json``."""
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{stem}_{args.tiles}_{args.dtype}_{args.layout}_{args.shape}.json"), "w") as f:
        json.dump(rows, f, indent=1)

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_problem_args(ap)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        return check()

    import torch
    import warp as wp
    from triton.testing import do_bench

    M, N, K, base, a, b_st, ref, flush = problem(args)
    import hopper_bench as hb

    from warp_gemm.families.hopper import launch as H

    Timed = _timed_class()
    dev = wp.device_from_torch(a.device)
    stream = wp.stream_from_torch(torch.cuda.current_stream())
    wa = lambda t: wp.from_torch(t, dtype={torch.bfloat16: wp.bfloat16}.get(t.dtype))

    def launcher(spec, out, scratch=None):
        (k, dim, inputs, bd), = H.launch_args(spec, wa(a), wa(b_st), None, wa(out), 1.0, 0.0, M, N, K, 1, 1, 1, 1)
        if scratch is not None:
            inputs = list(inputs)
            inputs[2] = scratch  # C: never read by the "scale" epilogue
        cmd = wp.launch_tiled(k, dim=list(dim), inputs=inputs, block_dim=bd, device=dev, stream=stream,
                              record_cmd=True)
        return cmd.launch, int(dim[0])

    def err_of(out):
        return ((out[0].double() - ref).norm() / ref.norm()).item()

    # the stamps
    spec = _as(Timed, base, True)
    out = torch.full((1, M, N), float("nan"), device="cuda", dtype=hb.TORCH[args.dtype])
    scratch = wp.zeros((1, 1, 16384 * 4), dtype=wa(out).dtype, device=dev)  # C's type: the output's
    go, blocks = launcher(spec, out, scratch)
    assert blocks * 16 * 8 <= scratch.capacity, blocks
    for _ in range(10):
        go()
    reps = []
    for _ in range(args.reps):
        flush.zero_()
        go()
        torch.cuda.synchronize()
        reps.append(torch.from_numpy(scratch.numpy().view("int64").reshape(-1, 16)[:blocks].copy()))
    T = torch.stack(reps).double()  # call, block, word
    cyc = T[:, :, :8] - T[:, :, :1]
    ns = T[:, :, 8:] - T[:, :, 8:9]
    ghz = (cyc[:, :, 7].sum() / ns[:, :, 7].sum()).item()
    rows = {"spec": spec.key, "shape": args.shape, "dtype": args.dtype, "layout": args.layout, "blocks": blocks,
            "err": err_of(out), "clock_ghz": round(ghz, 3), "phases": {}}
    print(f"{spec.key} {args.dtype} {args.layout} {args.shape}: {blocks} blocks, err {rows['err']:.1e}, "
          f"SM clock {ghz:.2f} GHz (clock64 over globaltimer)")
    for i, name in enumerate(PHASES):
        if not bool((T[:, :, i] != 0).all()):
            continue  # a stamp this kernel does not have
        c = cyc[:, :, i].median().item()
        rows["phases"][name] = {"cycles": c, "us": c / ghz / 1000}
        print(f"  {i} {name:15s} {c:8.0f} cycles {c / ghz / 1000:7.2f} us after entry")

    # kernel times: the plain kernel and cuBLAS, the L2 flushed before each call
    out = torch.full((1, M, N), float("nan"), device="cuda", dtype=hb.TORCH[args.dtype])
    plain, _ = launcher(_as(Timed, base, False), out)
    plain()
    torch.cuda.synchronize()
    assert err_of(out) < 1e-2, err_of(out)
    for name, fn in (("warp_gemm", plain), ("cublas", cublas_call(args, a, b_st))):
        k_us = kernel_us(fn, flush)
        db = do_bench(fn, warmup=25, rep=120, return_mode="median") * 1000
        rows[name] = {"kernel_us": k_us, "do_bench_us": db}
        print(f"  {name:10s} kernel {k_us:6.2f} us (CUPTI)  do_bench {db:6.2f} us")
    save(args, "timeline", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
