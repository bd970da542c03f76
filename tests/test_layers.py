"""The library layer stays apart from HTTP: no module under `middleware/` imports FastAPI or Starlette.

Read from the source (ast), so an import inside a function counts like one at
the top. The HTTP routes of the gateway and the proxy live in the application
layer (`faultlens/server/gateway_routes.py`, `faultlens/server/proxy_app.py`).
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
