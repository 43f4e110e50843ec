"""The recall pipeline: entry points → chains (closure) → prerequisites → packing.

One function runs it and keeps a trace of every stage, so `why_excluded` explains exactly what
`recall_chains` did rather than a second opinion of it.

Stages (DESIGN.md, "Recall contract"):
1. Entry points: dense top-k and full-text top-k over notes of every state in scope, fused by
   reciprocal rank. A note qualifies as an entry if its cosine similarity reaches
   `min_similarity` (and the model could read both texts) or full-text search matched it.
2. Closure: each entry brings its whole chain, successors unconditionally.
3. Prerequisites: each head brings its `depends_on` targets (a superseded target is replaced by
   its chain's heads).
4. Chains are ordered by their best entry.
5. Packing: whole chains, greedily, into the budget: heads first (a chain whose heads do not fit
   is omitted and listed), then prerequisites, then history newest first (so history is trimmed
   oldest first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .embedder import Embedder
from .fold import Fold, fold, reachable
from .model import EventKind, Note, NoteState
from .tables import Tables
from .tokens import estimate_tokens
from .views import Chain, Entry, HistoryEntry, NoteView, Omitted, RecallResult

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al., 2009)
NOTE_OVERHEAD = 12  # tokens for a note's id, state and date as rendered
CHAIN_OVERHEAD = 8  # tokens for a chain's header line


@dataclass
class Candidate:
    note: Note
    similarity: float | None = None
    dense_rank: int | None = None
    dense_readable: bool = True
    text_score: float | None = None
    text_rank: int | None = None
    score: float = 0.0
    qualified: bool = False


@dataclass(frozen=True)
class RetrievalSettings:
    min_similarity: float = 0.25
    per_retriever: int = 40  # candidates each retriever contributes


@dataclass
class Trace:
    """Everything one run decided, stage by stage."""

    query: str
    scope: str
    at: datetime
    settings: RetrievalSettings
    query_readable: bool
    candidates: dict[str, Candidate]
    fold: Fold
    chain_entries: dict[str, Candidate] = field(default_factory=dict)  # chain id → best entry
    trimmed: dict[str, list[str]] = field(default_factory=dict)  # chain id → note ids left out
    result: RecallResult | None = None


def note_view(note: Note, folded: Fold) -> NoteView:
    status = folded.status[note.id]
    refines = [e.dst for e in folded.events if e.kind is EventKind.REFINES and e.src == note.id]
    return NoteView(
        **note.model_dump(),
        state=status.state,
        reinstated_by=status.reinstated_by.id if status.reinstated_by else None,
        refines=refines,
    )


def find_candidates(
    tables: Tables,
    embedder: Embedder,
    query: str,
    scope: str,
    as_of: datetime | None,
    settings: RetrievalSettings,
    vector: Sequence[float] | None = None,
) -> tuple[dict[str, Candidate], bool]:
    """Dense and full-text hits fused by reciprocal rank, best first; and whether dense applied."""
    tables.check_model(embedder.name)
    readable = embedder.readable(query)
    found: dict[str, Candidate] = {}
    if readable:
        if vector is None:
            vector = embedder.embed([query])[0]
        for rank, hit in enumerate(tables.vector_search(vector, scope, as_of, settings.per_retriever), 1):
            found[hit.note.id] = Candidate(hit.note, hit.similarity, rank, hit.dense_ok)
    for rank, text_hit in enumerate(tables.text_search(query, scope, as_of, settings.per_retriever), 1):
        cand = found.setdefault(text_hit.note.id, Candidate(text_hit.note))
        cand.text_score, cand.text_rank = text_hit.score, rank
    for cand in found.values():
        cand.score = sum(1.0 / (RRF_K + r) for r in (cand.dense_rank, cand.text_rank) if r is not None)
        dense_match = (
            readable
            and cand.dense_readable
            and cand.similarity is not None
            and cand.similarity >= settings.min_similarity
        )
        cand.qualified = dense_match or cand.text_rank is not None
    ordered = sorted(found.values(), key=lambda c: (-c.score, c.note.id))
    return {c.note.id: c for c in ordered}, readable


def run(
    tables: Tables,
    embedder: Embedder,
    query: str,
    scope: str,
    *,
    now: datetime,
    as_of: datetime | None = None,
    budget_tokens: int = 2000,
    max_chains: int | None = None,
    include_history: bool = True,
    settings: RetrievalSettings = RetrievalSettings(),
) -> Trace:
    at = as_of or now
    candidates, readable = find_candidates(tables, embedder, query, scope, as_of, settings)
    events = tables.events(scope, at)
    entries = [c for c in candidates.values() if c.qualified]
    needed = reachable(events, [c.note.id for c in entries])
    notes = tables.notes(needed - candidates.keys())
    notes.update({i: c.note for i, c in candidates.items()})
    folded = fold(notes.values(), events, at)
    trace = Trace(query, scope, at, settings, readable, candidates, folded)

    chains: list[Chain] = []
    for cand in entries:  # best first
        if cand.note.id not in folded.notes:
            continue
        chain_id = folded.chain(cand.note.id).id
        if chain_id in trace.chain_entries:
            continue
        trace.chain_entries[chain_id] = cand
        chains.append(
            build_chain(folded, cand.note.id, Entry(note_id=cand.note.id, score=cand.score, similarity=cand.similarity))
        )

    delivered, omitted, used = pack(chains, budget_tokens, max_chains, include_history, trace.trimmed)
    trace.result = RecallResult(
        query=query, scope=scope, as_of=as_of, chains=delivered, used_tokens=used,
        budget_tokens=budget_tokens, omitted=omitted,
    )  # fmt: skip
    return trace


def build_chain(folded: Fold, note_id: str, entry: Entry | None = None) -> Chain:
    """The whole chain of `note_id`: heads, history newest first, prerequisites of the heads."""
    shape = folded.chain(note_id)
    notes = folded.notes
    history = []
    for member in shape.members:
        status = folded.status[member]
        if status.state is NoteState.ACTIVE:
            continue
        event = status.event
        history.append(
            HistoryEntry(
                note=note_view(notes[member], folded),
                role=status.state,
                by=status.by,
                at=status.at,
                reason=event.reason if event else None,
                event_id=event.id if event else None,
            )
        )
    history.sort(key=lambda h: (h.at or h.note.recorded_at, h.note.id), reverse=True)

    prerequisites: list[NoteView] = []
    seen = set(shape.members)
    for head in shape.heads:
        for target in folded.depends_on(head):
            for resolved in _current_of(folded, target):
                if resolved not in seen:
                    seen.add(resolved)
                    prerequisites.append(note_view(notes[resolved], folded))
    return Chain(
        chain_id=shape.id,
        status=shape.status,
        heads=[note_view(notes[h], folded) for h in shape.heads],
        history=history,
        prerequisites=prerequisites,
        entry=entry,
    )


def _current_of(folded: Fold, note_id: str) -> list[str]:
    """A prerequisite as it stands now: itself if active, else what replaced it."""
    if note_id not in folded.notes:
        return []
    if folded.state(note_id) is NoteState.ACTIVE:
        return [note_id]
    heads = folded.chain(note_id).heads
    return list(heads) if heads else [note_id]


def note_tokens(note: NoteView) -> int:
    return estimate_tokens(note.text) + NOTE_OVERHEAD


def history_tokens(entry: HistoryEntry) -> int:
    return note_tokens(entry.note) + estimate_tokens(entry.reason or "") + NOTE_OVERHEAD


def pack(
    chains: list[Chain],
    budget: int,
    max_chains: int | None,
    include_history: bool,
    trimmed_ids: dict[str, list[str]],
) -> tuple[list[Chain], list[Omitted], int]:
    """Greedy by entry relevance; within a chain: heads, then prerequisites, then newest history."""
    delivered: list[Chain] = []
    omitted: list[Omitted] = []
    used = 0
    for chain in chains:
        assert chain.entry is not None
        # A chain with no head (all retracted or expired) is told by its newest history entry.
        required = CHAIN_OVERHEAD + sum(note_tokens(h) for h in chain.heads)
        if not chain.heads and chain.history:
            required += history_tokens(chain.history[0])
        if max_chains is not None and len(delivered) >= max_chains:
            omitted.append(Omitted(chain_id=chain.chain_id, entry=chain.entry, tokens=required, reason="max_chains"))
            continue
        if used + required > budget:
            omitted.append(Omitted(chain_id=chain.chain_id, entry=chain.entry, tokens=required, reason="budget"))
            continue
        cost = required
        history = chain.history[:1] if not chain.heads else []
        optional_history = chain.history[len(history) :] if include_history else []

        prerequisites: list[NoteView] = []
        for prereq in chain.prerequisites:
            if used + cost + note_tokens(prereq) > budget:
                break
            cost += note_tokens(prereq)
            prerequisites.append(prereq)
        for entry in optional_history:
            if used + cost + history_tokens(entry) > budget:
                break
            cost += history_tokens(entry)
            history.append(entry)

        dropped = [h.note.id for h in optional_history[len(history) - (0 if chain.heads else 1) :]]
        dropped_history = len(dropped)
        if chain.prerequisites[len(prerequisites) :]:
            dropped += [p.id for p in chain.prerequisites[len(prerequisites) :]]
        trimmed_ids[chain.chain_id] = dropped
        used += cost
        delivered.append(
            chain.model_copy(
                update={
                    "history": history,
                    "prerequisites": prerequisites,
                    "trimmed_history": dropped_history,
                    "trimmed_prerequisites": len(chain.prerequisites) - len(prerequisites),
                    "tokens": cost,
                }
            )
        )
    return delivered, omitted, used
