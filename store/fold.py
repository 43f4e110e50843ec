"""The lifecycle fold: notes and events up to a time → each note's state → chains.

Pure: no storage, no clock. `at` is a parameter, so the same function answers "now" and "as of".

Rules (DESIGN.md, "Data model"):
- An event is *in force* unless a later `reinstates` retracts it: one that names the event, or
  one that names the note the event excluded (which retracts every earlier exclusion of it).
- A `supersedes` that would close a cycle of in-force supersessions is a *conflict*: it is not in
  force. Edges are taken in recording order (time, then id), so whichever of two racing writers'
  edges comes last is the one set aside, the same for every reader, whatever order the appends
  landed in. (The write path refuses a cycle it can see; only concurrent writers make one.)
- A note is `revoked` while an in-force `revokes` names it; else `superseded` while an in-force
  `supersedes` names it from a note that is not itself revoked (so revoking a correction brings
  back what it replaced); else `expired` / `pending` outside its validity window; else `active`.
- A note named by a `forgets` tombstone does not exist, at any time: the tombstone is the commit
  point of `forget`, whose physical erasure follows it.
- A chain is a connected component over supersedes, revokes, reinstates and refines, whether in
  force or not (history stays in the chain). Its heads are its active members.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .ids import is_note_id
from .model import ChainStatus, Event, EventKind, Note, NoteState

_EXCLUDING = (EventKind.SUPERSEDES, EventKind.REVOKES)
CHECK_DAYS = "days:"  # a CHECK_EVERY event's dst: "days:30"
_CHAIN_EDGES = (EventKind.SUPERSEDES, EventKind.REVOKES, EventKind.REINSTATES, EventKind.REFINES)


@dataclass(frozen=True)
class NoteStatus:
    state: NoteState
    event: Event | None = None  # the event that put the note in this state, if any
    by: str | None = None  # the superseding note (superseded) or revoking event (revoked)
    at: datetime | None = None  # when it entered this state
    reinstated_by: Event | None = None  # set when an active note was brought back


@dataclass(frozen=True)
class ChainFold:
    id: str  # its earliest member: stable as the chain grows
    members: tuple[str, ...]  # oldest first
    heads: tuple[str, ...]  # newest first
    status: ChainStatus


@dataclass
class Fold:
    at: datetime
    notes: dict[str, Note]
    events: list[Event]  # visible at `at`, in order
    status: dict[str, NoteStatus]
    retracted_by: dict[str, Event]  # event id → the reinstates event that retracted it
    conflicts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # set-aside supersedes → the cycle it closes
    checked: dict[str, Event] = field(default_factory=dict)  # note id → its latest `confirms`
    check_every: timedelta | None = None  # the scope's setting at `at` (CHECK_EVERY), if one is set
    _component: dict[str, str] = field(default_factory=dict)
    _members: dict[str, list[str]] = field(default_factory=dict)
    _refines: dict[str, set[str]] = field(default_factory=dict)  # refines edges, both ways
    _distinct: dict[str, set[str]] = field(default_factory=dict)  # distinct edges, both ways
    _out: dict[tuple[EventKind, str], list[str]] = field(default_factory=dict)  # (kind, src) → dsts, oldest first

    def in_force(self, event: Event) -> bool:
        return event.id not in self.retracted_by and event.id not in self.conflicts

    def supersedes_path(self, start: str, goal: str) -> bool:
        """Whether `start` already (transitively) supersedes `goal` through in-force edges."""
        return _path(_forward(e for e in self.events if self.in_force(e)), start, goal) is not None

    def state(self, note_id: str) -> NoteState:
        return self.status[note_id].state

    def unchecked_since(self, note_id: str) -> datetime | None:
        """When a current note was last written or confirmed, if that is longer ago than the scope's
        `check_every` allows: it is marked, never hidden and never moved."""
        if self.check_every is None or self.status[note_id].state is not NoteState.ACTIVE:
            return None
        confirmed = self.checked.get(note_id)
        last = confirmed.recorded_at if confirmed is not None else self.notes[note_id].recorded_at
        return last if self.at - last > self.check_every else None

    def chain_id(self, note_id: str) -> str:
        """The id of a note's chain (`chain(note_id).id`, without working out its heads)."""
        return self._members.get(self._component.get(note_id, note_id), [note_id])[0]

    def chain(self, note_id: str) -> ChainFold:
        root = self._component.get(note_id, note_id)
        members = self._members.get(root, [note_id])
        heads = sorted(
            (m for m in members if self.status[m].state is NoteState.ACTIVE),
            key=lambda m: (self.notes[m].recorded_at, m),
            reverse=True,
        )
        return ChainFold(members[0], tuple(members), tuple(heads), self._chain_status(members, heads))

    def depends_on(self, note_id: str) -> list[str]:
        """Direct prerequisites of a note, oldest link first."""
        return self._out.get((EventKind.DEPENDS_ON, note_id), [])

    def refines(self, note_id: str) -> list[str]:
        """The notes a note refines, oldest link first."""
        return self._out.get((EventKind.REFINES, note_id), [])

    def distinct(self, note_id: str) -> set[str]:
        """The notes said to state other facts than this one (`distinct`, either way)."""
        return self._distinct.get(note_id, set())

    def events_of(self, note_ids: Iterable[str]) -> list[Event]:
        """Every visible event that touches these notes, or retracts an event that does."""
        ids = set(note_ids)
        touching = {e.id for e in self.events if e.dst in ids or e.src in ids}
        return [e for e in self.events if e.id in touching or e.dst in touching]

    def _chain_status(self, members: list[str], heads: list[str]) -> ChainStatus:
        if not heads:
            windowed = any(self.status[m].state in (NoteState.EXPIRED, NoteState.PENDING) for m in members)
            return ChainStatus.EXPIRED if windowed else ChainStatus.RETRACTED
        if len(heads) == 1 or _refine_connected(heads, self._refines):
            return ChainStatus.CURRENT
        return ChainStatus.CONTESTED


