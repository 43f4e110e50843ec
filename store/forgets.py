"""Forgetting a note for real: its `forgets` tombstone, the commit point, then the erasure of its row and
of the events naming it from every file (storage/erasure.py)."""

from __future__ import annotations

from .chains import note_view
from .checks import checked_reason, new_event
from .commit import Commits
from .errors import NotFound
from .ids import NOTE_PREFIX, check_id
from .model import EventKind
from .part import Collaborators, Part
from .views import Forgotten, NoteView


class Forgets(Part):
    """`forget`, and the commits of every write (commit.py), which withdraw a note by forgetting it."""

    def __init__(self, given: Collaborators) -> None:
        super().__init__(given)
        self.commits = Commits(given, self._withdraw)

    def forget(self, note_id: str, reason: str, actor: str | None = None) -> Forgotten:
        """Delete a note for real, with every event that names it, and say what that changed.

        First a `forgets` tombstone (no text of the note) is appended: from then on the note
        does not exist for any reader. Then an erasure pass removes its row and the events naming it
        from every file (storage/erasure.py): before this answers on a disk, on a thread of this process on
        object storage (`erasure: pending`, and any process's next upkeep finishes what a stopped
        one left). A repeated call, or one after an interrupted erasure, finishes whatever is left
        and answers `changed: false`.
        """
        reason = checked_reason(reason)
        check_id(note_id, "note_id", prefix=NOTE_PREFIX)
        note = self.tables.search.notes([note_id]).get(note_id)
        tombstone = self.tables.events.tombstone(note_id)
        if note is None and tombstone is None:
            raise NotFound("note", note_id, "note_id")
        now = self.clock()
        changed: list[NoteView] = []
        fresh = tombstone is None
        if tombstone is None:
            assert note is not None
            before = self.lookup.load(note.scope, now, [note])
            tombstone = new_event(EventKind.FORGETS, None, note_id, note.scope, reason, actor, now)
            after = self.commits.write(before, [tombstone])  # the commit point: the note is gone for every reader
            changed = [
                note_view(after.notes[n], after)
                for n in sorted(before.notes)
                if n in after.notes and after.state(n) is not before.state(n)
            ]
        removed = self.tables.erasure.erasure_events([note_id])
        erased = not fresh and bool(self.tables.erasure.erased([note_id]))
        if not erased and self.tables.erasure.erase_later:
            self.tables.erasure.erase_soon()
        elif not erased:
            self.tables.erasure.erase_forgotten()
            erased = True
        self.graphs.drop_all()
        return Forgotten(
            note_id=note_id, changed=fresh, events_removed=removed, notes_changed=changed,
            erasure="done" if erased else "pending",
        )  # fmt: skip

    def _withdraw(self, note_id: str, reason: str) -> None:
        """Forget a note this process just wrote, as the operation `forget` does (catching up first)."""
        self.tables.handles.refresh()
        self.forget(note_id, reason=reason)
