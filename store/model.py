"""The stored records: notes and lifecycle events. Both are immutable once written."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidArgument

# What every stored note and event satisfies, however it arrives (a tool call, the CLI, an import):
# `check_fields` and `check_event` hold them, and the tools' schemas are built from the same numbers.
MAX_TEXT = 20_000
MAX_KIND = 64
MAX_SUBJECT = 256
MAX_TAGS = 32
MAX_TAG = 64
MAX_SOURCE = 1000
MAX_REASON = 2000
MAX_ACTOR = 256
MAX_LINKS = 32  # notes one write may supersede, or depend on
MAX_QUERY = 4000  # characters of a recall query
PERSON = "person:"  # an actor written by a person's hand (the web view), not by an agent: "person:alice"
# An actor written over authenticated HTTP: the credential's name, then the agent (client) it acted
# through: "ada via claude-code". A credential's name holds no space and no colon, so a bare client
# name that could pass for one (or for a person's) is kept as "client:NAME" (`agent_actor`).
VIA = " via "
CLIENT = "client:"
UNNAMED_AGENT = "unnamed client"
# Times are stored as int64 microseconds since 1970 and read back as datetimes: a time outside what a
# datetime holds once it is in UTC (an offset can push 9999-12-31T23:59:59-01:00 into year 10000)
# could be written but never read, and every read of its scope would fail.
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def agent_actor(name: str) -> str:
    """The actor of a client that wrote with no credential: its name, as 'client:NAME' when the name
    would read as a person's ('person:…') or as a credential's ('… via …')."""
    marked = CLIENT + name if name.startswith(PERSON) or VIA in name else name
    return marked[:MAX_ACTOR]


def credential_actor(credential: str, agent: str | None) -> str:
    """The actor of a write made with a credential: 'ada via claude-code' (the agent's name as
    `agent_actor` keeps it; 'unnamed client' when it gave none)."""
    return f"{credential}{VIA}{agent or UNNAMED_AGENT}"[:MAX_ACTOR]


def acted_by(actor: str | None) -> tuple[str | None, str | None]:
    """(credential, agent) of an actor: ('ada', 'claude-code') for 'ada via claude-code'; (None, actor)
    for any other (a client's bare name, a person's 'person:NAME', none)."""
    if actor is None:
        return None, None
    credential, via, agent = actor.partition(VIA)
    if via and credential and " " not in credential and ":" not in credential:
        return credential, agent
    return None, actor


class EventKind(StrEnum):
    SUPERSEDES = "supersedes"  # src replaces dst
    REVOKES = "revokes"  # dst was wrong; no replacement
    REINSTATES = "reinstates"  # dst (a note or a revokes/supersedes event) is retracted
    REFINES = "refines"  # src adds detail to dst; both stay current
    DEPENDS_ON = "depends_on"  # src needs dst to make sense
    DISTINCT = "distinct"  # src and dst state different facts, both current: neither is a new value of the other
    FORGETS = "forgets"  # dst was erased for good: a tombstone that keeps no text of it
    # A subject's declaration in a scope, dst "subject:<subject as written>" (subjects.py): it holds one
    # value (a remember of it supersedes its current note), or, withdrawn, any number. The latest wins.
    ONE_VALUE = "one_value"
    MANY_VALUES = "many_values"
    CONFIRMS = "confirms"  # dst, a current note, was checked and still holds (who, when, why); nothing else changes
    # How many days a scope's current notes stay checked, dst "days:<N>" ("days:0": no limit): a note
    # neither written nor confirmed for longer reads "unchecked since …". The latest wins.
    CHECK_EVERY = "check_every"


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
    check_text("text", fields.text, MAX_TEXT)
    if not 0.0 <= fields.confidence <= 1.0:
        raise InvalidArgument("confidence", f"{fields.confidence} is outside 0..1")
    if not fields.kind or not fields.kind.strip():
        raise InvalidArgument("kind", "must not be empty")
    check_text("kind", fields.kind, MAX_KIND)
    check_text("subject", fields.subject, MAX_SUBJECT)
    check_text("source", fields.source, MAX_SOURCE)
    if len(fields.tags) > MAX_TAGS:
        raise InvalidArgument("tags", f"has {len(fields.tags)} tags; the limit is {MAX_TAGS}")
    for i, tag in enumerate(fields.tags):
        check_text(f"tags[{i}]", tag, MAX_TAG)
    check_time("valid_from", fields.valid_from)
    check_time("valid_until", fields.valid_until)
    valid_from, valid_until = fields.valid_from, fields.valid_until
    if valid_from and valid_until and _aware(valid_until) <= _aware(valid_from):
        raise InvalidArgument("valid_until", "must be later than valid_from")


def check_text(field: str, value: str | None, limit: int) -> None:
    """A text field within its limit and storable: UTF-8 has no form for a lone surrogate ("\\ud800")."""
    if value is None:
        return
    if len(value) > limit:
        raise InvalidArgument(field, f"is {len(value)} characters; the limit is {limit}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            field, f"holds {value[exc.start]!r} at character {exc.start}, a lone surrogate that UTF-8 cannot store"
        ) from None


def check_time(field: str, value: datetime | None) -> None:
    """A time the store can write and read back: between EARLIEST and LATEST once in UTC (a time without
    an offset is UTC, as the store reads it)."""
    if value is None:
        return
    try:
        inside = EARLIEST <= _aware(value).astimezone(UTC) <= LATEST
    except OverflowError:  # the offset pushes it past year 1 or 9999
        inside = False
    if not inside:
        raise InvalidArgument(
            field,
            f"{value.isoformat()} is outside the supported range, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z in UTC",
        )


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


def check_event(event: Event) -> None:
    """What every stored event must satisfy beyond its model, however it arrives: raises naming the field."""
    check_text("reason", event.reason, MAX_REASON)
    check_text("actor", event.actor, MAX_ACTOR)
    if not 0.0 <= event.confidence <= 1.0:
        raise InvalidArgument("confidence", f"{event.confidence} is outside 0..1")
    check_time("recorded_at", event.recorded_at)
