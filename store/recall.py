"""Recall: the chains a query reaches in a scope, current state first, inside a token budget.

What `run` returns (its trace's `result`, a `RecallResult`) and guarantees:
- Chains, best first. Each chain is one claim: its current notes (`heads`, NOW) first; then the notes
  they need (`prerequisites`: `depends_on` targets as far as the edges go, each as it stands now,
  nearest first); then what the heads replaced or what was withdrawn (`history`, newest first), each
  entry marked as history: its role (superseded, revoked, expired, pending), what replaced or
  revoked it, when and why. A chain with no head (retracted or expired) leads with its newest
  history entry.
- A note comes back only inside its chain, and a chain only with all its heads: a stale note is
  never delivered without the note that replaced it, nor a revoked one without its revocation.
- `used_tokens` never exceeds `budget_tokens`. What did not fit is counted (`trimmed_history`,
  `trimmed_prerequisites`) or listed (`omitted`, with the reason: budget, max_chains, duplicate); a
  history entry that fit only in part is delivered clipped and says so (`clipped`).
- With `as_of`, the store as it was then: the fold replayed at that time, notes recorded later
  hidden. `run` keeps a trace of every stage, so `why_excluded` explains exactly what
  `recall_chains` did rather than a second opinion of it.

`run` takes `notes` that gives the notes the searches found by id (the caller has them kept, or
reads them in one go with the notes their chains reach), a `load` that folds the chains and prerequisites reachable from the entry notes (the caller's
lifecycle graph, see graph.py), and `vectors` that gives notes' stored embeddings by id (the heads'
that the searches did not return, for the near-duplicate pass): recall's searches find ids and
its notes come by id from what the caller kept or reads, never from a scan of the scope per call.

Stages:
1. Candidates: dense top-k and full-text top-k (`per_retriever` each) over the scope's notes of
   every state (dense ranked by cosine: exact, but for the vector index's estimate on a bucket;
   see `Hit`), fused by reciprocal rank (`RRF_K`); equal scores share a rank and ties
   go by id, so the order does not depend on the order the searches return hits in. A note is an
   entry if its cosine similarity reaches `min_similarity` (and the model could read both texts) or
   full-text search matched it; and, when the caller asks for `min_entries`, the best candidates by
   fused score up to that many are entries whatever their similarity (each search then looks at
   least that deep): on a long chat history a question may share few words and little meaning with
   the turns that answer it, and a caller who wants k entry points can ask for them.
2. Closure and order: each entry brings its whole chain, successors unconditionally. A chain scores
   its best entry's fused score plus `chain_evidence` times each further entry's (an old value and
   its correction that both match the query are two pieces of evidence that this claim is the one
   asked about), plus `chain_evidence` times the score of each reached chain it needs (stage 3: a
   conclusion and its premise that both match are two pieces of evidence for that reasoning, which
   a look-alike note matching as well as the conclusion alone is not). Chains go best first, except
   that a chain the query reached that needs a better chain's head moves up to just before it, so
   the two arrive as one reasoning chain (`lifted_by` names that head's entry).
3. Prerequisites, multi-hop: the heads bring their `depends_on` targets, those bring theirs, as
   far as the edges go, each once (a target that was replaced stands in as its current heads).
   Each carries a liveness that is the chain's score times `liveness_decay` per hop, so when a
   chain's core (heads + prerequisites) must be cut, the farthest goes first. The core keeps its
   chain's rank: a prerequisite never competes with other chains' heads.
4. Near-duplicates, across chains only: a chain is dropped when each of its heads says what a
   head of a better chain says (cosine ≥ `duplicate_similarity`, the same numbers) and it brings
   nothing else (no history, no prerequisite of its own). A correction, a revocation or a
   prerequisite can never be dropped here: they live inside chains, which are kept whole.
   Then unlinked conflicts (updates.py): when the current head of one chain is filed under the same
   subject as a newer current note of another chain, with another value, and no edge relates them,
   the older is marked `possibly_outdated_by` the newer once packed (both delivered, nothing stored).
   A mark is a suspicion: it annotates and never moves a chain.
5. Packing, greedy by chain order (after `max_chains`): each chain in turn brings its heads (or is
   omitted and listed), then its prerequisites nearest first, then its history newest first, while
   they fit; a chain already delivered whole as another's prerequisites is not repeated. The first
   history entry that does not fit whole comes clipped to what is left, if that holds at least
   `MIN_CLIP_TOKENS` of its text: the passage that best matches the query (excerpt.py), marked
   (`clipped`, with the tokens kept and the whole note's) and counted like any entry plus
   `CLIP_OVERHEAD` for its mark; the entries older than it are left out. Within a chain, history is
   trimmed (or clipped) before prerequisites and both before any head; prerequisites and heads are
   never clipped. The budget counts what an agent reads: each note's text (`count_tokens`) plus what
   its rendering adds (`NOTE_OVERHEAD`; a history entry also its reason and the overhead again) and
   `CHAIN_OVERHEAD` per chain.

Why these rules and not others (scoring, decay, packing order) was measured on the benchmarks:
docs/benchmarks.md, "The parameters chosen on these benchmarks".
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

import numpy as np

from . import updates
from .chains import build_chain
from .embedder import Embedder
from .errors import InvalidArgument
from .excerpt import excerpt
from .fold import Fold
from .model import Note
from .reader import ScopeReader
from .tables import Hit
from .tokens import estimate_tokens
from .views import Chain, Clip, Entry, HistoryEntry, NoteView, Omitted, Prerequisite, RecallResult

RRF_K = 60  # the usual reciprocal-rank-fusion constant (Cormack et al., 2009)
# What the text rendering adds, in the same estimate: a note's label, id, kind and date (a history
# entry has that twice over: what replaced it, and when), and a chain's header line. Checked
# against the real rendering by tests/test_tools.py.
NOTE_OVERHEAD = 18
CHAIN_OVERHEAD = 16
CLIP_OVERHEAD = 8  # a clipped history entry's mark, "[clipped: 120 of 480 tokens]"
# The least text a clipped history entry keeps: less than a clause cannot carry a value and what it
# is the value of, so a history entry with less room than this is left out (and counted) instead.
MIN_CLIP_TOKENS = 16
# The most entry points a caller can ask for (`min_entries`): each search reads that many notes and
# their chains are folded, so it bounds the work of one recall.
MAX_ENTRIES = 100


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
    vector: np.ndarray | None = None  # the stored embedding, where the searches read it along


@dataclass(frozen=True)
class RetrievalSettings:
    min_similarity: float = 0.25
    # the sweep that chose it: docs/benchmarks.md, "The parameters chosen on these benchmarks"
    per_retriever: int = 20  # candidates each retriever contributes
    # why prerequisites keep their chain's rank: docs/benchmarks.md, "The parameters chosen on these benchmarks"
    liveness_decay: float = 0.5  # share of a note's liveness its prerequisite inherits, per hop
    duplicate_similarity: float = 0.95  # heads this close (and with the same numbers) repeat each other
    # the sweep that chose it: docs/benchmarks.md, "The parameters chosen on these benchmarks"
    chain_evidence: float = 0.1  # share of its fused score each further entry adds to its chain's score
    # How budgets are counted: the text's tokens plus a fixed cost per rendered note and chain.
    # A benchmark with its own unit (e.g. whitespace words) passes its counter and zero overheads.
    count_tokens: Callable[[str], int] = estimate_tokens
    note_overhead: int = NOTE_OVERHEAD
    chain_overhead: int = CHAIN_OVERHEAD
    clip_overhead: int = CLIP_OVERHEAD


@dataclass(frozen=True)
class Duplicate:
    """A chain the near-duplicate pass dropped: its head `note_id` repeats `like` of chain `of_chain`."""

    of_chain: str
    note_id: str
    like: str
    similarity: float


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
    chains: list[Chain] = field(default_factory=list)  # every chain reached, best first, before packing
    duplicates: dict[str, Duplicate] = field(default_factory=dict)  # chain id → why it was dropped
    trimmed: dict[str, list[str]] = field(default_factory=dict)  # chain id → note ids left out
    result: RecallResult | None = None


_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="corrigenda-search")


def find_candidates(
    reader: ScopeReader,
    embedder: Embedder,
    query: str,
    as_of: datetime | None,
    settings: RetrievalSettings,
    vector: Callable[[], Sequence[float]] | None = None,
    min_entries: int = 0,
) -> tuple[dict[str, Candidate], bool]:
    """Dense and full-text hits in the reader's scope fused by reciprocal rank, best first; and whether
    dense applied. The first `min_entries` qualify whatever their similarity (module docstring, stage 1).

    The searches find ids; the reader reads the notes of both at once (or has them). `vector` gives the
    query's embedding when the dense search needs it (a remember's note is being embedded while its
    text is searched); without it the model embeds the query then."""
    reader.check_model(embedder.name)
    depth = max(settings.per_retriever, min_entries)
    # the full-text search runs while the query is embedded and searched by vector
    searching_text = _SEARCHES.submit(reader.text_search, query, as_of, depth)
    readable = embedder.readable(query)
    dense: list[Hit] = []
    if readable:
        embedded = vector() if vector is not None else embedder.embed([query])[0]
        dense = reader.vector_search(embedded, as_of, depth)
    text_hits = searching_text.result()
    found = reader.found(list(dict.fromkeys(h.id for h in [*text_hits, *dense])))
    candidates: dict[str, Candidate] = {}
    for rank, hit in _ranked([h for h in dense if h.id in found], lambda h: (h.score, h.id)):
        candidates[hit.id] = Candidate(found[hit.id], hit.score, rank, hit.dense_ok, vector=hit.vector)
    for rank, text_hit in _ranked([h for h in text_hits if h.id in found], lambda h: (h.score, h.id)):
        cand = candidates.setdefault(text_hit.id, Candidate(found[text_hit.id], vector=text_hit.vector))
        cand.text_score, cand.text_rank = text_hit.score, rank
    for cand in candidates.values():
        cand.score = sum(1.0 / (RRF_K + r) for r in (cand.dense_rank, cand.text_rank) if r is not None)
        dense_match = (
            readable
            and cand.dense_readable
            and cand.similarity is not None
            and cand.similarity >= settings.min_similarity
        )
        cand.qualified = dense_match or cand.text_rank is not None
    ordered = sorted(candidates.values(), key=lambda c: (-c.score, c.note.id))
    for cand in ordered[:min_entries]:
        cand.qualified = True
    return {c.note.id: c for c in ordered}, readable


H = TypeVar("H")


def _ranked(hits: Sequence[H], key: Callable[[H], tuple[float, str]]) -> list[tuple[int, H]]:
    """Hits best first with competition ranks (1, 2, 2, 4): equal scores share a rank.

    LanceDB returns equal scores (the same text stored twice) in no fixed order; without shared
    ranks the fused score, and so the recall, would change from one call to the next.
    """
    ordered = sorted(hits, key=lambda h: (-round(key(h)[0], 6), key(h)[1]))
    ranked: list[tuple[int, H]] = []
    for position, hit in enumerate(ordered, 1):
        tied = ranked and round(key(ranked[-1][1])[0], 6) == round(key(hit)[0], 6)
        ranked.append((ranked[-1][0] if tied else position, hit))
    return ranked


def run(
    reader: ScopeReader,
    embedder: Embedder,
    query: str,
    *,
    now: datetime,
    as_of: datetime | None = None,
    budget_tokens: int = 2000,
    max_chains: int | None = None,
    include_history: bool = True,
    settings: RetrievalSettings = RetrievalSettings(),
    min_entries: int = 0,
) -> Trace:
    if not 0 <= min_entries <= MAX_ENTRIES:
        raise InvalidArgument("min_entries", f"is {min_entries}; ask for 0 to {MAX_ENTRIES} entry points")
    at = as_of or now
    scope = reader.scope
    candidates, readable = find_candidates(reader, embedder, query, as_of, settings, min_entries=min_entries)
    entries = [c for c in candidates.values() if c.qualified]
    folded = reader.fold([c.note for c in entries], at)  # their chains and prerequisites, folded
    trace = Trace(query, scope, at, settings, readable, candidates, folded)

    best: dict[str, Candidate] = {}  # chain id → its best entry
    reached: dict[str, float] = {}  # chain id → its score: the best entry, plus the others weighted
    for cand in entries:  # best first
        if cand.note.id not in folded.notes:
            continue
        chain_id = folded.chain_id(cand.note.id)
        weight = settings.chain_evidence if chain_id in reached else 1.0
        reached[chain_id] = reached.get(chain_id, 0.0) + weight * cand.score
        best.setdefault(chain_id, cand)
    # the heads' stored embeddings, for the near-duplicate pass: those the searches read along, the
    # others kept or read by id, while the chains are built
    along = {i: c.vector for i, c in candidates.items() if c.vector is not None}
    heads = [h for c in best.values() for h in folded.chain(c.note.id).heads]
    reading = _SEARCHES.submit(reader.vectors, [i for i in heads if i not in along])
    built = []
    for chain_id, cand in best.items():
        entry = Entry(note_id=cand.note.id, score=cand.score, similarity=cand.similarity, chain_score=reached[chain_id])
        built.append(build_chain(folded, cand.note.id, entry, settings.liveness_decay))
    built = [_with_reasoning_evidence(c, folded, reached, best, settings) for c in built]
    trace.chains = dependents_first(sorted(built, key=lambda c: (-round(_score(c), 9), -_entry(c).score, c.chain_id)))
    head_vectors = {**reading.result(), **{i: along[i] for i in heads if i in along}}
    kept, trace.duplicates = drop_duplicates(trace.chains, head_vectors, settings.duplicate_similarity)
    outdated = updates.unlinked_conflicts(kept, folded.distinct)
    delivered, omitted, used = pack(kept, budget_tokens, max_chains, include_history, settings, trace.trimmed, query)
    delivered = updates.mark_outdated(delivered, outdated)
    omitted += [
        Omitted(
            chain_id=c.chain_id,
            entry=c.entry,
            tokens=_Costs(settings).required(c),
            reason="duplicate",
            duplicate_of=d.of_chain,
        )
        for c in trace.chains
        if c.entry is not None and (d := trace.duplicates.get(c.chain_id)) is not None
    ]
    trace.result = RecallResult(
        query=query, scope=scope, as_of=as_of, chains=delivered, used_tokens=used,
        budget_tokens=budget_tokens, omitted=omitted,
    )  # fmt: skip
    return trace


def _entry(chain: Chain) -> Entry:
    assert chain.entry is not None  # every chain recall reached has the note it was reached through
    return chain.entry


def _score(chain: Chain) -> float:
    return _entry(chain).chain_score


def _with_reasoning_evidence(
    chain: Chain, folded: Fold, reached: Mapping[str, float], best: Mapping[str, Candidate], settings: RetrievalSettings
) -> Chain:
    """The chain with `chain_evidence` times the score of each reached chain its heads need added to its own.

    A conclusion and the premise it stands on that both match the query are two pieces of evidence
    that this reasoning is the one asked about, as an old value and its correction are for a claim; a
    look-alike note that matches as well as the conclusion alone brings one. A chain that needs a
    better-ranked one is `lifted_by` that chain's entry: it now ranks above what it needs.
    """
    own = _score(chain)
    needed = [c for c in dict.fromkeys(folded.chain_id(p.id) for p in chain.prerequisites) if c in reached]
    needed = [c for c in needed if c != chain.chain_id]
    if not needed:
        return chain
    top = max(needed, key=lambda c: (reached[c], c))
    update: dict[str, object] = {"chain_score": own + settings.chain_evidence * sum(reached[c] for c in needed)}
    if reached[top] > own:
        update["lifted_by"] = best[top].note.id
    return chain.model_copy(update={"entry": _entry(chain).model_copy(update=update)})


def dependents_first(chains: Sequence[Chain]) -> list[Chain]:
    """Each chain preceded by the reached chains that need it: together they are one reasoning chain.

    A prerequisite can match the query better than the note that needs it (it names the entity
    the query asks about). Delivered on its own first, it would leave its dependant to fight for
    the rest of the budget; lifted to its rank, the dependant brings it along as a prerequisite.
    """
    head_of = {h.id: c.chain_id for c in chains for h in c.heads}
    needs = {c.chain_id: {head_of[p.id] for p in c.prerequisites if p.id in head_of} for c in chains}
    needed_by: dict[str, list[int]] = defaultdict(list)  # chain id → positions of the chains that need it
    for position, chain in enumerate(chains):
        for needed in needs[chain.chain_id]:
            needed_by[needed].append(position)
    ordered: list[Chain] = []
    taken: set[str] = set()
    for position, chain in enumerate(chains):
        if chain.chain_id in taken:
            continue
        waiting = [chains[p] for p in needed_by[chain.chain_id] if p > position and chains[p].chain_id not in taken]
        while waiting:  # the most dependent first: nothing still waiting needs it
            free = [c for c in waiting if not any(c.chain_id in needs[o.chain_id] for o in waiting if o is not c)]
            first = (free or waiting)[0]  # `or`: notes that depend on each other in a cycle
            waiting.remove(first)
            assert first.entry is not None and chain.entry is not None
            ordered.append(
                first.model_copy(update={"entry": first.entry.model_copy(update={"lifted_by": chain.entry.note_id})})
            )
            taken.add(first.chain_id)
        ordered.append(chain)
        taken.add(chain.chain_id)
    return ordered


_NUMBER = re.compile(r"\w*\d\w*")


def drop_duplicates(
    chains: Sequence[Chain], vectors: Mapping[str, np.ndarray], threshold: float
) -> tuple[list[Chain], dict[str, Duplicate]]:
    """Drop each chain that only repeats a better one (see the module docstring, stage 4)."""
    heads = _Heads(vectors, [h.id for c in chains for h in c.heads], threshold)
    kept: list[Chain] = []
    holding: dict[str, list[int]] = defaultdict(list)  # head id → positions in `kept` of the chains it heads
    dropped: dict[str, Duplicate] = {}
    for chain in chains:
        repeat = None
        if chain.heads and not chain.history:
            # a chain it repeats has a head close to its first head: only those are compared in full
            near = sorted({i for other in heads.close(chain.heads[0].id) for i in holding.get(other, ())})
            repeat = next((d for i in near if (d := _repeats(chain, kept[i], heads, threshold))), None)
        if repeat is None:
            for head in chain.heads:
                holding[head.id].append(len(kept))
            kept.append(chain)
        else:
            dropped[chain.chain_id] = repeat
    return kept, dropped


class _Heads:
    """The cosines between the heads compared, in one product, and their numbers, each worked out once."""

    def __init__(self, vectors: Mapping[str, np.ndarray], ids: Sequence[str], threshold: float) -> None:
        comparable = [i for i in dict.fromkeys(ids) if i in vectors]
        self._index = {note_id: row for row, note_id in enumerate(comparable)}
        self._ids = comparable
        rows = [np.asarray(vectors[i], dtype=np.float64) for i in comparable]
        units = np.stack(rows) if rows else np.zeros((0, 1))
        norms = np.linalg.norm(units, axis=1, keepdims=True)
        units = np.divide(units, norms, out=np.zeros_like(units), where=norms > 0)
        self._cosines = units @ units.T
        self._close = self._cosines >= threshold
        self._numbers: dict[str, set[str]] = {}

    def comparable(self, note: NoteView) -> bool:
        return note.id in self._index

    def close(self, note_id: str) -> list[str]:
        """The other heads at least `threshold` alike to this one."""
        row = self._index.get(note_id)
        if row is None:
            return []
        return [self._ids[j] for j in np.flatnonzero(self._close[row]) if j != row]

    def numbers(self, note: NoteView) -> set[str]:
        if note.id not in self._numbers:
            self._numbers[note.id] = set(_NUMBER.findall(note.text))
        return self._numbers[note.id]

    def cosine(self, a: str, b: str) -> float:
        return float(self._cosines[self._index[a], self._index[b]])


def _repeats(chain: Chain, better: Chain, heads: _Heads, threshold: float) -> Duplicate | None:
    core = {h.id for h in better.heads} | {p.id for p in better.prerequisites}
    if any(p.id not in core for p in chain.prerequisites) or any(h.id in core for h in chain.heads):
        return None  # it brings something of its own, or it is part of the better chain's reasoning
    weakest: Duplicate | None = None
    for head in chain.heads:
        match = None
        for other in better.heads:
            if not heads.comparable(head) or not heads.comparable(other):
                continue
            if heads.numbers(head) != heads.numbers(other):
                continue  # "listens on 8080" and "listens on 9090" disagree; they do not repeat
            similarity = heads.cosine(head.id, other.id)
            if similarity >= threshold and (match is None or similarity > match.similarity):
                match = Duplicate(better.chain_id, head.id, other.id, similarity)
        if match is None:
            return None
        if weakest is None or match.similarity < weakest.similarity:
            weakest = match
    return weakest


@dataclass
class _Costs:
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
    costs = _Costs(settings)
    omitted: list[Omitted] = []
    if max_chains is not None:
        for chain in chains[max_chains:]:
            assert chain.entry is not None
            omitted.append(
                Omitted(chain_id=chain.chain_id, entry=chain.entry, tokens=costs.required(chain), reason="max_chains")
            )
        chains = chains[:max_chains]

    placed: dict[str, _Placed] = {}
    shown: set[str] = set()  # ids of the notes delivered so far
    used = 0

    # Chains best first. Each brings its heads (or is omitted and listed), then its prerequisites,
    # nearest first, then its history, newest first, while they fit.
    for chain in chains:
        if _covered(chain, shown):
            continue  # delivered already, as prerequisites of a better chain, and it adds nothing
        cost = costs.required(chain)
        if used + cost > budget:
            assert chain.entry is not None
            whole = cost + sum(costs.note(p) for p in chain.prerequisites if p.id not in shown)
            omitted.append(Omitted(chain_id=chain.chain_id, entry=chain.entry, tokens=whole, reason="budget"))
            continue
        spot = placed[chain.chain_id] = _Placed(chain, [], chain.history[:1] if not chain.heads else [], cost)
        shown.update([h.id for h in chain.heads] + [h.note.id for h in spot.history])
        used += cost
        for prereq in chain.prerequisites:
            cost = costs.note(prereq)
            if prereq.id in shown or prereq.needed_by not in shown or used + cost > budget:
                continue  # shown elsewhere, or cut off: a farther one may still fit
            spot.prerequisites.append(prereq)
            spot.tokens += cost
            shown.add(prereq.id)
            used += cost
        for full in chain.history[len(spot.history) :] if include_history else ():
            entry: HistoryEntry | None = full
            if used + costs.history(full) > budget:  # the passage that fits, or nothing
                entry = costs.clipped(full, budget - used, query)
            if entry is None:
                break  # newest first: what is left out is the oldest
            cost = costs.history(entry)
            spot.history.append(entry)
            spot.tokens += cost
            shown.add(entry.note.id)
            used += cost
            if entry.clipped is not None:
                break  # it took what was left

    delivered = []
    for spot in placed.values():  # in chain order
        chain = spot.chain
        own = {p.id for p in spot.prerequisites}
        elsewhere = [p.id for p in chain.prerequisites if p.id not in own and p.id in shown]
        left_prereqs = [p.id for p in chain.prerequisites if p.id not in shown]
        left_history = [h.note.id for h in chain.history[len(spot.history) :]]
        trimmed_ids[chain.chain_id] = left_history + left_prereqs
        delivered.append(
            chain.model_copy(
                update={
                    "history": spot.history,
                    "prerequisites": spot.prerequisites,
                    "prerequisites_elsewhere": elsewhere,
                    "trimmed_history": len(left_history),
                    "trimmed_prerequisites": len(left_prereqs),
                    "tokens": spot.tokens,
                }
            )
        )
    return delivered, omitted, used
