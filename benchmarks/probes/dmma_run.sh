#!/usr/bin/env bash
# One device call for benchmarks/probes/dmma_bench.py: parallel builds (16 processes, an empty kernel cache), the
# timing process (cuBLAS in the same process), the built kernels' registers (cuobjdump), then Nsight Compute on the
# defaults, named candidates and cuBLAS's kernels for the same products. Run from the folder holding warp_gemm/ and
# benchmarks/ with PYTHONPATH set; writes one archive, $OUT/dmma.tgz (the device call brings back a few files only).
# DMMA_SET picks the candidate list, DMMA_NCU the profiled ones.
set -u
FINAL_OUT=$OUT
OUT=$(mktemp -d)
export DMMA_CACHE=${DMMA_CACHE:-/tmp/dmma-cache}
rm -rf "$DMMA_CACHE"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, warp; print('torch', torch.__version__, 'warp', warp.config.version)" >> "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
for i in $(seq 0 15); do
    python3 benchmarks/probes/dmma_bench.py build "$i" 16 "$OUT/build.jsonl" > "$OUT/build_$i.log" 2>&1 &
done
wait
t1=$(date +%s)
python3 benchmarks/probes/dmma_bench.py time "$OUT/time.jsonl" > "$OUT/time.log" 2>&1
t2=$(date +%s)
find "$DMMA_CACHE" -name "*.cubin" -print0 | xargs -0 -n1 cuobjdump -res-usage 2>/dev/null \
    | grep -E "Function|REG" > "$OUT/res.txt"
if [ -n "${DMMA_NCU:-}" ]; then
    timeout "${DMMA_NCU_S:-200}" ncu --clock-control none -k "regex:wg_pipe|gemm|xmma|cutlass" \
        --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
        --csv --page details python3 benchmarks/probes/dmma_bench.py once "$DMMA_NCU" "$OUT/once.jsonl" \
        > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
    echo "ncu rc $?" >> "$OUT/ncu.err"
fi
t3=$(date +%s)
echo "build $((t1 - t0)) s, time $((t2 - t1)) s, ncu $((t3 - t2)) s"
cat "$OUT/gpu.txt"
grep -c '"first_s"' "$OUT/build.jsonl"; grep -h error "$OUT/build.jsonl" | head -5
tail -n 30 "$OUT/time.log"
tar czf "$FINAL_OUT/dmma.tgz" -C "$OUT" .
