"""A chain's timeline, in the words a person reads: what happened to it, oldest first.

Notes are named by their text, never by id: an event that undid another says what that one did, to
which notes and when; an event undone says by whom and when. A need that a correction carried over
from the note it corrects (`Memory.correct` without `depends_on`) is shown as carried over, without
the correction's reason: that reason is why the value changed, not why the need holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from corrigenda.store.model import EventKind
from corrigenda.store.views import EventView, NoteView

from .ui_html import Here, e, short, when, who


def timeline(
    here: Here, note_id: str, notes: dict[str, NoteView], events: Iterable[EventView], related: Iterable[NoteView] = ()
) -> str:
    """Each of the chain's `notes` recorded and each event, in words (a note outside the chain that an
    event names, `related`, by its text too), with a link to the chain of `note_id` as it was then."""
    events = list(events)
    named = {**{n.id: n for n in related}, **notes}
    by_id = {ev.id: ev for ev in events}
    carried = carried_over(events)
    rows = [(n.recorded_at, f"{who(n.actor)} recorded “{e(n.text)}”") for n in notes.values()]
    rows += [(ev.recorded_at, event_row(ev, named, by_id, ev.id in carried)) for ev in events]
    rows.sort(key=lambda row: row[0])
    return (
        '<ol class="timeline">'
        + "".join(
            f"<li><time>{when(at)}</time> {what} "
            f'<a class="then" href="{here.chain_url(note_id, at)}">as it was then</a></li>'
            for at, what in rows
        )
        + "</ol>"
    )


def carried_over(events: list[EventView]) -> set[str]:
    """The ids of `depends_on` events a correction wrote because the note it corrects needed the same:
    written with its `supersedes` (same source, same moment), naming what the older note needed."""
    needs = {(ev.src, ev.dst) for ev in events if ev.kind is EventKind.DEPENDS_ON}
    corrected = {(ev.src, ev.recorded_at): ev.dst for ev in events if ev.kind is EventKind.SUPERSEDES}
    return {
        ev.id
        for ev in events
        if ev.kind is EventKind.DEPENDS_ON and (corrected.get((ev.src, ev.recorded_at)), ev.dst) in needs
    }


def event_row(ev: EventView, notes: dict[str, NoteView], events: dict[str, EventView], carried: bool) -> str:
    """One event: who did what, because of what, and whether it was undone (by whom, when)."""
    if carried:
        needs = f"{said(notes, ev.src)} needs {said(notes, ev.dst)}"
        return f"{needs}, carried over from the note it corrects{undone(ev, events)}"
    why = f" because “{e(ev.reason)}”" if ev.reason else ""
    return f"{who(ev.actor)} {did(ev, notes, events)}{why}{undone(ev, events)}"


def did(ev: EventView, notes: dict[str, NoteView], events: dict[str, EventView]) -> str:
    """What an event did, as a verb phrase: 'replaced “…” with “…”'."""
    src, dst = said(notes, ev.src), said(notes, ev.dst)
    if ev.kind is EventKind.REINSTATES:
        if ev.dst in notes:
            return f"reinstated {dst}"
        target = events.get(ev.dst)
        if target is None:  # an event of another chain: say what can be said without its id
            return "undid an event of another chain"
        return f"undid {deed(target, notes)} (recorded {when(target.recorded_at)} by {who(target.actor)})"
    verbs = {
        EventKind.SUPERSEDES: f"replaced {dst} with {src}",
        EventKind.REVOKES: f"revoked {dst}",
        EventKind.DEPENDS_ON: f"said {src} needs {dst}",
        EventKind.REFINES: f"said {src} refines {dst}",
        EventKind.DISTINCT: f"said {src} states another fact than {dst}",
        EventKind.CONFIRMS: f"checked that {dst} still holds",
    }
    return verbs.get(ev.kind, f"{e(ev.kind.value)} {dst}")


def deed(ev: EventView, notes: dict[str, NoteView]) -> str:
    """What an event did, as a noun phrase: 'the replacement of “…” with “…”'."""
    src, dst = said(notes, ev.src), said(notes, ev.dst)
    if ev.kind is EventKind.SUPERSEDES:
        return f"the replacement of {dst} with {src}"
    if ev.kind is EventKind.REVOKES:
        return f"the revocation of {dst}"
    return f"the {e(ev.kind.value)} edge from {src} to {dst}"


def undone(ev: EventView, events: dict[str, EventView]) -> str:
    if ev.in_force:
        return ""
    if ev.retracted_by is None:
        return ' <span class="undone">(set aside: it would close a cycle)</span>'
    by = events.get(ev.retracted_by)
    at = f" at {when(by.recorded_at)} by {who(by.actor)}" if by is not None else " later"
    return f' <span class="undone">(undone{at})</span>'


def said(notes: dict[str, NoteView], note_id: str | None) -> str:
    """A note by its text; one the page was not given, as 'another note' (an id says nothing to a person)."""
    n = notes.get(note_id or "")
    return f"“{e(short(n.text))}”" if n is not None else "another note"
