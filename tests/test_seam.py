"""Tests and benches use the engine's public seam: no private name of `store/` from tests/ or bench/, and
below `Memory` only what the list SEAM names.

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

The seam is a list, not a spelling: a public name below `Memory` is as much the engine's inside as a
private one. What tests/, bench/ and server/ reach through an object of the storage (`x.tables.…`, a
`Tables` of their own, `x.graphs.…`) must be named in SEAM, part by part, each group with why. Anything
else fails, renamed or not. Memory's own methods, `memory.upkeep` (what benches drive) and `memory.uri`
are the front door and need no entry.

No part of the engine is patched (`monkeypatch.setattr(x.tables.handles, "append_rows", …)`, on `memory.upkeep`
or on the class): a test that needs a fault, or to count a part's calls, hands `Tables` or `Memory` a
subclass of the part's class (`Memory(db, embedder, parts=Parts(handles=CutAfterEvents))`, tables.py), and
the subclass overrides only what the part defines, so a renamed method fails here rather than leaving a
fault that never fires.
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


# What may be reached below Memory, by part (`tables` is the storage's composition, tables.py). Each
# entry is a use that has no front-door equivalent.
SEAM: dict[str, frozenset[str]] = {
    # the parts a test may hand a subclass of (tables.Parts), to make a fault or count calls: injected, not patched
    "Parts": frozenset({"handles", "indexes", "search", "events", "compaction", "erasure", "upkeep", "graphs"}),
    # the parts themselves, and the raw appends scale.py and the duplicate-row tests write with
    "tables": frozenset(
        {"uri", "handles", "search", "events", "erasure", "indexes", "compaction", "upkeep", "add_notes", "add_events"}
    ),
    # forensics: the tables, views and rows as stored, for erasure and commit tests that look at files
    "handles": frozenset(
        {
            "notes_table",
            "events_table",
            "view",
            "scan",
            "refresh",
            "db",
            "open_or_create",
        }
    ),
    # the searches as the engine runs them: ANN recall@k (benches), what a read finds by id
    "search": frozenset(
        {
            "notes",
            "vectors",
            "vector_search",
            "text_search",
            "scopes",
            "scope_rows",
            "scope_notes",
            "searched_exactly",
            "count",
        }
    ),
    "events": frozenset({"events_version", "scope_events", "events_since", "tombstone"}),
    # erasure tests: which notes a pass finished, and erasing in line or on a thread (as on a bucket)
    "erasure": frozenset({"erased", "unerased", "erase_later"}),
    "indexes": frozenset({"vector_index_shape", "ensure_indexes"}),
    "compaction": frozenset({"fragments", "clean_versions"}),
    "upkeep": frozenset({"compact", "upkeep_due", "finish_upkeep", "after_write"}),
    # the kept graphs: tests that read a scope's graph as a reader holds it, and drop it to read afresh
    "graphs": frozenset({"drop_all", "get", "notes"}),
}
# The class of each part of the storage, by the part it makes
_CLASSES = {"Tables": "tables", "Handles": "handles", "Search": "search", "EventReads": "events",
            "Erasure": "erasure", "Indexes": "indexes", "Compaction": "compaction", "Upkeep": "upkeep",
            "Graphs": "graphs"}  # fmt: skip
_PARTS = set(_CLASSES.values())
_ROOTS = {"tables", "graphs"}  # an attribute (`memory.tables`) or a name (`tables = Tables(db)`) of the storage


def _chain(node: ast.expr) -> list[str]:
    """`memory.tables.handles.view` as ["memory", "tables", "handles", "view"] (a call or a subscript on
    the way ends it: what comes before it is its own chain)."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    elif isinstance(node, ast.Call) and _chain(node.func) == ["Tables"]:
        names.append("tables")  # a Tables of one's own: `Tables(db).search.notes`
    return names[::-1]


def _below(names: list[str]) -> list[tuple[str, str]]:
    """The (part, name) steps a chain takes below Memory: from its first `tables` or `graphs` on."""
    for i, name in enumerate(names):
        if name in _ROOTS and (i > 0 or len(names) > 1):
            steps, part = [], name
            for attr in names[i + 1 :]:
                if attr[:1].isupper():  # the module tables.py's own names (NOTES, Hit), not a part
                    break
                steps.append((part, attr))
                if part != "tables" or attr not in SEAM:
                    break
                part = attr
            return steps
    return []


def _patched(node: ast.Call) -> tuple[str, str] | None:
    """(part, name) a patch replaces, if it patches a part of the storage or its class: `setattr(obj, "name",
    …)` (monkeypatch's too), `patch.object(obj, "name")`, or a dotted target (`setattr("….Handles.scan", …)`)."""
    if _called(node.func) not in {"setattr", "object", "patch"} or not node.args:
        return None
    if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):  # a dotted target
        *target, name = node.args[0].value.split(".")
        classes = [_CLASSES[n] for n in target if n in _CLASSES]
        return (classes[-1], name) if classes else None
    if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
        return None
    target, name = _chain(node.args[0]), str(node.args[1].value)
    if len(target) == 1 and target[0] in _CLASSES:
        return _CLASSES[target[0]], name
    parts = [n for i, n in enumerate(target) if n in _PARTS and (i > 0 or n in _ROOTS)]  # `memory.upkeep` too
    return (parts[-1], name) if parts else None


