"""The package's shape, read from its source with ``ast`` (issue 27): no import cycle, no import
hidden in a function to dodge one, layers imported one way only, a backend driven only by the
store, and no module over 650 lines.

What today's code still does against a rule is listed by name in a ``NOT_YET_*`` set. Those
lists only shrink: a new offence fails, and so does an entry that no longer offends (take it
out). Module names are dotted (``turnstore.store.base``), so a move rewrites them with the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "turnstore"
MAX_LINES = 650

# Imports inside a function, allowed only where the imported module needs an optional extra
# (or loads a backend only when a target names one), so that ``import turnstore`` loads no SDK
# and no driver. (importer, imported): why.
LAZY = {
    ("turnstore.cli.server", "turnstore.agents.demo"): "the demo needs the agents extra",
    ("turnstore.cli.server", "turnstore.web"): "serve needs the web extra",
    ("turnstore.console", "turnstore.cli"): "the CLI needs the cli extra (the console says so)",
    ("turnstore.postgres", "turnstore.postgres.driver"): "the driver needs the postgres extra",
    ("turnstore.agents.session", "turnstore.agents.hooks"): "the hooks need the agents extra",
    ("turnstore.store.opening", "turnstore.postgres"): "a backend loads when a target names it",
    ("turnstore.store.opening", "turnstore.sqlite"): "a backend loads when a target names it",
    ("turnstore.store.opening", "turnstore.postgres.inspect"): "a backend loads when named",
    ("turnstore.store.opening", "turnstore.sqlite.inspect"): "a backend loads when named",
    ("turnstore.tracing", "turnstore.tracing.processor"): "the processor needs the agents extra",
    ("turnstore.web", "turnstore.web.app"): "the viewer needs the web extra",
}

# Imports inside a function that dodge a cycle or a layer today (issue 27, point 2 and 5).
NOT_YET_LAZY: set[tuple[str, str]] = set()

# The layers, lowest first: a module imports its own group and lower layers only. Longest
# prefix wins.
LAYERS: Mapping[str, tuple[int, str]] = {
    "turnstore.errors": (0, "errors"),
    "turnstore.domain": (1, "domain"),
    "turnstore.core": (2, "core"),
    "turnstore.formats": (3, "formats"),
    "turnstore.sqlite": (3, "sqlite"),
    "turnstore.postgres": (3, "postgres"),
    "turnstore.store": (4, "store"),
    **dict.fromkeys(
        [
            "turnstore.agents",
            "turnstore.chat",
            "turnstore.importers",
            "turnstore.tracing",
            "turnstore.otel",
        ],
        (5, "features"),
    ),
    "turnstore": (6, "api"),
    **dict.fromkeys(
        ["turnstore.cli", "turnstore.web", "turnstore.console", "turnstore.__main__"],
        (7, "interface"),
    ),
}

# Module-level imports that go up a layer today.
NOT_YET_UPWARD: set[tuple[str, str]] = set()

# The store's backend is driven only by the store and the backends (``Store.backend`` stays
# readable for backend authors and tests).
BACKEND_OWNERS = ("turnstore.store", "turnstore.sqlite", "turnstore.postgres")
NOT_YET_BACKEND_READS: set[str] = set()

# What the interface (cli/, web/) imports besides itself and the domain's pure rules: the public
# API. The lower layers it reaches through ``turnstore``.
PUBLIC = ("turnstore", "turnstore.errors", "turnstore.tracing", "turnstore.otel")
NOT_YET_INTERFACE = {
    # import's sources (open_source, import_source): the public API has no import call yet
    ("turnstore.cli.data", "turnstore.importers"),
    ("turnstore.cli.server", "turnstore.agents.demo"),  # the demo is a command's, not the API's
}

NOT_YET_LONG: set[str] = set()


@dataclass(frozen=True)
class Import:
    """One import of a module of the package by another."""

    importer: str
    imported: str
    line: int
    lazy: bool  # inside a function


@dataclass(frozen=True)
class Module:
    """A module of the package: its dotted name, its file, whether it is a package."""

    name: str
    path: Path
    package: bool


def modules(src: Path = SRC) -> dict[str, Module]:
    """Every module of the package under ``src``, by dotted name."""
    found = {}
    for path in sorted((src / ROOT).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if package else parts)
        found[name] = Module(name, path, package)
    return found


def _targets(module: Module, node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The modules of the package an import statement names, as explicit edges: ``from a
    import b`` is ``a.b`` when that is a module, else ``a`` (parent packages are not edges)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.name.split(".")
        base = base if module.package else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(node: ast.AST, lazy: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import under ``node`` but those only a type checker runs, and whether it stands
    inside a function."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _walk(other, lazy)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, lazy
        inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(child, inner)


def imports(src: Path = SRC) -> list[Import]:
    """Every import of a module of the package by another, each imported name once per line."""
    known = modules(src)
    found: set[Import] = set()
    for module in known.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        for node, lazy in _walk(tree):
            for target in _targets(module, node, set(known)):
                if target in known and target != module.name:
                    found.add(Import(module.name, target, node.lineno, lazy))
    return sorted(found, key=lambda i: (i.importer, i.line, i.imported))


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def module_graph(found: list[Import]) -> dict[str, set[str]]:
    """The imports that run when a module loads."""
    graph: dict[str, set[str]] = {}
    for i in found:
        if not i.lazy:
            graph.setdefault(i.importer, set()).add(i.imported)
    return graph


def lazy_imports(found: list[Import]) -> set[tuple[str, str]]:
    return {(i.importer, i.imported) for i in found if i.lazy}


def layer(name: str) -> tuple[int, str]:
    """The layer of a module: that of the longest prefix ``LAYERS`` names."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise AssertionError(f"{name} is in no layer: add it to LAYERS")


