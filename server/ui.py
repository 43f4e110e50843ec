"""The web view: a person looks through their memory and fixes it by hand. It runs as `corrigenda ui`,
or inside a running server over its one Memory (`serve --ui`: under /ui on the HTTP port, or beside a
stdio server on its own port).

Server-rendered pages (no build step, no CDN, no script: the stylesheet and icon are served from
`ui_static/`), answering 200 unless the request itself is wrong:
- `/` the landing page: the scope of the current project (saying so when it is empty and another is
  shown), else the most recently changed one, with its current notes, its latest changes, the busiest
  scopes and a form to add a note; a scope named by mistake names the nearest; with `q`, a recall
  drawn as chains (NOW, NEEDS, HISTORY with who, when and why); `/scopes` every scope, page by page;
- `/chain/{note_id}` a chain titled by its subject, with its timeline (ui_timeline.py) and a person's
  hands: correct, revoke, reinstate, link (the other note found by its words, `?find=`) and forget,
  each asked to be confirmed and given a reason, recorded with the configured person as actor
  (`person:NAME`, which every page's header names); "Still true" on a current note, and whether its subject
  holds one value, with the form that declares or withdraws it (ui_truth.py); `/note/{note_id}` a note with
  `why_excluded`, or when and why it was forgotten; `/notes` a scope's notes by state; `/changes` what
  changed since. A scope's page also lists its subjects that hold one value and how long a check lasts.

Writes are POSTs to `/act` only, carrying the page's form token and an Origin of this web view's own
(a page elsewhere can neither read the token nor pass the check); so is `/logout`, which ends the
session (ui_gate.py) when the web view has credentials. Host and Origin are checked as the
MCP endpoint checks them, and when the server has credentials (CORRIGENDA_TOKEN, a grants file's
tokens) every page asks for one (ui_gate.py) and shows and changes only the scopes its grant allows,
a person's writes recorded under the credential's name (`person:ada`); off loopback the web view does
not start without credentials. Every answer carries a Content-Security-Policy that allows no script
and no framing.

The routes are module-level functions, by concern: ui_read.py the pages that read, ui_hands.py a person's
writes, ui_site.py what they share (the `Site` this module builds and keeps on the app's state, and the
request context every route reads it through). This module composes them into one Starlette app and
serves it, alone, under PREFIX on the MCP endpoint's port, or beside a stdio server.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from corrigenda.store import Memory
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import ui_hands as hands
from . import ui_read as reads
from .config import Settings
from .connections import bounded_server
from .grants import Grants
from .grants import load as load_grants
from .http import RefusedToListen, authenticates, check_port, netloc, refuse_exposure_without_token, transport_security
from .ui_gate import SESSION_LIFETIME, Gate, Sessions
from .ui_site import Site, guarded, no_such_page

STATIC = Path(__file__).with_name("ui_static")
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


def build_ui(
    memory: Memory, default_scope: str, settings: Settings, clock: Callable[[], float] = time.time
) -> Starlette:
    """The web view over one store; `default_scope` (the project's) is where it opens when that holds
    notes and the caller may read it; `clock` is the time its sessions go by. GrantsError if the
    settings' grants file cannot be used."""
    # The fleet's configured key, else this process's own: its sessions end with it.
    configured = settings.session_secret
    sessions = Sessions(configured.get_secret_value().encode() if configured else secrets.token_bytes(32), clock)
    grants: Grants | None = None  # None: every caller is the local user, who may do anything
    if authenticates(settings):
        token = settings.token.get_secret_value() if settings.token else None
        grants = load_grants(settings.grants, token, oauth=settings.oauth_issuer is not None)
    app = Starlette(
        routes=[
            Route("/", guarded(reads.home)),
            Route("/scopes", guarded(reads.scopes_page)),
            Route("/chain/{note_id}", guarded(reads.chain)),
            Route("/note/{note_id}", guarded(reads.note)),
            Route("/notes", guarded(reads.notes)),
            Route("/changes", guarded(reads.changes)),
            Route("/act", guarded(hands.act), methods=["POST"]),
            *([Route("/logout", guarded(hands.logout), methods=["POST"])] if grants is not None else []),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={404: no_such_page},
        middleware=[
            Middleware(Headers),
            Middleware(Gate, security=transport_security(settings, settings.ui_port), grants=grants, sessions=sessions),
        ],
    )
    app.state.site = Site(memory, default_scope, settings, sessions, grants)
    return app


class Headers:
    """ASGI middleware: every answer says what a browser may run (no script), may frame (nothing) and
    may sniff (nothing)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.lower().encode(), v.encode()) for k, v in HEADERS.items()),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


PREFIX = "/ui"  # where `serve --transport http --ui` mounts the web view, beside the MCP endpoint


def announcement(base: str, settings: Settings) -> str:
    """The stderr line saying where the web view answers (`base`, ending in a slash) and how to get in. A
    space follows the address: a terminal that makes it a link takes what touches it along (`…/;` is no
    page)."""
    if not authenticates(settings):
        access = "no token (loopback only)"
    else:
        given = " or ".join(
            what
            for what, on in (("CORRIGENDA_TOKEN", settings.token), ("a token of CORRIGENDA_GRANTS", settings.grants))
            if on
        )
        access = (
            f"token required: open {base}?token=<{given}> once in the browser (it keeps a session cookie for "
            f"{SESSION_LIFETIME // 3600} hours, or until Log out), or send Authorization: Bearer; a grants "
            "file's token sees its own scopes only"
        )
    return f"web view on {base} - {access}"


def mounted_ui(memory: Memory, default_scope: str, settings: Settings) -> Mount:
    """The web view under PREFIX on the MCP endpoint's port (`serve --transport http --ui`), over the
    server's own `memory`. Its Gate checks Host and Origin against that port and asks for the token
    itself; the MCP endpoint's bearer check is untouched (http.mcp_app)."""
    refuse_exposure_without_token(settings, netloc(settings.host, settings.port), "the web view")
    on_the_mcp_port = settings.model_copy(update={"ui_port": settings.port})
    return Mount(PREFIX, app=build_ui(memory, default_scope, on_the_mcp_port))


def serve_ui(memory: Memory, default_scope: str, settings: Settings, flag: str = "--port") -> None:
    """Listen on `settings.host` and `settings.ui_port` until stopped; off loopback only with a token
    (else RefusedToListen), and not on a port in use (RefusedToListen naming `flag`)."""
    where = netloc(settings.host, settings.ui_port)
    refuse_exposure_without_token(settings, where, "the web view")
    check_port(settings.host, settings.ui_port, f"{flag} (CORRIGENDA_UI_PORT)")
    sys.stderr.write(f"corrigenda: {announcement(f'http://{where}/', settings)}\n")
    sys.stderr.flush()
    bounded_server(build_ui(memory, default_scope, settings), settings.host, settings.ui_port).run()


def serve_ui_beside(memory: Memory, default_scope: Callable[[], str], settings: Settings) -> threading.Thread:
    """The web view on `settings.ui_port`, in a background thread of a stdio server's process, over
    that server's `memory`; `default_scope` is asked on that thread. The caller refuses exposure
    without a token before the server starts (refuse_exposure_without_token). Whatever stops the web
    view here (a port in use above all) ends this thread with one line on stderr: the MCP server,
    which a client launched and relies on, keeps serving."""

    def run() -> None:
        try:
            serve_ui(memory, default_scope(), settings, "--ui-port")
        except RefusedToListen as exc:
            sys.stderr.write(f"corrigenda: no web view: {exc}; the MCP server runs on\n")
        except SystemExit:  # uvicorn's answer to a bind that failed after the check (a race for the port)
            where = netloc(settings.host, settings.ui_port)
            sys.stderr.write(f"corrigenda: no web view: cannot listen on {where}; the MCP server runs on\n")
        except Exception as exc:
            sys.stderr.write(f"corrigenda: no web view: {type(exc).__name__}: {exc}; the MCP server runs on\n")
        sys.stderr.flush()

    thread = threading.Thread(target=run, name="corrigenda-ui", daemon=True)
    thread.start()
    return thread
