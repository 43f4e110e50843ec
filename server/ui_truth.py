"""What a person records in the web view about what holds, beside a note's lifecycle: that a current note
was checked and still holds ("Still true", store/confirms.py), that a subject holds one value in a scope
(store/subjects.py), and how many days a check of the scope's notes lasts.

A chain page says, for each subject of its notes, whether it holds one value in the scope, with the form
that declares or withdraws that; a scope's page lists its subjects that hold one value (who declared each,
when, why) and its check setting, each with its form. The forms post to `/act` with the page's form token,
as every hand does: ui_hands.py checks the token, the Origin and the grant, then `write` does what they ask, as
the person. None of them changes a note, so none is asked to be confirmed: each is undone by the form
beside it (withdraw, declare again, set again), and a confirmation only adds a date.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from urllib.parse import quote, urlencode

from corrigenda.store import Memory
from corrigenda.store.checks import utc
from corrigenda.store.errors import InvalidArgument
from corrigenda.store.model import Event
from corrigenda.store.subjects import subject_key, subject_of
from corrigenda.store.views import Chain
from starlette.datastructures import FormData

from .ui_html import Here, e, when, who

ACTIONS = ("confirm", "one_value", "many_values", "check_every")
# What a page says after each write (`?done=`), added to ui_site.py's DONE: fixed words.
DONE = {
    "confirm": "Confirmed: the note still holds. It now shows when it was checked and by whom.",
    "one_value": "Declared: the subject holds one value in this scope. A note added with it from now on replaces "
    "its current note (revoking the new note brings the old one back).",
    "one_value-several": "Declared: the subject holds one value in this scope. It has several current notes now: "
    "they stay as they are until someone settles them (correct one, or link the newest to replace the others).",
    "one_value-same": "Already declared: the subject holds one value in this scope; nothing changed.",
    "many_values": "Withdrawn: the subject may hold several values; a note added with it stands beside its "
    "current notes.",
    "many_values-same": "The subject was not declared to hold one value; nothing changed.",
    "check_every": "Saved: how long a check lasts in this scope is shown below.",
}
WHY = '<label>why (optional) <input name="reason" maxlength="2000"></label>'


def write(memory: Memory, form: FormData, admit: Callable[[str], str], actor: str) -> str:
    """Do what a form of `ACTIONS` asks, as `actor`, once `admit` lets the caller change the scope it touches
    (returning the scope as the store names it); the address, under the web view's base, of the page that
    shows the result. Every value goes to the store as given, which refuses a bad one by name."""
    action = str(form.get("action", ""))
    reason = str(form.get("reason", "")).strip() or None
    if action == "confirm":
        note_id = str(form.get("note_id", "")).strip()
        admit(memory.scope_of(note_id, "note_id"))
        memory.confirm(note_id, reason=reason, actor=actor)
        return f"/chain/{note_id}?done=confirm"
    scope = admit(str(form.get("scope", "")))
    if action == "check_every":
        memory.check_every(days_of(form), scope=scope, reason=reason, actor=actor)
        return "/?" + urlencode({"scope": scope, "done": action})
    subject = str(form.get("subject", ""))
    declared = memory.declare_subject(subject, scope=scope, one_value=action == "one_value", reason=reason, actor=actor)
    done = action if declared.changed else f"{action}-same"
    if declared.changed and declared.one_value and len(declared.current) > 1:
        done = f"{action}-several"
    back = str(form.get("note_id", "")).strip()  # declared from a chain's page: back to it
    if back:
        return f"/chain/{quote(back, safe='')}?done={done}"
    return "/?" + urlencode({"scope": scope, "done": done})


def days_of(form: FormData) -> int:
    given = str(form.get("days", "")).strip()
    try:
        return int(given)
    except ValueError:
        raise InvalidArgument("days", f"{given!r} is not a whole number of days (0: no limit)") from None


# -- what the pages show -------------------------------------------------------------------------


def subjects_of(memory: Memory, here: Here, chain: Chain, back: str | None) -> str:
    """For each subject of the chain's notes: whether it holds one value in the scope at the page's time and
    who declared it; with `back`, the id of the note whose page this is, the form that declares or withdraws
    it and comes back. Nothing for a chain of no subject."""
    subjects: dict[str, str] = {}
    for n in [*chain.heads, *(h.note for h in chain.history)]:
        if n.subject and subject_key(n.subject):
            subjects.setdefault(subject_key(n.subject), n.subject)
    if not subjects:
        return ""
    declared = {subject_key(subject_of(d)): d for d in memory.one_value_subjects(here.scope, utc(here.as_of))}
    lines = "".join(subject_line(here, subject, declared.get(key), back) for key, subject in subjects.items())
    return f'<h2>Subject{"s" if len(subjects) > 1 else ""}</h2><ul class="subjects">{lines}</ul>'


def subject_line(here: Here, subject: str, declaration: Event | None, note_id: str | None) -> str:
    """A subject and whether it holds one value; with the `note_id` of the page to come back to, its form."""
    named = f'<span class="subject">{e(subject)}</span>'
    if declaration is None:
        said = (
            f"{named} may hold several values in scope <b>{e(here.scope)}</b>: a note added with this subject stands "
            "beside its current notes."
        )
        hand = declare_form(here, subject, note_id, "Declare that it holds one value", "one_value", "Declare")
    else:
        said = (
            f"{named} holds one value in scope <b>{e(here.scope)}</b>{declared_by(declaration)}. A note added with "
            "this subject replaces its current note."
        )
        hand = declare_form(here, subject, note_id, "Withdraw: it may hold several values", "many_values", "Withdraw")
    return f'<li class="one-value">{said}{hand if note_id is not None else ""}</li>'


def declared_by(declaration: Event) -> str:
    why = f" because “{e(declaration.reason)}”" if declaration.reason else ""
    return f", declared by {who(declaration.actor)} at {when(declaration.recorded_at)}{why}"


def declare_form(here: Here, subject: str, note_id: str | None, summary: str, action: str, button: str) -> str:
    fields = f'<input type="hidden" name="subject" value="{e(subject)}">'
    if note_id:
        fields += f'<input type="hidden" name="note_id" value="{e(note_id)}">'
    return f'<details class="hand"><summary>{e(summary)}</summary>{scope_form(here, action, fields, button)}</details>'


def scope_form(here: Here, action: str, fields: str, button: str) -> str:
    """A form that changes a setting of the page's scope, with the optional why."""
    return (
        f'<form method="post" action="{here.url("/act")}"><input type="hidden" name="csrf" value="{e(here.csrf)}">'
        f'<input type="hidden" name="action" value="{e(action)}"><input type="hidden" name="scope" value="{e(here.scope)}">'
        f"{fields}{WHY} <button>{e(button)}</button></form>"
    )