def _defined_by_class() -> dict[str, set[str]]:
    """The methods each class of the storage defines (store/), by the class's name."""
    methods: dict[str, set[str]] = {}
    for path in _sources("store"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name in _CLASSES:
                methods.setdefault(node.name, set()).update(
                    f.name for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                )
    return methods


def _overrides(tree: ast.AST, engine: dict[str, set[str]]) -> Iterator[tuple[int, str]]:
    """(line, what) for each method a subclass of a part's class (`class Cut(Handles)`) defines that the part
    does not: an override of nothing, whose fault would never fire."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for named in {_chain(base)[-1] for base in node.bases if _chain(base)} & _CLASSES.keys():
            yield from (
                (method.lineno, f"{node.name} overrides {_CLASSES[named]}.{method.name}, not {named}'s")
                for method in node.body
                if isinstance(method, ast.FunctionDef)
                and not (method.name.startswith("__") and method.name.endswith("__"))
                and method.name not in engine.get(named, set())
            )


def _handed(node: ast.Call) -> Iterator[str]:
    """The parts a `Parts(…)` call hands."""
    if _chain(node.func)[-1:] == ["Parts"]:
        yield from (keyword.arg or "**" for keyword in node.keywords)


def outside_the_seam(source: str, engine: dict[str, set[str]] | None = None) -> list[tuple[int, str]]:
    """(line, what) for each reach below Memory that SEAM does not list, each patch of a part of the storage,
    each part handed in `Parts` that SEAM does not list, and each override of a method that the part's class
    does not define (`engine`, the methods of each; read from store/ if not given). A chain is read whole,
    from its outermost attribute (`a.tables.handles.view`, not its `a.tables`)."""
    tree = ast.parse(source)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found = set(_overrides(tree, _defined_by_class() if engine is None else engine))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (patch := _patched(node)) is not None:
            found.add((node.lineno, f"patches {patch[0]}.{patch[1]}"))
        elif isinstance(node, ast.Call):
            found |= {(node.lineno, f"Parts({part}=…)") for part in _handed(node) if part not in SEAM["Parts"]}
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            found |= {
                (node.lineno, f"{part}.{name}")
                for part, name in _below(_chain(node))
                if name not in SEAM.get(part, frozenset())
            }
    return sorted(found)


def seam_reached() -> list[str]:
    """Every place in tests/, bench/ and server/ that reaches below Memory outside SEAM, or patches the engine."""
    engine = _defined_by_class()
    return [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in _sources("tests", "bench", "server")
        if path.name != "test_seam.py"
        for line, what in outside_the_seam(path.read_text(), engine)
    ]


def test_the_seam_rule_sees_a_public_name_outside_the_list_renamed_or_not() -> None:
    source = (
        "memory.tables.handles.view(table).version\n"  # listed
        "memory.tables.handles.viewed(table)\n"  # public, but not on the list
        "memory.tables.view(table)\n"  # a part's method reached on Tables
        "Tables(db).search.nearest(q)\n"
        "tables.handles.scan(t, None)\n"  # listed, through a Tables of one's own
        "reader.graphs.kept\n"
        "memory.recall('q')\n"  # the front door
        "monkeypatch.setattr(memory.tables.handles, 'append_rows', cut)\n"  # a fault: injected now, not patched
        "monkeypatch.setattr(memory.tables.handles, 'refresh', cut)\n"
        "monkeypatch.setattr(Handles, '_append', cut)\n"
        "monkeypatch.setattr(memory.upkeep, 'upkeep_due', slow)\n"  # the front door's upkeep is a part too
        "monkeypatch.setattr(memory.embedder, 'embed', failing)\n"  # not a part of the storage
        "monkeypatch.setattr(limits, 'VECTOR_INDEX_AT', 100)\n"  # a setting
        "mock.patch.object(tables.search, 'vectors')\n"
        "monkeypatch.setattr('corrigenda.store.storage.erasure.Erasure.erase_soon', stop)\n"
        "Memory(db, embedder, parts=Parts(handles=CutAfterEvents, tables=Mine))\n"  # Tables is not handed
        "class CutAfterEvents(Handles):\n"
        "    def __init__(self, *args): super().__init__(*args)\n"
        "    def append_rows(self, table, rows): raise Cut()\n"  # the part defines it: an override
        "    def append_row(self, table, rows): raise Cut()\n"  # it does not: a fault that never fires
        "class Held(graph.Graphs):\n"
        "    def get_with_versions(self, scope): pass\n"
    )
    engine = {"Handles": {"append_rows", "refresh"}, "Graphs": {"get_with_version"}}
    assert [what for _, what in outside_the_seam(source, engine)] == [
        "handles.viewed",
        "tables.view",
        "search.nearest",
        "graphs.kept",
        "patches handles.append_rows",
        "patches handles.refresh",
        "patches handles._append",
        "patches upkeep.upkeep_due",
        "patches search.vectors",
        "patches erasure.erase_soon",
        "Parts(tables=…)",
        "CutAfterEvents overrides handles.append_row, not Handles's",
        "Held overrides graphs.get_with_versions, not Graphs's",
    ]


def test_tests_benches_and_the_server_reach_below_memory_only_through_the_seam() -> None:
    places = seam_reached()
    assert not places, (
        f"{len(places)} place(s) reach below Memory outside tests/test_seam.py's SEAM, or patch the engine:\n  "
        + "\n  ".join(places)
        + "\nUse Memory's methods (memory.upkeep for upkeep, memory.uri); if a test truly needs a part of the "
        "storage, add it to SEAM with why. For a fault, hand Tables or Memory a subclass of the part in "
        "Parts (tables.py) that overrides a method the part defines, instead of patching it."
    )
