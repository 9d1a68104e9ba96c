#!/usr/bin/env bash
# Round-4 device work (run from the repo root, Warp staged), each mode one command of < 10 minutes:
#   bash scripts/gpu_round4.sh bench   # kernel cache filled in parallel, then the runner's small/odd/large
#                                      # fp16 table, fp32/fp64 batched small, the host loop
#   bash scripts/gpu_round4.sh suite A|B   # the GPU suite in 32 shards: A = shards 0-15, B = 16-31
#   bash scripts/gpu_round4.sh check   # precompile, then warp-gemm check --device cuda --shapes odd
#   bash scripts/gpu_round4.sh thirds 1|2|3   # the GPU suite in 64 shards, a third per call, 16 jobs from a pool
#   SETS="23 24" bash scripts/gpu_round4.sh probe   # probe sets of benchmarks/probes/round6.py (warm, then time)
#   bash scripts/gpu_round4.sh retune  # the tuner on the medium 16-bit grids, then the runner on them (~6 min)
#   bash scripts/gpu_round4.sh ncu64   # Nsight Compute on one launch of fp16 64 x 256^3: mma.sync tile, tile_matmul
#   bash scripts/gpu_round4.sh r15a    # round 14's opt-in fused GEMV on the GPU (its tests, probe set 28), then ncu64
#   bash scripts/gpu_round4.sh r18     # round 17: GEMV row groups (tests, probe 33), float32 family rows
#   bash scripts/gpu_round4.sh r19     # round 17: the staged mma.sync epilogue (tests, probe 34)
#   bash scripts/gpu_round4.sh r19b    # round 17: the runner on the staged epilogue, the new bucket and GEMV
#   bash scripts/gpu_round4.sh r28     # round 18: fused GEMV default against the two launches on other one-matrix shapes
#   bash scripts/gpu_round4.sh r22     # round 18: the fused GEMV default for one matrix (tests, runner fp16/bf16)
#   bash scripts/gpu_round4.sh r21     # round 18: the runner on the fused GEMV finish against the default (after r20)
#   bash scripts/gpu_round4.sh r20     # prepared in round 17: the fused GEMV finish with row groups (tests, probe 36)
#   bash scripts/gpu_round4.sh ncu17   # round 17: Nsight Compute source counters on fp16 64 x 256^3 (two mma.sync tiles)
#   bash scripts/gpu_round4.sh r16     # round 15's persistent mma.sync/SIMT blocks (tests, probe 32), then probe 31
#   bash scripts/gpu_round4.sh families # round 15's family tuner on issue 18's shapes, the runner with and without it
#   bash scripts/gpu_round4.sh r15t    # round 15's fp16/bf16 NN pipe table: warp-gemm check inside its buckets, GPU tune tests
#   bash scripts/gpu_round4.sh r15b    # round 14's opt-in stream-K on the GPU (its tests beside probe set 29's compiles)
#   bash scripts/gpu_round4.sh probe5  # round 5: one-wave tile shapes for odd shapes (small_waves SW_SET=3),
#                                      # where odd shapes' time goes (diag_plans), staging kernels (staging.py)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
export PYTHONUNBUFFERED=1

# tests_then_probe NAME SET JOBS TIME_S TAIL PYTEST_ARGS...: the GPU tests (log NAME) beside the compiles of probe set
# SET (JOBS processes), then the set timed (at most TIME_S seconds) and the last TAIL lines of its table printed.
tests_then_probe() {
  local name=$1 set=$2 jobs=$3 time_s=$4 tail_n=$5
  shift 5
  python3 -m pytest -q -p no:cacheprovider -m gpu "$@" > "$out/$name.txt" 2>&1 &
  R6_SET=$set python3 benchmarks/probes/round6.py warm -j "$jobs" > "$out/r${set}w.txt" 2>&1
  wait; tail -n 3 "$out/$name.txt"; grep -E "FAILED|Error" "$out/$name.txt" | head -5
  R6_SET=$set timeout "$time_s" python3 benchmarks/probes/round6.py time --json "$out/r${set}p.json" \
    > "$out/r${set}p.txt" 2>&1
  tail -n "$tail_n" "$out/r${set}p.txt"
}
case "${1:-bench}" in
bench)
  S16="512x512x512,1000x1000x1000,1023x1025x1027,127x4099x1031,4095x4095x4095,4096x4096x4096,16x8192x8192,1x4096x4096,64x256x256x256,4096x32x32x32"
  python3 benchmarks/warm_cache.py --shapes "$S16" --dtype fp16 -j 12 > "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "10000x16x16x16,1000x16x16x16,64x64x64" --dtype fp32,fp64 -j 4 >> "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "256x256x256" --dtype fp16 -j 1 >> "$out/warm.txt" 2>&1 &
  wait; grep -c ok "$out/warm.txt"; grep FAILED "$out/warm.txt" | head -5
  python3 benchmarks/run.py --shapes "$S16" --dtype fp16 --providers warp_gemm,torch --json "$out/r4_fp16.json" > "$out/r4_fp16.txt" 2>&1
  python3 benchmarks/run.py --shapes "10000x16x16x16" --dtype fp32,fp64 --providers warp_gemm,torch --json "$out/r4_small.json" > "$out/r4_small.txt" 2>&1
  python3 benchmarks/host_loop.py --out "$out/host_loop.json" > "$out/host_loop.txt" 2>&1
  for f in r4_fp16 r4_small; do sed -n '/# summary/,$p' "$out/$f.txt" | grep -v "^$"; done; tail -n 5 "$out/host_loop.txt"
  ;;
