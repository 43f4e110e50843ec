"""What a person (or an agent resuming work) asks of a scope as a whole: its notes page by page,
how many are in each state, and what changed since a time; and of the store: its scopes page by page.

Pure functions over a fold or counts: `Memory.list_notes`, `Memory.changes` and `Memory.scope_page`
read what they need and pass it in. Unlike recall, a listing reads its whole scope (every note and
event): it is for looking through a memory, not for answering from it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from datetime import datetime

from .chains import event_view, note_view
from .errors import InvalidArgument
from .fold import CHECK_DAYS, Fold, check_days
from .ids import is_note_id
from .model import Event, EventKind, NoteState
from .subjects import PREFIX, subject_of
from .views import Change, ChangeKind, Changes, NoteList, ScopeCount, ScopeList, StateFilter
from .where import SCOPE_MAX

PAGE_MAX = 500
CHANGE_KINDS: dict[EventKind, ChangeKind] = {
    EventKind.SUPERSEDES: "corrected",
    EventKind.REVOKES: "revoked",
    EventKind.REINSTATES: "reinstated",
    EventKind.FORGETS: "forgotten",
    EventKind.CONFIRMS: "confirmed",
    EventKind.ONE_VALUE: "declared",
    EventKind.MANY_VALUES: "withdrawn",
    EventKind.CHECK_EVERY: "check_every",
}
SETTINGS: dict[EventKind, str] = {  # a setting's kind, and what its event's dst starts with
    EventKind.ONE_VALUE: PREFIX,
    EventKind.MANY_VALUES: PREFIX,
    EventKind.CHECK_EVERY: CHECK_DAYS,
}


def check_page(offset: int, limit: int) -> None:
    """InvalidArgument naming `offset` or `limit` unless they ask for a page: limit 1 to PAGE_MAX."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= PAGE_MAX:
        raise InvalidArgument("limit", f"must be a whole number from 1 to {PAGE_MAX}, not {limit!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidArgument("offset", f"must be a whole number, 0 or more, not {offset!r}")


def list_scopes(
    counts: Iterable[ScopeCount], offset: int, limit: int, contains: str | None, default_scope: str | None
) -> ScopeList:
    """A page of the scopes whose name contains `contains` (any case; all for None), the most recently
    changed first, ties by name; with `default_scope`'s counts wherever it falls."""
    if contains is not None and (not isinstance(contains, str) or len(contains) > SCOPE_MAX):
        raise InvalidArgument("contains", f"must be part of a scope name: text of at most {SCOPE_MAX} characters")
    check_page(offset, limit)
    every = list(counts)
    wanted = every
    if contains:
        part = _folded(contains)
        wanted = [c for c in every if part in _folded(c.scope)]
    wanted.sort(key=lambda c: c.scope)
    wanted.sort(key=lambda c: c.latest_change_at, reverse=True)  # stable: ties stay by name
    page = wanted[offset : offset + limit]
    after = offset + len(page)
    return ScopeList(
        scopes=page, contains=contains or None, total=len(wanted), offset=offset,
        next_offset=after if after < len(wanted) else None, default_scope=default_scope,
        default_counts=next((c for c in every if c.scope == default_scope), None),
    )  # fmt: skip


def _folded(name: str) -> str:
    """A name as `contains` compares it: composed (as scopes are stored) and case-folded."""
    return unicodedata.normalize("NFC", name).casefold()


def list_notes(
    folded: Fold, scope: str, state: StateFilter, offset: int, limit: int, as_of: datetime | None
) -> NoteList:
    """A page of the fold's notes that pass `state`, newest first (recording time, then id)."""
    counts = dict.fromkeys(NoteState, 0)
    for status in folded.status.values():
        counts[status.state] += 1
    wanted = [
        n
        for n in folded.notes.values()
        if state == "all" or (folded.state(n.id) is NoteState.ACTIVE) == (state == "current")
    ]
    wanted.sort(key=lambda n: (n.recorded_at, n.id), reverse=True)
    page = wanted[offset : offset + limit]
    after = offset + len(page)
    return NoteList(
        scope=scope, state=state, as_of=as_of, notes=[note_view(n, folded) for n in page], total=len(wanted),
        offset=offset, next_offset=after if after < len(wanted) else None, counts=counts,
    )  # fmt: skip


def changed_since(events: Iterable[Event], since: datetime) -> list[Event]:
    """The scope's corrections, revocations, reinstatements, erasures, confirmations and settings
    recorded after `since`, newest first."""
    found = [e for e in events if e.kind in CHANGE_KINDS and e.recorded_at > since and _well_formed(e)]
    return sorted(found, key=lambda e: (e.recorded_at, e.id), reverse=True)


def changes(folded: Fold, listed: list[Event], scope: str, since: datetime, limit: int) -> Changes:
    """Each of `listed` (newest first, from `changed_since`) with its chain as `folded` has it now.

    An event whose notes the fold no longer shows (they were forgotten since) is left out, as the
    erasure left it out of the store; the `forgets` tombstone itself is listed, without text."""
    visible = {e.id: e for e in folded.events}
    shown: list[Change] = []
    skipped = 0
    for event in listed:
        change = _change(folded, visible, event)
        if change is None:
            continue
        if len(shown) == limit:
            skipped += 1
            continue
        shown.append(change)
    return Changes(scope=scope, since=since, until=folded.at, changes=shown, more=skipped)


def is_setting(event: Event) -> bool:
    return event.kind in SETTINGS


def _well_formed(event: Event) -> bool:
    """Whether a setting's event names what it sets as settings do (an import checks no more than its kind)."""
    return not is_setting(event) or event.dst.startswith(SETTINGS[event.kind])


def _change(folded: Fold, visible: dict[str, Event], event: Event) -> Change | None:
    kind = CHANGE_KINDS[event.kind]
    if is_setting(event):
        every = event.kind is EventKind.CHECK_EVERY
        return Change(
            change=kind, event=event_view(event, folded), note_id=None, note=None,
            subject=None if every else subject_of(event), check_every_days=check_days(event) if every else None,
        )  # fmt: skip
    if event.kind is EventKind.FORGETS:
        return Change(change=kind, event=event_view(event, folded), note_id=event.dst, note=None)
    if event.id not in visible:
        return None  # a note it names is gone
    # a reinstates of one revocation or supersession acted on the note that event excluded
    target = event.dst if is_note_id(event.dst) else visible[event.dst].dst
    chain = folded.chain(target)
    by = folded.notes.get(event.src) if event.kind is EventKind.SUPERSEDES and event.src else None
    return Change(
        change=kind, event=event_view(event, folded), note_id=target, note=note_view(folded.notes[target], folded),
        by=note_view(by, folded) if by else None, chain_id=chain.id, chain_status=chain.status,
        heads=[note_view(folded.notes[h], folded) for h in chain.heads],
    )  # fmt: skip
