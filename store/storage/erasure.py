"""Erasure, under its own name: a forgotten note removed from every file of the store.

`forget` appends a `forgets` tombstone: from then on the note does not exist for any reader.
Then an erasure pass removes it from every file. A pass erases every forgotten note no pass
has finished (each it finishes gets a row in the `erasures` table), in one rewrite of the files,
one process at a time: forgets that come while a pass runs are erased by the next, together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
from filelock import Timeout

from .. import where
from ..model import EventKind
from . import limits
from .compaction import Compaction
from .handles import Handles
from .retry import _reading, _until_committed
from .schema import _ERASURE_SCHEMA

if TYPE_CHECKING:
    from lancedb.table import Table

log = logging.getLogger(__name__)


class Erasure:
    """The erasure passes of one store, through its `handles`, each rewriting the files with `compaction`,
    holding `passes` (one pass of upkeep or erasure at a time in this process: upkeep's hold it too)."""

    def __init__(self, handles: Handles, compaction: Compaction, passes: threading.Lock) -> None:
        self.handles = handles
        self.compaction = compaction
        self.passes = passes
        # On object storage an erasure pass takes 1-5 s (docs/object-storage.md, "Measured"): `forget` answers once
        # its tombstone is committed, and a thread of this process erases (erase_soon).
        self.erase_later = handles.location.erases_later  # a test sets it on a directory
        self._eraser: threading.Thread | None = None
        self._eraser_lock = threading.Lock()
        self._erase_again = False

    def erasure_events(self, note_ids: Collection[str], also: Collection[str] = ()) -> list[str]:
        """The events an erasure of these notes removes: every event naming one of them but their
        `forgets` tombstones, the events `also` names, and every event naming one of those (a
        reinstates of a revokes)."""
        events = self.handles.events_table()
        named = self.handles.scan(events, ["id", "kind"], where.naming(note_ids))
        first = [
            i
            for i, k in zip(named["id"].to_pylist(), named["kind"].to_pylist(), strict=True)
            if k != EventKind.FORGETS.value
        ] + list(also)
        second = self.handles.scan(events, ["id"], where.id_in(first, "dst"))
        return sorted(set(first) | set(second["id"].to_pylist()))

    def erased(self, note_ids: Collection[str] | None = None) -> set[str]:
        """Those of these notes (None: of all) whose erasure a pass has finished."""
        table = self.handles.erasures_table()
        if table is None or (note_ids is not None and not note_ids):
            return set()
        clause = None if note_ids is None else where.id_in(note_ids, "note_id")

        def read() -> set[str]:
            table.checkout_latest()  # only erasure passes write it, under the lock of upkeep
            return set(table.to_lance().to_table(columns=["note_id"], filter=clause)["note_id"].to_pylist())

        # a compaction's cleanup removed a file of the version read: read the latest again
        return _reading(read, lambda exc: None)

    def unerased(self) -> list[str]:
        """Forgotten notes whose erasure no pass has finished: one under way, or cut short."""
        tombstones = self.handles.scan(self.handles.events_table(), ["dst"], where.kind_is(EventKind.FORGETS.value))
        forgotten = set(tombstones["dst"].to_pylist())
        return sorted(forgotten - self.erased()) if forgotten else []

    def erase_forgotten(self, wait: float = limits.ERASE_WAIT, events: Collection[str] = ()) -> list[str]:
        """An erasure pass, if any forgotten note waits for one or `events` are given (events to erase
        besides: those of a write that named a note a forget had just erased, Memory._refuse_if_raced);
        returns the notes it erased. Waits up to `wait` seconds for another process's upkeep or erasure
        (filelock's Timeout after), looking again meanwhile whether that erased them: when it returns,
        every note forgotten before the call is erased, by this pass or another process's."""
        deadline = time.monotonic() + wait
        tables = self.handles.tables()  # opened (never made) outside the lock, which making a table takes
        while events or self.unerased():
            try:
                with self.passes, self.handles.upkeep_lock(0):
                    return self.erasure_pass(tables, events)
            except Timeout:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(limits.ERASE_POLL)
        return []

    def erasure_pass(self, tables: Mapping[str, Table], events: Collection[str] = ()) -> list[str]:
        """An erasure pass, under the lock of upkeep: each unerased note, and the events
        `erasure_events` names (with `events`), deleted from the live data and from every file on disk.

        Lance only marks a deleted row as deleted until enough of its file is; so each file that
        holds one is rewritten without it, and older versions (which still hold it) are removed. A pass
        cut short leaves its notes unmarked, and the next one does it all again (deleting twice is
        harmless)."""
        self.handles.refresh()  # what the holder before this one left: the files of older versions may be gone
        notes = self.unerased()
        if not notes and not events:
            return []
        started = time.monotonic()
        removed = self.erasure_events(notes, events)
        notes_table = self.handles.notes_table()
        if notes_table is not None:
            _until_committed(partial(_delete, notes_table, where.id_in(notes)), limits.ERASE_WAIT)
        if removed:
            _until_committed(partial(_delete, self.handles.events_table(), where.id_in(removed)), limits.ERASE_WAIT)
        for name, table in tables.items():
            # Rewrite every file holding a deleted row, this pass's or a cut pass's (whose delete
            # landed but whose rewrite did not), then the indexes, then drop the versions that
            # still hold the rows.
            _until_committed(partial(self.compaction.tidy, name, table, timedelta(0), erasing=True), limits.ERASE_WAIT)
        if notes:
            erased_at = where.to_micros(datetime.now(UTC))
            marks = [{"note_id": n, "erased_at_us": erased_at} for n in notes]
            self.handles.erasures_table(make=True).add(pa.Table.from_pylist(marks, schema=_ERASURE_SCHEMA))  # type: ignore[union-attr]
        self.handles.refresh()
        took = time.monotonic() - started
        if notes:
            log.info("erased %d forgotten note%s from the files in %.1f s", len(notes), _s(notes), took)
        else:
            log.info(
                "erased %d event%s of a write that named a forgotten note in %.1f s", len(removed), _s(removed), took
            )
        return notes

    def erase_soon(self) -> None:
        """Run erasure passes on a thread of this process until none is waiting (one thread at a time:
        asked while one runs, it makes one more pass). A pass that fails is left to the next upkeep."""
        with self._eraser_lock:
            self._erase_again = True
            if self._eraser is None:
                self._eraser = threading.Thread(target=self._erase_while_asked, name="corrigenda-erase", daemon=True)
                self._eraser.start()

    def finish(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the erasure thread, if one runs; whether none runs now."""
        with self._eraser_lock:
            eraser = self._eraser
        if eraser is not None:
            eraser.join(timeout)
            return not eraser.is_alive()
        return True

    def _erase_while_asked(self) -> None:
        while True:
            with self._eraser_lock:
                if not self._erase_again:
                    self._eraser = None
                    return
                self._erase_again = False
            try:
                self.erase_forgotten()
            except Exception:
                log.exception("erasing forgotten notes failed; the next upkeep pass, on any process, tries again")


def _s(items: Collection[object]) -> str:
    return "" if len(items) == 1 else "s"


def _delete(table: Table, clause: str) -> None:
    """Delete the rows matching `clause` in the latest version: the rows other processes appended
    since this one last looked included."""
    table.checkout_latest()
    table.delete(clause)