final)  # the runner's tables after this round's changes (file names carry TAG, default r5f)
  T=${TAG:-r5f}
  S16="512x512x512,500x500x500,1000x1000x1000,1023x1025x1027,127x4099x1031,1536x1536x1536,4095x4095x4095,4097x4097x4097,4099x4099x4099,4096x4096x4096,2048x1024x1024,256x2048x2048,16x8192x8192,1x4096x4096,1x8192x8192,64x256x256x256,4096x32x32x32"
  python3 benchmarks/warm_cache.py --shapes "$S16" --dtype fp16 -j 12 > "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "4095x4095x4095,1023x1025x1027,1000x1000x1000" --dtype tf32 -j 3 >> "$out/warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "10000x16x16x16,1000x16x16x16,64x64x64" --dtype fp32 -j 1 >> "$out/warm.txt" 2>&1 &
  if [ -n "${BIG:-}" ]; then  # issue 16's large squares: bf16, tf32, exact fp32, fp64 (and fp16 8192^3 below)
    python3 benchmarks/warm_cache.py --shapes "4096x4096x4096" --dtype bf16,tf32,fp32,fp64 -j 4 >> "$out/warm.txt" 2>&1 &
    python3 benchmarks/warm_cache.py --shapes "4095x4095x4095" --dtype fp32 -j 1 >> "$out/warm.txt" 2>&1 &
  fi
  wait; grep -c ": ok" "$out/warm.txt"; grep FAILED "$out/warm.txt" | head -5
  if [ -n "${BIG:-}" ]; then  # first: issue 16's table, so that a run cut by the time limit still has it
    python3 benchmarks/run.py --shapes "4096x4096x4096,8192x8192x8192" --dtype fp16,bf16 --providers warp_gemm,torch --json "$out/${T}_big16.json" > "$out/${T}_big16.txt" 2>&1
    python3 benchmarks/run.py --shapes "4096x4096x4096" --dtype tf32,fp32,fp64 --providers warp_gemm,torch --json "$out/${T}_big32.json" > "$out/${T}_big32.txt" 2>&1
  fi
  python3 benchmarks/run.py --shapes "$S16" --dtype fp16 --providers warp_gemm,torch --json "$out/${T}_fp16.json" > "$out/${T}_fp16.txt" 2>&1
  python3 benchmarks/run.py --shapes "4095x4095x4095,1023x1025x1027,1000x1000x1000" --dtype tf32 --providers warp_gemm,torch --json "$out/${T}_tf32.json" > "$out/${T}_tf32.txt" 2>&1
  if [ -n "${BIG:-}" ]; then
    python3 benchmarks/run.py --shapes "4095x4095x4095" --dtype fp32 --providers warp_gemm,torch --json "$out/${T}_f32odd.json" > "$out/${T}_f32odd.txt" 2>&1
  fi
  python3 benchmarks/host_loop.py --out "$out/${T}_host_loop.json" > "$out/${T}_host_loop.txt" 2>&1
  for f in ${T}_big16 ${T}_big32 ${T}_fp16 ${T}_tf32 ${T}_f32odd; do [ -f "$out/$f.txt" ] && sed -n '/# summary/,$p' "$out/$f.txt" | grep -v "^$"; done
  tail -n 4 "$out/${T}_host_loop.txt"
  (cd "$out" && tar czf "${T}.tgz" ${T}_* warm.txt && rm -f ${T}_*.txt ${T}_*.json warm.txt)  # $OUT: 8 files back
  ;;
retune)  # round 14's question (results/round14/README.md): the medium 16-bit grids still run tile_matmul defaults, and
  # no one mma.sync tile beat them everywhere in probe set 27. The pipelined tuner (its 16-bit candidates include the
  # mma.sync tiles) times every candidate per shape, NN, and writes its winners to the user cache; the runner then
  # times the same shapes, which now take those winners, beside cuBLAS. Compare rt_fp16.txt with round 13's r13f_fp16
  # (the same shapes on the built-in defaults); merge the '|pipe' winners that lead into the shipped table.
  SM="1000x1000x1000,1023x1025x1027,1536x1536x1536,2048x2048x2048,2048x1024x1024,256x2048x2048,127x4099x1031,512x1024x1024,64x256x256x256"
  timeout "${TUNE_S:-400}" python3 -m warp_gemm tune --family pipelined --dtype fp16,bf16 --shapes "$SM" \
    --workers 16 --rows "$out/rt_rows.jsonl" > "$out/rt_tune.txt" 2>&1
  echo "tune exit $?"; tail -n 30 "$out/rt_tune.txt"
  python3 -c "import warp as wp; from warp_gemm.config import tables; print(tables.user_cache_path(wp.get_device('cuda')))" \
    | tail -n 1 | xargs -I{} cp {} "$out/rt_table.json"
  python3 benchmarks/run.py --shapes "$SM" --dtype fp16 --providers warp_gemm,torch --json "$out/rt_fp16.json" \
    > "$out/rt_fp16.txt" 2>&1
  sed -n '/# summary/,$p' "$out/rt_fp16.txt" | grep -v "^$"
  (cd "$out" && tar czf rt.tgz rt_* && rm -f rt_tune.txt rt_fp16.txt rt_fp16.json)  # rt_rows.jsonl, rt_table.json stay
  ;;