def fold(notes: Iterable[Note], events: Iterable[Event], at: datetime) -> Fold:
    """Replay `events` over `notes` as the store knew them at `at`."""
    events = list(events)
    forgotten = {e.dst for e in events if e.kind is EventKind.FORGETS}  # at any time: erased from the past too
    visible = {
        n.id: n
        for n in sorted(notes, key=lambda n: (n.recorded_at, n.id))
        if n.recorded_at <= at and n.id not in forgotten
    }
    ordered = _visible_events(events, visible, at)

    retracted_by: dict[str, Event] = {}
    live_exclusions: dict[str, list[Event]] = defaultdict(list)  # note id → in-force excluding events
    by_id = {e.id: e for e in ordered}
    for event in ordered:
        if event.kind in _EXCLUDING:
            live_exclusions[event.dst].append(event)
        elif event.kind is EventKind.REINSTATES:
            targets = live_exclusions.pop(event.dst, []) if is_note_id(event.dst) else [by_id[event.dst]]
            for target in targets:
                retracted_by.setdefault(target.id, event)
            if not is_note_id(event.dst) and by_id[event.dst].dst in live_exclusions:
                live_exclusions[by_id[event.dst].dst] = [
                    e for e in live_exclusions[by_id[event.dst].dst] if e.id != event.dst
                ]

    in_force = [e for e in ordered if e.id not in retracted_by]
    conflicts = _cycle_conflicts(in_force)
    in_force = [e for e in in_force if e.id not in conflicts]
    revoked = {e.dst: e for e in in_force if e.kind is EventKind.REVOKES}  # later overwrite earlier
    superseded: dict[str, Event] = {}
    for e in in_force:
        if e.kind is EventKind.SUPERSEDES and e.src not in revoked:
            superseded[e.dst] = e
    reinstated: dict[str, Event] = {}
    for excluded_id, reinstating in retracted_by.items():
        reinstated_note = by_id[excluded_id].dst
        current = reinstated.get(reinstated_note)
        if current is None or (reinstating.recorded_at, reinstating.id) > (current.recorded_at, current.id):
            reinstated[reinstated_note] = reinstating

    status: dict[str, NoteStatus] = {}
    for note_id, note in visible.items():
        if note_id in revoked:
            e = revoked[note_id]
            status[note_id] = NoteStatus(NoteState.REVOKED, e, e.id, e.recorded_at)
        elif note_id in superseded:
            e = superseded[note_id]
            status[note_id] = NoteStatus(NoteState.SUPERSEDED, e, e.src, e.recorded_at)
        elif note.valid_until is not None and note.valid_until <= at:
            status[note_id] = NoteStatus(NoteState.EXPIRED, at=note.valid_until)
        elif note.valid_from is not None and note.valid_from > at:
            status[note_id] = NoteStatus(NoteState.PENDING, at=note.valid_from)
        else:
            status[note_id] = NoteStatus(NoteState.ACTIVE, reinstated_by=reinstated.get(note_id))

    checked = {e.dst: e for e in ordered if e.kind is EventKind.CONFIRMS}  # in recording order: the latest
    result = Fold(at, visible, ordered, status, retracted_by, conflicts, checked, _check_every(events, at))
    _link_chains(result, by_id)
    return result


