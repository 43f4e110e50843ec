"""The stored records: notes and lifecycle events. Both are immutable once written."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


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
