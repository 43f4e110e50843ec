"""The web view's HTML: the page around every view, chains, timelines and the forms of a person's hands.

Every value from the memory passes through `e` (escaped); no page carries a script, so the pages'
Content-Security-Policy allows none (ui.py). Links carry the prefix the web view is mounted under
(`/ui` inside `serve --transport http`), through `Here.url`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from corrigenda.store.model import PERSON
from corrigenda.store.views import Chain, HistoryEntry, NoteView, ScopeCount, ScopeList

TITLE_WORDS = 8  # a chain without a subject is titled by its head's first words
# The link kinds a person can record by hand, in the words of the form and of its confirmation.
LINK_WORDS = {
    "depends_on": "needs",
    "refines": "refines",
    "supersedes": "replaces",
    "distinct": "states another fact than",
}


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def when(t: datetime | None) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if t else "?"


def iso(t: datetime | None) -> str | None:
    """A time as the pages pass it in `as_of` and `since` (UTC, to the second)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") if t else None


def who(actor: str | None) -> str:
    """An actor as a person reads it: 'Ada (person)', 'claude-ai (agent)'."""
    if not actor:
        return "unknown"
    if actor.startswith(PERSON):
        return f'{e(actor.removeprefix(PERSON))} <span class="person">(person)</span>'
    return f"{e(actor)} (agent)"


def title_of(chain: Chain) -> str:
    """A chain's title: its head's subject, else the first words of its head (or of what it replaced)."""
    notes = [*chain.heads, *(h.note for h in chain.history)]
    for n in notes:
        if n.subject:
            return n.subject
    if not notes:
        return chain.chain_id
    words = notes[0].text.split()
    return " ".join(words[:TITLE_WORDS]) + (" …" if len(words) > TITLE_WORDS else "")


@dataclass
class Here:
    """Where a page is: its mount prefix, scope and `as_of`, the query being replayed, and the form token."""

    base: str
    scope: str
    as_of: datetime | None
    q: str
    csrf: str
    notice: str | None = None
    scopes: ScopeList | None = None
    writable: Callable[[str], bool] | None = None  # the scopes the caller may change; None: every scope
    person: str = ""  # who a person's changes are recorded as, and how to change it (HTML)
    instead_of: str | None = None  # the project's scope, empty, that the page opened another scope in place of

    def may_write(self, scope: str) -> bool:
        return self.writable is None or self.writable(scope)

    def url(self, path: str, **params: object) -> str:
        query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
        return e(f"{self.base}{path}" + (f"?{query}" if query else ""))

    def note_url(self, note_id: str) -> str:
        return self.url("/note/" + note_id, q=self.q, as_of=iso(self.as_of))

    def chain_url(self, note_id: str, then: datetime | None = None) -> str:
        """The chain of a note, now (or at this page's `as_of`), or as it was just after `then`."""
        at = then.replace(microsecond=0) + timedelta(seconds=1) if then else self.as_of
        return self.url("/chain/" + note_id, as_of=iso(at))


def document(here: Here, title: str, body: str, store: str) -> str:
    nav = " · ".join(
        f'<a href="{here.url(path, scope=here.scope, as_of=iso(here.as_of))}">{name}</a>'
        for path, name in (("/", "Scope"), ("/notes", "Notes"), ("/changes", "Changes"), ("/scopes", "All scopes"))
    )
    as_of = iso(here.as_of) or ""
    past = (
        f'<p class="past">Showing the memory as it was at {when(here.as_of)}. '
        f'<a href="{here.url("/", scope=here.scope, q=here.q)}">Back to now</a></p>'
        if here.as_of
        else ""
    )
    notice = f'<p class="notice" role="status">{e(here.notice)}</p>' if here.notice else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)} · corrigenda</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="{here.url("/static/favicon.svg")}" type="image/svg+xml">
