"""Tests and benches use the engine's public seam: no private name of `store/` from tests/ or bench/.

A test that reaches `memory.tables._view` ties itself to how the engine is built today, and every
refactor of the engine then rewrites tests that never failed. What a test or bench may use: Memory's
methods and the views they return, the public methods of `memory.tables` (the storage facade) and
the public functions of `store/` modules. Where a test needs a handle the engine does not offer, the
engine should offer it: make the private public, with a docstring stating its contract.

The rule, read from the source with `ast` (no import, no process):
- no `from corrigenda.store... import _name`, and no import of a private module (`corrigenda.store._x`);
- no `x._name` (nor `getattr(x, "_name")`) where `_name` is a private name that `store/` defines
  (a function, method, class, module-level or class-level assignment, or `self._name` attribute)
  and the file itself does not define (a test's own `_helper` is its own business).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = "corrigenda.store"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _sources(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _defined(tree: ast.AST) -> set[str]:
    """The private names a module defines: its functions, methods and classes, the names it assigns or
    imports, and the attributes its classes assign (`self._x = …` in a class's body). Assigning another
    object's attribute (`Memory._embedding = …`, a patch) defines nothing: it reaches."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        if isinstance(node, ast.ClassDef):
            names |= {
                attribute.attr
                for attribute in ast.walk(node)
                if isinstance(attribute, ast.Attribute)
                and isinstance(attribute.ctx, ast.Store)
                and isinstance(attribute.value, ast.Name)
                and attribute.value.id in {"self", "cls"}
            }
    return {name for name in names if _private(name) and name != "_"}


def _engine_privates() -> set[str]:
    return set().union(*(_defined(ast.parse(path.read_text(), str(path))) for path in _sources("store")))


def _called(function: ast.expr) -> str:
    """`setattr` for `setattr(…)` and for `monkeypatch.setattr(…)`."""
    return (
        function.id if isinstance(function, ast.Name) else function.attr if isinstance(function, ast.Attribute) else ""
    )


def _reaches(tree: ast.AST, privates: set[str]) -> Iterator[tuple[int, str]]:
    """(line, what) for each place a module reaches a private name of the engine."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.module.startswith(ENGINE):
            if any(_private(part) for part in node.module.split(".")):
                yield node.lineno, f"from {node.module} import …"
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(ENGINE) and any(_private(part) for part in alias.name.split(".")):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.Attribute) and node.attr in privates:
            yield node.lineno, f".{node.attr}"
        elif (
            isinstance(node, ast.Call)
            and _called(node.func) in {"getattr", "setattr", "hasattr", "delattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in privates
        ):
            yield node.lineno, f'{_called(node.func)}(…, "{node.args[1].value}")'


def _places(source: str, engine: set[str]) -> list[tuple[int, str]]:
    """The places one module reaches the engine's private names (`engine`), its own names set aside."""
    tree = ast.parse(source)
    return sorted(set(_reaches(tree, engine - _defined(tree))))


def reached() -> list[str]:
    """Every place in tests/ and bench/ that reaches a private name of `store/`, as `file:line: what`."""
    engine = _engine_privates()
    return [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in _sources("tests", "bench")
        for line, what in _places(path.read_text(), engine)
    ]


def test_the_rule_sees_imports_attributes_patches_and_private_modules() -> None:
    source = (
        "from corrigenda.store.storage.schema import _row, NOTES\n"
        "import corrigenda.store._secret\n"
        "memory.tables._view(table)\n"
        "getattr(memory, '_operation')\n"
        "monkeypatch.setattr(Tables, '_add', None)\n"
        "Memory._embedding = None\n"
        "memory.tables.handles.refresh()\n"
    )
    engine = {"_view", "_operation", "_row", "_add", "_embedding"}
    assert [what for _, what in _places(source, engine)] == [
        "from corrigenda.store.storage.schema import _row",
        "import corrigenda.store._secret",
        "._view",
        'getattr(…, "_operation")',
        'setattr(…, "_add")',
        "._embedding",
    ]


def test_a_modules_own_private_names_are_its_own() -> None:
    source = (
        "def _view(x): return x\n"
        "class Log:\n"
        "    def __init__(self): self._add = []\n"
        "    def write(self): self._add.append(1); return _view(self)\n"
        "log._add\n"
    )
    assert _places(source, {"_view", "_add"}) == []


def test_the_engines_private_names_are_found() -> None:
    engine = _engine_privates()
    assert {
        "_operation",
        "_erase_while_asked",
        "_NOTE_SCHEMA",
        "_catch_up",
    } <= engine  # a decorator, methods, a constant


def test_tests_and_benches_use_only_the_engines_public_names() -> None:
    places = reached()
    assert not places, (
        f"{len(places)} place(s) in tests/ or bench/ reach a private name of store/:\n  "
        + "\n  ".join(places)
        + "\nTest through the public API instead (Memory's methods, the views they return, the public methods "
        "of memory.tables and of store/ modules). If a test or bench needs something the engine keeps "
        "private, make it public in store/ with a docstring stating its contract (tests/test_seam.py)."
    )
