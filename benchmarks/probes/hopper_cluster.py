"""Clusters of two blocks (HopperSpec.cluster = 2, TMA multicast of the shared tile) against the same tiles without,
kernel level, cuBLAS in the same process (an sm_90 GPU).

    python hopper_cluster.py compile I N   # load (compile) the I-th of N slices of every kernel below and the
                                           # cluster tests' kernels (parallel processes fill Warp's kernel cache)
    python hopper_cluster.py smoke         # each cluster shape once on an odd shape, float64-checked
    python hopper_cluster.py time          # the table: JSON rows to $OUT/hopper_cluster_time.json, a short table last
    python hopper_cluster.py confirm       # the rule's domain over K (twice in turn) and the public call as planned
    python hopper_cluster.py final         # the public call as planned on the rule's shapes, 128x128 kernels beside

Rows: fp16 / bf16 1000^3, fp16 1024^3, 1000x1000x4000, 2048^3, 4096^3 (B stored (K, N)) and bf16 333x4096x4096
(B = W.T) with 128x128, 64x128 (split_n, and one consumer) and 128x256 tiles, cluster 1 against cluster 2 sharing
B (pair M) or A (pair N). Every timed result is checked against float64 first (hopper_bench.time_spec).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import warp as wp

from warp_gemm.families import hopper as H

T128 = {"bm": 128, "bn": 128, "stages": 6}
SN = {"bm": 64, "bn": 128, "stages": 8, "split_n": True}
C1 = {"bm": 64, "bn": 128, "stages": 8, "consumers": 1}
T256 = {"bm": 128, "bn": 256, "stages": 4}
CL = ({}, {"cluster": 2}, {"cluster": 2, "pair": "N"})

# (dtype, M, N, K, layout_b, [tile fields]) -- each tile with cluster 1, 2 pair M, 2 pair N unless it says
CASES = [
    ("float16", 1000, 1000, 1000, "N", [T128, SN, C1]),
    ("bfloat16", 1000, 1000, 1000, "N", [T128, SN]),
    ("float16", 1024, 1024, 1024, "N", [T128, SN]),
    ("float16", 1000, 1000, 4000, "N", [T128, SN]),
    ("float16", 2048, 2048, 2048, "N", [T128, T256]),
    ("float16", 4096, 4096, 4096, "N", [T256]),
    ("bfloat16", 333, 4096, 4096, "T", [T128, SN]),
]


def specs():
    out = []
    for dt, M, N, K, lb, tiles in CASES:
        for t in tiles:
            for c in CL:
                out.append((dt, M, N, K, lb, H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **t, **c)))
    return out


def test_specs():
    """The kernels tests/families/test_hopper.py's cluster tests build."""
    out = []
    clusters = [dict(SN, cluster=2), dict(SN, cluster=2, pair="N"), dict(C1, cluster=2), dict(T128, cluster=2),
                dict(T128, cluster=2, pair="N"), dict(T256, cluster=2)]
    for o in clusters:
        for lb in ("T", "N"):
            out.append(H.HopperSpec(in_dtype="float16", out_dtype="float32", layout_b=lb, epilogue="axpby", **o))
    for dt in ("float16", "bfloat16"):
        for lb in ("T", "N"):
            out.append(H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **SN, cluster=2))
            out.append(H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **C1, cluster=2))
    for pair in ("M", "N"):
        for s in (1, 3):
            out.append(H.HopperSpec(in_dtype="float16", out_dtype="float16", layout_b="N", **SN, cluster=2, pair=pair,
                                    splits=s))
    return out


# confirm: rows off 128 bytes with at most 66 tiles of 128x128 (the cluster rule's domain) over K, both B layouts,
# measured twice in turn; then the public call as planned on the rule's shapes
SWEEP = [("float16", 1000, 1000, K, lb) for K in (1000, 2000, 4000, 8000) for lb in ("N", "T")] + [
    ("bfloat16", 1000, 1000, 4000, "N"), ("float16", 500, 1000, 4000, "N"), ("float16", 777, 1000, 3000, "T")]
SWEEP_TILES = [T128, SN, dict(SN, cluster=2), dict(C1, cluster=2)]


def confirm(hb):
    for rep in range(2):
        for dt, M, N, K, lb in SWEEP:
            for t in SWEEP_TILES:
                s = H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **t)
                hb.time_spec(f"{dt} {M}x{N}x{K} N{lb}" + (" again" if rep else ""), s, M, N, K, lb)
        if rep == 0:
            s = H.HopperSpec(bm=128, bn=64, stages=8, cluster=2, pair="N", layout_b="N")
            hb.time_spec("float16 1000x1000x1000 NN 128x64", s, 1000, 1000, 1000, "N")
    public(hb, [("float16", 1000, 1000, 4000, "N"), ("float16", 1000, 1000, 4000, "T"),
                ("bfloat16", 1000, 1000, 4000, "N"), ("float16", 1000, 1000, 1000, "N"),
                ("float16", 777, 1000, 3000, "T")])