r15a)  # round 14 left two things for the device (benchmarks/results/round14/README.md, docs/performance.md "Round 14"):
  # the fused bands GEMV (gemv.BANDS_FUSED, never run on a GPU) -- its GPU test beside probe set 28's compiles, then
  # the probe timed (default against fused, float64-checked) -- and Nsight Compute on 64 x 256^3 (ncu64). ~6 min.
  tests_then_probe r15_fused_tests 28 8 240 12 tests/test_gemv.py -k "fused_bands_gpu or gemv_gpu"
  timeout 200 bash "$0" ncu64
  ;;
r15b)  # round 14's stream-K (PipeConfig /kN, never run on a GPU): its GPU tests beside probe set 29's compiles, then the
  # probe timed (the default, each tile one per block and stream-K, float64-checked). ~7 min.
  tests_then_probe r15_sk_tests 29 12 300 45 tests/test_pipelined.py -k "stream_k"
  ;;
r15t)  # round 15 shipped float16/bfloat16 NN '|pipe' groups (mma.sync tiles for 8 medium buckets): warp-gemm check on
  # shapes drawn inside every new bucket (its edges, odd sides, batches), NN and TN, both dtypes, 16 processes
  # (one cold compile per process at a time), then the GPU tests of the tuner and the pipelined family.
  B10="513x1000x777,1024x1024x1024,600x1023x1001,1023x1025x1027,777x2047x1500"
  B11="2048x1024x1024,1025x513x999,1536x1536x1536,2048x2048x2048,1025x1025x1025,1999x1111x2000"
  B14="64x256x256x256,8193x129x255,33x255x200x131,16384x256x256"
  BS="127x4099x1031,65x8000x1100,256x2048x2048,129x1025x1025,512x1024x1024,257x513x513"
  i=0
  for d in float16 bfloat16; do for S in "$B10" "$B11" "$B14" "$BS"; do for L in nn tn; do
    i=$((i + 1))
    timeout "${CHECK_S:-420}" python3 -m warp_gemm check --device cuda --dtype $d --layouts $L --shapes "$S" \
      --json /tmp/r15t_$i.json > /tmp/r15t_$i.txt 2>&1 &
  done; done; done
  wait
  tail -q -n 2 /tmp/r15t_*.txt | grep -v "^$" > "$out/r15t_check.txt"; cat "$out/r15t_check.txt"
  (cd /tmp && tar czf "$out/r15t_check.tgz" r15t_*)
  timeout "${TEST_S:-240}" python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_tune.py > "$out/r15t_tune.txt" 2>&1
  tail -n 3 "$out/r15t_tune.txt"
  ;;
r18)  # round 17: the GEMV bands with row groups (their GPU tests beside probe set 33's compiles, then set 33 timed:
  # row groups 1-16, and round 16's float32 family buckets beside the rules' families), then Nsight Compute on one
  # launch of fp16 64 x 256^3 for the two best mma.sync tiles of probe set 32 (SourceCounters: where the ~19 us of a
  # warm launch go, where the arithmetic needs ~4 and cuBLAS takes 11.3 cold)
  tests_then_probe r18_tests 33 15 "${PROBE_S:-300}" 40 tests/test_gemv.py -k "band_groups or gemv_gpu"
  ;;
r19)  # round 17: the mma.sync epilogue through shared memory (pipelined.STAGED_STORE): its GPU tests and the mma.sync
  # ones beside probe set 34's compiles, then set 34 timed (staged against unstaged, staged tiles for 64 x 256^3)
  tests_then_probe r19_tests 34 15 "${PROBE_S:-330}" 60 tests/test_pipelined.py -k "staged or mma_forced"
  ;;
r19b)  # round 17, after r19: the runner on the staged epilogue and the moved 64 x 256^3 bucket (fp16 and bf16), the
  # GEMV row groups, in one process per dtype, cuBLAS in the same run
  S19="64x256x256x256,1000x1000x1000,256x2048x2048,512x1024x1024,2048x1024x1024,1536x1536x1536,1023x1025x1027,\
4096x4096x4096,1x4096x4096,1x8192x8192,4096x32x32x32"
  python3 benchmarks/warm_cache.py --shapes "$S19" --dtype fp16,bf16 -j 15 > "$out/r19b_warm.txt" 2>&1
  grep -c ": ok" "$out/r19b_warm.txt"
  for d in fp16 bf16; do
    timeout 200 python3 benchmarks/run.py --shapes "$S19" --dtype $d --providers warp_gemm,torch \
      --json "$out/r19b_$d.json" > "$out/r19b_$d.txt" 2>&1
    sed -n '/# summary/,$p' "$out/r19b_$d.txt" | grep -v "^$"
  done
  ;;
r20)  # prepared in round 17, not yet run: the fused GEMV finish with row groups (its GPU tests beside probe set 36's
  # compiles, then set 36 timed)
  tests_then_probe r20_tests 36 15 "${PROBE_S:-300}" 30 tests/test_gemv.py -k "fused_bands_gpu or band_groups"
  ;;
