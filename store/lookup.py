"""How the engine's reads and writes find what they need: a reader of one scope for one call, a note by
id, and the fold around some notes, with the version of the events table it read (a write compares
that with the version its own commit made: commit.py, `refuse_if_raced`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from .errors import NotFound
from .fold import Fold
from .graph import Graphs
from .ids import NOTE_PREFIX, check_id
from .model import Note
from .reader import ScopeReader
from .tables import Tables


class Lookup:
    def __init__(self, tables: Tables, graphs: Graphs) -> None:
        self.tables = tables
        self.graphs = graphs
        self.loaded = threading.local()  # the events table's version of the last fold this thread loaded

    def reader(self, scope: str, also: Sequence[Note] = ()) -> ScopeReader:
        """A reader of `scope` for one call (reader.py): what recall and the writes' checks read through.
        It reads the store as this process last caught up with it: an operation (`recall`, a write)
        catches up first; a caller outside one calls `tables.handles.refresh()` before, if it must see every
        process's latest writes."""
        return ScopeReader(self.tables, self.graphs, scope, also)

    def load(self, scope: str, at: datetime, around: Sequence[Note]) -> Fold:
        """The fold of the chains and prerequisites of `around` (notes already read), with the version it
        read kept for the write's race check."""
        reader = self.reader(scope)
        folded = reader.fold(around, at)
        self.loaded.version = reader.version
        return folded

    def note(self, note_id: str, field: str) -> Note:
        """The note a write or a look names, kept or read (whether it still exists is for the fold to say:
        a kept note another process forgot is dropped by its tombstone)."""
        check_id(note_id, field, prefix=NOTE_PREFIX)
        found = self.graphs.notes_anywhere([note_id], self.tables.search.notes)
        if note_id not in found:
            # Before saying so, one more look at the latest version: in a bucket test, a server's read
            # once missed a note another server had just acknowledged (docs/faults.md, "Known limits").
            self.tables.handles.refresh()
            found = self.tables.search.notes([note_id])
        if note_id not in found:
            raise NotFound("note", note_id, field)
        return found[note_id]
