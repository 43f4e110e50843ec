"""The one place that writes LanceDB `where` clauses.

LanceDB takes raw SQL with no parameter binding, so every value reaching a clause passes
through here: ids must be ids, scopes are quoted strings (any name a person gives a project),
times are integers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from .errors import InvalidArgument
from .ids import check_id

# Any name a client substitutes for a project or folder ("My Project", "café", "项目", "O'Brien's
# notes") is a scope: up to 128 characters, not all blank, no control characters. Quoting makes it
# safe in a clause; `check_scope` also brings it to Unicode NFC, so the "café" a macOS folder name
# spells with a combining accent (NFD) is the same scope as the one typed on another system.
SCOPE_MAX = 128
SCOPE_PATTERN = r"^[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*$"
_SCOPE = re.compile(SCOPE_PATTERN)


def check_scope(scope: str, field: str = "scope") -> str:
    """The scope, in NFC; or InvalidArgument naming what is wrong with it."""
    if not isinstance(scope, str):
        raise InvalidArgument(field, f"must be a string, not {type(scope).__name__}")
    scope = unicodedata.normalize("NFC", scope)
    if not _SCOPE.match(scope) or len(scope) > SCOPE_MAX:
        raise InvalidArgument(
            field,
            f"{scope[:64]!r} is not a scope: use 1-{SCOPE_MAX} characters, not all blank, with no control characters",
        )
    return scope


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(t: datetime) -> int:
    """Exact integer microseconds since 1970 (a float would round 9999-12-31T23:59:59.999999 into year 10000)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return (t - EPOCH) // timedelta(microseconds=1)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def scope_is(scope: str) -> str:
    return f"scope = {_quote(check_scope(scope))}"


def recorded_by(at: datetime) -> str:
    return f"recorded_at_us <= {to_micros(at)}"


def id_in(ids: Iterable[str], column: str = "id") -> str:
    checked = [_quote(check_id(i, column)) for i in ids]
    return f"{column} IN ({', '.join(checked)})" if checked else "false"


def in_scope(scope: str, at: datetime | None = None) -> str:
    """Rows of a scope, recorded by `at` when it is given."""
    return scope_is(scope) if at is None else all_of(scope_is(scope), recorded_by(at))


def all_of(*clauses: str) -> str:
    return " AND ".join(f"({c})" for c in clauses)


def has_subject() -> str:
    return "subject IS NOT NULL"


def model_could_read() -> str:
    """Rows whose text the embedding model could represent (see `Embedder.readable`)."""
    return "dense_ok = true"


def naming(note_ids: Iterable[str]) -> str:
    """Events whose source or target is one of these notes."""
    listed = ", ".join(_quote(check_id(i, "note_id")) for i in note_ids)
    return f"src IN ({listed}) OR dst IN ({listed})" if listed else "false"


def kind_is(kind: str) -> str:
    return f"kind = {_quote(_checked_kind(kind))}"


def kind_in(kinds: Iterable[str]) -> str:
    listed = ", ".join(_quote(_checked_kind(k)) for k in kinds)
    return f"kind IN ({listed})" if listed else "false"


def _checked_kind(kind: str) -> str:
    if not kind.isidentifier():
        raise ValueError(f"not an event kind: {kind!r}")
    return kind


def lease_free(stale_before: datetime) -> str:
    """Rows of the upkeep lease (storage/lease.py) that nobody holds, or whose holder took them before this."""
    return f"taken_at_us < {to_micros(stale_before)}"


def held_by(holder: str) -> str:
    return f"holder = {_quote(holder)}"