def upward(found: list[Import]) -> set[tuple[str, str]]:
    """The imports into a higher layer, or into another group of the same layer (a backend
    importing a format, say): at module level, and the lazy ones ``LAZY`` allows (the dodges
    of ``NOT_YET_LAZY`` are listed already)."""
    wrong = set()
    for i in found:
        if i.lazy and (i.importer, i.imported) not in LAZY:
            continue
        (rank, group), (their_rank, their_group) = layer(i.importer), layer(i.imported)
        if their_rank > rank or (their_rank == rank and their_group != group):
            wrong.add((i.importer, i.imported))
    return wrong


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def backend_reads(src: Path = SRC) -> set[str]:
    """The modules outside the store and the backends that read a ``.backend`` attribute."""
    found = set()
    for module in modules(src).values():
        if _within(module.name, BACKEND_OWNERS):
            continue
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        if any(isinstance(n, ast.Attribute) and n.attr == "backend" for n in ast.walk(tree)):
            found.add(module.name)
    return found


def interface_imports(found: list[Import]) -> set[tuple[str, str]]:
    """What cli/ and web/ import besides the public API, the domain and the interface."""
    wrong = set()
    for i in found:
        if layer(i.importer)[1] != "interface" or i.imported in PUBLIC:
            continue
        if layer(i.imported)[1] not in ("interface", "domain", "errors"):
            wrong.add((i.importer, i.imported))
    return wrong


def long_modules(src: Path = SRC) -> dict[str, int]:
    return {
        m.name: lines
        for m in modules(src).values()
        if (lines := len(m.path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }


def _shrinking(seen: set[Any], listed: set[Any]) -> None:
    """A shrink-only list: nothing new offends, and every entry still does."""
    assert sorted(seen - listed) == [], "new: fix it, never list it"
    assert sorted(listed - seen) == [], "listed, but fixed: take it out of the NOT_YET list"


# ---------------------------------------------------------------------------------------------
# The package


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return imports()


def test_no_import_cycle(found: list[Import]) -> None:
    assert cycles(module_graph(found)) == []


def test_no_cycle_either_once_the_listed_lazy_imports_run_at_load(found: list[Import]) -> None:
    """The allowed lazy imports are for extras, not cycles: loaded at once, none closes one."""
    graph = module_graph(found)
    for importer, imported in LAZY:
        graph.setdefault(importer, set()).add(imported)
    assert cycles(graph) == []


def test_an_import_inside_a_function_is_for_an_optional_extra(found: list[Import]) -> None:
    """Anything else is an import at module level: fix the layering instead."""
    seen = lazy_imports(found)
    hidden = sorted(seen - LAZY.keys() - NOT_YET_LAZY)
    assert hidden == [], "import at module level; fix the layering"
    assert sorted(LAZY.keys() - seen) == [], "no longer imported lazily: take it out of LAZY"
    assert sorted(NOT_YET_LAZY - seen) == [], "fixed: take it out of NOT_YET_LAZY"
    assert LAZY.keys() & NOT_YET_LAZY == set()


def test_every_module_is_in_a_layer() -> None:
    for name in modules():
        layer(name)


def test_layers_are_imported_one_way(found: list[Import]) -> None:
    _shrinking(upward(found), NOT_YET_UPWARD)


def test_backends_never_import_the_store(found: list[Import]) -> None:
    backends = ("turnstore.sqlite", "turnstore.postgres")
    assert [
        (i.importer, i.imported)
        for i in found
        if _within(i.importer, backends) and _within(i.imported, ("turnstore.store",))
    ] == []


def test_only_the_store_and_the_backends_read_a_backend() -> None:
    _shrinking(backend_reads(), NOT_YET_BACKEND_READS)


def test_the_interface_imports_only_the_public_api(found: list[Import]) -> None:
    _shrinking(interface_imports(found), NOT_YET_INTERFACE)


def test_no_module_is_over_650_lines() -> None:
    _shrinking(set(long_modules()), NOT_YET_LONG)


# ---------------------------------------------------------------------------------------------
# The checks themselves, on a package that breaks every rule


def _package(src: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = src / ROOT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_the_checks_find_what_breaks_a_rule(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "from .store import Store\n",  # a lower layer importing a higher one
            "a.py": "from . import b\n",
            "b.py": "from .a import thing\n",  # a cycle
            "c.py": "def f():\n    from .d import thing\n",  # an import hidden in a function
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n",
            "e.py": "def f(store):\n    return store.backend.run\n",  # the store's backend
            "long.py": "x = 1\n" * (MAX_LINES + 1),
            "store/__init__.py": "class Store: ...\n",
            "store/base.py": "def f(store):\n    return store.backend\n",  # allowed here
            "cli/__init__.py": "from ..store import base\n",  # the interface past the API
        },
    )
    found = imports(src)
    assert cycles(module_graph(found)) == [["turnstore.a", "turnstore.b"]]
    assert lazy_imports(found) == {("turnstore.c", "turnstore.d")}  # TYPE_CHECKING is none
    assert upward(found) == {("turnstore.errors", "turnstore.store")}
    assert backend_reads(src) == {"turnstore.e"}
    assert interface_imports(found) == {("turnstore.cli", "turnstore.store.base")}
    assert set(long_modules(src)) == {"turnstore.long"}
    with pytest.raises(AssertionError, match="new"):
        _shrinking({"turnstore.long", "turnstore.other"}, {"turnstore.long"})
    with pytest.raises(AssertionError, match="fixed"):
        _shrinking(set(), {"turnstore.long"})
