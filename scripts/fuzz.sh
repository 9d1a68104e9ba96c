#!/usr/bin/env bash
# The long hypothesis fuzz run of matmul/gemm against float64 (tests/test_fuzz.py::test_fuzz_long).
#
#   bash scripts/fuzz.sh                                  # 10000 cases, random seed (printed)
#   WARP_GEMM_FUZZ_EXAMPLES=50000 bash scripts/fuzz.sh    # more cases
#   WARP_GEMM_FUZZ_SEED=1234 bash scripts/fuzz.sh         # replay one run
#
# Extra arguments go to pytest. Runs at low CPU priority (nice -n 10); on a 2-core machine with a
# warm Warp kernel cache 10000 cases take a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export WARP_GEMM_FUZZ_EXAMPLES=${WARP_GEMM_FUZZ_EXAMPLES:-10000}
export WARP_GEMM_FUZZ_SEED=${WARP_GEMM_FUZZ_SEED:-$(( (RANDOM << 15 | RANDOM) ))}
echo "fuzz: $WARP_GEMM_FUZZ_EXAMPLES cases, WARP_GEMM_FUZZ_SEED=$WARP_GEMM_FUZZ_SEED, $(date -u +%Y-%m-%dT%H:%MZ)"
exec nice -n 10 "$PY" -m pytest -p no:cacheprovider -m fuzz tests/test_fuzz.py::test_fuzz_long \
    --hypothesis-show-statistics -rA "$@"
