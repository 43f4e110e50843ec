"""Upkeep: when a process compacts (every few of its writes it looks whether a table is due), one
process at a time, and how a process that stops lets the upkeep under way finish first."""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
import weakref
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from filelock import Timeout

from . import limits
from .compaction import Compaction, _tidy_small
from .erasure import Erasure
from .handles import Handles
from .indexes import unwanted_indexes
from .retry import _until_committed
from .schema import NOTES

if TYPE_CHECKING:
    from lance.dataset import LanceDataset

log = logging.getLogger(__name__)

# Every store of this process, so that its background work can end before the interpreter does
_STORES: weakref.WeakSet[Upkeep] = weakref.WeakSet()


@atexit.register
def _finish_at_exit() -> None:
    """At the interpreter's exit, before it stops the daemon threads: let each store's compaction and
    erasures end (`finish_upkeep`), as `Memory.close` would. A process that exits while one of them is
    inside Lance's native code aborts; the writes stay safe, but the program ends with a crash."""
    for store in list(_STORES):
        if not store.finish_upkeep():
            log.warning("exiting while %s's upkeep is still under way", store.handles.uri)
    if not _native_threads_left_python(limits.NATIVE_EXIT_WAIT):
        log.warning("exiting while a native thread still runs Python code")


def _native_threads_left_python(wait: float) -> bool:
    """Wait up to `wait` seconds for the threads that Python did not start (Lance's and LanceDB's
    workers) to leave the Python code they run; whether none runs any now. LanceDB's worker hands each
    result to its event loop in Python, and lets go of the interpreter to wake the loop: the call that
    waited returns, and the program can end before the worker takes the interpreter back. A worker
    that comes back to an interpreter shutting down is stopped by it, inside Rust, which aborts the
    process ("Fatal Python error: PyGILState_Release: thread state ... must be current when releasing": in
    1 of 4 CI runs, test_processes.py's program that ends while its store compacts)."""
    deadline = time.monotonic() + wait
    while True:
        started_here = {t.ident for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
        if all(ident in started_here for ident in sys._current_frames()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)  # lets go of the interpreter, so such a worker can take it and finish


class Upkeep:
    """The upkeep of one store's tables, started by its writes: `compaction` of the tables its `handles`
    open, and the `erasure` passes a stopped process left, one pass at a time in this process (`passes`)."""

    def __init__(self, handles: Handles, compaction: Compaction, erasure: Erasure, passes: threading.Lock) -> None:
        self.handles = handles
        self.compaction = compaction
        self.erasure = erasure
        self.passes = passes
        self._stopping = False  # finish_upkeep was called: no compaction starts from now on
        self._writes_since_check = 0
        self._checkers: list[threading.Thread] = []  # threads looking whether upkeep is due, then doing it
        self._checkers_lock = threading.Lock()
        self._looking = False  # a checker is at it (under _checkers_lock): writes start none beside it
        self._compact_at = handles.location.compact_at
        self._check_every = handles.location.upkeep_check_every
        _STORES.add(self)

    def after_write(self) -> None:
        """Called after each write: every UPKEEP_CHECK_EVERY writes, a thread looks whether upkeep is due
        (`_look`), unless one is at it already (looking, waiting for the lock or compacting). So a burst
        of writes leaves at most one look under way, never a queue of compactions that each redo what
        the one before did."""
        self._writes_since_check += 1
        if self._writes_since_check < self._check_every or self._stopping:
            return
        with self._checkers_lock:
            if self._looking:
                return  # that look goes again when it ends (`_look`)
            self._looking = True
            self._writes_since_check = 0
            self._checkers = [t for t in self._checkers if t.is_alive()]
            thread = threading.Thread(target=self._look, name="corrigenda-compact", daemon=True)
            self._checkers.append(thread)
        thread.start()

    def _look(self) -> None:
        """Compact what is due (`compact_if_due`), and again for as long as UPKEEP_CHECK_EVERY writes or
        more came while it did: the last writes of a burst are looked at when the look under way ends,
        not at a next write that may never come. (At 100k notes, the last 1.7 s of a burst of links
        landed during one look's compaction, which ended after them: the events table was left with 289
        fragments, and every read paid for them until the next writes.)"""
        done = False
        try:
            while not done:
                self.compact_if_due()
                with self._checkers_lock:  # decided and let go under one lock: a write in between starts a look
                    done = self._stopping or self._writes_since_check < self._check_every
                    if done:
                        self._looking = False
                    else:
                        self._writes_since_check = 0
        finally:
            if not done:  # it failed: a look left marked as under way would stop this process's upkeep for good
                with self._checkers_lock:
                    self._looking = False

    def upkeep_due(self, latest: bool = True) -> bool:
        """Whether a table has enough small fragments, or rows no index covers yet, to compact it,
        or the notes have grown big enough for a vector index, or an index is not as wanted (of
        another type than SCALAR_INDEXES says, or, for full text, other settings than FULL_TEXT: a
        store made before they said so is indexed again): at the tables' latest versions, or (not
        `latest`) as this process's views stand (`_due`)."""
        return bool(self._due(latest))

    def _due(self, latest: bool) -> set[str]:
        """The tables due for upkeep (`upkeep_due`), read from each table's manifest alone: the
        fragments, their rows, and each index's type and the fragments it covers are all there. Asking
        the LanceDB table instead (index statistics, its index list twice, its row count) cost a bucket
        reads of the indexes' files on each look. `latest`: caught up first (on a bucket a listing a
        table, and a manifest read if another process wrote since); else as this process's views
        stand, which its last call caught up and its own writes moved: what the look after a write
        reads, since a process looks every few writes and compaction looks again, on the latest
        versions, under the lease (`compact`)."""
        due = set()
        for name, table in self.handles.tables().items():
            if latest:
                self.handles.catch_up(table)
            if _table_due(name, self.handles.view(table), self._compact_at):
                due.add(name)
        return due

    def compact_if_due(self) -> bool:
        """Compact the tables due, if any (`compact`); what a process's writes set off every few writes."""
        try:
            return self.upkeep_due(latest=False) and self.compact(only_due=True)
        except Exception:  # upkeep must never fail a caller's write
            log.exception("compaction failed; it will be tried again after later writes")
            return False

    def compact(self, keep_versions_for: timedelta = limits.KEEP_VERSIONS_FOR, only_due: bool = False) -> bool:
        """Merge small fragments, bring the indexes up to date, drop versions older than
        `keep_versions_for` and the files a crash left behind; one process at a time (False:
        another process is at it). `only_due`: only the tables due on their latest versions, looked at
        once this process holds the lease (False: none is, another process compacted them since this
        one looked: on the three-server bench half the compactions were such second ones)."""
        tables = self.handles.tables()  # opened (never made) outside the lock, which making a table takes
        with self.passes:
            if self._stopping:
                return False
            try:
                with self.handles.upkeep_lock(0):
                    self.erasure.erasure_pass(tables)  # what a process that forgot and then stopped left
                    if only_due:
                        due = self._due(latest=True)
                        if not due:
                            return False
                        tables = {name: table for name, table in tables.items() if name in due}
                    for name, table in tables.items():
                        _until_committed(
                            partial(self.compaction.tidy, name, table, keep_versions_for), limits.UPKEEP_WAIT
                        )
                    lease = self.handles.lease
                    small = [lease.table() if lease is not None else None, self.handles.erasures_table()]
                    for table in filter(None, small):  # each take of the lease, each pass, left a fragment
                        _tidy_small(table, keep_versions_for)
                    self.handles.refresh()  # this process's reads use the compacted files from now on
                    return True
            except Timeout:
                return False

    def finish_upkeep(self, timeout: float = limits.ERASE_WAIT) -> bool:
        """Before the process stops: wait up to `timeout` seconds for its erasure thread, for its threads
        looking whether upkeep is due and for a compaction under way, and start none after; whether
        none is running now. (A
        process that stops while it compacts a bucket leaves the upkeep lease taken for LEASE_FOR,
        and every other process's erasures wait that long.)"""
        deadline = time.monotonic() + timeout
        self._stopping = True
        if not self.erasure.finish(timeout):
            return False
        # A thread still looking whether upkeep is due runs outside the compaction lock, inside Lance's
        # native code: a process that exits under it can abort (issue 35 item 11's suspected cause).
        with self._checkers_lock:
            checkers = list(self._checkers)
        for thread in checkers:
            if thread is threading.current_thread():
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                return False
        if not self.passes.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        self.passes.release()
        return True


def _table_due(name: str, view: LanceDataset, compact_at: int) -> bool:
    """Whether one table, at `view`'s version, is due for upkeep (`Upkeep.upkeep_due`)."""
    fragments = view.get_fragments()
    if sum(f.metadata.physical_rows < limits.FRAGMENT_ROWS[name] for f in fragments) >= compact_at:
        return True
    indexes = view.describe_indices()
    by_id = [index for index in indexes if index.name == "id_idx"]
    covered = {f for index in by_id for segment in index.segments for f in segment.fragment_ids}
    unindexed = sum(f.metadata.physical_rows for f in fragments if f.fragment_id not in covered)
    if by_id and unindexed >= limits.REINDEX_AT:
        return True
    vector_indexed = any(index.field_names == ["vector"] for index in indexes)
    rows = sum(f.metadata.num_rows for f in fragments)
    if name == NOTES and not vector_indexed and rows >= limits.VECTOR_INDEX_AT:
        return True  # (outgrown partitions wait for a compaction)
    return bool(unwanted_indexes(name, view))
