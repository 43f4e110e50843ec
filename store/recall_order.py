"""Recall's second stage, the chains' order: each chain an entry point reached, scored by its entries and
by the reached chains its heads need, built with its prerequisites, and ranked best first with a chain
lifted to arrive just before a better chain it needs (recall.py's module docstring, stages 2 and 3)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from .chains import build_chain
from .fold import Fold
from .recall_candidates import Candidate
from .recall_settings import RetrievalSettings
from .views import Chain, Entry


def chain_scores(
    entries: Sequence[Candidate], folded: Fold, settings: RetrievalSettings
) -> tuple[dict[str, Candidate], dict[str, float]]:
    """The chains the entries (best first) reach: each chain's best entry, and its score, the best entry's
    fused score plus `chain_evidence` times each further entry's. An entry the fold does not hold
    reaches nothing."""
    best: dict[str, Candidate] = {}  # chain id → its best entry
    reached: dict[str, float] = {}  # chain id → its score: the best entry, plus the others weighted
    for cand in entries:  # best first
        if cand.note.id not in folded.notes:
            continue
        chain_id = folded.chain_id(cand.note.id)
        weight = settings.chain_evidence if chain_id in reached else 1.0
        reached[chain_id] = reached.get(chain_id, 0.0) + weight * cand.score
        best.setdefault(chain_id, cand)
    return best, reached


def ordered_chains(
    folded: Fold, best: Mapping[str, Candidate], reached: Mapping[str, float], settings: RetrievalSettings
) -> list[Chain]:
    """Every chain reached, built through its best entry (with its prerequisites, stage 3), scored with its
    reasoning evidence, best first (ties: the better entry, then the chain id), each preceded by the
    reached chains that need it (`dependents_first`)."""
    built = []
    for chain_id, cand in best.items():
        entry = Entry(note_id=cand.note.id, score=cand.score, similarity=cand.similarity, chain_score=reached[chain_id])
        built.append(build_chain(folded, cand.note.id, entry, settings.liveness_decay))
    built = [_with_reasoning_evidence(c, folded, reached, best, settings) for c in built]
    return dependents_first(sorted(built, key=lambda c: (-round(_score(c), 9), -_entry(c).score, c.chain_id)))


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
