"""Upkeep: when a process compacts (every few of its writes it looks whether a table is due), one
process at a time, and how a process that stops lets the upkeep under way finish first."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from functools import partial

from filelock import Timeout

from . import limits
from .compaction import _tidy_small
from .erasure import Erasure
from .indexes import _mistyped
from .retry import _until_committed
from .schema import NOTES

log = logging.getLogger(__name__)


class Upkeep(Erasure):
    """The upkeep of one store's tables: compaction and erasure, started by its writes."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        super().__init__(uri, storage_options)
        self._stopping = False  # finish_upkeep was called: no compaction starts from now on
        self._writes_since_check = 0
        self._checkers: list[threading.Thread] = []  # threads looking whether upkeep is due, then doing it
        self._checkers_lock = threading.Lock()
        remote = self.remote
        self._compact_at = limits.COMPACT_AT_FRAGMENTS_REMOTE if remote else limits.COMPACT_AT_FRAGMENTS
        self._check_every = limits.UPKEEP_CHECK_EVERY_REMOTE if remote else limits.UPKEEP_CHECK_EVERY

    def after_write(self) -> None:
        """Called after each write: every UPKEEP_CHECK_EVERY writes, a thread looks whether upkeep is due,
        unless one is still at it (looking, waiting for the lock or compacting): then the first write
        after it ends looks. Each writes' thread used to start beside those before it, and a burst of
        writes left them queued on the lock, each compacting again what the previous one had just
        compacted, for seconds after the burst (issue 36: 29 queued after 1,500 writes at 10k notes)."""
        self._writes_since_check += 1
        if self._writes_since_check < self._check_every or self._stopping:
            return
        with self._checkers_lock:
            self._checkers = [t for t in self._checkers if t.is_alive()]
            if self._checkers:
                return
            self._writes_since_check = 0
            thread = threading.Thread(target=self.compact_if_due, name="corrigenda-compact", daemon=True)
            self._checkers.append(thread)
        thread.start()

    def upkeep_due(self) -> bool:
        """Whether a table has enough small fragments, or rows no index covers yet, to compact it,
        or the notes have grown big enough for a vector index."""
        for name, table in self._tables().items():
            fragments = self._dataset(table).get_fragments()
            if sum(f.metadata.physical_rows < limits.FRAGMENT_ROWS[name] for f in fragments) >= self._compact_at:
                return True
            stats = table.index_stats("id_idx")
            if stats is not None and stats.num_unindexed_rows >= limits.REINDEX_AT:
                return True
            if name == NOTES and self._vector_index_due(table):  # (outgrown partitions wait for a compaction)
                return True
            if _mistyped(table):
                return True
        return False

    def compact_if_due(self) -> bool:
        try:
            return self.upkeep_due() and self.compact()
        except Exception:  # upkeep must never fail a caller's write
            log.exception("compaction failed; it will be tried again after later writes")
            return False

    def compact(self, keep_versions_for: timedelta = limits.KEEP_VERSIONS_FOR) -> bool:
        """Merge small fragments, bring the indexes up to date, drop versions older than
        `keep_versions_for` and the files a crash left behind; one process at a time (False:
        another process is at it)."""
        tables = self._tables()  # opened (never made) outside the lock, which making a table takes
        with self._compact_lock:
            if self._stopping:
                return False
            try:
                with self.upkeep_lock(0):
                    self.erasure_pass(tables)  # what a process that forgot and then stopped left
                    for name, table in tables.items():
                        _until_committed(partial(self.tidy, name, table, keep_versions_for), limits.UPKEEP_WAIT)
                    small = [self._lease.table() if self._lease is not None else None, self._erasures_table()]
                    for table in filter(None, small):  # each take of the lease, each pass, left a fragment
                        _tidy_small(table, keep_versions_for)
                    self.refresh()  # this process's reads use the compacted files from now on
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
        with self._eraser_lock:
            eraser = self._eraser
        if eraser is not None:
            eraser.join(timeout)
            if eraser.is_alive():
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
        if not self._compact_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        self._compact_lock.release()
        return True