def scope_section(memory: Memory, here: Here) -> str:
    """A scope page's part on what holds: its subjects that hold one value, and how long a check lasts; with
    their forms when the page is of now and the caller may change the scope."""
    hands = here.as_of is None and here.may_write(here.scope)
    return one_value_list(here, memory.one_value_subjects(here.scope, utc(here.as_of)), hands) + checks_setting(
        here, check_days(memory, here.scope, here.as_of), hands
    )


def one_value_list(here: Here, declared: Sequence[Event], hands: bool) -> str:
    items = "".join(
        f'<li class="one-value"><span class="subject">{e(subject_of(d))}</span>{declared_by(d)}'
        + (declare_form(here, subject_of(d), None, "Withdraw", "many_values", "Withdraw") if hands else "")
        + "</li>"
        for d in declared
    )
    listed = (
        f'<p class="meta">A note added with one of these subjects replaces its current note in the same write.</p>'
        f'<ul class="subjects">{items}</ul>'
        if items
        else "<p>None: a note added with a subject stands beside that subject's current notes.</p>"
    )
    adding = ""
    if hands:
        subject = '<label>subject <input name="subject" maxlength="256" placeholder="payments.port"></label> '
        adding = (
            '<details class="hand"><summary>Declare that a subject holds one value</summary>'
            f"{scope_form(here, 'one_value', subject, 'Declare')}</details>"
        )
    return f"<h2>Subjects that hold one value</h2>{listed}{adding}"


def checks_setting(here: Here, days: int, hands: bool) -> str:
    if days:
        said = (
            f"<p>A check lasts <b>{days} day{'' if days == 1 else 's'}</b>: a current note neither written nor "
            "confirmed (Still true) for that long reads “unchecked since …”. It stays current and where it is.</p>"
        )
    else:
        said = "<p>Checks do not expire here: no note reads “unchecked since …”.</p>"
    if not hands:
        return f"<h2>Checks</h2>{said}"
    number = f'<label>check every <input type="number" name="days" min="0" value="{days}" required> days (0: no limit)</label> '
    return f'<h2>Checks</h2>{said}<div class="setting">{scope_form(here, "check_every", number, "Set")}</div>'


def check_days(memory: Memory, scope: str, at: datetime | None) -> int:
    """The scope's check setting at `at` (now, if None), in days; 0: no limit. Read from the fold of no note,
    which carries the scope's settings: the store offers no reader of that setting alone."""
    every = memory.reader(scope).fold([], utc(at) or memory.clock()).check_every
    return every.days if every is not None else 0
