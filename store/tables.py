"""LanceDB access: the notes and events tables, both append-only (module docstring of handles.py:
each operation starts with `refresh()`, reads go to each table's view, writes are appends through it).

A write that adds a note and its edges is two appends in two tables, and Lance commits each
table on its own. So the edges go first and the note's row is the commit point: the fold
ignores an edge whose note is not stored, so until the note lands its edges are invisible,
and once it lands they are all there. A crash in between leaves edges that name no note,
which nothing ever shows (docs/design.md, "How it works").

`Tables` composes the storage package (storage/), each part a class handed what it uses:

- schema.py: the on-disk layout and the row codec; limits.py: the numbers; location.py: what the
  URI's storage is (a `Location`, chosen once here); retry.py: what is tried again, and how.
- `Indexes` (indexes.py): which indexes each table wants, made and reshaped; handed nothing.
- `Handles` (handles.py), handed the location and the indexes: opening the tables, their views, the
  version rules, the appends; it makes the lease of a bucket's upkeep (lease.py).
- `Search` (search.py: the reads of notes: by id, whole scopes, the two searches) and `EventReads`
  (events.py: the reads of edges), each handed the handles.
- `Compaction` (handles, indexes), `Erasure` (handles, compaction) and `Upkeep` (handles, compaction,
  erasure): the last two share the lock that lets one pass at a time run in this process.

Callers reach each part by its name (`tables.search.notes(...)`, `tables.upkeep.compact()`); `Tables`
itself holds the two appends that are a write (`commit_notes`, `add_events`), which the upkeep follows.
Which class makes each part is `Parts`: the real ones, unless a test hands a subclass of one, to make a
fault where the product has none or to watch a part's calls (tests/test_seam.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from . import where
from .graph import Graphs
from .model import Event, Note
from .storage.compaction import Compaction
from .storage.erasure import Erasure
from .storage.events import EventReads
from .storage.handles import Handles
from .storage.indexes import Indexes
from .storage.location import Location
from .storage.schema import EVENT_SCHEMA, EVENT_STORED, EVENTS, NOTE_STORED, NOTES, Hit, ScopeRows, row_of
from .storage.search import Search
from .storage.upkeep import Upkeep

__all__ = ["EVENTS", "NOTES", "REAL_PARTS", "Hit", "Parts", "ScopeRows", "Tables"]


@dataclass(frozen=True)
class Parts:
    """The class of each part of a store: those of the storage, which `Tables` composes, and of the kept
    graphs, which `Memory` composes. The real ones by default; a test that needs a fault, or to count a
    part's calls, hands a subclass of one (`Parts(handles=CutAfterEvents)`) to `Tables` or `Memory`."""

    handles: type[Handles] = Handles
    indexes: type[Indexes] = Indexes
    search: type[Search] = Search
    events: type[EventReads] = EventReads
    compaction: type[Compaction] = Compaction
    erasure: type[Erasure] = Erasure
    upkeep: type[Upkeep] = Upkeep
    graphs: type[Graphs] = Graphs


REAL_PARTS = Parts()  # what a store is made of unless a test hands other parts


class Tables:
    """The two tables of one store, opened lazily (importing lancedb takes about a second): the parts of
    the storage package, composed here and nowhere else (module docstring)."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None, parts: Parts = REAL_PARTS) -> None:
        self.uri = uri
        location = Location.of(uri)  # what differs between a directory and a bucket, asked there
        location.check()
        self.indexes = parts.indexes()
        self.handles = parts.handles(uri, location, self.indexes, storage_options)
        self.search = parts.search(self.handles)
        self.events = parts.events(self.handles)
        self.compaction = parts.compaction(self.handles, self.indexes)
        passes = threading.Lock()  # one pass of upkeep or erasure at a time in this process
        self.erasure = parts.erasure(self.handles, self.compaction, passes)
        self.upkeep = parts.upkeep(self.handles, self.compaction, self.erasure, passes)

    def add_notes(
        self, notes: Sequence[tuple[Note, Sequence[float], bool]], model: str, events: Sequence[Event] = ()
    ) -> int | None:
        """Notes with their embeddings and whether the model could read them, and the edges written
        with them: the edges first, then the notes in one write, their commit point (module docstring).
        Returns the events table version the edges made, if any (`commit_notes` the notes table's too)."""
        return self.commit_notes(notes, model, events)[0]

    def commit_notes(
        self, notes: Sequence[tuple[Note, Sequence[float], bool]], model: str, events: Sequence[Event] = ()
    ) -> tuple[int | None, int | None]:
        """`add_notes`, returning the versions it made: the events table's (None without edges) and the
        notes table's (None without notes)."""
        if not notes:
            return self.add_events(events) if events else None, None
        table = self.handles.ensure_notes(model, len(notes[0][1]))
        version = self.add_events(events) if events else None
        rows = [
            row_of(note, NOTE_STORED) | {"dense_ok": dense_ok, "vector": list(vector)}
            for note, vector, dense_ok in notes
        ]
        committed = self.handles.append(table, pa.Table.from_pylist(rows, schema=self.handles.view(table).schema))
        self.upkeep.after_write()
        return version, committed

    def notes_committed_before(self, version: int, ids: Sequence[str]) -> set[str] | None:
        """Those of `ids` whose note was committed before `version` of the notes table (the version a
        write's note made): what that write raced with. None when that version is no longer kept."""
        table = self.handles.notes_table()
        rows = None if table is None else self.handles.committed_before(table, version, where.id_in(ids), ["id"])
        return None if rows is None else set(rows["id"].to_pylist())

    def add_events(self, events: Sequence[Event]) -> int:
        """Append events in one write; returns the table version it made."""
        rows = [row_of(e, EVENT_STORED) for e in events]
        version = self.handles.append(self.handles.events_table(), pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))
        self.upkeep.after_write()
        return version
