"""LanceDB access: the notes and events tables, both append-only.

Each operation starts with `refresh()`, which moves each table's view to its latest version: it then
sees every write any process made before it began, and its reads within check no further (on an
object store each check is a listing of the table's versions: a remember made twenty of them when
every read checked). Reads go to the view, the Lance dataset under each table (`_view`), which this
process's own writes move too, and which only moves forward, whichever of its threads moves it. The
same query through LanceDB's query builder cost 5-6 ms more each, and asking a LanceDB table for its
version about 0.2-0.8 ms, where the dataset answers in microseconds (docs/scale.md, "Scale").
Writes are appends through the view (`_add`), which never conflict in Lance; a real delete happens
only in `forget`. Ids are made by the writer, so a retried append can leave a duplicate row: readers
keep the first row of each id.

A write that adds a note and its edges is two appends in two tables, and Lance commits each
table on its own. So the edges go first and the note's row is the commit point: the fold
ignores an edge whose note is not stored, so until the note lands its edges are invisible,
and once it lands they are all there. A crash in between leaves edges that name no note,
which nothing ever shows (docs/design.md, "How it works").
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from functools import partial
from types import UnionType
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from filelock import FileLock, Timeout
from pydantic import BaseModel

from . import where
from .errors import ModelMismatch, StoreBusy, StoreUnavailable, StoreUnreachable
from .lease import Lease
from .model import EARLIEST, LATEST, Event, EventKind, Note

if TYPE_CHECKING:
    from lance.dataset import LanceDataset
    from lancedb.db import DBConnection
    from lancedb.index import IndexConfig
    from lancedb.table import Table

log = logging.getLogger(__name__)

NOTES = "notes"
EVENTS = "events"
ERASURES = "erasures"  # one row per forgotten note whose erasure a pass finished (Tables, erasure)
MODEL_KEY = b"corrigenda.model"
# Compact once a table has this many fragments: each append is one, and a search reads them all. On
# an object store each fragment a search reads is a request, but so is each file a compaction reads,
# writes and deletes (about 350 requests a compaction): at 16 rather than 8, one writer's writes and
# reads made 19 % fewer requests in all with forgets, 37 % without (docs/object-storage.md, "Measured").
COMPACT_AT_FRAGMENTS = 48
COMPACT_AT_FRAGMENTS_REMOTE = 16
# A process looks whether upkeep is due after this many of its writes (a look reads both manifests).
UPKEEP_CHECK_EVERY = 16
UPKEEP_CHECK_EVERY_REMOTE = 4
# Compaction merges fragments smaller than this many rows and leaves bigger ones alone, so one
# compaction rewrites at most this much. (LanceDB's own `optimize` merges every fragment under a
# million rows: at 100k notes it rewrote the whole table every 48 writes.)
FRAGMENT_ROWS = {NOTES: 4096, EVENTS: 65536}
# Versions older than this are deleted by compaction. Every read checks for the latest version
# first and retries once a file of an older one is gone, so this only has to outlast one call;
# Younger versions beyond the newest KEEP_VERSIONS go too, which bounds the disk a burst of writes
# leaves behind (docs/scale.md, "Disk after a burst of single writes"): a compaction rewrites small
# tables whole, and each version kept keeps its copy.
KEEP_VERSIONS_FOR = timedelta(seconds=10)
KEEP_VERSIONS = 20
# A file that no version references and is older than this was left by a crash (an append takes
# milliseconds, an index build minutes): compaction deletes it. Lance on its own waits a week.
ORPHAN_AGE = timedelta(hours=1)
# How long `forget` waits for another process's compaction: an erasure is never skipped. Upkeep, which
# the next writes try again, gives up sooner.
ERASE_WAIT = 120.0
ERASE_POLL = 0.5  # seconds between two looks while another process holds that lock
UPKEEP_WAIT = 20.0
# A read that meets a file removed by another process's cleanup checks out the latest version
# and tries again, this many times.
READ_RETRIES = 3
# The notes table gets a vector index (IVF_SQ, square-root-of-rows partitions) once it holds this
# many rows; a scope smaller than this is searched exactly even then. A search probes this many
# partitions; its similarities are the index's 8-bit ones, which recall replaces with exact ones from
# the stored vectors it reads along with the notes (not on an object store, where reading them back
# costs ~20 requests and 120 ms a search). Chosen by measurement (docs/scale.md, "Scale": recall@20
# against exact search, and latency).
VECTOR_INDEX_AT = 10_000
VECTOR_INDEX = "vector_idx"  # LanceDB's name for it
VECTOR_PROBES = 50
# Lance's index upkeep adds each compaction's new rows as a segment of their own (searched apart) and
# keeps the partitions it was trained with; a default merge re-derives them from 8,192 rows a partition
# (a 100k-note store had 17 segments of 5 partitions: every search scanned all of it). So the index is
# made with a partition size, its segments are merged past VECTOR_SEGMENTS, and it is trained again
# once the table has grown to VECTOR_RETRAIN_GROWTH times the rows it was trained on.
VECTOR_SEGMENTS = 4
VECTOR_RETRAIN_GROWTH = 4
# How long a count of a scope's notes (or the absence of a vector index) is trusted.
SCOPE_SIZE_TTL = 30.0
# Compact once this many rows of a table are outside its indexes (searched without them).
REINDEX_AT = 1024
# How long making a table waits for another process that holds the lock of upkeep (lease.py).
CREATE_WAIT = 60.0
# Several processes can open a new store at once (servers started together) and make its tables and
# indexes at the same moment. Lance then fails one side with a commit conflict, or finds a table whose
# first version is not written yet: each creation is tried again, this many times.
CREATE_ATTEMPTS = 6
# A second creation of a table lands as an overwrite, which Lance lets through even after another
# process's first writes to it: a write to a table younger than this many versions checks that its
# rows are there, and writes again those that are not (ids are the writer's: a copy is harmless).
YOUNG_TABLE_VERSIONS = 32
# An append whose version another process committed first is committed again on the next one
# (`_committed`), up to this many times, after a random wait of up to COMMIT_BACKOFF seconds, doubling.
COMMIT_ATTEMPTS = 20
COMMIT_BACKOFF = 0.02
# Scalar indexes: every filter names one of these columns (see where.py), and the index type of each.
# A scope is a value shared by many rows: as a search's prefilter, a bitmap of a 100k-note scope cost
# 4-5 ms less a vector search and 3 ms less a full-text search than a B-tree, and as much as one with
# 1,000 or 20,000 scopes (docs/scale.md, "Scale"). A store made with a B-tree there gets the bitmap at its
# next upkeep (`upkeep_due`).
SCALAR_INDEXES = {
    NOTES: {"id": "BTree", "scope": "Bitmap", "recorded_at_us": "BTree"},
    EVENTS: {"id": "BTree", "scope": "Bitmap", "src": "BTree", "dst": "BTree"},
}

# The on-disk layout, column by column. Stores already made have it, so it is spelled out here, as
# it is on disk, rather than derived from the models: a field added to a model must not change the
# format unnoticed. Which field each column holds, and how, comes from the models (_columns), and
# the two are checked against each other when this module loads.
_EVENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("src", pa.string()),
        pa.field("dst", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),
        pa.field("reason", pa.string()),
        pa.field("actor", pa.string()),
        pa.field("confidence", pa.float64()),
        pa.field("recorded_at_us", pa.int64(), nullable=False),
    ]
)
_ERASURE_SCHEMA = pa.schema(
    [pa.field("note_id", pa.string(), nullable=False), pa.field("erased_at_us", pa.int64(), nullable=False)]
)
_NOTE_SCHEMA = pa.schema(  # and the vector, as wide as the store's model makes it (_note_schema)
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("scope", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("subject", pa.string()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("source", pa.string()),
        pa.field("actor", pa.string()),
        pa.field("confidence", pa.float64()),
        pa.field("recorded_at_us", pa.int64(), nullable=False),
        pa.field("valid_from_us", pa.int64()),
        pa.field("valid_until_us", pa.int64()),
        # whether the embedding model could read the text (not mostly unknown tokens)
        pa.field("dense_ok", pa.bool_()),
    ]
)


def _note_schema(model: str, dimension: int) -> pa.Schema:
    vector = pa.field("vector", pa.list_(pa.float32(), dimension))
    return _NOTE_SCHEMA.append(vector).with_metadata({MODEL_KEY: model.encode()})


def _micros(t: datetime | None) -> int | None:
    return None if t is None else where.to_micros(t)


def _from_us(value: int | None) -> datetime | None:
    """A stored time. One outside what a datetime holds (written before imports checked times:
    `model.check_time`) reads as the nearest end of the range, so its scope can be read, exported and
    the note forgotten, rather than every read of the scope failing."""
    if value is None:
        return None
    try:
        return where.EPOCH + timedelta(microseconds=value)
    except OverflowError:
        return LATEST if value > 0 else EARLIEST


def _value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Column:
    """Where a model's field is stored. A time is int64 microseconds since 1970 (where.py filters on
    them) in a column named after the field plus `_us`; an enum is its value; the rest is as it is."""

    field: str
    name: str
    nullable: bool  # whether the field takes None: a NULL where it does not reads as the field's default
    to_row: Callable[[Any], Any]
    from_row: Callable[[Any], Any]


def _columns(model: type[BaseModel], schema: pa.Schema, *extra: str) -> list[_Column]:
    """Every field of `model` as a column of `schema`, whose other columns are `extra`. A field or a
    column left over, or a field that takes None in a NOT NULL column, fails here, when the module
    loads, rather than at a write."""
    columns = []
    for field, info in model.model_fields.items():
        union = get_origin(info.annotation) in (Union, UnionType)
        types = get_args(info.annotation) if union else (info.annotation,)
        time = datetime in types
        name = f"{field}_us" if time else field
        to_row, from_row = (_micros, _from_us) if time else (_value, _same)
        columns.append(_Column(field, name, type(None) in types, to_row, from_row))
    names = {c.name for c in columns}
    if names | set(extra) != set(schema.names) or any(
        c.nullable and not schema.field(c.name).nullable for c in columns
    ):
        raise TypeError(f"{model.__name__}'s fields {sorted(names)} do not fit the columns {schema}")
    return columns


def _row(record: BaseModel, columns: Sequence[_Column]) -> dict[str, Any]:
    return {c.name: c.to_row(getattr(record, c.field)) for c in columns}


M = TypeVar("M", bound=BaseModel)


def _record(model: type[M], columns: Sequence[_Column], row: dict[str, Any]) -> M:
    return model(**{c.field: c.from_row(row[c.name]) for c in columns if c.nullable or row[c.name] is not None})


_NOTE_STORED = _columns(Note, _NOTE_SCHEMA, "dense_ok")
_EVENT_STORED = _columns(Event, _EVENT_SCHEMA)
_NOTE_COLUMNS = [c.name for c in _NOTE_STORED]


def _note_from_row(row: dict[str, Any]) -> Note:
    return _record(Note, _NOTE_STORED, row)


def _event_from_row(row: dict[str, Any]) -> Event:
    return _record(Event, _EVENT_STORED, row)


@dataclass(frozen=True)
class Hit:
    """A note a search found: its id, its score (the cosine similarity, exact but on a bucket while the
    vector index covers the table, where it is the index's 8-bit estimate; or the full-text score),
    whether the model could read its text, and its stored embedding where the store reads it along
    (`reads_vectors_along`: for the near-duplicate pass). A search selects no more than this and the
    notes are found by id afterwards, all at once: each further column a search selects costs about
    as much again per row (docs/scale.md, "Scale")."""

    id: str
    score: float
    dense_ok: bool = True
    vector: np.ndarray | None = dataclasses.field(default=None, compare=False)


class ScopeRows:
    """A scope's notes as one scan read them: every column but the vector (about 220 bytes a note in
    Arrow, 21 MiB for 100,000 notes), decoded only when asked for by id, and each row's address in the
    table (`addresses`). Reading the same notes by id from the table costs about 0.2 ms a note, each
    column a read of its own (docs/scale.md, "Scale")."""

    def __init__(self, found: pa.Table, leave_out: Collection[str] = ()) -> None:
        self._rows = found.combine_chunks()
        self._at: dict[str, int] = {}
        for position, note_id in enumerate(self._rows["id"].to_pylist()):
            if note_id not in leave_out:
                self._at.setdefault(note_id, position)  # a retried append's copy: the first row

    def __len__(self) -> int:
        return len(self._at)

    def __contains__(self, note_id: str) -> bool:
        return note_id in self._at

    def get(self, ids: Iterable[str]) -> dict[str, Note]:
        """Those of `ids` it holds."""
        positions = [self._at[i] for i in dict.fromkeys(ids) if i in self._at]
        if not positions:
            return {}
        return {row["id"]: _note_from_row(row) for row in self._rows.take(positions).to_pylist()}

    def addresses(self, ids: Iterable[str]) -> dict[str, int]:
        """Where the scan found those of `ids` it holds: Lance row addresses (a fragment's id and an
        offset in it), good for as long as that fragment is in the table (see `Tables.vectors`)."""
        positions = {i: self._at[i] for i in dict.fromkeys(ids) if i in self._at}
        found = self._rows["_rowid"].take(list(positions.values())).to_pylist()
        return dict(zip(positions, found, strict=True))


def _first_of_each_id(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["id"], row)
    return list(seen.values())


def _readable(row: dict[str, Any], vector: np.ndarray | None) -> np.ndarray | None:
    """A stored embedding, if the model could read its note's text (`dense_ok`): else it is the
    embedding of unknown tokens, near everything such alike."""
    return vector if vector is not None and row["dense_ok"] else None


def _cosines(query: np.ndarray, vectors: Sequence[np.ndarray | None]) -> list[float]:
    """The exact cosine of `query` with each of `vectors`, in one product, in float64 (0 for a zero vector)."""
    rows = np.stack([np.asarray(v, np.float64) for v in vectors])
    query = np.asarray(query, np.float64)
    norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(query)
    dots = rows @ query
    cosines: list[float] = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).tolist()
    return cosines


def _rows_with_vectors(found: pa.Table) -> list[tuple[dict[str, Any], np.ndarray | None]]:
    """The first row of each id, with its stored embedding if the read selected it (as a float32 array,
    not 384 Python floats; see `_readable` for whether it means anything)."""
    vectors: list[np.ndarray | None] = [None] * found.num_rows
    if "vector" in found.column_names:
        if found.num_rows:
            column = found["vector"].combine_chunks()
            matrix = column.flatten().to_numpy().astype(np.float32).reshape(found.num_rows, -1)
            vectors = list(matrix)
        found = found.drop_columns(["vector"])
    seen: dict[str, tuple[dict[str, Any], np.ndarray | None]] = {}
    for row, vector in zip(found.to_pylist(), vectors, strict=True):
        seen.setdefault(row["id"], (row, vector))
    return list(seen.values())


T = TypeVar("T")

_REFRESHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corrigenda-refresh")


def _missing_file(exc: Exception) -> bool:
    """Whether a LanceDB error says a file of the version being read is gone (another process's cleanup)."""
    text = str(exc)
    return "Not found" in text or "not found" in text or "No such file" in text


def _unreachable(exc: Exception) -> bool:
    """Whether an error says the object store could not be reached (rather than refused the request)."""
    text = str(exc)
    return any(sign in text for sign in ("error sending request", "kind: Connect", "tcp connect error", "timed out"))


def _store_problem(exc: Exception) -> str:
    """What an object store said, in a few words: its error code and message, or the connection that failed."""
    text = str(exc)
    said = re.search(r"<Code>([^<]*)</Code>\s*<Message>([^<]*)</Message>", text)
    if said:
        return f"{said[1]}: {said[2]}"
    if _unreachable(exc):
        return "the endpoint could not be reached"
    return text.splitlines()[0][:200] if text else type(exc).__name__


class Tables:
    """The two tables of one store, opened lazily (importing lancedb takes about a second)."""

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self._storage_options = storage_options
        self._db: DBConnection | None = None
        self._notes: Table | None = None
        self._events: Table | None = None
        self._open_lock = threading.Lock()
        self._compact_lock = threading.Lock()
        self._stopping = False  # finish_upkeep was called: no compaction starts from now on
        self._writes_since_check = 0
        remote = self._remote = "://" in uri
        self._lease = Lease(self._open_or_create) if remote else None
        self._compact_at = COMPACT_AT_FRAGMENTS_REMOTE if remote else COMPACT_AT_FRAGMENTS
        self._check_every = UPKEEP_CHECK_EVERY_REMOTE if remote else UPKEEP_CHECK_EVERY
        self._model: tuple[str, int] | None = None  # stored_model(), once the notes table exists
        self._indexed = False  # whether this process has made sure the notes table's indexes exist
        self._vector_indexed = False
        self._vector_index_checked = -SCOPE_SIZE_TTL  # time.monotonic() of the last look
        self._scope_rows: dict[str, tuple[float, int]] = {}  # scope -> (when counted, notes)
        self._views: dict[str, LanceDataset] = {}  # table name -> its dataset, for reads (_view)
        self._views_lock = threading.Lock()
        self._erasures: Table | None = None
        # On object storage an erasure pass takes 1-5 s (docs/object-storage.md, "Measured"): `forget` answers once
        # its tombstone is committed, and a thread of this process erases (erase_soon).
        self.erase_later = remote
        self._eraser: threading.Thread | None = None
        self._eraser_lock = threading.Lock()
        self._erase_again = False

    # -- opening -----------------------------------------------------------------------------

    @property
    def db(self) -> DBConnection:
        with self._open_lock:
            if self._db is None:
                import lancedb

                if "://" not in self.uri:
                    os.makedirs(self.uri, exist_ok=True)
                try:
                    # No check of its own before each read: refresh() does it once per operation.
                    db = lancedb.connect(
                        self.uri, read_consistency_interval=None, storage_options=self._storage_options
                    )
                    db.list_tables()  # a bucket is first reached here: say what is wrong, in one line
                except Exception as exc:
                    if "://" not in self.uri:
                        raise
                    raise StoreUnreachable(self.uri, _store_problem(exc)) from exc
                self._db = db
            return self._db

    def outage(self, exc: Exception) -> StoreUnavailable | None:
        """The error to give for `exc` if it means an object store stopped answering, else None."""
        if "://" not in self.uri or not _unreachable(exc):
            return None
        return StoreUnavailable(self.uri, _store_problem(exc))

    def refresh(self) -> None:
        """See every write made so far, by any process: the start of each operation (module docstring).
        On a bucket the tables are caught up at once, each a listing and, if it moved, a manifest read."""
        tables = [t for t in (self._notes, self._events) if t is not None]
        if self._remote and len(tables) == 2:
            beside = _REFRESHES.submit(self._read, partial(self._catch_up, tables[1]))
            self._read(partial(self._catch_up, tables[0]))
            beside.result()
            return
        for table in tables:
            self._read(partial(self._catch_up, table))

    def _catch_up(self, table: Table) -> None:
        """Move a table's view forward to its latest version. With nothing new it costs a look at the
        latest version (on a bucket, a listing); a newer one is read from what that look found (a
        manifest read; asked for by number, a version costs a HEAD for its size first). The LanceDB
        table, which deletes and upkeep go through, is moved where they are (`_delete`, `_dataset`,
        and the look for a vector index in `_searched_exactly`)."""
        self._move(table, self._view(table).checkout_version((None, None)))  # Lance's name for the latest

    def _move(self, table: Table, moved: LanceDataset) -> None:
        """Put `moved` in place as the table's view if it is newer. A view only moves forward. Another
        thread (an erasure pass, a compaction, another call) can move it further while this one reads:
        putting this older version back would hide from that thread's operation the write it just made."""
        with self._views_lock:
            if self._views[table.name].version < moved.version:
                self._views[table.name] = moved

    def _add(self, table: Table, rows: pa.Table) -> int:
        """Append `rows` through the table's view, which the version made then becomes; returns it.
        Lance commits on the view's version, checking only the versions since (the refresh at the
        start of the operation found them), and hands back the dataset it committed: on a bucket the
        write is four requests (the data, a listing, the transaction, the manifest), where a write
        through the LanceDB table made six to eight (its own look at the latest version before, when
        another process wrote since, and the view's read of the new manifest after: docs/object-storage.md,
        *Measured*). The LanceDB table stays where it was: whatever reads through it checks out the
        latest version first.

        The data is written once; its commit is tried until it lands (`_committed`)."""
        import lance

        view = self._view(table)
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
        if self._notes is not None and not self._indexed:
            self.ensure_indexes(self._notes)
        return self._notes

    def events_table(self) -> Table:
        if self._events is None:
            if EVENTS in self._table_names():
                self._events = self._opened(EVENTS)
            else:
                self._events = self._made({EVENTS: _EVENT_SCHEMA})[EVENTS]
        return self._events

    def _erasures_table(self, make: bool = False) -> Table | None:
        """The erasures table; None while no erasure pass has made it (`make`: only under the lock of
        upkeep, which erasure passes hold)."""
        if self._erasures is None and (make or ERASURES in self._table_names()):
            self._erasures = self._open_or_create(ERASURES, _ERASURE_SCHEMA)
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

    def _ensure_notes(self, model: str, dimension: int) -> Table:
        table = self.notes_table()
        if table is None:
            wanted = {NOTES: _note_schema(model, dimension)}
            if self._events is None:  # most often a new store: both tables in one hold of the lock
                wanted[EVENTS] = _EVENT_SCHEMA
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
        with self._exclusive(CREATE_WAIT):
            made = {name: self._open_or_create(name, schema) for name, schema in wanted.items()}
            for table in made.values():
                self.ensure_indexes(table)
            return made

    def _opened(self, name: str) -> Table:
        """A table another process made, with its indexes. If one is missing (that process is making
        them now, under the lock of upkeep, or crashed before it made them), it is made under the
        lock too: after that process, instead of beside it."""
        table = self._open_or_create(name, None)
        if set(_wanted_indexes(name)) - _indexed_columns(table):
            with self._exclusive(CREATE_WAIT):
                table.checkout_latest()
                self.ensure_indexes(table)
        elif name == NOTES:
            self._indexed = True
        return table

    def _open_or_create(self, name: str, schema: pa.Schema | None) -> Table:
        """A table, made with `schema` if no process has made it yet (None: it must exist), whatever
        other processes are making at the same moment (CREATE_ATTEMPTS)."""
        for attempt in range(CREATE_ATTEMPTS):
            try:
                if schema is None or name in self._table_names():
                    return self.db.open_table(name)
                return self.db.create_table(name, schema=schema, exist_ok=True)
            except Exception as exc:
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                log.info("opening the %s table met another process making it (%s); trying again", name, exc)
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def ensure_indexes(self, table: Table, retype: bool = False) -> None:
        """Make the indexes a table is missing: at creation, and whenever a process opens the store,
        so a crash between creating a table and indexing it cannot leave it unindexed; with `retype`
        (upkeep, one process at a time), also replace an index of another type than SCALAR_INDEXES
        says. The notes table's full-text index is how Chinese is found (the default model reads it
        as unknown tokens); the scalar indexes make a call's cost depend on its own scope, not on
        others."""
        wanted = _wanted_indexes(table.name)
        if retype:
            for index in _mistyped(table):
                log.info("replacing the %s index %s of %s.%s", index.index_type, index.name, table.name, index.columns)
                table.drop_index(index.name)
        have = _indexed_columns(table)
        for column, config in wanted.items():
            for attempt in range(CREATE_ATTEMPTS):
                if column in have:
                    break
                try:
                    table.create_index(column, config=config, replace=False)
                    break
                except Exception as exc:
                    # Another process made it first, or made the table again under it: look again.
                    table.checkout_latest()
                    have = _indexed_columns(table)
                    if column not in have and attempt == CREATE_ATTEMPTS - 1:
                        raise
                    log.info("indexing %s.%s met another process (%s); looking again", table.name, column, exc)
        if table.name == NOTES:
            self._indexed = True

    # -- writing -----------------------------------------------------------------------------

    def add_notes(
        self, notes: Sequence[tuple[Note, Sequence[float], bool]], model: str, events: Sequence[Event] = ()
    ) -> int | None:
        """Notes with their embeddings and whether the model could read them, and the edges written
        with them: the edges first, then the notes in one write, their commit point (module docstring).
        Returns the events table version the edges made, if any."""
        if not notes:
            return self.add_events(events) if events else None
        table = self._ensure_notes(model, len(notes[0][1]))
        version = self.add_events(events) if events else None
        rows = [
            _row(note, _NOTE_STORED) | {"dense_ok": dense_ok, "vector": list(vector)}
            for note, vector, dense_ok in notes
        ]
        self._append(table, pa.Table.from_pylist(rows, schema=self._view(table).schema))
        self._wrote()
        return version

    def add_events(self, events: Sequence[Event]) -> int:
        """Append events in one write; returns the table version it made."""
        rows = [_row(e, _EVENT_STORED) for e in events]
        version = self._append(self.events_table(), pa.Table.from_pylist(rows, schema=_EVENT_SCHEMA))
        self._wrote()
        return version

    def _append(self, table: Table, rows: pa.Table) -> int:
        """Append rows in one write; in a young table, make sure they are there (YOUNG_TABLE_VERSIONS).
        Returns the table version that holds them."""
        try:
            version = self._add(table, rows)
        except Exception as exc:
            # Lance checks a commit against the version it was made on: an erasure pass on another
            # process (which keeps only the latest version) can remove that version's manifest while
            # this call reads, and the commit fails before it lands. Write again on the latest.
            if not _missing_file(exc):
                raise
            log.warning("a write to %s met a version another process removed (%s); writing again", table.name, exc)
            self._catch_up(table)
            there = self._scan(table, ["id"], where.id_in(rows["id"].to_pylist()))["id"].to_pylist()
            rows = rows.filter(pc.invert(pc.is_in(rows["id"], pa.array(there, pa.string()))))
            landed = rows.num_rows == 0  # after all
            version = self._view(table).version if landed else self._add(table, rows)
        for _ in range(CREATE_ATTEMPTS):
            if version > YOUNG_TABLE_VERSIONS:
                break
            ids = rows["id"].to_pylist()
            self._catch_up(table)  # what landed after this write too: an overwrite comes later
            there = set(self._scan(table, ["id"], where.id_in(ids))["id"].to_pylist())
            if len(there) == len(set(ids)):
                break
            log.warning(
                "%d rows of a write to %s were overwritten by another process making the table; writing them again",
                len(set(ids) - there),
                table.name,
            )
            rows = rows.filter(pc.invert(pc.is_in(rows["id"], pa.array(sorted(there), pa.string()))))
            version = self._add(table, rows)
        return version

    # -- erasure ----------------------------------------------------------------------------
    # `forget` appends a `forgets` tombstone: from then on the note does not exist for any reader.
    # Then an erasure pass removes it from every file. A pass erases every forgotten note no pass
    # has finished (each it finishes gets a row in the `erasures` table), in one rewrite of the files,
    # one process at a time: forgets that come while a pass runs are erased by the next, together.

    def erasure_events(self, note_ids: Collection[str]) -> list[str]:
        """The events an erasure of these notes removes: every event naming one of them but their
        `forgets` tombstones, and every event naming one of those (a reinstates of a revokes)."""
        events = self.events_table()
        named = self._scan(events, ["id", "kind"], where.naming(note_ids))
        first = [
            i
            for i, k in zip(named["id"].to_pylist(), named["kind"].to_pylist(), strict=True)
            if k != EventKind.FORGETS.value
        ]
        second = self._scan(events, ["id"], where.id_in(first, "dst"))
        return sorted(set(first) | set(second["id"].to_pylist()))

    def erased(self, note_ids: Collection[str] | None = None) -> set[str]:
        """Those of these notes (None: of all) whose erasure a pass has finished."""
        table = self._erasures_table()
        if table is None or (note_ids is not None and not note_ids):
            return set()
        clause = None if note_ids is None else where.id_in(note_ids, "note_id")
        for attempt in range(READ_RETRIES + 1):
            try:
                table.checkout_latest()  # only erasure passes write it, under the lock of upkeep
                return set(table.to_lance().to_table(columns=["note_id"], filter=clause)["note_id"].to_pylist())
            except Exception as exc:  # a compaction's cleanup removed a file of the version read
                if attempt == READ_RETRIES or not _missing_file(exc):
                    raise
        raise AssertionError("unreachable")

    def unerased(self) -> list[str]:
        """Forgotten notes whose erasure no pass has finished: one under way, or cut short."""
        tombstones = self._scan(self.events_table(), ["dst"], where.kind_is(EventKind.FORGETS.value))
        forgotten = set(tombstones["dst"].to_pylist())
        return sorted(forgotten - self.erased()) if forgotten else []

    def erase_forgotten(self, wait: float = ERASE_WAIT) -> list[str]:
        """An erasure pass, if any forgotten note waits for one; returns the notes it erased. Waits up to
        `wait` seconds for another process's upkeep or erasure (filelock's Timeout after), looking again
        meanwhile whether that erased them: when it returns, every note forgotten before the call is
        erased, by this pass or another process's."""
        deadline = time.monotonic() + wait
        tables = self._tables()  # opened (never made) outside the lock, which making a table takes
        while self.unerased():
            try:
                with self._compact_lock, self._exclusive(0):
                    return self._erase(tables)
            except Timeout:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(ERASE_POLL)
        return []

    def _erase(self, tables: Mapping[str, Table]) -> list[str]:
        """An erasure pass, under the lock of upkeep: each unerased note, and the events
        `erasure_events` names, deleted from the live data and from every file on disk.

        Lance only marks a deleted row as deleted until enough of its file is; so each file that
        holds one is rewritten without it, and older versions (which still hold it) are removed. A pass
        cut short leaves its notes unmarked, and the next one does it all again (deleting twice is
        harmless)."""
        self.refresh()  # what the holder before this one left: the files of older versions may be gone
        notes = self.unerased()
        if not notes:
            return []
        started = time.monotonic()
        removed = self.erasure_events(notes)
        notes_table = self.notes_table()
        if notes_table is not None:
            _until_committed(partial(_delete, notes_table, where.id_in(notes)), ERASE_WAIT)
        if removed:
            _until_committed(partial(_delete, self.events_table(), where.id_in(removed)), ERASE_WAIT)
        for name, table in tables.items():
            # Rewrite every file holding a deleted row, this pass's or a cut pass's (whose delete
            # landed but whose rewrite did not), then the indexes, then drop the versions that
            # still hold the rows.
            _until_committed(partial(self._tidy, name, table, timedelta(0), erasing=True), ERASE_WAIT)
        erased_at = where.to_micros(datetime.now(UTC))
        marks = pa.Table.from_pylist([{"note_id": n, "erased_at_us": erased_at} for n in notes], schema=_ERASURE_SCHEMA)
        self._erasures_table(make=True).add(marks)  # type: ignore[union-attr]
        self.refresh()
        plural = "" if len(notes) == 1 else "s"
        log.info("erased %d forgotten note%s from the files in %.1f s", len(notes), plural, time.monotonic() - started)
        return notes

    def erase_soon(self) -> None:
        """Run erasure passes on a thread of this process until none is waiting (one thread at a time:
        asked while one runs, it makes one more pass). A pass that fails is left to the next upkeep."""
        with self._eraser_lock:
            self._erase_again = True
            if self._eraser is None:
                self._eraser = threading.Thread(target=self._erase_while_asked, name="corrigenda-erase", daemon=True)
                self._eraser.start()

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

    def finish_upkeep(self, timeout: float = ERASE_WAIT) -> bool:
        """Before the process stops: wait up to `timeout` seconds for its erasure thread and for a
        compaction under way, and start no compaction after; whether neither is running now. (A
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
        if not self._compact_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return False
        self._compact_lock.release()
        return True

    # -- reading -----------------------------------------------------------------------------

    def _read(self, work: Callable[[], T]) -> T:
        """Run a read; if another process's cleanup removed a file of the version it was reading,
        check out the latest version and read again."""
        for attempt in range(READ_RETRIES + 1):
            try:
                return work()
            except Exception as exc:
                if attempt == READ_RETRIES or not _missing_file(exc):
                    raise
                log.info("a file was removed under a read (%s); reading the latest version", exc)
                for table in (self._notes, self._events):
                    if table is not None:
                        self._catch_up(table)
        raise AssertionError("unreachable")

    def _view(self, table: Table) -> LanceDataset:
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

    def _scan(self, table: Table, columns: list[str] | None, clause: str | None = None, **search: Any) -> pa.Table:
        """Rows of a table (the columns, those matching `clause`: a filter from where.py), or the
        hits of a `nearest` or `full_text_query` search among them, through `_read`."""
        return self._read(lambda: self._view(table).to_table(columns=columns, filter=clause, prefilter=True, **search))

    def _search(
        self, table: Table, columns: list[str], clause: str, **search: Any
    ) -> tuple[list[tuple[dict[str, Any], np.ndarray | None]], LanceDataset]:
        """A search's hits (the first row of each id), each with its stored embedding where the store
        reads them along (`reads_vectors_along`); and the version searched."""

        def read() -> tuple[pa.Table, LanceDataset]:
            view = self._view(table)
            columns_read = [*columns, *self._vector_column]
            return view.to_table(columns=columns_read, filter=clause, prefilter=True, **search), view

        found, view = self._read(read)
        return _rows_with_vectors(found), view

    def notes(self, ids: Iterable[str]) -> dict[str, Note]:
        return self.notes_with_vectors(ids, vectors=False)[0]

    def notes_with_vectors(
        self, ids: Iterable[str], vectors: bool = True
    ) -> tuple[dict[str, Note], dict[str, np.ndarray]]:
        """Notes by id and, where reading them along costs little (`reads_vectors_along`), the stored
        embeddings of those the model could read."""
        ids = list(dict.fromkeys(ids))
        table = self.notes_table()
        if not ids or table is None:
            return {}, {}
        columns = [*_NOTE_COLUMNS, "dense_ok", *self._vector_column] if vectors else _NOTE_COLUMNS
        rows = _rows_with_vectors(self._scan(table, columns, where.id_in(ids)))
        notes = {row["id"]: _note_from_row(row) for row, _ in rows}
        return notes, {row["id"]: v for row, vector in rows if (v := _readable(row, vector)) is not None}

    def vectors(self, ids: Iterable[str], addresses: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
        """Stored embeddings of these notes (float32 arrays), for those the model could read.

        `addresses` (from a scope's scan, `ScopeRows.addresses`): where some of them were. Those still in
        a fragment of the table are read there (0.5 ms for a few, where the id index's lookup costs
        2 to 4 ms: docs/scale.md, "Scale"); a fragment compaction rewrote is gone, and its notes are read by id."""
        ids = list(dict.fromkeys(ids))
        table = self.notes_table()
        if not ids or table is None:
            return {}
        found: dict[str, np.ndarray] = {}
        located = {i: addresses[i] for i in ids if i in addresses} if addresses and self.reads_vectors_along else {}
        if located:
            taken = self._read(lambda: self._taken(table, located))
            found = {i: vector for i, vector in taken.items() if vector is not None}
            ids = [i for i in ids if i not in taken]
        if ids:
            clause = where.all_of(where.id_in(ids), where.model_could_read())
            rows = _rows_with_vectors(self._scan(table, ["id", "dense_ok", "vector"], clause))
            found |= {row["id"]: vector for row, vector in rows if vector is not None}
        return found

    def _taken(self, table: Table, addresses: Mapping[str, int]) -> dict[str, np.ndarray | None]:
        """The embeddings at `addresses` that are still there (None: the model could not read that note),
        by id; a note whose fragment is gone is left out."""
        view = self._view(table)
        fragments = {f.fragment_id for f in view.get_fragments()}
        here = {i: a for i, a in addresses.items() if a >> 32 in fragments}  # the fragment's id, above the offset
        if not here:
            return {}
        # an unstable Lance API: pyproject.toml holds pylance to 13.x, and a test reads through it
        rows = _rows_with_vectors(view._take_rows(list(here.values()), columns=["id", "dense_ok", "vector"]))
        return {row["id"]: _readable(row, vector) for row, vector in rows if row["id"] in here}

    def events_version(self) -> int:
        return int(self._view(self.events_table()).version)

    def scope_events(self, scope: str) -> tuple[int, list[Event]]:
        """Every event of a scope, and the table version it was read at (read first: see graph.py)."""
        table = self.events_table()

        def read() -> tuple[int, pa.Table]:
            view = self._view(table)
            return view.version, view.to_table(filter=where.scope_is(scope), prefilter=True)

        version, rows = self._read(read)
        return version, [_event_from_row(row) for row in rows.to_pylist()]

    def scope_rows(self, scope: str, leave_out: Collection[str] = ()) -> ScopeRows | None:
        """Every note of a scope but those `leave_out` names, in one scan without the vectors (None while
        the store has no notes table)."""
        table = self.notes_table()
        if table is None:
            return None
        return ScopeRows(self._scan(table, _NOTE_COLUMNS, where.scope_is(scope), with_row_id=True), leave_out)

    def tombstone(self, note_id: str) -> Event | None:
        """The `forgets` event of a note, if it was forgotten."""
        clause = where.all_of(where.id_in([note_id], "dst"), where.kind_is(EventKind.FORGETS.value))
        rows = self._scan(self.events_table(), None, clause, limit=1).to_pylist()
        return _event_from_row(rows[0]) if rows else None

    def event(self, event_id: str) -> Event | None:
        rows = self._scan(self.events_table(), None, where.id_in([event_id]), limit=1).to_pylist()
        return _event_from_row(rows[0]) if rows else None

    def vector_search(self, vector: Sequence[float], scope: str, at: datetime | None, limit: int) -> list[Hit]:
        """The `limit` notes of a scope nearest `vector` by cosine, best first (see `Hit`)."""
        table = self.notes_table()
        if table is None:
            return []
        query = np.asarray(vector, np.float32)
        nearest: dict[str, Any] = {"column": "vector", "q": query, "k": limit, "metric": "cosine"}
        exact = self._searched_exactly(table, scope)
        if exact:
            nearest["use_index"] = False
        else:
            nearest["nprobes"] = VECTOR_PROBES
        rows, view = self._search(table, ["id", "dense_ok", "_distance"], where.in_scope(scope, at), nearest=nearest)
        if rows and rows[0][1] is not None:  # exact, from the stored vectors read along
            similarities = _cosines(query, [stored for _, stored in rows])
        elif not exact and _wholly_indexed(view):  # on a bucket: reading the hits' vectors is a request each
            similarities = [1.0 - row["_distance"] / 2 for row, _ in rows]
        else:
            similarities = [1.0 - row["_distance"] for row, _ in rows]
        return [
            Hit(row["id"], similarity, row["dense_ok"], _readable(row, stored))
            for (row, stored), similarity in zip(rows, similarities, strict=True)
        ]

    @property
    def reads_vectors_along(self) -> bool:
        """Whether reads by id bring the rows' vectors along (for recall's exact similarities and its
        near-duplicate pass): in a directory that costs about nothing; on an object store it is about a
        request a row, so there they are read apart, for the heads alone (`vectors`)."""
        return not self._remote

    @property
    def _vector_column(self) -> list[str]:
        return ["vector"] if self.reads_vectors_along else []

    def _searched_exactly(self, table: Table, scope: str) -> bool:
        """Whether a scope's vectors are searched without the index: while there is none, and for a
        scope too small to have earned one, whose rows are scattered over the index's partitions."""
        now = time.monotonic()
        if not self._vector_indexed:
            if now - self._vector_index_checked < SCOPE_SIZE_TTL:
                return True
            self._vector_index_checked = now
            table.checkout_latest()  # another process may have made it since this one looked
            self._vector_indexed = _has_vector_index(table)
            if not self._vector_indexed:
                return True
        checked, rows = self._scope_rows.get(scope, (-SCOPE_SIZE_TTL, 0))
        if now - checked >= SCOPE_SIZE_TTL:
            rows = self._read(lambda: self._view(table).count_rows(where.scope_is(scope)))
            self._scope_rows[scope] = (now, rows)
        return rows < VECTOR_INDEX_AT

    def text_search(self, query: str, scope: str, at: datetime | None, limit: int) -> list[Hit]:
        """The `limit` notes of a scope that match `query`'s words best, by full-text score (see `Hit`)."""
        from lance.query import MatchQuery

        table = self.notes_table()
        if table is None or not query.strip():
            return []
        found, _ = self._search(
            table, ["id", "_score", "dense_ok"], where.in_scope(scope, at),
            full_text_query=MatchQuery(query, "text"), limit=limit,
        )  # fmt: skip
        return [Hit(row["id"], float(row["_score"]), row["dense_ok"], _readable(row, stored)) for row, stored in found]

    def count(self) -> dict[str, int]:
        table = self.notes_table()
        notes = self._view(table).count_rows() if table is not None else 0
        return {"notes": notes, "events": self._view(self.events_table()).count_rows()}

    # -- reading whole scopes: browsing and export (browse.py, transfer.py), not recall ----------

    def scope_notes(self, scope: str, with_vectors: bool = False) -> list[tuple[Note, list[float] | None]]:
        """Every note of a scope, once each, with its stored embedding if asked for."""
        table = self.notes_table()
        if table is None:
            return []
        columns = [*_NOTE_COLUMNS, "vector"] if with_vectors else _NOTE_COLUMNS
        rows = _first_of_each_id(self._scan(table, columns, where.scope_is(scope)).to_pylist())
        return [(_note_from_row(row), row.get("vector")) for row in rows]

    def scopes(self) -> dict[str, dict[str, Any]]:
        """Each scope with its stored notes and events and the time of its latest note, read from the
        scope and time columns alone."""
        found: dict[str, dict[str, Any]] = {}
        for name, table in self._tables().items():
            columns = ["scope", "recorded_at_us"] if name == NOTES else ["scope"]
            rows = self._scan(table, columns)
            aggregations = [("scope", "count")] + ([("recorded_at_us", "max")] if name == NOTES else [])
            for row in rows.group_by("scope").aggregate(aggregations).to_pylist():
                entry = found.setdefault(row["scope"], {"notes": 0, "events": 0, "latest_note_at": None})
                entry[name] = row["scope_count"]
                if name == NOTES:
                    entry["latest_note_at"] = _from_us(row["recorded_at_us_max"])
        return found

    # -- upkeep ------------------------------------------------------------------------------

    def _wrote(self) -> None:
        self._writes_since_check += 1
        if self._writes_since_check >= self._check_every:
            self._writes_since_check = 0
            threading.Thread(target=self.compact_if_due, name="corrigenda-compact", daemon=True).start()

    def _tables(self) -> dict[str, Table]:
        tables = {EVENTS: self.events_table(), NOTES: self.notes_table()}
        return {name: table for name, table in tables.items() if table is not None}

    def _dataset(self, table: Table) -> LanceDataset:
        """The latest version of a table as a Lance dataset: upkeep needs what LanceDB does not offer
        (compaction that leaves big fragments alone, cleanup that lists every file)."""
        table.checkout_latest()  # and the LanceDB table with it, for upkeep's reads through it
        return table.to_lance()

    def fragments(self) -> dict[str, int]:
        return {name: len(self._dataset(table).get_fragments()) for name, table in self._tables().items()}

    def upkeep_due(self) -> bool:
        """Whether a table has enough small fragments, or rows no index covers yet, to compact it,
        or the notes have grown big enough for a vector index."""
        for name, table in self._tables().items():
            fragments = self._dataset(table).get_fragments()
            if sum(f.metadata.physical_rows < FRAGMENT_ROWS[name] for f in fragments) >= self._compact_at:
                return True
            stats = table.index_stats("id_idx")
            if stats is not None and stats.num_unindexed_rows >= REINDEX_AT:
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

    def compact(self, keep_versions_for: timedelta = KEEP_VERSIONS_FOR) -> bool:
        """Merge small fragments, bring the indexes up to date, drop versions older than
        `keep_versions_for` and the files a crash left behind; one process at a time (False:
        another process is at it)."""
        tables = self._tables()  # opened (never made) outside the lock, which making a table takes
        with self._compact_lock:
            if self._stopping:
                return False
            try:
                with self._exclusive(0):
                    self._erase(tables)  # what a process that forgot and then stopped left
                    for name, table in tables.items():
                        _until_committed(partial(self._tidy, name, table, keep_versions_for), UPKEEP_WAIT)
                    small = [self._lease.table() if self._lease is not None else None, self._erasures_table()]
                    for table in filter(None, small):  # each take of the lease, each pass, left a fragment
                        _tidy_small(table, keep_versions_for)
                    self.refresh()  # this process's reads use the compacted files from now on
                    return True
            except Timeout:
                return False

    def _tidy(self, name: str, table: Table, keep_versions_for: timedelta, erasing: bool = False) -> None:
        """One table's upkeep, on its latest version: its missing indexes (not while erasing: a `forget`
        does not wait for a vector index to be built), then compaction (erasing: of every file that
        holds a deleted row), the indexes brought up to date (the vector index reshaped), and the
        cleanup."""
        table.checkout_latest()
        if not erasing:
            self.ensure_indexes(table, retype=True)
            if name == NOTES:
                self._ensure_vector_index(table)
        dataset = self._dataset(table)
        dataset.optimize.compact_files(
            target_rows_per_fragment=FRAGMENT_ROWS[name],
            materialize_deletions_threshold=0.0 if erasing else None,  # None: Lance's own (10 % deleted)
        )
        dataset.optimize.optimize_indices()
        if erasing:
            self._rebuild_stale_indexes(table)
        elif name == NOTES:
            self._reshape_vector_index(table)
        self._clean(self._dataset(table), keep_versions_for)

    def _rebuild_stale_indexes(self, table: Table) -> None:
        """Build again every index that still covers a fragment the table no longer has. A delete that
        takes every row of a fragment drops the fragment without rewriting it, so no compaction remaps
        the indexes over it: they keep the deleted rows' terms, vectors and values (an erasure must
        reach them). Rebuilt from the rows there are; on an empty table, dropped (made again by
        `ensure_indexes` at the next open)."""
        table.checkout_latest()
        view = table.to_lance()
        present = {fragment.fragment_id for fragment in view.get_fragments()}
        stale = {
            index.name
            for index in view.describe_indices()
            if any(f not in present for segment in index.segments for f in segment.fragment_ids)
        }
        if not stale:
            return
        wanted = _wanted_indexes(table.name)
        empty = table.count_rows() == 0
        for index in table.list_indices():
            if index.name not in stale:
                continue
            column = index.columns[0]
            log.info(
                "rebuilding the %s index of %s.%s, which covered erased rows", index.index_type, table.name, column
            )
            if empty:
                table.drop_index(index.name)
            elif column == "vector":
                self._ensure_vector_index(table, again=True)
            else:
                table.create_index(column, config=wanted[column], replace=True)

    @staticmethod
    def _vector_index_due(table: Table) -> bool:
        return table.count_rows() >= VECTOR_INDEX_AT and not _has_vector_index(table)

    def _ensure_vector_index(self, table: Table, again: bool = False) -> None:
        """Index the vectors once the table is big enough for an index to pay (below, search is exact;
        rows added after the index are searched exactly until the next compaction indexes them), with
        about √rows partitions of √rows rows each; `again`: train it anew."""
        if not again and not self._vector_index_due(table):
            return
        from lancedb.index import IvfSq

        size = max(1, math.isqrt(table.count_rows()))
        table.create_index("vector", config=IvfSq(distance_type="cosine", target_partition_size=size), replace=True)

    @staticmethod
    def _vector_index_shape(table: Table) -> tuple[int, int] | None:
        """The vector index's (partitions, segments); None while there is none."""
        if not _has_vector_index(table):
            return None
        stats = table.to_lance().stats.index_stats(VECTOR_INDEX)
        return min(s["num_partitions"] for s in stats["segments"]), len(stats["segments"])

    def _reshape_vector_index(self, table: Table) -> None:
        """After compaction (which adds a segment): train the index anew once the table has outgrown its
        partitions (VECTOR_RETRAIN_GROWTH), or else merge its segments past VECTOR_SEGMENTS."""
        table.checkout_latest()
        shape = self._vector_index_shape(table)
        if shape is None:
            return
        partitions, segments = shape
        if table.count_rows() >= VECTOR_RETRAIN_GROWTH * partitions**2:
            self._ensure_vector_index(table, again=True)
        elif segments > VECTOR_SEGMENTS:
            self._dataset(table).optimize.optimize_indices(index_names=[VECTOR_INDEX], num_indices_to_merge=segments)

    def _clean(self, dataset: LanceDataset, keep_versions_for: timedelta) -> None:
        """Delete the versions older than `keep_versions_for` or than the newest KEEP_VERSIONS, then
        every file that no remaining version references and that is older than ORPHAN_AGE (a crash's
        leftovers). On an object store, where each pass of Lance's cleanup reads every manifest there
        is (a request each), one pass: the versions beyond the newest KEEP_VERSIONS, whatever their
        age (all but the latest when `keep_versions_for` is zero: an erasure)."""
        if self._remote and keep_versions_for > timedelta(0):
            dataset.cleanup_old_versions(retain_versions=KEEP_VERSIONS, error_if_tagged_old_versions=False)
            return  # object stores: Lance's own cleanup collects a crash's leftovers after seven days
        dataset.cleanup_old_versions(older_than=keep_versions_for, error_if_tagged_old_versions=False)
        if keep_versions_for > timedelta(0):  # else only the latest is left (an erasure): nothing more to list
            dataset.cleanup_old_versions(retain_versions=KEEP_VERSIONS, error_if_tagged_old_versions=False)
        if self._remote:
            return
        tracked = set(dataset.tracked_files().read_all()["path"].to_pylist())
        present = dataset.all_files().read_all().to_pylist()
        cutoff = datetime.now(UTC) - ORPHAN_AGE
        root = dataset.uri
        for file in present:
            path = file["path"]
            if path in tracked or path.startswith("_versions/") or file["last_modified"] > cutoff:
                continue
            log.info("removing %s, which no version of %s references (left by a crash)", path, root)
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(root, path))

    def _exclusive(self, wait: float) -> AbstractContextManager[Any]:
        """One process at a time, for upkeep and erasure: a lock file beside a store on disk, the
        upkeep lease on object storage (lease.py). Raises filelock's Timeout after `wait` seconds."""
        if self._lease is not None:
            return self._lease.held(wait)
        return FileLock(os.path.join(self.uri, ".compact.lock"), timeout=wait)


