"""Wave quantization of the pipelined family's small-problem configuration (fp16, H100).

1023x1025x1027 plans 128x64x128 tiles at one block per SM: 8 x 17 = 136 blocks for 132 SMs, two waves,
and ran at 28 TFLOP/s against 69 for 1000^3 (128 blocks, one wave). Candidates that fit two blocks per
SM (or fewer, larger blocks) are timed here against the default, by CUDA-graph replay of one whole call
(GPU time: staging passes included) after a float64 check.

    python benchmarks/probes/small_waves.py warm -j 16     # compile every variant x shape, in parallel
    python benchmarks/probes/small_waves.py time --json out.json

A variant replaces fields of the planner's small-problem PipeSpec (kernels.pipelined.default_spec) in
its own process; nothing in the package changes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _graph import replay_us  # noqa: E402

VARIANTS = {
    "default": {},
    "k64_o2": {"tk": 64, "min_blocks": 2},
    "64x128_o2": {"tm": 64, "tn": 128, "tk": 64, "block_dim": 128, "min_blocks": 2},
    "64x64_o3": {"tm": 64, "tn": 64, "tk": 128, "block_dim": 128, "min_blocks": 2},
    "128x128": {"tn": 128},
}
SHAPES = [(1023, 1025, 1027), (1000, 1000, 1000), (127, 4099, 1031), (1500, 1500, 1500), (2048, 1024, 1024)]
# Second run (batched / tf32): SW_SET=2 -- variants then replace fields of every pipelined spec they name
# the dtype of ("fp16" / "tf32" prefix), shapes carry (batch, M, N, K, dtype).
SET2_VARIANTS = {
    "default": {},
    "fp16_k64_o2": {"tk": 64, "min_blocks": 2, "tn": 64},
    "fp16_64x128_o2": {"tm": 64, "tn": 128, "tk": 64, "block_dim": 128, "min_blocks": 2},
    "fp16_64x64x128_o2": {"tm": 64, "tn": 64, "tk": 128, "block_dim": 128, "min_blocks": 2},
    "tf32_small": {"tn": 64, "stages": 3},
    "tf32_large": {"tn": 128, "stages": 2},
}
SET2_SHAPES = [(64, 256, 256, 256, "float16"), (16, 512, 512, 512, "float16"), (1, 1023, 1025, 1027, "float32"),
               (1, 2048, 1024, 1024, "float32"), (1, 1000, 1000, 1000, "float32")]
# Third run (round 5, odd shapes in one wave): SW_SET=3 -- tile shapes whose blocks fit one wave of
# 132 SMs at 1023x1025x1027 (128x128: 72 blocks; 96x96: 121; 128x80: 104; 96x128: 99; 128x96: 88).
SET3_VARIANTS = {
    "default": {},
    "fp16_96x96": {"tm": 96, "tn": 96},
    "fp16_128x96": {"tn": 96},
    "fp16_96x128": {"tm": 96, "tn": 128},
    "fp16_128x80": {"tn": 80},
    "fp16_64x128_o2": {"tm": 64, "tn": 128, "block_dim": 128, "min_blocks": 2},
}
SET3_SHAPES = [(1, 1023, 1025, 1027, "float16"), (1, 127, 4099, 1031, "float16"), (1, 2048, 1024, 1024, "float16"),
               (1, 1000, 1000, 1000, "float16"), (1, 4095, 4095, 4095, "float16"), (1, 1536, 1536, 1536, "float16")]
# Fourth run: grids that fill under half the SMs even with 128x64 tiles (127x4099x1031: 65 blocks).
SET4_VARIANTS = {
    "default": {},
    "fp16_128x32": {"tm": 128, "tn": 32},
    "fp16_64x64": {"tm": 64, "tn": 64},
    "fp16_64x64_b128": {"tm": 64, "tn": 64, "block_dim": 128},
    "fp16_64x32_b128": {"tm": 64, "tn": 32, "block_dim": 128},
}
SET4_SHAPES = [(1, 127, 4099, 1031, "float16"), (1, 256, 2048, 2048, "float16"), (1, 512, 1024, 1024, "float16"),
               (1, 500, 500, 500, "float16"), (1, 128, 4096, 4096, "float16"), (1, 1000, 1000, 1000, "float16")]
_SET = __import__("os").environ.get("SW_SET")
if _SET == "2":
    VARIANTS, SHAPES = SET2_VARIANTS, SET2_SHAPES
elif _SET == "3":
    VARIANTS, SHAPES = SET3_VARIANTS, SET3_SHAPES
elif _SET == "4":
    VARIANTS, SHAPES = SET4_VARIANTS, SET4_SHAPES


def patch(over: dict, target=None):
    from warp_gemm.families import pipelined as P

    orig = P.default_spec

    def ds(in_dtype, out_dtype=None, **kw):
        spec = orig(in_dtype, out_dtype, **kw)
        M, N, b = kw.get("M"), kw.get("N"), kw.get("batch", 1)
        if target is not None:  # set 2: every spec of the variant's dtype
            if (target == "tf32") == bool(kw.get("tf32")) and (target == "tf32" or in_dtype == "float16"):
                spec = dataclasses.replace(spec, **over)
        elif over and M is not None and N is not None and -(-M // 128) * -(-N // 128) * max(1, b) < kw.get("sm_count", 132):
            spec = dataclasses.replace(spec, **over)
        return spec

    P.default_spec = ds


def one(variant: str, shape, timing: bool) -> dict:
    import torch

    import warp_gemm as wg
    from warp_gemm.core.plan import make_plan
    from warp_gemm.core.problem import validate

    if len(shape) == 5:
        B, M, N, K, dt = shape
    else:
        (M, N, K), B, dt = shape, 1, "float16"
    tdt, tf32 = getattr(torch, dt), dt == "float32"
    lead = (B,) if B > 1 else ()
    a = torch.randn(*lead, M, K, device="cuda").to(tdt)
    b = torch.randn(*lead, K, N, device="cuda").to(tdt)
    out = torch.full((*lead, M, N), float("nan"), device="cuda", dtype=tdt)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    with wg.options() as o:
        p = validate(a, b, None, 1.0, 0.0, False, False, out, "matmul")
        pl = make_plan(p, 1.0, 0.0, tf32, None, o)
    wg.matmul(a, b, out=out, allow_tf32=tf32)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = float(((out.double() - ref).abs().max() / ref.abs().max()).item())
    row = {"variant": variant, "shape": "x".join(map(str, shape)).replace("float", "f"), "family": pl.family,
           "spec": getattr(pl.family_spec, "key", str(pl.family_spec))[:80], "err": err}
    if not timing:
        return row
    us = replay_us(lambda: wg.matmul(a, b, out=out, allow_tf32=tf32))
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        a @ b
    e0.record()
    for _ in range(100):
        torch.matmul(a, b, out=out)
    e1.record()
    torch.cuda.synchronize()
    row.update(us=us, tflops=2 * B * M * N * K / us / 1e6, cublas_us=e0.elapsed_time(e1) / 100 * 1e3)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["warm", "time", "child"])
    ap.add_argument("-j", type=int, default=16)
    ap.add_argument("--variant")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--shape", type=int, default=None, help="child: only SHAPES[i]")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.mode == "child":
        tgt = args.variant.split("_")[0] if args.variant != "default" and len(SHAPES[0]) == 5 else None
        patch(VARIANTS[args.variant], tgt)
        import warp_gemm as wg

        wg.init("cuda")
        for sh in SHAPES if args.shape is None else [SHAPES[args.shape]]:
            try:
                print("ROW", json.dumps(one(args.variant, sh, args.timing)), flush=True)
            except Exception as e:  # noqa: BLE001
                print("ROW", json.dumps({"variant": args.variant, "shape": str(sh), "error": str(e)[:300]}), flush=True)
        return 0

    def run(v, timing, shape=None):
        cmd = [sys.executable, __file__, "child", "--variant", v] + (["--timing"] if timing else [])
        cmd += [] if shape is None else ["--shape", str(shape)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        rows = [json.loads(x[4:]) for x in r.stdout.splitlines() if x.startswith("ROW ")]
        return rows, r.stderr[-500:] if r.returncode else ""

    t = time.time()
    if args.mode == "warm":
        with ThreadPoolExecutor(args.j) as ex:
            jobs = [(v, i) for v in VARIANTS for i in range(len(SHAPES))]
            for rows, err in ex.map(lambda j: run(j[0], False, j[1]), jobs):
                print(rows, err, flush=True)
        print(f"warm {time.time() - t:.0f}s")
        return 0
    allrows = []
    for v in VARIANTS:
        rows, err = run(v, True)
        allrows += rows
        if err:
            print(v, err)
    if args.json:
        Path(args.json).write_text(json.dumps(allrows, indent=1))
    print(f"{'variant':11} {'shape':16} {'us':>8} {'TFLOP/s':>8} {'cuBLAS us':>9} {'err':>8} spec")
    for r in allrows:
        if "error" in r:
            print(f"{r['variant']:11} {r['shape']:16} ERROR {r['error'][:80]}")
            continue
        print(f"{r['variant']:11} {r['shape']:16} {r.get('us', 0):8.1f} {r.get('tflops', 0):8.1f} "
              f"{r.get('cublas_us', 0):9.1f} {r['err']:8.1e} {r['family']} {r['spec'][:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
