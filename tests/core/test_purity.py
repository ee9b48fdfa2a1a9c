"""The core (and governance) import only the standard library and themselves, and never
reach for a clock, randomness, the environment or uuids (docs/architecture.md §1, §2)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import plait

PACKAGE = Path(plait.__file__).parent
PURE = ("core", "governance")
FORBIDDEN_MODULES = {"time", "random", "uuid", "secrets", "datetime", "os", "socket", "threading"}
FORBIDDEN_CALLS = {("os", "environ"), ("os", "getenv"), ("time", "time"), ("random", "random")}


def pure_modules():
    for folder in PURE:
        root = PACKAGE / folder
        if root.exists():
            yield from sorted(root.rglob("*.py"))


def imported_roots(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                yield "plait.<relative>", node.lineno
            else:
                yield node.module or "", node.lineno


def test_pure_layers_exist():
    assert any(pure_modules())


def test_pure_layers_import_only_stdlib_and_themselves():
    problems = []
    for path in pure_modules():
        tree = ast.parse(path.read_text(), str(path))
        for name, line in imported_roots(tree):
            root = name.split(".")[0]
            if name.startswith(("plait.core", "plait.governance")) or name == "__future__":
                continue
            if root == "plait":
                problems.append(f"{path}:{line}: imports {name}")
            elif root in FORBIDDEN_MODULES:
                problems.append(f"{path}:{line}: imports forbidden module {name}")
            elif root not in sys.stdlib_module_names:
                problems.append(f"{path}:{line}: imports non-stdlib {name}")
    assert problems == []


def test_pure_layers_never_touch_clock_randomness_or_environment():
    problems = []
    for path in pure_modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in FORBIDDEN_CALLS:
                    problems.append(f"{path}:{node.lineno}: uses {node.value.id}.{node.attr}")
                if node.value.id in ("time", "random", "uuid"):
                    problems.append(f"{path}:{node.lineno}: uses {node.value.id}.{node.attr}")
    assert problems == []
