"""The layers stay apart: no module under `middleware/` imports FastAPI or Starlette, and no module imports the
`serve` command (`faultlens/serve.py`) but the CLI, which names it lazily.

Read from the source (ast), so an import inside a function counts like one at
the top. The HTTP routes of the gateway and the proxy live in the application
layer (`faultlens/server/gateway_routes.py`, `faultlens/server/proxy_app.py`);
what the commands share is wired in `faultlens/wiring.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MIDDLEWARE = ROOT / "middleware"
WEB_FRAMEWORKS = ("fastapi", "starlette")


def web_imports(source: str) -> list[str]:
    """The modules of FastAPI or Starlette that `source` imports, wherever the import is."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in WEB_FRAMEWORKS]
    return found


@pytest.mark.parametrize("source, expected", [
    ("from fastapi import FastAPI", ["fastapi"]),
    ("import starlette.responses as r", ["starlette.responses"]),
    ("def f():\n    from fastapi.responses import Response\n", ["fastapi.responses"]),
    ("class C:\n    def m(self):\n        import fastapi\n", ["fastapi"]),
    ("import fastapiutils\nfrom .fastapi import x\nERRORS = {'fastapi': 'server'}", []),
])
def test_the_scan_sees_every_import(source, expected):
    assert web_imports(source) == expected


def test_middleware_imports_no_web_framework():
    files = sorted(MIDDLEWARE.rglob("*.py"))
    assert len(files) > 50  # the walk found the package
    offending = {str(path.relative_to(ROOT)): found for path in files
                 if (found := web_imports(path.read_text(encoding="utf-8")))}
    assert offending == {}, "HTTP routes belong in the application layer (faultlens/server/)"


PACKAGES = ("faultlens", "middleware", "attributors", "injectors", "feedback", "benchmark", "scripts", "examples", "tests")


def serve_imports(source: str, path: Path) -> list[str]:
    """The imports of the `serve` command's module in `source` (a file at `path`), absolute or relative."""
    found = []
    in_app = path.parent == ROOT / "faultlens"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name == "faultlens.serve"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if (node.level == 0 and module == "faultlens.serve") or (node.level == 1 and in_app and module == "serve"):
                found.append(module)
            elif (node.level == 0 and module == "faultlens") or (node.level == 1 and in_app and not module):
                found += [a.name for a in node.names if a.name == "serve"]
    return found


def test_only_the_cli_knows_the_serve_command():
    files = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py")) if ".lint" not in p.parts]
    assert serve_imports("from faultlens.serve import build_app", ROOT / "x.py") == ["faultlens.serve"]
    assert serve_imports("from . import serve", ROOT / "faultlens" / "x.py") == ["serve"]
    # The command's own test calls it, as the CLI does.
    offending = {str(p.relative_to(ROOT)): found for p in files if (found := serve_imports(p.read_text(encoding="utf-8"), p))
                 and p != ROOT / "tests" / "faultlens" / "test_serve.py"}
    assert offending == {}, "commands share the app's wiring through faultlens/wiring.py, not through the serve command"
    assert '"faultlens.serve:serve"' in (ROOT / "faultlens" / "cli.py").read_text(encoding="utf-8")
