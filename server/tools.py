"""The tools, one function each, in the order a client lists them: their signatures, descriptions
and annotations are what the model reads. Each does its work through access.py (scope, grant, actor,
the store off the event loop) and answers with render.py's text beside the structured result. No
retrieval logic: that is the store's. Declared through tools_registry.py (tools_truth.py's after these);
`remember`'s question to the person is tools_ask.py's, the links a result carries tools_links.py's."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from corrigenda.store import Draft
from corrigenda.store.browse import PAGE_MAX
from corrigenda.store.model import MAX_KIND, MAX_LINKS, MAX_QUERY, MAX_REASON, MAX_SUBJECT, MAX_TAGS
from corrigenda.store.recall import MAX_ENTRIES
from corrigenda.store.views import (
    Changes,
    Corrected,
    Exclusion,
    Forgotten,
    LifecycleChange,
    Linked,
    NoteHistory,
    NoteList,
    RecallResult,
    Remembered,
    ScopeList,
    StateFilter,
)
from corrigenda.store.where import SCOPE_MAX
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Resolve
from mcp_types import CallToolResult
from pydantic import Field

from . import mcp_app, render
from .access import (
    actor_of,
    app_of,
    audit,
    call,
    grant_of,
    granted_scope,
    permit_ids,
    scope_for,
    scope_named,
    tool_result,
)
from .arguments import (
    APPEND,
    DESTRUCTIVE,
    IDEMPOTENT,
    MAX_CHAINS,
    READ_ONLY,
    AsOf,
    Budget,
    Confidence,
    Kind,
    NoteId,
    Query,
    Reason,
    Scope,
    Source,
    Subject,
    Tag,
    Tags,
    TargetId,
    Text,
    Time,
    ValidFrom,
    ValidUntil,
)
from .tools_ask import Answer, Question, ask_person, likely_update_question, person_answer, record_answer
from .tools_links import linked
from .tools_registry import TOOLS as TOOLS  # app.py's, with tools_truth.py's
from .tools_registry import tool

# -- the tools -------------------------------------------------------------------------------------


@tool(APPEND, "Remember a note")
async def remember(
    ctx: Context,
    # Filled before the body runs, not by the client (the SDK's resolvers): the person's answer, when asked.
    question: Annotated[Question | None, Resolve(likely_update_question)],
    answer: Annotated[ElicitationResult[Answer], Resolve(ask_person)],
    text: Text,
    scope: Scope = None,
    kind: Kind = "fact",
    subject: Subject = None,
    tags: Tags = [],  # noqa: B006 - the schema shows the default; never mutated
    source: Source = None,
    confidence: Confidence = 1.0,
    valid_from: ValidFrom = None,
    valid_until: ValidUntil = None,
    supersedes: Annotated[
        list[NoteId], Field(description="Notes this one replaces (known at capture time).", max_length=MAX_LINKS)
    ] = [],  # noqa: B006
    depends_on: Annotated[
        list[NoteId], Field(description="Notes this one needs to make sense.", max_length=MAX_LINKS)
    ] = [],  # noqa: B006
    reason: Annotated[
        str | None, Field(description="Why this note replaces those in `supersedes`.", max_length=MAX_REASON)
    ] = None,
    one_value: Annotated[
        bool,
        Field(
            description="Declare that `subject` holds one value in the scope (a setting, a version, a current "
            "role): this note and every later one of that subject replace its current note."
        ),
    ] = False,
) -> Annotated[CallToolResult, Remembered]:
    """Store a durable note. Call it when you learn a fact, decision, preference or procedure worth
    keeping; to update a fact you know is stored, call `correct` instead. The answer lists
    `similar_active` notes: if your note updates one of them, `link` it with kind `supersedes` (this
    tool never links notes on its own guess); `likely_updates` names those that look replaced, with the call. The exact text of a current note returns that note.

    If the note's `subject` holds one value in the scope (`one_value: true` once, or `declare_subject`),
    it replaces that subject's current note in this same call: `replaced` says what, and how to undo it."""
    draft = Draft(
        text=text, kind=kind, subject=subject, tags=tags, source=source, confidence=confidence,
        valid_from=valid_from, valid_until=valid_until,
    )  # fmt: skip
    scope = await granted_scope(ctx, scope, "remember", write=True)
    r = await call(ctx, "remember", lambda m: m.remember(draft, scope=scope, supersedes=supersedes,
                   depends_on=depends_on, reason=reason, actor=actor_of(ctx), one_value=one_value))  # fmt: skip
    if question is not None and r.changed:
        r = await record_answer(ctx, r, question, person_answer(answer))
    text = render.remembered(r)
    if question is None and r.likely_updates and app_of(ctx).settings.ask_on_update:
        text += "\n" + render.NOT_ASKED  # this client cannot be asked mid-call (no elicitation, or HTTP 2025-11-25)
    return tool_result(r, text)


