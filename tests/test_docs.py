"""The documentation: the site builds without a warning, and it covers the public API.

The build runs only where mkdocs-material is installed (the ``docs`` extra); the coverage checks
always run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import warp_gemm

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs-material not installed (pip install -e '.[docs]')")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "img" / "tiling.png").is_file()


@pytest.mark.parametrize("name", sorted(warp_gemm.__all__))
def test_every_public_name_is_documented(name):
    assert re.search(rf"\b{re.escape(name)}\b", (DOCS / "api.md").read_text()), \
        f"warp_gemm.{name} is public (in __all__) but docs/api.md does not mention it"


def test_readme_references_exist():
    text = (ROOT / "README.md").read_text()
    paths = set(re.findall(r"\b((?:docs|examples|scripts)/[\w./-]+\.(?:md|py|sh|png))", text))
    assert paths, "README.md should link the docs pages and name the example and script files"
    missing = sorted(p for p in paths if not (ROOT / p).is_file())
    assert not missing, f"README.md names files that do not exist: {missing}"


def test_tiling_diagram_generator(tmp_path):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("gen_tiling_diagram", DOCS / "gen_tiling_diagram.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "tiling.png"
    assert mod.main([str(out)]) == 0
    assert out.stat().st_size > 10_000
