"""Who may open the web view: Host and Origin checked as the MCP endpoint checks them, then the caller's
credential.

When the server has credentials (CORRIGENDA_TOKEN, or the static tokens of a grants file), the web
view asks for one as the MCP endpoint does, or anyone who reaches the port (another local user;
other machines off loopback) reads the memory. A browser sends no Authorization header of its own
accord, so a person opens any page once with `?token=...`: the answer opens a session, sets an
HttpOnly, SameSite=Strict cookie and redirects to the same address without the token.
That address logs in whoever follows it, so a page elsewhere could send the person's browser to
`?token=` and the attacker's token (login CSRF): the person would then read the attacker's scopes as
their own and write into them. So the address opens a session only when the browser says the person
brought it (Sec-Fetch-Site `none`: typed, pasted, a bookmark) or the web view itself did
(`same-origin`); a `cross-site` or `same-site` navigation (another port of the same host is the same
site) is refused. A client that sends no Sec-Fetch-Site (a program, or a browser older than 2023) is
judged by its Referer: one of another host is refused. This is chosen over a "Log in as NAME?" page with a
POST: that POST would rest on the same browser headers (Origin), and would put the token in a page's
HTML. Nor does the address replace a session of another credential that the browser holds: that
answer says so, and the person logs out first.
`Authorization: Bearer` is accepted too. The credential's grant is handed to the pages (`grant_of`),
which show and change only its scopes.

A session is a signed cookie, `NAME.ID.OPENED.MAC`: the credential's name, a random id, when it was
opened, and an HMAC-SHA256 of those and of the token's digest under the server's session secret. So:
- Only the token opens a session. The secret is drawn at random by each process at start, or is
  CORRIGENDA_SESSION_SECRET, shared by the servers of a fleet behind one load balancer; it is never
  in the grants file, whose digests alone make no cookie.
- A session lasts SESSION_LIFETIME; an older cookie gets the same 401 as none.
- A credential removed from the grants file, or whose token changed, opens nothing from the next
  start (the file is read once, at start): its name no longer has that digest, so its MAC no longer
  matches. A new random secret at each start ends every session; changing the configured one ends
  every session of the fleet.
- `POST /logout` (with the page's form token) ends the session: the browser drops the cookie and this
  process refuses it until it would have expired anyway. Other servers of a fleet do not hear of it;
  the cookie, which the browser no longer has, would open them until then.
- Nothing is kept per session but the ids of sessions logged out and not yet expired, at most
  MAX_ENDED; past that, a logout ends every session of its credential on this process instead.
- The cookie is not a token: the MCP endpoint, which can write, takes none.
Tokens are looked up by digest and MACs compared in constant time, so that response timing does not
reveal how much of a guess was right.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .grants import Grant, Grants, digest

COOKIE = "corrigenda_ui"
QUERY = "token"
GRANT = "corrigenda.grant"  # the key of the caller's Grant in the ASGI scope
SESSION = "corrigenda.session"  # the key of the caller's Session in the ASGI scope (none by bearer)
# A working day: a person gives the token once in the morning, and a cookie left in a browser of a
# shared machine, or copied from one, opens nothing the next day.
SESSION_LIFETIME = 12 * 60 * 60  # seconds
# Sessions logged out before they expired, remembered until they would have: 10 000 ids (1.5 MB at
# most) outlast any team's logouts in a day; only a credential logging out in a loop fills them.
MAX_ENDED = 10_000

ASK_FOR_THE_TOKEN = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Token required · corrigenda</title></head>
<body><h1>This web view needs a token</h1>
<p>Open this address once with <code>?token=</code> and your token added: the value of
<code>CORRIGENDA_TOKEN</code>, or the token of your credential in the server's grants file (for
example <code>…/ui/?token=…</code> under <code>serve --transport http --ui</code>, <code>…/?token=…</code>
otherwise). The browser then keeps a cookie for this session, for {SESSION_LIFETIME // 3600} hours or
until you log out. A program can send <code>Authorization: Bearer</code> and the token instead.</p>
</body></html>"""

FROM_ELSEWHERE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Not logged in · corrigenda</title></head>
<body><h1>Not logged in</h1>
<p>This address with <code>?token=</code> was opened from another site, which may have chosen the
token: no session was opened. If the token is yours, paste the address into the address bar.</p>
</body></html>"""

ANOTHER_SESSION = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Already logged in · corrigenda</title></head>
<body><h1>Already logged in</h1>
<p>This browser is logged in as {name}, and the token given is another credential's: nothing was
changed. To change credentials, Log out (at the foot of every page of this web view), then open this
address again.</p></body></html>"""

# Where a navigation came from, as the browser says (Fetch Metadata): the person (none) or the web view.
OWN_NAVIGATION = ("none", "same-origin")

