"""OAuth 2.1 access tokens: JWTs an authorization server signed, checked against its published keys.

The server is a resource server alone: it never issues a token. The SDK publishes its RFC 9728
metadata (which issuer to ask for a token, for which resource) and answers a request without an
accepted token with 401 and that metadata's address (http.py). Here, a JWT access token (RFC 9068)
is accepted when PyJWT finds it signed by a key of the issuer with an asymmetric algorithm, issued
by the issuer, for this resource (`aud`), and current: `iat` and `nbf` at most LEEWAY ahead of this
machine's clock, `exp` not passed (PyJWT allows LEEWAY there too, but the SDK then refuses a token
whose AccessToken.expires_at has passed). Nothing of that is checked by hand here.

The issuer's keys (JWKS) are at CORRIGENDA_OAUTH_JWKS, else at the `jwks_uri` of its metadata
(RFC 8414, else OpenID Connect discovery). Both are fetched on first use, not at start, so that a
server restarts while its issuer is down. A slow or silent issuer must cost nobody else anything:
- a fetch runs on a thread under a limiter of its own (one fetch at a time), never taking one of the
  worker threads tool calls share, and every token waiting for keys awaits that one fetch on the
  event loop, holding nothing;
- the keys are kept KEYS_LIFESPAN; a key id they lack (the issuer rotated) causes a fetch at most
  once every REFETCH_COOLDOWN, and after a fetch that failed none is tried for FAILED_FETCH_BACKOFF:
  meanwhile a token whose key is not held is refused at once. So tokens with made-up key ids can
  neither make the server hammer the issuer nor make anyone wait for it;
- static tokens are looked up before any of this (grants.py), and the signature check itself is
  well under a millisecond on the event loop: no token queues work ahead of a static one.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import jwt

# Asymmetric only: with HS256 the issuer's *public* key would serve as a shared secret anyone holds,
# and `none` is no signature at all.
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
REQUIRED = ["iss", "aud", "exp", "iat", "sub"]  # RFC 9068 §2.2
LEEWAY = 30  # seconds of clock skew between the issuer and this server
KEYS_LIFESPAN = 300  # seconds the issuer's key set is kept before it is fetched again
REFETCH_COOLDOWN = 30  # seconds at least between fetches for an unknown key id
FAILED_FETCH_BACKOFF = 30  # seconds without a fetch after one failed
FETCH_TIMEOUT = 10  # seconds


class Refused(Exception):
    """An access token is not accepted, and why (for the log: the client is told 401 alone)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer publishes its metadata: RFC 8414 inserts the well-known path before the
    issuer's path; OpenID Connect Discovery appends it."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return [
        f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{path}",
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",
    ]


def fetch_json(url: str) -> Any:
    """The JSON document at `url` (http or https only); Refused saying why it cannot be read."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise Refused(f"{url} is not an http(s) address")
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as response:
            return json.load(response)
    except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError and timeouts are OSErrors
        raise Refused(f"cannot read {url} ({getattr(exc, 'reason', None) or exc})") from None


class Issuer:
    """The authorization server whose access tokens for `resource` this server accepts, and what this
    server knows of its keys (the module says when they are fetched)."""

    def __init__(
        self, issuer: str, resource: str, jwks_uri: str | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.issuer = issuer
        self.resource = resource
        self.jwks_uri = jwks_uri  # found in the issuer's metadata at the first fetch, if not configured
        self.clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}  # the signing keys of the last fetch that worked, by key id
        self._fetched_at: float | None = None
        self._failed: tuple[float, str] | None = None  # when the last fetch failed, and why
        self._fetching: anyio.Event | None = None
        self._fetcher: anyio.CapacityLimiter | None = None

    async def claims(self, token: str) -> dict[str, Any]:
        """The claims of `token` once verified; a jwt.PyJWTError or Refused saying why not. Waits for the
        issuer's keys when they must be fetched, holding no worker thread."""
        if token.count(".") != 2:
            raise Refused("neither a credential's static token nor a JWT")
        header = jwt.get_unverified_header(token)
        # jwt.decode refuses these too; refused before the key lookup, they cause no fetch.
        if header.get("alg") not in ALGORITHMS:
            raise jwt.InvalidAlgorithmError(f"algorithm {header.get('alg')!r} is not allowed")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise Refused("the token names no key (kid)")  # keys are found by id: none would match, no fetch is due
        key = await self.signing_key(kid)
        return jwt.decode(
            token, key, algorithms=ALGORITHMS, audience=self.resource, issuer=self.issuer, leeway=LEEWAY,
            options={"require": REQUIRED},
        )  # fmt: skip

    async def signing_key(self, kid: str) -> jwt.PyJWK:
        """The issuer's key `kid`: held, else fetched if the module's rules allow a fetch now (joining the
        one under way, if any), else Refused at once."""
        while True:
            now = self.clock()
            fresh = self._fetched_at is not None and now - self._fetched_at < KEYS_LIFESPAN
            if fresh and kid in self._keys:
                return self._keys[kid]
            if self._fetching is not None:
                await self._fetching.wait()
                continue
            if self._failed is not None and now - self._failed[0] < FAILED_FETCH_BACKOFF:
                raise Refused(
                    f"no key {kid!r} at hand: fetching the issuer's keys failed {now - self._failed[0]:.0f} s ago "
                    f"({self._failed[1]}); next try after {FAILED_FETCH_BACKOFF} s"
                )
            if fresh and self._fetched_at is not None and now - self._fetched_at < REFETCH_COOLDOWN:
                raise Refused(f"no key {kid!r} among the issuer's keys")
            self._fetching = anyio.Event()
            try:
                self._fetcher = self._fetcher or anyio.CapacityLimiter(1)
                await anyio.to_thread.run_sync(self.fetch_keys, limiter=self._fetcher)
            finally:
                self._fetching.set()
                self._fetching = None

    def fetch_keys(self) -> None:
        """Fetch the issuer's key set (its metadata first, until its jwks_uri is known) and note how it
        went. Blocking: it runs on the fetch thread."""
        try:
            self.jwks_uri = self.jwks_uri or self.discover_jwks_uri()
            document = fetch_json(self.jwks_uri)
            if not isinstance(document, dict):
                raise Refused(f"{self.jwks_uri} holds no JSON object")
            keys = jwt.PyJWKSet.from_dict(document).keys
        except (Refused, jwt.PyJWTError) as exc:
            self._failed = (self.clock(), str(exc))
            return
        self._keys = {k.key_id: k for k in keys if k.key_id and k.public_key_use in ("sig", None)}
        self._fetched_at, self._failed = self.clock(), None

    def discover_jwks_uri(self) -> str:
        """The `jwks_uri` of the issuer's metadata, the first of its addresses that answers; Refused
        if none does, or one names another issuer (RFC 8414 §3.3: it must name this one)."""
        tried = []
        for url in metadata_urls(self.issuer):
            try:
                metadata = fetch_json(url)
            except Refused as exc:
                tried.append(str(exc))
                continue
            named = metadata.get("issuer") if isinstance(metadata, dict) else None
            if named != self.issuer:
                raise Refused(f"{url} names issuer {named!r}, not {self.issuer!r}")
            if not isinstance(metadata.get("jwks_uri"), str):
                raise Refused(f"{url} gives no jwks_uri; set CORRIGENDA_OAUTH_JWKS")
            return str(metadata["jwks_uri"])
        raise Refused(f"cannot read the issuer's metadata: {'; '.join(tried)}")
