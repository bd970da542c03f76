"""Count the public signatures that take or return `Any` in the given folders (issue 46 item 4).

A signature is one public function or method (its parameter and return
annotations) or one public class (its annotated fields, the constructor of a
dataclass or a pydantic model). Public: no part of its qualified name starts
with `_` (`__init__` counts as its class's). Functions nested in functions are
not counted: nobody outside can call them.

    python scripts/count_any.py middleware/store faultlens/server [--list]
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Signature:
    path: Path
    name: str
    line: int
    has_any: bool


def mentions_any(annotation: ast.expr | None) -> bool:
    """True when the annotation names `Any` (`typing.Any` too), quoted annotations included."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if mentions_any(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
    return False


def public(name: str) -> bool:
    return name == "__init__" or not name.startswith("_")


def function_has_any(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = node.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return any(mentions_any(p.annotation) for p in params if p is not None) or mentions_any(node.returns)


def class_has_any(node: ast.ClassDef) -> bool:
    return any(isinstance(item, ast.AnnAssign) and mentions_any(item.annotation) for item in node.body)


def signatures(path: Path) -> Iterator[Signature]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        parent, prefix = stack.pop()
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.ClassDef) and public(node.name):
                yield Signature(path, prefix + node.name, node.lineno, class_has_any(node))
                stack.append((node, f"{prefix}{node.name}."))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and public(node.name):
                yield Signature(path, prefix + node.name, node.lineno, function_has_any(node))
            elif isinstance(node, (ast.If, ast.Try)):  # definitions under `if TYPE_CHECKING:` or a guarded import
                stack.append((node, prefix))


def count(folder: Path) -> list[Signature]:
    return [s for path in sorted(folder.rglob("*.py")) for s in signatures(path)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--list", action="store_true", help="name each signature that mentions Any")
    args = parser.parse_args()
    for folder in args.folders:
        found = count(folder)
        with_any = [s for s in found if s.has_any]
        print(f"{folder}: {len(with_any)} of {len(found)} public signatures mention Any")
        if args.list:
            for s in with_any:
                print(f"  {s.path}:{s.line} {s.name}")


if __name__ == "__main__":
    main()