@tool(APPEND, "Correct a note")
async def correct(
    ctx: Context,
    note_id: NoteId,
    text: Text,
    reason: Reason,
    scope: Annotated[
        str | None, Field(description="Must be the old note's scope if given.", max_length=SCOPE_MAX)
    ] = None,
    kind: Annotated[str | None, Field(description="Defaults to the old note's kind.", max_length=MAX_KIND)] = None,
    subject: Annotated[
        str | None, Field(description="Defaults to the old note's subject.", max_length=MAX_SUBJECT)
    ] = None,
    tags: Annotated[
        list[Tag] | None,
        Field(description="Defaults to the old note's tags.", max_length=MAX_TAGS),
    ] = None,
    source: Source = None,
    confidence: Confidence = 1.0,
    valid_from: ValidFrom = None,
    valid_until: ValidUntil = None,
    depends_on: Annotated[
        list[NoteId] | None,
        Field(
            description="Notes the corrected note needs; omit to keep what the old note needed.", max_length=MAX_LINKS
        ),
    ] = None,
    fork: Annotated[
        bool,
        Field(
            description="Correct a note that is no longer current anyway, leaving two current versions (a contested chain)."
        ),
    ] = False,
) -> Annotated[CallToolResult, Corrected]:
    """Replace a note that is out of date or wrong with a corrected one. The old note stays as history
    (marked superseded, with your reason) and recall shows the new one as current. Correct the chain's
    current note: a note already superseded or revoked is refused, naming what is current."""
    # What the client left out (an empty kind too) the draft leaves unset: the old note's is kept.
    kept = {"kind": kind or None, "subject": subject, "tags": tags}
    draft = Draft(
        text=text, source=source, confidence=confidence, valid_from=valid_from, valid_until=valid_until,
        **{field: value for field, value in kept.items() if value is not None},
    )  # fmt: skip
    await permit_ids(ctx, "correct", [note_id], write=True)
    r = await call(ctx, "correct", lambda m: m.correct(note_id, draft, reason=reason, scope=scope,
                   depends_on=depends_on, actor=actor_of(ctx), fork=fork))  # fmt: skip
    return tool_result(r, render.corrected(r))


@tool(IDEMPOTENT, "Revoke a note")
async def revoke(ctx: Context, note_id: NoteId, reason: Reason) -> Annotated[CallToolResult, LifecycleChange]:
    """Mark a note as wrong when there is nothing to replace it with. If it was a correction, the note it
    replaced becomes current again. Calling it on an already revoked note changes nothing."""
    await permit_ids(ctx, "revoke", [note_id], write=True)
    r = await call(ctx, "revoke", lambda m: m.revoke(note_id=note_id, reason=reason, actor=actor_of(ctx)))
    return tool_result(r, render.lifecycle(r, "Revoked"))


@tool(IDEMPOTENT, "Reinstate a note")
async def reinstate(
    ctx: Context,
    target_id: TargetId,
    reason: Reason,
) -> Annotated[CallToolResult, LifecycleChange]:
    """Undo a revocation or supersession that was itself a mistake: the note becomes current again and its
    history says so. Reinstating one of two corrections' supersedes events makes the chain contested."""
    await permit_ids(ctx, "reinstate", [target_id], write=True)
    r = await call(ctx, "reinstate", lambda m: m.reinstate(target_id=target_id, reason=reason, actor=actor_of(ctx)))
    return tool_result(r, render.lifecycle(r, "Reinstated"))


