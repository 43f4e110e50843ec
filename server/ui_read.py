"""The web view's pages that read: the landing page and a search (`/`), every scope (`/scopes`), a chain
(`/chain/{note_id}`), a note (`/note/{note_id}`), a scope's notes (`/notes`) and what changed (`/changes`).

Module-level routes of the request (ui.build_ui wraps each in ui_site.guarded): each reads the store
through ui_site's `store` and `read`, refused by name when the caller's grant does not let it read the
scope, and answers with ui_site's `page`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from corrigenda.store import CorrigendaError, NotFound, UnknownScope
from corrigenda.store.views import Changes, NoteHistory, NoteList, NoteView, RecallResult, ScopeList
from pydantic_core import PydanticCustomError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from . import render
from . import ui_html as h
from . import ui_pages as pages
from . import ui_truth as truth
from .arguments import iso_8601
from .ui_site import Refused, here, page, permit, read, site_of, store, visible
from .ui_timeline import timeline

ON = ' class="on"'  # the tab being shown
CHANGES_WINDOW = timedelta(days=7)  # what /changes shows when no `since` is given
LANDING_NOTES = 20  # current notes on a scope's landing page
LANDING_CHANGES = 5
SCOPES_PAGE = 100  # scopes per page of /scopes
CHANGES_PAGE = 50


async def home(request: Request) -> Response:
    site = site_of(request)
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
        return page(request, where, "An empty memory", body)
    others = (
        f"<h2>Scopes, latest change first</h2>{h.scope_table(where, listed.scopes)}"
        f'<p><a href="{where.url("/scopes")}">All scopes ({listed.total})</a></p>'
    )
    adding = h.add_form(where, opened=listed.default_counts is None) if where.may_write(where.scope) else ""
    try:  # a scope nothing was stored in: the project's is new, any other mistyped
        current: NoteList = await store(lambda: site.memory.list_notes(
            where.scope, "current", 0, LANDING_NOTES, where.as_of, named=where.scope != site.default_scope
        ))  # fmt: skip
    except Refused as exc:
        if not isinstance(exc.__cause__, UnknownScope):
            raise
        return page(
            request, where, f"Scope {where.scope}", pages.nearest_scopes(where, exc.__cause__, visible(request))
        )
    if listed.default_counts is None:
        body = f"<p>Scope <b>{h.e(where.scope)}</b> holds nothing yet.</p>" + adding + others
        return page(request, where, f"Scope {where.scope}", body)
    since = (where.as_of or datetime.now(UTC)) - CHANGES_WINDOW
    changed: Changes = await store(lambda: site.memory.changes(since, where.scope, LANDING_CHANGES))
    counts = ", ".join(f"{n} {s.value}" for s, n in current.counts.items() if n)
    notes = "".join(current_line(where, n) for n in current.notes) or "<li>No current notes.</li>"
    more = f'<p><a href="{where.url("/notes", scope=where.scope, state="current")}">All {current.total} current notes</a></p>'
    recent = (
        "".join(change_line(where, c) for c in changed.changes)
        or "<li>Nothing corrected, revoked, reinstated, forgotten or confirmed in the last 7 days.</li>"
    )
    holds = await store(lambda: truth.scope_section(site.memory, where))
    body = (
        f"{pages.opened_instead(where)}<p>{counts}. Search above, or open a note to see its chain and fix it.</p>{adding}"
        f'<h2>Current notes, newest first</h2><ul class="notes">{notes}</ul>{more}'
        f'<h2>Latest changes</h2><ul class="changes">{recent}</ul>{holds}{others}'
    )
    return page(request, where, f"Scope {where.scope}", body)


def current_line(where: h.Here, n: NoteView) -> str:
    label = f"<b>{h.e(n.subject)}</b>: " if n.subject else ""
    return (
        f'<li>{label}<a href="{where.chain_url(n.id)}">{h.e(h.short(n.text, 140))}</a>'
        f'<div class="meta">{h.badges(n)} · {h.when(n.recorded_at)} by {h.who(n.actor)}{h.checks(n)}</div></li>'
    )


async def search(request: Request, where: h.Here) -> Response:
    site = site_of(request)
    r: RecallResult = await read(request, lambda: site.memory.recall(where.q, where.scope, as_of=where.as_of))
    summary = f'<p class="summary">{len(r.chains)} chain(s), {r.used_tokens}/{r.budget_tokens} tokens.</p>'
    settle = where.as_of is None and where.may_write(where.scope)  # a mark's two answers, where one may write
    body = summary + "".join(h.chain_card(where, c, settle=settle) for c in r.chains)
    if not r.chains:
        body += f"<p>Nothing in scope <b>{h.e(where.scope)}</b> matches.</p>"
    return page(request, where, f"“{where.q}”", body)


async def scopes_page(request: Request) -> Response:
    site = site_of(request)
    where = await here(request)
    offset = whole(request, "offset")
    contains = request.query_params.get("contains", "").strip()
    granted = visible(request)
    r: ScopeList = await store(lambda: site.memory.scope_page(offset, SCOPES_PAGE, contains or None, None, granted))
    more = (f'<p><a href="{where.url("/scopes", contains=contains, offset=r.next_offset)}">next {SCOPES_PAGE}</a></p>'
            if r.next_offset is not None else "")  # fmt: skip
    form = (
        f'<form method="get" action="{where.url("/scopes")}"><label>name contains '
        f'<input name="contains" value="{h.e(contains)}"></label> <button>Find</button></form>'
    )
    shown = f"{offset + 1}–{offset + len(r.scopes)}" if r.scopes else "none"
    body = form + f"<p>Scopes {shown} of {r.total}, latest change first.</p>" + h.scope_table(where, r.scopes) + more
    return page(request, where, "Scopes", body)


async def chain(request: Request) -> Response:
    site = site_of(request)
    note_id = request.path_params["note_id"]
    opened = await named_note(request, note_id)
    if isinstance(opened, Response):
        return opened
    where, found = opened
    notes = {n.id: n for n in [*found.chain.heads, *found.chain.prerequisites, *(x.note for x in found.chain.history)]}
    notes.setdefault(found.note.id, found.note)
    hands = where.as_of is None and where.may_write(where.scope)
    find = request.query_params.get("find", "").strip()
    linking = None
    if hands and find:  # the Link form's search: the notes it may link to, to choose from
        linking = h.LinkSearch(
            note_id, find, await read(request, lambda: pages.link_candidates(site.memory, found, find))
        )
    body = (
        h.chain_card(where, found.chain, hands=hands, linking=linking)
        + ("" if hands else f'<p class="meta">{no_hands(where)}</p>')
        + await store(lambda: truth.subjects_of(site.memory, where, found.chain, note_id if hands else None))
        + "<h2>Timeline</h2>" + timeline(where, note_id, notes, found.events, found.related)
    )  # fmt: skip
    return page(request, where, h.title_of(found.chain), body)


async def note(request: Request) -> Response:
    site = site_of(request)
    note_id = request.path_params["note_id"]
    opened = await named_note(request, note_id)
    if isinstance(opened, Response):
        return opened
    where, found = opened
    x = await store(lambda: site.memory.why_excluded(note_id, where.q or None, scope=where.scope, as_of=where.as_of))
    reasons = "".join(f"<li><b>{h.e(r.stage)}</b>: {h.e(r.detail)}</li>" for r in x.reasons)
    instead = "".join(h.note_line(where, n, "NOW") for n in x.replaced_by)
    body = (
        f'<ul class="notes">{h.note_line(where, found.note, found.note.state.value.upper())}</ul>'
        f'<h2>Why excluded: <span class="verdict {h.e(x.verdict)}">{h.e(x.verdict.upper())}</span></h2>'
        f"<p>{h.e(x.summary)}</p><ul>{reasons}</ul>"
        + (f'<h2>In its place</h2><ul class="notes">{instead}</ul>' if instead else "")
        + f'<p><a href="{where.chain_url(note_id)}">Its chain, timeline and hands</a></p>'
    )
    return page(request, where, f"Note {note_id}", body)


def no_hands(where: h.Here) -> str:
    if where.as_of is not None:
        return "A person changes the memory as it is now: go back to now to correct it."
    return f"Your credential may read scope {h.e(where.scope)} but not change it."


async def named_note(request: Request, note_id: str) -> tuple[h.Here, NoteHistory] | Response:
    """What the chain and note pages open with: the page's context, set to the note's scope, and the note's
    history; or the page that answers instead (`history_or_forgotten`)."""
    where = await here(request)
    found = await history_or_forgotten(request, where, note_id)
    if isinstance(found, Response):
        return found
    where.scope = found.note.scope
    return where, found


async def history_or_forgotten(request: Request, where: h.Here, note_id: str) -> NoteHistory | Response:
    """The note's history, or the page saying it was forgotten (when, by whom, why; no text); Refused
    (403) when the caller may not read its scope."""
    site = site_of(request)
    try:
        found = await run_in_threadpool(lambda: site.memory.history(note_id, as_of=where.as_of))
        permit(request, found.note.scope, False, f"note {note_id}")
        return found
    except NotFound as exc:
        tombstone = await store(lambda: site.memory.tombstone(note_id))
        if tombstone is None:
            raise Refused(str(exc), 404) from exc
        permit(request, tombstone.scope, False, f"note {note_id}")
        where.scope = tombstone.scope
        why = f" because “{h.e(tombstone.reason)}”" if tombstone.reason else ""
        body = (
            f"<p>Note {h.e(note_id)} was forgotten at {h.when(tombstone.recorded_at)} by {h.who(tombstone.actor)}"
            f"{why}. Its text is erased; this record of the erasure is all that is kept.</p>"
        )
        return page(request, where, "A forgotten note", body)
    except CorrigendaError as exc:
        raise Refused(str(exc)) from exc


async def notes(request: Request) -> Response:
    site = site_of(request)
    where = await here(request)
    state = request.query_params.get("state", "all")
    offset = whole(request, "offset")
    r: NoteList = await read(
        request,
        lambda: site.memory.list_notes(where.scope, state, offset, 50, where.as_of),  # type: ignore[arg-type]
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
    return page(request, where, f"Notes of {where.scope} ({state}, {r.total})", body)


async def changes(request: Request) -> Response:
    site = site_of(request)
    where = await here(request)
    try:
        since = iso_8601(request.query_params.get("since") or None)
    except PydanticCustomError as exc:
        raise Refused(f"since: {exc}") from exc
    since = since or datetime.now(UTC) - CHANGES_WINDOW
    r: Changes = await read(request, lambda: site.memory.changes(since, where.scope, CHANGES_PAGE))
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
    return page(request, where, f"Changes in {where.scope} since {h.when(since)}", body)


def change_line(where: h.Here, c: Any) -> str:
    ev = c.event
    why = f" — “{h.e(ev.reason)}”" if ev.reason else ""
    if c.note_id is None:  # a setting of the scope as a whole
        target = h.e(render.setting(c))
    elif c.change == "forgotten":
        target = f'<a href="{where.note_url(c.note_id)}">{h.e(c.note_id)}</a>'
    else:
        target = f'<a href="{where.chain_url(c.note_id)}">{h.e(h.short(c.note.text, 140) if c.note else c.note_id)}</a>'
    now = "".join(h.note_line(where, x, "NOW") for x in c.heads)
    return (
        f'<li class="change {h.e(c.change)}"><span class="label">{h.e(c.change.upper())}</span> {target}'
        f'<div class="meta">at {h.when(ev.recorded_at)} by {h.who(ev.actor)}{why}</div><ul class="notes">{now}</ul></li>'
    )


def whole(request: Request, name: str) -> int:
    try:
        value = int(request.query_params.get(name, "0"))
    except ValueError:
        raise Refused(f"{name}: must be a whole number") from None
    if value < 0:
        raise Refused(f"{name}: must not be negative")
    return value
