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
"""

from __future__ import annotations

import hmac
import secrets
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

from corrigenda.store import CorrigendaError, Draft, Memory, NotFound, UnknownScope
from corrigenda.store.views import Changes, NoteHistory, NoteList, NoteView, RecallResult, ScopeList
from pydantic_core import PydanticCustomError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import ui_html as h
from . import ui_pages as pages
from . import ui_truth as truth
from .arguments import iso_8601
from .config import Settings
from .connections import bounded_server
from .errors import readable_scopes_only
from .grants import Grants, NotGranted, admit
from .grants import load as load_grants
from .http import RefusedToListen, authenticates, check_port, netloc, refuse_exposure_without_token, transport_security
from .ui_gate import SESSION_LIFETIME, Gate, Sessions, grant_of, logged_out, session_of
from .ui_timeline import timeline

STATIC = Path(__file__).with_name("ui_static")
ON = ' class="on"'  # the tab being shown
CHANGES_WINDOW = timedelta(days=7)  # what /changes shows when no `since` is given
LANDING_NOTES = 20  # current notes on a scope's landing page
LANDING_CHANGES = 5
LANDING_SCOPES = 10
SCOPES_PAGE = 100  # scopes per page of /scopes
CHANGES_PAGE = 50
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
DONE = {  # what a page says after a person's write (`?done=`): fixed words, never text from the address
    "correct": "Corrected: the new note is current and the old one is history.",
    "revoke": "Revoked: the note is history.",
    "reinstate": "Reinstated.",
    "link-depends_on": "Linked: the note now needs the other one, and recall brings that one with it.",
    "link-refines": "Linked: the note now refines the other one; both stay current.",
    "link-supersedes": "Linked: the note now replaces the other one, which is history.",
    "link-distinct": "Linked: the two notes state different facts; both stay current.",
    "settled-supersedes": "Recorded: the newer note replaces the older one, which is now history.",
    "settled-distinct": "Recorded: they are different facts. Both stay current, and recall no longer marks the "
    "older one as possibly outdated.",
    "remember": "Added: the note is current. Revoke it to take it back.",
    "remember-same": "Already there: a current note of this scope says exactly that; nothing was added.",
    "forget": "Forgotten: the note is erased.",
    **truth.DONE,
}
# What a confirmation page passes on to the write it confirms (`q`: the search a mark was answered from).
CONFIRMED_FIELDS = ("action", "note_id", "reason", "text", "kind", "dst_id", "q")
T = TypeVar("T")


class Refused(Exception):
    """A request the page answers with a message: what was wrong, and nothing was changed."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NothingToShow(Exception):
    """No scope is named, and the caller may read none that holds anything: every page says so."""


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

    def person(request: Request) -> str:
        return pages.person_of(settings, grant_of(request))

    def permit(request: Request, scope: str, write: bool, what: str) -> str:
        """The scope as the store names it, once the caller's grant allows it (grants.admit); else Refused
        (403, naming the scope). Audited either way."""
        try:
            return admit(grant_of(request), scope, write, f"web view {what}")
        except NotGranted as exc:
            raise Refused(str(exc), 403) from None
        except CorrigendaError as exc:
            raise Refused(str(exc)) from None

    def visible(request: Request) -> Callable[[str], bool] | None:
        grant = grant_of(request)
        return None if grant is None else grant.may_read

    async def store(work: Callable[[], T]) -> T:
        try:
            return await run_in_threadpool(work)
        except NotFound as exc:
            raise Refused(str(exc), 404) from exc
        except CorrigendaError as exc:
            raise Refused(str(exc)) from exc

    async def read(request: Request, work: Callable[[], T]) -> T:
        """`store` for work that reads a scope: refused as holding nothing, it names only scopes the caller
        may read (errors.readable_scopes_only)."""
        shown = visible(request)

        def confined() -> T:
            with readable_scopes_only(shown):
                return work()

        return await store(confined)

    async def here(request: Request) -> h.Here:
        """Where the request is: its scope (else the landing scope), `as_of`, the query, the prefix, and
        the most recently changed scopes."""
        try:
            as_of = iso_8601(request.query_params.get("as_of") or None)
        except PydanticCustomError as exc:
            raise Refused(f"as_of: {exc}") from exc
        named = request.query_params.get("scope") or None
        if named is not None:
            named = permit(request, named, False, "page")
        shown = visible(request)
        project = default_scope if shown is None or shown(default_scope) else None
        listed = await store(lambda: memory.scope_page(0, LANDING_SCOPES, None, named or project, shown))
        if named is None and shown is not None and not listed.scopes:
            raise NothingToShow
        chosen = named or landing(listed, project)
        if chosen != (named or project):  # it opens on the most recently changed scope: its counts
            listed = listed.model_copy(update={"default_counts": listed.scopes[0]})
        return h.Here(
            base=request.scope.get("root_path", "").rstrip("/"), scope=chosen, as_of=as_of,
            q=request.query_params.get("q", "").strip(), csrf=sessions.form_token(session_of(request)), notice=DONE.get(request.query_params.get("done", "")),
            scopes=listed, writable=writable(request), person=pages.recorded_as(settings, grant_of(request)),
            instead_of=project if chosen != (named or project) else None,
        )  # fmt: skip

    def writable(request: Request) -> Callable[[str], bool] | None:
        grant = grant_of(request)
        return None if grant is None else grant.may_write

    def landing(listed: ScopeList, project: str | None) -> str:
        """The project's scope if it holds anything (and may be read), else the most recently changed one,
        else the project's; `here` asks only when there is one of those."""
        if project is not None and (listed.default_counts is not None or not listed.scopes):
            return project
        return listed.scopes[0].scope

    def page(where: h.Here, title: str, body: str, status: int = 200) -> HTMLResponse:
        if grants is not None:  # a caller with a credential: the way to end its session
            body += (
                f'<form class="logout" method="post" action="{where.url("/logout")}">'
                f'<input type="hidden" name="csrf" value="{h.e(where.csrf)}"><button>Log out</button></form>'
            )
        return HTMLResponse(h.document(where, title, body, memory.tables.uri), status_code=status)

    async def home(request: Request) -> Response:
        where = await here(request)
        if where.q:
            return await search(request, where)
        listed = where.scopes
        assert listed is not None  # `here` lists them
        if listed.total == 0:
            body = (
                "<p>This memory holds nothing yet. Agents add to it with the <code>remember</code> tool; "
                'you can with <code>corrigenda remember "…"</code>. What they store shows here.</p>'
            )
            return page(where, "An empty memory", body)
        others = (
            f"<h2>Scopes, latest change first</h2>{h.scope_table(where, listed.scopes)}"
            f'<p><a href="{where.url("/scopes")}">All scopes ({listed.total})</a></p>'
        )
        adding = h.add_form(where, opened=listed.default_counts is None) if where.may_write(where.scope) else ""
        try:  # a scope nothing was stored in: the project's is new, any other mistyped
            current: NoteList = await store(lambda: memory.list_notes(
                where.scope, "current", 0, LANDING_NOTES, where.as_of, named=where.scope != default_scope
            ))  # fmt: skip
        except Refused as exc:
            if not isinstance(exc.__cause__, UnknownScope):
                raise
            return page(where, f"Scope {where.scope}", pages.nearest_scopes(where, exc.__cause__, visible(request)))
        if listed.default_counts is None:
            body = f"<p>Scope <b>{h.e(where.scope)}</b> holds nothing yet.</p>" + adding + others
            return page(where, f"Scope {where.scope}", body)
        since = (where.as_of or datetime.now(UTC)) - CHANGES_WINDOW
        changed: Changes = await store(lambda: memory.changes(since, where.scope, LANDING_CHANGES))
        counts = ", ".join(f"{n} {s.value}" for s, n in current.counts.items() if n)
        notes = "".join(current_line(where, n) for n in current.notes) or "<li>No current notes.</li>"
        more = f'<p><a href="{where.url("/notes", scope=where.scope, state="current")}">All {current.total} current notes</a></p>'
        recent = (
            "".join(change_line(where, c) for c in changed.changes)
            or "<li>Nothing corrected, revoked, reinstated, forgotten or confirmed in the last 7 days.</li>"
        )
        holds = await store(lambda: truth.scope_section(memory, where))
        body = (
            f"{pages.opened_instead(where)}<p>{counts}. Search above, or open a note to see its chain and fix it.</p>{adding}"
            f'<h2>Current notes, newest first</h2><ul class="notes">{notes}</ul>{more}'
            f'<h2>Latest changes</h2><ul class="changes">{recent}</ul>{holds}{others}'
        )
        return page(where, f"Scope {where.scope}", body)

    def current_line(where: h.Here, n: NoteView) -> str:
        label = f"<b>{h.e(n.subject)}</b>: " if n.subject else ""
        return (
            f'<li>{label}<a href="{where.chain_url(n.id)}">{h.e(h.short(n.text, 140))}</a>'
            f'<div class="meta">{h.badges(n)} · {h.when(n.recorded_at)} by {h.who(n.actor)}{h.checks(n)}</div></li>'
        )

    async def search(request: Request, where: h.Here) -> Response:
        r: RecallResult = await read(request, lambda: memory.recall(where.q, where.scope, as_of=where.as_of))
        summary = f'<p class="summary">{len(r.chains)} chain(s), {r.used_tokens}/{r.budget_tokens} tokens.</p>'
        settle = where.as_of is None and where.may_write(where.scope)  # a mark's two answers, where one may write
        body = summary + "".join(h.chain_card(where, c, settle=settle) for c in r.chains)
        if not r.chains:
            body += f"<p>Nothing in scope <b>{h.e(where.scope)}</b> matches.</p>"
        return page(where, f"“{where.q}”", body)

    async def scopes_page(request: Request) -> Response:
        where = await here(request)
        offset = whole(request, "offset")
        contains = request.query_params.get("contains", "").strip()
        granted = visible(request)
        r: ScopeList = await store(lambda: memory.scope_page(offset, SCOPES_PAGE, contains or None, None, granted))
        more = (f'<p><a href="{where.url("/scopes", contains=contains, offset=r.next_offset)}">next {SCOPES_PAGE}</a></p>'
                if r.next_offset is not None else "")  # fmt: skip
        form = (
            f'<form method="get" action="{where.url("/scopes")}"><label>name contains '
            f'<input name="contains" value="{h.e(contains)}"></label> <button>Find</button></form>'
        )
        shown = f"{offset + 1}–{offset + len(r.scopes)}" if r.scopes else "none"
        body = (
            form + f"<p>Scopes {shown} of {r.total}, latest change first.</p>" + h.scope_table(where, r.scopes) + more
        )
        return page(where, "Scopes", body)

    async def chain(request: Request) -> Response:
        note_id = request.path_params["note_id"]
        where = await here(request)
        found = await history_or_forgotten(request, where, note_id)
        if isinstance(found, Response):
            return found
        where.scope = found.note.scope
        notes = {
            n.id: n for n in [*found.chain.heads, *found.chain.prerequisites, *(x.note for x in found.chain.history)]
        }
        notes.setdefault(found.note.id, found.note)
        hands = where.as_of is None and where.may_write(where.scope)
        find = request.query_params.get("find", "").strip()
        linking = None
        if hands and find:  # the Link form's search: the notes it may link to, to choose from
            linking = h.LinkSearch(
                note_id, find, await read(request, lambda: pages.link_candidates(memory, found, find))
            )
        body = (
            h.chain_card(where, found.chain, hands=hands, linking=linking)
            + ("" if hands else f'<p class="meta">{no_hands(where)}</p>')
            + await store(lambda: truth.subjects_of(memory, where, found.chain, note_id if hands else None))
            + "<h2>Timeline</h2>" + timeline(where, note_id, notes, found.events, found.related)
        )  # fmt: skip
        return page(where, h.title_of(found.chain), body)

    async def note(request: Request) -> Response:
        note_id = request.path_params["note_id"]
        where = await here(request)
        found = await history_or_forgotten(request, where, note_id)
        if isinstance(found, Response):
            return found
        where.scope = found.note.scope
        x = await store(lambda: memory.why_excluded(note_id, where.q or None, scope=where.scope, as_of=where.as_of))
        reasons = "".join(f"<li><b>{h.e(r.stage)}</b>: {h.e(r.detail)}</li>" for r in x.reasons)
        instead = "".join(h.note_line(where, n, "NOW") for n in x.replaced_by)
        body = (
            f'<ul class="notes">{h.note_line(where, found.note, found.note.state.value.upper())}</ul>'
            f'<h2>Why excluded: <span class="verdict {h.e(x.verdict)}">{h.e(x.verdict.upper())}</span></h2>'
            f"<p>{h.e(x.summary)}</p><ul>{reasons}</ul>"
            + (f'<h2>In its place</h2><ul class="notes">{instead}</ul>' if instead else "")
            + f'<p><a href="{where.chain_url(note_id)}">Its chain, timeline and hands</a></p>'
        )
        return page(where, f"Note {note_id}", body)

    def no_hands(where: h.Here) -> str:
        if where.as_of is not None:
            return "A person changes the memory as it is now: go back to now to correct it."
        return f"Your credential may read scope {h.e(where.scope)} but not change it."

    async def history_or_forgotten(request: Request, where: h.Here, note_id: str) -> NoteHistory | Response:
        """The note's history, or the page saying it was forgotten (when, by whom, why; no text); Refused
        (403) when the caller may not read its scope."""
        try:
            found = await run_in_threadpool(lambda: memory.history(note_id, as_of=where.as_of))
            permit(request, found.note.scope, False, f"note {note_id}")
            return found
        except NotFound as exc:
            tombstone = await store(lambda: memory.tombstone(note_id))
            if tombstone is None:
                raise Refused(str(exc), 404) from exc
            permit(request, tombstone.scope, False, f"note {note_id}")
            where.scope = tombstone.scope
            why = f" because “{h.e(tombstone.reason)}”" if tombstone.reason else ""
            body = (
                f"<p>Note {h.e(note_id)} was forgotten at {h.when(tombstone.recorded_at)} by {h.who(tombstone.actor)}"
                f"{why}. Its text is erased; this record of the erasure is all that is kept.</p>"
            )
            return page(where, "A forgotten note", body)
        except CorrigendaError as exc:
            raise Refused(str(exc)) from exc

    async def notes(request: Request) -> Response:
        where = await here(request)
        state = request.query_params.get("state", "all")
        offset = whole(request, "offset")
        r: NoteList = await read(
            request,
            lambda: memory.list_notes(where.scope, state, offset, 50, where.as_of),  # type: ignore[arg-type]
        )
        counts = ", ".join(f"{n} {s.value}" for s, n in r.counts.items() if n)
        tabs = " · ".join(
            f'<a href="{where.url("/notes", scope=where.scope, state=s, as_of=h.iso(where.as_of))}"'
            f"{ON if s == state else ''}>{s}</a>"
            for s in ("current", "history", "all")
        )
        more = (
            f'<p><a href="{where.url("/notes", scope=where.scope, state=state, offset=r.next_offset, as_of=h.iso(where.as_of))}">older</a></p>'
            if r.next_offset is not None
            else ""
        )
        items = "".join(h.note_line(where, n, n.state.value.upper()) for n in r.notes)
        body = f'<p>{counts or "No notes"}. {tabs}</p><ul class="notes">{items}</ul>{more}'
        return page(where, f"Notes of {where.scope} ({state}, {r.total})", body)

    async def changes(request: Request) -> Response:
        where = await here(request)
        try:
            since = iso_8601(request.query_params.get("since") or None)
        except PydanticCustomError as exc:
            raise Refused(f"since: {exc}") from exc
        since = since or datetime.now(UTC) - CHANGES_WINDOW
        r: Changes = await read(request, lambda: memory.changes(since, where.scope, CHANGES_PAGE))
        items = "".join(change_line(where, c) for c in r.changes)
        form = (
            f'<form method="get" action="{where.url("/changes")}"><input type="hidden" name="scope" value="{h.e(where.scope)}">'
            f'<label>since (UTC) <input type="datetime-local" step="1" name="since" value="{h.e(h.iso(since))}"></label> '
            "<button>Show</button></form>"
        )
        more = ""
        if r.more and r.changes:
            older = r.changes[-1].event.recorded_at
            more = f"<p>{r.more} older change(s) not shown: pick a later time, or see the chains above.</p>"
            more += f'<p class="meta">Oldest shown: {h.when(older)}.</p>'
        body = form + (f'<ul class="changes">{items}</ul>' if items else "<p>No changes.</p>") + more
        return page(where, f"Changes in {where.scope} since {h.when(since)}", body)

    def change_line(where: h.Here, c: Any) -> str:
        ev = c.event
        why = f" — “{h.e(ev.reason)}”" if ev.reason else ""
        target = (
            f'<a href="{where.note_url(c.note_id)}">{h.e(c.note_id)}</a>'
            if c.change == "forgotten"
            else f'<a href="{where.chain_url(c.note_id)}">{h.e(h.short(c.note.text, 140) if c.note else c.note_id)}</a>'
        )
        now = "".join(h.note_line(where, x, "NOW") for x in c.heads)
        return (
            f'<li class="change {h.e(c.change)}"><span class="label">{h.e(c.change.upper())}</span> {target}'
            f'<div class="meta">at {h.when(ev.recorded_at)} by {h.who(ev.actor)}{why}</div><ul class="notes">{now}</ul></li>'
        )

    # -- a person's hands ----------------------------------------------------------------------

    async def posted(request: Request) -> FormData:
        """The form of a POST from a page of this web view (its Origin, and the page's form token), else
        Refused (403)."""
        same_origin(request)
        form = await request.form()
        expected = sessions.form_token(session_of(request))
        if not hmac.compare_digest(str(form.get("csrf", "")).encode(), expected.encode()):
            raise Refused(
                "this form is out of date or did not come from this web view: reload the page and try again", 403
            )
        return form

    async def act(request: Request) -> Response:
        form = await posted(request)
        action = field(form, "action")
        if action in truth.ACTIONS:  # what holds: done at once, nothing to confirm (ui_truth.py says why)
            actor = person(request)
            landed = await store(lambda: truth.write(memory, form, lambda s: permit(request, s, True, action), actor))
            return RedirectResponse(plain(request).base + landed, 303)
        if action == "remember":  # a new note: nothing to confirm (revoking it takes it back)
            scope = permit(request, field(form, "scope"), True, "remember")
            subject, text = str(form.get("subject", "")).strip(), field(form, "text")
            added = await store(lambda: pages.add_note(memory, text, subject, scope, person(request)))
            done = "remember" if added.changed else "remember-same"
            return RedirectResponse(f"{plain(request).base}/chain/{added.note.id}?done={done}", 303)
        note_id = field(form, "note_id")
        reason = field(form, "reason")
        where = await here(request)
        before: NoteHistory = await store(lambda: memory.history(note_id))
        where.scope = before.note.scope
        permit(request, before.note.scope, True, f"{action} {note_id}")
        if action == "link":
            dst_id = field(form, "dst_id")
            permit(request, await store(lambda: memory.scope_of(dst_id, "dst_id")), True, f"link {note_id} {dst_id}")
        back = where.chain_url(note_id)
        actor = person(request)
        if form.get("confirmed") != "yes":
            other = await store(lambda: memory.history(field(form, "dst_id")).note) if action == "link" else None
            question = describe(action, form, before, reason, actor, other)
            kept = {k: str(v) for k, v in form.items() if k in CONFIRMED_FIELDS}
            return page(where, "Confirm", h.confirm(where, kept, question, back))
        landed = await store(lambda: perform(action, form, note_id, reason, actor))
        done = f"link-{form.get('kind')}" if action == "link" else action
        search = str(form.get("q", "")).strip()
        if action == "link" and search:  # a possibly outdated mark answered from a search: back to it, the mark gone
            query = urlencode({"scope": where.scope, "q": search, "done": f"settled-{form.get('kind')}"})
            return RedirectResponse(f"{where.base}/?{query}", 303)
        return RedirectResponse(f"{where.base}/{'note' if action == 'forget' else 'chain'}/{landed}?done={done}", 303)

    def describe(
        action: str, form: FormData, before: NoteHistory, reason: str, person: str, other: NoteView | None = None
    ) -> str:
        said = f"“{h.e(h.short(before.note.text, 200))}”"
        as_who = f"It is recorded as done by {h.who(person)}, because “{h.e(reason)}”."
        if action == "correct":
            return f"Replace {said} with “{h.e(field(form, 'text'))}”? The old note stays as history. {as_who}"
        if action == "revoke":
            return f"Revoke {said}? It stays as history, and whatever it replaced comes back. {as_who}"
        if action == "reinstate":
            return f"Reinstate {said}, undoing what excluded it? {as_who}"
        if action == "link":
            kind = h.LINK_WORDS.get(field(form, "kind"))
            if kind is None:
                *others, last = h.LINK_WORDS
                raise Refused(f"kind: must be {', '.join(others)} or {last}")
            assert other is not None
            return f"Record that {said} {kind} “{h.e(h.short(other.text, 200))}” ({h.e(other.id)})? {as_who}"
        if action == "forget":
            return (f'<b class="danger">Erase {said} for good?</b> Its text is deleted from the store and '
                    f"cannot be brought back; the events that name it go too. {as_who}")  # fmt: skip
        raise Refused(f"action: {action!r} is not one of correct, revoke, reinstate, link, forget")

    def perform(action: str, form: FormData, note_id: str, reason: str, person: str) -> str:
        """Do it, as the person; the id of the note whose page shows the result."""
        if action == "correct":
            return memory.correct(note_id, Draft(text=field(form, "text")), reason=reason, actor=person).note.id
        if action == "revoke":
            memory.revoke(note_id, reason=reason, actor=person)
        elif action == "reinstate":
            memory.reinstate(note_id, reason=reason, actor=person)
        elif action == "link":
            memory.link(note_id, field(form, "dst_id"), field(form, "kind"), reason=reason, actor=person)
        elif action == "forget":
            memory.forget(note_id, reason=reason, actor=person)
        else:
            raise Refused(f"action: {action!r} is not one of correct, revoke, reinstate, link, forget")
        return note_id

    async def logout(request: Request) -> Response:
        await posted(request)
        session = session_of(request)
        if session is not None:  # by bearer there is no session: the cookie, if any, is dropped all the same
            sessions.end(session)
        return logged_out()

    def plain(request: Request) -> h.Here:
        """Where a page that reads nothing stands: the scope asked for, else the project's if the caller
        may read it, else none."""
        shown = visible(request)
        project = default_scope if shown is None or shown(default_scope) else ""
        return h.Here(
            base=request.scope.get("root_path", "").rstrip("/"), scope=request.query_params.get("scope") or project,
            as_of=None, q="", csrf=sessions.form_token(session_of(request)), person=pages.recorded_as(settings, grant_of(request)),
        )  # fmt: skip

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def respond(request: Request) -> Response:
            try:
                return await handler(request)  # type: ignore[no-any-return]
            except Refused as exc:
                body = f'<p class="error">{h.e(exc)}</p><p>Nothing was changed.</p>'
                return page(plain(request), "Cannot do that", body, exc.status)
            except NothingToShow:
                body = (
                    "<p>The scopes your credential may read hold no notes yet. Agents add to them with the "
                    "<code>remember</code> tool; what they store shows here.</p>"
                )
                return page(plain(request), "No notes yet", body)

        return respond

    async def no_such_page(request: Request, exc: Exception) -> Response:
        """A mistyped or outdated address: a page with the way back, not a bare "Not Found" (a missing
        file under /static, which no person opens, stays a bare 404)."""
        if request.scope.get("root_path", "").endswith("/static"):
            return PlainTextResponse("Not Found", 404)
        where = plain(request)
        body = (
            f'<p class="error">There is no page at <code>{h.e(request.url.path)}</code>.</p>'
            f'<p>Search above, or start from <a href="{where.url("/")}">the first page</a> or '
            f'<a href="{where.url("/scopes")}">all scopes</a>.</p>'
        )
        return page(where, "No such page", body, 404)

    return Starlette(
        routes=[
            Route("/", guarded(home)),
            Route("/scopes", guarded(scopes_page)),
            Route("/chain/{note_id}", guarded(chain)),
            Route("/note/{note_id}", guarded(note)),
            Route("/notes", guarded(notes)),
            Route("/changes", guarded(changes)),
            Route("/act", guarded(act), methods=["POST"]),
            *([Route("/logout", guarded(logout), methods=["POST"])] if grants is not None else []),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={404: no_such_page},
        middleware=[
            Middleware(Headers),
            Middleware(Gate, security=transport_security(settings, settings.ui_port), grants=grants, sessions=sessions),
        ],
    )


def field(form: FormData, name: str) -> str:
    """A form field a write needs, refused by name when missing or blank."""
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"{name}: missing; fill it in and try again")
    return value.strip()


def whole(request: Request, name: str) -> int:
    try:
        value = int(request.query_params.get(name, "0"))
    except ValueError:
        raise Refused(f"{name}: must be a whole number") from None
    if value < 0:
        raise Refused(f"{name}: must not be negative")
    return value


def same_origin(request: Request) -> None:
    """A write comes from a page of this web view: its Origin names the host and port the request was
    sent to (the scheme is not compared: behind a proxy that ends TLS the web view sees http), or,
    without an Origin, Sec-Fetch-Site says same-origin."""
    origin = request.headers.get("origin")
    if origin is not None and origin != "null" and urlsplit(origin).netloc == request.headers.get("host", ""):
        return
    if origin is None and request.headers.get("sec-fetch-site") == "same-origin":
        return
    raise Refused(f"a change must come from a page of this web view (Origin {origin or 'missing'})", 403)


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
    """The stderr line saying where the web view answers (`base`, ending in a slash) and how to get in."""
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
    return f"web view on {base}; {access}"


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
