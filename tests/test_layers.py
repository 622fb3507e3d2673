"""The layers of the source (DESIGN.md): no import cycle between packages, the data types of what users write
at the bottom, a target never importing the engine, a check never importing a target. Read from the source
text (every import, in functions too; `if TYPE_CHECKING:` blocks aside), so a lazy import counts."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent / "src" / "tamesu"
pytestmark = pytest.mark.xdist_group("layers")
"""Five tests here read every module's imports (`_imports_of`, 0.9 s of CPU to parse the tree): in one xdist
worker the tree is parsed once, spread over four it was parsed by each."""


def _unit(path: Path) -> str:
    """The package (or top-level module) a file belongs to: `checks`, `engine`, `cli`..."""
    first = path.relative_to(SOURCE).parts[0]
    return first.removesuffix(".py")


_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
"""Where a statement holds statements (an `except` handler's and a `case`'s are visited for their body): an
import is a statement, so the walk goes down these only, never into expressions, which are most of a tree's
nodes (every node visited: 0.34 s of CPU for the 410 modules, 0.1 s so; the same imports found)."""


def _runtime_imports(tree: ast.AST) -> list[str]:
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            if node.module == "tamesu":  # `from tamesu import checks, targets`
                names.extend(f"tamesu.{alias.name}" for alias in node.names)
        for field in _STATEMENT_LISTS:
            for child in getattr(node, field, ()):
                visit(child)

    visit(tree)
    return names


@functools.cache
def _imports_of(path: Path) -> tuple[str, ...]:
    """A file's runtime imports, parsed once per process: six tests walk the whole tree (some 0.8 s each)."""
    return tuple(_runtime_imports(ast.parse(path.read_text(encoding="utf-8"))))


