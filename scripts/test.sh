#!/usr/bin/env bash
# Install warp_gemm into fresh virtual environments and run the tests -- the README's test command.
#
#   bash scripts/test.sh                 # every release in WARP_RELEASES (newest: whole suite)
#   WARP_RELEASES=1.19.0 bash scripts/test.sh -k odd   # one release, extra pytest arguments
#
# The newest release runs the whole suite; older ones run the compat subset (every dtype, the
# odd-shape matrix, the version shim's own tests). On releases with wp.compile_aot_module the GPU
# kernels are also compiled offline for sm_80 and sm_90 (no GPU needed).
#
# Then the package as a user gets it (WHEEL_TEST=0 skips this): an sdist and a wheel built from it,
# the wheel installed into a fresh virtual environment (not editable) with the newest release, and from
# a folder outside the source tree an example, `warp-gemm check --device cpu` on both CPU backends and
# `warp-gemm bench --quick --device cpu`.
#
# Disk: one full environment (.venv-test-<newest>: torch, Triton, the test extras, warp_gemm editable,
# 2.2 GB); an older release is only its warp-lang, installed into .venv-warp-<release> (pip --target,
# about 0.3 GB) and put in front of the newest environment's packages with PYTHONPATH. Temporary files
# (pytest's, Warp's, NVRTC's precompiled headers: 1.3 GB in the newest release's run) go to one folder
# removed on exit; so does the wheel's environment (1.4 GB) after its test.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASES=${WARP_RELEASES:-"1.19.0 1.12.1 1.7.2"}
NEWEST=$(echo "$RELEASES" | tr ' ' '\n' | sort -V | tail -n 1)
PY=${PYTHON:-python3}
TORCH_PIN=${TORCH_PIN:-torch==2.13.0}   # the CPU build; an unpinned torch pulls gigabytes of CUDA
TRITON_PIN=${TRITON_PIN:-triton==3.6.0}
PIP=(-m pip install -q --disable-pip-version-check)
TMPDIR=$(mktemp -d); export TMPDIR   # NVRTC's __nvrtc_auto_pch_<pid>_0 folders land here too
trap 'rm -rf "$TMPDIR"' EXIT

base=".venv-test-$NEWEST"
status=0
for rel in $(echo "$RELEASES" | tr ' ' '\n' | sort -V -r); do
  if [ "$rel" = "$NEWEST" ]; then
    echo "=== warp-lang $rel: $base"
    [ -x "$base/bin/python" ] || "$PY" -m venv "$base"
    "$base/bin/python" "${PIP[@]}" --upgrade pip 2>&1 | grep -v -i warning || true
    "$base/bin/python" "${PIP[@]}" "warp-lang==$rel" "$TORCH_PIN" "$TRITON_PIN" -e ".[test,bench,docs]" \
        2>&1 | grep -v -i "warning" || true
    env=()
    args=(tests)
  else
    target=".venv-warp-$rel"
    echo "=== warp-lang $rel: $target in front of $base"
    if ! PYTHONPATH="$target" "$base/bin/python" -c "import sys, warp; sys.exit(warp.config.version != '$rel')" \
        2>/dev/null; then
      rm -rf "$target"
      "$base/bin/python" "${PIP[@]}" --no-deps --target "$target" "warp-lang==$rel" 2>&1 | grep -v -i warning || true
    fi
    env=(env "PYTHONPATH=$(pwd)/$target")
    args=(tests/test_matmul.py tests/test_compat.py -k "not sliced")
  fi
  "${env[@]}" "$base/bin/python" -c "import warp, warp_gemm; print('warp', warp.config.version, 'from', warp.__file__)
print('warp_gemm', warp_gemm.__version__)"
  set +e
  "${env[@]}" "$base/bin/python" -m pytest -q -p no:cacheprovider "${args[@]}" "$@"
  rc=$?
  set -e
  # pytest's 5 means "no tests collected" (e.g. a -k filter that matches nothing in a subset).
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; echo "=== warp-lang $rel: FAILED (pytest exit $rc)"; fi
done

wheel_test() {  # every step ends in "|| return 1": set -e does not act inside a function called by "if"
  local venv=".venv-test-$NEWEST" dist run py ex
  dist=$(mktemp -d); run=$(mktemp -d)
  py="$(pwd)/.venv-wheel/bin/python"; ex="$(pwd)/examples/02_odd_shapes.py"
  echo "=== package: sdist and wheel, installed into .venv-wheel (warp-lang $NEWEST), run from $run"
  "$venv/bin/python" "${PIP[@]}" build 2>&1 | grep -v -i warning
  "$venv/bin/python" -m build --sdist --wheel --outdir "$dist" . > "$dist/build.log" 2>&1 \
    || { tail -n 30 "$dist/build.log"; return 1; }
  # The wheel holds every file of the package's source tree (modules and the data read at run time).
  "$venv/bin/python" - "$dist" <<'PYEOF' || return 1
import pathlib, subprocess, sys, zipfile
whl = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
names = set(zipfile.ZipFile(whl).namelist())
try:
    files = subprocess.run(["git", "ls-files", "warp_gemm"], capture_output=True, text=True, check=True).stdout.split()
except (OSError, subprocess.CalledProcessError):  # not a git checkout: the folder's files
    files = [str(p) for p in pathlib.Path("warp_gemm").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
missing = sorted(f for f in files if f not in names)
print(f"{whl.name}: {len(names)} files")
if missing:
    sys.exit(f"the wheel lacks {missing} (pyproject.toml's package-data)")
PYEOF
  rm -rf .venv-wheel
  "$PY" -m venv .venv-wheel || return 1
  .venv-wheel/bin/python "${PIP[@]}" "warp-lang==$NEWEST" "$TORCH_PIN" \
      "$dist"/*.whl 2>&1 | grep -v -i "warning"
  (
    cd "$run" &&
    "$py" -c "import warp_gemm, sys; f = warp_gemm.__file__; print('warp_gemm from', f);
sys.exit(0 if '.venv-wheel' in f else 'not the installed wheel')" &&
    "$py" "$ex" --device cpu --shapes 1023x1025x1027,7x13x97,3x33x17x65 &&
    "$py" "$ex" --device cpu --backend tiles --shapes 7x13x97,3x33x17x65 &&
    "$(dirname "$py")/warp-gemm" check --device cpu --shapes small &&
    "$(dirname "$py")/warp-gemm" check --device cpu --backend tiles --shapes small --layouts nn,tt &&
    "$(dirname "$py")/warp-gemm" bench --quick --device cpu --json "$run/rows.json"
  ) || return 1
  rm -rf "$dist" "$run" .venv-wheel  # 1.4 GB; made afresh on every run
}

if [ "${WHEEL_TEST:-1}" != "0" ]; then
  if wheel_test; then echo "=== package: ok"; else status=1; echo "=== package: FAILED"; fi
fi
exit $status
