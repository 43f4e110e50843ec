"""Who may open the web view: Host and Origin checked as the MCP endpoint checks them, then the token.

When CORRIGENDA_TOKEN is set, the web view asks for it as the MCP endpoint does, or anyone who
reaches the port (another local user; other machines off loopback) reads the memory. A browser
sends no Authorization header of its own accord, so a person opens any page once with
`?token=...`: the answer sets an HttpOnly, SameSite=Strict session cookie and redirects to the same
address without the token. The cookie holds a digest of the token, not the token, so it cannot be
replayed against the MCP endpoint, which can write. `Authorization: Bearer` is accepted too. Every
comparison is in constant time, so that response timing does not reveal how much of a guess was
right.
"""

from __future__ import annotations

import hashlib
import hmac

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "corrigenda_ui"
QUERY = "token"

ASK_FOR_THE_TOKEN = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Token required · corrigenda</title></head>
<body><h1>This web view needs the server's token</h1>
<p>Open this address once with <code>?token=</code> and the value of <code>CORRIGENDA_TOKEN</code> added
(for example <code>…/ui/?token=…</code> under <code>serve --transport http --ui</code>, <code>…/?token=…</code> otherwise): the browser then keeps a cookie for this session. A program can send
<code>Authorization: Bearer</code> and the token instead.</p></body></html>"""


class Gate:
    """ASGI middleware: refuses a foreign Host or Origin (421, 403), then a request without the token
    when one is set (401, a page saying how to pass it and nothing from the memory)."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings, token: str | None) -> None:
        self.app = app
        self.hosts = TransportSecurityMiddleware(security)
        self.token = token.encode() if token is not None else None
        self.cookie = cookie_value(token) if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        answer = await self.hosts.validate_request(request) or self._check_token(request)
        if answer is None:
            await self.app(scope, receive, send)
        else:
            await answer(scope, receive, send)

    def _check_token(self, request: Request) -> Response | None:
        """None to let the request through, else the answer: a redirect that sets the cookie, or 401."""
        if self.token is None or self.cookie is None:
            return None
        offered = request.query_params.get(QUERY)
        if offered is not None:
            if not hmac.compare_digest(offered.encode(), self.token):
                return refused()
            url = request.url.remove_query_params(QUERY)
            redirect = RedirectResponse(url.path + (f"?{url.query}" if url.query else ""), status_code=303)
            redirect.set_cookie(COOKIE, self.cookie, httponly=True, samesite="strict", path="/")
            redirect.headers["Cache-Control"] = "no-store"
            return redirect
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(bearer.strip().encode(), self.token):
            return None
        if hmac.compare_digest(request.cookies.get(COOKIE, "").encode(), self.cookie.encode()):
            return None
        return refused()


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"corrigenda web view session", hashlib.sha256).hexdigest()


def refused() -> Response:
    return HTMLResponse(
        ASK_FOR_THE_TOKEN, status_code=401, headers={"WWW-Authenticate": "Bearer", "Cache-Control": "no-store"}
    )
