"""Who may open the web view: Host and Origin checked as the MCP endpoint checks them, then the caller's
credential.

When the server has credentials (CORRIGENDA_TOKEN, or the static tokens of a grants file), the web
view asks for one as the MCP endpoint does, or anyone who reaches the port (another local user;
other machines off loopback) reads the memory. A browser sends no Authorization header of its own
accord, so a person opens any page once with `?token=...`: the answer sets an HttpOnly,
SameSite=Strict session cookie and redirects to the same address without the token. The cookie
names the credential and carries a MAC keyed by the digest of its token, not the token, so it cannot
be replayed against the MCP endpoint, which can write. `Authorization: Bearer` is accepted too. The
credential's grant is handed to the pages (`grant_of`), which show and change only its scopes.
Tokens are looked up by digest and MACs compared in constant time, so that response timing does not
reveal how much of a guess was right.
"""

from __future__ import annotations

import hashlib
import hmac

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .grants import Grant, Grants, digest

COOKIE = "corrigenda_ui"
QUERY = "token"
GRANT = "corrigenda.grant"  # the key of the caller's Grant in the ASGI scope

ASK_FOR_THE_TOKEN = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Token required · corrigenda</title></head>
<body><h1>This web view needs a token</h1>
<p>Open this address once with <code>?token=</code> and your token added: the value of
<code>CORRIGENDA_TOKEN</code>, or the token of your credential in the server's grants file (for
example <code>…/ui/?token=…</code> under <code>serve --transport http --ui</code>, <code>…/?token=…</code>
otherwise). The browser then keeps a cookie for this session. A program can send
<code>Authorization: Bearer</code> and the token instead.</p></body></html>"""


class Gate:
    """ASGI middleware: refuses a foreign Host or Origin (421, 403), then, when `grants` holds any
    credential, a request without one of them (401, a page saying how to pass it and nothing from the
    memory). `grants` None: no credentials, every caller is the local user (loopback only)."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, grants: Grants | None) -> None:
        self.app = app
        self.hosts = TransportSecurityMiddleware(security)
        self.grants = grants
        self.digests = {g.name: d for d, g in grants.by_digest.items()} if grants is not None else {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        answer = await self.hosts.validate_request(request)
        if answer is None and self.grants is not None:
            answer = self._check_credential(request, scope)
        if answer is None:
            await self.app(scope, receive, send)
        else:
            await answer(scope, receive, send)

    def _check_credential(self, request: Request, scope: Scope) -> Response | None:
        """None to let the request through (its grant put in `scope`), else the answer: a redirect that
        sets the cookie, or 401."""
        assert self.grants is not None
        offered = request.query_params.get(QUERY)
        if offered is not None:
            grant = self.grants.by_digest.get(digest(offered))
            if grant is None:
                return refused()
            url = request.url.remove_query_params(QUERY)
            redirect = RedirectResponse(url.path + (f"?{url.query}" if url.query else ""), status_code=303)
            redirect.set_cookie(
                COOKIE, cookie_value(grant.name, digest(offered)), httponly=True, samesite="strict", path="/"
            )
            redirect.headers["Cache-Control"] = "no-store"
            return redirect
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            grant = self.grants.by_digest.get(digest(bearer.strip()))
        else:
            grant = self._session(request.cookies.get(COOKIE, ""))
        if grant is None:
            return refused()
        scope[GRANT] = grant
        return None

    def _session(self, cookie: str) -> Grant | None:
        """The grant a session cookie names, if its MAC is that credential's."""
        name = cookie.rpartition(".")[0]
        known = self.digests.get(name)
        if known is None or not hmac.compare_digest(cookie.encode(), cookie_value(name, known).encode()):
            return None
        return self.grants.by_digest.get(known) if self.grants is not None else None


def cookie_value(name: str, token_digest: str) -> str:
    """`NAME.MAC`: the credential's name and a MAC of it keyed by its token's digest."""
    mac = hmac.new(token_digest.encode(), f"corrigenda web view session {name}".encode(), hashlib.sha256).hexdigest()
    return f"{name}.{mac}"


def grant_of(request: Request) -> Grant | None:
    """The caller's grant, set by the Gate; None for the local user (a server without credentials)."""
    grant: Grant | None = request.scope.get(GRANT)
    return grant


def refused() -> Response:
    return HTMLResponse(
        ASK_FOR_THE_TOKEN, status_code=401, headers={"WWW-Authenticate": "Bearer", "Cache-Control": "no-store"}
    )
