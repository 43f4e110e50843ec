"""Who may read and write which scope over HTTP: the grants file, read once at start.

Each credential in the file has a name, what the caller shows to be it, and the scope patterns it
may read and write (fnmatch, case-sensitive, as scope names are; patterns and names both in Unicode
NFC, `admit`). What it shows is one of: a static bearer token (`token_sha256`, its SHA-256: the token
itself is never stored), or, with an OAuth issuer set (oauth.py), an access token whose subject
(`oauth_subject`, the `sub` claim), one of whose groups (`oauth_group`, the `groups` claim) or one of
whose scopes (`oauth_scope`, the `scope` or `scp` claim) it names. A grant to write a scope is a
grant to read it too: `remember` and `correct` answer with what the scope already holds.
`CORRIGENDA_TOKEN`, when set, is one more credential, named `token`, with every grant. A caller
without a credential (stdio, or HTTP on loopback with no token and no grants) is the local user, with
every grant.

    [[credentials]]
    name = "ada"
    token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    read = ["team-*", "ada"]
    write = ["ada"]

    [[credentials]]
    name = "ops"
    oauth_group = "ops"
    write = ["team-*"]

An access token is the credential its subject names; else the one a group of it names; else the one a
scope of it names. Two credentials that match at the first of these that matches any make the token
ambiguous: it is refused (who it is would be a guess), as is a token that matches none.

The file holds digests and claim values, never a token or a key: reading it lets no one in, neither
to the MCP endpoint, which takes the token itself, nor to the web view, whose sessions are signed with
a secret the server holds (ui_gate.py). Guard it all the same: it names who may read and write what,
and whoever can change it can grant themselves anything. It is read once, at start: a credential
removed or given a new token is refused, its web-view sessions too, from the next start.

A file with an error stops the server before it listens, naming the line and what is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import jwt
from corrigenda.store.where import check_scope
from mcp.server.auth.provider import AccessToken, TokenVerifier

from .oauth import Issuer, Refused

SHARED_TOKEN = "token"  # the credential name of CORRIGENDA_TOKEN
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")  # no space, no colon: never "person:…" or "… via …"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# What a caller shows to be the credential: exactly one of these, with the claim each OAuth one matches.
SHOWN_BY = ("token_sha256", "oauth_subject", "oauth_group", "oauth_scope")
CLAIM = {"oauth_subject": "subject", "oauth_group": "groups", "oauth_scope": "scopes"}
KEYS = {"name", *SHOWN_BY, "read", "write"}
log = logging.getLogger("corrigenda.audit")


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

    def refusal(self, scope: str, write: bool, what: str) -> str | None:
        """None if this credential may read (or write) `scope`, else why not, naming the scope; the access
        goes to the audit log either way (`what`: the call, never a note's text)."""
        if self.may_write(scope) if write else self.may_read(scope):
            log.info("%s %s %s (%s)", self.name, "wrote" if write else "read", scope, what)
            return None
        log.info("%s refused %s %s (%s)", self.name, "write" if write else "read", scope, what)
        return f"scope {scope!r}: credential {self.name!r} may not {'write' if write else 'read'} it"


class NotGranted(Exception):
    """A call names a scope its credential may not read (or write): the message names both."""


def admit(grant: Grant | None, scope: str, write: bool, what: str) -> str:
    """`scope` as the store names it (Unicode NFC, `check_scope`), once `grant` may read (or write) it;
    None is the local user, who may do anything. Every entry point (tools, resources, prompts, web view)
    checks a scope here and reads the name it returns: the patterns are matched against the very name
    the store reads, so 'café-team' spelled in NFD ('cafe' and a combining accent) is refused by a
    `cafe*` grant, as it is spelled in NFC.
    InvalidArgument if it is no scope; NotGranted naming it if the grant does not allow it."""
    scope = check_scope(scope)
    refusal = grant.refusal(scope, write, what) if grant is not None else None
    if refusal is not None:
        raise NotGranted(refusal)
    return scope


EVERY_SCOPE = ("*",)
LOCAL_USER = Grant("local", EVERY_SCOPE, EVERY_SCOPE)  # stdio, or HTTP on loopback with no credentials


@dataclass(frozen=True)
class Grants:
    """The credentials: by the SHA-256 of their static token (hex), and by the OAuth claim they match
    (`("oauth_group", "ops")`)."""

    by_digest: Mapping[str, Grant]
    by_claim: Mapping[tuple[str, str], Grant] = field(default_factory=dict)

    @property
    def every(self) -> list[Grant]:
        return [*self.by_digest.values(), *self.by_claim.values()]

    def named(self, name: str) -> Grant | None:
        return next((g for g in self.every if g.name == name), None)

    def for_claims(self, claims: Mapping[str, Any]) -> Grant:
        """The credential a verified access token's claims show (the module's rules); Refused naming
        why when none does, or two do."""
        shown = token_claims(claims)
        for key in ("oauth_subject", "oauth_group", "oauth_scope"):
            matched = {g.name: g for v in shown[CLAIM[key]] if (g := self.by_claim.get((key, v)))}
            if len(matched) == 1:
                return next(iter(matched.values()))
            if matched:
                raise Refused(
                    f"ambiguous token of subject {claims.get('sub')!r}: its {CLAIM[key]} match credentials "
                    f"{', '.join(map(repr, sorted(matched)))}; name one for its subject (oauth_subject)"
                )
        raise Refused(
            f"no credential of the grants file matches token of subject {claims.get('sub')!r} "
            f"(groups {shown['groups']}, scopes {shown['scopes']})"
        )

    def unmatched(self, scopes: Iterable[str]) -> list[str]:
        """`name read 'pattern'` for each pattern that matches none of `scopes` (a typo, or a scope to come)."""
        names = list(scopes)
        return [
            f"{g.name} {how} {p!r}"
            for g in self.every
            if g.name != SHARED_TOKEN
            for how, patterns in (("read", g.read), ("write", g.write))
            for p in patterns
            if not any(fnmatchcase(s, p) for s in names)
        ]


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_claims(claims: Mapping[str, Any]) -> dict[str, list[str]]:
    """A token's subject, groups and scopes, as lists of strings: `groups` a list (or one string);
    scopes the space-separated `scope` (RFC 9068), else `scp` (a list, or a string, as some issuers send)."""

    def strings(value: object, split: bool = False) -> list[str]:
        if isinstance(value, str):
            return value.split() if split else [value]
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    return {
        "subject": strings(claims.get("sub")),
        "groups": strings(claims.get("groups")),
        "scopes": strings(claims.get("scope", claims.get("scp")), split=True),
    }


def load(path: str | None, shared_token: str | None = None, oauth: bool = False) -> Grants:
    """The grants of the file at `path` (none if None), plus the shared token's, if one is set; `oauth`:
    an issuer is set, so OAuth credentials can be shown. GrantsError naming the line and what is wrong
    when the file cannot be read or used."""
    grants = Grants({})
    if path is not None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as exc:
            raise GrantsError(f"CORRIGENDA_GRANTS: cannot read {path} ({exc.strerror})") from None
        grants = parse(raw.decode("utf-8", errors="replace"), path, oauth)
    if shared_token is not None:
        shared = {digest(shared_token): Grant(SHARED_TOKEN, EVERY_SCOPE, EVERY_SCOPE)}
        grants = Grants({**grants.by_digest, **shared}, grants.by_claim)
    return grants


def parse(text: str, path: str = "grants file", oauth: bool = True) -> Grants:
    """The credentials a grants file's TOML text declares; GrantsError naming the line. `oauth`: an
    issuer is set (else an OAuth credential is an error: no token could ever show it)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GrantsError(f"{path}: {exc}") from None
    where = _Where(path, text)
    extra = set(document) - {"credentials"}
    if extra:
        raise GrantsError(f"{path}: unknown key {sorted(extra)[0]!r}: the file holds [[credentials]] tables only")
    entries = document.get("credentials")
    if not isinstance(entries, list) or not entries:
        raise GrantsError(f"{path}: no [[credentials]] table: name at least one credential")
    credentials: dict[str, Grant] = {}
    by_claim: dict[tuple[str, str], Grant] = {}
    for n, entry in enumerate(entries):
        how = _shown_by(entry, where, n, oauth)
        _check_new(entry, how, where, n, credentials, by_claim)
        grant = _grant(entry, where, n)
        if how == "token_sha256":
            credentials[entry[how]] = grant
        else:
            by_claim[(how, entry[how])] = grant
    return Grants(credentials, by_claim)


class _Where:
    """Where a credential and its keys are in a grants file's text, for its errors to name."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.tables = [i for i, line in enumerate(self.lines, 1) if re.match(r"^\s*\[\[\s*credentials\s*\]\]", line)]

    def __call__(self, n: int | None, key: str | None = None) -> str:
        """`path, line L (credentials[n].key)`: the line of the key in the n-th table, else of the table."""
        path, lines, tables = self.path, self.lines, self.tables
        if n is None or n >= len(tables):
            return f"{path} ({key or 'top level'})"
        line, end = tables[n], tables[n + 1] if n + 1 < len(tables) else len(lines) + 1
        if key is not None:
            line = next((i for i in range(line + 1, end) if re.match(rf"^\s*{key}\s*=", lines[i - 1])), line)
        return f"{path}, line {line} (credentials[{n}]{'.' + key if key else ''})"


def _shown_by(entry: dict[str, Any], where: _Where, n: int, oauth: bool) -> str:
    """How the n-th credential is shown (one of SHOWN_BY), once its keys are all known ones, its name is
    a string, and exactly one way to show it is given: a non-empty string, an OAuth one only with an
    issuer set (`oauth`). Else GrantsError naming the line."""
    unknown = set(entry) - KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise GrantsError(f"{where(n, key)}: unknown key {key!r}; a credential has {', '.join(sorted(KEYS))}")
    if not isinstance(entry.get("name"), str):
        raise GrantsError(f"{where(n, 'name' if 'name' in entry else None)}: name is missing or not a string")
    shown_by = [key for key in SHOWN_BY if key in entry]
    if len(shown_by) != 1:
        raise GrantsError(
            f"{where(n, shown_by[1] if shown_by else None)}: a credential has exactly one of "
            f"{', '.join(SHOWN_BY)}{f' (this one has {shown_by[0]} too)' if shown_by else ''}"
        )
    how = shown_by[0]
    if not isinstance(entry[how], str) or not entry[how].strip():
        raise GrantsError(f"{where(n, how)}: {how} must be a non-empty string")
    if how != "token_sha256" and not oauth:
        raise GrantsError(
            f"{where(n, how)}: {how} names an OAuth access token's {CLAIM[how]}, and no issuer is set: "
            "set CORRIGENDA_OAUTH_ISSUER and CORRIGENDA_RESOURCE"
        )
    return how


def _check_new(
    entry: dict[str, Any],
    how: str,
    where: _Where,
    n: int,
    credentials: Mapping[str, Grant],
    by_claim: Mapping[tuple[str, str], Grant],
) -> None:
    """GrantsError naming the line unless the n-th credential's name is one (NAME, not the shared
    token's), a static token's digest is one (SHA256), and neither its name nor what shows it (`how`)
    is an earlier credential's: `credentials` by digest, `by_claim` by OAuth claim."""
    name = entry["name"]
    if not NAME.match(name) or name == SHARED_TOKEN:
        raise GrantsError(
            f"{where(n, 'name')}: {name!r} is not a credential name: 1 to 64 letters, digits, '.', '_', '@' "
            f"or '-', starting with a letter or digit, and not {SHARED_TOKEN!r} (CORRIGENDA_TOKEN's)"
        )
    if any(g.name == name for g in (*credentials.values(), *by_claim.values())):
        raise GrantsError(f"{where(n, 'name')}: {name!r} names an earlier credential too")
    sha = entry[how]
    if how == "token_sha256" and not SHA256.match(sha):
        raise GrantsError(
            f"{where(n, 'token_sha256')}: must be 64 lowercase hex digits, the SHA-256 of the token "
            "(`printf %s TOKEN | sha256sum`), never the token itself"
        )
    if how == "token_sha256" and any(hmac.compare_digest(sha, known) for known in credentials):
        raise GrantsError(f"{where(n, 'token_sha256')}: the same token as an earlier credential")
    if (how, entry[how]) in by_claim:
        raise GrantsError(f"{where(n, how)}: {how} {entry[how]!r} is an earlier credential's too")


def _grant(entry: dict[str, Any], where: _Where, n: int) -> Grant:
    """The n-th credential's grant: the scope patterns it may read and write, in Unicode NFC; GrantsError
    naming the line if they are no list of patterns, or if it may do nothing."""
    name = entry["name"]
    patterns: dict[str, tuple[str, ...]] = {}
    for key in ("read", "write"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, str) and p.strip() for p in value):
            raise GrantsError(f'{where(n, key)}: {key} must be a list of scope patterns, e.g. ["team-*", "ada"]')
        patterns[key] = tuple(unicodedata.normalize("NFC", p) for p in value)  # as the scopes they match
    if not patterns["read"] and not patterns["write"]:
        raise GrantsError(f"{where(n)}: credential {name!r} may read nothing and write nothing")
    return Grant(name, patterns["read"], patterns["write"])


