"""Tune and time the pipelined family (warp_gemm/kernels/pipelined.py) against cuBLAS on one GPU.

    python benchmarks/pipelined_bench.py compile I    # build variant I (run many in parallel)
    python benchmarks/pipelined_bench.py time         # check every variant vs float64, time, table

Variants are PipeSpec field sets per dtype; each runs on the shapes its chunk fits: 16-byte chunks on
4096^3 / 8192^3 / 1000^3 (rows 16-byte aligned), the widest chunk the rows allow on 4095^3 / 4097^3,
and "staged": the odd operands copied into 16-byte-aligned row buffers inside the timed region (what a
planner would do for rows not 16-byte aligned), then the 16-byte kernel. NT variants on aligned shapes
also run "bT": an NN problem whose B is transposed into a scratch buffer inside the timed region.
Every variant is checked against a float64 product of row blocks (first and last tile rows) on fresh
random data (randn * K**-0.25) with a NaN-prefilled output before it is timed; failures are reported,
not timed. Timing: triton.testing.do_bench median of recorded launches (record_cmd), cuBLAS
(torch.matmul) in the same process. Env: ONLY=dtype[,dtype] to restrict, SHAPES=4096,1000 to restrict,
VARIANTS=name,name. Writes $OUT/pipelined_<TAG>.json.
"""

import importlib.util
import json
import os
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_family():
    """Import warp_gemm.families.pipelined without running the package's __init__ (the package is
    being restructured; the family needs only _compat and kernels/common)."""
    for name, path in (("warp_gemm", "warp_gemm"), ("warp_gemm.kernels", "warp_gemm/kernels")):
        if name not in sys.modules:
            m = types.ModuleType(name)
            m.__path__ = [os.path.join(ROOT, path)]
            sys.modules[name] = m
    import warp_gemm.families.pipelined as P

    if os.environ.get("DIAG") == "mmaonly":
        # Diagnostic ceiling, never a result: the copy snippets do nothing, so the K loop is waits,
        # barriers and tile_matmul on whatever the shared buffers hold (not checked, not data).
        P._COPY = "    return;\n"
    return P


V = []  # (name, dtype, tf32, overrides)


def _v(name, dtype, tf32=False, **o):
    V.append((name, dtype, tf32, o))


# fp16 / bf16: the probe's best (128x128x128, 2 stages, 1 block/SM) and neighbours; smaller tiles for
# 1000^3 (128x128 tiles give 64 blocks on 132 SMs).
for dt, pre in (("float16", "h"), ("bfloat16", "bf")):
    _v(f"{pre}128x128x128s2", dt, tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8)
    _v(f"{pre}128x128x64s4", dt, tm=128, tn=128, tk=64, stages=4, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8)
    _v(f"{pre}128x64x128s2", dt, tm=128, tn=64, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8)
    _v(f"{pre}128x128x128s2c2", dt, tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8,
       pad_c=8, chunk=2)
_v("h128x128x64s3", "float16", tm=128, tn=128, tk=64, stages=3, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8)
_v("h64x128x128s2", "float16", tm=64, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8)
_v("h64x64x128s2", "float16", tm=64, tn=64, tk=128, stages=2, block_dim=128, min_blocks=2, pad_ab=8, pad_c=8)
_v("h128x64x128s2c2", "float16", tm=128, tn=64, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8,
   chunk=2)
_v("h128x128x128s2NT", "float16", layout="NT", tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1,
   pad_ab=8, pad_c=8)
_v("h128x128x128s2TN", "float16", layout="TN", tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1,
   pad_ab=8, pad_c=8)
# tf32
_v("t128x128x32s3", "float32", True, tm=128, tn=128, tk=32, stages=3, block_dim=256, min_blocks=1, pad_ab=4, pad_c=8)
_v("t128x128x64s2", "float32", True, tm=128, tn=128, tk=64, stages=2, block_dim=256, min_blocks=1, pad_ab=4, pad_c=8)
_v("t128x128x32s4", "float32", True, tm=128, tn=128, tk=32, stages=4, block_dim=256, min_blocks=1, pad_ab=4, pad_c=8)
_v("t64x128x64s3", "float32", True, tm=64, tn=128, tk=64, stages=3, block_dim=256, min_blocks=1, pad_ab=4, pad_c=8)
_v("t128x128x32s3c4", "float32", True, tm=128, tn=128, tk=32, stages=3, block_dim=256, min_blocks=1, pad_ab=4,
   pad_c=8, chunk=4)