r21)  # round 18, after r20 (same device session: set 36 compiled the fused kernels): the runner itself on the fused
  # GEMV finish against the default, fp16 1x4096^2 and 1x8192^2, cuBLAS in the same process each time
  for v in default "gemv.BANDS_FUSED=True gemv.BANDS_GROUPS=4 \
gemv.BANDS_FINISHERS=1" "gemv.BANDS_FUSED=True gemv.BANDS_GROUPS=8 gemv.BANDS_FINISHERS=1" "gemv.BANDS_FUSED=True \
gemv.BANDS_GROUPS=16 gemv.BANDS_FINISHERS=1" "gemv.BANDS_FUSED=True gemv.BANDS_GROUPS=8"; do
    [ "$v" = default ] && set -- || set -- $v
    echo "## $v"
    timeout 120 python3 benchmarks/probes/runner_with.py "$@" -- --shapes 1x4096x4096,1x8192x8192 --dtype fp16 \
      --providers warp_gemm,torch >> "$out/r21_runner.txt" 2>&1
    sed -n '/# summary/,$p' "$out/r21_runner.txt" | tail -n 5 | grep -v "^$"
  done
  ;;
r22)  # round 18: the fused GEMV default for one matrix (gemv.bands_choice) -- its GPU tests beside the compiles, then
  # the runner, fp16 and bf16, one matrix and a batch of 4, cuBLAS in the same run
  S22="1x4096x4096,1x8192x8192,4x1x4096x4096"
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gemv.py -k "bands" > "$out/r22_tests.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "$S22" --dtype fp16,bf16 -j 8 > "$out/r22_warm.txt" 2>&1
  wait; tail -n 3 "$out/r22_tests.txt"; grep -E "FAILED|Error" "$out/r22_tests.txt" | head -5
  for d in fp16 bf16; do
    timeout 100 python3 benchmarks/run.py --shapes "$S22" --dtype $d --providers warp_gemm,torch \
      --json "$out/r22_$d.json" > "$out/r22_$d.txt" 2>&1
    sed -n '/# summary/,$p' "$out/r22_$d.txt" | grep -v "^$"
  done
  ;;
r28)  # round 18: the fused GEMV default against the two launches on one-matrix shapes the probe did not time (narrow K,
  # long K, wide matrices whose column blocks outnumber the SMs, so one finisher each), the runner, cuBLAS in each run
  S28="1x4096x1024,1x16384x1024,1x4096x16384,1x32768x4096,1x65536x512,1x24576x2048,1x4096x4096"
  for v in "" "gemv.BANDS_FUSED_ONE=False" ""; do
    echo "## ${v:-default}"
    timeout 200 python3 benchmarks/probes/runner_with.py $v -- --shapes "$S28" --dtype fp16 --providers warp_gemm,torch \
      > "$out/r28.txt" 2>&1
    cat "$out/r28.txt" >> "$out/r28_runner.txt"
    sed -n '/# summary/,$p' "$out/r28.txt" | grep warp_gemm
    sed -n '/# summary/,$p' "$out/r28.txt" | grep torch
  done
  rm -f "$out/r28.txt"
  ;;
ncu17)  # round 17, after r18 (same device session, kernels cached): Nsight Compute on fp16 64 x 256^3
  M6=$(cat benchmarks/probes/ncu_metrics.txt)
  for cfg in pipe/128x128x64/s3/b128/o1/mma pipe/128x128x32/s4/b128/o2/mma; do
    n=$(echo "$cfg" | cut -d/ -f2-3 | tr '/' '_')
    timeout 150 ncu --clock-control none -k regex:wg_pipe --launch-skip 2 --launch-count 1 --section SourceCounters \
      --section WarpStateStats --metrics "gpu__time_duration.sum,launch__registers_per_thread,$M6" -f \
      -o "$out/ncu17_$n" python3 benchmarks/probes/ncu_one.py 64 256 256 256 "$cfg" > "$out/ncu17_$n.log" 2>&1
    ncu -i "$out/ncu17_$n.ncu-rep" --page source --print-source sass --csv > "$out/ncu17_sass_$n.csv" 2>&1 || true
    ncu -i "$out/ncu17_$n.ncu-rep" --page details > "$out/ncu17_det_$n.txt" 2>&1 || true
    grep -E "Duration|Registers Per|gpu__time_duration" "$out/ncu17_det_$n.txt" | head -4
  done
  (cd "$out" && tar czf ncu17.tgz ncu17_* && rm -f ncu17_*)
  ;;
r16)  # round 15's persistent mma.sync/SIMT blocks (PipeConfig /pN with /mma or /simt; never run on a GPU): their GPU tests
  # beside probe set 32's compiles, then set 32 timed (plain tiles against /p1 on 64 x 256^3, medium grids, 4096^3);
  # then probe set 31 (fewer, taller GEMV bands). ~8 min.
  tests_then_probe r16_persist_tests 32 16 300 50 tests/test_pipelined.py -k "persistent_own"
  R6_SET=31 python3 benchmarks/probes/round6.py warm -j 16 > "$out/r31w.txt" 2>&1
  R6_SET=31 timeout 200 python3 benchmarks/probes/round6.py time --json "$out/r31p.json" > "$out/r31p.txt" 2>&1
  tail -n 30 "$out/r31p.txt"
  ;;
