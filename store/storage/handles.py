"""The tables' handles and their views: opening (or making) each table with its indexes, and the
version rules, all here.

Each operation starts with `refresh()`, which moves each table's view to its latest version: it then
sees every write any process made before it began, and its reads within check no further (on an
object store each check is a listing of the table's versions: a remember made twenty of them when
every read checked). Reads go to the view, the Lance dataset under each table (`view`), which this
process's own writes move too, and which only moves forward, whichever of its threads moves it. The
same query through LanceDB's query builder cost 5-6 ms more each, and asking a LanceDB table for its
version about 0.2-0.8 ms, where the dataset answers in microseconds (docs/scale.md, "Scale").
Writes are appends through the view (`append_rows`), which never conflict in Lance; a real delete happens
only in `forget`. Ids are made by the writer, so a retried append can leave a duplicate row: readers
keep the first row of each id.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from .. import where
from ..errors import ModelMismatch, StoreUnavailable, StoreUnreachable
from . import limits
from .indexes import Indexes, indexed_columns, wanted_indexes
from .lease import Lease, exclusive
from .location import Location
from .retry import _committed, _creating, _missing_file, _reading, _store_problem
from .schema import _ERASURE_SCHEMA, ERASURES, EVENT_SCHEMA, EVENTS, MODEL_KEY, NOTES, note_schema

if TYPE_CHECKING:
    from lance.dataset import LanceDataset
    from lancedb.db import DBConnection
    from lancedb.table import Table

log = logging.getLogger(__name__)

T = TypeVar("T")

_REFRESHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corrigenda-refresh")


class Handles:
    """The tables of one store and a view of each, opened lazily (importing lancedb takes about a second).
    Handed the store's `location` (what differs between a directory and a bucket, asked there) and its
    `indexes`, which every table it opens or makes is given; it makes the `lease` of a bucket's upkeep."""

    def __init__(
        self, uri: str, location: Location, indexes: Indexes, storage_options: dict[str, str] | None = None
    ) -> None:
        self.uri = uri
        self._storage_options = storage_options
        self.location = location
        self.indexes = indexes
        self._db: DBConnection | None = None
        self._notes: Table | None = None
        self._events: Table | None = None
        self._erasures: Table | None = None
        self._open_lock = threading.Lock()
        self.lease = Lease(self.open_or_create) if self.location.uses_lease else None
        self._model: tuple[str, int] | None = None  # stored_model(), once the notes table exists
        self._views: dict[str, LanceDataset] = {}  # table name -> its dataset, for reads (view)
        self._views_lock = threading.Lock()

    # -- opening -----------------------------------------------------------------------------

    @property
    def db(self) -> DBConnection:
        with self._open_lock:
            if self._db is None:
                import lancedb

                if self.location.directory is not None:
                    os.makedirs(self.location.directory, exist_ok=True)
                try:
                    # No check of its own before each read: refresh() does it once per operation.
                    db = lancedb.connect(
                        self.uri, read_consistency_interval=None, storage_options=self._storage_options
                    )
                    db.list_tables()  # a bucket is first reached here: say what is wrong, in one line
                except Exception as exc:
                    if self.location.directory is not None:  # a disk's errors are its own
                        raise
                    raise StoreUnreachable(self.uri, _store_problem(exc)) from exc
                self._db = db
            return self._db

    def outage(self, exc: Exception) -> StoreUnavailable | None:
        """The error to give for `exc` if it means an object store stopped answering, else None."""
        if not self.location.unreachable(exc):
            return None
        return StoreUnavailable(self.uri, _store_problem(exc))

    def removed(self) -> bool:
        """Whether the store's directory on this machine's disk is gone since this process opened one of
        its tables (a bucket's never is: it names no directory)."""
        directory = self.location.directory
        opened = self._notes is not None or self._events is not None
        return directory is not None and opened and not os.path.isdir(directory)

    def refresh(self) -> None:
        """See every write made so far, by any process: the start of each operation (module docstring).
        On a bucket the tables are caught up at once, each a listing and, if it moved, a manifest read."""
        tables = [t for t in (self._notes, self._events) if t is not None]
        if self.location.refreshes_tables_at_once and len(tables) == 2:
            beside = _REFRESHES.submit(self.read, partial(self._catch_up, tables[1]))
            self.read(partial(self._catch_up, tables[0]))
            beside.result()
            return
        for table in tables:
            self.read(partial(self._catch_up, table))

    def _catch_up(self, table: Table) -> None:
        """Move a table's view forward to its latest version. With nothing new it costs a look at the
        latest version (on a bucket, a listing); a newer one is read from what that look found (a
        manifest read; asked for by number, a version costs a HEAD for its size first). The LanceDB
        table, which deletes and upkeep go through, is moved where they are (`_delete`, `latest_dataset`,
        and the look for a vector index in `searched_exactly`)."""
        self._move(table, self.view(table).checkout_version((None, None)))  # Lance's name for the latest

    def _move(self, table: Table, moved: LanceDataset) -> None:
        """Put `moved` in place as the table's view if it is newer. A view only moves forward. Another
        thread (an erasure pass, a compaction, another call) can move it further while this one reads:
        putting this older version back would hide from that thread's operation the write it just made."""
        with self._views_lock:
            if self._views[table.name].version < moved.version:
                self._views[table.name] = moved

    def append_rows(self, table: Table, rows: pa.Table) -> int:
        """Append `rows` through the table's view, which the version made then becomes; returns it.
        Lance commits on the view's version, checking only the versions since (the refresh at the
        start of the operation found them), and hands back the dataset it committed: on a bucket the
        write is four requests (the data, a listing, the transaction, the manifest), where a write
        through the LanceDB table made six to eight (its own look at the latest version before, when
        another process wrote since, and the view's read of the new manifest after: docs/object-storage.md,
        *Measured*). The LanceDB table stays where it was: whatever reads through it checks out the
        latest version first.

        The data is written once; its commit is tried until it lands (`_committed`). Every write's rows
        go through here, once or again (`append`): the step at which tests cut or hold a write."""
        import lance

        view = self.view(table)
        fragments = lance.fragment.write_fragments(rows, view)
        moved = _committed(table.name, view, lance.LanceOperation.Append(fragments))
        self._move(table, moved)
        return int(moved.version)

    def _table_names(self) -> set[str]:
        return set(self.db.list_tables().tables)

    def notes_table(self) -> Table | None:
        """The notes table, or None while the store is empty (it is made at the first write)."""
        if self._notes is None and NOTES in self._table_names():
            self._notes = self._opened(NOTES)
        if self._notes is not None and not self.indexes.notes_indexed:
            self.indexes.ensure_indexes(self._notes)
        return self._notes

    def events_table(self) -> Table:
        if self._events is None:
            if EVENTS in self._table_names():
                self._events = self._opened(EVENTS)
            else:
                self._events = self._made({EVENTS: EVENT_SCHEMA})[EVENTS]
        return self._events

    def erasures_table(self, make: bool = False) -> Table | None:
        """The erasures table; None while no erasure pass has made it (`make`: only under the lock of
        upkeep, which erasure passes hold)."""
        if self._erasures is None and (make or ERASURES in self._table_names()):
            self._erasures = self.open_or_create(ERASURES, _ERASURE_SCHEMA)
        return self._erasures

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the notes table was built with; None for an empty store. Read once:
        a table's model never changes (reading a table's schema takes a few milliseconds)."""
        if self._model is None:
            table = self.notes_table()
            if table is None:
                return None
            schema = table.schema
            self._model = (schema.metadata or {}).get(MODEL_KEY, b"?").decode(), schema.field("vector").type.list_size
        return self._model

    def check_model(self, model: str, dimension: int | None = None) -> None:
        stored = self.stored_model()
        if stored is None:
            return
        name, dim = stored
        if name != model or (dimension is not None and dim != dimension):
            got = model if dimension is None else f"{model} ({dimension} dimensions)"
            raise ModelMismatch(
                f"the store at {self.uri} was built with the embedding model {name} ({dim} dimensions), "
                f"not {got}: start the server with --model {name}, or use another --db"
            )

    def ensure_notes(self, model: str, dimension: int) -> Table:
        table = self.notes_table()
        if table is None:
            wanted = {NOTES: note_schema(model, dimension)}
            if self._events is None:  # most often a new store: both tables in one hold of the lock
                wanted[EVENTS] = EVENT_SCHEMA
            made = self._made(wanted)
            self._notes = table = made[NOTES]
            self._events = made.get(EVENTS, self._events)
        self.check_model(model, dimension)
        return table

    def _made(self, wanted: Mapping[str, pa.Schema]) -> dict[str, Table]:
        """Tables that did not exist a moment ago, with their indexes, made by one process at a time
        (the lock of upkeep): Lance commits a second creation as an overwrite of the first, and of
        every row written to it since, so a process that waited here finds the tables made and opens
        them. Their indexes are made in the same hold: made by several processes at once, their
        commits can conflict, and Lance's retry waits whole attempts (docs/object-storage.md,
        *Measured*)."""
        with self.upkeep_lock(limits.CREATE_WAIT):
            made = {name: self.open_or_create(name, schema) for name, schema in wanted.items()}
            for table in made.values():
                self.indexes.ensure_indexes(table)
            return made

    def _opened(self, name: str) -> Table:
        """A table another process made, with its indexes. If one is missing (that process is making
        them now, under the lock of upkeep, or crashed before it made them), it is made under the
        lock too: after that process, instead of beside it."""
        table = self.open_or_create(name, None)
        if set(wanted_indexes(name)) - indexed_columns(table):
            with self.upkeep_lock(limits.CREATE_WAIT):
                table.checkout_latest()
                self.indexes.ensure_indexes(table)
        elif name == NOTES:
            self.indexes.notes_indexed = True
        return table

    def open_or_create(self, name: str, schema: pa.Schema | None) -> Table:
        """A table, made with `schema` if no process has made it yet (None: it must exist), whatever
        other processes are making at the same moment (CREATE_ATTEMPTS)."""

        def attempt() -> Table:
            if schema is None or name in self._table_names():
                return self.db.open_table(name)
            return self.db.create_table(name, schema=schema, exist_ok=True)

        return _creating(name, attempt)

    def append(self, table: Table, rows: pa.Table) -> int:
        """Append rows in one write; in a young table, make sure they are there (YOUNG_TABLE_VERSIONS).
        Returns the table version that holds them."""
        try:
            version = self.append_rows(table, rows)
        except Exception as exc:
            # Lance checks a commit against the version it was made on: an erasure pass on another
            # process (which keeps only the latest version) can remove that version's manifest while
            # this call reads, and the commit fails before it lands. Write again on the latest.
            if not _missing_file(exc):
                raise
            log.warning("a write to %s met a version another process removed (%s); writing again", table.name, exc)
            self._catch_up(table)
            there = self.scan(table, ["id"], where.id_in(rows["id"].to_pylist()))["id"].to_pylist()
            rows = rows.filter(pc.invert(pc.is_in(rows["id"], pa.array(there, pa.string()))))
            landed = rows.num_rows == 0  # after all
            version = self.view(table).version if landed else self.append_rows(table, rows)
        for _ in range(limits.CREATE_ATTEMPTS):
            if version > limits.YOUNG_TABLE_VERSIONS:
                break
            ids = rows["id"].to_pylist()
            self._catch_up(table)  # what landed after this write too: an overwrite comes later
            if self.view(table).version == version:
                break  # nothing landed after it: its rows are in the latest version, which it made
            there = set(self.scan(table, ["id"], where.id_in(ids))["id"].to_pylist())
            if len(there) == len(set(ids)):
                break
            log.warning(
                "%d rows of a write to %s were overwritten by another process making the table; writing them again",
                len(set(ids) - there),
                table.name,
            )
            rows = rows.filter(pc.invert(pc.is_in(rows["id"], pa.array(sorted(there), pa.string()))))
            version = self.append_rows(table, rows)
        return version

    # -- reading -----------------------------------------------------------------------------

    def read(self, work: Callable[[], T]) -> T:
        """Run a read; if another process's cleanup removed a file of the version it was reading,
        check out the latest version and read again (`_reading`)."""

        def again(exc: Exception) -> None:
            log.info("a file was removed under a read (%s); reading the latest version", exc)
            for table in (self._notes, self._events):
                if table is not None:
                    self._catch_up(table)

        return _reading(work, again)

    def view(self, table: Table) -> LanceDataset:
        """The Lance dataset under a table, at the version of the last `refresh` or of this process's
        last write to it: every read goes here. LanceDB's query builder asks the table for its schema
        and more before each query; the dataset keeps its caches (indexes included) when it moves to
        another version."""
        view = self._views.get(table.name)
        if view is None:
            opened = table.to_lance()
            with self._views_lock:
                view = self._views.setdefault(table.name, opened)
        return view

    def scan(self, table: Table, columns: list[str] | None, clause: str | None = None, **search: Any) -> pa.Table:
        """Rows of a table (the columns, those matching `clause`: a filter from where.py), or the
        hits of a `nearest` or `full_text_query` search among them, through `_read`."""
        return self.read(lambda: self.view(table).to_table(columns=columns, filter=clause, prefilter=True, **search))

    def committed_before(
        self, table: Table, version: int, clause: str, columns: list[str] | None = None
    ) -> pa.Table | None:
        """The rows matching `clause` that `table` held just before `version`: what the commits before the
        one that made `version` had written (Lance commits one version at a time, each on the one before).
        None when that version is no longer kept (an erasure pass keeps only the latest)."""
        try:
            return self.view(table).checkout_version(version - 1).to_table(columns=columns, filter=clause)
        except Exception as exc:  # that version's manifest or files are gone
            if not _missing_file(exc):
                raise
            return None

    def catch_up(self, table: Table) -> None:
        """Move one table's view to its latest version: `refresh` for that table alone, in the middle of
        an operation (a write's race check reads what landed after its own commit)."""
        self.read(partial(self._catch_up, table))

    def tables(self) -> dict[str, Table]:
        tables = {EVENTS: self.events_table(), NOTES: self.notes_table()}
        return {name: table for name, table in tables.items() if table is not None}

    def upkeep_lock(self, wait: float) -> AbstractContextManager[Any]:
        """One process at a time, for upkeep and erasure: a lock file beside a store on disk, the
        upkeep lease on object storage (lease.py). Raises filelock's Timeout after `wait` seconds."""
        return exclusive(self.uri, self.lease, wait)
