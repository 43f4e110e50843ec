"""Recall's last stage, packing: the chains, best first, fitted into the token budget whole or in part,
what did not fit counted or listed, a history entry clipped to the passage that fits (recall.py's module
docstring, stage 5). `Costs` is the budget's price of each piece of a chain."""

from __future__ import annotations

from dataclasses import dataclass, field

from .excerpt import excerpt
from .recall_settings import RetrievalSettings
from .views import Chain, Clip, HistoryEntry, NoteView, Omitted, Prerequisite

# The least text a clipped history entry keeps: less than a clause cannot carry a value and what it
# is the value of, so a history entry with less room than this is left out (and counted) instead.
MIN_CLIP_TOKENS = 16


@dataclass
class Costs:
    settings: RetrievalSettings

    def note(self, note: NoteView) -> int:
        return self.settings.count_tokens(note.text) + self.settings.note_overhead

    def history(self, entry: HistoryEntry) -> int:
        # the note, plus its role, when and by what it was replaced, and why (and the clip's mark)
        mark = self.settings.clip_overhead if entry.clipped is not None else 0
        return (
            self.note(entry.note) + self.settings.count_tokens(entry.reason or "") + self.settings.note_overhead + mark
        )

    def clipped(self, entry: HistoryEntry, room: int, query: str) -> HistoryEntry | None:
        """The entry with its note's text cut to the passage that best matches `query` and fits `room`
        with everything else the entry costs; None when less than `MIN_CLIP_TOKENS` of text would."""
        count = self.settings.count_tokens
        whole = count(entry.note.text)
        text_room = room - (self.history(entry) - whole) - self.settings.clip_overhead
        if text_room < MIN_CLIP_TOKENS or text_room >= whole:
            return None
        text = excerpt(entry.note.text, query, text_room, count)
        if text is None:
            return None
        note = entry.note.model_copy(update={"text": text})
        return entry.model_copy(update={"note": note, "clipped": Clip(kept_tokens=count(text), whole_tokens=whole)})

    def required(self, chain: Chain) -> int:
        """A chain's least delivery: its heads, or for a chain with none, its newest history entry."""
        cost = self.settings.chain_overhead + sum(self.note(h) for h in chain.heads)
        if not chain.heads and chain.history:
            cost += self.history(chain.history[0])
        return cost


def _covered(chain: Chain, shown: set[str]) -> bool:
    notes = [h.id for h in chain.heads] + [p.id for p in chain.prerequisites]
    return bool(chain.heads) and not chain.history and all(n in shown for n in notes)


@dataclass
class _Placed:
    chain: Chain
    prerequisites: list[Prerequisite]
    history: list[HistoryEntry]
    tokens: int


@dataclass
class _Filling:
    """The budget as the chains fill it: where each chain placed so far stands (in chain order), the notes
    delivered so far and the tokens they use."""

    costs: Costs
    budget: int
    include_history: bool
    query: str
    placed: dict[str, _Placed] = field(default_factory=dict)
    shown: set[str] = field(default_factory=set)  # ids of the notes delivered so far
    used: int = 0

    def place(self, chain: Chain) -> Omitted | None:
        """The chain's heads (or, with none, its newest history entry), then its prerequisites nearest first,
        then its history newest first, while they fit; or, when its heads do not fit, what omits it."""
        cost = self.costs.required(chain)
        if self.used + cost > self.budget:
            assert chain.entry is not None
            whole = cost + sum(self.costs.note(p) for p in chain.prerequisites if p.id not in self.shown)
            return Omitted(chain_id=chain.chain_id, entry=chain.entry, tokens=whole, reason="budget")
        spot = self.placed[chain.chain_id] = _Placed(chain, [], chain.history[:1] if not chain.heads else [], cost)
        self.shown.update([h.id for h in chain.heads] + [h.note.id for h in spot.history])
        self.used += cost
        self._prerequisites(spot)
        if self.include_history:
            self._history(spot)
        return None

    def _prerequisites(self, spot: _Placed) -> None:
        for prereq in spot.chain.prerequisites:
            cost = self.costs.note(prereq)
            if prereq.id in self.shown or prereq.needed_by not in self.shown or self.used + cost > self.budget:
                continue  # shown elsewhere, or cut off: a farther one may still fit
            spot.prerequisites.append(prereq)
            spot.tokens += cost
            self.shown.add(prereq.id)
            self.used += cost

    def _history(self, spot: _Placed) -> None:
        for full in spot.chain.history[len(spot.history) :]:
            entry: HistoryEntry | None = full
            if self.used + self.costs.history(full) > self.budget:  # the passage that fits, or nothing
                entry = self.costs.clipped(full, self.budget - self.used, self.query)
            if entry is None:
                break  # newest first: what is left out is the oldest
            cost = self.costs.history(entry)
            spot.history.append(entry)
            spot.tokens += cost
            self.shown.add(entry.note.id)
            self.used += cost
            if entry.clipped is not None:
                break  # it took what was left


def pack(
    chains: list[Chain],
    budget: int,
    max_chains: int | None,
    include_history: bool,
    settings: RetrievalSettings,
    trimmed_ids: dict[str, list[str]],
    query: str,
) -> tuple[list[Chain], list[Omitted], int]:
    """Fill `budget` with chains (module docstring, stage 5); chains come best first. A history entry
    too long for what is left is clipped to the passage that best matches `query`."""
    costs = Costs(settings)
    omitted: list[Omitted] = []
    if max_chains is not None:
        for chain in chains[max_chains:]:
            assert chain.entry is not None
            omitted.append(
                Omitted(chain_id=chain.chain_id, entry=chain.entry, tokens=costs.required(chain), reason="max_chains")
            )
        chains = chains[:max_chains]

    filling = _Filling(costs, budget, include_history, query)
    # Chains best first. Each brings its heads (or is omitted and listed), then its prerequisites,
    # nearest first, then its history, newest first, while they fit.
    for chain in chains:
        if _covered(chain, filling.shown):
            continue  # delivered already, as prerequisites of a better chain, and it adds nothing
        left_out = filling.place(chain)
        if left_out is not None:
            omitted.append(left_out)

    delivered = [_delivered(spot, filling.shown, trimmed_ids) for spot in filling.placed.values()]  # in chain order
    return delivered, omitted, filling.used


def _delivered(spot: _Placed, shown: set[str], trimmed_ids: dict[str, list[str]]) -> Chain:
    """The chain as placed: what it brings itself, the prerequisites it shares with a chain delivered
    before it, and what was trimmed, counted (and listed in `trimmed_ids`)."""
    chain = spot.chain
    own = {p.id for p in spot.prerequisites}
    elsewhere = [p.id for p in chain.prerequisites if p.id not in own and p.id in shown]
    left_prereqs = [p.id for p in chain.prerequisites if p.id not in shown]
    left_history = [h.note.id for h in chain.history[len(spot.history) :]]
    trimmed_ids[chain.chain_id] = left_history + left_prereqs
    return chain.model_copy(
        update={
            "history": spot.history,
            "prerequisites": spot.prerequisites,
            "prerequisites_elsewhere": elsewhere,
            "trimmed_history": len(left_history),
            "trimmed_prerequisites": len(left_prereqs),
            "tokens": spot.tokens,
        }
    )
