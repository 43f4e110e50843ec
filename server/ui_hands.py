"""A person's hands in the web view: the writes. Every one is a POST to `/act` (ui.build_ui wraps it in
ui_site.guarded) carrying the page's form token and an Origin of this web view's own (`posted`), checked
against the caller's grant for every scope it touches, and recorded with the person as actor. What holds
(ui_truth.py) and a new note are done at once; a correction, revocation, reinstatement, link or
forgetting is first described on a page that asks to confirm it (`describe`), then done (`perform`).
`/logout` ends the caller's session (ui_gate.py).
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode, urlsplit

from corrigenda.store import Draft, Memory
from corrigenda.store.views import NoteHistory, NoteView
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from . import ui_html as h
from . import ui_pages as pages
from . import ui_truth as truth
from .ui_gate import logged_out, session_of
from .ui_site import Refused, here, page, permit, person, plain, site_of, store

# What a confirmation page passes on to the write it confirms (`q`: the search a mark was answered from).
CONFIRMED_FIELDS = ("action", "note_id", "reason", "text", "kind", "dst_id", "q")


async def posted(request: Request) -> FormData:
    """The form of a POST from a page of this web view (its Origin, and the page's form token), else
    Refused (403)."""
    same_origin(request)
    form = await request.form()
    expected = site_of(request).sessions.form_token(session_of(request))
    if not hmac.compare_digest(str(form.get("csrf", "")).encode(), expected.encode()):
        raise Refused("this form is out of date or did not come from this web view: reload the page and try again", 403)
    return form


async def act(request: Request) -> Response:
    site = site_of(request)
    form = await posted(request)
    action = field(form, "action")
    if action in truth.ACTIONS:  # what holds: done at once, nothing to confirm (ui_truth.py says why)
        actor = person(request)
        landed = await store(lambda: truth.write(site.memory, form, lambda s: permit(request, s, True, action), actor))
        return RedirectResponse(plain(request).base + landed, 303)
    if action == "remember":  # a new note: nothing to confirm (revoking it takes it back)
        scope = permit(request, field(form, "scope"), True, "remember")
        subject, text = str(form.get("subject", "")).strip(), field(form, "text")
        added = await store(lambda: pages.add_note(site.memory, text, subject, scope, person(request)))
        done = "remember" if added.changed else "remember-same"
        return RedirectResponse(f"{plain(request).base}/chain/{added.note.id}?done={done}", 303)
    note_id = field(form, "note_id")
    reason = field(form, "reason")
    where = await here(request)
    before: NoteHistory = await store(lambda: site.memory.history(note_id))
    where.scope = before.note.scope
    permit(request, before.note.scope, True, f"{action} {note_id}")
    if action == "link":
        dst_id = field(form, "dst_id")
        permit(request, await store(lambda: site.memory.scope_of(dst_id, "dst_id")), True, f"link {note_id} {dst_id}")
    back = where.chain_url(note_id)
    actor = person(request)
    if form.get("confirmed") != "yes":
        other = await store(lambda: site.memory.history(field(form, "dst_id")).note) if action == "link" else None
        question = describe(action, form, before, reason, actor, other)
        kept = {k: str(v) for k, v in form.items() if k in CONFIRMED_FIELDS}
        return page(request, where, "Confirm", h.confirm(where, kept, question, back))
    landed = await store(lambda: perform(site.memory, action, form, note_id, reason, actor))
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


def perform(memory: Memory, action: str, form: FormData, note_id: str, reason: str, person: str) -> str:
    """Do it in `memory`, as the person; the id of the note whose page shows the result."""
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
        site_of(request).sessions.end(session)
    return logged_out()


def field(form: FormData, name: str) -> str:
    """A form field a write needs, refused by name when missing or blank."""
    value = form.get(name)
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"{name}: missing; fill it in and try again")
    return value.strip()


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
