"""How the installed modules import each other: no private names across modules, no import cycles.

Read from the source (ast), so an import inside a function counts like one at
the top (it only hides a cycle); imports under `if TYPE_CHECKING:` do not (they
never run). Known exceptions are listed below by name, each with who owns the
fix; the lists must shrink, never grow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# import name -> folder (the setuptools package-dir mapping in pyproject.toml)
PACKAGES = {
    "faultlens": ROOT / "faultlens",
    "faultlens.middleware": ROOT / "middleware",
    "faultlens.attributors": ROOT / "attributors",
    "faultlens.injectors": ROOT / "injectors",
    "faultlens.feedback": ROOT / "feedback",
    "faultlens.benchmark": ROOT / "benchmark",
}

# (importing module, imported module, private name) being fixed elsewhere: none left.
KNOWN_PRIVATE: set[tuple[str, str, str]] = set()

# Cycles (as sets of modules) being fixed elsewhere: none left.
KNOWN_CYCLES: list[frozenset[str]] = []


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for name, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            # a folder of another mapping (faultlens/ holds none of them, but be explicit)
            found[".".join([name, *parts])] = path
    return found


MODULES = modules()


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def resolve(module: str, level: int, target: str | None) -> str:
    """The absolute name of `from <level dots><target> import ...` inside `module`."""
    if level == 0:
        return target or ""
    base = module.split(".")
    base = base if is_package(module) else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports(module: str) -> Iterator[tuple[str, str | None]]:
    """(imported first-party module, name taken from it or None) for every import that runs."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    module_aliases: dict[str, str] = {}
    for node in runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    module_aliases[alias.asname or alias.name] = alias.name
                    yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            source = resolve(module, node.level, node.module)
            if source not in MODULES:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in MODULES:
                    module_aliases[alias.asname or alias.name] = sub
                    yield sub, None
                else:
                    yield source, alias.name
    # private attributes of an imported module: `spans._bad`
    for node in runtime_nodes(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in module_aliases:
            yield module_aliases[node.value.id], node.attr


def private(name: str | None) -> bool:
    return name is not None and name.startswith("_") and not name.startswith("__")


def test_the_scan_sees_every_package():
    assert {"faultlens.cli", "faultlens.middleware.capture.tracer", "faultlens.attributors.registry",
            "faultlens.injectors.envs.chart_qa.env", "faultlens.benchmark.runner"} <= set(MODULES)


def test_no_private_name_crosses_modules():
    found = {(module, source, name) for module in MODULES for source, name in imports(module)
             if private(name) and source != module}
    assert found - KNOWN_PRIVATE == set(), "import the public name, or make the name public where it is defined"
    assert KNOWN_PRIVATE - found == set(), "fixed: remove these from KNOWN_PRIVATE"


def cycles() -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {module: sorted({source for source, _ in imports(module) if source != module}) for module in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for module in graph:
        if module not in index:
            visit(module)
    return out


def test_no_import_cycle():
    found = cycles()
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not new, f"import cycles (an import inside a function counts): {new}"
    assert all(c in found for c in KNOWN_CYCLES), "fixed: remove it from KNOWN_CYCLES"


@pytest.mark.parametrize("source", ["from . import x", "from .x import y"])
def test_resolve_relative_imports(source):
    module = "faultlens.injectors.envs.chart_qa.env"
    level = source.split()[1].count(".")
    assert resolve(module, level, None) == "faultlens.injectors.envs.chart_qa"
    assert resolve("faultlens.injectors.envs.chart_qa", 2, "base") == "faultlens.injectors.envs.base"
