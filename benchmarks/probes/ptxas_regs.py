"""What a pipelined configuration compiles to (registers, spills, SASS instruction mix), without a GPU.

Builds each kernel's PTX offline (``wp.compile_aot_module(..., use_ptx=True)``, sm_90), assembles it with a
local ``ptxas -v`` and, where ``cuobjdump`` is found, counts the SASS opcodes that matter for a GEMM's K loop
(HMMA/DMMA/FFMA, shared loads, spills, barriers). A static check for the next lever while no device is lent;
the registers are those of this machine's ptxas, not of the NVRTC/nvJitLink that Warp uses on the device (close,
not identical). Warp's PTX may declare a newer ``.version`` than the local ptxas knows: it is lowered to
``--ptx-version`` (default 9.0 for ptxas 13.0), which works where the code uses nothing newer.

    python benchmarks/probes/ptxas_regs.py float16 NN pipe/128x128x128/s2/b128/o1 pipe/128x128x128/s2/b256/o1
    python benchmarks/probes/ptxas_regs.py float32 NT pipe/128x128x16/s3/b256/o2/simt
    python benchmarks/probes/ptxas_regs.py float16 NN default      # the planner's spec for 4096^3
    python benchmarks/probes/ptxas_regs.py float16 NT pipe/128x128x64/s3/b256/o1/wgmma   # sm_90a

Found with it (ptxas 13.0, 2026-11-23): the fp16 default 128x128x128 with 128 threads uses 255 registers and
spills ~140 bytes per thread around tile_matmul (256 threads: 148, no spill); MathDx's fp16 GEMM reads its
fragments with LDS (and PRMT for B of layout N), never LDSM.
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OPS = ("HMMA", "HGMMA", "DMMA", "FFMA", "LDS", "LDSM", "PRMT", "LDGSTS", "STL", "LDL", "BAR")


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    for p in glob.glob("/tmp/**/triton/backends/nvidia/bin/cuobjdump", recursive=True):
        return p
    try:
        import triton

        p = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
        return str(p) if p.exists() else None
    except ImportError:
        return None


def spec_for(dtype: str, layout: str, cfg: str, tf32: bool):
    from warp_gemm.config.configs import PipeConfig
    from warp_gemm.families.pipelined.rules import _with_pipe_config
    from warp_gemm.families import pipelined

    base = pipelined.default_spec(dtype, dtype, tf32=tf32, layout=layout, M=4096, N=4096, K=4096)
    return base if cfg == "default" else _with_pipe_config(base, PipeConfig.parse(cfg), False)


def measure(spec, ptx_version: str, workdir: Path) -> dict:
    import warp as wp

    from warp_gemm.families import pipelined

    k = pipelined.get_kernel(spec)
    k.module.options["block_dim"] = spec.block_dim
    out = workdir / spec.key
    sm90a = getattr(spec, "wgmma", False)  # wgmma: sm_90a (Warp's cuda_arch_suffix "a", ptxas -arch=sm_90a)
    old = getattr(wp.config, "cuda_arch_suffix", None)
    if sm90a:
        wp.config.cuda_arch_suffix = "a"
    try:
        wp.compile_aot_module(k.module, arch=[90], module_dir=str(out), use_ptx=True)
    finally:
        if sm90a:
            wp.config.cuda_arch_suffix = old
    ptx = next(out.glob("*.ptx")).read_bytes().replace(b"\0", b"")
    ptx = re.sub(rb"^\.version \d+\.\d+", b".version " + ptx_version.encode(), ptx, count=1, flags=re.M)
    (out / "k.ptx").write_bytes(ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a" if sm90a else "-arch=sm_90", "-v", str(out / "k.ptx"), "-o",
                        str(out / "k.cubin")],
                       capture_output=True, text=True)
    row = {"key": spec.key}
    m = re.search(r"Used (\d+) registers", r.stderr)
    s = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
    if m is None:
        row["error"] = r.stderr.strip()[-300:]
        return row
    row.update(regs=int(m.group(1)), spill_st=int(s.group(1)), spill_ld=int(s.group(2)))
    cu = _cuobjdump()
    if cu:
        sass = subprocess.run([cu, "-sass", str(out / "k.cubin")], capture_output=True, text=True).stdout
        # "@!PT" (never-true predicate) instructions are the assembler's alignment padding: not counted
        ops = Counter(x.group(2).split(".")[0] for x in re.finditer(r"\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", sass)
                      if (x.group(1) or "").strip() != "@!PT")
        row.update({o: ops[o] for o in OPS})
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtype", help="float16 / bfloat16 / float32 / tf32 / float64")
    ap.add_argument("layout", help="NN, NT, TN or TT")
    ap.add_argument("configs", nargs="+", help="PipeConfig texts, or 'default'")
    ap.add_argument("--ptx-version", default="9.0")
    args = ap.parse_args()
    if not shutil.which("ptxas"):
        print("no ptxas on PATH", file=sys.stderr)
        return 2
    import warp as wp

    wp.config.quiet = True
    wp.init()
    tf32 = args.dtype == "tf32"
    dtype = "float32" if tf32 else args.dtype
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(spec_for(dtype, args.layout, c, tf32), args.ptx_version, Path(tmp)) for c in args.configs]
    print(f"{'kernel':78} {'regs':>4} {'spill st/ld':>11} " + " ".join(f"{o:>6}" for o in OPS))
    for r in rows:
        if "error" in r:
            print(f"{r['key'][:78]:78} ERROR {r['error']}")
            continue
        print(f"{r['key'][:78]:78} {r['regs']:4d} {r['spill_st']:5d}/{r['spill_ld']:<5d} "
              + " ".join(f"{r.get(o, ''):>6}" for o in OPS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
