"""The read path: history, recall and its trace, why a note was left out, the scopes, a scope's notes and
changes, and exports. `Memory` (memory.py) offers these as its operations, each after catching up with
what any process wrote first; a read here reads that state without checking again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from . import browse, recall, transfer
from .chains import build_chain, event_view, note_view
from .checks import utc
from .errors import InvalidArgument, NotFound, UnknownScope
from .explain import explain
from .fold import fold
from .ids import NOTE_PREFIX, check_id, is_note_id
from .model import MAX_QUERY, Event, EventKind, Note
from .part import Part
from .recall import Trace
from .views import Changes, Exclusion, NoteHistory, NoteList, RecallResult, ScopeCount, ScopeList, StateFilter
from .where import check_scope


class Reads(Part):
    """Every read of one store (part.py: what it is handed; the embedder embeds queries)."""

    def tombstone(self, note_id: str) -> Event | None:
        """The `forgets` event that erased a note, if one did: when, by whom and why (never its text)."""
        check_id(note_id, "note_id", prefix=NOTE_PREFIX)
        return self.tables.events.tombstone(note_id)

    def history(self, note_id: str, as_of: datetime | None = None) -> NoteHistory:
        note = self.lookup.note(note_id, "note_id")
        at = utc(as_of) or self.clock()
        folded = self.lookup.load(note.scope, at, [note])
        if note_id not in folded.notes:
            if self.lookup.load(note.scope, note.recorded_at, [note]).notes.get(note_id) is None:
                raise NotFound("note", note_id, "note_id")  # forgotten; its erasure is under way
            raise InvalidArgument(
                "as_of", f"note {note_id} was recorded at {note.recorded_at.isoformat()}, after as_of"
            )
        members = folded.chain(note_id).members
        # an edge into the chain from a note its fold does not reach (a dependant, a note said to state
        # another fact) shows once that note is read too
        reader = self.lookup.reader(note.scope)
        linked = reader.linked_from(members) - folded.notes.keys()
        if linked:
            folded = self.lookup.load(note.scope, at, [note, *reader.found(sorted(linked)).values()])
        chain = build_chain(folded, note_id)
        in_chain = {*members, *(p.id for p in chain.prerequisites)}
        events = folded.events_of(members)
        named = {i for e in events for i in (e.src, e.dst) if i in folded.notes and i not in in_chain}
        return NoteHistory(
            note=note_view(note, folded),
            chain=chain,
            events=[event_view(e, folded) for e in events],
            related=[note_view(folded.notes[i], folded) for i in sorted(named)],
        )

    def recall(
        self,
        query: str,
        scope: str = "default",
        budget_tokens: int = 2000,
        max_chains: int | None = None,
        include_history: bool = True,
        as_of: datetime | None = None,
        named: bool = True,
        min_entries: int = 0,
    ) -> RecallResult:
        """The chains `query` reaches in `scope` (recall.py). A scope nothing was ever stored in is refused
        as a typo if the caller `named` it (UnknownScope); else it is new, and the result says so.

        A note enters recall when it is close enough to the query in meaning or matches its words;
        `min_entries` (0 to recall.MAX_ENTRIES) lets at least that many of the best-matching notes in
        whatever their similarity, each bringing its chain: for a long history the query shares little with."""
        trace = self._run(query, scope, budget_tokens, max_chains, include_history, as_of, min_entries=min_entries)
        result = trace.result
        assert result is not None
        found_nothing = not result.chains and not result.omitted and not self.graphs.get(result.scope).events
        if found_nothing and self._unknown_scope(result.scope, named):  # is there anything there at all?
            result = result.model_copy(update={"scope_is_new": True})
        unreadable = sorted(self.tables.search.unreadable & trace.candidates.keys())  # met, found by words alone
        return result.model_copy(update={"unreadable": unreadable}) if unreadable else result

    def trace(
        self,
        query: str,
        scope: str = "default",
        budget_tokens: int = 2000,
        max_chains: int | None = None,
        include_history: bool = True,
        as_of: datetime | None = None,
    ) -> Trace:
        """The recall `recall` makes, with all it weighed: every candidate with its ranks and score, the
        fold, the chains built, those trimmed or dropped as duplicates, and what recall returns
        (`trace.result`). What `why_excluded` reads; tests and benches check the scores here."""
        return self._run(query, scope, budget_tokens, max_chains, include_history, as_of)

    def why_excluded(
        self,
        note_id: str,
        query: str | None = None,
        scope: str = "default",
        budget_tokens: int = 2000,
        as_of: datetime | None = None,
    ) -> Exclusion:
        note = self.lookup.note(note_id, "note_id")
        scope = check_scope(scope)
        at = utc(as_of) or self.clock()
        if query is not None and note.scope == scope:
            # one recall, whose fold also covers this note's chain: explain reads that same fold
            trace = self._run(query, scope, budget_tokens, None, True, as_of, also=[note])
            if note_id in trace.fold.notes:
                return explain(note, trace.fold, scope, trace)
        folded = self.lookup.load(note.scope, at, [note])
        if note_id not in folded.notes and note.recorded_at <= at:
            raise NotFound("note", note_id, "note_id")  # forgotten
        return explain(note, folded, scope, None)

    def scopes(self) -> list[ScopeCount]:
        """Every scope that holds notes or events, with how many of each, busiest first."""
        counts = self.tables.search.scopes()
        listed = [ScopeCount(scope=name, **count) for name, count in counts.items()]
        return sorted(listed, key=lambda c: (-c.notes, c.scope))

    def scope_page(
        self,
        offset: int = 0,
        limit: int = 100,
        contains: str | None = None,
        default_scope: str | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> ScopeList:
        """A page of the store's scopes, the most recently changed first (ties by name), each with its
        counts; only those whose name contains `contains` (any case) if given, and only those `visible`
        accepts if given (pages and totals count those alone). `limit` is 1 to browse.PAGE_MAX.
        `default_scope`'s counts come with the page whether it is on it or not."""
        counts = self.tables.search.scopes()
        listed = (ScopeCount(scope=name, **count) for name, count in counts.items() if visible is None or visible(name))
        return browse.list_scopes(listed, offset, limit, contains, default_scope)

    def scope_of(self, target_id: str, field: str = "note_id") -> str:
        """The scope of a note (kept, or forgotten with its tombstone left) or of an event, by id;
        NotFound naming `field` when there is none."""
        check_id(target_id, field)
        if is_note_id(target_id):
            try:
                return self.lookup.note(target_id, field).scope
            except NotFound:
                tombstone = self.tables.events.tombstone(target_id)
                if tombstone is None:
                    raise
                return tombstone.scope
        event = self.tables.events.event(target_id)
        if event is None:
            raise NotFound("event", target_id, field)
        return event.scope

    def stats(self) -> dict[str, object]:
        stored = self.tables.handles.stored_model()
        return {
            "db": self.tables.uri,
            "model": stored[0] if stored else self.embedder.name,
            "dimension": stored[1] if stored else None,
            **self.tables.search.count(),
        }

    # -- internals ---------------------------------------------------------------------------

    def _run(
        self,
        query: str,
        scope: str,
        budget: int,
        max_chains: int | None,
        include_history: bool,
        as_of: datetime | None,
        also: Sequence[Note] = (),
        min_entries: int = 0,
    ) -> Trace:
        if not query.strip():
            raise InvalidArgument("query", "must not be empty")
        if len(query) > MAX_QUERY:
            raise InvalidArgument("query", f"has {len(query)} characters; the limit is {MAX_QUERY}")
        if budget < 1:
            raise InvalidArgument("budget_tokens", "must be at least 1")
        scope = check_scope(scope)

        reader = self.lookup.reader(scope, also)
        trace = recall.run(
            reader, self.embedder, query, now=self.clock(), as_of=utc(as_of), budget_tokens=budget,
            max_chains=max_chains, include_history=include_history, settings=self.settings, min_entries=min_entries,
        )  # fmt: skip
        self.lookup.loaded.version = reader.version
        return trace

    # -- looking through a memory: browse.py -------------------------------------------------

    def list_notes(
        self,
        scope: str = "default",
        state: StateFilter = "all",
        offset: int = 0,
        limit: int = 50,
        as_of: datetime | None = None,
        named: bool = True,
    ) -> NoteList:
        """A page of a scope's notes, newest first, filtered by state, with the scope's counts by state (a
        scope nothing was stored in: as `recall` says)."""
        scope = check_scope(scope)
        if state not in ("current", "history", "all"):
            raise InvalidArgument("state", f"{state!r} is not a state filter: use 'current', 'history' or 'all'")
        browse.check_page(offset, limit)
        notes = [note for note, _ in self.tables.search.scope_notes(scope)]
        graph = self.graphs.get(scope)  # after the notes were read (graph.py)
        if not notes and not graph.events:
            self._unknown_scope(scope, named)
        folded = fold(notes, graph.all_events(), utc(as_of) or self.clock())
        return browse.list_notes(folded, scope, state, offset, limit, utc(as_of))

    def changes(self, since: datetime, scope: str = "default", limit: int = 50, named: bool = True) -> Changes:
        """What was corrected, revoked, reinstated, forgotten or confirmed in a scope after `since`, and
        the scope's settings made since (a subject declared or withdrawn, `check_every`), newest first,
        each note's with its chain's current notes (a scope nothing was stored in: as `recall` says)."""
        scope = check_scope(scope)
        browse.check_page(0, limit)
        since_utc = utc(since)
        assert since_utc is not None
        now = self.clock()
        graph = self.graphs.get(scope)
        if not graph.events and scope not in self.tables.search.scopes():
            self._unknown_scope(scope, named)
        listed = browse.changed_since(graph.all_events(), since_utc)
        mentioned: set[str] = set()
        for e in listed:
            if e.kind is not EventKind.FORGETS and not browse.is_setting(e):
                mentioned.add(e.dst if is_note_id(e.dst) or e.dst not in graph.events else graph.events[e.dst].dst)
                mentioned.update([e.src] if e.src else [])
        notes = self.tables.search.notes(mentioned)
        folded = self.lookup.load(scope, now, list(notes.values()))
        return browse.changes(folded, listed, scope, since_utc, limit)

    def _unknown_scope(self, scope: str, named: bool = True) -> bool:
        """Whether nothing was ever stored in `scope`. Reading such a scope that its caller `named`, while
        others exist, is most often a typo (of a scope, or of the store's path): UnknownScope, naming the
        nearest, never an empty answer that looks like a memory lost. A scope the caller derived itself
        (a session's project's) is never a typo: it is new, and the answer is empty."""
        counts = {c.scope: c.notes for c in self.scopes()}
        if scope in counts:
            return False
        if named and counts:
            raise UnknownScope(scope, counts)
        return True

    # -- moving a memory: transfer.py --------------------------------------------------------

    def export(self, scope: str | None = None, vectors: bool = False) -> Iterator[str]:
        """One scope (every scope, for None) as JSON Lines: notes and events with every stored field."""
        if scope is not None:
            scope = check_scope(scope)
            if scope not in self.tables.search.scopes():
                self._unknown_scope(scope)
        scopes = [scope] if scope is not None else sorted(self.tables.search.scopes())
        return transfer.export_lines(self.tables, scopes, self.embedder.name, self.clock(), vectors)