_v("t128x128x64s2c4", "float32", True, tm=128, tn=128, tk=64, stages=2, block_dim=256, min_blocks=1, pad_ab=4,
   pad_c=8, chunk=4)
# exact float32 (MathDx SIMT path)
_v("f64x64x32s2", "float32", tm=64, tn=64, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0)
_v("f64x64x32s3p", "float32", tm=64, tn=64, tk=32, stages=3, block_dim=256, pad_ab=4, pad_c=8)
_v("f128x64x32s2", "float32", tm=128, tn=64, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0)
_v("f128x128x32s2", "float32", tm=128, tn=128, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0)
_v("f64x64x32s2c4", "float32", tm=64, tn=64, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0, chunk=4)
_v("f128x64x32s2c4", "float32", tm=128, tn=64, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0, chunk=4)
# float64
_v("d64x64x32s3", "float64", tm=64, tn=64, tk=32, stages=3, block_dim=256, pad_ab=4, pad_c=4)
_v("d64x64x64s2", "float64", tm=64, tn=64, tk=64, stages=2, block_dim=256, pad_ab=4, pad_c=4)
_v("d128x64x32s2", "float64", tm=128, tn=64, tk=32, stages=2, block_dim=256, pad_ab=4, pad_c=4)
_v("d64x64x32s2b128", "float64", tm=64, tn=64, tk=32, stages=2, block_dim=128, pad_ab=4, pad_c=4)
_v("d64x64x32s3c8", "float64", tm=64, tn=64, tk=32, stages=3, block_dim=256, pad_ab=4, pad_c=4, chunk=8)
_v("d64x64x64s2c8", "float64", tm=64, tn=64, tk=64, stages=2, block_dim=256, pad_ab=4, pad_c=4, chunk=8)

# round 2 (after benchmarks/results/pipelined/pipelined_h100_r1.json): NT was faster than NN at 4096
# (161 vs 150), the accumulator's shared traffic per tile_matmul favours deep K tiles, and the tiled
# family's exact-fp32/fp64 winners keep a register accumulator with 2-3 blocks per SM (pad_c 0 now
# means a register accumulator; the r1 pad_c-0 rows used a shared one).
_v("h128x128x128s2b128", "float16", tm=128, tn=128, tk=128, stages=2, block_dim=128, min_blocks=1, pad_ab=8, pad_c=8)
_v("h128x128x96s3", "float16", tm=128, tn=128, tk=96, stages=3, block_dim=256, min_blocks=1, pad_ab=8, pad_c=8)
_v("h128x128x128s2r", "float16", tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8, pad_c=0)
_v("bf128x128x128s2NT", "bfloat16", layout="NT", tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1,
   pad_ab=8, pad_c=8)
_v("t128x128x64s2b512", "float32", True, tm=128, tn=128, tk=64, stages=2, block_dim=512, min_blocks=1, pad_ab=4,
   pad_c=8)
_v("t128x64x64s3", "float32", True, tm=128, tn=64, tk=64, stages=3, block_dim=256, min_blocks=1, pad_ab=4, pad_c=8)
_v("t128x128x32s2r", "float32", True, tm=128, tn=128, tk=32, stages=2, block_dim=256, min_blocks=2, pad_ab=4, pad_c=0)
_v("t128x128x64s2NT", "float32", True, layout="NT", tm=128, tn=128, tk=64, stages=2, block_dim=256, min_blocks=1,
   pad_ab=4, pad_c=8)
