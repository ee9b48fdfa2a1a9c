"""No import circles among plait's modules (issue #15).

The graph is read from the source with ``ast``: an edge ``a -> b`` for every ``import b`` /
``from b import x`` in ``a`` (``from pkg import sub`` names the submodule ``pkg.sub``; a
name ``pkg`` re-exports is an edge to ``pkg`` itself, its ``__init__``). Imports under
``if TYPE_CHECKING:`` never run and are left out. Importing ``a.b.c`` also runs the
``__init__`` of ``a`` and ``a.b`` first; those implicit edges are left out too, as every
import checker does: a package's ``__init__`` re-exporting its own modules is what a
package is for, not a circle.

*Module-level* imports (the body of a module or a class) run when the module is imported:
a circle of them can fail depending on which module is imported first, so there must be
none anywhere. *Function-level* imports run when the function is called: a circle through
one is the usual way to dodge a module-level circle, so plait has none of those either
(``NO_DEFERRED_CIRCLES``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import plait

SOURCE = Path(plait.__file__).parent
NO_DEFERRED_CIRCLES = ("plait",)
"""Packages with no circle even counting function-level imports (a lazy import for an
optional SDK is fine, as long as it closes no circle): all of plait."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    deferred: bool
    """Inside a function body: runs when called, not when the module is imported."""


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = ["plait", *path.relative_to(SOURCE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that runs, with whether it is inside a function."""

    def walk(node: ast.AST, deferred: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    yield from walk(other, deferred)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                yield child, deferred
            else:
                inside = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from walk(child, deferred or inside)

    yield from walk(tree, False)


def _targets(
    statement: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]
) -> Iterator[str]:
    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    if isinstance(statement, ast.Import):
        names = [alias.name for alias in statement.names]
    else:
        base = statement.module or ""
        if statement.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - statement.level + 1]
            base = ".".join([*package, *([base] if base else [])])
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
            for alias in statement.names
        ]
    for name in names:
        target = nearest(name) if name.startswith("plait") else None
        if target is not None and target != module:
            yield target


def import_graph() -> list[Edge]:
    found = modules()
    known = set(found)
    edges: list[Edge] = []
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        is_package = path.name == "__init__.py"
        for statement, deferred in _imports(tree):
            for target in dict.fromkeys(_targets(statement, module, is_package, known)):
                edges.append(Edge(module, target, statement.lineno, deferred))
    return edges


def circles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted."""
    following: dict[str, list[str]] = {}
    for e in edges:
        following.setdefault(e.source, []).append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    parts: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in following.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while (w := stack.pop()) != v:
                part.append(w)
            if part:
                parts.append(sorted([v, *part]))

    for v in sorted(following):
        if v not in index:
            visit(v)
    return sorted(parts)


def described(part: list[str], edges: list[Edge]) -> str:
    inside = [e for e in edges if e.source in part and e.target in part]
    lines = [f"  {e.source}:{e.line} -> {e.target}" for e in inside]
    return "circle of " + ", ".join(part) + ":\n" + "\n".join(lines)


def test_the_graph_sees_module_and_function_level_imports():
    edges = {(e.source, e.target, e.deferred) for e in import_graph()}
    assert ("plait.governance.flow", "plait.governance.validate", False) in edges
    assert ("plait.models.registry", "plait.models.openai", True) in edges
    # under TYPE_CHECKING only: not an edge
    assert not any(
        s == "plait.governance.validate" and t == "plait.governance.flow" for s, t, _ in edges
    )


def test_there_is_no_circle_of_module_level_imports():
    edges = [e for e in import_graph() if not e.deferred]
    assert [described(part, edges) for part in circles(edges)] == []


def test_packages_that_broke_their_deferred_circles_stay_without_any():
    edges = [
        e
        for e in import_graph()
        if e.source.startswith(NO_DEFERRED_CIRCLES) and e.target.startswith(NO_DEFERRED_CIRCLES)
    ]
    assert [described(part, edges) for part in circles(edges)] == []


def test_a_circle_is_found_and_named():
    edges = [Edge("a", "b", 1, False), Edge("b", "c", 2, True), Edge("c", "a", 3, False)]
    assert circles(edges) == [["a", "b", "c"]]
    assert circles(edges[:2]) == []
    assert described(["a", "b", "c"], edges).splitlines()[1] == "  a:1 -> b"
