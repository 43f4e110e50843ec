"""What a store's URI says about its storage, asked in one place.

A store is a directory on this machine's disk (a path), or it is named by a URL: an object store
bucket (`s3://`, `gs://`, `az://`...). A URL names no directory: nothing is made on disk, no lock file
can be put beside it (the upkeep lease keeps processes one at a time instead: lease.py), and a
connection's errors can mean the storage is out of reach. LanceDB's in-memory storage (`memory://`)
cannot hold a store: the engine reads each table through a Lance dataset of its own beside the LanceDB
connection, and each of them would find an empty memory (`Location.check`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument

MEMORY = "memory://"  # LanceDB's in-memory storage


@dataclass(frozen=True)
class Location:
    """Where one store lives (its URI, as given)."""

    uri: str

    def check(self) -> None:
        """InvalidArgument naming `db` if no store can live there."""
        if self.uri.startswith(MEMORY):
            raise InvalidArgument(
                "db",
                f"{self.uri!r} is LanceDB's in-memory storage, which cannot hold a corrigenda store (each table "
                "is read through a dataset of its own, which would find that memory empty); for a store that "
                "goes away, give a temporary directory",
            )

    @property
    def is_remote(self) -> bool:
        """Named by a URL rather than a path: a bucket (not a directory on this machine)."""
        return "://" in self.uri

    @property
    def may_ignore_conditional_writes(self) -> bool:
        """An S3 API (`s3://`), on which Lance commits by writing with `If-None-Match: *` and which some
        S3-compatible stores implement without it: worth a check at start (conditional_writes.py).
        Not `s3+ddb://` (DynamoDB settles the commits), `gs://` or `az://` (their own APIs'
        preconditions), nor a directory (a rename)."""
        return self.uri.split("://", 1)[0].lower() == "s3" and self.is_remote

    @property
    def is_local(self) -> bool:
        """A directory on this machine's disk: made if it is missing, with the lock file of upkeep in it."""
        return not self.is_remote