_v("f128x128x32s2o2", "float32", tm=128, tn=128, tk=32, stages=2, block_dim=256, min_blocks=2, pad_ab=0, pad_c=0)
_v("f128x128x32s3o2", "float32", tm=128, tn=128, tk=32, stages=3, block_dim=256, min_blocks=2, pad_ab=0, pad_c=0)
_v("f128x64x32s2o2", "float32", tm=128, tn=64, tk=32, stages=2, block_dim=256, min_blocks=2, pad_ab=0, pad_c=0)
_v("d64x64x32s2b128o2", "float64", tm=64, tn=64, tk=32, stages=2, block_dim=128, min_blocks=2, pad_ab=4, pad_c=4)
_v("d64x64x32s2b128r", "float64", tm=64, tn=64, tk=32, stages=2, block_dim=128, min_blocks=3, pad_ab=4, pad_c=0)
_v("d128x64x32s2r", "float64", tm=128, tn=64, tk=32, stages=2, block_dim=256, min_blocks=2, pad_ab=4, pad_c=0)
# round 3 (after r2: NT beat NN for 16-bit and tf32 at every large size, 164-169 vs 146-161; register
# accumulators lost everywhere): NT at 1000^3, TT on the GPU, the fused bias + gelu epilogue, and
# "bT" mode (NN problem, B transposed into a scratch buffer inside the timed region, NT kernel).
_v("h128x64x128s2NT", "float16", layout="NT", tm=128, tn=64, tk=128, stages=2, block_dim=256, min_blocks=1, pad_ab=8,
   pad_c=8)
_v("h128x128x128s2TT", "float16", layout="TT", tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1,
   pad_ab=8, pad_c=8)
_v("h128x128x128s2NTgelu", "float16", layout="NT", tm=128, tn=128, tk=128, stages=2, block_dim=256, min_blocks=1,
   pad_ab=8, pad_c=8, bias=True, activation="gelu")
_v("t128x64x64s3NT", "float32", True, layout="NT", tm=128, tn=64, tk=64, stages=3, block_dim=256, min_blocks=1,
   pad_ab=4, pad_c=8)

# round 4: layouts for exact fp32 / fp64 (NT won for tensor-core dtypes); with DIAG=mmaonly the best
# configs again as a copy-free ceiling (how close the pipeline is to tile_matmul's own rate per tile).
_v("f128x64x32s2NT", "float32", layout="NT", tm=128, tn=64, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0)
_v("f128x64x32s2TN", "float32", layout="TN", tm=128, tn=64, tk=32, stages=2, block_dim=256, pad_ab=0, pad_c=0)
_v("d64x64x32s2b128o2NT", "float64", layout="NT", tm=64, tn=64, tk=32, stages=2, block_dim=128, min_blocks=2,
   pad_ab=4, pad_c=4)

SHAPES = [4096, 8192, 1000, 4095, 4097]
FRO = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-5, "tf32": 5e-3, "float64": 1e-13}


def _spec(P, i):
    name, dt, tf32, o = V[i]
    o = dict(o)
    layout = o.pop("layout", "NN")
    return name, P.PipeSpec(in_dtype=dt, out_dtype=dt, layout_a=layout[0], layout_b=layout[1], epilogue="scale",
                            tf32=tf32, **o)


def compile_one(i):
    P = _load_family()
    import warp as wp

    wp.config.log_level = 30
    wp.init()
    name, spec = _spec(P, i)
    t = time.time()
    try:
        k = P.get_kernel(spec)
        k.module.load(wp.get_device("cuda:0"), spec.block_dim)
        print(json.dumps({"variant": name, "compile_s": round(time.time() - t, 1), "smem": P.smem_bytes(spec)}),
              flush=True)
    except Exception as e:
        print(json.dumps({"variant": name, "error": f"{type(e).__name__}: {e}"[:600]}), flush=True)