@tool(READ_ONLY, "Recall chains", mcp_app.CHAINS_TOOL_META)
async def recall_chains(
    ctx: Context,
    query: Query,
    scope: Scope = None,
    budget_tokens: Budget = 2000,
    max_chains: Annotated[int | None, Field(description="At most this many chains.", ge=1, le=MAX_CHAINS)] = None,
    include_history: Annotated[bool, Field(description="Deliver what the current notes replaced.")] = True,
    as_of: AsOf = None,
    min_entries: Annotated[
        int,
        Field(
            description="Bring in at least this many of the best-matching notes, however loosely they match (0: only close matches).",
            ge=0,
            le=MAX_ENTRIES,
        ),
    ] = 0,
) -> Annotated[CallToolResult, RecallResult]:
    """Look up memory before answering from it. Returns chains: each claim's current note(s) first (NOW),
    the notes they rest on, however far back (NEEDS, current too), then what they replaced (HISTORY,
    not current), within a token budget; what did not fit or only repeated another chain is listed, and a
    HISTORY note cut to fit is marked clipped (`history` reads it whole).

    Only notes close to the query in meaning or sharing its words come back, so a question about a long
    conversation history may find few or none: to look deeper, pass `min_entries` (e.g. 10) and the best
    candidates come back whatever their similarity, each with its chain; then judge what is relevant."""
    named = scope_named(ctx, scope)
    scope = await granted_scope(ctx, scope, "recall_chains")
    r = await call(ctx, "recall_chains", lambda m: m.recall(query=query, scope=scope, budget_tokens=budget_tokens,
                   max_chains=max_chains, include_history=include_history, as_of=as_of, named=named,
                   min_entries=min_entries))  # fmt: skip
    return linked(tool_result(r, render.recall(r)), r.chains)


@tool(READ_ONLY, "Why is a note excluded")
async def why_excluded(
    ctx: Context,
    note_id: NoteId,
    query: Annotated[
        str | None, Field(description="Replay this recall to see where the note fell out.", max_length=MAX_QUERY)
    ] = None,
    scope: Scope = None,
    budget_tokens: Budget = 2000,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, Exclusion]:
    """Explain why a note is not delivered as current: its state (superseded by whom, when, why), scope,
    validity window, retrieval rank and score, or the budget, and what stands in its place."""
    await permit_ids(ctx, "why_excluded", [note_id], write=False)
    scope = await granted_scope(ctx, scope, "why_excluded")
    r = await call(ctx, "why_excluded", lambda m: m.why_excluded(note_id=note_id, query=query, scope=scope,
                   budget_tokens=budget_tokens, as_of=as_of))  # fmt: skip
    return tool_result(r, render.exclusion(r))


@tool(READ_ONLY, "Note history", mcp_app.CHAINS_TOOL_META)
async def history(ctx: Context, note_id: NoteId, as_of: AsOf = None) -> Annotated[CallToolResult, NoteHistory]:
    """Show one note with its whole chain and every lifecycle event (who, when, why), oldest first, with
    the edges other notes point at it (a note that depends on it or states another fact) and those notes."""
    await permit_ids(ctx, "history", [note_id], write=False)
    r = await call(ctx, "history", lambda m: m.history(note_id=note_id, as_of=as_of))
    return linked(tool_result(r, render.history(r)), [r.chain], chain_of=note_id)


@tool(IDEMPOTENT, "Link two notes")
async def link(
    ctx: Context,
    src_id: NoteId,
    dst_id: NoteId,
    kind: Annotated[
        Literal["depends_on", "refines", "supersedes", "distinct"],
        Field(
            description="depends_on: src needs dst to make sense (dst travels with src in recall); refines: src adds detail to dst (both stay current); supersedes: src, already stored, replaces dst (a reason is required); distinct: src states another fact than dst, though it looks like a new value of it (both stay current, neither is marked possibly outdated by the other)."
        ),
    ],
    reason: Annotated[str | None, Field(description="Why; required for supersedes.", max_length=MAX_REASON)] = None,
) -> Annotated[CallToolResult, Linked]:
    """Relate two stored notes: one depends on another (its prerequisite travels with it in recall), refines
    it, or replaces it (use this when `remember` showed that the note you just stored updates an older one),
    or states another fact than it (when a likely update or a POSSIBLY OUTDATED mark was wrong)."""
    await permit_ids(ctx, "link", [src_id, dst_id], write=True)
    r = await call(
        ctx,
        "link",
        lambda m: m.link(src_id=src_id, dst_id=dst_id, kind=kind, reason=reason, actor=actor_of(ctx)),
    )
    return tool_result(r, render.linked(r))