class GrantedTokens(TokenVerifier):
    """Accepts the token of a credential in the grants: a static token's, else, with an issuer, an
    access token it signed for this resource that names a credential. The AccessToken names the
    credential (client_id): what app.py's grants and actors go by."""

    def __init__(self, grants: Grants, issuer: Issuer | None = None) -> None:
        self.grants = grants
        self.issuer = issuer

    async def verify_token(self, token: str) -> AccessToken | None:
        # Looked up by digest: the time a lookup takes says nothing about how close a guess was.
        grant = self.grants.by_digest.get(digest(token))
        if grant is not None:
            return AccessToken(token=digest(token), client_id=grant.name, scopes=[])
        if self.issuer is None:
            return None
        try:
            claims = await self.issuer.claims(token)  # may wait for the issuer's keys, holding no worker thread
            grant = self.grants.for_claims(claims)
        except (jwt.PyJWTError, Refused) as exc:
            # The SDK answers 401 with the metadata pointer; the reason is for the operator alone.
            log.warning("refused a bearer token: %s", exc)
            return None
        return AccessToken(
            token=digest(token), client_id=grant.name, scopes=token_claims(claims)["scopes"], expires_at=claims["exp"],
            resource=self.issuer.resource, subject=claims["sub"], claims={"iss": claims["iss"]},
        )  # fmt: skip