def _wanted_indexes(name: str) -> dict[str, Any]:
    """Each indexed column of a table, with the index it gets (`Tables.ensure_indexes`)."""
    from lancedb.index import FTS, Bitmap, BTree

    configs = {"BTree": BTree, "Bitmap": Bitmap}
    wanted: dict[str, Any] = {column: configs[kind]() for column, kind in SCALAR_INDEXES[name].items()}
    if name == NOTES:
        wanted["text"] = FTS(base_tokenizer="icu")  # ICU word segmentation handles English (stemmed) and CJK
    return wanted


def _indexed_columns(table: Table) -> set[str]:
    return {index.columns[0] for index in table.list_indices() if len(index.columns) == 1}


def _mistyped(table: Table) -> list[IndexConfig]:
    """A table's scalar indexes of another type than SCALAR_INDEXES says (a store made before it
    said so)."""
    wanted = SCALAR_INDEXES[table.name]
    return [
        index
        for index in table.list_indices()
        if len(index.columns) == 1 and wanted.get(index.columns[0], index.index_type) != index.index_type
    ]


def _tidy_small(table: Table, keep_versions_for: timedelta) -> None:
    """A small table's upkeep: its fragments merged, its versions older than `keep_versions_for` dropped."""
    table.checkout_latest()
    dataset = table.to_lance()
    dataset.optimize.compact_files()
    dataset.cleanup_old_versions(older_than=keep_versions_for, error_if_tagged_old_versions=False)


