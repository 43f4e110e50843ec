"""LanceDB access: the notes and events tables, both append-only (module docstring of handles.py:
each operation starts with `refresh()`, reads go to each table's view, writes are appends through it).

A write that adds a note and its edges is two appends in two tables, and Lance commits each
table on its own. So the edges go first and the note's row is the commit point: the fold
ignores an edge whose note is not stored, so until the note lands its edges are invisible,
and once it lands they are all there. A crash in between leaves edges that name no note,
which nothing ever shows (docs/design.md, "How it works").

`Tables` is the facade of the storage package (storage/), layered, each module using only those
below it:

- schema.py: the on-disk layout and the row codec; limits.py: the numbers; location.py: what the
  URI's storage is; retry.py: what is tried again, and how.
- indexes.py, then handles.py (opening the tables, their views and the version rules; lease.py: the
  lock and the lease).
- search.py (the reads of notes: by id, whole scopes, the two searches) and events.py (the reads of
  edges), and, on a branch of their own, compaction.py, erasure.py and upkeep.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from . import where
from .model import Event, Note
from .storage.events import EventReads
from .storage.schema import EVENT_SCHEMA, EVENT_STORED, EVENTS, NOTE_STORED, NOTES, Hit, ScopeRows, row_of
from .storage.search import Search
from .storage.upkeep import Upkeep

__all__ = ["EVENTS", "NOTES", "Hit", "ScopeRows", "Tables"]


class Tables(Search, EventReads, Upkeep):
    """The two tables of one store, opened lazily (importing lancedb takes about a second)."""

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
        table = self._ensure_notes(model, len(notes[0][1]))
        version = self.add_events(events) if events else None
        rows = [
            row_of(note, NOTE_STORED) | {"dense_ok": dense_ok, "vector": list(vector)}
            for note, vector, dense_ok in notes
        ]
        committed = self._append(table, pa.Table.from_pylist(rows, schema=self.view(table).schema))
        self.after_write()
        return version, committed

    def notes_committed_before(self, version: int, ids: Sequence[str]) -> set[str] | None:
        """Those of `ids` whose note was committed before `version` of the notes table (the version a
        write's note made): what that write raced with. None when that version is no longer kept."""
        table = self.notes_table()
        rows = None if table is None else self.committed_before(table, version, where.id_in(ids), ["id"])
        return None if rows is None else set(rows["id"].to_pylist())

    def add_events(self, events: Sequence[Event]) -> int:
        """Append events in one write; returns the table version it made."""
        rows = [row_of(e, EVENT_STORED) for e in events]
        version = self._append(self.events_table(), pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))
        self.after_write()
        return version
