"""Ids are made by the writer (so a retried write carries the same id) and checked before any use."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time

from .errors import InvalidArgument

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
NOTE_PREFIX = "n_"
EVENT_PREFIX = "e_"
_CHARS = "[0-9a-hjkmnp-tv-z]{26}"  # 26 characters of _ALPHABET
ID_PATTERN = rf"^[ne]_{_CHARS}$"  # a note or event id, as schemas and checks match it
NOTE_ID_PATTERN = rf"^n_{_CHARS}$"
_ID = re.compile(ID_PATTERN)


_last = 0
_lock = threading.Lock()


def _ulid() -> str:
    """26 characters: 48 bits of milliseconds then 80 random bits, so ids sort by creation time.

    Monotonic within a process: an id made in the same millisecond as the previous one is that
    one plus 1, so the events one call writes keep their order (the fold sorts by time, then id)."""
    global _last
    with _lock:
        value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
        if value >> 80 <= _last >> 80:
            value = _last + 1
        _last = value
    return _encode(value)


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_note_id() -> str:
    return NOTE_PREFIX + _ulid()


def new_event_id() -> str:
    return EVENT_PREFIX + _ulid()


def derived_id(prefix: str, *parts: str) -> str:
    """An id made from what a record says rather than when, for imports from sources that have no ids
    (the knowledge-graph memory): importing the same record again finds it stored."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).digest()
    return prefix + _encode(int.from_bytes(digest, "big"))


def is_note_id(ident: str) -> bool:
    return ident.startswith(NOTE_PREFIX)


def check_id(ident: str, field: str, *, prefix: str | None = None) -> str:
    """Return `ident` if it is a well-formed id (of the given kind); raise naming `field` if not."""
    if not isinstance(ident, str) or not _ID.match(ident):
        raise InvalidArgument(field, f"{ident!r} is not an id this server issued (like 'n_01k…' or 'e_01k…')")
    if prefix is not None and not ident.startswith(prefix):
        kind = "note" if prefix == NOTE_PREFIX else "event"
        raise InvalidArgument(field, f"{ident!r} is not a {kind} id (those start with {prefix!r})")
    return ident
