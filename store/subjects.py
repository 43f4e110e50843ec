"""Subjects that hold one value in a scope: a declaration an agent or a person records, so that a new
note of that subject replaces its current note in the same call, never by a guess.

A declaration is an event of its scope, `one_value` (or, withdrawn, `many_values`) with dst
`subject:<the subject as written>`: who and when come with it, `as_of` and export carry it, and the
latest for a subject is in force. The fold reads no such event (fold.py: its dst is not a note).
Subjects that differ only by case, spaces or punctuation are one (`subject_key`): "Payments timeout",
"payments.timeout" and "payments_timeout" are one subject.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import datetime

from .chains import note_view
from .checks import new_event, recorded_time, utc
from .errors import InvalidArgument
from .fold import Fold
from .model import MAX_LINKS, MAX_SUBJECT, Event, EventKind, Note, NoteState, check_text
from .part import Part
from .views import Declared, Replaced
from .where import check_scope

PREFIX = "subject:"
DECLARING = (EventKind.ONE_VALUE, EventKind.MANY_VALUES)


def subject_key(subject: str) -> str:
    """What two spellings of one subject share: its letters and digits, case folded (NFKC first, so a
    full-width letter is its letter)."""
    return "".join(c for c in unicodedata.normalize("NFKC", subject).casefold() if c.isalnum())


def checked_subject(subject: str | None, field: str = "subject") -> str:
    """A subject that can be declared, stripped; InvalidArgument naming `field` if it is missing, empty,
    only punctuation or spaces, or over the limit."""
    if subject is None or not subject.strip():
        raise InvalidArgument(field, "must not be empty: a subject names what holds the value, e.g. 'payments.timeout'")
    subject = subject.strip()
    check_text(field, subject, MAX_SUBJECT)
    if not subject_key(subject):
        raise InvalidArgument(field, f"{subject!r} has no letter or digit: subjects are told apart by those")
    return subject


def declared(events: Iterable[Event], at: datetime | None = None) -> dict[str, Event]:
    """The subjects of a scope that hold one value (by `subject_key`), each with its declaration: the
    latest declaring event of each subject recorded by `at`, where it is `one_value`."""
    latest: dict[str, Event] = {}
    for e in sorted(events, key=lambda e: (e.recorded_at, e.id)):
        if e.kind in DECLARING and e.dst.startswith(PREFIX) and (at is None or e.recorded_at <= at):
            latest[subject_key(e.dst.removeprefix(PREFIX))] = e
    return {key: e for key, e in latest.items() if e.kind is EventKind.ONE_VALUE}


def subject_of(event: Event) -> str:
    """The subject a declaring event names, as written."""
    return event.dst.removeprefix(PREFIX)


def holding(notes: Iterable[Note], folded: Fold, key: str) -> list[Note]:
    """Of `notes`, the current ones (active in `folded`) whose subject is `key`'s, newest first."""
    found = [n for n in notes if n.subject and subject_key(n.subject) == key and n.id in folded.notes]
    current = [n for n in found if folded.state(n.id) is NoteState.ACTIVE]
    return sorted(current, key=lambda n: (n.recorded_at, n.id), reverse=True)


def replaced(note: Note, declared: bool, ids: list[str], events: list[Event], folded: Fold) -> Replaced:
    """What a remember of a one-value subject's note replaced, and how to undo it."""
    edges = [e.id for e in events if e.kind is EventKind.SUPERSEDES and e.dst in ids]
    if ids:
        undo = (
            f'revoke(note_id="{note.id}", reason=…) brings back {", ".join(ids)}; to keep both current instead, '
            + "; ".join(f'reinstate(target_id="{e}", reason=…)' for e in edges)
        )
    else:
        undo = "nothing was replaced: the subject had no current note"
    if declared:
        undo += f'; to withdraw the declaration, declare_subject(subject="{note.subject}", one_value=false)'
    notes = [note_view(folded.notes[i], folded) for i in ids if i in folded.notes]
    return Replaced(subject=note.subject or "", declared=declared, notes=notes, undo=undo)