def main_time():
    P = _load_family()
    import torch
    import warp as wp
    from triton.testing import do_bench

    wp.config.log_level = 30
    wp.init()
    dev = wp.get_device("cuda:0")
    TD = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
    only = set(filter(None, os.environ.get("ONLY", "").split(",")))
    vsel = set(filter(None, os.environ.get("VARIANTS", "").split(",")))
    shapes = [int(s) for s in os.environ.get("SHAPES", "").split(",") if s] or SHAPES
    rows_out = []
    header = {"gpu": torch.cuda.get_device_name(), "warp": wp.config.version, "torch": torch.__version__}
    print(json.dumps(header), flush=True)
    groups = {}
    for i, (name, dt, tf32, o) in enumerate(V):
        tag = "tf32" if tf32 else dt
        if (only and tag not in only) or (vsel and name not in vsel):
            continue
        groups.setdefault(tag, []).append(i)
    stream = wp.stream_from_torch()
    for tag, idxs in groups.items():
        dt = "float32" if tag == "tf32" else tag
        tdt = TD[dt]
        torch.backends.cuda.matmul.allow_tf32 = tag == "tf32"
        for n in shapes:
            M = N = K = n
            torch.manual_seed(n)
            s = K ** -0.25
            a = (torch.randn(M, K, device="cuda", dtype=torch.float64) * s).to(tdt)
            b = (torch.randn(K, N, device="cuda", dtype=torch.float64) * s).to(tdt)
            rsel = torch.cat([torch.arange(0, min(256, M)), torch.arange(max(0, M - 200), M)]).unique().cuda()
            ref = a[rsel].double() @ b.double()
            # cuBLAS in the same process
            ms = do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median")
            cub = 2 * M * N * K / ms / 1e9
            rows_out.append({"dtype": tag, "n": n, "impl": "cublas", "tflops": round(cub, 1), "ms": ms})
            print(json.dumps(rows_out[-1]), flush=True)
            at = a.t().contiguous()
            bt = b.t().contiguous()
            # staging buffers with 16-byte-aligned rows
            it = a.element_size()
            pad = lambda x: -(-x * it // 16) * 16 // it  # noqa: E731
            aligned = (K * it) % 16 == 0 and (N * it) % 16 == 0
            a_st = torch.zeros(M, pad(K), device="cuda", dtype=tdt)
            b_st = torch.zeros(K, pad(N), device="cuda", dtype=tdt)
            bt_st = torch.zeros(N, pad(K), device="cuda", dtype=tdt)
            for i in idxs:
                name, spec = _spec(P, i)
                lay = spec.layout_a + spec.layout_b
                if lay not in ("NN", "NT") and n != 4096:
                    continue
                diag = os.environ.get("DIAG") == "mmaonly"
                modes = []
                if spec.chunk == 16 and aligned:
                    modes.append("direct")
                    if lay == "NT" and n != 1000 and not spec.bias and not diag:
                        modes.append("bT")
                elif spec.chunk == 16 and n in (4095, 4097) and not diag:
                    # odd rows: stage into aligned buffers inside the timed region (NT: B staged
                    # transposed, i.e. the planner's staging pass writes B^T)
                    modes.append("staged")
                elif spec.chunk < 16 and not aligned and not diag:
                    modes.append("direct")
                for mode in modes:
                    row = {"dtype": tag, "n": n, "impl": name + ("/mmaonly" if diag else ""), "mode": mode,
                           "key": spec.key}
                    try:
                        d = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
                        ta = at if spec.layout_a == "T" else a
                        tb = bt if spec.layout_b == "T" else b
                        if mode == "staged":
                            ta, tb = a_st[:, :K], (bt_st[:, :K] if lay == "NT" else b_st[:, :N])
                        if mode == "bT":
                            tb = bt_st[:, :K]
                        bias = torch.randn(N, device="cuda", dtype=tdt) if spec.bias else None
                        A = wp.from_torch(ta.unsqueeze(0))
                        B = wp.from_torch(tb.unsqueeze(0))
                        D = wp.from_torch(d.unsqueeze(0))
                        ch = min(P.max_chunk(A, dt), P.max_chunk(B, dt))
                        if ch < spec.chunk:
                            raise ValueError(f"rows allow {ch}-byte chunks, spec needs {spec.chunk}")
                        k, dim, inputs, block = P.launch_args(spec, A, B, None, D, 1.0, 0.0, M, N, K, 1, 1, 1, 1,
                                                              group_m=8,
                                                              bias=wp.from_torch(bias) if bias is not None else None)
                        cmd = wp.launch_tiled(k, dim=dim, inputs=inputs, block_dim=block, device=dev, stream=stream,
                                              record_cmd=True)
                        if mode == "bT":
                            def run():
                                bt_st[:, :K].copy_(b.t())
                                cmd.launch()
                        elif mode == "staged" and lay == "NT":
                            def run():
                                a_st[:, :K].copy_(a)
                                bt_st[:, :K].copy_(b.t())
                                cmd.launch()
                        elif mode == "staged":
                            def run():
                                a_st[:, :K].copy_(a)
                                b_st[:, :N].copy_(b)
                                cmd.launch()
                        else:
                            run = cmd.launch
                        run()
                        torch.cuda.synchronize()
                        out = d[rsel].double()
                        bad = int((~torch.isfinite(out)).sum())
                        want = ref
                        if spec.bias:
                            want = ref + bias.double()[None, :]
                        if spec.activation:
                            want = torch.nn.functional.gelu(want) if spec.activation == "gelu" else None
                        err = ((out - want).norm() / want.norm()).item()
                        row["err"] = float(f"{err:.2e}")
                        row["nonfinite"] = bad
                        if diag:
                            row["err"] = None  # nothing was copied: the output is not a result
                        if not diag and (bad or not err <= FRO[tag]):
                            row["error"] = "WRONG RESULT"
                        else:
                            ms = do_bench(run, warmup=25, rep=100, return_mode="median")
                            ms2 = do_bench(run, warmup=10, rep=60, return_mode="median")
                            row["ms"] = ms
                            row["tflops"] = round(2 * M * N * K / ms / 1e9, 1)
                            row["tflops_rep2"] = round(2 * M * N * K / ms2 / 1e9, 1)
                            row["vs_cublas"] = round(row["tflops"] / cub, 2)
                    except Exception as e:
                        row["error"] = f"{type(e).__name__}: {e}"[:400]
                    rows_out.append(row)
                    print(json.dumps(row), flush=True)
            del a, b, at, bt, a_st, b_st, bt_st, ref
            torch.cuda.empty_cache()
    out = os.environ.get("OUT", "/tmp")
    tagname = os.environ.get("TAG", "run")
    with open(os.path.join(out, f"pipelined_{tagname}.json"), "w") as f:
        json.dump({"header": header, "rows": rows_out}, f, indent=0)
    # short table: best per (dtype, n) and cuBLAS
    print("\n dtype     n     best variant (mode)               TF/s   cuBLAS  ratio | all (TF/s)")
    for tag in groups:
        for n in shapes:
            rs = [r for r in rows_out if r["dtype"] == tag and r["n"] == n]
            cb = next((r["tflops"] for r in rs if r["impl"] == "cublas"), None)
            ok = [r for r in rs if r["impl"] != "cublas" and "tflops" in r]
            bad = [r["impl"] for r in rs if "error" in r]
            if not ok:
                print(f" {tag:8s} {n:5d}  (none) errors={bad}")
                continue
            best = max(ok, key=lambda r: r["tflops"])
            allv = " ".join(f"{r['impl']}{'/st' if r.get('mode') == 'staged' else ''}={r['tflops']}" for r in ok)
            print(f" {tag:8s} {n:5d}  {best['impl'] + ' (' + best['mode'] + ')':34s} {best['tflops']:6.1f} {cb:7.1f} "
                  f"{best['tflops'] / cb:5.2f} | {allv}{' ERR=' + ','.join(bad) if bad else ''}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["compile"]:
        compile_one(int(sys.argv[2]))
    elif sys.argv[1:2] == ["list"]:
        # indices of the variants to compile (VARIANTS=name,... or ONLY=dtype,...; default all)
        vsel = set(filter(None, os.environ.get("VARIANTS", "").split(",")))
        only = set(filter(None, os.environ.get("ONLY", "").split(",")))
        print(" ".join(str(i) for i, (name, dt, tf32, _) in enumerate(V)
                       if (not vsel or name in vsel) and (not only or ("tf32" if tf32 else dt) in only)))
    else:
        main_time()