def _delete(table: Table, clause: str) -> None:
    """Delete the rows matching `clause` in the latest version: the rows other processes appended
    since this one last looked included."""
    table.checkout_latest()
    table.delete(clause)


def _wholly_indexed(view: LanceDataset) -> bool:
    """Whether the vector index covers every fragment of this version. Then a search through it returns
    the index's 8-bit estimates of 2 - 2·cos (the normalized vectors' squared distance), not 1 - cos:
    Lance re-scores the hits exactly, from their vectors, only when it also searches fragments the
    index has not taken in (any, whatever the filter). Both come from the version's metadata: on the
    bucket bench, recalls asked again took 49 ms with this check and 50 without (docs/object-storage.md, "Measured")."""
    indexed = {
        fragment
        for index in view.describe_indices()
        if index.name == VECTOR_INDEX
        for segment in index.segments
        for fragment in segment.fragment_ids
    }
    return all(fragment.fragment_id in indexed for fragment in view.get_fragments())


def _has_vector_index(table: Table) -> bool:
    return any(index.columns == ["vector"] for index in table.list_indices())


def _preempted(exc: Exception) -> bool:
    """Whether Lance refused a commit because another process committed first, and says to retry."""
    return "Retryable commit conflict" in str(exc) or "preempted by concurrent transaction" in str(exc)