def replacing(note: Note, of_subject: Sequence[Note], before: Fold, named: Sequence[str]) -> list[str]:
    """The current notes of `note`'s subject (`of_subject`: none unless it holds one value) that a remember
    of it replaces, besides those it `named`; as many as one write may supersede."""
    current = holding(of_subject, before, subject_key(note.subject or ""))
    return [n.id for n in current if n.id not in named][: MAX_LINKS - len(named)]


def one_value_reason(subject: str) -> str:
    """The reason of the `supersedes` edge a remember of a one-value subject writes: short, as a history
    entry's reason counts against a recall's budget (the scope is the edge's own)."""
    return f"one value: {subject}"


class Subjects(Part):
    """Declaring and withdrawing one-value subjects, and finding a subject's current notes."""

    def declaration(self, scope: str, subject: str, at: datetime | None = None) -> Event | None:
        """The declaration in force that `subject` holds one value in `scope`, if there is one."""
        return declared(list(self.graphs.get(scope).scope_wide), utc(at)).get(subject_key(subject))

    def candidates(self, scope: str, subject: str) -> list[Note]:
        """The notes of `scope` whose subject is `subject`, however spelled, in any state."""
        key = subject_key(subject)
        return [n for n in self.tables.search.subject_notes(scope) if subject_key(n.subject or "") == key]

    def current(self, scope: str, subject: str, at: datetime) -> tuple[list[Note], Fold]:
        """The current notes of `subject` in `scope` (newest first), and the fold they were read in."""
        candidates = self.candidates(scope, subject)
        folded = self.lookup.load(scope, at, candidates)
        return holding(candidates, folded, subject_key(subject)), folded

    def for_note(self, note: Note, declare: bool, now: datetime) -> tuple[Event | None, list[Note]]:
        """For a remember of `note`: the declaration to write with it (`declare`, when its subject is not
        declared yet), and, when its subject holds one value, that subject's notes."""
        if declare:
            checked_subject(note.subject, "subject")
        if not note.subject or not subject_key(note.subject):
            return None, []
        standing = self.declaration(note.scope, note.subject, now)
        if standing is None and not declare:
            return None, []
        declaration = None
        if standing is None:
            subject = PREFIX + note.subject.strip()
            declaration = new_event(
                EventKind.ONE_VALUE,
                None,
                subject,
                note.scope,
                f"declared by the remember of {note.id}",
                note.actor,
                now,
            )
        return declaration, self.candidates(note.scope, note.subject)

    def declare(
        self,
        subject: str,
        scope: str = "default",
        one_value: bool = True,
        reason: str | None = None,
        actor: str | None = None,
        at: datetime | None = None,
    ) -> Declared:
        """Record that `subject` holds one value in `scope` (or, with `one_value` false, withdraw that).
        Declaring a subject that has several current notes leaves them as they are: the answer names
        them, for someone to settle (correct one, or link the newer to supersede the older)."""
        scope = check_scope(scope)
        subject = checked_subject(subject)
        now = recorded_time(at, self.clock)
        standing = self.declaration(scope, subject, now)
        current, folded = self.current(scope, subject, now)
        views = [note_view(n, folded) for n in current]
        if (standing is not None) == one_value:
            return Declared(subject=subject, scope=scope, one_value=one_value, changed=False, event=None,
                            declared_by=standing, current=views)  # fmt: skip
        kind = EventKind.ONE_VALUE if one_value else EventKind.MANY_VALUES
        event = new_event(kind, None, PREFIX + subject, scope, reason, actor, now)
        version = self.tables.add_events([event])
        self.graphs.appended(scope, [event], version)
        return Declared(subject=subject, scope=scope, one_value=one_value, changed=True, event=event,
                        declared_by=event if one_value else None, current=views)  # fmt: skip

    def one_value_subjects(self, scope: str = "default", at: datetime | None = None) -> list[Event]:
        """The declarations in force in `scope`, by subject."""
        scope = check_scope(scope)
        found = declared(list(self.graphs.get(scope).scope_wide), utc(at))
        return sorted(found.values(), key=lambda e: subject_key(subject_of(e)))
