"""Where a store lives, chosen once from its URI: a policy object whose properties answer what differs.

A store is a directory on this machine's disk (a path), or it is named by a URL: an object store
bucket (`s3://`, `gs://`, `az://`...). A URL names no directory: nothing is made on disk, no lock file
can be put beside it (the upkeep lease keeps processes one at a time instead: lease.py), each read is
requests, and a connection's errors can mean the storage is out of reach. LanceDB's in-memory storage
(`memory://`) cannot hold a store: the engine reads each table through a Lance dataset of its own beside
the LanceDB connection, and each of them would find an empty memory (`InMemory.check`).

`Location.of(uri)` chooses; nothing outside this module asks which kind a store is. The storage package
asks the policy what to do (`reads_vectors_along`, `erases_later`, `compact_at`...), the server asks it
for the directory on this machine's disk, if there is one (`directory`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument
from . import limits
from .retry import _failing, _unreachable

MEMORY = "memory://"  # LanceDB's in-memory storage


@dataclass(frozen=True)
class Location:
    """Where one store lives (its URI, as given), and what that changes. `Location.of` picks the kind."""

    uri: str

    @staticmethod
    def of(uri: str) -> Location:
        """The policy of the store at `uri`: a directory (a path), a bucket (a URL) or LanceDB's memory."""
        if uri.startswith(MEMORY):
            return InMemory(uri)
        return Bucket(uri) if "://" in uri else Directory(uri)

    def check(self) -> None:
        """InvalidArgument naming `db` if no store can live there."""

    # What differs, each answered by the kind below.
    directory: str | None = None  # the directory on this machine's disk that holds the store, if any
    reads_vectors_along = True  # reads by id bring the rows' vectors along (search.py)
    counts_scopes = True  # counting a scope's rows is cheap enough to decide how to search it (search.py)
    erases_later = False  # `forget` answers at its tombstone and a thread erases (erasure.py)
    refreshes_tables_at_once = False  # the two tables are caught up side by side (handles.py)
    uses_lease = False  # one process at a time by the upkeep lease, not a lock file (lease.py)
    collects_orphans = True  # cleanup lists and removes the files a crash left (compaction.py)
    cleans_in_one_pass = False  # cleanup keeps the newest versions in one pass, whatever their age
    may_ignore_conditional_writes = False  # worth a check at start (conditional_writes.py)

    # Numbers, read from limits.py when asked (a test lowers one before it opens a store).
    @property
    def compact_at(self) -> int:
        """Fragments that make a table due for compaction (upkeep.py)."""
        return limits.COMPACT_AT_FRAGMENTS

    @property
    def upkeep_check_every(self) -> int:
        """Writes between two looks whether upkeep is due (upkeep.py)."""
        return limits.UPKEEP_CHECK_EVERY

    @property
    def catch_up_from(self) -> int:
        """The fewest events a scope's graph holds for reading only what is new to cost less than reading
        the scope again (events.py): any, on a disk."""
        return 0

    def unreachable(self, exc: Exception) -> bool:
        """Whether `exc` means the storage stopped answering, or answers only with its own failure (a disk
        does not: its errors are its own)."""
        return False


@dataclass(frozen=True)
class Directory(Location):
    """A directory on this machine's disk: made if it is missing, with the lock file of upkeep in it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", self.uri)


@dataclass(frozen=True)
class Bucket(Location):
    """An object store's bucket: each read and write is requests; one process keeps upkeep by a lease; a
    `forget` is erased on a thread; a cleanup pass reads every manifest (a request each), so it is one."""

    reads_vectors_along = False  # about a request a row: read apart, for the heads alone
    counts_scopes = False  # counting costs requests, a filter none
    erases_later = True  # a pass takes 1-5 s (docs/object-storage.md, "Measured")
    refreshes_tables_at_once = True
    uses_lease = True
    collects_orphans = False  # Lance's own cleanup collects a crash's leftovers after seven days
    cleans_in_one_pass = True

    @property
    def compact_at(self) -> int:
        return limits.COMPACT_AT_FRAGMENTS_REMOTE

    @property
    def upkeep_check_every(self) -> int:
        return limits.UPKEEP_CHECK_EVERY_REMOTE

    @property
    def catch_up_from(self) -> int:
        return limits.CATCH_UP_FROM_REMOTE  # each version is requests

    @property
    def may_ignore_conditional_writes(self) -> bool:  # type: ignore[override]
        """`s3://` names AWS S3 and every S3-compatible store, some of which take `If-None-Match: *` and
        write anyway; Lance's commits rely on it being refused: worth a check at start. Not `s3+ddb://`
        (DynamoDB settles the commits), `gs://` or `az://` (their own APIs' preconditions)."""
        return self.uri.split("://", 1)[0].lower() == "s3"

    def unreachable(self, exc: Exception) -> bool:
        return _unreachable(exc) or _failing(exc)


@dataclass(frozen=True)
class InMemory(Bucket):
    """LanceDB's in-memory storage, which cannot hold a store."""

    def check(self) -> None:
        raise InvalidArgument(
            "db",
            f"{self.uri!r} is LanceDB's in-memory storage, which cannot hold a corrigenda store (each table "
            "is read through a dataset of its own, which would find that memory empty); for a store that "
            "goes away, give a temporary directory",
        )
