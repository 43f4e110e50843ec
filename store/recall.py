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

`run` is here, with its `Trace`; each stage is a module of its own: recall_candidates.py (1),
recall_order.py (2 and 3; chains.py builds each chain), recall_duplicates.py (4; the unlinked conflicts
are updates.py's) and recall_packing.py (5), their settings and the budget's unit costs in
recall_settings.py. Their names are importable from here too.

Why these rules and not others (scoring, decay, packing order) was measured on the benchmarks:
docs/benchmarks.md, "The parameters chosen on these benchmarks".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from . import updates
from .embedder import Embedder
from .errors import InvalidArgument
from .fold import Fold
from .reader import ScopeReader
from .recall_candidates import RRF_K, SEARCHES, Candidate, find_candidates
from .recall_duplicates import Duplicate, drop_duplicates
from .recall_order import chain_scores, dependents_first, ordered_chains
from .recall_packing import MIN_CLIP_TOKENS, Costs, pack
from .recall_settings import CHAIN_OVERHEAD, CLIP_OVERHEAD, NOTE_OVERHEAD, RetrievalSettings
from .views import Chain, Omitted, RecallResult

__all__ = [
    "CHAIN_OVERHEAD",
    "CLIP_OVERHEAD",
    "MAX_ENTRIES",
    "MIN_CLIP_TOKENS",
    "NOTE_OVERHEAD",
    "RRF_K",
    "Candidate",
    "Duplicate",
    "RetrievalSettings",
    "Trace",
    "dependents_first",
    "drop_duplicates",
    "find_candidates",
    "pack",
    "run",
]

# The most entry points a caller can ask for (`min_entries`): each search reads that many notes and
# their chains are folded, so it bounds the work of one recall.
MAX_ENTRIES = 100


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
    settings: RetrievalSettings = RetrievalSettings(),  # noqa: B008 - frozen: one shared default, never changed
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

    best, reached = chain_scores(entries, folded, settings)
    # the heads' stored embeddings, for the near-duplicate pass: those the searches read along, the
    # others kept or read by id, while the chains are built
    along = {i: c.vector for i, c in candidates.items() if c.vector is not None}
    heads = [h for c in best.values() for h in folded.chain(c.note.id).heads]
    reading = SEARCHES.submit(reader.vectors, [i for i in heads if i not in along])
    trace.chains = ordered_chains(folded, best, reached, settings)
    head_vectors = {**reading.result(), **{i: along[i] for i in heads if i in along}}
    kept, trace.duplicates = drop_duplicates(trace.chains, head_vectors, settings.duplicate_similarity)
    outdated = updates.unlinked_conflicts(kept, folded.distinct)
    delivered, omitted, used = pack(kept, budget_tokens, max_chains, include_history, settings, trace.trimmed, query)
    delivered = updates.mark_outdated(delivered, outdated)
    omitted += _omitted_duplicates(trace.chains, trace.duplicates, settings)
    trace.result = RecallResult(
        query=query, scope=scope, as_of=as_of, chains=delivered, used_tokens=used,
        budget_tokens=budget_tokens, omitted=omitted,
    )  # fmt: skip
    return trace


def _omitted_duplicates(
    chains: list[Chain], duplicates: dict[str, Duplicate], settings: RetrievalSettings
) -> list[Omitted]:
    """The chains the near-duplicate pass dropped, listed as omitted, in chain order."""
    return [
        Omitted(
            chain_id=c.chain_id,
            entry=c.entry,
            tokens=Costs(settings).required(c),
            reason="duplicate",
            duplicate_of=d.of_chain,
        )
        for c in chains
        if c.entry is not None and (d := duplicates.get(c.chain_id)) is not None
    ]
