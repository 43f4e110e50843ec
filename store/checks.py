"""What every write checks and makes before it stores anything: its note from a draft, its events, a
reason, that the notes it names still exist, and that a note it corrects is still current.

Pure functions of their arguments (the store is read by the write path, writes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from .errors import Conflict, InvalidArgument, NotFound
from .fold import Fold
from .ids import new_event_id, new_note_id
from .model import Draft, Event, EventKind, Note, NoteFields, NoteState, check_event, check_fields
from .where import check_scope

# How far past the store's clock a given time may be (a draft's `at`, an import's `recorded_at`): clocks
# of two machines differ; a year 9000 is no clock's error. A record dated later than now is read by
# nothing until then (every read reads what was recorded until now).
CLOCK_ALLOWANCE = timedelta(days=1)


def utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def recorded_time(at: datetime | None, clock: Callable[[], datetime], field: str = "at") -> datetime:
    """When a write is recorded: `at` (a back-dated write: an import, a history), else the clock's now.
    InvalidArgument naming `field` for an `at` later than now and CLOCK_ALLOWANCE."""
    now = clock()
    given = utc(at)
    if given is None:
        return now
    if given > now + CLOCK_ALLOWANCE:
        raise InvalidArgument(
            field, f"{given.isoformat()} is in the future: later than this store's clock "
            f"({now.isoformat(timespec='seconds')}) by more than a day; a write's time is when it was recorded"
        )  # fmt: skip
    return given


def current_or_refuse(before: Fold, note_id: str) -> None:
    """Refuse to correct a note that something already replaced or withdrew, naming what is current."""
    status = before.status[note_id]
    if status.state not in (NoteState.SUPERSEDED, NoteState.REVOKED):
        return
    how = f"superseded by {status.by}" if status.state is NoteState.SUPERSEDED else "revoked"
    heads = before.chain(note_id).heads
    if heads:
        now = ", ".join(heads)
        fix = f"correct the current note ({now}) instead"
    else:
        now = "nothing"
        fix = f"reinstate {note_id} first, or remember the fact anew"
    raise Conflict(
        f"note_id: {note_id} is no longer current ({how}); its chain's current note is {now}. "
        f"To update the fact, {fix}; to keep a second current version beside it on purpose, pass fork=true"
    )


def exist(folded: Fold, named: Mapping[str, Note], fields: Mapping[str, Sequence[str]]) -> None:
    """Named notes that were read but are forgotten (a tombstone, erasure under way) do not exist."""
    for field, ids in fields.items():
        for target in ids:
            note = named.get(target)
            if note is not None and note.recorded_at <= folded.at and target not in folded.notes:
                raise NotFound("note", target, field)


def checked_reason(reason: str | None) -> str:
    if reason is None or not reason.strip():
        raise InvalidArgument("reason", "say why: it is kept with the event and shown with the history")
    return reason.strip()


def checked_text(draft: Draft) -> str:
    """A draft's fields checked, and the text its note stores (what a write embeds)."""
    check_fields(draft)
    return draft.text.strip()


def new_note(draft: Draft, scope: str, actor: str | None, now: datetime) -> Note:
    """The note a draft makes, checked: recorded at the draft's `at`, or else `now`."""
    text = checked_text(draft)
    valid_from, valid_until = utc(draft.valid_from), utc(draft.valid_until)
    fields = draft.model_dump(include=set(NoteFields.model_fields)) | {
        "text": text, "kind": draft.kind.strip(), "tags": [t.strip() for t in draft.tags if t.strip()],
        "valid_from": valid_from, "valid_until": valid_until,
    }  # fmt: skip
    return Note(**fields, id=new_note_id(), scope=check_scope(scope), actor=actor, recorded_at=utc(draft.at) or now)


def new_event(
    kind: EventKind, src: str | None, dst: str, scope: str, reason: str | None, actor: str | None, now: datetime
) -> Event:
    event = Event(
        id=new_event_id(), kind=kind, src=src, dst=dst, scope=scope, reason=reason, actor=actor, recorded_at=now
    )
    check_event(event)
    return event
