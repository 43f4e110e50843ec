"""The tools' argument types: what each argument means to the model, and its limits, which the store
owns (store/model.py, store/ids.py, store/where.py) save for the server's own policy below."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from corrigenda.store.errors import InvalidArgument
from corrigenda.store.ids import ID_PATTERN, NOTE_ID_PATTERN
from corrigenda.store.model import (
    MAX_KIND,
    MAX_QUERY,
    MAX_REASON,
    MAX_SOURCE,
    MAX_SUBJECT,
    MAX_TAG,
    MAX_TAGS,
    MAX_TEXT,
    check_time,
)
from mcp_types import ToolAnnotations
from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from .config import ScopeName

# The server's policy: a budget smaller than a short chain, or larger than any model's context, is
# a mistake to refuse; so is a chain count past what one answer can carry.
MIN_BUDGET, MAX_BUDGET = 50, 100_000
MAX_CHAINS = 200

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

Scope = Annotated[
    ScopeName,
    Field(description="Namespace (a user, project or agent; any name). Omit it for this session's default scope."),
]
NoteId = Annotated[str, Field(description="A note id returned by this server (n_…).", pattern=NOTE_ID_PATTERN)]
TargetId = Annotated[
    str,
    Field(
        description="A note id (undo whatever now excludes it) or the id of a revokes/supersedes event (retract just that).",
        pattern=ID_PATTERN,
    ),
]
Reason = Annotated[
    str, Field(description="Why: kept with the event and shown with the history.", min_length=1, max_length=MAX_REASON)
]
Text = Annotated[
    str, Field(description="The note, self-contained: say what it is about.", min_length=1, max_length=MAX_TEXT)
]
Kind = Annotated[
    str, Field(description="fact, decision, preference, procedure, observation, …", min_length=1, max_length=MAX_KIND)
]
Subject = Annotated[
    str | None,
    Field(description="Optional key of what the note is about, e.g. 'service.port'.", max_length=MAX_SUBJECT),
]
Tag = Annotated[str, Field(max_length=MAX_TAG)]
Tags = Annotated[list[Tag], Field(description="Free labels.", max_length=MAX_TAGS)]
Source = Annotated[
    str | None, Field(description="Where the note came from (file, URL, conversation).", max_length=MAX_SOURCE)
]
Confidence = Annotated[float, Field(description="How sure the writer is, 0 to 1.", ge=0.0, le=1.0)]
Query = Annotated[str, Field(description="What you want to know, in words.", min_length=1, max_length=MAX_QUERY)]


def iso_8601(value: object) -> datetime | None:
    """A time argument: an ISO 8601 string only (pydantic alone would also take 1 or "1" as seconds
    since 1970), inside what the store can write and read back (`model.check_time`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise PydanticCustomError(
            "iso_8601",
            "must be an ISO 8601 string such as 2026-11-01T09:00:00Z, not {kind}",
            {"kind": type(value).__name__},
        )
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError(
            "iso_8601", "'{value}' is not an ISO 8601 time such as 2026-11-01T09:00:00Z", {"value": value[:64]}
        ) from None
    try:
        check_time("time", moment)
    except InvalidArgument:
        raise PydanticCustomError(
            "time_range",
            "{value} is outside the supported range, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z in UTC",
            {"value": value[:64]},
        ) from None
    return moment


Time = BeforeValidator(iso_8601)
ValidFrom = Annotated[datetime | None, Time, Field(description="When it starts to hold in the world (ISO 8601).")]
ValidUntil = Annotated[
    datetime | None,
    Time,
    Field(description="When it stops holding (ISO 8601); after it the note is expired, not deleted."),
]
Budget = Annotated[int, Field(description="Token budget for the whole answer.", ge=MIN_BUDGET, le=MAX_BUDGET)]
AsOf = Annotated[datetime | None, Time, Field(description="Replay what the store believed at this time (ISO 8601).")]
