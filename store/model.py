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


class Note(BaseModel):
    """A claim, as written. Its state is never stored: it is folded from events."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    scope: str
    kind: str = "fact"
    subject: str | None = None
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    actor: str | None = None
    confidence: float = 1.0
    recorded_at: datetime
    valid_from: datetime | None = None
    valid_until: datetime | None = None


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


class Draft(BaseModel):
    """A note to import (see `Memory.import_notes`): what `remember` takes, without edges."""

    text: str
    kind: str = "fact"
    subject: str | None = None
    tags: list[str] = Field(default_factory=list)
    source: str | None = None
    confidence: float = 1.0
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    at: datetime | None = Field(None, description="When it was recorded; default now.")
