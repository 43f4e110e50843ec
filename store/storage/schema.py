"""The on-disk layout of a store's tables and the codec between their rows and the models: a note or
an event as a row and back (`row_of`, `note_from_row`, `event_from_row`), and what a read hands on
(`Hit`, `ScopeRows`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from .. import where
from ..model import EARLIEST, LATEST, Event, Note

NOTES = "notes"
EVENTS = "events"
ERASURES = "erasures"  # one row per forgotten note whose erasure a pass finished (Tables, erasure)
MODEL_KEY = b"corrigenda.model"

# The on-disk layout, column by column. Stores already made have it, so it is spelled out here, as
# it is on disk, rather than derived from the models: a field added to a model must not change the
# format unnoticed. Which field each column holds, and how, comes from the models (_columns), and
# the two are checked against each other when this module loads.
EVENT_SCHEMA = pa.schema(
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
_NOTE_SCHEMA = pa.schema(  # and the vector, as wide as the store's model makes it (note_schema)
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


def note_schema(model: str, dimension: int) -> pa.Schema:
    """The notes table's schema for a store built with `model`: the columns above and a vector of
    `dimension` floats, the model's name kept in the schema's metadata (MODEL_KEY)."""
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


def row_of(record: BaseModel, columns: Sequence[_Column]) -> dict[str, Any]:
    """A note's or an event's row (`columns`: NOTE_STORED or EVENT_STORED), as it is written; a note's
    row lacks `dense_ok` and `vector`, which the writer adds. `note_from_row` and `event_from_row` read
    it back as it was."""
    return {c.name: c.to_row(getattr(record, c.field)) for c in columns}


M = TypeVar("M", bound=BaseModel)


def _record(model: type[M], columns: Sequence[_Column], row: dict[str, Any]) -> M:
    return model(**{c.field: c.from_row(row[c.name]) for c in columns if c.nullable or row[c.name] is not None})


# The columns each model's fields are stored in (a note's but `dense_ok`, and its vector), for `row_of`.
NOTE_STORED = _columns(Note, _NOTE_SCHEMA, "dense_ok")
EVENT_STORED = _columns(Event, EVENT_SCHEMA)
_NOTE_COLUMNS = [c.name for c in NOTE_STORED]


def note_from_row(row: dict[str, Any]) -> Note:
    """The note a row of the notes table holds (its other columns are left aside)."""
    return _record(Note, NOTE_STORED, row)


def event_from_row(row: dict[str, Any]) -> Event:
    """The event a row of the events table holds."""
    return _record(Event, EVENT_STORED, row)


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
        return {row["id"]: note_from_row(row) for row in self._rows.take(positions).to_pylist()}

    def addresses(self, ids: Iterable[str]) -> dict[str, int]:
        """Where the scan found those of `ids` it holds: Lance row addresses (a fragment's id and an
        offset in it), good for as long as that fragment is in the table (see `Tables.vectors`)."""
        positions = {i: self._at[i] for i in dict.fromkeys(ids) if i in self._at}
        if not positions:  # a scan older than another server's commit holds none of them: take([]) fails
            return {}
        found = self._rows["_rowid"].take(list(positions.values())).to_pylist()
        return dict(zip(positions, found, strict=True))
