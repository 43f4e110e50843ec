"""The one place that writes LanceDB `where` clauses.

LanceDB takes raw SQL with no parameter binding, so every value reaching a clause passes
through here: ids must be ids, scopes must match `SCOPE_PATTERN`, times are integers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from .errors import InvalidArgument
from .ids import check_id

SCOPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@/+-]{0,127}$"
_SCOPE = re.compile(SCOPE_PATTERN)


def check_scope(scope: str, field: str = "scope") -> str:
    if not isinstance(scope, str) or not _SCOPE.match(scope):
        raise InvalidArgument(
            field,
            f"{scope!r} is not a scope: use 1-128 letters, digits and _ . : @ / + -, starting with a letter or digit",
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


def model_could_read() -> str:
    """Rows whose text the embedding model could represent (see `Embedder.readable`)."""
    return "dense_ok = true"


def naming(note_id: str) -> str:
    """Events whose source or target is this note."""
    quoted = _quote(check_id(note_id, "note_id"))
    return f"src = {quoted} OR dst = {quoted}"


def kind_is(kind: str) -> str:
    if not kind.isidentifier():
        raise ValueError(f"not an event kind: {kind!r}")
    return f"kind = {_quote(kind)}"