def _committed(name: str, view: LanceDataset, operation: Any) -> LanceDataset:
    """Commit an append to table `name` made on `view`'s version, trying again at once when another
    process took the version first (the bucket refused this one's manifest). Lance would wait itself,
    a random number of its first attempt's durations, out of 4, then 8, then 16: on the three-server
    bench, writes that lost two or three races waited 1-5 s (docs/object-storage.md, *Measured*). Another append
    never conflicts with this one, so the next attempt, which reads what landed, only has to come
    before a third writer's: a few milliseconds of jitter, doubling, keep many writers apart."""
    from lance import LanceDataset

    for attempt in itertools.count(1):
        try:
            return LanceDataset.commit(view, operation, read_version=view.version, max_retries=1)
        except Exception as exc:
            if not _raced(exc):
                raise
            if attempt >= COMMIT_ATTEMPTS:
                raise StoreBusy(name, attempt) from exc
            log.info("another process committed this version first; committing on the next")
            time.sleep(random.uniform(0, COMMIT_BACKOFF * 2 ** min(attempt - 1, 6)))
    raise AssertionError("unreachable")


def _raced(exc: Exception) -> bool:
    """Whether a commit lost its version to another process's (and can simply be tried again)."""
    return "Failed to commit the transaction after" in str(exc) or _preempted(exc)


def _until_committed(work: Callable[[], T], wait: float) -> T:
    """Run `work` again, on the latest version, for as long as another process's commit preempts it
    (up to `wait` seconds, backing off): what guards upkeep and erasure on an object store, where no
    lock file can (docs/object-storage.md)."""
    deadline = time.monotonic() + wait
    for attempt in itertools.count():
        try:
            return work()
        except Exception as exc:
            if not _preempted(exc) or time.monotonic() > deadline:
                raise
            log.info("another process committed first (%s); trying again", str(exc).splitlines()[0][:160])
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")
