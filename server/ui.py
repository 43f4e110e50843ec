"""`corrigenda ui`: a local, read-only web view of a memory, for the person whose memory it is.

Server-rendered pages (no build step, no CDN: the one stylesheet is served from `ui_static/`):
- `/` a search box that runs recall_chains and draws the chains as an agent gets them (NOW,
  NEEDS, HISTORY with who, when and why), under a scope picker and an `as_of` control;
- `/chain/{note_id}` a chain with the timeline of its events; `/note/{note_id}` a note with
  `why_excluded`; `/notes` a scope's notes by state; `/changes` what changed since a time.

Only GET routes exist (anything else is 405), so nothing here can write. It checks Host and Origin
as the MCP endpoint does (http.py), so a web page the user visits cannot reach it through a name
that resolves to 127.0.0.1; when CORRIGENDA_TOKEN is set it requires the token (ui_gate.py), and
off loopback it refuses to start without one, as the MCP endpoint does.
"""

from __future__ import annotations

import html
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from corrigenda.store import CorrigendaError, Memory, NotFound
from corrigenda.store.views import Chain, Changes, EventView, Exclusion, NoteHistory, NoteList, NoteView, RecallResult
from pydantic_core import PydanticCustomError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .app import iso_8601
from .config import Settings
from .connections import bounded_server
from .http import RefusedToListen, check_port, netloc, refuse_exposure_without_token, transport_security
from .ui_gate import Gate

STATIC = Path(__file__).with_name("ui_static")
ON = ' class="on"'  # the tab being shown
CHANGES_WINDOW = timedelta(days=7)  # what /changes shows when no `since` is given
T = TypeVar("T")


