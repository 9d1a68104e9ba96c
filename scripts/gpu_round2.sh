#!/usr/bin/env bash
# This round's device work in two commands of < 10 minutes each (run from the repo root, Warp staged):
#   bash scripts/gpu_round2.sh validate   # issue 14 stress (2 before / 20 after) + the GPU suite
#   bash scripts/gpu_round2.sh bench      # kernel cache filled in parallel, then the runner's table + host loop
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
export PYTHONUNBUFFERED=1
case "${1:-validate}" in
validate)
  bash scripts/gpu_threads_stress.sh "${BEFORE:-2}" "${AFTER:-20}" 11 init > "$out/threads.txt" 2>&1
  tail -n 2 "$out/threads.txt"
  timeout "${SUITE_S:-420}" bash scripts/gpu_tests.sh 16 > "$out/gpu_suite.txt" 2>&1
  echo "suite exit $?"; tail -n 25 "$out/gpu_suite.txt"
  ;;
bench)
  S16="4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,4000x4000x4000,1000x1000x1000,1023x1025x1027,127x4099x1031,16x8192x8192,1x4096x4096,64x256x256x256,4096x32x32x32"
  python3 benchmarks/warm_cache.py --shapes "$S16" --dtype fp16 -j 16 > "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "4096x4096x4096,8192x8192x8192" --dtype bf16 -j 4 >> "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "4096x4096x4096,4095x4095x4095" --dtype tf32,fp32 -j 4 >> "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "4096x4096x4096,1000x1000x1000,10000x16x16x16" --dtype fp64,fp32 -j 4 >> "$out/warm.txt" 2>&1 &
  wait; grep -c ok "$out/warm.txt"; grep FAILED "$out/warm.txt" | head -5
  python3 benchmarks/run.py --shapes "$S16" --dtype fp16 --providers warp_gemm,torch --json "$out/r2_fp16.json" > "$out/r2_fp16.txt" 2>&1
  python3 benchmarks/run.py --shapes "4096x4096x4096,8192x8192x8192" --dtype bf16 --providers warp_gemm,torch --json "$out/r2_bf16.json" > "$out/r2_bf16.txt" 2>&1
  python3 benchmarks/run.py --shapes "4096x4096x4096,4095x4095x4095" --dtype tf32,fp32 --providers warp_gemm,torch --json "$out/r2_32.json" > "$out/r2_32.txt" 2>&1
  python3 benchmarks/run.py --shapes "4096x4096x4096,1000x1000x1000,10000x16x16x16" --dtype fp64,fp32 --providers warp_gemm,torch --json "$out/r2_64.json" > "$out/r2_64.txt" 2>&1
  python3 benchmarks/host_loop.py --out "$out/host_loop.json" > "$out/host_loop.txt" 2>&1
  for f in r2_fp16 r2_bf16 r2_32 r2_64; do tail -n 30 "$out/$f.txt" | grep -v "^$"; done; tail -n 5 "$out/host_loop.txt"
  ;;
final)  # the GPU suite (summary only) + host loop + linear + a few re-planned rows, one command
  OUT=/tmp timeout "${SUITE_S:-450}" bash scripts/gpu_tests.sh 16 > /tmp/gpu_suite.txt 2>&1; echo "suite exit $?"
  { grep -h "^shard\|^GPU total\|^FAILED\|^ERROR" /tmp/gpu_suite.txt; for f in /tmp/gpu_shard_*.log; do
      echo "== $f: $(tail -n 1 "$f")"; grep -h "^E  " "$f" | head -5; done; } > "$out/gpu_suite_summary.txt"
  tail -n 25 "$out/gpu_suite_summary.txt"
  python3 benchmarks/host_loop.py --out "$out/host_loop.json" > "$out/host_loop.txt" 2>&1; tail -n 5 "$out/host_loop.txt"
  python3 benchmarks/linear_bench.py --out "$out/linear.json" 2>&1 | tail -n 6
  python3 benchmarks/run.py --shapes "127x4099x1031,1023x1025x1027,512x512x512" --dtype fp16 --providers warp_gemm,torch \
    --json "$out/r2_replanned.json" 2>&1 | tail -n 8
  ;;
esac
