"""What the store hands back: the shapes an agent receives (the server returns them as-is)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from .model import ChainStatus, Event, EventKind, Note, NoteState


class Check(BaseModel):
    """A confirmation that a current note still holds."""

    event_id: str
    at: datetime
    actor: str | None
    reason: str | None


class NoteView(Note):  # a stored note, and what the fold says of it
    state: NoteState
    reinstated_by: str | None = Field(None, description="The reinstates event that brought this note back, if one did.")
    refines: list[str] = Field(default_factory=list, description="Notes this one adds detail to.")
    last_checked: Check | None = Field(None, description="The latest confirmation that it still holds, if any.")
    unchecked_since: datetime | None = Field(
        None,
        description="Set when the scope asks for a check every N days and this current note was neither written nor "
        "confirmed since then: when it last was. It is still current: check it, then `confirm` or `correct` it.",
    )


class EventView(BaseModel):
    id: str
    kind: EventKind
    src: str | None
    dst: str
    reason: str | None
    actor: str | None
    recorded_at: datetime
    in_force: bool = Field(
        description="False once a reinstates event has retracted it, or for a supersession that would close a cycle."
    )
    retracted_by: str | None = None
    conflict_with: list[str] = Field(
        default_factory=list,
        description="For a supersession set aside because concurrent writers made a cycle: the edges it would close it with.",
    )


class Clip(BaseModel):
    """How much of a note's text a recall delivered, in the budget's tokens."""

    kept_tokens: int = Field(description="Tokens of the text delivered, the … marks included.")
    whole_tokens: int = Field(description="Tokens of the note's whole text.")


class HistoryEntry(BaseModel):
    """A chain member that is no longer current, and why."""

    note: NoteView
    role: NoteState = Field(description="superseded, revoked, expired or pending")
    by: str | None = Field(None, description="The note that replaced it, or the event that revoked it.")
    at: datetime | None = Field(None, description="When it stopped being current.")
    reason: str | None = None
    event_id: str | None = None
    actor: str | None = Field(None, description="Who wrote the event that replaced or withdrew it.")
    clipped: Clip | None = Field(
        None,
        description="Set when only part of the note fit the budget: `note.text` is then the passage that best "
        "matches the query, with … where text was left out. `history` with the note's id reads it whole.",
    )


class Prerequisite(NoteView):
    """A note a head needs to make sense (a `depends_on` target), resolved to what is current."""

    needed_by: str = Field(description="The note that depends on this one: a head, or a nearer prerequisite.")
    hops: int = Field(description="1: a head depends on it directly; 2: a prerequisite of a prerequisite; …")
    liveness: float = Field(description="What it inherits from the chain's entry: entry score × decay^hops.")


class Entry(BaseModel):
    note_id: str = Field(description="The note through which the query reached this chain.")
    score: float = Field(description="Fused retrieval score of that note (reciprocal-rank fusion).")
    similarity: float | None = Field(None, description="Cosine similarity of the entry note to the query.")
    chain_score: float = Field(
        0.0,
        description="The chain order: the best fused score of the chain's notes the query reached, a tenth of "
        "each other's, and a tenth of the score of each reached chain it needs.",
    )
    lifted_by: str | None = Field(
        None, description="A better-ranked note this chain needs: the chain was moved up to arrive with it."
    )


class Chain(BaseModel):
    chain_id: str
    status: ChainStatus
    heads: list[NoteView] = Field(description="The current notes of this claim, newest first.")
    history: list[HistoryEntry] = Field(description="What the heads replaced, newest first: not current.")
    prerequisites: list[Prerequisite] = Field(
        description="Notes the heads depend on, and what those depend on, nearest first."
    )
    prerequisites_elsewhere: list[str] = Field(
        default_factory=list, description="Prerequisites delivered in another chain of this result (ids)."
    )
    entry: Entry | None = None
    possibly_outdated_by: str | None = Field(
        None,
        description="A current note of another delivered chain, newer than this chain's head, that looks like the "
        "same fact with a different value (no edge links them): this head may be out of date. Nothing is stored.",
    )
    outdated_reason: str | None = Field(None, description="What differs, for `possibly_outdated_by`.")
    trimmed_history: int = Field(0, description="History entries left out to fit the budget (oldest first).")
    trimmed_prerequisites: int = Field(0, description="Prerequisites left out to fit the budget (farthest first).")
    tokens: int = 0


class Omitted(BaseModel):
    chain_id: str
    entry: Entry
    tokens: int = Field(
        description="Tokens it needed: its heads, and for `budget` also the prerequisites not delivered elsewhere."
    )
    reason: Literal["budget", "max_chains", "duplicate"]
    duplicate_of: str | None = Field(None, description="For a duplicate: the delivered chain that says the same.")


class RecallResult(BaseModel):
    query: str
    scope: str
    as_of: datetime | None = None
    chains: list[Chain]
    used_tokens: int
    budget_tokens: int
    omitted: list[Omitted] = Field(default_factory=list)
    scope_is_new: bool = Field(
        False,
        description="Nothing was ever stored in this scope: the session's own scope before its first note, or "
        "any scope of a store that holds none yet.",
    )
    unreadable: list[str] = Field(
        default_factory=list,
        description="Notes this call met whose stored embedding cannot be read (written by an import before "
        "vectors were checked): found by their words alone. Correct each, or forget it and remember it again.",
    )


class Similar(BaseModel):
    note: NoteView
    similarity: float | None = Field(description="Cosine similarity; null when the model cannot read one of the texts.")


class LikelyUpdate(BaseModel):
    """An active note the new one likely replaces; nothing is linked until the agent makes the call."""

    note: NoteView
    similarity: float | None
    reason: str = Field(description="Why it looks like the same fact with a different value.")
    call: str = Field(description="The call that records it, if the agent agrees.")


class Confirmed(BaseModel):
    """What the person answered when asked whether a new note replaces a likely-updated one."""

    note_id: str = Field(description="The older note the person was asked about.")
    question: str = Field(description="The question as the person saw it; kept as the edge's reason.")
    answer: Literal["replaces", "refines", "keep both", "declined", "cancelled"] = Field(
        description="replaces: a supersedes edge new → old; refines: a refines edge; keep both: a distinct edge "
        "(both stay current, neither marked possibly outdated by the other); declined, cancelled: no edge."
    )
    event: EventView | None = Field(None, description="The edge recorded, with the person as its actor.")


class Replaced(BaseModel):
    subject: str = Field(description="The subject, which holds one value in the note's scope.")
    declared: bool = Field(description="True when this call declared that it holds one value.")
    notes: list[NoteView] = Field(description="The current notes of the subject this note replaced: now history.")
    undo: str = Field(description="The calls that undo the replacement.")


class Declared(BaseModel):
    subject: str
    scope: str
    one_value: bool = Field(description="Whether the subject holds one value in the scope now.")
    changed: bool = Field(description="False when the subject was already declared so.")
    event: Event | None = Field(description="The declaration (or withdrawal) this call recorded.")
    declared_by: Event | None = Field(description="The declaration in force, with who made it and when.")
    current: list[NoteView] = Field(
        description="The subject's current notes. Several under a one-value declaration stay as they are until "
        "someone settles them: correct one, or link the newest to supersede the others."
    )


class Remembered(BaseModel):
    note: NoteView
    changed: bool = Field(
        description="False when a current note of the scope already had exactly this text: `note` is that one."
    )
    similar_active: list[Similar] = Field(
        description="Active notes in the same scope closest to this one. If one of them states an older "
        "value of the same fact, call `correct` on it."
    )
    likely_updates: list[LikelyUpdate] = Field(
        default_factory=list,
        description="Only when the new note looks like a new value of a fact an active note states (same subject, "
        "or the same statement with a different value): each with why, and the `link` call that records it. "
        "Nothing is linked on this guess.",
    )
    events: list[EventView] = Field(default_factory=list, description="Edges written with the note.")
    replaced: Replaced | None = Field(
        None, description="Set when the note's subject holds one value in its scope: what the note replaced."
    )
    scope_created: bool = Field(
        False, description="True when the scope held nothing before: this write made it (check its spelling)."
    )
    confirmed: Confirmed | None = Field(
        None,
        description="Set when the person was asked whether this note replaces a likely-updated one "
        "(the server's ask_on_update setting): their answer and the edge it recorded.",
    )
    unreadable: list[str] = Field(
        default_factory=list,
        description="Notes this call met whose stored embedding cannot be read (written by an import before "
        "vectors were checked): found by their words alone. Correct each, or forget it and remember it again.",
    )


class Corrected(BaseModel):
    note: NoteView
    supersedes: str
    event: EventView
    chain: Chain


class LifecycleChange(BaseModel):
    event: EventView | None = Field(description="The event written, or the one already in force if nothing changed.")
    changed: bool = Field(
        description="False when the note was already in the requested state (the call is idempotent)."
    )
    chain: Chain


class Linked(BaseModel):
    event: EventView
    changed: bool
    chain: Chain


class NoteHistory(BaseModel):
    note: NoteView
    chain: Chain
    events: list[EventView] = Field(description="Every lifecycle event of the chain, oldest first.")
    related: list[NoteView] = Field(
        default_factory=list,
        description="The notes its events name that the chain does not show: a note that depends on one of "
        "its notes or is said to state another fact, a prerequisite replaced since.",
    )


class Forgotten(BaseModel):
    note_id: str
    changed: bool = Field(
        description="False when the note had already been forgotten (this call finished any leftovers)."
    )
    events_removed: list[str] = Field(description="Events deleted with the note (they named it).")
    notes_changed: list[NoteView] = Field(description="Notes whose state changed because the note is gone.")
    erasure: Literal["done", "pending"] = Field(
        description="done: the note and those events are off every file of the store. pending (a store "
        "on object storage): they are gone for every reader, and the server is erasing them from the "
        "store's files; forget the note again to see whether that is done."
    )


Stage = Literal[
    "existence", "scope", "state", "conflict", "validity", "retrieval", "prerequisite", "diversity", "max_chains", "budget",
    "delivered",
]  # fmt: skip
Verdict = Literal["current", "history", "excluded"]


class Reason(BaseModel):
    stage: Stage
    detail: str


class Exclusion(BaseModel):
    note_id: str
    verdict: Verdict
    reasons: list[Reason]
    replaced_by: list[NoteView] = Field(default_factory=list, description="What is delivered in its place.")
    summary: str


class ScopeCount(BaseModel):
    scope: str
    notes: int = Field(description="Notes stored in the scope, current and history.")
    events: int = Field(description="Lifecycle events (corrections, revocations, links, …) in the scope.")
    latest_note_at: datetime | None = Field(description="When its newest note was recorded.")
    latest_change_at: datetime = Field(description="When its newest note or event was recorded.")


class ScopeList(BaseModel):
    """One page of the store's scopes, the most recently changed first (ties by name)."""

    scopes: list[ScopeCount]
    contains: str | None = Field(None, description="Only scopes whose name contains this (any case) are listed.")
    total: int = Field(description="Scopes in the store (those matching `contains`, if given).")
    offset: int
    next_offset: int | None = Field(description="Pass this as `offset` for the next page; null on the last one.")
    default_scope: str | None = Field(None, description="The scope a tool call that names none uses in this session.")
    default_counts: ScopeCount | None = Field(
        None, description="The default scope's counts, on this page or not; null while it holds nothing."
    )


