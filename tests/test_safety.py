"""No code path in warp_gemm can take an unchecked tile load/store.

Warp's ``tile_load``/``tile_store``/``tile_atomic_add`` take ``bounds_check=`` (1.9+, default True) and
``aligned=`` (1.13+, default False). With ``bounds_check=False`` or ``aligned=True`` a tile that
crosses the edge of a non-multiple problem reads and writes out of bounds: on Warp 1.9-1.19 that
corrupted the heap (see warp_gemm/_kernels.py). warp_gemm therefore leaves both at their defaults.

This test parses every ``.py`` file under ``warp_gemm/`` and fails on any tile memory call that
- passes ``bounds_check=`` anything but the literal ``True``, or ``aligned=`` anything but ``False``;
- passes those arguments positionally or through ``**kwargs`` (which a scan cannot verify);
- is reached through an alias (``load = wp.tile_load``, ``getattr(wp, "tile_load")``);
unless the call sits inside an ``if`` whose condition names a *documented aligned-path predicate*
(:data:`ALIGNED_PATH_GUARDS`). There is none today, so today there must be zero such calls.

Adding a fast path later: write a predicate (e.g. ``_kernels.aligned_path(M, N, K, cfg)``) that is True
only when every tile is entirely in bounds (M % TM == N % TN == K % TK == 0, 16-byte aligned base
pointers and leading strides), use it as ``if wp.static(ALIGNED):`` around the unchecked call, list its
name in ALIGNED_PATH_GUARDS below, document it in docs/reliability.md, and add a test that runs
shapes tile-1/tile/tile+1 in each dimension and misaligned views through the public API with the fast
path forced on and off.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from warp_gemm import _compat

PKG = pathlib.Path(__file__).resolve().parent.parent / "warp_gemm"
TILE_MEMORY_OPS = {"tile_load", "tile_store", "tile_atomic_add"}
# Positional arguments that are safe to pass positionally (anything after them is bounds_check/aligned).
SAFE_POSITIONAL = {"tile_load": 4, "tile_store": 3, "tile_atomic_add": 3}  # (a, shape, offset, storage) ...
SAFE_VALUES = {"bounds_check": True, "aligned": False}
#: Names of documented predicates that may guard an unchecked call. Empty: no fast path exists.
ALIGNED_PATH_GUARDS: set[str] = set()


def _op_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Attribute) and func.attr in TILE_MEMORY_OPS:
        return func.attr
    if isinstance(func, ast.Name) and func.id in TILE_MEMORY_OPS:
        return func.id
    return None


def _names(node: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


class _Scan(ast.NodeVisitor):
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.guards: list[set[str]] = []  # names in the conditions of enclosing ifs
        self.calls = 0
        self.problems: list[str] = []

    def _where(self, node) -> str:
        return f"{self.path.relative_to(PKG.parent)}:{node.lineno}"

    def visit_If(self, node: ast.If):
        self.visit(node.test)
        self.guards.append(_names(node.test))
        for n in node.body:
            self.visit(n)
        self.guards.pop()
        for n in node.orelse:  # the else branch is not guarded by the predicate
            self.visit(n)

    def _guarded(self) -> bool:
        return any(g & ALIGNED_PATH_GUARDS for g in self.guards)

    def visit_Call(self, node: ast.Call):
        op = _op_name(node.func)
        if op is not None:
            self.calls += 1
            issues = []
            if len(node.args) > SAFE_POSITIONAL[op] or any(isinstance(a, ast.Starred) for a in node.args):
                issues.append("bounds_check/aligned passed positionally or via *args")
            for kw in node.keywords:
                if kw.arg is None:
                    issues.append("**kwargs (cannot verify bounds_check/aligned)")
                elif kw.arg in SAFE_VALUES:
                    ok = isinstance(kw.value, ast.Constant) and kw.value.value is SAFE_VALUES[kw.arg]
                    if not ok:
                        issues.append(f"{kw.arg}={ast.unparse(kw.value)}")
            if issues and not self._guarded():
                self.problems.append(f"{self._where(node)}: {op}(...) with {', '.join(issues)}")
            # The callee is accounted for; scan only the arguments.
            for a in node.args:
                self.visit(a)
            for kw in node.keywords:
                self.visit(kw.value)
            return
        # getattr(wp, "tile_load") and friends
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in TILE_MEMORY_OPS:
                self.problems.append(f"{self._where(node)}: getattr(..., {name.value!r}) hides a tile memory call")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        # Reached only when not the callee of a Call: an alias such as ``load = wp.tile_load``.
        if node.attr in TILE_MEMORY_OPS:
            self.problems.append(f"{self._where(node)}: reference to {node.attr} outside a call (alias?)")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name):
        if node.id in TILE_MEMORY_OPS:
            self.problems.append(f"{self._where(node)}: reference to {node.id} outside a call (alias?)")

    def visit_ImportFrom(self, node: ast.ImportFrom):
        for alias in node.names:
            if alias.name in TILE_MEMORY_OPS:
                self.problems.append(f"{self._where(node)}: 'from ... import {alias.name}' (use wp.{alias.name})")


def _scan_all():
    files = sorted(PKG.rglob("*.py"))
    assert files, PKG
    calls, problems = 0, []
    for path in files:
        s = _Scan(path)
        s.visit(ast.parse(path.read_text(), filename=str(path)))
        calls += s.calls
        problems += s.problems
    return files, calls, problems


def test_no_unchecked_tile_memory_calls():
    files, calls, problems = _scan_all()
    assert calls > 0, f"the scan found no tile memory calls in {len(files)} files: is it looking at the kernels?"
    assert not problems, (
        "unchecked (or unverifiable) tile memory access in warp_gemm:\n  " + "\n  ".join(problems) +
        "\n\nwarp_gemm has no documented aligned-path predicate (ALIGNED_PATH_GUARDS in tests/test_safety.py "
        "is empty), so every tile_load/tile_store/tile_atomic_add must keep bounds_check and aligned at "
        "their checked defaults. To add a fast path: guard the call with `if wp.static(<predicate>):` where "
        "the predicate proves every tile is in bounds and aligned, add the predicate's name to "
        "ALIGNED_PATH_GUARDS, document it in docs/reliability.md, and add a test that runs tile-1/tile/"
        "tile+1 shapes and misaligned views through the public API with the fast path on and off."
    )


def test_scanner_catches_unchecked_calls(tmp_path):
    """The scanner itself flags each unsafe form (so a pass above means something)."""
    src = '''
import warp as wp
from warp import tile_store
def k(A, D, flag, kw):
    a = wp.tile_load(A, shape=(2, 2), offset=(0, 0), bounds_check=False)
    b = wp.tile_load(A, shape=(2, 2), offset=(0, 0), aligned=True)
    c = wp.tile_load(A, (2, 2), (0, 0), "register", False)
    d = wp.tile_load(A, shape=(2, 2), bounds_check=flag)
    e = wp.tile_load(A, shape=(2, 2), **kw)
    wp.tile_store(D, a, (0, 0), False)
    wp.tile_atomic_add(D, a, offset=(0, 0), bounds_check=False)
    load = wp.tile_load
    f = getattr(wp, "tile_store")
    if wp.static(SOMETHING_ELSE):
        wp.tile_store(D, a, offset=(0, 0), aligned=True)
    ok = wp.tile_load(A, shape=(2, 2), offset=(0, 0), bounds_check=True, aligned=False)
'''
    p = PKG / "_probe_never_written.py"  # only the path's name is used, for messages
    s = _Scan(p)
    s.visit(ast.parse(src))
    assert s.calls == 9
    assert len(s.problems) == 11, "\n".join(s.problems)


@pytest.mark.parametrize("op", sorted(TILE_MEMORY_OPS))
def test_installed_warp_defaults_are_checked(op):
    """Leaving the keywords out is only safe while Warp's defaults stay checked."""
    fn = _compat._ctx.builtin_functions.get(op)
    if fn is None:
        pytest.skip(f"{op} not in this Warp")
    for ov in getattr(fn, "overloads", None) or [fn]:
        defaults = getattr(ov, "defaults", None) or {}
        params = getattr(ov, "input_types", None) or {}
        if "bounds_check" in params:
            assert defaults.get("bounds_check", True) is True, f"{op}: bounds_check defaults to {defaults}"
        if "aligned" in params:
            assert defaults.get("aligned", False) is False, f"{op}: aligned defaults to {defaults}"
