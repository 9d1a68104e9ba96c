"""The package's layering (docs/design.md): imports go one way, and there are no cycles.

    __init__ / __main__ / tools  ->  api, fused -> tile, compat  ->  torch (custom ops)  ->  autograd  ->  planner (core.plan,
    core.execute, core.fastpath)  ->  families  ->  core (problem, operands, options, launches, ...)  ->
    families.common  ->  config  ->  _compat

Every import is read from the source (module level and inside functions), so a lazy import that runs
back up a layer is caught too.
"""

from __future__ import annotations

import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parent.parent / "warp_gemm"

RANK = {"_compat": 0, "config": 1, "families.common": 1.5, "core": 2, "families": 2.5, "planner": 3, "autograd": 4,
        "torch": 4.5, "api": 5, "grouped": 5, "tile": 5, "fused": 5.2, "compat": 5.5, "tools": 6, "bench": 6, "__init__": 7, "__main__": 7}
#: The planner and executor sit above the families they loop over; the rest of core below them.
PLANNER = ("warp_gemm.core.plan", "warp_gemm.core.execute", "warp_gemm.core.fastpath", "warp_gemm.core.grouped")


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        rel = f.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t.startswith("warp_gemm.") and t != name:
                found.add(t)
    return found


def _layer(mod: str) -> str:
    if mod in PLANNER:
        return "planner"
    if mod.startswith("warp_gemm.bench"):  # the benchmark runner ships beside the tools that run it
        return "tools"
    if mod.startswith("warp_gemm.families.common"):
        return "families.common"
    return mod.split(".")[1] if "." in mod else "__init__"


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, set(mods)) for m, p in mods.items()}


def test_every_module_has_a_layer():
    assert not [m for m in _graph() if _layer(m) not in RANK]


def test_imports_go_one_way():
    """A module imports only layers below its own, or modules of its own subpackage."""
    bad = []
    for m, deps in _graph().items():
        for d in deps:
            if _layer(d) == _layer(m) and _layer(m) != "__init__":
                continue
            if d == "warp_gemm":  # the package's face: only tools and torch may use public names
                if RANK[_layer(m)] < RANK["tools"]:
                    bad.append(f"{m} -> {d}")
                continue
            if RANK[_layer(d)] >= RANK[_layer(m)]:
                bad.append(f"{m} -> {d}")
    assert not bad, "imports that run up a layer:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    g = {m: {d for d in deps if d != "warp_gemm"} for m, deps in _graph().items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for d in g.get(m, ()):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d] if d in stack else [m, d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)