@tool(DESTRUCTIVE, "Forget a note (erase)")
async def forget(ctx: Context, note_id: NoteId, reason: Reason) -> Annotated[CallToolResult, Forgotten]:
    """Delete a note for real, with the events that name it: only when a person asks for data to be
    erased. To mark a note wrong, use `revoke`; to replace it, `correct`. The note is gone for every
    reader when this answers; `erasure` says whether its text is off the store's files yet."""
    await permit_ids(ctx, "forget", [note_id], write=True)
    r = await call(ctx, "forget", lambda m: m.forget(note_id=note_id, reason=reason, actor=actor_of(ctx)))
    return tool_result(r, render.forgotten(r))


@tool(READ_ONLY, "List scopes")
async def scopes(
    ctx: Context,
    offset: Annotated[int, Field(description="Skip this many (the previous page's next_offset).", ge=0)] = 0,
    limit: Annotated[int, Field(description="How many to return.", ge=1, le=PAGE_MAX)] = 100,
    contains: Annotated[
        str | None, Field(description="Only scopes whose name contains this, in any case.", max_length=SCOPE_MAX)
    ] = None,
) -> Annotated[CallToolResult, ScopeList]:
    """List the store's scopes, the most recently changed first, a page at a time (`offset`, `limit`),
    each with its number of notes and events and when it last changed; `contains` finds one by part of
    its name. Also says which scope this session uses when a call names none."""
    default: str | None = await scope_for(ctx, None)
    grant = grant_of(ctx)
    visible = None if grant is None else grant.may_read
    if visible is not None and default is not None and not visible(default):
        default = None  # its counts are not this caller's to see
    r = await call(ctx, "scopes", lambda m: m.scope_page(offset, limit, contains, default, visible))
    if grant is not None:
        audit.info("%s listed %d of %d granted scopes (scopes)", grant.name, len(r.scopes), r.total)
    return tool_result(r, render.scopes(r))


# -- looking through a memory: list_notes and changes (store/browse.py) ------------------


@tool(READ_ONLY, "List a scope's notes")
async def list_notes(
    ctx: Context,
    scope: Scope = None,
    state: Annotated[
        StateFilter,
        Field(description="current: notes in force; history: superseded, revoked, expired or pending; all."),
    ] = "all",
    offset: Annotated[int, Field(description="Skip this many (the previous page's next_offset).", ge=0)] = 0,
    limit: Annotated[int, Field(description="How many to return.", ge=1, le=PAGE_MAX)] = 50,
    as_of: AsOf = None,
) -> Annotated[CallToolResult, NoteList]:
    """List a scope's notes newest first, page by page, with how many are in each state. Use it to look
    through a memory as a whole (to answer from it, call `recall_chains`)."""
    named = scope_named(ctx, scope)
    scope = await granted_scope(ctx, scope, "list_notes")
    r = await call(ctx, "list_notes", lambda m: m.list_notes(scope=scope, state=state, offset=offset,
                   limit=limit, as_of=as_of, named=named))  # fmt: skip
    return tool_result(r, render.note_list(r))


@tool(READ_ONLY, "What changed since")
async def changes(
    ctx: Context,
    since: Annotated[datetime, Time, Field(description="List what changed after this time (ISO 8601).")],
    scope: Scope = None,
    limit: Annotated[int, Field(description="How many to return.", ge=1, le=PAGE_MAX)] = 50,
) -> Annotated[CallToolResult, Changes]:
    """What was corrected, revoked, reinstated, forgotten or confirmed in a scope since a time, newest first,
    each with its chain's current note, and the scope's settings made since (a subject declared to hold
    one value or withdrawn, check_every). Call it when resuming work, before relying on what you knew then."""
    named = scope_named(ctx, scope)
    scope = await granted_scope(ctx, scope, "changes")
    r = await call(ctx, "changes", lambda m: m.changes(since=since, scope=scope, limit=limit, named=named))
    return tool_result(r, render.changes(r))