LOGGED_OUT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Logged out · corrigenda</title></head>
<body><h1>Logged out</h1>
<p>This browser's session of the web view has ended. Open any page once with <code>?token=</code> and
your token to start another.</p></body></html>"""


@dataclass(frozen=True)
class Session:
    """One browser's session: the credential it is, a random id, and when it was opened (seconds since
    the epoch)."""

    name: str
    id: str
    opened: int


class Sessions:
    """The web view's sessions (the module's rules): opened with a token, checked against the current
    credentials, ended by logout or by SESSION_LIFETIME. `secret` keys their MACs; `clock` tells the
    time, in seconds since the epoch."""

    def __init__(self, secret: bytes, clock: Callable[[], float] = time.time) -> None:
        self.secret = secret
        self.clock = clock
        self.ended: dict[str, int] = {}  # id of a session logged out -> when it was opened
        self.ended_until: dict[str, int] = {}  # credential -> its sessions opened until then are ended

    def open(self, name: str, token_digest: str) -> str:
        """The cookie of a new session of credential `name`, whose token has `token_digest`."""
        session = Session(name, secrets.token_urlsafe(16), int(self.clock()))
        return f"{name}.{session.id}.{session.opened}.{self._mac(session, token_digest)}"

    def check(self, cookie: str, digests: Mapping[str, str]) -> Session | None:
        """The session `cookie` holds, if its MAC is this secret's over a current credential's token
        (`digests`: each credential's name and its token's digest), it has not expired, and it was not
        ended; else None."""
        parts = cookie.rsplit(".", 3)
        if len(parts) != 4 or not (parts[2].isascii() and parts[2].isdigit() and len(parts[2]) <= 12):
            return None  # 12 digits: seconds until the year 33658, and never a number too long to parse
        name, session_id, opened, mac = parts
        session = Session(name, session_id, int(opened))
        known = digests.get(name)
        if known is None or not hmac.compare_digest(mac.encode(), self._mac(session, known).encode()):
            return None
        if self.clock() - session.opened >= SESSION_LIFETIME:
            return None
        if session.id in self.ended or session.opened <= self.ended_until.get(name, -1):
            return None
        return session

    def end(self, session: Session) -> None:
        """Refuse `session` from now on, keeping no more than MAX_ENDED ids: past that, every session of
        its credential opened until now ends with it."""
        now = self.clock()
        self.ended = {i: opened for i, opened in self.ended.items() if now - opened < SESSION_LIFETIME}
        if len(self.ended) < MAX_ENDED:
            self.ended[session.id] = session.opened
        else:
            self.ended_until[session.name] = int(now)

    def form_token(self, session: Session | None) -> str:
        """The token a page's forms carry, and a POST must bring back: the MAC of the caller's session
        (of the local user or a bearer, who have none: the same for every such caller). Every server of
        a fleet that shares the secret makes the same, so a page from one posts to another."""
        said = f"corrigenda web view form\n{session.id if session else ''}"
        return hmac.new(self.secret, said.encode(), hashlib.sha256).hexdigest()

    def _mac(self, session: Session, token_digest: str) -> str:
        said = f"corrigenda web view session\n{session.name}\n{session.id}\n{session.opened}\n{token_digest}"
        return hmac.new(self.secret, said.encode(), hashlib.sha256).hexdigest()


class Gate:
    """ASGI middleware: refuses a foreign Host or Origin (421, 403), then, when `grants` holds any
    credential, a request without one of them (401, a page saying how to pass it and nothing from the
    memory). `grants` None: no credentials, every caller is the local user (loopback only)."""

    def __init__(
        self, app: ASGIApp, security: TransportSecuritySettings, grants: Grants | None, sessions: Sessions
    ) -> None:
        self.app = app
        self.hosts = TransportSecurityMiddleware(security)
        self.grants = grants
        self.sessions = sessions
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
        """None to let the request through (its grant, and its session if by cookie, put in `scope`),
        else the answer: a redirect that opens a session, or 401."""
        assert self.grants is not None
        offered = request.query_params.get(QUERY)
        if offered is not None:
            if sent_from_elsewhere(request):
                return HTMLResponse(FROM_ELSEWHERE, status_code=403, headers={"Cache-Control": "no-store"})
            token_digest = digest(offered)
            grant = self.grants.by_digest.get(token_digest)
            if grant is None:
                return refused()
            held = self.sessions.check(request.cookies.get(COOKIE, ""), self.digests)
            if held is not None and held.name != grant.name:
                page = ANOTHER_SESSION.format(name=html.escape(held.name))
                return HTMLResponse(page, status_code=409, headers={"Cache-Control": "no-store"})
            url = request.url.remove_query_params(QUERY)
            redirect = RedirectResponse(url.path + (f"?{url.query}" if url.query else ""), status_code=303)
            cookie = self.sessions.open(grant.name, token_digest)
            redirect.set_cookie(COOKIE, cookie, max_age=SESSION_LIFETIME, httponly=True, samesite="strict", path="/")
            redirect.headers["Cache-Control"] = "no-store"
            return redirect
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            grant = self.grants.by_digest.get(digest(bearer.strip()))
        else:
            session = self.sessions.check(request.cookies.get(COOKIE, ""), self.digests)
            grant = self.grants.by_digest.get(self.digests[session.name]) if session is not None else None
            scope[SESSION] = session
        if grant is None:
            return refused()
        scope[GRANT] = grant
        return None


def sent_from_elsewhere(request: Request) -> bool:
    """Whether the browser says another site sent it here: Sec-Fetch-Site, else a Referer whose host is
    not the one asked (the Host header, already checked against the allowed list)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site not in OWN_NAVIGATION
    referer = request.headers.get("referer")
    return referer is not None and urlsplit(referer).netloc != request.headers.get("host")


def grant_of(request: Request) -> Grant | None:
    """The caller's grant, set by the Gate; None for the local user (a server without credentials)."""
    grant: Grant | None = request.scope.get(GRANT)
    return grant


def session_of(request: Request) -> Session | None:
    """The caller's session, set by the Gate; None for a bearer token or the local user."""
    session: Session | None = request.scope.get(SESSION)
    return session


def refused() -> Response:
    return HTMLResponse(
        ASK_FOR_THE_TOKEN, status_code=401, headers={"WWW-Authenticate": "Bearer", "Cache-Control": "no-store"}
    )


def logged_out() -> Response:
    """The answer to a logout: the page saying so, and the cookie dropped."""
    answer = HTMLResponse(LOGGED_OUT, headers={"Cache-Control": "no-store"})
    answer.delete_cookie(COOKIE, httponly=True, samesite="strict", path="/")
    return answer
