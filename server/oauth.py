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
server restarts while its issuer is down; PyJWKClient caches the keys, fetches them again after
KEYS_LIFESPAN, and on a key id it does not know (the issuer rotated) at most once every
REFETCH_COOLDOWN, so tokens with made-up key ids cannot make it hammer the issuer.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any
from urllib.error import URLError
from urllib.parse import urlsplit

import jwt

# Asymmetric only: with HS256 the issuer's *public* key would serve as a shared secret anyone holds,
# and `none` is no signature at all.
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
REQUIRED = ["iss", "aud", "exp", "iat", "sub"]  # RFC 9068 §2.2
LEEWAY = 30  # seconds of clock skew between the issuer and this server
KEYS_LIFESPAN = 300  # seconds the issuer's key set is kept before it is fetched again
REFETCH_COOLDOWN = 30  # seconds at least between fetches for an unknown key id
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


class Issuer:
    """The authorization server whose access tokens for `resource` this server accepts."""

    def __init__(self, issuer: str, resource: str, jwks_uri: str | None = None) -> None:
        self.issuer = issuer
        self.resource = resource
        self.jwks_uri = jwks_uri
        self._keys: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def claims(self, token: str) -> dict[str, Any]:
        """The claims of `token` once verified; a jwt.PyJWTError or Refused saying why not. Blocking:
        it may fetch the issuer's metadata and keys."""
        if token.count(".") != 2:
            raise Refused("neither a credential's static token nor a JWT")
        header = jwt.get_unverified_header(token)
        # jwt.decode refuses these too; refused before the key lookup, they cause no fetch.
        if header.get("alg") not in ALGORITHMS:
            raise jwt.InvalidAlgorithmError(f"algorithm {header.get('alg')!r} is not allowed")
        key = self.keys().get_signing_key_from_jwt(token)
        return jwt.decode(
            token, key, algorithms=ALGORITHMS, audience=self.resource, issuer=self.issuer, leeway=LEEWAY,
            options={"require": REQUIRED},
        )  # fmt: skip

    def keys(self) -> jwt.PyJWKClient:
        """The issuer's key set client, found once (a failed discovery is tried again next time)."""
        with self._lock:
            if self._keys is None:
                self._keys = jwt.PyJWKClient(
                    self.jwks_uri or self.discover_jwks_uri(), lifespan=KEYS_LIFESPAN,
                    cooldown_duration=REFETCH_COOLDOWN, timeout=FETCH_TIMEOUT,
                )  # fmt: skip
            return self._keys

    def discover_jwks_uri(self) -> str:
        """The `jwks_uri` of the issuer's metadata, the first of its addresses that answers; Refused
        if none does, or one names another issuer (RFC 8414 §3.3: it must name this one)."""
        tried = []
        for url in metadata_urls(self.issuer):
            try:
                with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as response:
                    metadata = json.load(response)
            except (URLError, OSError, ValueError) as exc:
                tried.append(f"{url} ({getattr(exc, 'reason', exc)})")
                continue
            named = metadata.get("issuer") if isinstance(metadata, dict) else None
            if named != self.issuer:
                raise Refused(f"{url} names issuer {named!r}, not {self.issuer!r}")
            if not isinstance(metadata.get("jwks_uri"), str):
                raise Refused(f"{url} gives no jwks_uri; set CORRIGENDA_OAUTH_JWKS")
            return metadata["jwks_uri"]
        raise Refused(f"cannot read the issuer's metadata: {'; '.join(tried)}")