def _graph() -> dict[str, dict[str, set[str]]]:
    """unit -> the units it imports -> the files that do."""
    edges: dict[str, dict[str, set[str]]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        source = _unit(path)
        edges.setdefault(source, {})
        for name in _imports_of(path):
            parts = name.split(".")
            if parts[0] != "tamesu" or len(parts) < 2 or parts[1] == source:
                continue
            edges[source].setdefault(parts[1], set()).add(str(path.relative_to(SOURCE)))
    return edges


def _cycles(edges: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        on_stack.add(unit)
        for other in edges.get(unit, {}):
            if other not in index:
                connect(other)
                low[unit] = min(low[unit], low[other])
            elif other in on_stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == unit:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for unit in sorted(edges):
        if unit not in index:
            connect(unit)
    return found


def _explain(edges: dict[str, dict[str, set[str]]], component: list[str]) -> str:
    return "; ".join(f"{a} -> {b} ({', '.join(sorted(edges[a][b])[:3])})"
                     for a in component for b in sorted(edges[a]) if b in component)


def test_no_import_cycle_between_packages() -> None:
    edges = _graph()
    assert {"suite", "plan", "engine", "targets", "checks"} <= set(edges)  # the walk saw the tree
    cycles = _cycles(edges)
    assert not cycles, "import cycles: " + " | ".join(_explain(edges, c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    # the check above could pass by finding nothing: the same finder on a made-up graph with one cycle
    made_up = {"a": {"b": {"a.py"}}, "b": {"c": {"b.py"}}, "c": {"a": {"c.py"}}, "d": {"a": {"d.py"}}}
    assert _cycles(made_up) == [["a", "b", "c"]]
    assert "c -> a (c.py)" in _explain(made_up, ["a", "b", "c"])


# What each layer may import of tamesu's own units.
_BOTTOM = {"types", "matching", "errors", "plugins"}
_MAY_IMPORT = {
    "suite": _BOTTOM | {"models", "packs"},     # what users write: nothing that runs, no registry
    "targets": lambda unit: unit not in {"engine", "plan", "cli", "jsonl", "testing"},
    "checks": lambda unit: unit not in {"targets", "engine", "plan", "cli", "jsonl", "testing"},
}


def test_each_layer_imports_only_what_is_below_it() -> None:
    edges = _graph()
    wrong = []
    for unit, allowed in _MAY_IMPORT.items():
        for other, files in edges[unit].items():
            ok = allowed(other) if callable(allowed) else other in allowed
            if not ok:
                wrong.append(f"{unit} imports {other} in {', '.join(sorted(files))}")
    assert not wrong, "; ".join(wrong)


def test_no_source_file_over_500_lines() -> None:
    long = {str(p.relative_to(SOURCE)): n for p in SOURCE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not long, f"split these: {long}"


# The shared vocabulary at the root; everything else lives in a package whose name says what it is.
_ROOT_MODULES_AT_MOST = 10


def test_the_root_keeps_only_the_shared_vocabulary() -> None:
    modules = sorted(p.name for p in SOURCE.glob("*.py"))
    assert len(modules) <= _ROOT_MODULES_AT_MOST, f"{len(modules)} modules at the root: {modules}"


def _private_imports_from_outside() -> list[str]:
    """`tamesu.a.b._c` imported by a file that is not inside `tamesu.a.b`: a leading underscore means private to
    its package."""
    wrong = []
    for path in sorted(SOURCE.rglob("*.py")):
        inside = "tamesu." + ".".join(path.relative_to(SOURCE).with_suffix("").parts)
        if path.name == "__init__.py":
            inside = inside.removesuffix(".__init__")
        package = inside if path.name == "__init__.py" else inside.rsplit(".", 1)[0]
        for name in _imports_of(path):
            parts = name.split(".")
            if parts[0] != "tamesu":
                continue
            for depth, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:depth])
                    if package != owner and not package.startswith(owner + "."):
                        wrong.append(f"{path.relative_to(SOURCE)} imports {name}")
                    break
    return wrong


def test_no_package_imports_another_packages_private_module() -> None:
    wrong = _private_imports_from_outside()
    assert not wrong, "; ".join(wrong)


def test_jsonl_reaches_the_engine_only_through_its_public_modules() -> None:
    # the JSONL front door is a loader and a report over the one engine: it may start a run (runner) and
    # drive a live session (live), never reach into how a conversation is carried out
    edges = _graph()
    engine_modules = {name for name in _imported_names("jsonl") if name.startswith("tamesu.engine.")}
    assert engine_modules <= {"tamesu.engine.runner", "tamesu.engine.live"}, sorted(engine_modules)
    # the walk saw jsonl's imports (the run itself is started by `cli.jsonl_runner`: jsonl now plans only)
    assert {"plan", "checks", "roles"} <= set(edges["jsonl"])


def test_jsonl_keeps_only_what_is_jsonl() -> None:
    # issue 27's bound: the schema, the parser with positions, the inputs and the cases' translation; what grew
    # past it (a console, records, users, checks, target resolution of its own) belongs to the shared packages
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (SOURCE / "jsonl").rglob("*.py"))
    assert lines < 1300, f"jsonl/ has {lines} lines: what is not JSONL belongs in plan/, roles/, checks/, report/"


def _imported_names(unit: str) -> set[str]:
    names: set[str] = set()
    for path in sorted((SOURCE / unit).rglob("*.py")):
        names.update(_imports_of(path))
    return names


def _architecture_table() -> dict[str, set[str]]:
    """ARCHITECTURE.md's package table: package -> the packages its last column says it imports."""
    text = (SOURCE.parent.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    table: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`") or not cells[0].endswith("/`"):
            continue
        table[cells[0].strip("`").rstrip("/")] = set() if cells[2] == "-" else {
            name.strip() for name in cells[2].split(",")}
    return table


def test_architecture_md_names_every_package_and_what_it_imports() -> None:
    table = _architecture_table()
    edges = _graph()
    packages = {p.name for p in SOURCE.iterdir() if (p / "__init__.py").is_file()}
    assert set(table) == packages, f"ARCHITECTURE.md's table and src/tamesu differ: {set(table) ^ packages}"
    wrong = [f"{package}: the table says {sorted(table[package])}, the code imports "
             f"{sorted(set(edges.get(package, {})) - {'__version__'})}"
             for package in sorted(table) if table[package] != set(edges.get(package, {})) - {"__version__"}]
    assert not wrong, "ARCHITECTURE.md is out of date: " + "; ".join(wrong)
