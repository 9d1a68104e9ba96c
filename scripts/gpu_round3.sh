#!/usr/bin/env bash
# Round-3 device check in one command (< 6 minutes, Warp staged): the Warp-only thread-race probes, the
# GPU tests this round's fixes touch (tile_gemm_func block_dim, split-pipe layouts, concurrency incl.
# repeated eight-thread cold-cache runs) and 512^3 fp16 against cuBLAS. Usage: bash scripts/gpu_round3.sh
set -uo pipefail
cd "$(dirname "$0")/.."
top=${OUT:-/tmp}
out=$top/r3; mkdir -p "$out"
export PYTHONUNBUFFERED=1
T=${ROUND3_S:-290}
probe() {  # mode index
  local c; c=$(mktemp -d)
  WARP_CACHE_PATH=$c timeout 120 python3 benchmarks/probes/warp_thread_races.py "$1" > "$out/probe_$1_$2.txt" 2>&1
  echo "probe $1 $2 rc=$? $(grep -o '"errors": .*' "$out/probe_$1_$2.txt" | cut -c1-200)"
}
pt() {  # name, pytest args...
  local name=$1; shift
  timeout "$T" python3 -m pytest -q -p no:cacheprovider -m gpu "$@" > "$out/pt_$name.txt" 2>&1
  echo "pytest $name rc=$?: $(tail -n 1 "$out/pt_$name.txt")"
}
{
  for i in 1 2 3; do probe load "$i" & probe context "$i" & done
  for i in 0 1 2; do WARP_GEMM_SHARD=$i/3 pt tile_func_$i tests/test_tile_func.py & done
  for i in 0 1; do WARP_GEMM_SHARD=$i/2 pt splitpipe_$i tests/test_small_skinny.py -k split_pipe_composition & done
  pt concurrency tests/test_concurrency.py &
  for i in 1 2 3; do pt eight_$i tests/test_concurrency.py -k eight_threads_cold_cache_cuda & done
  timeout "$T" python3 benchmarks/run.py --shapes 512x512x512,1024x1024x1024 --dtype fp16 --providers warp_gemm,torch \
    --json "$out/r3_512.json" > "$out/r3_512.txt" 2>&1 &
  wait
} > "$out/summary.txt" 2>&1
sort "$out/summary.txt"
grep -h "^FAILED\|^ERROR\|XPASS" "$out"/pt_*.txt | head -20
grep -h "worker exited" "$out"/pt_*.txt | head -5
tail -n 8 "$out/r3_512.txt"
tar czf "$top/r3.tgz" -C "$top" r3 && rm -rf "$out"