def check_days(event: Event) -> int | None:
    """The days a CHECK_EVERY event sets (0: no limit); None if what follows `days:` is not a number."""
    value = event.dst.removeprefix(CHECK_DAYS)
    return int(value) if value.isdigit() else None


def _check_every(events: Iterable[Event], at: datetime) -> timedelta | None:
    """The scope's CHECK_EVERY setting as recorded by `at`: the latest one's days (None: no setting, or 0)."""
    settings = [
        e for e in events if e.kind is EventKind.CHECK_EVERY and e.recorded_at <= at and check_days(e) is not None
    ]
    if not settings:
        return None
    days = check_days(max(settings, key=lambda e: (e.recorded_at, e.id))) or 0
    return timedelta(days=min(days, 36_500)) if days > 0 else None


def _visible_events(events: Iterable[Event], notes: Mapping[str, Note], at: datetime) -> list[Event]:
    """Events recorded by `at` whose endpoints exist then, once each, in recording order."""
    seen: dict[str, Event] = {}
    for event in sorted(events, key=lambda e: (e.recorded_at, e.id)):
        if event.recorded_at > at or event.id in seen:
            continue
        if event.src is not None and event.src not in notes:
            continue
        if is_note_id(event.dst):
            if event.dst not in notes:
                continue
        elif (
            event.kind is not EventKind.REINSTATES
            or seen.get(event.dst) is None
            or seen[event.dst].kind not in _EXCLUDING
        ):
            continue
        seen[event.id] = event
    return list(seen.values())


def _link_chains(result: Fold, by_id: Mapping[str, Event]) -> None:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for e in result.events:
        if e.src is not None and e.kind in (EventKind.DEPENDS_ON, EventKind.REFINES):
            result._out.setdefault((e.kind, e.src), []).append(e.dst)
        if e.src is not None and e.kind is EventKind.DISTINCT:
            result._distinct.setdefault(e.src, set()).add(e.dst)
            result._distinct.setdefault(e.dst, set()).add(e.src)
        if e.kind not in _CHAIN_EDGES:
            continue
        if e.kind is EventKind.REFINES and e.src is not None:
            result._refines.setdefault(e.src, set()).add(e.dst)
            result._refines.setdefault(e.dst, set()).add(e.src)
        dst_note = e.dst if is_note_id(e.dst) else by_id[e.dst].dst
        if e.src is not None:
            union(e.src, dst_note)
        else:
            find(dst_note)

    members: dict[str, list[str]] = defaultdict(list)
    for note_id in result.notes:  # already in recording order
        if note_id in parent:
            root = find(note_id)
            result._component[note_id] = root
            members[root].append(note_id)
    result._members = dict(members)


def _refine_connected(heads: list[str], refines: Mapping[str, set[str]]) -> bool:
    wanted = set(heads)
    seen = {heads[0]}
    frontier = [heads[0]]
    while frontier:
        for nxt in refines.get(frontier.pop(), ()):
            if nxt in wanted and nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen == wanted


def _cycle_conflicts(in_force: Iterable[Event]) -> dict[str, tuple[str, ...]]:
    """Supersedes edges, in recording order, that would close a cycle with those accepted before them."""
    accepted: dict[str, list[Event]] = defaultdict(list)
    conflicts: dict[str, tuple[str, ...]] = {}
    for e in in_force:
        if e.kind is not EventKind.SUPERSEDES or e.src is None:
            continue
        cycle = _path(accepted, e.dst, e.src)
        if cycle is not None:
            conflicts[e.id] = cycle
        else:
            accepted[e.src].append(e)
    return conflicts


def _forward(events: Iterable[Event]) -> dict[str, list[Event]]:
    forward: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.kind is EventKind.SUPERSEDES and e.src is not None:
            forward[e.src].append(e)
    return forward


def _path(forward: Mapping[str, list[Event]], start: str, goal: str) -> tuple[str, ...] | None:
    """The ids of the supersedes events leading from `start` to `goal`, if there is such a path."""
    came_by: dict[str, tuple[str, ...]] = {start: ()}
    frontier = [start]
    while frontier:
        node = frontier.pop()
        for e in forward.get(node, ()):
            if e.dst in came_by:
                continue
            came_by[e.dst] = (*came_by[node], e.id)
            if e.dst == goal:
                return came_by[e.dst]
            frontier.append(e.dst)
    return None
