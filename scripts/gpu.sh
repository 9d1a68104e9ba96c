#!/usr/bin/env bash
# Tasks for a CUDA machine, run from anywhere in the repository with warp_gemm importable (installed, or
# PYTHONPATH set); outputs go under $OUT (default /tmp).
#
#   bash scripts/gpu.sh suite [N] [pytest args...]    # the GPU-marked tests on N processes (default 16)
#   bash scripts/gpu.sh bench [TABLE...]              # the runner on the published tables (default: all of them)
#   bash scripts/gpu.sh check                         # precompile, then warp-gemm check --device cuda --shapes odd
#   bash scripts/gpu.sh stress [BEFORE] [AFTER] [P] [init|lazy]   # eight threads sharing kernels, cold cache
#
# suite: N shards of tests/conftest.py (tests that build the same kernels stay in one shard), balanced on the seconds
#   per shard key in tests/gpu_times.json and started longest first, GPU_TEST_JOBS at once (default 16); with
#   pytest-timeout each test is limited to GPU_TEST_TIMEOUT s (default 300: a hung test dumps every thread's stack and
#   ends its shard). GPU_SHARDS="3 17" runs only these shards (a re-run), GPU_TEST_LOGS=DIR keeps the shard logs
#   (default $OUT). The seconds each key took go to $OUT/gpu_times.json (copy it over tests/gpu_times.json after a
#   whole run). Test files or folders among the arguments replace tests/.
# bench: TABLE is one of 16bit, 32-64bit, small, gemv, targets, host -- the folders benchmarks/results/h100-<TABLE>/
#   (targets: the issues' target rows).
#   Each table's kernels are first built in parallel processes (benchmarks/warm_cache.py), then timed by
#   benchmarks/run.py against cuBLAS; JSON per table and dtype group in $OUT/bench_<TABLE>*.json.
# check: every dtype x layout x the odd-shape matrix, warp_gemm and the Triton reference against float64
#   (556 cases; 448 kernels built first in 5-6 min on 16 cores). CHECK_S bounds the check (default 400 s).
# stress: BEFORE runs of the worker with warp_gemm's first-load lock off (benchmarks/probes/threads_before_fix.py),
#   AFTER runs with it on (tests/workers/shared_kernels.py), P at a time, each a fresh process with an empty Warp
#   kernel cache; mode init (warp_gemm.init first) or lazy. docs/reliability.md#threads has the counts.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
task=${1:-}
shift || true

suite() {
  local n=${1:-16}
  shift || true
  local logs=${GPU_TEST_LOGS:-$out}
  mkdir -p "$logs"
  local shards=${GPU_SHARDS:-$(seq 0 $((n - 1)))}
  local times
  times=$(mktemp -d)
  export WG_N=$n WG_OUT=$logs WG_LIMIT="" WARP_GEMM_GPU_TIMES_OUT=$times
  export WARP_GEMM_TEST_SEED=${WARP_GEMM_TEST_SEED:-$RANDOM}  # one seed for every shard (printed on failure)
  python3 -c "import pytest_timeout" 2>/dev/null && WG_LIMIT="--timeout ${GPU_TEST_TIMEOUT:-300} --timeout-method thread"
  run_shard() {
    # the whole tests/ folder unless the arguments name test files or folders themselves
    local target=tests a
    for a in "${@:2}"; do [ -e "${a%%::*}" ] && target=""; done
    WARP_GEMM_SHARD="$1/$WG_N" python3 -m pytest -q -p no:cacheprovider -m gpu $WG_LIMIT "${@:2}" $target \
      > "$WG_OUT/gpu_shard_$1.log" 2>&1
    local rc=$?
    [ $rc -eq 5 ] && rc=0  # a shard that drew no GPU test (few files, many shards)
    echo "shard $1 done: $(tail -n 1 "$WG_OUT/gpu_shard_$1.log")"  # as each ends: a cut run says how far it got
    return $rc
  }
  export -f run_shard
  local status=0
  printf '%s\n' $shards | xargs -P "${GPU_TEST_JOBS:-$n}" -I{} bash -c 'run_shard "$@"' _ {} "$@" || status=1
  local i
  for i in $shards; do echo "shard $i: $(tail -n 1 "$logs/gpu_shard_$i.log")"; done
  grep -h "^FAILED\|^ERROR\|Timeout (0:" "$logs"/gpu_shard_*.log | head -40
  python3 - "$logs" "$times" "$out/gpu_times.json" $shards <<'PY'
import glob, json, re, sys
secs = {}
for f in glob.glob(sys.argv[2] + "/times_*.json"):
    for k, v in json.load(open(f)).items():
        secs[k] = round(secs.get(k, 0.0) + v, 1)
json.dump(dict(sorted(secs.items(), key=lambda kv: (-kv[1], kv[0]))), open(sys.argv[3], "w"), indent=0)
print(f"{len(secs)} shard keys, {sum(secs.values()):.0f} s of tests; longest:",
      ", ".join(f"{k} {v:.0f} s" for k, v in sorted(secs.items(), key=lambda kv: -kv[1])[:3]))
tot = {}
for i in sys.argv[4:]:
    lines = open(f"{sys.argv[1]}/gpu_shard_{i}.log").read().strip().splitlines()
    for num, word in re.findall(r"(\d+) (passed|failed|skipped|deselected|error|errors|xfailed|xpassed)",
                                (lines or [""])[-1]):
        tot[word] = tot.get(word, 0) + int(num)
print("GPU total:", ", ".join(f"{v} {k}" for k, v in sorted(tot.items())))
PY
  return $status
}

