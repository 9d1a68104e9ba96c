#!/usr/bin/env bash
# Install warp_gemm into fresh virtual environments and run the tests -- the README's test command.
#
#   bash scripts/test.sh                 # every release in WARP_RELEASES (newest: whole suite)
#   WARP_RELEASES=1.19.0 bash scripts/test.sh -k odd   # one release, extra pytest arguments
#
# The newest release runs the whole suite; older ones run the compat subset (every dtype, the
# odd-shape matrix, the version shim's own tests). On releases with wp.compile_aot_module the GPU
# kernels are also compiled offline for sm_80 and sm_90 (no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASES=${WARP_RELEASES:-"1.19.0 1.12.1 1.7.2"}
NEWEST=$(echo "$RELEASES" | tr ' ' '\n' | sort -V | tail -n 1)
PY=${PYTHON:-python3}
TORCH_PIN=${TORCH_PIN:-torch==2.13.0}   # the CPU build; an unpinned torch pulls gigabytes of CUDA
TRITON_PIN=${TRITON_PIN:-triton==3.6.0}
status=0
for rel in $RELEASES; do
  venv=".venv-test-$rel"
  echo "=== warp-lang $rel: $venv"
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v -i warning || true
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "warp-lang==$rel" "$TORCH_PIN" \
      "$TRITON_PIN" -e ".[test,bench,docs]" 2>&1 | grep -v -i "warning" || true
  "$venv/bin/python" -c "import warp, warp_gemm; print('warp', warp.config.version, 'warp_gemm', warp_gemm.__version__)"
  if [ "$rel" = "$NEWEST" ]; then
    args=(tests)
  else
    args=(tests/test_matmul.py tests/test_compat.py -k "not sliced")
  fi
  set +e
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}" "$@"
  rc=$?
  set -e
  # pytest's 5 means "no tests collected" (e.g. a -k filter that matches nothing in a subset).
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; echo "=== warp-lang $rel: FAILED (pytest exit $rc)"; fi
done
exit $status
