"""The stored records: notes and lifecycle events. Both are immutable once written."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidArgument

MAX_TEXT = 20_000


class EventKind(StrEnum):
    SUPERSEDES = "supersedes"  # src replaces dst
    REVOKES = "revokes"  # dst was wrong; no replacement
    REINSTATES = "reinstates"  # dst (a note or a revokes/supersedes event) is retracted
    REFINES = "refines"  # src adds detail to dst; both stay current
    DEPENDS_ON = "depends_on"  # src needs dst to make sense
    FORGETS = "forgets"  # dst was erased for good: a tombstone that keeps no text of it


class NoteState(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    REVOKED = "revoked"
    EXPIRED = "expired"  # valid_until has passed
    PENDING = "pending"  # valid_from is still ahead


class ChainStatus(StrEnum):
    CURRENT = "current"  # one head (or heads that only refine each other)
    CONTESTED = "contested"  # several heads that disagree, e.g. two corrections of one note
    RETRACTED = "retracted"  # no head: every member was revoked or replaced by a revoked note
    EXPIRED = "expired"  # no head, and some member is merely outside its validity window


class NoteFields(BaseModel):
    """What a writer says in a note: the fields a `Draft` gives and a stored `Note` keeps."""

    text: str
    kind: str = "fact"
    subject: str | None = None
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    confidence: float = 1.0
    valid_from: datetime | None = None
    valid_until: datetime | None = None


def check_fields(fields: NoteFields) -> None:
    """What every stored note must satisfy, however it arrives (a write, an import): raises naming the field."""
    if not fields.text or not fields.text.strip():
        raise InvalidArgument("text", "must not be empty")
    if len(fields.text) > MAX_TEXT:
        raise InvalidArgument("text", f"is {len(fields.text)} characters; the limit is {MAX_TEXT}")
    if not 0.0 <= fields.confidence <= 1.0:
        raise InvalidArgument("confidence", f"{fields.confidence} is outside 0..1")
    if not fields.kind or not fields.kind.strip():
        raise InvalidArgument("kind", "must not be empty")
    valid_from, valid_until = fields.valid_from, fields.valid_until
    if valid_from and valid_until and _aware(valid_until) <= _aware(valid_from):
        raise InvalidArgument("valid_until", "must be later than valid_from")


def _aware(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


class Draft(NoteFields):
    """A note to write (`Memory.remember`, `correct`, `import_notes`): the store adds its id, scope and actor.

    A correction keeps the old note's kind, subject and tags where its draft leaves them unset."""

    at: datetime | None = Field(None, description="When it was recorded; default now.")


class Note(NoteFields):
    """A claim, as written. Its state is never stored: it is folded from events."""

    model_config = ConfigDict(frozen=True)

    id: str
    scope: str
    actor: str | None = None
    recorded_at: datetime


class Event(BaseModel):
    """A lifecycle edge. `dst` is a note id, or for `reinstates` a note or event id."""

    model_config = ConfigDict(frozen=True)

    id: str
    kind: EventKind
    src: str | None
    dst: str
    scope: str
    reason: str | None = None
    actor: str | None = None
    confidence: float = 1.0
    recorded_at: datetime