<link rel="stylesheet" href="{here.url("/static/ui.css")}"></head>
<body><header><a class="brand" href="{here.url("/")}">corrigenda</a>
{f'<span class="scope">scope <b>{e(here.scope)}</b></span> ' if here.scope else ""}<nav>{nav}</nav>
<form class="controls" method="get" action="{here.url("/")}">
<input type="hidden" name="scope" value="{e(here.scope)}">
<label>search <input type="search" name="q" value="{e(here.q)}" placeholder="which port does the service use?"></label>
<label>as of (UTC) <input type="datetime-local" step="1" name="as_of" value="{e(as_of)}"></label>
<button type="submit">Recall</button>
</form>{f'<p class="person-line">{here.person}</p>' if here.person else ""}</header>
<main>{notice}{past}<h1>{e(title)}</h1>{body}</main>
<footer>Memory at {e(store)}.</footer></body></html>"""


def scope_table(here: Here, scopes: Sequence[ScopeCount]) -> str:
    rows = "".join(
        f'<tr><td><a href="{here.url("/", scope=c.scope)}">{e(c.scope)}</a></td><td>{c.notes}</td>'
        f"<td>{c.events}</td><td>{when(c.latest_change_at)}</td></tr>"
        for c in scopes
    )
    return (
        '<table class="scopes"><thead><tr><th>scope</th><th>notes</th><th>events</th><th>latest change</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )


def badges(n: NoteView) -> str:
    parts = [f'<span class="kind">{e(n.kind)}</span>']
    if n.subject:
        parts.append(f'<span class="subject">{e(n.subject)}</span>')
    parts += [f'<span class="tag">#{e(t)}</span>' for t in n.tags]
    if n.confidence < 1:
        parts.append(f'<span class="unsure">confidence {n.confidence:.2f}</span>')
    return " ".join(parts)


def note_line(here: Here, n: NoteView, label: str, extra: str = "") -> str:
    return (
        f'<li class="note {e(label.lower())}"><span class="label">{e(label)}</span> '
        f'<span class="text">{e(n.text)}</span><div class="meta">{badges(n)} · recorded {when(n.recorded_at)} '
        f'by {who(n.actor)}{checks(n)} · <a href="{here.note_url(n.id)}">{e(n.id)}</a></div>{extra}</li>'
    )


def checks(n: NoteView) -> str:
    """When a note was last checked and still held (by whom, how), and the scope's mark when that is longer
    ago than its setting allows: a mark only, the note stays where it is."""
    said = ""
    if n.last_checked is not None:
        c = n.last_checked
        how = f": “{e(c.reason)}”" if c.reason else ""
        said += f' · <span class="checked">checked {when(c.at)} by {who(c.actor)}{how}</span>'
    if n.unchecked_since is not None:
        said += f' · <span class="unchecked">unchecked since {when(n.unchecked_since)}</span>'
    return said


def history_line(here: Here, h: HistoryEntry, hands: bool = False) -> str:
    how = "replaced" if h.role.value == "superseded" else e(h.role.value)
    why = f" because “{e(h.reason)}”" if h.reason else ""
    extra = f'<div class="why">{how} at {when(h.at)} by {who(h.actor)}{why}</div>'
    if h.clipped is not None:
        extra += (
            f'<div class="meta clipped">clipped to fit the budget: {h.clipped.kept_tokens} of '
            f'{h.clipped.whole_tokens} tokens (<a href="{here.note_url(h.note.id)}">the whole note</a>)</div>'
        )
    if hands and h.role.value in ("superseded", "revoked"):
        extra += hands_for_history(here, h)
    return note_line(here, h.note, "HISTORY", extra)


STATUS_WORDS = {
    "active": "current",
    "contested": "CONTESTED: its current notes disagree",
    "retracted": "RETRACTED: nothing in it holds",
    "expired": "EXPIRED",
}


def chain_card(
    here: Here, c: Chain, hands: bool = False, settle: bool = False, linking: LinkSearch | None = None
) -> str:
    """A chain as recall delivers it: NOW, NEEDS, HISTORY; with `hands`, each note's forms under it (the
    notes `linking` found, under its head's Link); with `settle`, a possibly outdated chain's two answers
    (the newer note replaces it, or states another fact)."""
    items = [note_line(here, h, "NOW", hands_for_head(here, h, linking) if hands else "") for h in c.heads]
    items += [note_line(here, p, "NEEDS") for p in c.prerequisites]
    items += [f'<li class="note needs"><span class="label">NEEDS</span> {e(i)} (in another chain)</li>'
              for i in c.prerequisites_elsewhere]  # fmt: skip
    items += [history_line(here, h, hands) for h in c.history]
    trimmed = c.trimmed_history + c.trimmed_prerequisites
    more = f'<p class="meta">{trimmed} more left out to fit the budget.</p>' if trimmed else ""
    status = STATUS_WORDS.get(c.status.value, c.status.value)
    suspect = ""
    if c.possibly_outdated_by:  # recall saw a newer current note state another value, with no edge between them
        why = f" ({e(c.outdated_reason)})" if c.outdated_reason else ""
        answers = settle and len(c.heads) == 1
        suspect = (
            f'<p class="suspect">POSSIBLY OUTDATED by <a href="{here.chain_url(c.possibly_outdated_by)}">a newer note</a>'
            f"{why}: nothing links the two. "
            + ("Say which it is:</p>" + hands_for_suspect(here, c.possibly_outdated_by, c.heads[0].id) if answers
               else "If it does replace this one, correct or link it.</p>")
        )  # fmt: skip
    return (
        f'<section class="chain {e(c.status.value)}"><h2><a href="{here.chain_url(c.chain_id)}">{e(title_of(c))}</a> '
        f'<span class="status">{e(status)}</span></h2>{suspect}<ul>{"".join(items)}</ul>{more}</section>'
    )


def short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- a person's hands: each form posts to /act, which asks to confirm before it writes (all but Still true) --


REASON = '<label>reason <input name="reason" required maxlength="2000" placeholder="why"></label>'
HOW = '<label>how did you check (optional) <input name="reason" maxlength="2000" placeholder="read the config"></label>'


def _form(
    here: Here, action: str, note_id: str, label: str, inner: str = "", danger: bool = False, asked: str = REASON
) -> str:
    return (
        f'<details class="hand{" danger" if danger else ""}"><summary>{e(label)}</summary>'
        f"{_post(here, action, note_id, label, inner, asked)}</details>"
    )


def _post(here: Here, action: str, note_id: str, label: str, inner: str = "", asked: str = REASON) -> str:
    """A hand's form: with the required `REASON`, its button leads to a confirmation (…); a write asked
    otherwise (`HOW`: "Still true", which changes no note) is done at once."""
    then = "…" if asked is REASON else ""
    return (
        f'<form method="post" action="{here.url("/act")}"><input type="hidden" name="csrf" value="{e(here.csrf)}">'
        f'<input type="hidden" name="action" value="{e(action)}"><input type="hidden" name="note_id" value="{e(note_id)}">'
        f"{inner}{asked} <button>{e(label)}{then}</button></form>"
    )


def add_form(here: Here, opened: bool = False) -> str:
    """Add a note to the page's scope, as the person: its text and, if wanted, its subject. No reason is
    asked (a note says why it is there) and no confirmation (revoking it takes it back)."""
    return (
        f'<details class="hand add"{" open" if opened else ""}><summary>Add a note to {e(here.scope)}</summary>'
        f'<form method="post" action="{here.url("/act")}"><input type="hidden" name="csrf" value="{e(here.csrf)}">'
        f'<input type="hidden" name="action" value="remember"><input type="hidden" name="scope" value="{e(here.scope)}">'
        '<label>text <textarea name="text" required maxlength="20000" rows="3" '
        'placeholder="The payments service listens on port 9090"></textarea></label>'
        '<label>subject (optional) <input name="subject" maxlength="256" placeholder="payments.port"></label> '
        "<button>Add</button></form></details>"
    )


@dataclass
class LinkSearch:
    """A search for the other end of a link from the head `from_id`: what was asked, and the notes found."""

    from_id: str
    find: str
    found: list[NoteView]


def hands_for_head(here: Here, n: NoteView, search: LinkSearch | None = None) -> str:
    correct = (
        f'<label>new text <textarea name="text" required maxlength="20000" rows="3">{e(n.text)}</textarea></label>'
    )
    return (
        '<div class="hands">'
        + _form(here, "confirm", n.id, "Still true", asked=HOW)
        + _form(here, "correct", n.id, "Correct", correct)
        + _form(here, "revoke", n.id, "Revoke")
        + link_hand(here, n, search if search is not None and search.from_id == n.id else None)
        + _form(here, "forget", n.id, "Forget (erase)", "", danger=True)
        + "</div>"
    )


def link_hand(here: Here, n: NoteView, search: LinkSearch | None) -> str:
    """Link: find the other note by a few of its words (a GET of this chain's page, which lists the notes of
    the scope that match, each to choose with a radio button), then say how the two relate."""
    find = (
        f'<form method="get" action="{here.chain_url(n.id)}#link-{e(n.id)}"><label>find the other note '
        f'<input type="search" name="find" required value="{e(search.find if search else "")}" '
        'placeholder="a few of its words"></label> <button>Find</button></form>'
    )
    if search is None:
        return f'<details class="hand" id="link-{e(n.id)}"><summary>Link</summary>{find}</details>'
    if not search.found:
        chosen = f'<p class="meta">No other note of scope <b>{e(n.scope)}</b> matches “{e(search.find)}”.</p>'
    else:
        choices = "".join(
            f'<label class="candidate"><input type="radio" name="dst_id" value="{e(c.id)}" required> '
            f'<span class="text">{e(short(c.text, 200))}</span> <span class="meta">{badges(c)}</span></label>'
            for c in search.found
        )
        kinds = "".join(f'<option value="{kind}">{words}</option>' for kind, words in LINK_WORDS.items())
        chosen = _post(
            here, "link", n.id, "Link",
            f'<fieldset class="candidates"><legend>This note <select name="kind">{kinds}</select> the note you choose:'
            f"</legend>{choices}</fieldset>",
        )  # fmt: skip
    return f'<details class="hand" id="link-{e(n.id)}" open><summary>Link</summary>{find}{chosen}</details>'


def hands_for_suspect(here: Here, newer: str, older: str) -> str:
    """The two answers to a possibly outdated mark: link the newer note to the older as `supersedes`, or
    as `distinct`; each asks for a reason and a confirmation, as every hand does."""

    def answer(kind: str, label: str) -> str:
        inner = (
            f'<input type="hidden" name="dst_id" value="{e(older)}"><input type="hidden" name="kind" value="{kind}">'
            f'<input type="hidden" name="q" value="{e(here.q)}">'  # the search to come back to, the answer shown
        )
        return _form(here, "link", newer, label, inner)

    return (
        '<div class="hands">'
        + answer("supersedes", "The newer note replaces it")
        + answer("distinct", "They are different facts")
        + "</div>"
    )


def hands_for_history(here: Here, h: HistoryEntry) -> str:
    return '<div class="hands">' + _form(here, "reinstate", h.note.id, "Reinstate") + "</div>"


def confirm(here: Here, fields: dict[str, str], question: str, back: str) -> str:
    hidden = "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items())
    return (
        f'<div class="confirm"><p>{question}</p><form method="post" action="{here.url("/act")}">{hidden}'
        f'<input type="hidden" name="csrf" value="{e(here.csrf)}"><input type="hidden" name="confirmed" value="yes">'
        f'<button class="go">Confirm</button> <a href="{back}">Cancel</a></form></div>'
    )