r17)  # round 16: issue 18's family tuner put fp16 64^3 (one 128x128 tile) on the pipelined family at 7.3 us against
  # the tiled family's 20.7 (runner; PIPELINED_MIN_TILES = 4 sends 1-3 tiles to tiled). The candidate rule: 16-bit
  # products take the pipelined family from 1 tile. A copy of the repo with that rule (/tmp/alt) against HEAD:
  # warp-gemm check on the affected shapes (4 layouts, fp16 and bf16, 16 processes; fills the kernel cache), then
  # the runner on both, cuBLAS in each run. ~6 min.
  rm -rf /tmp/alt && mkdir /tmp/alt && cp -r warp_gemm /tmp/alt/ && sed -i \
    's/^PIPELINED_MIN_TILES = {"float16": 4, "bfloat16": 4,/PIPELINED_MIN_TILES = {"float16": 1, "bfloat16": 1,/' \
    /tmp/alt/warp_gemm/core/plan.py
  grep -n "^PIPELINED_MIN_TILES" /tmp/alt/warp_gemm/core/plan.py
  SA="32x32x32,64x64x64,96x96x96,128x128x128,33x129x65,100x200x300,64x64x1024,128x128x1024,128x256x256"
  SB="48x80x4000,256x128x64,17x17x17,255x255x255,200x200x200,4x64x64x64,3x100x60x70"
  i=0
  for d in float16 bfloat16; do for S in "$SA" "$SB"; do for L in nn tn nt tt; do
    i=$((i + 1))
    (cd /tmp/alt && PYTHONPATH=/tmp/alt:/tmp/warp-site timeout "${CHECK_S:-200}" python3 -m warp_gemm check \
      --device cuda --dtype $d --layouts $L --shapes "$S" --json /tmp/r17c_$i.json > /tmp/r17c_$i.txt 2>&1) &
    [ $((i % 16)) -eq 0 ] && wait
  done; done; done
  wait
  tail -q -n 2 /tmp/r17c_*.txt | grep -v "^$" > "$out/r17_check.txt"; grep -c . "$out/r17_check.txt"
  grep -i "fail\|error" "$out/r17_check.txt" | head -5; tail -n 2 "$out/r17_check.txt"
  (cd /tmp && tar czf "$out/r17_check.tgz" r17c_*)
  RS="$SA,48x80x4000,256x128x64,255x255x255,200x200x200"
  for v in head alt; do
    pp=$PWD; [ $v = alt ] && pp=/tmp/alt
    PYTHONPATH=$pp:/tmp/warp-site python3 benchmarks/run.py --shapes "$RS" --dtype fp16,bf16 --providers warp_gemm,torch \
      --json "$out/r17_$v.json" > "$out/r17_$v.txt" 2>&1
  done
  for v in head alt; do echo "== $v"; sed -n '/# summary/,$p' "$out/r17_$v.txt" | grep "warp_gemm\|torch" \
    | awk '{print $1, $2, $3, $4, $10}'; done
  ;;
