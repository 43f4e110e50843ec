"""The tools that record what is true of a scope's subjects and notes beyond their lifecycle: that a
subject holds one value (store/subjects.py), that a current note was checked and still holds
(store/confirms.py). Registered in tools.TOOLS with the others."""

from __future__ import annotations

from typing import Annotated

from corrigenda.store.model import MAX_REASON, MAX_SUBJECT
from corrigenda.store.views import Declared, LifecycleChange
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from . import render
from .access import actor_of, granted_scope, permit_ids, tool_result
from .access import call as on_store
from .arguments import APPEND, IDEMPOTENT, NoteId, Scope
from .tools import tool


@tool(IDEMPOTENT, "Declare a subject's values")
async def declare_subject(
    ctx: Context,
    subject: Annotated[
        str, Field(description="What holds the value, e.g. 'payments.timeout'.", min_length=1, max_length=MAX_SUBJECT)
    ],
    one_value: Annotated[
        bool, Field(description="true: the subject holds one value in the scope; false: withdraw that.")
    ] = True,
    scope: Scope = None,
    reason: Annotated[str | None, Field(description="Why, kept with the declaration.", max_length=MAX_REASON)] = None,
) -> Annotated[CallToolResult, Declared]:
    """Declare that a subject holds one value in a scope (a setting, a version, someone's current role): from
    then on a `remember` with that subject replaces the subject's current note in the same call, instead of
    leaving two values standing. `one_value: false` withdraws it. Subjects that differ only by case, spaces
    or punctuation are one. Calling it again changes nothing."""
    where = await granted_scope(ctx, scope, "declare_subject", write=True)
    r = await on_store(ctx, "declare_subject", lambda m: m.declare_subject(subject, scope=where,
                       one_value=one_value, reason=reason, actor=actor_of(ctx)))  # fmt: skip
    return tool_result(r, render.declared(r))


@tool(APPEND, "Confirm a note still holds")
async def confirm(
    ctx: Context,
    note_id: NoteId,
    reason: Annotated[
        str | None, Field(description="How you checked, kept with the confirmation.", max_length=MAX_REASON)
    ] = None,
) -> Annotated[CallToolResult, LifecycleChange]:
    """Record that a current note was checked and still holds (who, when, how): recall, `history` and
    `list_notes` then show when it was last checked, and a scope that asks for a check every N days stops
    marking it UNCHECKED. Call it after you verified a note you relied on; if it no longer holds, call
    `correct` or `revoke` instead. A note that is history is refused, naming what is current."""
    await permit_ids(ctx, "confirm", [note_id], write=True)
    r = await on_store(ctx, "confirm", lambda m: m.confirm(note_id, reason=reason, actor=actor_of(ctx)))
    return tool_result(r, render.lifecycle(r, "Confirmed"))