# final: the public call as planned on the cluster rule's shapes (and 1000^3, outside it), the old default (128x128
# tiles) at kernel level beside it
FINAL = [("float16", 1000, 1000, K, "N") for K in (1000, 2000, 4000, 8000)] + [
    ("float16", 1000, 1000, K, "T") for K in (3000, 4000, 8000)] + [
    ("bfloat16", 1000, 1000, 4000, "N"), ("bfloat16", 1000, 1000, 4000, "T"), ("float16", 500, 1000, 4000, "N"),
    ("float16", 777, 1000, 3000, "T")]


def public(hb, shapes, baseline=False):
    import torch

    import warp_gemm
    from warp_gemm.core import execute

    planned = []
    make_plan = getattr(execute.make_plan, "orig", execute.make_plan)

    def spy(*args, **kw):
        plan = make_plan(*args, **kw)
        planned.append(getattr(plan.family_spec, "key", plan.family))
        return plan

    spy.orig = make_plan
    execute.make_plan = spy
    wp.set_stream(wp.stream_from_torch(torch.cuda.current_stream()))

    def wa(t):
        return wp.from_torch(t, dtype={torch.bfloat16: wp.bfloat16}.get(t.dtype))

    for dt, M, N, K, lb in shapes:
        if baseline:
            hb.time_spec(f"kernel {dt} {M}x{N}x{K} N{lb}", H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **T128),
                         M, N, K, lb)
        a, b_st, b = hb.operands(M, N, K, dt, lb)
        A, B = wa(a[0].contiguous()), wa(b[0])
        out = torch.full((M, N), float("nan"), device="cuda", dtype=hb.TORCH[dt])
        O = wa(out)
        planned.clear()
        warp_gemm.matmul(A, B, out=O)
        torch.cuda.synchronize()
        ref = torch.matmul(a[0].double(), b[0].double())
        err = ((out.double() - ref).norm() / ref.norm()).item()
        ms = hb.bench(lambda A=A, B=B, O=O: warp_gemm.matmul(A, B, out=O))
        cb, ct = hb.cublas_tflops(a, b_st, lb, 1, 2.0 * M * N * K)
        hb.row(name=f"public {dt} {M}x{N}x{K} N{lb}", spec=",".join(planned), err=float(f"{err:.2e}"),
               nan=int(torch.isnan(out).sum().item()), tflops=round(2.0 * M * N * K / ms / 1e9, 1),
               cublas=round(ct, 1), ratio=round(cb / ms, 3))


def main():
    mode = sys.argv[1]
    wp.init()
    dev = wp.get_device("cuda:0")
    if mode == "compile":
        i, n = int(sys.argv[2]), int(sys.argv[3])
        sweep = [H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **t) for dt, _, _, _, lb in SWEEP
                 for t in SWEEP_TILES] + [H.HopperSpec(bm=128, bn=64, stages=8, cluster=2, pair="N", layout_b="N")]
        sweep += [H.HopperSpec(in_dtype=dt, out_dtype=dt, layout_b=lb, **t) for dt, _, _, _, lb in FINAL
                  for t in (T128, dict(C1, cluster=2))]
        todo = list(dict.fromkeys([s.kernel_spec for *_, s in specs()] + [s.kernel_spec for s in test_specs()]
                                  + [s.kernel_spec for s in sweep]))
        for s in todo[i::n]:
            try:
                H.load(s, dev)
            except Exception as e:  # noqa: BLE001 -- report and go on
                print("COMPILE FAIL", s.key, repr(e)[:400], flush=True)
        return
    import hopper_bench as hb

    if mode == "smoke":
        for o in ({**SN, "cluster": 2}, {**SN, "cluster": 2, "pair": "N"}, {**T128, "cluster": 2},
                  {**T256, "cluster": 2}, {**C1, "cluster": 2}):
            for lb in ("N", "T"):
                hb.time_spec("smoke", H.HopperSpec(layout_b=lb, **o), 515, 771, 336, lb, pad=True, cublas=False)
        return
    if mode == "confirm":
        confirm(hb)
    if mode == "final":
        public(hb, FINAL, baseline=True)
        public(hb, FINAL)  # again: the spread
    for dt, M, N, K, lb, s in (specs() if mode == "time" else []):
        name = f"{dt} {M}x{N}x{K} N{lb}"
        try:
            hb.time_spec(name, s, M, N, K, lb)
        except Exception as e:  # noqa: BLE001 -- one failing variant must not hide the others
            hb.row(name=name, spec=s.key, error=repr(e)[:300])
    # the 1000^3 rows again (the target: run-to-run spread)
    for dt, M, N, K, lb, s in (specs()[:9] if mode == "time" else []):
        hb.time_spec(f"{dt} {M}x{N}x{K} N{lb} again", s, M, N, K, lb)
    with open(os.path.join(os.environ.get("OUT", "."), f"hopper_cluster_{mode}.json"), "w") as f:
        json.dump(hb.ROWS, f, indent=1)
    for r in hb.ROWS:
        print(f"{r['name']:<34} {r['spec']:<44} {r.get('tflops', '')!s:>6} {r.get('cublas', '')!s:>6} "
              f"{r.get('ratio', '')!s:>6} err {r.get('err', r.get('error'))}")


if __name__ == "__main__":
    main()
