"""`why_excluded`: the verdict on one note, read off the trace of the recall that was run."""

from __future__ import annotations

from .chains import build_chain
from .fold import Fold
from .model import Note, NoteState
from .recall import Trace
from .views import Chain, Exclusion, Prerequisite, Reason, Stage, Verdict


def _when(t: object) -> str:
    return t.isoformat(timespec="seconds") if hasattr(t, "isoformat") else str(t)


def _state_reason(note: Note, folded: Fold) -> Reason:
    status = folded.status[note.id]
    event = status.event
    because = f" because {event.reason!r}" if event is not None and event.reason else ""
    who = f" (by {event.actor})" if event is not None and event.actor else ""
    match status.state:
        case NoteState.SUPERSEDED:
            return Reason(
                stage="state",
                detail=f"superseded by {status.by} at {_when(status.at)}{because}{who} [event {event.id if event else '?'}]",
            )
        case NoteState.REVOKED:
            return Reason(stage="state", detail=f"revoked at {_when(status.at)}{because}{who} [event {status.by}]")
        case NoteState.EXPIRED:
            return Reason(
                stage="validity",
                detail=f"expired: valid_until {_when(note.valid_until)} is not after {_when(folded.at)}",
            )
        case NoteState.PENDING:
            return Reason(
                stage="validity",
                detail=f"not yet valid: valid_from {_when(note.valid_from)} is after {_when(folded.at)}",
            )
    back = status.reinstated_by
    if back is not None:
        why = f" because {back.reason!r}" if back.reason else ""
        return Reason(stage="state", detail=f"active; reinstated at {_when(back.recorded_at)}{why} [event {back.id}]")
    return Reason(stage="state", detail="active")


def _conflicts(note: Note, folded: Fold) -> list[Reason]:
    """Supersessions of this note set aside because concurrent writers made a cycle (fold.py)."""
    reasons = []
    for e in folded.events:
        cycle = folded.conflicts.get(e.id)
        if cycle is not None and note.id in (e.src, e.dst):
            reasons.append(
                Reason(
                    stage="conflict",
                    detail=f"{e.src} supersedes {e.dst} [event {e.id}] is not in force: it was recorded after "
                    f"{', '.join(cycle)}, which already make {e.dst} replace {e.src}; two writers linked them "
                    "both ways at once. Revoke or reinstate to settle it",
                )
            )
    return reasons


def _retrieval_reason(note: Note, trace: Trace) -> str:
    cand = trace.candidates.get(note.id)
    floor = trace.settings.min_similarity
    if cand is None:
        return f"not among the top {trace.settings.per_retriever} dense or full-text hits for the query"
    parts = []
    if cand.dense_rank is not None:
        if not (trace.query_readable and cand.dense_readable):
            parts.append(f"dense rank {cand.dense_rank} ignored (the model cannot read the query or the note)")
        else:
            parts.append(f"dense rank {cand.dense_rank}, similarity {cand.similarity:.3f} (floor {floor})")
    if cand.text_rank is not None:
        parts.append(f"full-text rank {cand.text_rank}, score {cand.text_score:.3f}")
    else:
        parts.append("no full-text match")
    verdict = "qualifies as an entry point" if cand.qualified else "does not qualify as an entry point"
    return f"{'; '.join(parts)}; fused score {cand.score:.4f}: {verdict}"


def explain(note: Note, folded: Fold, scope: str, trace: Trace | None) -> Exclusion:
    reasons: list[Reason] = []
    if note.scope != scope:
        reasons.append(
            Reason(stage="scope", detail=f"the note is in scope {note.scope!r}; the query searched {scope!r}")
        )
    if note.id not in folded.notes:
        reasons.append(
            Reason(stage="existence", detail=f"recorded at {_when(note.recorded_at)}, after {_when(folded.at)}")
        )
        return Exclusion(
            note_id=note.id,
            verdict="excluded",
            reasons=reasons,
            summary=f"{note.id} did not exist yet at {_when(folded.at)}.",
        )

    state = _state_reason(note, folded)
    reasons.append(state)
    reasons += _conflicts(note, folded)
    active = folded.state(note.id) is NoteState.ACTIVE
    chain = build_chain(folded, note.id)
    replaced_by = [h for h in chain.heads if h.id != note.id]
    verdict: Verdict = "current" if active else "history"
    if note.scope != scope:
        verdict = "excluded"
    elif trace is not None:
        verdict, stage_reasons = _delivery(note, trace)
        reasons.extend(stage_reasons)

    summary = {
        "current": f"{note.id} is delivered as current ({state.detail}).",
        "history": f"{note.id} is not current: {state.detail}; it comes back as history in its chain.",
        "excluded": f"{note.id} is not delivered: {reasons[-1].detail}.",
    }[verdict]
    if replaced_by and not active:
        summary += " In its place: " + ", ".join(f"{h.id} ({h.text[:80]!r})" for h in replaced_by) + "."
    return Exclusion(note_id=note.id, verdict=verdict, reasons=reasons, replaced_by=replaced_by, summary=summary)


