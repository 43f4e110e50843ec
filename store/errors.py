"""What the engine raises. The server maps each of these to a tool error in one place."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping


class CorrigendaError(Exception):
    """Base class: a request the store refused; nothing was written."""


class InvalidArgument(CorrigendaError):
    """An argument is malformed or contradicts the store; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownScope(InvalidArgument):
    """A read of a scope nothing was ever stored in, named by its caller while other scopes hold notes:
    most often a typo, of the scope or of the store's path. `scopes`: every scope of the store with its
    notes; `said` names the nearest of them (of those a caller may read, given `visible`)."""

    NAMED = 5  # the nearest scopes the message names

    def __init__(self, scope: str, scopes: Mapping[str, int]) -> None:
        self.scope = scope
        self.scopes = dict(scopes)
        super().__init__("scope", self.said())

    def nearest(self, visible: Callable[[str], bool] | None = None) -> dict[str, int]:
        """The nearest scopes by name (of those `visible` accepts), nearest first, with their notes."""
        notes = {name: n for name, n in self.scopes.items() if visible is None or visible(name)}
        names = list(notes)
        nearest = difflib.get_close_matches(self.scope, names, n=self.NAMED, cutoff=0.0) if len(names) > 1 else names
        return {name: notes[name] for name in nearest}

    def said(self, visible: Callable[[str], bool] | None = None) -> str:
        nearest = self.nearest(visible)
        said = f"nothing was ever stored in scope {self.scope!r} (mistyped, or a project with no notes yet?); "
        if not nearest:
            return said + f"no scope you may read holds anything yet. A write to {self.scope!r} makes it"
        names = [name for name in self.scopes if visible is None or visible(name)]
        listed = ", ".join(f"{name!r} ({n} note{'' if n == 1 else 's'})" for name, n in nearest.items())
        more = ""
        if len(names) > len(nearest):
            more = f", and {len(names) - len(nearest)} more (`scopes` lists them; its `contains` finds one by name)"
        whose = "the nearest scopes" if visible is None else "the nearest scopes you may read"
        return said + f"{whose}: {listed}{more}. A write to {self.scope!r} makes it"


class NotFound(CorrigendaError):
    """No note or event has this id (in this scope)."""

    def __init__(self, what: str, ident: str, field: str = "note_id") -> None:
        super().__init__(f"{field}: no {what} with id {ident!r}")
        self.ident = ident
        self.field = field


class Conflict(CorrigendaError):
    """The write would break an invariant, e.g. a cycle of supersessions."""


class ModelMismatch(CorrigendaError):
    """The store was built with another embedding model or dimension."""


class ModelUnavailable(CorrigendaError):
    """The embedding model named by the settings cannot be loaded here (corrigenda never downloads one)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(
            f"model: {name!r} could not be loaded ({detail}). corrigenda never downloads a model at run time: "
            "set --model / CORRIGENDA_MODEL to the path of a sentence-transformers model directory, to a model "
            "already in the local Hugging Face cache, or leave it unset for the bundled all-MiniLM-L6-v2"
        )
        self.name = name


class _BucketError(CorrigendaError):
    """A problem with an object-store location; each kind says it with its own `MESSAGE`."""

    MESSAGE = ""

    def __init__(self, uri: str, detail: str) -> None:
        super().__init__(self.MESSAGE.format(uri=uri, detail=detail))
        self.uri = uri
        self.detail = detail


class StoreUnreachable(_BucketError):
    """An object-store location could not be opened: no such bucket, refused credentials, no endpoint."""

    MESSAGE = (
        "db: cannot open {uri} ({detail}). Set the bucket's credentials and endpoint in the environment "
        "(for s3://: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, and AWS_ENDPOINT_URL for an "
        "S3-compatible store) or as key=value pairs in CORRIGENDA_STORAGE_OPTIONS"
    )


class StoreFailing(_BucketError):
    """The object store answered a request with an error of its own (5xx), or not at all (hung)."""

    MESSAGE = (
        "db: the object store at {uri} is failing ({detail}). Check that it is up and healthy (its own logs) "
        "and that AWS_ENDPOINT_URL or CORRIGENDA_STORAGE_OPTIONS names it; then start again"
    )


class ConditionalWritesIgnored(_BucketError):
    """The object store takes a second write of an object with `If-None-Match: *` instead of refusing it:
    servers sharing it would replace each other's commits (storage/conditional_writes.py)."""

    MESSAGE = (
        "db: the object store at {uri} does not honour conditional writes ({detail}), so servers sharing it "
        "would silently lose each other's writes. Run one server only, with --single-writer "
        "(CORRIGENDA_SINGLE_WRITER=1), or keep the commits in DynamoDB: --db s3+ddb://BUCKET/PREFIX?ddbTableName=TABLE "
        "(docs/object-storage.md)"
    )


class StoreUnavailable(_BucketError):
    """The object store stopped answering during a call (an outage): the call may not have been carried out."""

    MESSAGE = (
        "db: the store at {uri} is not answering ({detail}), so this call may not have been carried out; "
        "nothing acknowledged before is lost. Call again once the store answers (a remember of the same "
        "text returns the note if it was stored after all)"
    )


class StoreBusy(CorrigendaError):
    """Other processes committed to a table first, every time this write tried: it was not stored."""

    def __init__(self, table: str, attempts: int) -> None:
        super().__init__(
            f"db: other servers committed to the {table} table first, {attempts} times in a row, so this call "
            "stored nothing that any reader sees. Call again: it is safe to repeat"
        )
        self.table = table
