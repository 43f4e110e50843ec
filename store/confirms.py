""" "Still true": a confirmation that a current note was checked and holds, and a scope's setting of how
long a check lasts (`check_every`), after which a current note reads "unchecked since …" (fold.py). Both
are events: who, when and why come with them, and `as_of`, `changes`, export and import carry them."""

from __future__ import annotations

from datetime import datetime

from .chains import build_chain, event_view
from .checks import exist, new_event, recorded_time
from .commit import Commits
from .errors import Conflict, InvalidArgument, NotFound
from .fold import CHECK_DAYS
from .model import Event, EventKind, NoteState
from .part import Collaborators, Part
from .views import LifecycleChange
from .where import check_scope

MAX_CHECK_DAYS = 36_500


class Confirms(Part):
    """`confirm` and `check_every`, committed through `commits` (commit.py), which the write path hands it."""

    def __init__(self, given: Collaborators, commits: Commits) -> None:
        super().__init__(given)
        self.commits = commits

    def confirm(
        self, note_id: str, reason: str | None = None, actor: str | None = None, at: datetime | None = None
    ) -> LifecycleChange:
        """Record that a current note was checked and still holds. A note that is history (superseded,
        revoked, expired or pending) is refused, naming its state and what is current in its place."""
        try:
            note = self.lookup.note(note_id, "note_id")
            now = recorded_time(at, self.clock)
            before = self.lookup.load(note.scope, now, [note])
            exist(before, {note_id: note}, {"note_id": [note_id]})
        except NotFound:
            tombstone = self.tables.events.tombstone(note_id)
            if tombstone is None:
                raise
            day = tombstone.recorded_at.date().isoformat()
            raise Conflict(
                f"note_id: {note_id} was forgotten (erased for good) on {day}: nothing is left to confirm"
            ) from None
        status = before.status[note_id]
        if status.state is not NoteState.ACTIVE:
            how = {NoteState.SUPERSEDED: f"superseded by {status.by}", NoteState.REVOKED: "revoked"}.get(
                status.state, f"{status.state.value} by its validity window"
            )
            heads = before.chain(note_id).heads
            instead = (
                f"confirm its chain's current note ({', '.join(heads)}) instead"
                if heads
                else "nothing is current in its chain"
            )
            raise Conflict(f"note_id: {note_id} is not current ({how}); {instead}")
        event = new_event(EventKind.CONFIRMS, None, note_id, note.scope, reason, actor, now)
        after = self.commits.write(before, [event])
        self.commits.refuse_if_raced(before, [event], None, {"note_id": [note_id]}, actor)
        return LifecycleChange(event=event_view(event, after), changed=True, chain=build_chain(after, note_id))

    def check_every(
        self, days: int, scope: str = "default", reason: str | None = None, actor: str | None = None
    ) -> Event:
        """Set how many days a check of a current note of `scope` lasts (0: no limit, the default)."""
        scope = check_scope(scope)
        if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_CHECK_DAYS:
            raise InvalidArgument("days", f"{days!r} is not a number of days from 0 (no limit) to {MAX_CHECK_DAYS}")
        event = new_event(EventKind.CHECK_EVERY, None, f"{CHECK_DAYS}{days}", scope, reason, actor, self.clock())
        version = self.tables.add_events([event])
        self.graphs.appended(scope, [event], version)
        return event