# The published tables: "dtypes|shapes" per runner call (docs/benchmarks.md).
S16_SQ="512x512x512,500x500x500,1000x1000x1000,1536x1536x1536,4000x4000x4000,4096x4096x4096,8000x8000x8000"
S16_SQ="$S16_SQ,8192x8192x8192,4095x4095x4095,4097x4097x4097,4099x4099x4099"
S16_RECT="1023x1025x1027,127x4099x1031,2048x1024x1024,256x2048x2048,512x1024x1024,16x8192x8192"
S16_GEMV="1x4096x4096,1x8192x8192,4x1x4096x4096,1x24576x2048"
S16_BATCH="64x256x256x256,4096x32x32x32"
TABLE_16bit=("fp16,bf16|$S16_SQ,$S16_RECT,$S16_GEMV,$S16_BATCH")
TABLE_32_64bit=("tf32|4096x4096x4096,4095x4095x4095,2048x2048x2048,1023x1025x1027,1000x1000x1000"
  "fp32|4096x4096x4096,4095x4095x4095,8192x8192x8192,1000x1000x1000,10000x16x16x16"
  "fp64|4096x4096x4096,1000x1000x1000,10000x16x16x16")
TABLE_small=("fp16,bf16|32x32x32,64x64x64,96x96x96,128x128x128,33x129x65,100x200x300,64x64x1024,128x128x1024,128x256x256,48x80x4000,256x128x64,255x255x255,200x200x200")
# The issues' target rows (Hopper, compile-time / fp32 / fp64): NN, and B = W.T where an entry ends in "|nt".
TABLE_targets=("fp16,bf16|4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1024x1024x16384,128x128x65536,1000x1000x1000"
  "fp16,bf16|4096x4096x4096,8192x8192x8192,333x4096x4096|nt"
  "tf32|4096x4096x4096,8192x8192x8192,4095x4095x4095,1000x1000x1000"
  "fp32|4096x4096x4096,1000x1000x1000"
  "fp64|4096x4096x4096,1000x1000x1000")
TABLE_gemv=("fp16|1x4096x1024,1x16384x1024,1x4096x16384,1x32768x4096,1x65536x512,1x24576x2048,1x4096x4096")

