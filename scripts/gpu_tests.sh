#!/usr/bin/env bash
# Run the GPU-marked tests on a CUDA machine in N kernel-disjoint shards (cold CUDA kernel compiles
# dominate: ~30-60 s each), at most JOBS at once (default: all N).
#
#   bash scripts/gpu_tests.sh [N] [pytest args...]
#   GPU_TEST_JOBS=16 bash scripts/gpu_tests.sh 32            # 32 shards, 16 at a time
#   GPU_SHARDS="3 17" bash scripts/gpu_tests.sh 32           # only these shards (a re-run)
#   GPU_TEST_LOGS=/tmp/suite bash scripts/gpu_tests.sh 16    # where the shard logs go (default $OUT or /tmp)
#   bash scripts/gpu_tests.sh 4 tests/test_launch_cache.py    # only these files (else all of tests/)
#
# Shards are balanced by count of kernel groups, not time: on the H100 host one of 16 shards took
# 1.5-7 minutes. More shards than cores with a pool keeps all cores compiling until the end.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-16}; shift || true
out=${GPU_TEST_LOGS:-${OUT:-/tmp}}
mkdir -p "$out"
jobs=${GPU_TEST_JOBS:-$n}
shards=${GPU_SHARDS:-$(seq 0 $((n - 1)))}
export WG_N=$n WG_OUT=$out
run_shard() {
  # the whole tests/ folder unless the arguments name test files or folders themselves
  local target=tests a
  for a in "${@:2}"; do [ -e "${a%%::*}" ] && target=""; done
  WARP_GEMM_SHARD="$1/$WG_N" python3 -m pytest -q -p no:cacheprovider -m gpu "${@:2}" $target \
    > "$WG_OUT/gpu_shard_$1.log" 2>&1
  local rc=$?
  [ $rc -eq 5 ] && rc=0  # a shard that drew no GPU test (few files, many shards)
  # as each shard ends (a run cut by a time limit still says how far it got)
  echo "shard $1 done: $(tail -n 1 "$WG_OUT/gpu_shard_$1.log")"
  return $rc
}
export -f run_shard
status=0
printf '%s\n' $shards | xargs -P "$jobs" -I{} bash -c 'run_shard "$@"' _ {} "$@" || status=1
# Summaries: the last line of each shard, then the failures.
for i in $shards; do echo "shard $i: $(tail -n 1 "$out/gpu_shard_$i.log")"; done
grep -h "^FAILED\|^ERROR" "$out"/gpu_shard_*.log | head -40
python3 - "$out" $shards <<'PY'
import re, sys
tot = {}
for i in sys.argv[2:]:
    lines = open(f"{sys.argv[1]}/gpu_shard_{i}.log").read().strip().splitlines()
    for num, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|error|errors|xfailed|xpassed)",
                                (lines or [""])[-1]):
        tot[word] = tot.get(word, 0) + int(num)
print("GPU total:", ", ".join(f"{v} {k}" for k, v in sorted(tot.items())))
PY
exit $status
