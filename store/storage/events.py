"""Reading the events table: a scope's edges whole or since a version (what graph.py keeps), one edge
by id, a note's tombstone, and what a write raced with; through the views of handles.py."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from .. import where
from ..model import Event, EventKind
from . import limits
from .handles import Handles
from .retry import _missing_file
from .schema import event_from_row

if TYPE_CHECKING:
    from lance.dataset import LanceDataset


class EventReads:
    """The reads of one store's events table, through its `handles`."""

    def __init__(self, handles: Handles) -> None:
        self.handles = handles

    def events_version(self) -> int:
        return int(self.handles.view(self.handles.events_table()).version)

    def scope_events(self, scope: str) -> tuple[int, list[Event]]:
        """Every event of a scope, and the table version it was read at (read first: see graph.py)."""
        table = self.handles.events_table()

        def read() -> tuple[int, pa.Table]:
            view = self.handles.view(table)
            return view.version, view.to_table(filter=where.scope_is(scope), prefilter=True)

        version, rows = self.handles.read(read)
        return version, [event_from_row(row) for row in rows.to_pylist()]

    def events_since(self, version: int, scope: str) -> tuple[int, list[Event]] | None:
        """The events of a scope that the versions after `version` of the events table appended, up to
        the version the view holds, with that version: what a graph read at `version` lacks. None when
        they cannot be told from the rest, and the scope must be read whole: a version did more than
        append, compact or bring an index up to date (a `forget` deletes), its transaction is gone, a
        compaction rewrote what was appended since, or more than EVENTS_SINCE_MAX versions came."""
        table = self.handles.events_table()

        def read() -> tuple[int, list[Event]] | None:
            view = self.handles.view(table)
            latest = view.version
            if not 0 <= latest - version <= limits.EVENTS_SINCE_MAX:
                return None
            try:
                # on a copy: pylance's read_transaction borrows the dataset mutably, and another thread's
                # look at the shared view meanwhile fails ("Already mutably borrowed")
                appended = _appended_since(copy.copy(view), version, latest)
            except Exception as exc:  # a version's manifest or transaction was cleaned up
                if not _missing_file(exc):
                    raise
                return None
            if appended is None:
                return None
            fragments = [f for f in view.get_fragments() if {d.path for d in f.data_files()} & appended]
            if sum(len(f.data_files()) for f in fragments) != len(appended):
                return None  # some of it is no longer where it was appended
            if not fragments:
                return latest, []
            rows = view.scanner(filter=where.scope_is(scope), fragments=fragments).to_table()
            return latest, [event_from_row(row) for row in rows.to_pylist()]

        return self.handles.read(read)

    @property
    def catch_up_from(self) -> int:
        """The fewest events a scope's graph holds for `events_since` to cost less than reading the
        scope again: any on disk; CATCH_UP_FROM_REMOTE on an object store, where each version is requests."""
        return self.handles.location.catch_up_from

    def tombstone(self, note_id: str) -> Event | None:
        """The `forgets` event of a note, if it was forgotten."""
        clause = where.all_of(where.id_in([note_id], "dst"), where.kind_is(EventKind.FORGETS.value))
        rows = self.handles.scan(self.handles.events_table(), None, clause, limit=1).to_pylist()
        return event_from_row(rows[0]) if rows else None

    def event(self, event_id: str) -> Event | None:
        rows = self.handles.scan(self.handles.events_table(), None, where.id_in([event_id]), limit=1).to_pylist()
        return event_from_row(rows[0]) if rows else None

    def events_committed_before(
        self, version: int, kinds: Iterable[EventKind], dsts: Iterable[str]
    ) -> list[Event] | None:
        """The events of these kinds naming one of `dsts` that were committed before `version` of the
        events table: what a write that made `version` raced with. None when that version is no longer
        kept (`committed_before`)."""
        clause = where.all_of(where.id_in(dsts, "dst"), where.kind_in(k.value for k in kinds))
        rows = self.handles.committed_before(self.handles.events_table(), version, clause)
        return None if rows is None else [event_from_row(row) for row in rows.to_pylist()]

    def catch_up_events(self) -> None:
        self.handles.catch_up(self.handles.events_table())


def _appended_since(view: LanceDataset, version: int, latest: int) -> set[str] | None:
    """The data files the versions after `version` up to `latest` appended, if they did nothing else
    that changes what the table holds: index upkeep and compactions, which keep every row, come and go;
    anything else gives None. pylance 13 shows Lance's reservation of fragment ids before a compaction
    as a bare BaseOperation, and cannot decode a compaction that remapped indexes (a TypeError): a
    version it cannot decode counts as a compaction when it neither adds nor removes a row."""
    from lance import LanceOperation as Op

    appended: set[str] = set()
    for v in range(version + 1, latest + 1):
        try:
            operation = getattr(view.read_transaction(v), "operation", None)
        except Exception as exc:
            if _missing_file(exc):
                raise
            if view.checkout_version(v - 1).count_rows() != view.checkout_version(v).count_rows():
                return None
            continue
        if isinstance(operation, Op.Append):
            appended |= {f.path for fragment in operation.fragments for f in fragment.files}
        elif not isinstance(operation, Op.Rewrite | Op.CreateIndex) and type(operation) is not Op.BaseOperation:
            return None  # a delete, an overwrite, an update, or no transaction kept
    return appended