bench_table() {
  local table=$1 var entry dt shapes i=0
  if [ "$table" = host ]; then
    python3 benchmarks/host_loop.py --out "$out/bench_host.json" > "$out/bench_host.txt" 2>&1
    tail -n 4 "$out/bench_host.txt"
    return
  fi
  var="TABLE_${table//-/_}"
  declare -p "$var" > /dev/null 2>&1 || { echo "gpu.sh bench: no table '$table' (16bit, 32-64bit, small, gemv, targets, host)"; return 2; }
  var="$var[@]"
  for entry in "${!var}"; do  # kernels first, every runner call's in parallel processes
    shapes=${entry#*|}
    python3 benchmarks/warm_cache.py --shapes "${shapes%%|*}" --dtype "${entry%%|*}" -j 16 >> "$out/warm_$table.txt" 2>&1
  done
  grep FAILED "$out/warm_$table.txt" | head -5
  for entry in "${!var}"; do  # "dtypes|shapes" or "dtypes|shapes|layout" (nt: B = W.T)
    dt=${entry%%|*}; shapes=${entry#*|}; layout=nn; i=$((i + 1))
    if [[ $shapes == *"|"* ]]; then layout=${shapes#*|}; shapes=${shapes%%|*}; fi
    python3 benchmarks/run.py --shapes "$shapes" --dtype "$dt" --providers warp_gemm,torch --layout "$layout" \
      --json "$out/bench_${table}_$i.json" > "$out/bench_${table}_$i.txt" 2>&1
    sed -n '/# summary/,$p' "$out/bench_${table}_$i.txt" | grep -v "^$"
  done
}

case "$task" in
suite)
  suite "$@"
  ;;
bench)
  tables=("$@")
  [ ${#tables[@]} -eq 0 ] && tables=(16bit 32-64bit small gemv host)
  status=0
  for t in "${tables[@]}"; do bench_table "$t" || status=1; done
  exit $status
  ;;
check)
  python3 -m warp_gemm precompile --arch '' --dtype fp16,bf16,fp32,tf32,fp64 --workers 16 > "$out/precompile.txt" 2>&1
  tail -n 2 "$out/precompile.txt"
  timeout "${CHECK_S:-400}" python3 -m warp_gemm check --device cuda --shapes odd --json "$out/check_odd.json" \
    > "$out/check_odd.txt" 2>&1
  rc=$?
  echo "check exit $rc"; tail -n 3 "$out/check_odd.txt"
  exit $rc
  ;;
stress)
  before=${1:-3}; after=${2:-24}; par=${3:-8}; mode=${4:-init}
  sout=$out/threads; mkdir -p "$sout"
  run() {  # kind index
    local kind=$1 i=$2 cache; cache=$(mktemp -d)
    local script=tests/workers/shared_kernels.py
    [ "$kind" = before ] && script=benchmarks/probes/threads_before_fix.py
    WARP_CACHE_PATH=$cache timeout 600 python3 "$script" cuda:0 "$mode" > "$sout/$kind-$i.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ] && grep -q '^RESULT' "$sout/$kind-$i.log" && python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).read().split('RESULT ')[-1]); sys.exit(0 if all(x=='ok' for x in r['results']) else 1)" "$sout/$kind-$i.log"; then
      echo "$kind $i ok"
    else
      echo "$kind $i FAIL rc=$rc: $(grep -o 'Warp CUDA error[^(]*\|RuntimeError[^\\]*' "$sout/$kind-$i.log" | head -1 | cut -c1-150)"
    fi
    rm -rf "$cache"
  }
  export -f run; export sout mode
  { for i in $(seq 1 "$before"); do echo "before $i"; done; for i in $(seq 1 "$after"); do echo "after $i"; done; } |
    xargs -P "$par" -n 2 bash -c 'run "$0" "$1"' | tee "$sout/summary.txt"
  echo "BEFORE: $(grep -c '^before .* ok' "$sout/summary.txt") ok, $(grep -c '^before .*FAIL' "$sout/summary.txt") failed of $before"
  echo "AFTER:  $(grep -c '^after .* ok' "$sout/summary.txt") ok, $(grep -c '^after .*FAIL' "$sout/summary.txt") failed of $after"
  ;;
*)
  sed -n '2,8p' "$0"
  exit 2
  ;;
esac
