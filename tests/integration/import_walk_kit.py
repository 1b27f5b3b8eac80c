"""Imports every module of the installed ``bodega`` and finds every package its code
imports, printing what failed as JSON. Run by ``test_plain_install.py`` with a plain
install's interpreter, so it imports only the standard library and bodega.

Importing a module runs its top-level imports; the imports inside functions (a command
that loads matplotlib only when it draws) are found by reading the source instead. An
import that only a type checker reads (under ``if TYPE_CHECKING:``) or that is tried
(``except ImportError``, as uvloop is) needs nothing installed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import sys
from pathlib import Path

GUARDS = {"ImportError", "ModuleNotFoundError"}


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(isinstance(n, ast.Name) and n.id in GUARDS for n in names):
            return True
    return False


def needed(tree: ast.AST) -> set[str]:
    """The top-level names of the packages ``tree`` imports when it runs."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Try) and catches_import_error(node):
            for part in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(part)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found
            if name not in sys.stdlib_module_names and name not in ("bodega", "__future__")}


def main() -> None:
    import bodega

    failed: dict[str, str] = {}
    missing: dict[str, list[str]] = {}
    names: list[str] = []

    def failed_package(name: str) -> None:
        failed[name] = repr(sys.exc_info()[1])

    for info in pkgutil.walk_packages(bodega.__path__, "bodega.", onerror=failed_package):
        if info.name.rpartition(".")[2] == "__main__":  # the program: importing it runs it
            continue
        names.append(info.name)
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = repr(exc)
        spec = importlib.util.find_spec(info.name)
        assert spec is not None
        assert spec.origin is not None
        absent = sorted(name for name in needed(ast.parse(Path(spec.origin).read_bytes()))
                        if importlib.util.find_spec(name) is None)
        if absent:
            missing[info.name] = absent
    print(json.dumps({"location": bodega.__file__, "modules": names, "failed": failed,
                      "missing": missing}))


if __name__ == "__main__":
    main()
