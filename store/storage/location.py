"""What a store's URI says about its storage, asked in one place.

A store is a directory on this machine's disk (a path), or it is named by a URL: an object store
bucket (`s3://`, `gs://`, `az://`...) or LanceDB's in-memory storage (`memory://`). A URL names no
directory: nothing is made on disk, no lock file can be put beside it (the upkeep lease keeps
processes one at a time instead: lease.py), and a connection's errors can mean the storage is out of
reach. Everything the engine does differently for a URL it does for `memory://` too, though that is
no bucket (`is_bucket`): what it costs and the lease are a bucket's, which is harmless in one process.
"""

from __future__ import annotations

from dataclasses import dataclass

MEMORY = "memory://"  # LanceDB's in-memory storage


@dataclass(frozen=True)
class Location:
    """Where one store lives (its URI, as given)."""

    uri: str

    @property
    def is_remote(self) -> bool:
        """Named by a URL rather than a path: a bucket or memory (not a directory on this machine)."""
        return "://" in self.uri

    @property
    def is_local(self) -> bool:
        """A directory on this machine's disk: made if it is missing, with the lock file of upkeep in it."""
        return not self.is_remote

    @property
    def is_bucket(self) -> bool:
        """On an object store (where each read or write is a request, and the endpoint can be out of reach)."""
        return self.is_remote and not self.uri.startswith(MEMORY)