StateFilter = Literal["current", "history", "all"]


class NoteList(BaseModel):
    """One page of a scope's notes, newest first, with the whole scope's counts by state."""

    scope: str
    state: StateFilter = Field(description="current: active notes; history: every other state; all: both.")
    as_of: datetime | None = None
    notes: list[NoteView]
    total: int = Field(description="Notes of the scope that pass the state filter.")
    offset: int
    next_offset: int | None = Field(description="Pass this as `offset` for the next page; null on the last one.")
    counts: dict[NoteState, int] = Field(description="The whole scope's notes by state (every state, zeros too).")


ChangeKind = Literal[
    "corrected", "revoked", "reinstated", "forgotten", "confirmed", "declared", "withdrawn", "check_every"
]


class Change(BaseModel):
    """One lifecycle event since a time, with where its chain stands now; or a setting of the scope as a
    whole: a subject declared to hold one value (`declared`), that declaration withdrawn (`withdrawn`),
    or how often its notes are to be checked (`check_every`)."""

    change: ChangeKind
    event: EventView
    note_id: str | None = Field(
        description="The note it acted on: corrected, revoked, brought back, or erased; null for a setting."
    )
    note: NoteView | None = Field(description="That note as it is now; null once it is forgotten, and for a setting.")
    subject: str | None = Field(None, description="For declared and withdrawn: the subject, as written.")
    check_every_days: int | None = Field(None, description="For check_every: the days set (0: no limit).")
    by: NoteView | None = Field(None, description="For corrected: the note that replaced it.")
    chain_id: str | None = None
    chain_status: ChainStatus | None = None
    heads: list[NoteView] = Field(default_factory=list, description="The chain's current notes now, newest first.")


class Changes(BaseModel):
    scope: str
    since: datetime = Field(description="Changes recorded after this time are listed.")
    until: datetime = Field(description="When this was read.")
    changes: list[Change] = Field(description="Newest first.")
    more: int = Field(0, description="Older changes since `since` left out by `limit`.")


class Imported(BaseModel):
    """What an import wrote. Records already stored (the same id) are left as they are."""

    format: Literal["corrigenda", "knowledge-graph"]
    scopes: list[str] = Field(description="The scopes the file's records belong to.")
    notes_written: int
    events_written: int
    notes_present: int = Field(description="Notes of the file already stored: not written again.")
    events_present: int = Field(description="Events of the file already stored: not written again.")
    forgotten_skipped: int = Field(
        description="Notes of the file not written because a `forgets` tombstone (stored, or in the file) names them."
    )
    notes_erased: list[str] = Field(
        default_factory=list, description="Stored notes that a tombstone in the file erased."
    )
    repeats_merged: list[str] = Field(
        default_factory=list,
        description="A knowledge-graph file's repeated entities and observations, each stored once: where.",
    )
    partial: str | None = Field(
        None, description="A partial restore, asked for: what does not show the file to be whole (None: whole)."
    )
