#!/usr/bin/env bash
# Run the GPU-marked tests on a CUDA machine in N kernel-disjoint shards at once (cold CUDA kernel
# compiles dominate: ~30-60 s each). Usage: bash scripts/gpu_tests.sh [N] [pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-16}; shift || true
out=${OUT:-/tmp}
pids=()
for i in $(seq 0 $((n - 1))); do
  WARP_GEMM_SHARD="$i/$n" python3 -m pytest -q -p no:cacheprovider -m gpu "$@" tests \
    > "$out/gpu_shard_$i.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
# Summaries: the last line of each shard, then the failures.
for i in $(seq 0 $((n - 1))); do echo "shard $i: $(tail -n 1 "$out/gpu_shard_$i.log")"; done
grep -h "^FAILED\|^ERROR" "$out"/gpu_shard_*.log | head -40
python3 - "$out" "$n" <<'PY'
import re, sys, glob
tot = {}
for f in glob.glob(f"{sys.argv[1]}/gpu_shard_*.log"):
    last = open(f).read().strip().splitlines()[-1:] or [""]
    for num, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|error|errors)", last[0]):
        tot[word] = tot.get(word, 0) + int(num)
print("GPU total:", ", ".join(f"{v} {k}" for k, v in sorted(tot.items())))
PY
exit $status
