"""The package's shape (issue #34): no import cycle counting every import statement (function-level
and type-checking ones too), ``import evalkit`` loads no stage, a short top level, and no module
that only the tests use. The layer and stand-in rules are import-linter contracts in
pyproject.toml, checked by ``make test`` (``lint-imports``)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "evalkit"


def _modules(root: Path, pkg: str) -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in (root / pkg).rglob("*.py"):
        parts = list(p.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def import_graph(root: Path, pkg: str = "evalkit") -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement anywhere in it
    (``from pkg import mod`` counts as importing ``pkg.mod``)."""
    mods = _modules(root, pkg)

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, (path, is_pkg) in mods.items():
        base = m if is_pkg else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    b = base
                    for _ in range(node.level - 1):
                        b = b.rpartition(".")[0]
                    mod = f"{b}.{mod}" if node.module else b
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            else:
                continue
            graph[m].update(t for t in map(known, (t for t in targets if t.startswith(pkg))) if t and t != m)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(ROOT)) == []


def test_the_cycle_check_sees_function_level_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n    return g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    (pkg / "c.py").write_text("from . import a\n")
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b"]]


def test_import_evalkit_loads_no_stage():
    code = "import sys, evalkit; print(sorted(m for m in sys.modules if m.startswith('evalkit.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_public_api_is_there_and_lazy():
    code = (
        "import sys, evalkit\n"
        "names = [evalkit.load_run, evalkit.run_experiment, evalkit.load_experiment, evalkit.Policy,\n"
        "         evalkit.candidate, evalkit.probe]\n"
        "print('evalkit.replay.compactor' in sys.modules, len(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["True", "6"]


def test_the_top_level_is_short():
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert {"__init__.py", "__main__.py", "py.typed"} <= entries
    assert len(entries - {"__init__.py", "__main__.py", "py.typed"}) <= 14, sorted(entries)


def test_no_module_is_there_only_for_the_tests():
    """Every module is imported by another evalkit module, named as a registry built-in
    ("module:object"), or is an entry point; evalkit.testing is the documented exception."""
    graph = import_graph(ROOT)
    used = {t for targets in graph.values() for t in targets}
    text = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    entry = {v.partition(":")[0] for v in pyproject["project"]["scripts"].values()}

    def reached(m: str) -> bool:
        parent, _, leaf = m.rpartition(".")
        return (
            m in used
            or f'"{m}:' in text
            or m in entry
            or m.endswith("__main__")
            or m.startswith("evalkit.testing")
            or (f'"{leaf}",' in text and parent in {"evalkit.importers", "evalkit.cli"})  # MODULES lists
            or any(m == t.rpartition(".")[0] for t in used)  # a package whose modules are used
        )

    assert sorted(m for m in graph if m != "evalkit" and not reached(m)) == []


def test_the_standin_contract_names_every_standin():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    standins = next(c for c in contracts if c["type"] == "forbidden")
    assert {"evalkit.models", "evalkit.continuation.agents", "evalkit.replay.validator"} <= set(
        standins["source_modules"]
    )
    assert {"evalkit.facts", "evalkit.score", "evalkit.corpus.synth"} <= set(standins["forbidden_modules"])
