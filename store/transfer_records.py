"""One record of an export file, checked as an import checks it (transfer.py's module docstring): a note's
or an event's fields as a write checks them, with a tool call's types; a note's vector; its time."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, get_args

import numpy as np
from pydantic import BaseModel

from . import subjects
from .checks import CLOCK_ALLOWANCE
from .errors import InvalidArgument
from .fold import CHECK_DAYS
from .ids import EVENT_PREFIX, NOTE_PREFIX, check_id
from .model import MAX_ACTOR, Event, EventKind, Note, check_event, check_fields, check_text, check_time
from .where import check_scope

# Events of a scope as a whole, whose dst is no note or event (subjects.py, confirms.py), and the events
# of one note that have no src.
SCOPE_WIDE = (*subjects.DECLARING, EventKind.CHECK_EVERY)
NO_SOURCE = (EventKind.REVOKES, EventKind.REINSTATES, EventKind.FORGETS, EventKind.CONFIRMS)
FLOAT32_MAX = float(np.finfo(np.float32).max)  # a vector's elements are stored as float32
# A record's recorded_at is when it was recorded: not later than the importing store's clock, give or take
# a day for clocks that differ. One dated later (year 9000, say) would be stored, counted and exported, yet
# every read is of what was recorded until now: no recall, list or history would show it, nor could it
# be corrected, and an event so dated would act only then.


def not_after(recorded_at: datetime, now: datetime) -> None:
    """A record's time no later than `now` and CLOCK_ALLOWANCE (the earliest time is model.check_time's)."""
    now = (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).astimezone(UTC)  # a clock without an offset: UTC
    if recorded_at > now + CLOCK_ALLOWANCE:
        raise InvalidArgument(
            "recorded_at", f"{recorded_at.isoformat()} is in the future: later than this store's clock "
            f"({now.isoformat(timespec='seconds')}) by more than a day; a record's time is when it was recorded"
        )  # fmt: skip


def checked_vector(value: Any, dimension: int | None) -> list[float]:
    """A note's vector from a file: `dimension` numbers, each finite and within float32's range. Before
    this check a null (what a JSON writer makes of NaN) was stored, and every read of its scope that
    brings vectors along failed; a string or a list failed the write half-way; NaN, an infinity or
    1e39 (infinite in float32) was stored as a vector that matches nothing."""
    if dimension is None:
        raise InvalidArgument("vector", "the header gives no dimension for its vectors")
    if not isinstance(value, list):
        raise InvalidArgument("vector", f"must be a list of {dimension} numbers (the header's dimension)")
    if len(value) != dimension:
        raise InvalidArgument("vector", f"has {len(value)} numbers; the header's dimension is {dimension}")
    # one pass in C for the common case, a whole vector of floats; an element by element look to name a bad one
    if set(map(type, value)) <= {float, int}:
        with contextlib.suppress(OverflowError):  # an integer past float64's range: named below
            if np.all(np.abs(np.asarray(value, np.float64)) <= FLOAT32_MAX):
                return value
    for i, x in enumerate(value):
        if type(x) not in (float, int):
            raise InvalidArgument(f"vector[{i}]", f"{_shown(x)} is not a number")
        if isinstance(x, float) and not math.isfinite(x):
            raise InvalidArgument(f"vector[{i}]", f"{_shown(x)} is not a finite number")
        if abs(x) > FLOAT32_MAX:
            raise InvalidArgument(f"vector[{i}]", f"{_shown(x)} is outside float32's range")
    raise AssertionError("a vector refused with no element to blame")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else f"{text[:40]}…"


def _json_types(record: Mapping[str, Any], model: type[BaseModel]) -> None:
    """What pydantic would turn into a field's type but a tool call refuses (server/arguments.py): a
    number given as a string or a bool, a time given as a number or as other than ISO 8601."""
    for name, info in model.model_fields.items():
        value = record.get(name)
        if value is None:
            continue
        types = get_args(info.annotation) or (info.annotation,)
        if float in types and type(value) not in (float, int):
            raise InvalidArgument(name, f"must be a number, not {type(value).__name__}")
        if datetime in types:
            if not isinstance(value, str):
                raise InvalidArgument(
                    name, f"must be an ISO 8601 string such as 2026-11-01T09:00:00Z, not {type(value).__name__}"
                )
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise InvalidArgument(
                    name, f"{value[:64]!r} is not an ISO 8601 time such as 2026-11-01T09:00:00Z"
                ) from None


def note_from_record(record: dict[str, Any]) -> Note:
    """The note an export's record holds, checked as an import checks it: InvalidArgument names the field."""
    _known_fields(record, Note.model_fields)
    _json_types(record, Note)
    note = Note.model_validate(record)
    check_id(note.id, "id", prefix=NOTE_PREFIX)
    if check_scope(note.scope) != note.scope:
        raise InvalidArgument("scope", f"{note.scope!r} is not in Unicode NFC, as every stored scope is")
    check_fields(note)
    check_time("recorded_at", note.recorded_at)
    check_text("actor", note.actor, MAX_ACTOR)
    return note.model_copy(update={k: _aware(getattr(note, k)) for k in ("recorded_at", "valid_from", "valid_until")})


def event_from_record(record: dict[str, Any]) -> Event:
    """The event an export's record holds, checked as an import checks it: InvalidArgument names the field."""
    _known_fields(record, Event.model_fields)
    _json_types(record, Event)
    event = Event.model_validate(record)
    check_id(event.id, "id", prefix=EVENT_PREFIX)
    check_scope(event.scope)
    if event.src is not None:
        check_id(event.src, "src", prefix=NOTE_PREFIX)
    _check_dst(event)
    if (event.src is None) != (event.kind in (*NO_SOURCE, *SCOPE_WIDE)):
        raise InvalidArgument("src", f"a {event.kind.value} event {'has no' if event.src else 'needs a'} src")
    check_event(event)
    return event.model_copy(update={"recorded_at": _aware(event.recorded_at)})


def _check_dst(event: Event) -> None:
    """An event's dst as its kind has it: a subject, a number of days, an event id (reinstates) or a note id."""
    if event.kind in subjects.DECLARING:
        if not event.dst.startswith(subjects.PREFIX):
            raise InvalidArgument("dst", f"a {event.kind.value} event names {subjects.PREFIX!r} then the subject")
        subjects.checked_subject(subjects.subject_of(event), "dst")
    elif event.kind is EventKind.CHECK_EVERY:
        if not re.fullmatch(rf"{CHECK_DAYS}\d{{1,5}}", event.dst):
            raise InvalidArgument("dst", f"a check_every event's dst is {CHECK_DAYS!r} then a number of days")
    else:
        check_id(event.dst, "dst", prefix=None if event.kind is EventKind.REINSTATES else NOTE_PREFIX)


def _known_fields(record: Mapping[str, Any], fields: Iterable[str]) -> None:
    unknown = sorted(set(record) - set(fields))
    if unknown:
        raise InvalidArgument(unknown[0], "is not a field of this record")


def _aware(t: datetime | None) -> datetime | None:
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t
