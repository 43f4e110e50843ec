"""LanceDB access: the notes and events tables, both append-only.

Every process connects with `read_consistency_interval=0`, so it sees the other processes'
writes before each read. Writes are appends (which never conflict in Lance); a real delete
happens only in `forget`. Ids are made by the writer, so a retried append can leave a
duplicate row: readers keep the first row of each id.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import where
from .errors import ModelMismatch
from .model import Event, EventKind, Note

if TYPE_CHECKING:
    from lancedb.db import DBConnection
    from lancedb.table import Table

log = logging.getLogger(__name__)

NOTES = "notes"
EVENTS = "events"
MODEL_KEY = b"corrigenda.model"
# Compact once a table has this many fragments: each append is one, and a search reads them all.
COMPACT_AT_FRAGMENTS = 48
# Versions older than this are deleted by compaction; a reader holding one is long done.
KEEP_VERSIONS_FOR = timedelta(hours=1)

_NOTE_COLUMNS = [
    "id", "text", "scope", "kind", "subject", "tags", "source", "actor", "confidence",
    "recorded_at_us", "valid_from_us", "valid_until_us",
]  # fmt: skip
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


def _note_schema(model: str, dimension: int) -> pa.Schema:
    return pa.schema(
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
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ],
        metadata={MODEL_KEY: model.encode()},
    )


@dataclass(frozen=True)
class DenseHit:
    note: Note
    similarity: float
    dense_ok: bool


@dataclass(frozen=True)
class TextHit:
    note: Note
    score: float


def _from_us(value: int | None) -> datetime | None:
    return None if value is None else _at(value)


def _at(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1_000_000, UTC)


def _note_from_row(row: dict[str, Any]) -> Note:
    return Note(
        id=row["id"],
        text=row["text"],
        scope=row["scope"],
        kind=row["kind"],
        subject=row["subject"],
        tags=row["tags"] or [],
        source=row["source"],
        actor=row["actor"],
        confidence=row["confidence"],
        recorded_at=_at(row["recorded_at_us"]),
        valid_from=_from_us(row["valid_from_us"]),
        valid_until=_from_us(row["valid_until_us"]),
    )


def _event_from_row(row: dict[str, Any]) -> Event:
    return Event(
        id=row["id"],
        kind=EventKind(row["kind"]),
        src=row["src"],
        dst=row["dst"],
        scope=row["scope"],
        reason=row["reason"],
        actor=row["actor"],
        confidence=row["confidence"],
        recorded_at=_at(row["recorded_at_us"]),
    )


def _first_of_each_id(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["id"], row)
    return list(seen.values())


def _micros(t: datetime | None) -> int | None:
    return None if t is None else where.to_micros(t)


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
        self._writes_since_check = 0

    # -- opening -----------------------------------------------------------------------------

    @property
    def db(self) -> DBConnection:
        with self._open_lock:
            if self._db is None:
                import lancedb

                if "://" not in self.uri:
                    os.makedirs(self.uri, exist_ok=True)
                self._db = lancedb.connect(
                    self.uri, read_consistency_interval=timedelta(0), storage_options=self._storage_options
                )
            return self._db

    def _table_names(self) -> set[str]:
        return set(self.db.list_tables().tables)

    def notes_table(self) -> Table | None:
        """The notes table, or None while the store is empty (it is made at the first write)."""
        if self._notes is None and NOTES in self._table_names():
            self._notes = self.db.open_table(NOTES)
        return self._notes

    def events_table(self) -> Table:
        if self._events is None:
            self._events = self.db.create_table(EVENTS, schema=_EVENT_SCHEMA, exist_ok=True)
        return self._events

    def stored_model(self) -> tuple[str, int] | None:
        """(model name, dimension) the notes table was built with; None for an empty store."""
        table = self.notes_table()
        if table is None:
            return None
        schema = table.schema
        name = (schema.metadata or {}).get(MODEL_KEY, b"?").decode()
        return name, schema.field("vector").type.list_size

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
            from lancedb.index import FTS

            table = self.db.create_table(NOTES, schema=_note_schema(model, dimension), exist_ok=True)
            # ICU word segmentation handles English (stemmed) and CJK, which the default
            # embedding model reads as unknown tokens: full text is how Chinese is found.
            try:
                table.create_index("text", config=FTS(base_tokenizer="icu"))
            except Exception:
                if not any(index.columns == ["text"] for index in table.list_indices()):
                    raise  # not a race with another process that made it first
            self._notes = table
        self.check_model(model, dimension)
        return table

    # -- writing -----------------------------------------------------------------------------

    def add_note(self, note: Note, vector: Sequence[float], dense_ok: bool, model: str) -> None:
        self.add_notes([(note, vector, dense_ok)], model)

    def add_notes(self, notes: Sequence[tuple[Note, Sequence[float], bool]], model: str) -> None:
        """Notes with their embeddings and whether the model could read them, in one write."""
        if not notes:
            return
        table = self._ensure_notes(model, len(notes[0][1]))
        rows = [
            {
                "id": note.id, "text": note.text, "scope": note.scope, "kind": note.kind,
                "subject": note.subject, "tags": note.tags, "source": note.source, "actor": note.actor,
                "confidence": note.confidence, "recorded_at_us": where.to_micros(note.recorded_at),
                "valid_from_us": _micros(note.valid_from), "valid_until_us": _micros(note.valid_until),
                "dense_ok": dense_ok, "vector": list(vector),
            }
            for note, vector, dense_ok in notes
        ]  # fmt: skip
        table.add(pa.Table.from_pylist(rows, schema=table.schema))
        self._wrote()

    def add_events(self, events: Sequence[Event]) -> None:
        if not events:
            return
        rows = [
            {
                "id": e.id,
                "kind": e.kind.value,
                "src": e.src,
                "dst": e.dst,
                "scope": e.scope,
                "reason": e.reason,
                "actor": e.actor,
                "confidence": e.confidence,
                "recorded_at_us": where.to_micros(e.recorded_at),
            }
            for e in events
        ]
        self.events_table().add(pa.Table.from_pylist(rows, schema=_EVENT_SCHEMA))
        self._wrote()

    def delete(self, note_id: str, event_ids: Sequence[str]) -> None:
        """A real delete (`forget`), then compaction so the text leaves the data files too."""
        if event_ids:
            self.events_table().delete(where.id_in(event_ids))
        table = self.notes_table()
        if table is not None:
            table.delete(where.id_in([note_id]))
        # Privacy over availability: old versions still hold the text, so they go now. A reader
        # in another process caught on one of them fails that one call (LanceDB warns of it).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
            self.compact(keep_versions_for=timedelta(0))

    # -- reading -----------------------------------------------------------------------------

    def notes(self, ids: Iterable[str]) -> dict[str, Note]:
        ids = list(dict.fromkeys(ids))
        table = self.notes_table()
        if not ids or table is None:
            return {}
        rows = table.search().where(where.id_in(ids)).select(_NOTE_COLUMNS).limit(None).to_arrow().to_pylist()
        return {row["id"]: _note_from_row(row) for row in _first_of_each_id(rows)}

    def vectors(self, ids: Iterable[str]) -> dict[str, list[float]]:
        """Stored embeddings of these notes, for those the model could read."""
        ids = list(dict.fromkeys(ids))
        table = self.notes_table()
        if not ids or table is None:
            return {}
        clause = where.all_of(where.id_in(ids), where.model_could_read())
        rows = table.search().where(clause).select(["id", "vector"]).limit(None).to_arrow().to_pylist()
        return {row["id"]: row["vector"] for row in _first_of_each_id(rows)}

    def events(self, scope: str, at: datetime | None = None) -> list[Event]:
        clause = where.in_scope(scope, at)
        rows = self.events_table().search().where(clause).limit(None).to_arrow().to_pylist()
        return [_event_from_row(row) for row in _first_of_each_id(rows)]

    def event(self, event_id: str) -> Event | None:
        rows = self.events_table().search().where(where.id_in([event_id])).limit(1).to_arrow().to_pylist()
        return _event_from_row(rows[0]) if rows else None

    def vector_search(self, vector: Sequence[float], scope: str, at: datetime | None, limit: int) -> list[DenseHit]:
        table = self.notes_table()
        if table is None:
            return []
        clause = where.in_scope(scope, at)
        query: Any = table.search(list(vector), vector_column_name="vector")
        rows = (
            query.distance_type("cosine")
            .where(clause, prefilter=True)
            .select([*_NOTE_COLUMNS, "dense_ok", "_distance"])
            .limit(limit)
            .to_arrow()
            .to_pylist()
        )
        return [DenseHit(_note_from_row(r), 1.0 - r["_distance"], bool(r["dense_ok"])) for r in _first_of_each_id(rows)]

    def text_search(self, query: str, scope: str, at: datetime | None, limit: int) -> list[TextHit]:
        from lancedb.query import MatchQuery

        table = self.notes_table()
        if table is None or not query.strip():
            return []
        clause = where.in_scope(scope, at)
        rows = (
            table.search(MatchQuery(query, "text"), query_type="fts")  # type: ignore[call-arg]
            .where(clause, prefilter=True)
            .select([*_NOTE_COLUMNS, "_score"])
            .limit(limit)
            .to_arrow()
            .to_pylist()
        )
        return [TextHit(_note_from_row(r), float(r["_score"])) for r in _first_of_each_id(rows)]

    def count(self) -> dict[str, int]:
        table = self.notes_table()
        return {"notes": table.count_rows() if table is not None else 0, "events": self.events_table().count_rows()}

    # -- upkeep ------------------------------------------------------------------------------

    def _wrote(self) -> None:
        self._writes_since_check += 1
        if self._writes_since_check >= 16:
            self._writes_since_check = 0
            threading.Thread(target=self.compact_if_fragmented, name="corrigenda-compact", daemon=True).start()

    def fragments(self) -> dict[str, int]:
        tables = {EVENTS: self.events_table(), NOTES: self.notes_table()}
        stats: dict[str, Any] = {name: t.stats() for name, t in tables.items() if t is not None}
        return {name: int(s["fragment_stats"]["num_fragments"]) for name, s in stats.items()}

    def compact_if_fragmented(self) -> bool:
        try:
            if max(self.fragments().values(), default=0) < COMPACT_AT_FRAGMENTS:
                return False
            return self.compact()
        except Exception:  # upkeep must never fail a caller's write
            log.exception("compaction failed; it will be tried again after later writes")
            return False

    def compact(self, keep_versions_for: timedelta = KEEP_VERSIONS_FOR) -> bool:
        """Merge small fragments and update indexes, one process at a time (False: another is at it)."""
        with self._compact_lock, _InterProcessLock(self.uri) as acquired:
            if not acquired:
                return False
            for table in (self.events_table(), self.notes_table()):
                if table is not None:
                    table.optimize(cleanup_older_than=keep_versions_for)
            return True


class _InterProcessLock:
    """A non-blocking lock file beside a local store; object stores rely on Lance's commit checks."""

    def __init__(self, uri: str) -> None:
        self._path = None if "://" in uri else os.path.join(uri, ".compact.lock")
        self._fd: int | None = None

    def __enter__(self) -> bool:
        if self._path is None:
            return True
        self._fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