def _delivery(note: Note, trace: Trace) -> tuple[Verdict, list[Reason]]:
    """Where the recall in `trace` put the note: delivered (and how), trimmed, dropped, omitted or never reached."""
    assert trace.result is not None
    reasons = [Reason(stage="retrieval", detail=_retrieval_reason(note, trace))]
    delivered = _delivered(note, trace, reasons)
    if delivered is not None:
        return delivered
    return _not_delivered(note, trace, reasons)


def _delivered(note: Note, trace: Trace, reasons: list[Reason]) -> tuple[Verdict, list[Reason]] | None:
    """How the recall delivered the note, after `reasons`: as a head, as history (clipped or whole) or as a
    prerequisite, in which chain; None when no delivered chain holds it."""
    assert trace.result is not None
    chains = trace.result.chains
    for position, chain in enumerate(chains, 1):
        where = f"chain {position} of {len(chains)} ({chain.chain_id}, {chain.status.value})"
        if any(h.id == note.id for h in chain.heads):
            lifted = chain.entry.lifted_by if chain.entry else None
            moved = f", moved up to arrive with {lifted}, which it needs and which ranked higher" if lifted else ""
            return "current", [*reasons, Reason(stage="delivered", detail=f"delivered as a head of {where}{moved}")]
        for entry in chain.history:
            if entry.note.id != note.id:
                continue
            delivered = Reason(stage="delivered", detail=f"delivered as history in {where}")
            if entry.clipped is None:
                return "history", [*reasons, delivered]
            clip = Reason(
                stage="budget",
                detail=f"clipped to fit budget_tokens={trace.result.budget_tokens}: {entry.clipped.kept_tokens} of "
                f"its {entry.clipped.whole_tokens} tokens, the passage that best matches the query (history with "
                "its id reads it whole)",
            )
            return "history", [*reasons, clip, delivered]
        for prereq in chain.prerequisites:
            if prereq.id == note.id:
                return "current", [
                    *reasons,
                    Reason(stage="prerequisite", detail=_liveness(prereq)),
                    Reason(stage="delivered", detail=f"delivered as a prerequisite in {where}"),
                ]
    return None


def _not_delivered(note: Note, trace: Trace, reasons: list[Reason]) -> tuple[Verdict, list[Reason]]:
    """Why the recall did not deliver the note, after `reasons`: its chain (or the chain that needs it)
    dropped as a near-duplicate, trimmed, omitted for the budget or max_chains, or never reached."""
    assert trace.result is not None
    needing = _needed_in(note.id, trace)
    own = trace.fold.chain(note.id).id if note.id in trace.fold.notes else None
    if needing is not None:
        reasons.append(Reason(stage="prerequisite", detail=f"{_liveness(needing[1])} in chain {needing[0].chain_id}"))
    for chain_id in filter(None, (own, needing[0].chain_id if needing else None)):
        duplicate = trace.duplicates.get(chain_id)
        if duplicate is not None:
            detail = (
                f"chain {chain_id} was dropped as a near-duplicate of chain {duplicate.of_chain}: its head "
                f"{duplicate.note_id} says what {duplicate.like} says (cosine {duplicate.similarity:.3f} ≥ "
                f"{trace.settings.duplicate_similarity}, the same numbers) and the chain brings nothing else"
            )
            return "excluded", [*reasons, Reason(stage="diversity", detail=detail)]
        if note.id in trace.trimmed.get(chain_id, ()):
            what = "prerequisites come nearest first while they fit" if needing else "history goes oldest first"
            detail = f"trimmed from chain {chain_id} to fit budget_tokens={trace.result.budget_tokens} ({what})"
            return "excluded", [*reasons, Reason(stage="budget", detail=detail)]
        for omitted in trace.result.omitted:
            if omitted.chain_id == chain_id and omitted.reason != "duplicate":
                stage: Stage = "budget" if omitted.reason == "budget" else "max_chains"
                detail = (
                    f"chain {chain_id} needed {omitted.tokens} tokens and "
                    f"{trace.result.used_tokens} of budget_tokens={trace.result.budget_tokens} were already used"
                    if stage == "budget"
                    else f"chain {chain_id} came after max_chains chains"
                )
                return "excluded", [*reasons, Reason(stage=stage, detail=detail)]
    reasons.append(
        Reason(
            stage="retrieval",
            detail="no note of its chain qualified as an entry point, and no chain reached needs it, so it was not reached",
        )
    )
    return "excluded", reasons


def _liveness(prereq: Prerequisite) -> str:
    hops = "directly" if prereq.hops == 1 else f"{prereq.hops} hops away"
    return f"needed by {prereq.needed_by} ({hops}), liveness {prereq.liveness:.4f}"


def _needed_in(note_id: str, trace: Trace) -> tuple[Chain, Prerequisite] | None:
    """The best chain the recall reached that needs this note as a prerequisite."""
    for chain in trace.chains:
        for prereq in chain.prerequisites:
            if prereq.id == note_id:
                return chain, prereq
    return None
