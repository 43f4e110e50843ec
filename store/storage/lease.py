"""One process at a time, across machines: the upkeep lease of a store on object storage, and the lock
file of a store on disk (`exclusive`).

On one machine's disk a lock file keeps two processes from compacting, or erasing, at once; a bucket
has no lock files. Lance alone keeps either from corrupting the tables (each commit is a conditional
write of the next version, and a compaction that another commit overtook is refused and tried
again, see retry.py), but the refused attempt leaves the files it wrote behind: after a `forget`,
such a file can still hold the forgotten text. So upkeep on object storage takes this lease first.

The lease is a small Lance table beside the notes and events, `upkeep_lease` (holder, taken_at_us).
Taking it is an update of its rows where they are free or stale, and Lance commits an update only if
no other commit changed those rows since it read them: of two processes taking it at once, one
commits, and the other is refused or re-reads and finds it taken. The rows are looked at first: Lance
commits a version even for an update that changes no row, so a poll that finds the lease taken writes
nothing. Each then reads the table back at
its latest version: the lease is the taker's if every row names it (two processes making the table
at once can leave two rows). A table found empty gets its one row, free, before a take: it is new, or
another process making it at the same moment committed its creation as an overwrite of it (Lance does
so), which also refuses an append made meanwhile; so that append is only tried, and the next take looks
again. Giving it back frees the rows that still name the holder. A holder that died leaves it taken
until LEASE_FOR has passed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from filelock import FileLock, Timeout

from .. import where

if TYPE_CHECKING:
    from lancedb.table import Table

log = logging.getLogger(__name__)

LEASE = "upkeep_lease"
# A holder that has not given the lease back after this long is taken to be gone. Longer than any
# compaction measured (building the vector index of 100k notes takes about a minute on 2 cores).
LEASE_FOR = timedelta(minutes=10)
SCHEMA = pa.schema([pa.field("holder", pa.string()), pa.field("taken_at_us", pa.int64())])
FREE = {"holder": "", "taken_at_us": 0}
POLL = 0.2  # seconds between two tries to take a lease another process holds


class Lease:
    """The upkeep lease of one store, opened with `open_table` (the store's own, race-safe opening)."""

    def __init__(self, open_table: Callable[[str, pa.Schema], Table]) -> None:
        self._open_table = open_table
        self._table: Table | None = None
        self.holder = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"

    def table(self) -> Table:
        """The lease's table (its upkeep: upkeep.py, `compact`)."""
        if self._table is None:
            self._table = self._open_table(LEASE, SCHEMA)
        return self._table

    @contextmanager
    def held(self, wait: float) -> Iterator[None]:
        """Hold the lease for the block; raises filelock's Timeout after `wait` seconds if another
        process holds it all that time (0: one try)."""
        deadline = time.monotonic() + wait
        while not self._take():
            if time.monotonic() >= deadline:
                raise Timeout(LEASE)
            time.sleep(POLL)
        try:
            yield
        finally:
            self._give_back()

    def _take(self) -> bool:
        table = self.table()
        now = datetime.now(UTC)
        taken = {"holder": self.holder, "taken_at_us": where.to_micros(now)}
        table.checkout_latest()  # the store's connections check only when told (handles.py)
        taken_at = table.search().select(["taken_at_us"]).limit(None).to_arrow()["taken_at_us"].to_pylist()
        if not taken_at:  # new, or made again by another process: its one row, free
            try:
                table.add(pa.Table.from_pylist([FREE], schema=SCHEMA))
            except Exception as exc:  # another process made it again meanwhile (module docstring)
                log.info("seeding the upkeep lease met another process making its table (%s)", exc)
                return False
        elif min(taken_at) >= where.to_micros(now - LEASE_FOR):
            # Every row taken, and not stale (where.lease_free): no update, which would commit a
            # version even with no row to change, one a poll.
            return False
        try:
            table.update(where=where.lease_free(now - LEASE_FOR), values=taken)
        except Exception as exc:  # another process's update of the same rows came first
            log.debug("taking the upkeep lease met another process (%s)", exc)
        table.checkout_latest()
        holders = set(table.search().select(["holder"]).limit(None).to_arrow()["holder"].to_pylist())
        if holders == {self.holder}:
            return True
        if self.holder in holders:  # some rows only: another process holds the rest
            self._give_back()
        return False

    def _give_back(self) -> None:
        with contextlib.suppress(Exception):  # if this fails, the lease is stale after LEASE_FOR
            table = self.table()
            table.checkout_latest()
            table.update(where=where.held_by(self.holder), values=FREE)


def exclusive(uri: str, lease: Lease | None, wait: float) -> AbstractContextManager[Any]:
    """One process at a time, for upkeep and erasure: a lock file beside a store on disk, the
    upkeep lease on object storage (`lease`, None on disk). Raises filelock's Timeout after `wait` seconds."""
    if lease is not None:
        return lease.held(wait)
    return FileLock(os.path.join(uri, ".compact.lock"), timeout=wait)