class Refused(Exception):
    """A request the page answers with a message: what was wrong, and nothing was changed."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def link(path: str, **params: object) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return e(f"{path}?{query}" if query else path)


def when(t: datetime | None) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if t else "?"


def build_ui(memory: Memory, default_scope: str, settings: Settings) -> Starlette:
    """The web view over one store, opening on `default_scope`, answering on `settings.ui_port`."""

    async def store(work: Callable[[], T]) -> T:
        try:
            return await run_in_threadpool(work)
        except NotFound as exc:
            raise Refused(str(exc), 404) from exc
        except CorrigendaError as exc:
            raise Refused(str(exc)) from exc

    async def context(request: Request) -> dict[str, Any]:
        """The scope, the known scopes and `as_of`, as every page shows them."""
        scopes = await store(memory.scopes)
        scope = request.query_params.get("scope") or default_scope
        try:
            as_of = iso_8601(request.query_params.get("as_of") or None)
        except PydanticCustomError as exc:
            raise Refused(f"as_of: {exc}") from exc
        # the query travels to the note pages, whose why_excluded then replays that recall
        return {"scope": scope, "scopes": scopes, "as_of": as_of, "q": request.query_params.get("q", "").strip()}

    def known(ctx: dict[str, Any]) -> None:
        names = [c.scope for c in ctx["scopes"]]
        if ctx["scope"] not in names:
            listed = ", ".join(repr(n) for n in names) or "none yet"
            raise Refused(f"Scope {ctx['scope']!r} holds nothing. The scopes in this store: {listed}.", 404)

    def page(request: Request, ctx: dict[str, Any], title: str, body: str, status: int = 200) -> HTMLResponse:
        scope, as_of = ctx["scope"], ctx["as_of"]
        options = "".join(
            f'<option value="{e(c.scope)}"{" selected" if c.scope == scope else ""}>{e(c.scope)} ({c.notes})</option>'
            for c in ctx["scopes"]
        )
        if scope not in {c.scope for c in ctx["scopes"]}:
            options += f'<option value="{e(scope)}" selected>{e(scope)} (empty)</option>'
        as_of_value = as_of.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") if as_of else ""
        query = request.query_params.get("q", "")
        nav = " · ".join(
            f'<a href="{link(path, scope=scope, as_of=request.query_params.get("as_of"))}">{name}</a>'
            for path, name in (("/", "Search"), ("/notes", "Notes"), ("/changes", "Changes"))
        )
        document = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)} · corrigenda</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/ui.css"></head>
<body><header><a class="brand" href="{link("/", scope=scope)}">corrigenda</a> <nav>{nav}</nav>
<form class="controls" method="get" action="/">
<label>scope <select name="scope" onchange="this.form.submit()">{options}</select></label>
<label>search <input type="search" name="q" value="{e(query)}" placeholder="which port does the service use?"></label>
<label>as of (UTC) <input type="datetime-local" step="1" name="as_of" value="{e(as_of_value)}"></label>
<button type="submit">Recall</button> <a href="{link("/", scope=scope, q=query)}">now</a>
</form></header>
<main><h1>{e(title)}</h1>{body}</main>
<footer>Read-only view of {e(memory.tables.uri)}. Nothing here changes the memory.</footer></body></html>"""
        return HTMLResponse(document, status_code=status)

    def note_line(n: NoteView, label: str, ctx: dict[str, Any], extra: str = "") -> str:
        who = f" by {e(n.actor)}" if n.actor else ""
        return (
            f'<li class="{e(label.lower())}"><span class="label">{e(label)}</span> '
            f'<span class="text">{e(n.text)}</span>{extra}<span class="meta"> {e(n.kind)} · recorded {when(n.recorded_at)}'
            f'{who} · <a href="{link("/note/" + n.id, q=ctx.get("q"), as_of=_iso(ctx["as_of"]))}">{e(n.id)}</a></span></li>'
        )

    def chain_card(c: Chain, ctx: dict[str, Any]) -> str:
        items = [note_line(h, "NOW", ctx) for h in c.heads]
        items += [note_line(p, "NEEDS", ctx) for p in c.prerequisites]
        items += [
            f'<li class="needs"><span class="label">NEEDS</span> {e(i)} (in another chain)</li>'
            for i in c.prerequisites_elsewhere
        ]
        for h in c.history:
            how = f"superseded by {e(h.by)}" if h.role.value == "superseded" else e(h.role.value)
            how += f" ({e(h.actor)})" if h.actor else ""
            why = f" because “{e(h.reason)}”" if h.reason else ""
            extra = f'<span class="why"> — {how} at {when(h.at)}{why}</span>'
            items.append(note_line(h.note, "HISTORY", ctx, extra))
        timeline = link("/chain/" + c.chain_id, scope=ctx["scope"], as_of=_iso(ctx["as_of"]))
        return (
            f'<section class="chain {e(c.status.value)}"><h2><a href="{timeline}">chain {e(c.chain_id)}</a> '
            f'<span class="status">{e(c.status.value.upper())}</span></h2><ul>{"".join(items)}</ul></section>'
        )

    async def search(request: Request) -> Response:
        ctx = await context(request)
        known(ctx)
        query = request.query_params.get("q", "").strip()
        if not query:
            return page(
                request, ctx, f"Search scope {ctx['scope']}", "<p>Type what you want to know and press Recall.</p>"
            )
        r: RecallResult = await store(lambda: memory.recall(query, ctx["scope"], as_of=ctx["as_of"]))
        head = f'<p class="summary">{len(r.chains)} chain(s), {r.used_tokens}/{r.budget_tokens} tokens'
        head += f", as the store was at {when(r.as_of)}.</p>" if r.as_of else ".</p>"
        body = head + "".join(chain_card(c, ctx) for c in r.chains)
        if not r.chains:
            body += "<p>Nothing in this scope matches.</p>"
        return page(request, ctx, f"“{query}”", body)

    async def chain(request: Request) -> Response:
        ctx = await context(request)
        note_id = request.path_params["note_id"]
        h: NoteHistory = await store(lambda: memory.history(note_id, as_of=ctx["as_of"]))
        ctx["scope"] = h.note.scope
        rows = "".join(_event_row(ev) for ev in h.events) or '<tr><td colspan="5">No lifecycle events.</td></tr>'
        body = (
            chain_card(h.chain, ctx) + '<h2>Timeline</h2><table class="timeline"><thead><tr><th>when</th><th>event</th>'
            "<th>who</th><th>why</th><th>in force</th></tr></thead><tbody>" + rows + "</tbody></table>"
        )
        return page(request, ctx, f"Chain of {note_id}", body)

    async def note(request: Request) -> Response:
        ctx = await context(request)
        note_id = request.path_params["note_id"]
        query = request.query_params.get("q") or None
        h: NoteHistory = await store(lambda: memory.history(note_id, as_of=ctx["as_of"]))
        x: Exclusion = await store(lambda: memory.why_excluded(note_id, query, scope=h.note.scope, as_of=ctx["as_of"]))
        ctx["scope"] = h.note.scope
        reasons = "".join(f"<li><b>{e(r.stage)}</b>: {e(r.detail)}</li>" for r in x.reasons)
        instead = "".join(note_line(n, "NOW", ctx) for n in x.replaced_by)
        body = (
            f'<ul class="notes">{note_line(h.note, h.note.state.value.upper(), ctx)}</ul>'
            f'<h2>Why excluded: <span class="verdict {e(x.verdict)}">{e(x.verdict.upper())}</span></h2>'
            f"<p>{e(x.summary)}</p><ul>{reasons}</ul>"
            + (f'<h2>In its place</h2><ul class="notes">{instead}</ul>' if instead else "")
            + f'<p><a href="{link("/chain/" + note_id, as_of=_iso(ctx["as_of"]))}">Its chain and timeline</a></p>'
        )
        return page(request, ctx, f"Note {note_id}", body)

    async def notes(request: Request) -> Response:
        ctx = await context(request)
        known(ctx)
        state = request.query_params.get("state", "all")
        try:
            offset = int(request.query_params.get("offset", "0"))
        except ValueError:
            raise Refused("offset: must be a whole number") from None
        r: NoteList = await store(lambda: memory.list_notes(ctx["scope"], state, offset, 50, ctx["as_of"]))  # type: ignore[arg-type]
        counts = ", ".join(f"{n} {s.value}" for s, n in r.counts.items() if n)
        tabs = " · ".join(
            f'<a href="{link("/notes", scope=ctx["scope"], state=s, as_of=_iso(ctx["as_of"]))}"'
            f"{ON if s == state else ''}>{s}</a>"
            for s in ("current", "history", "all")
        )
        more = (
            f'<p><a href="{link("/notes", scope=ctx["scope"], state=state, offset=r.next_offset, as_of=_iso(ctx["as_of"]))}">older</a></p>'
            if r.next_offset is not None
            else ""
        )
        items = "".join(note_line(n, n.state.value.upper(), ctx) for n in r.notes)
        body = f'<p>{counts or "No notes"}. {tabs}</p><ul class="notes">{items}</ul>{more}'
        return page(request, ctx, f"Notes of {ctx['scope']} ({state}, {r.total})", body)

    async def changes(request: Request) -> Response:
        ctx = await context(request)
        known(ctx)
        try:
            since = iso_8601(request.query_params.get("since") or None)
        except PydanticCustomError as exc:
            raise Refused(f"since: {exc}") from exc
        since = since or datetime.now(UTC) - CHANGES_WINDOW
        r: Changes = await store(lambda: memory.changes(since, ctx["scope"], 200))
        items = []
        for c in r.changes:
            ev = c.event
            who = f" by {e(ev.actor)}" if ev.actor else ""
            why = f" — “{e(ev.reason)}”" if ev.reason else ""
            target = (
                e(c.note_id)
                if c.change == "forgotten"
                else f'<a href="{link("/chain/" + c.note_id)}">{e(c.note.text if c.note else c.note_id)}</a>'
            )
            now = "".join(note_line(h, "NOW", ctx) for h in c.heads)
            items.append(
                f'<li class="change {e(c.change)}"><span class="label">{e(c.change.upper())}</span> {target}'
                f'<span class="meta"> at {when(ev.recorded_at)}{who}{why}</span><ul class="notes">{now}</ul></li>'
            )
        form = (
            f'<form method="get" action="/changes"><input type="hidden" name="scope" value="{e(ctx["scope"])}">'
            f'<label>since (UTC) <input type="datetime-local" step="1" name="since" '
            f'value="{e(since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"))}"></label> <button>Show</button></form>'
        )
        more = f"<p>{r.more} older change(s) not shown.</p>" if r.more else ""
        body = form + (f'<ul class="changes">{"".join(items)}</ul>' if items else "<p>No changes.</p>") + more
        return page(request, ctx, f"Changes in {ctx['scope']} since {when(since)}", body)

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def respond(request: Request) -> Response:
            try:
                return await handler(request)  # type: ignore[no-any-return]
            except Refused as exc:
                ctx = {"scope": request.query_params.get("scope") or default_scope, "as_of": None}
                ctx["scopes"] = await run_in_threadpool(memory.scopes)
                body = f'<p class="error">{e(exc)}</p><p>Nothing was changed.</p>'
                return page(request, ctx, "Cannot show that", body, exc.status)

        return respond

    token = settings.token.get_secret_value() if settings.token else None
    return Starlette(
        routes=[
            Route("/", guarded(search)),
            Route("/chain/{note_id}", guarded(chain)),
            Route("/note/{note_id}", guarded(note)),
            Route("/notes", guarded(notes)),
            Route("/changes", guarded(changes)),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        middleware=[Middleware(Gate, security=transport_security(settings, settings.ui_port), token=token)],
    )


def _iso(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") if t else None


def _event_row(ev: EventView) -> str:
    ends = f"{e(ev.src)} → {e(ev.dst)}" if ev.src else e(ev.dst)
    force = "yes" if ev.in_force else (f"retracted by {e(ev.retracted_by)}" if ev.retracted_by else "no (cycle)")
    return (
        f"<tr><td>{when(ev.recorded_at)}</td><td><b>{e(ev.kind.value)}</b> {ends}</td>"
        f"<td>{e(ev.actor or '')}</td><td>{e(ev.reason or '')}</td><td>{force}</td></tr>"
    )


PREFIX = "/ui"  # where `serve --transport http --ui` mounts the web view, beside the MCP endpoint


def announcement(base: str, settings: Settings) -> str:
    """The stderr line saying where the web view answers (`base`, ending in a slash) and how to get in."""
    if settings.token is None:
        access = "no token (loopback only)"
    else:
        access = (
            f"token required: open {base}?token=<CORRIGENDA_TOKEN> once in the browser (it keeps a session "
            "cookie), or send Authorization: Bearer"
        )
    return f"web view on {base} (read-only); {access}"


def mounted_ui(memory: Memory, default_scope: str, settings: Settings) -> Mount:
    """The web view under PREFIX on the MCP endpoint's port (`serve --transport http --ui`), over the
    server's own `memory`. Its Gate checks Host and Origin against that port and asks for the token
    itself; the MCP endpoint's bearer check is untouched (http.mcp_app)."""
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