r17b)  # r17's runner rows ran HEAD twice (benchmarks/run.py puts its own repo root first on sys.path): the patched
  # copy now carries benchmarks/ too. Kernels warmed in 16 processes (one call per shape, dtype and copy), then the
  # runner on HEAD and on the copy, cuBLAS in each. ~6 min on a fresh machine.
  rm -rf /tmp/alt && mkdir /tmp/alt && cp -r warp_gemm benchmarks /tmp/alt/ && sed -i \
    's/^PIPELINED_MIN_TILES = {"float16": 4, "bfloat16": 4,/PIPELINED_MIN_TILES = {"float16": 1, "bfloat16": 1,/' \
    /tmp/alt/warp_gemm/core/plan.py
  grep -n "^PIPELINED_MIN_TILES" /tmp/alt/warp_gemm/core/plan.py
  RS="32x32x32,64x64x64,96x96x96,128x128x128,33x129x65,100x200x300,64x64x1024,128x128x1024,128x256x256"
  RS="$RS,48x80x4000,256x128x64,255x255x255,200x200x200"
  for pp in $PWD /tmp/alt; do for d in float16 bfloat16; do for S in ${RS//,/ }; do echo "$pp $d $S"; done; done; done \
    | xargs -P 16 -L 1 bash -c 'cd $0 && PYTHONPATH=$0:/tmp/warp-site timeout 200 python3 -c "
import sys, torch, warp_gemm
m, n, k = map(int, sys.argv[2].split(\"x\")); dt = getattr(torch, sys.argv[1])
a = torch.randn(m, k, device=\"cuda\", dtype=dt); b = torch.randn(k, n, device=\"cuda\", dtype=dt)
warp_gemm.matmul(a, b); torch.cuda.synchronize()" $1 $2 || echo "warm failed $0 $1 $2"'
  echo "warm done"
  for v in head alt; do
    pp=$PWD; [ $v = alt ] && pp=/tmp/alt
    (cd $pp && PYTHONPATH=$pp:/tmp/warp-site python3 benchmarks/run.py --shapes "$RS" --dtype fp16,bf16 \
      --providers warp_gemm,torch --json "$out/r17b_$v.json" > "$out/r17b_$v.txt" 2>&1)
  done
  for v in head alt; do echo "== $v"; sed -n '/# summary/,$p' "$out/r17b_$v.txt" | grep "warp_gemm\|torch" \
    | awk '{print $1, $2, $3, $4, $10}'; done
  ;;
families)  # round 15's family tuner (never run on a GPU): its GPU test, then warp-gemm tune --family families on the
  # tune-family set (issue 18's small, batched, skinny and GEMV products), then the runner on those shapes with the
  # winners (user cache) and without (an empty cache dir), cuBLAS in both. Ship winners that lead with
  # benchmarks/ship_table.py fm_table.json --groups family. ~8 min.
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_tune.py > "$out/fm_test.txt" 2>&1; tail -n 2 "$out/fm_test.txt"
  timeout "${TUNE_S:-300}" python3 -m warp_gemm tune --family families --dtype fp16,fp32 --workers 16 \
    --rows "$out/fm_rows.jsonl" > "$out/fm_tune.txt" 2>&1
  echo "tune exit $?"; grep -A40 "^dtype" "$out/fm_tune.txt" | head -40
  python3 -c "import warp as wp; from warp_gemm.config import tables; print(tables.user_cache_path(wp.get_device('cuda')))" \
    | tail -n 1 | xargs -I{} cp {} "$out/fm_table.json"
  FS="4096x32x32x32,64x256x256x256,256x64x64x64,16x8192x8192,8x4096x4096,32x4096x4096,1x4096x4096,1x8192x8192,64x64x64,256x256x256,127x4099x1031,128x1024x1024"
  python3 benchmarks/run.py --shapes "$FS" --dtype fp16 --providers warp_gemm,torch --json "$out/fm_tuned.json" \
    > "$out/fm_tuned.txt" 2>&1
  mkdir -p /tmp/empty_cache; WARP_GEMM_CACHE_DIR=/tmp/empty_cache python3 benchmarks/run.py --shapes "$FS" --dtype fp16 \
    --providers warp_gemm,torch --json "$out/fm_default.json" > "$out/fm_default.txt" 2>&1
  for f in fm_default fm_tuned; do echo "== $f"; sed -n '/# summary/,$p' "$out/$f.txt" | grep warp_gemm | awk '{print $1, $4, $10}'; done
  (cd "$out" && tar czf fm.tgz fm_tune.txt fm_tuned.* fm_default.* && rm -f fm_tune.txt fm_tuned.* fm_default.*)
  ;;
ncu15)  # round 15: Nsight Compute (L2 flushed) on warp_gemm's and cuBLAS's fp16 1x4096x4096 GEMV and 64 x 256^3, and the
  # planner's pipelined kernel for round 15's tuned buckets (benchmarks/probes/ncu_round15.py)
  M6=$(cat benchmarks/probes/ncu_metrics.txt)
  ncu --clock-control none --profile-from-start off --metrics "gpu__time_duration.sum,launch__grid_size,\
launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_static,\
launch__shared_mem_per_block_dynamic,dram__bytes_read.sum,dram__bytes_write.sum,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,$M6" \
    python3 benchmarks/probes/ncu_round15.py > "$out/ncu15.txt" 2>&1
  grep -E "PLAN|^  [a-zA-Z_].*\(|gpu__time_duration|launch__grid_size|launch__block_size|registers_per|dram__|warps_active" \
    "$out/ncu15.txt" | cut -c1-150
  ;;
ncu64)  # issue 18's 64 x 256^3 (0.52x cuBLAS; ~20 us even by graph replay, where its 2.1 GFLOP need ~7 us at the mma.sync
  # kernel's large-problem rate per SM): where one launch's time goes, for the mma.sync 128x128x32 s3 o2 tile (26.0 us
  # cold, round 12) and the default tile_matmul 128x128x128 s2 b256 (28.7). Round 6 did this for tile_matmul only.
  # The 3rd launch of benchmarks/probes/ncu_one.py (the first two compile and warm). --clock-control none: METHOD.md.
  M6=$(cat benchmarks/probes/ncu_metrics.txt)
  for cfg in pipe/128x128x32/s3/b128/o2/mma pipe/128x128x128/s2/b256/o1; do
    n=$(echo "$cfg" | cut -d/ -f2-3 | tr '/' '_')
    ncu --clock-control none -k regex:wg_pipe --launch-skip 2 --launch-count 1 \
      --metrics "gpu__time_duration.sum,launch__registers_per_thread,launch__occupancy_limit_registers,$M6" \
      python3 benchmarks/probes/ncu_one.py 64 256 256 256 "$cfg" > "$out/ncu64_$n.txt" 2>&1
    ncu --clock-control none -k regex:wg_pipe --launch-skip 2 --launch-count 1 --section SourceCounters \
      --section WarpStateStats -f -o "$out/ncu64_$n" python3 benchmarks/probes/ncu_one.py 64 256 256 256 "$cfg" \
      > /dev/null 2>&1
    ncu -i "$out/ncu64_$n.ncu-rep" --page source --print-source sass --csv > "$out/ncu64_sass_$n.csv" 2>&1 || true
    grep -E "gpu__time_duration|inst_executed.sum |registers_per_thread" "$out/ncu64_$n.txt"
  done
  (cd "$out" && tar czf ncu64.tgz ncu64_* && rm -f ncu64_*)
  ;;
probe5)
  D5="fp16_4095,fp16_4096,fp16_1023odd,fp16_127odd,fp16_gemv"
  SW_SET=3 python3 benchmarks/probes/small_waves.py warm -j 12 > "$out/sw3_warm.txt" 2>&1 &
  python3 benchmarks/probes/diag_plans.py --warm --cases "$D5" -j 4 > "$out/diag5_warm.txt" 2>&1 &
  wait
  python3 benchmarks/probes/staging.py --json "$out/staging.json" > "$out/staging.txt" 2>&1
  python3 benchmarks/probes/diag_plans.py --cases "$D5" --json "$out/diag5.json" > "$out/diag5.txt" 2>&1
  SW_SET=3 python3 benchmarks/probes/small_waves.py time --json "$out/sw3.json" > "$out/sw3.txt" 2>&1
  cat "$out/staging.txt"; python3 -c "import json,sys; [print(r['case'], round(r.get('graph_us',0),1), r.get('kernels')) for r in json.load(open(sys.argv[1]))]" "$out/diag5.json" | cut -c1-400; cat "$out/sw3.txt"
  ;;
