"""Parts of the web view's pages that need more than markup: who a person's changes are recorded as,
the scopes nearest a mistyped one, the notes a person may link to, and a note a person adds.

Plain functions of what they are given (the store, the settings, the caller's grant); the routes
(ui_read.py, ui_hands.py) check the grant and the form token before calling them.
"""

from __future__ import annotations

from collections.abc import Callable

from corrigenda.store import Draft, Memory, UnknownScope
from corrigenda.store.views import NoteHistory, NoteView, Remembered

from . import ui_html as h
from .config import Settings
from .grants import SHARED_TOKEN, Grant

LINK_CANDIDATES = 8  # chains a Link search lists the current notes of


def person_of(settings: Settings, grant: Grant | None) -> str:
    """The actor of a person's write: the credential's name (the configured person's for the shared token)."""
    return settings.person_actor if grant is None or grant.name == SHARED_TOKEN else f"person:{grant.name}"


def recorded_as(settings: Settings, grant: Grant | None) -> str:
    """What every page says of who the person's changes are recorded as, and how to change it."""
    said = f"What you change here is recorded as {h.who(person_of(settings, grant))}"
    if grant is not None and grant.name != SHARED_TOKEN:
        return f"{said}, the name of your credential (in the grants file)."
    if "person" not in settings.model_fields_set:
        return f"{said}, your login name: set <code>CORRIGENDA_PERSON</code> to record another name."
    return f"{said}: set <code>CORRIGENDA_PERSON</code> to record another name."


def opened_instead(here: h.Here) -> str:
    """A new project's landing, opened on another scope: it says first that the project's own holds nothing."""
    if here.instead_of is None:
        return ""
    return (
        f'<p class="notice">This project\'s scope <b>{h.e(here.instead_of)}</b> holds nothing yet: what agents '
        f'remember in this project goes there (<a href="{here.url("/", scope=here.instead_of)}">open it</a> to add '
        f"a first note). Below is <b>{h.e(here.scope)}</b>, the scope changed most recently.</p>"
    )


def nearest_scopes(here: h.Here, unknown: UnknownScope, visible: Callable[[str], bool] | None) -> str:
    """A mistyped scope's page: nothing was stored in it, and the nearest scopes the caller may read,
    as links. The same nearest scopes the store's `UnknownScope.said(visible)` names to an agent, the
    page linking each instead of naming it in a sentence."""
    nearest = unknown.nearest(visible)
    said = f"<p>Nothing was ever stored in scope <b>{h.e(unknown.scope)}</b>: mistyped, or a project with no notes yet?"
    if not nearest:
        return said + " No scope you may read holds anything yet.</p>"
    links = ", ".join(
        f'<a href="{here.url("/", scope=name, q=here.q)}">{h.e(name)}</a> ({n} note{"" if n == 1 else "s"})'
        for name, n in nearest.items()
    )
    whose = "The nearest scopes" if visible is None else "The nearest scopes you may read"
    return said + f" {whose}: {links}.</p>"


def link_candidates(memory: Memory, found: NoteHistory, find: str) -> list[NoteView]:
    """The notes a person may link the chain of `found` to, for the words `find`: the current notes that a
    recall of them reaches in the note's scope, the chain's own notes left out."""
    own = {n.id for n in found.chain.heads} | {x.note.id for x in found.chain.history} | {found.note.id}
    r = memory.recall(find, found.note.scope, max_chains=LINK_CANDIDATES, include_history=False)
    listed = {n.id: n for c in r.chains for n in [*c.heads, *c.prerequisites] if n.id not in own}
    return list(listed.values())


def add_note(memory: Memory, text: str, subject: str, scope: str, actor: str) -> Remembered:
    """The note a person added by hand: its text, its subject if given, the person as its actor."""
    return memory.remember(Draft(text=text, subject=subject or None), scope=scope, actor=actor)
