"""Who may read and write which scope over HTTP: the grants file, read once at start.

Each credential in the file has a name, the SHA-256 of its bearer token (the token itself is never
stored) and the scope patterns it may read and write (fnmatch, case-sensitive, as scope names
are). A grant to write a scope is a grant to read it too: `remember` and `correct` answer with
what the scope already holds. `CORRIGENDA_TOKEN`, when set, is one more credential, named
`token`, with every grant. A caller without a credential (stdio, or HTTP on loopback with no
token and no grants) is the local user, with every grant.

    [[credentials]]
    name = "ada"
    token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    read = ["team-*", "ada"]
    write = ["ada"]

A file with an error stops the server before it listens, naming the line and what is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from mcp.server.auth.provider import AccessToken, TokenVerifier

SHARED_TOKEN = "token"  # the credential name of CORRIGENDA_TOKEN
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")  # no space, no colon: never "person:…" or "… via …"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
KEYS = {"name", "token_sha256", "read", "write"}


class GrantsError(Exception):
    """The grants file cannot be used: the message names the file, the line and what is wrong."""


@dataclass(frozen=True)
class Grant:
    """One credential's name and the scope patterns it may read and write."""

    name: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()

    def may_read(self, scope: str) -> bool:
        return self.may_write(scope) or any(fnmatchcase(scope, p) for p in self.read)

    def may_write(self, scope: str) -> bool:
        return any(fnmatchcase(scope, p) for p in self.write)


EVERY_SCOPE = ("*",)
LOCAL_USER = Grant("local", EVERY_SCOPE, EVERY_SCOPE)  # stdio, or HTTP on loopback with no credentials


@dataclass(frozen=True)
class Grants:
    """The credentials, by the SHA-256 of their token (hex), and by name."""

    by_digest: Mapping[str, Grant]

    def named(self, name: str) -> Grant | None:
        return next((g for g in self.by_digest.values() if g.name == name), None)

    def unmatched(self, scopes: Iterable[str]) -> list[str]:
        """`name read 'pattern'` for each pattern that matches none of `scopes` (a typo, or a scope to come)."""
        names = list(scopes)
        return [
            f"{g.name} {how} {p!r}"
            for g in self.by_digest.values()
            if g.name != SHARED_TOKEN
            for how, patterns in (("read", g.read), ("write", g.write))
            for p in patterns
            if not any(fnmatchcase(s, p) for s in names)
        ]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load(path: str | None, shared_token: str | None = None) -> Grants:
    """The grants of the file at `path` (none if None), plus the shared token's, if one is set.
    GrantsError naming the line and what is wrong when the file cannot be read or used."""
    credentials: dict[str, Grant] = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise GrantsError(f"CORRIGENDA_GRANTS: cannot read {path} ({exc.strerror})") from None
        credentials = parse(raw.decode("utf-8", errors="replace"), path)
    if shared_token is not None:
        credentials[digest(shared_token)] = Grant(SHARED_TOKEN, EVERY_SCOPE, EVERY_SCOPE)
    return Grants(credentials)


def parse(text: str, path: str = "grants file") -> dict[str, Grant]:
    """The credentials a grants file's TOML text declares, by token digest; GrantsError naming the line."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GrantsError(f"{path}: {exc}") from None
    lines = text.splitlines()
    tables = [i for i, line in enumerate(lines, 1) if re.match(r"^\s*\[\[\s*credentials\s*\]\]", line)]

    def where(n: int | None, key: str | None = None) -> str:
        """`path, line L (credentials[n].key)`: the line of the key in the n-th table, else of the table."""
        if n is None or n >= len(tables):
            return f"{path} ({key or 'top level'})"
        line, end = tables[n], tables[n + 1] if n + 1 < len(tables) else len(lines) + 1
        if key is not None:
            line = next((i for i in range(line + 1, end) if re.match(rf"^\s*{key}\s*=", lines[i - 1])), line)
        return f"{path}, line {line} (credentials[{n}]{'.' + key if key else ''})"

    extra = set(document) - {"credentials"}
    if extra:
        raise GrantsError(f"{path}: unknown key {sorted(extra)[0]!r}: the file holds [[credentials]] tables only")
    entries = document.get("credentials")
    if not isinstance(entries, list) or not entries:
        raise GrantsError(f"{path}: no [[credentials]] table: name at least one credential")
    credentials: dict[str, Grant] = {}
    for n, entry in enumerate(entries):
        unknown = set(entry) - KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise GrantsError(f"{where(n, key)}: unknown key {key!r}; a credential has {', '.join(sorted(KEYS))}")
        for key in ("name", "token_sha256"):
            if not isinstance(entry.get(key), str):
                raise GrantsError(f"{where(n, key if key in entry else None)}: {key} is missing or not a string")
        name, sha = entry["name"], entry["token_sha256"]
        if not NAME.match(name) or name == SHARED_TOKEN:
            raise GrantsError(
                f"{where(n, 'name')}: {name!r} is not a credential name: 1 to 64 letters, digits, '.', '_', '@' "
                f"or '-', starting with a letter or digit, and not {SHARED_TOKEN!r} (CORRIGENDA_TOKEN's)"
            )
        if any(g.name == name for g in credentials.values()):
            raise GrantsError(f"{where(n, 'name')}: {name!r} names an earlier credential too")
        if not SHA256.match(sha):
            raise GrantsError(
                f"{where(n, 'token_sha256')}: must be 64 lowercase hex digits, the SHA-256 of the token "
                "(`printf %s TOKEN | sha256sum`), never the token itself"
            )
        if any(hmac.compare_digest(sha, known) for known in credentials):
            raise GrantsError(f"{where(n, 'token_sha256')}: the same token as an earlier credential")
        patterns: dict[str, tuple[str, ...]] = {}
        for key in ("read", "write"):
            value = entry.get(key, [])
            if not isinstance(value, list) or not all(isinstance(p, str) and p.strip() for p in value):
                raise GrantsError(f'{where(n, key)}: {key} must be a list of scope patterns, e.g. ["team-*", "ada"]')
            patterns[key] = tuple(value)
        if not patterns["read"] and not patterns["write"]:
            raise GrantsError(f"{where(n)}: credential {name!r} may read nothing and write nothing")
        credentials[sha] = Grant(name, patterns["read"], patterns["write"])
    return credentials


class GrantedTokens(TokenVerifier):
    """Accepts the token of a credential in the grants: the AccessToken names it (client_id)."""

    def __init__(self, grants: Grants) -> None:
        self.grants = grants

    async def verify_token(self, token: str) -> AccessToken | None:
        # Looked up by digest: the time a lookup takes says nothing about how close a guess was.
        grant = self.grants.by_digest.get(digest(token))
        if grant is None:
            return None
        return AccessToken(token=digest(token), client_id=grant.name, scopes=[])