probe5b)  # grids under half the SMs (small_waves SW_SET=4)
  SW_SET=4 python3 benchmarks/probes/small_waves.py warm -j 15 > "$out/sw4_warm.txt" 2>&1
  SW_SET=4 python3 benchmarks/probes/small_waves.py time --json "$out/sw4.json" > "$out/sw4.txt" 2>&1
  cat "$out/sw4.txt"
  ;;
probe)  # probe sets of benchmarks/probes/round6.py, compiled in parallel then timed: SETS="23 24" (round 12: the
  # mma.sync kernel, 16-bit and tf32), 25 (round 12: wgmma, NT), 22 (round 11: SIMT), 21 (round 10: persistent
  # blocks); ~6 min for 23
  for S in ${SETS:-23 24}; do
    R6_SET=$S python3 benchmarks/probes/round6.py warm -j 16 > "$out/r${S}w.txt" 2>&1
    R6_SET=$S python3 benchmarks/probes/round6.py time --json "$out/r${S}p.json" > "$out/r${S}p.txt" 2>&1
    tail -n 80 "$out/r${S}p.txt"
  done
  ;;
r13)  # round 13: the tf32 GPU tests beside probe set 26's compiles, then set 26 timed, then the runner's tf32 rows
  python3 -m pytest -q -p no:cacheprovider -m gpu -k "test_mma_forced_on_cuda and tf32" tests > "$out/r13_t1.txt" 2>&1 &
  python3 -m pytest -q -p no:cacheprovider -m gpu -k "test_tf32_on_cuda or test_triton_tf32_and_tuned_cuda" tests \
    > "$out/r13_t2.txt" 2>&1 &
  R6_SET=26 python3 benchmarks/probes/round6.py warm -j 14 > "$out/r26w.txt" 2>&1
  wait; tail -n 1 "$out/r13_t1.txt" "$out/r13_t2.txt"; grep -h "^FAILED\|^ERROR" "$out"/r13_t*.txt
  R6_SET=26 python3 benchmarks/probes/round6.py time --json "$out/r26p.json" > "$out/r26p.txt" 2>&1
  tail -n 40 "$out/r26p.txt"
  python3 benchmarks/run.py --shapes "4096x4096x4096,4095x4095x4095,2048x2048x2048,1023x1025x1027,1000x1000x1000" \
    --dtype tf32 --providers warp_gemm,torch --json "$out/r13t_tf32.json" > "$out/r13t_tf32.txt" 2>&1
  sed -n '/# summary/,$p' "$out/r13t_tf32.txt" | grep -v "^$"
  (cd "$out" && tar czf r13.tgz r13_t*.txt r26w.txt r13t_tf32.* && rm -f r13_t*.txt r26w.txt r13t_tf32.*)
  ;;
r13b)  # round 13, second: the SIMT GPU tests (64x128x16 default) beside the runner's compiles, then the runner's rows
  for l in NN NT TN TT; do
    python3 -m pytest -q -p no:cacheprovider -m gpu -k "test_simt_forced_on_cuda and $l" tests > "$out/r13b_$l.txt" 2>&1 &
  done
  python3 benchmarks/warm_cache.py --shapes "4096x4096x4096,4095x4095x4095,8192x8192x8192" --dtype fp32 -j 3 \
    > "$out/r13b_warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "4000x4000x4000,4096x4096x4096,8000x8000x8000" --dtype fp16 -j 3 \
    >> "$out/r13b_warm.txt" 2>&1 &
  python3 benchmarks/warm_cache.py --shapes "1023x1025x1027" --dtype tf32 -j 1 >> "$out/r13b_warm.txt" 2>&1 &
  wait; for l in NN NT TN TT; do echo "$l: $(tail -n 1 "$out/r13b_$l.txt")"; done; grep -h "^FAILED\|^ERROR" "$out"/r13b_*.txt
  python3 benchmarks/run.py --shapes "4096x4096x4096,4095x4095x4095,8192x8192x8192" --dtype fp32 \
    --providers warp_gemm,torch --json "$out/r13b_fp32.json" > "$out/r13b_fp32.txt" 2>&1
  python3 benchmarks/run.py --shapes "4000x4000x4000,4096x4096x4096,8000x8000x8000" --dtype fp16 \
    --providers warp_gemm,torch --json "$out/r13b_fp16.json" > "$out/r13b_fp16.txt" 2>&1
  python3 benchmarks/run.py --shapes "1023x1025x1027" --dtype tf32 --providers warp_gemm,torch \
    --json "$out/r13b_tf32.json" > "$out/r13b_tf32.txt" 2>&1
  for f in fp32 fp16 tf32; do sed -n '/# summary/,$p' "$out/r13b_$f.txt" | grep -v "^$"; done
  (cd "$out" && tar czf r13b.tgz r13b_* && rm -f r13b_*.txt r13b_*.json)
  ;;
