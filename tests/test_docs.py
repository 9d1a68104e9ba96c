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



def _targets_rows():
    """(shape, dtype, layout) -> (warp_gemm, cuBLAS) TFLOP/s from benchmarks/results/h100-targets."""
    import json

    rows = {}
    for f in sorted((ROOT / "benchmarks/results/h100-targets").glob("targets_*.json")):
        data = json.loads(f.read_text())
        for r in data["rows"]:
            key = (r["shape"], r["dtype"], data["header"].get("layout", "nn"))
            rows.setdefault(key, {})[r["provider"]] = r["tflops"]
    return rows


def test_readme_performance_table_matches_the_targets_files():
    """Every 16-bit and tf32 row of README.md's performance table reads the committed targets run."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Performance"):text.index("## Test it")]
    rows, dtypes = _targets_rows(), {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32"}
    seen = 0
    for m in re.finditer(r"^\| ([\d×³]+)(, B = W\.T)? \| (fp16|bf16|tf32) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                         table, re.M):
        dims = [int(x) for x in m.group(1).replace("³", "").split("×")]
        dims = dims * 3 if len(dims) == 1 else dims
        key = ("M{}-N{}-K{}".format(*dims), dtypes[m.group(3)], "nt" if m.group(2) else "nn")
        assert key in rows, f"README.md row {m.group(0)!r} has no row in benchmarks/results/h100-targets"
        ours, cublas = rows[key]["warp_gemm"], rows[key]["torch"]
        shown = [f"{x:.0f}" if x >= 100 else f"{x:.1f}" for x in (ours, cublas)] + [f"{ours / cublas:.2f}"]
        assert [m.group(4), m.group(5), m.group(6)] == shown, f"README.md row {m.group(0)!r}: the file reads {shown}"
        seen += 1
    assert seen >= 10, f"README.md's performance table: only {seen} 16-bit / tf32 rows found"

def test_tiling_diagram_generator(tmp_path):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("gen_tiling_diagram", DOCS / "gen_tiling_diagram.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "tiling.png"
    assert mod.main([str(out)]) == 0
    assert out.stat().st_size > 10_000


# --- the code in README.md and docs/*.md runs, and every module path they name exists ---------------------------
# Conventions (also in docs/index.md's source, "How the docs are tested"):
#   - A page's ```python blocks run in order in one namespace, after the page's hidden setup, if any:
#     an HTML comment "<!-- docs-test: setup" ... "-->" holding Python (invisible on the rendered page).
#   - "<!-- docs-test: skip -->" on the line before a block: not run (signature listings, fragments of
#     another program); its warp_gemm names are still checked below.
#   - "<!-- docs-test: cuda -->" on the line before a block: run only where Warp sees a CUDA device.
#   - Elsewhere, without CUDA, every "cuda" / "cuda:0" string literal in a block runs as "cpu".
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
_BLOCK = re.compile(r"(?P<marks>(?:<!--\s*docs-test:[^\n]*-->[ \t]*\n)*)```python\n(?P<code>.*?)^```", re.S | re.M)
_SETUP = re.compile(r"<!--\s*docs-test:\s*setup[ \t]*\n(?P<code>.*?)-->", re.S)
_CUDA_LITERAL = re.compile(r"""(["'])cuda(:0)?\1""")
_NAMES = re.compile(r"(?<![\w.])warp_gemm(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
_FROM_IMPORT = re.compile(r"^\s*from\s+(warp_gemm(?:\.\w+)*)\s+import\s+([\w ,]+)", re.M)


def _blocks(text: str):
    """(line, marks, code) of every ```python block."""
    for m in _BLOCK.finditer(text):
        marks = set(re.findall(r"docs-test:\s*(\w+)", m.group("marks")))
        yield text[:m.start("code")].count("\n"), marks, m.group("code")


def _has_cuda() -> bool:
    import warp as wp

    return wp.get_cuda_device_count() > 0


@pytest.mark.cpu_host  # the library's defaults, as a reader of the docs gets them
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_code_blocks_run(page, tmp_path, monkeypatch):
    text = page.read_text()
    blocks = list(_blocks(text))
    if not blocks:
        pytest.skip("no python blocks")
    if "import torch" in text and importlib.util.find_spec("torch") is None:
        pytest.skip("the page's code uses torch (not installed)")
    monkeypatch.chdir(tmp_path)
    cuda = _has_cuda()
    ns: dict = {"__name__": f"docs_{page.stem.replace('-', '_')}"}

    def run(code: str, label: str) -> None:
        # Each block is written to a file first: Warp reads a kernel's source through inspect, which needs one.
        path = tmp_path / f"{page.stem}_{label}.py"
        path.write_text(code)
        try:
            exec(compile(code, str(path), "exec"), ns)  # noqa: S102
        except Exception as e:  # noqa: BLE001 - name the block
            pytest.fail(f"{page.name}, the python block {label}: {type(e).__name__}: {e}")

    for i, m in enumerate(_SETUP.finditer(text)):
        run(m.group("code"), f"setup{i}")
    ran = 0
    for line, marks, code in blocks:
        if "skip" in marks or ("cuda" in marks and not cuda):
            continue
        if not cuda:
            code = _CUDA_LITERAL.sub('"cpu"', code)
        run(code, f"at_line_{line + 1}")
        ran += 1
    if not ran:
        pytest.skip("every python block here is marked skip, or needs CUDA")


def _resolve(name: str) -> bool:
    """Whether ``warp_gemm.a.b[:c]`` names a module, or a module's attribute chain."""
    mod_path, _, attr = name.partition(":")
    parts = mod_path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for a in parts[i:] + ([attr] if attr else []):
            if not hasattr(obj, a):
                return False
            obj = getattr(obj, a)
        return True
    return False


def test_named_module_paths_exist():
    """Every ``warp_gemm.x.y`` (or ``warp_gemm.x:y``) in the README and the docs, and every
    ``from warp_gemm... import ...`` in their code, resolves."""
    missing = []
    for page in PAGES:
        text = page.read_text()
        for name in sorted(set(_NAMES.findall(text))):
            if not _resolve(name):
                missing.append(f"{page.name}: {name}")
        for mod, names in _FROM_IMPORT.findall(text):
            for n in (x.strip() for x in names.split(",")):
                if n and not _resolve(f"{mod}.{n}"):
                    missing.append(f"{page.name}: from {mod} import {n}")
    assert not missing, f"the docs name what does not exist: {missing}"


def test_console_script_is_the_documented_one():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert _resolve(scripts["warp-gemm"]), scripts
    assert f"`{scripts['warp-gemm']}`" in (DOCS / "api.md").read_text()


def test_versions_agree():
    """The supported warp-lang range is stated once in pyproject and repeated the same everywhere."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(d for d in deps if d.startswith("warp-lang")).split(">=")[1]
    from warp_gemm import _compat

    assert floor == _compat.MIN_RELEASE
    stale = []
    for page in PAGES:
        text = page.read_text()
        # the supported range: "warp-lang 1.7 or newer", "1.7 to 1.19", "1.7 through 1.19" (a feature's own
        # release, "bfloat16 needs warp-lang 1.13+", is another statement)
        for m in re.finditer(r"(?:warp-lang|Warp|releases?)[` |(]*(\d+\.\d+)\s*(?:or newer|to 1\.\d+|through 1\.\d+)",
                             text):
            if m.group(1) != floor:
                stale.append(f"{page.name}: {m.group(0)!r}")
    assert not stale, f"the docs state another minimum warp-lang than pyproject's {floor}: {stale}"


def test_quickstart_lists_every_example():
    examples = sorted(p.name for p in (ROOT / "examples").glob("[0-9]*.py"))
    for page in (DOCS / "quickstart.md", ROOT / "README.md"):
        text = page.read_text()
        missing = [e for e in examples if e not in text]
        assert not missing, f"{page.name} does not list {missing}"
