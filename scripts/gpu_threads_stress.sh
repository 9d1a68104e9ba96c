#!/usr/bin/env bash
# Issue 14 on the GPU: the shared-kernel 8-thread worker with warp_gemm's first-load lock off (the code
# before the fix; BEFORE runs) and on (AFTER runs), each run a fresh process with an empty Warp kernel
# cache; P runs at a time. Usage: bash scripts/gpu_threads_stress.sh BEFORE AFTER [P] [init|lazy]
set -uo pipefail
cd "$(dirname "$0")/.."
before=${1:-3}; after=${2:-24}; par=${3:-8}; mode=${4:-init}
out=${OUT:-/tmp}/threads; mkdir -p "$out"
run() {  # kind index
  local kind=$1 i=$2 cache; cache=$(mktemp -d)
  local script=tests/workers/shared_kernels.py
  [ "$kind" = before ] && script=benchmarks/probes/threads_before_fix.py
  WARP_CACHE_PATH=$cache timeout 600 python3 "$script" cuda:0 "$mode" > "$out/$kind-$i.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -q '^RESULT' "$out/$kind-$i.log" && \
     python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().split('RESULT ')[-1]); sys.exit(0 if all(x=='ok' for x in r['results']) else 1)" "$out/$kind-$i.log"; then
    echo "$kind $i ok"
  else
    echo "$kind $i FAIL rc=$rc: $(grep -o 'Warp CUDA error[^(]*\|RuntimeError[^\\]*' "$out/$kind-$i.log" | head -1 | cut -c1-150)"
  fi
  rm -rf "$cache"
}
export -f run; export out mode
{ for i in $(seq 1 "$before"); do echo "before $i"; done; for i in $(seq 1 "$after"); do echo "after $i"; done; } |
  xargs -P "$par" -n 2 bash -c 'run "$0" "$1"' | tee "$out/summary.txt"
echo "BEFORE: $(grep -c '^before .* ok' "$out/summary.txt") ok, $(grep -c '^before .*FAIL' "$out/summary.txt") failed of $before"
echo "AFTER:  $(grep -c '^after .* ok' "$out/summary.txt") ok, $(grep -c '^after .*FAIL' "$out/summary.txt") failed of $after"