check)  # warp-gemm check --device cuda --shapes odd (every dtype x layout x the odd-shape matrix against Triton and
  # float64), its kernels first built in parallel by precompile (round 1: 224 kernels in ~3.5 min on 16 cores)
  python3 -m warp_gemm precompile --arch '' --dtype fp16,bf16,fp32,tf32,fp64 --workers 16 > "$out/precompile.txt" 2>&1
  tail -n 2 "$out/precompile.txt"
  timeout "${CHECK_S:-400}" python3 -m warp_gemm check --device cuda --shapes odd --json "$out/check_odd.json" \
    > "$out/check_odd.txt" 2>&1
  echo "check exit $?"; tail -n 3 "$out/check_odd.txt"
  ;;
thirds)  # the GPU suite in 64 shards, a third per call (1, 2 or 3), 16 at a time from a pool: the shards' times vary
  # 10x (round 13: 7 s to 7 min for a quarter of a 32-shard shard), so a pool of small shards keeps every core busy
  # where 16 shards of 16 jobs waited on the slowest. bash scripts/gpu_round4.sh thirds 1 (then 2, then 3)
  case "$2" in 1) sh=$(seq 0 21);; 2) sh=$(seq 22 42);; 3) sh=$(seq 43 63);; *) echo "thirds 1|2|3"; exit 2;; esac
  GPU_TEST_LOGS=/tmp/suite GPU_SHARDS="$sh" GPU_TEST_JOBS=16 timeout "${SUITE_S:-540}" bash scripts/gpu_tests.sh 64 \
    > "$out/thirds_$2.txt" 2>&1
  echo "thirds exit $?"; grep -h "^shard .* done\|^GPU total\|^FAILED\|^ERROR" "$out/thirds_$2.txt" | tail -n 40
  tar czf "$out/thirds_$2.tgz" -C /tmp suite
  ;;
suite)
  # B23: B without shard 23 (test_tile_func + test_grad, ~41 cold compiles: over 575 s in round 7)
  case "${2:-A}" in A) sh=$(seq 0 15);; B) sh=$(seq 16 31);; B23) sh="$(seq 16 22) $(seq 24 31)";; *) sh=$2;; esac
  GPU_TEST_LOGS=/tmp/suite GPU_SHARDS="$sh" GPU_TEST_JOBS=16 timeout "${SUITE_S:-540}" bash scripts/gpu_tests.sh 32 \
    > "$out/suite_$2.txt" 2>&1
  echo "suite exit $?"; grep -h "^shard\|^GPU total\|^FAILED\|^ERROR" "$out/suite_$2.txt" | tail -n 40
  for i in $sh; do f=/tmp/suite/gpu_shard_$i.log; echo "== $i: $(tail -n 1 "$f")"; grep -h "^E  " "$f" | head -4; done \
    > "$out/suite_$2_summary.txt"
  tar czf "$out/suite_$2.tgz" -C /tmp suite
  ;;
splits)  # several shards, each as 4 processes, all at once: bash scripts/gpu_round4.sh splits "1 16 29 23"
  for i in $2; do for j in 0 1 2 3; do
    WARP_GEMM_SHARD="$i/32" WARP_GEMM_SUBSHARD="$j/4" timeout "${SUITE_S:-540}" python3 -m pytest -q \
      -p no:cacheprovider -m gpu tests > "$out/sub_${i}_$j.txt" 2>&1 &
  done; done
  wait; for i in $2; do for j in 0 1 2 3; do f="$out/sub_${i}_$j.txt"; echo "shard $i sub $j: $(tail -n 1 "$f")"
    grep -h "^FAILED\|^ERROR" "$f"; done; done | tee "$out/splits_summary.txt"
  tar czf "$out/splits.tgz" -C "$out" $(cd "$out" && ls sub_*.txt); rm -f "$out"/sub_*.txt
  ;;
split)  # one shard as 4 processes (WARP_GEMM_SUBSHARD): bash scripts/gpu_round4.sh split 23
  for j in 0 1 2 3; do
    WARP_GEMM_SHARD="$2/32" WARP_GEMM_SUBSHARD="$j/4" timeout "${SUITE_S:-540}" python3 -m pytest -q -p no:cacheprovider \
      -m gpu tests > "$out/suite_shard$2_s$j.txt" 2>&1 &
  done
  wait; for j in 0 1 2 3; do echo "sub $j: $(tail -n 1 "$out/suite_shard$2_s$j.txt")"; grep -h "^FAILED\|^ERROR" "$out/suite_shard$2_s$j.txt"; done
  ;;
esac
