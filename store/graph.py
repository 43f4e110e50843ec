"""Each scope's lifecycle graph, decoded once and kept in memory between calls.

The events table is append-only (only `forget` deletes), so a process keeps, per scope, every
event with its adjacency, tagged with the table version it reflects. Each call asks the table
for its version (well under a millisecond, and it sees other processes' commits):
- unchanged: the graph is reused as it is;
- the next version, made by this process's own append: the appended events are added in memory;
- versions that only appended (another process wrote), compacted or updated an index: the events
  they appended to the scope are read, and added (`Tables.events_since`);
- anything else (a forget, or far behind): that scope's events are read again.

Beside the graphs, the notes are kept: a note's row never changes once written. A scope's notes are
read in one scan (without their vectors) the first time a call needs some of them, and kept as one
Arrow table, up to `ROWS_KEPT` notes over all scopes; notes written after that scan, and those of a
scope too big to keep, are read by id and kept, up to `NOTES_KEPT` (and the vectors read with them).
Only `forget` removes a note, after its `forgets` tombstone, which is never erased; so a kept note of
another process's forget is never shown (the fold drops a note its tombstone names), and is let go
(its scope's scan with it) once a graph holding that tombstone is read, or at this process's own
forget.

A graph may hold events whose notes are not readable: a note's row is the commit point of the
edges written with it (docs/design.md, "How it works"), so an edge whose note is not (or no longer)
stored is ignored by the fold. That is also why a graph must be refreshed *after* the notes a
call works on were found (by a search, or read by id): a note found has its edges in the table
already.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from .ids import is_note_id
from .model import Event, EventKind, Note
from .storage.schema import ScopeRows

# Notes (and, apart, vectors) read by id and kept between calls, the least recently used let go first:
# at 20,000, about 30 MiB of vectors (384 floats) and as much text.
NOTES_KEPT = 20_000
# Notes kept as their scopes' scans, over all scopes, the least recently used scope let go first: at
# 250,000, about 80 MiB (the Arrow rows and an index by id). A bigger scope is read by id.
ROWS_KEPT = 250_000

V = TypeVar("V")


# The kinds of event that are settings of a scope, naming no note: kept apart (`ScopeGraph.scope_wide`), so
# that reading them costs their number, not the scope's
SCOPE_SETTINGS = frozenset({EventKind.CHECK_EVERY, EventKind.ONE_VALUE, EventKind.MANY_VALUES})


@dataclass
class ScopeGraph:
    scope: str
    version: int  # the events table version this graph reflects
    events: dict[str, Event] = field(default_factory=dict)  # by id: the first row of each id
    # note → notes a recall of it may read: its chain (both ways), its prerequisites and the notes it is
    # said to be distinct from (one way)
    neighbours: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    naming: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # note or event id → events naming it
    # events of the scope as a whole, its settings (SCOPE_SETTINGS): what a subject holds, how often to check
    scope_wide: list[Event] = field(default_factory=list)

    def add(self, events: Iterable[Event]) -> None:
        for e in events:
            if e.id in self.events:
                continue  # a retried append: the first row wins
            self.events[e.id] = e
            if e.kind in SCOPE_SETTINGS:
                self.scope_wide.append(e)
            self.naming[e.dst].add(e.id)
            if e.src is not None:
                self.naming[e.src].add(e.id)
            dst = e.dst if is_note_id(e.dst) else self._note_of(e.dst)
            if e.src is None or dst is None:
                continue
            self.neighbours[e.src].add(dst)
            if e.kind not in (EventKind.DEPENDS_ON, EventKind.DISTINCT):  # not the dependants, nor what said so
                self.neighbours[dst].add(e.src)

    def _note_of(self, event_id: str) -> str | None:
        target = self.events.get(event_id)
        return target.dst if target is not None else None

    def all_events(self) -> list[Event]:
        """Every event, as a list taken at once: the graph may grow meanwhile on another thread (an
        append of this process, or what another process appended: `Graphs`)."""
        return list(self.events.values())

    def reachable(self, start: Iterable[str]) -> set[str]:
        """Note ids a recall of `start` may deliver: their chains, prerequisites, and theirs."""
        seen = set(start)
        frontier = list(seen)
        while frontier:
            for nxt in tuple(self.neighbours.get(frontier.pop(), ())):  # taken at once: see all_events
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        return seen

    def around(self, note_ids: Iterable[str]) -> list[Event]:
        """Every event naming one of these notes, and every event naming one of those (reinstates)."""
        found: set[str] = set()
        for note_id in note_ids:
            found |= self.naming.get(note_id, set())
        for event_id in list(found):
            found |= self.naming.get(event_id, set())
        return [self.events[i] for i in found]


class Kept(Generic[V]):
    """Values read by note id, the most recently used `size` of them. With `absent_too`, also the ids
    the store had none for (None), so they are not asked again: only where that cannot change."""

    def __init__(self, absent_too: bool, size: int = NOTES_KEPT) -> None:
        self._absent_too = absent_too
        self._size = size
        self._values: OrderedDict[str, V | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ids: Iterable[str], read: Callable[[list[str]], Mapping[str, V]]) -> dict[str, V]:
        """The values of `ids` that exist, reading only those not kept."""
        found: dict[str, V] = {}
        missing: list[str] = []
        with self._lock:
            for i in dict.fromkeys(ids):
                if i not in self._values:
                    missing.append(i)
                    continue
                self._values.move_to_end(i)
                value = self._values[i]
                if value is not None:
                    found[i] = value
        if not missing:
            return found
        fresh = read(missing)
        found.update(fresh)
        with self._lock:
            for i in missing:
                if i in fresh or self._absent_too:
                    self._values[i] = fresh.get(i)
            self._evict()
        return found

    def put(self, values: Mapping[str, V]) -> None:
        """Keep values read along with something else."""
        with self._lock:
            for i, value in values.items():
                self._values[i] = value
                self._values.move_to_end(i)
            self._evict()

    def _evict(self) -> None:
        """Let go of the least recently used past `size` (the caller holds the lock)."""
        while len(self._values) > self._size:
            self._values.popitem(last=False)

    def __contains__(self, note_id: str) -> bool:
        with self._lock:
            return note_id in self._values

    def drop(self, ids: Iterable[str]) -> None:
        with self._lock:
            for i in ids:
                self._values.pop(i, None)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class Graphs:
    """The graphs of the scopes this process has touched, refreshed as the module docstring says, the
    scopes' scans of their notes, and the notes and vectors read by id (`notes`, `vectors`)."""

    def __init__(
        self,
        version: Callable[[], int],
        read: Callable[[str], tuple[int, list[Event]]],
        scan: Callable[[str, Collection[str]], ScopeRows | None],
        since: Callable[[int, str], tuple[int, list[Event]] | None] = lambda version, scope: None,
        catch_up_from: int = 0,
    ) -> None:
        self._version = version  # the events table's latest version
        # A scope's events, with the version they were read at; and those the versions after one
        # appended (None: read the scope again).
        self.read_scope = read
        self.read_since = since
        self._catch_up_from = catch_up_from  # a graph of fewer events is read again whole
        # A scope's notes but those named, in one scan (Search.scope_rows): the one read of a whole scope.
        self.scan_scope = scan
        self._graphs: dict[str, ScopeGraph] = {}
        self._rows: OrderedDict[str, ScopeRows | None] = OrderedDict()  # None: too big to keep
        self._lock = threading.Lock()
        # A note a graph names may not be stored yet (its edges land first: module docstring): asked again.
        self.notes: Kept[Note] = Kept(absent_too=False)
        # Vectors are asked for notes already read: one that has none is one the model could not read.
        self.vectors: Kept[np.ndarray] = Kept(absent_too=True)

    def get(self, scope: str) -> ScopeGraph:
        return self.get_with_version(scope)[0]

    def get_with_version(self, scope: str) -> tuple[ScopeGraph, int]:
        """A scope's graph and the events table version it held every event of when asked. The graph
        itself moves on with this process's later appends (`appended`, on any thread); the version
        does not, so a write can tell what its check saw (Memory._refuse_if_raced)."""
        with self._lock:
            graph = self._graphs.get(scope)
            if graph is not None and graph.version == self._version():
                return graph, graph.version
        if graph is not None and len(graph.events) >= self._catch_up_from:
            caught_up = self._catch_up(graph)
            if caught_up is not None:
                return graph, caught_up
        version, events = self.read_scope(scope)
        fresh = ScopeGraph(scope, version)
        fresh.add(events)
        self._let_go(events)
        with self._lock:
            current = self._graphs.get(scope)
            if current is None or current.version <= version:
                self._graphs[scope] = fresh
        return fresh, version

    def _catch_up(self, graph: ScopeGraph) -> int | None:
        """Add to `graph` the events the versions since its own appended to its scope, if they can be
        told from the rest (`read_since`); the version it then holds, or None."""
        read_at = graph.version
        since = self.read_since(read_at, graph.scope)
        if since is None:
            return None
        version, events = since
        with self._lock:
            if graph.version != read_at or self._graphs.get(graph.scope) is not graph:
                return None  # moved on meanwhile (another thread): read the scope again
            graph.add(events)
            graph.version = version
        self._let_go(events)
        return version

    def notes_of(
        self, scope: str, ids: Iterable[str], read: Callable[[list[str]], Mapping[str, Note]]
    ) -> dict[str, Note]:
        """The notes of `ids` that exist (in `scope`): those kept, the others from the scope's scan or
        read by `read` (and kept: a note taken from the scan is decoded once)."""

        def scanned_or_read(missing: list[str]) -> dict[str, Note]:
            rows = self._scope_rows(scope)
            found = rows.get(missing) if rows is not None else {}
            rest = [i for i in missing if i not in found]
            if rest:
                found |= read(rest)
            return found

        return self.notes.get(ids, scanned_or_read)

    def vectors_of(
        self, scope: str, ids: Iterable[str], read: Callable[[list[str], Mapping[str, int]], Mapping[str, np.ndarray]]
    ) -> Mapping[str, np.ndarray]:
        """The stored embeddings of `ids` (notes of `scope`): those kept, the others read by `read`, told
        where the scope's scan found them (if it is kept), and kept."""

        def located(missing: list[str]) -> Mapping[str, np.ndarray]:
            with self._lock:
                rows = self._rows.get(scope)
            return read(missing, rows.addresses(missing) if rows is not None else {})

        return self.vectors.get(ids, located)

    def notes_anywhere(self, ids: Iterable[str], read: Callable[[list[str]], Mapping[str, Note]]) -> dict[str, Note]:
        """Notes of any scope by id, those that exist: from the scopes' scans or kept, the others read by
        `read` (and kept)."""
        found: dict[str, Note] = {}
        with self._lock:
            scans = [rows for rows in self._rows.values() if rows is not None]
        ids = list(dict.fromkeys(ids))
        for rows in scans:
            found |= rows.get(i for i in ids if i not in found)
        missing = [i for i in ids if i not in found]
        if missing:
            found |= self.notes.get(missing, read)
        return found

    def _scope_rows(self, scope: str) -> ScopeRows | None:
        with self._lock:
            if scope in self._rows:
                self._rows.move_to_end(scope)
                return self._rows[scope]
        graph = self.get(scope)  # its tombstones: a forgotten note whose row is not erased yet is left out
        forgotten = {e.dst for e in graph.all_events() if e.kind is EventKind.FORGETS}
        rows = self.scan_scope(scope, forgotten)
        if rows is None:
            return None  # no notes yet: scanned again at the next call
        with self._lock:
            self._rows[scope] = rows if len(rows) <= ROWS_KEPT else None
            while sum(len(r) for r in self._rows.values() if r is not None) > ROWS_KEPT:
                self._rows.popitem(last=False)
        return rows

    def scope_grew(self, scope: str) -> None:
        """This process wrote notes to `scope` without keeping them (a bulk import): its kept scan, if any,
        is let go, so the next call that needs the scope's notes scans it again whole, rather than every
        later call reading the notes written since by id (at 10,000 notes imported in batches, a scan
        kept from an early batch left recall reading 20-40 notes by id a call, about 5 ms)."""
        with self._lock:
            self._rows.pop(scope, None)

    def appended(self, scope: str, events: Sequence[Event], version: int) -> None:
        """This process appended `events`, which made table `version`."""
        with self._lock:
            for graph in self._graphs.values():
                if graph.version == version - 1:
                    graph.version = version  # nothing else landed in between
                    if graph.scope == scope:
                        graph.add(events)
            # a graph at an older version stays as it is: its next `get` reads the scope again
        self._let_go(events)

    def _let_go(self, events: Iterable[Event]) -> None:
        forgotten = [e.dst for e in events if e.kind is EventKind.FORGETS]
        self.notes.drop(forgotten)
        self.vectors.drop(forgotten)
        with self._lock:  # a scan that holds a forgotten note is let go whole: its text with it
            holding = [s for s, rows in self._rows.items() if rows is not None and any(i in rows for i in forgotten)]
            for scope in holding:
                del self._rows[scope]

    def drop_all(self) -> None:
        """Drop every graph and kept note (after a delete): the next call of each scope reads it again."""
        with self._lock:
            self._graphs.clear()
            self._rows.clear()
        self.notes.clear()
        self.vectors.clear()
