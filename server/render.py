"""Compact text renderings of the store's results, for an LLM to read at a glance.

The structured content carries every field; this text says what matters first: which note is
current, what is history (and must not be used as current), and what was left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from corrigenda.store.model import Draft, Event
from corrigenda.store.views import (
    Chain,
    Change,
    Changes,
    Corrected,
    Declared,
    Exclusion,
    Forgotten,
    HistoryEntry,
    Imported,
    LifecycleChange,
    LikelyUpdate,
    Linked,
    NoteHistory,
    NoteList,
    NoteView,
    Omitted,
    RecallResult,
    Remembered,
    Replaced,
    ScopeCount,
    ScopeList,
)


def _day(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t else "?"


def _note(n: NoteView) -> str:
    extra = [n.kind]
    if n.subject:
        extra.append(f"subject={n.subject}")
    if n.valid_until:
        extra.append(f"valid until {_day(n.valid_until)}")
    if n.reinstated_by:
        extra.append(f"reinstated by {n.reinstated_by}")
    if n.refines:
        extra.append("refines " + ", ".join(n.refines))
    if n.last_checked is not None:
        extra.append(f"checked {_day(n.last_checked.at)} by {n.last_checked.actor or 'an unnamed writer'}")
    marked = f"UNCHECKED since {_day(n.unchecked_since)}: " if n.unchecked_since else ""
    return f"{n.id} [{', '.join(extra)}; {_day(n.recorded_at)}] {marked}{n.text}"


def _history(h: HistoryEntry) -> str:
    what = {
        "superseded": f"superseded by {h.by}",
        "revoked": "revoked",
        "expired": "expired",
        "pending": "not yet valid",
    }.get(h.role.value, h.role.value)
    why = f': "{h.reason}"' if h.reason else ""
    clip = f" [clipped: {h.clipped.kept_tokens} of {h.clipped.whole_tokens} tokens]" if h.clipped else ""
    return f"    HISTORY ({what} {_day(h.at)}{why}) {_note(h.note)}{clip}"


def chain(c: Chain, position: int | None = None) -> list[str]:
    label = {"current": "CURRENT", "contested": "CONTESTED: current notes disagree, reconcile them",
             "retracted": "RETRACTED: nothing in this chain is current", "expired": "EXPIRED: nothing is valid now"}  # fmt: skip
    head = f"[{position}] " if position is not None else ""
    lines = [f"{head}chain {c.chain_id} — {label[c.status.value]}"]
    if c.possibly_outdated_by:
        lines[0] += (
            f"; POSSIBLY OUTDATED by {c.possibly_outdated_by} ({c.outdated_reason}): likely replaced by the "
            "newer note; check, then link them (supersedes, or distinct)"
        )
    lines += [f"    NOW {_note(n)}" for n in c.heads]
    lines += [f"    NEEDS{'' if p.hops == 1 else f' ({p.hops} hops)'} {_note(p)}" for p in c.prerequisites]
    lines += [f"    NEEDS {i} (shown in another chain above or below)" for i in c.prerequisites_elsewhere]
    lines += [_history(h) for h in c.history]
    if c.trimmed_history or c.trimmed_prerequisites:
        lines.append(
            f"    (left out for the budget: {c.trimmed_history} history, {c.trimmed_prerequisites} prerequisites)"
        )
    return lines


# A remember whose likely updates the server is set to ask the person about, through a client that cannot ask.
NOT_ASKED = (
    "The person was not asked (this client cannot ask in the middle of a call): make the call above once they "
    "say, or they can answer in the web view (`corrigenda ui`)."
)
# For a client that cannot ask the person (no elicitation: claude.ai), where the person answers a mark.
WHERE_TO_ANSWER = (
    "The person can settle a POSSIBLY OUTDATED mark with the buttons under it in this result's chain view (in a "
    "client that shows MCP Apps), or in the web view (`corrigenda ui`, searching the same words)."
)


def recall(r: RecallResult) -> str:
    when = f" as of {_day(r.as_of)}" if r.as_of else ""
    lines = [
        f'{len(r.chains)} chain(s) for "{r.query}" in scope {r.scope}{when} ({r.used_tokens}/{r.budget_tokens} tokens).'
    ]
    if r.scope_is_new:
        lines.append(f"Nothing is stored in scope {r.scope} yet: its first write makes it.")
    elif not r.chains:
        lines.append("Nothing in memory matches.")
    for i, c in enumerate(r.chains, 1):
        lines += chain(c, i)
    if any(c.possibly_outdated_by for c in r.chains):
        lines.append(WHERE_TO_ANSWER)
    if r.omitted:
        lines.append(_omitted(r.omitted))
    lines += _unreadable(r.unreadable)
    lines.append("Use NOW notes as current; HISTORY notes are replaced or withdrawn.")
    return "\n".join(lines)


def _omitted(omitted: list[Omitted]) -> str:
    """One line however many chains were left out: the structured result lists each of them."""
    parts = []
    budget = [o for o in omitted if o.reason == "budget"]
    if budget:
        parts.append(
            f"{len(budget)} chain(s) did not fit the budget (the best, {budget[0].chain_id}, needs {budget[0].tokens})"
        )
    capped = sum(o.reason == "max_chains" for o in omitted)
    if capped:
        parts.append(f"{capped} came after max_chains")
    repeats = [o for o in omitted if o.reason == "duplicate"]
    if repeats:
        parts.append(
            f"{len(repeats)} repeated a delivered chain ("
            + ", ".join(f"{o.chain_id} = {o.duplicate_of}" for o in repeats[:2])
            + (", …)" if len(repeats) > 2 else ")")
        )
    return "Omitted: " + "; ".join(parts) + "."


QUOTED = 300  # characters of a note's text a question quotes


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= QUOTED else text[: QUOTED - 1] + "…")


def update_question(new: Draft, update: LikelyUpdate) -> str:
    """The question `remember` asks the person when its note likely replaces an older one; it names both
    notes and why, and is kept as the reason of the edge their answer records."""
    old = update.note
    about = f" (subject {new.subject})" if new.subject else ""
    return (
        f"A new note is being remembered{about}: {_quoted(new.text)}.\n"
        f"It looks like a new value of note {old.id}, recorded {_day(old.recorded_at)}: {_quoted(old.text)}.\n"
        f"Why: {update.reason}.\n"
        "Does the new note replace the older one, refine it (add detail; both stay current), or should both stay?"
    )


def _unreadable(ids: list[str]) -> list[str]:
    """The line naming notes whose stored embedding cannot be read, if the call met any."""
    if not ids:
        return []
    return [
        f"Unreadable embedding (an import wrote it before vectors were checked): {', '.join(ids)}, found by its "
        "words alone; correct it, or forget it and remember it again, to embed it anew."
    ]


def remembered(r: Remembered) -> str:
    if not r.changed:
        return f"Already remembered in scope {r.note.scope}, unchanged: {_note(r.note)}"
    lines = [f"Remembered in scope {r.note.scope}: {_note(r.note)}", *_unreadable(r.unreadable)]
    if r.scope_created:
        lines.append(f"Scope {r.note.scope!r} held nothing before: this note made it.")
    lines += [f"  edge {e.kind.value} {e.src} -> {e.dst}" for e in r.events]
    if r.replaced is not None:
        lines += _replaced(r.replaced, r.note.scope)
    if r.confirmed is not None:
        c = r.confirmed
        lines.append(f"Asked the person whether it replaces {c.note_id}; answer: {c.answer}.")
        if c.event is not None:
            lines.append(f"  recorded: edge {c.event.kind.value} {c.event.src} -> {c.event.dst} by {c.event.actor}")
        else:
            lines.append("  no edge recorded")
    if r.likely_updates:
        lines.append(
            "Likely updates: your note looks like a new value of these. If so, record it (nothing is linked yet); "
            'if it states another fact, link them with kind="distinct":'
        )
        for u in r.likely_updates:
            lines += [f"  {_note(u.note)}", f"    why: {u.reason}", f"    call: {u.call}"]
    proposed = {u.note.id for u in r.likely_updates}
    similar = [s for s in r.similar_active if s.note.id not in proposed]  # each note listed once
    if similar:
        lines.append(
            f"{'Other similar' if proposed else 'Similar'} active notes. If your note updates one of them, link it: "
            f"link(src_id={r.note.id}, dst_id=<old id>, kind=supersedes, reason=…)"
        )
        for s in similar:
            sim = f"{s.similarity:.2f}" if s.similarity is not None else "text match"
            lines.append(f"  ({sim}) {_note(s.note)}")
    return "\n".join(lines)


def corrected(r: Corrected) -> str:
    return "\n".join([f"Corrected {r.supersedes}: new note {r.note.id} supersedes it.", *chain(r.chain)])


def _replaced(r: Replaced, scope: str) -> list[str]:
    said = f"Subject {r.subject!r} holds one value in scope {scope}" + (
        " (declared by this call)." if r.declared else "."
    )
    if not r.notes:
        return [said]
    return [said, "Replaced (now history):", *(f"  {_note(n)}" for n in r.notes), f"Undo: {r.undo}"]


def declared(r: Declared) -> str:
    holds = "holds one value" if r.one_value else "may hold several values"
    if r.changed:
        first = f"Subject {r.subject!r} {holds} in scope {r.scope} now (event {r.event.id if r.event else '?'})."
    else:
        first = f"Nothing to do: subject {r.subject!r} already {holds} in scope {r.scope}."
    if r.declared_by is not None:
        first += f" Declared by {r.declared_by.actor or 'an unnamed writer'} at {r.declared_by.recorded_at.isoformat(timespec='seconds')}."
    lines = [first]
    if r.one_value and len(r.current) > 1:
        lines.append(
            f"It has {len(r.current)} current notes; they stay until someone settles them (correct one, or link the "
            "newest to supersede the others):"
        )
    elif r.current:
        lines.append("Current note:" if len(r.current) == 1 else "Current notes:")
    lines += [f"  {_note(n)}" for n in r.current]
    return "\n".join(lines)


def one_value_subjects(declared: Sequence[Event], scope: str) -> str:
    if not declared:
        return f"No subject holds one value in scope {scope} (declare one: corrigenda subject SUBJECT)."
    lines = [f"Subjects that hold one value in scope {scope}:"]
    for e in declared:
        by = f"by {e.actor or 'an unnamed writer'} at {e.recorded_at.isoformat(timespec='seconds')}"
        lines.append(f"  {e.dst.removeprefix('subject:')}  ({by}{f': {e.reason}' if e.reason else ''})")
    return "\n".join(lines)


def lifecycle(r: LifecycleChange, verb: str) -> str:
    if r.changed:
        first = f"{verb}: event {r.event.id if r.event else '?'} written."
    else:
        first = f"Nothing to do: already {verb.lower()}" + (f" (event {r.event.id})." if r.event else ".")
    return "\n".join([first, *chain(r.chain)])


def linked(r: Linked) -> str:
    first = f"Linked {r.event.src} {r.event.kind.value} {r.event.dst} (event {r.event.id})"
    return "\n".join([first if r.changed else first + ", already present.", *chain(r.chain)])


def forgotten(r: Forgotten) -> str:
    events = f"{len(r.events_removed)} event(s) naming it"
    if r.changed and r.erasure == "done":
        lines = [f"Deleted note {r.note_id} and {events}, from every file of the store."]
    elif r.changed:
        lines = [
            f"Deleted note {r.note_id} and {events}: gone for every reader now. The server is erasing them "
            "from the store's files (seconds on object storage); forget the note again to see whether that is done."
        ]
    elif r.erasure == "done":
        leftovers = f"; {len(r.events_removed)} leftover event(s) removed now" if r.events_removed else ""
        lines = [f"Note {r.note_id} was already forgotten, and is off every file of the store{leftovers}."]
    else:
        lines = [f"Note {r.note_id} was already forgotten; its erasure from the store's files is still under way."]
    lines += [f"  now {n.state.value}: {_note(n)}" for n in r.notes_changed]
    return "\n".join(lines)


def history(r: NoteHistory) -> str:
    lines = [f"{_note(r.note)} — {r.note.state.value}", *chain(r.chain), "Events, oldest first:"]
    for e in r.events:
        if e.conflict_with:
            force = (
                f" (NOT IN FORCE: it would close a cycle with {', '.join(e.conflict_with)}, written at the same time)"
            )
        elif not e.in_force:
            force = f" (retracted by {e.retracted_by})"
        else:
            force = ""
        why = f': "{e.reason}"' if e.reason else ""
        lines.append(f"  {_day(e.recorded_at)} {e.id} {e.kind.value} {e.src or ''} -> {e.dst}{why}{force}")
    if r.related:
        lines.append("Other notes these events name:")
        lines += [f"  {_note(n)} — {n.state.value}" for n in r.related]
    return "\n".join(lines)


def exclusion(r: Exclusion) -> str:
    lines = [f"{r.verdict.upper()}: {r.summary}"]
    lines += [f"  {x.stage}: {x.detail}" for x in r.reasons]
    return "\n".join(lines)


def scopes(r: ScopeList) -> str:
    which = f" matching {r.contains!r}" if r.contains else ""
    shown = f"showing {r.offset + 1}–{r.offset + len(r.scopes)} of {r.total}" if r.scopes else "none"
    if not r.scopes and r.total:
        shown = f"none at offset {r.offset} of {r.total}"
    lines = [f"Scopes{which}, most recently changed first: {shown}; * marks the default, {r.default_scope!r}."]
    lines += [f"{'*' if c.scope == r.default_scope else ' '} {_scope_count(c)}" for c in r.scopes]
    if r.default_counts is not None and r.default_counts not in r.scopes:
        lines.append(f"* {_scope_count(r.default_counts)} (not on this page)")
    elif r.default_counts is None and r.default_scope is not None:
        lines.append(f"* {r.default_scope!r}: empty so far")
    if r.next_offset is not None:
        lines.append(f"More: offset={r.next_offset}; or find one by name with contains.")
    return "\n".join(lines)


def _scope_count(c: ScopeCount) -> str:
    return f"{c.scope!r}: {c.notes} notes, {c.events} events, changed {_day(c.latest_change_at)}"


def note_list(r: NoteList) -> str:
    when = f" as of {_day(r.as_of)}" if r.as_of else ""
    counts = ", ".join(f"{n} {state.value}" for state, n in r.counts.items() if n)
    shown = f"{r.offset + 1}-{r.offset + len(r.notes)}" if r.notes else "none"
    lines = [f"Scope {r.scope}{when}: {counts or 'no notes'}. {r.state} notes, newest first: {shown} of {r.total}."]
    lines += [f"  {n.state.value.upper():<10} {_note(n)}" for n in r.notes]
    if r.next_offset is not None:
        lines.append(f"More: offset={r.next_offset}.")
    return "\n".join(lines)


def setting(c: Change) -> str:
    """What a setting of the scope as a whole says (`Memory.changes`)."""
    if c.change == "check_every":
        days = c.check_every_days
        return (
            "current notes are checked with no time limit"
            if not days
            else f"current notes are checked every {days} day(s)"
        )
    holds = "holds one value" if c.change == "declared" else "holds any number of values"
    return f"subject {c.subject!r} {holds}"


def changes(r: Changes) -> str:
    lines = [f"{len(r.changes)} change(s) in scope {r.scope} since {_day(r.since)}, newest first."]
    for c in r.changes:
        e = c.event
        who = f" by {e.actor}" if e.actor else ""
        why = f': "{e.reason}"' if e.reason else ""
        if c.change == "forgotten":
            lines.append(f"  {_day(e.recorded_at)} FORGOTTEN {c.note_id}{who}{why}")
            continue
        if c.note_id is None:
            lines.append(f"  {_day(e.recorded_at)} {c.change.upper()} {setting(c)}{who}{why}")
            continue
        what = f"{c.note_id} -> {c.by.id}" if c.change == "corrected" and c.by else c.note_id
        lines.append(f"  {_day(e.recorded_at)} {c.change.upper()} {what}{who}{why}")
        if not c.heads:
            lines.append(f"      chain {c.chain_id} now has no current note ({c.chain_status})")
        lines += [f"      NOW {_note(h)}" for h in c.heads]
    if r.more:
        lines.append(f"{r.more} older change(s) left out; raise `limit` or move `since` forward.")
    return "\n".join(lines)


def imported(r: Imported) -> str:
    lines = [
        f"Imported a {r.format} file into scope(s) {', '.join(r.scopes) or 'none'}: "
        f"{r.notes_written} notes and {r.events_written} events written; "
        f"{r.notes_present} notes and {r.events_present} events were already stored."
    ]
    if r.forgotten_skipped:
        lines.append(f"{r.forgotten_skipped} forgotten note(s) not brought back.")
    if r.notes_erased:
        lines.append(f"Erased, as the file's tombstones say: {', '.join(r.notes_erased)}.")
    if r.repeats_merged:
        shown = "; ".join(r.repeats_merged[:5]) + ("; …" if len(r.repeats_merged) > 5 else "")
        lines.append(f"{len(r.repeats_merged)} repeated entit(ies) or observation(s) stored once: {shown}.")
    if r.partial:
        lines.append(f"A partial restore, as asked: {r.partial}.")
    return "\n".join(lines)
