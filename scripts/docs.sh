#!/usr/bin/env bash
# Build the documentation site (mkdocs-material) with warnings as errors -- the README's docs command.
#
#   bash scripts/docs.sh              # installs the docs extra into .venv-docs, builds into site/
#   bash scripts/docs.sh serve        # the same, then a live preview on http://127.0.0.1:8000
#   VENV=.venv bash scripts/docs.sh   # use (and install into) another virtual environment
#
# The tiling diagram docs/img/tiling.png is committed; after changing docs/gen_tiling_diagram.py,
# regenerate it with `python docs/gen_tiling_diagram.py` (needs matplotlib: the bench extra).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-docs}
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[docs]"
export NO_MKDOCS_2_WARNING=1   # Material's end-of-life notice: not a build warning, just noise
if [ "${1:-build}" = "serve" ]; then
  exec "$VENV/bin/python" -m mkdocs serve
fi
"$VENV/bin/python" -m mkdocs build --strict --site-dir "${SITE_DIR:-site}"
echo "docs built into ${SITE_DIR:-site}/ (open ${SITE_DIR:-site}/index.html)"
