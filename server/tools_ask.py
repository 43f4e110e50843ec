"""Asking the person whether a new note replaces an older one (settings.ask_on_update): `remember`'s
question, found and asked before its body runs (the SDK's resolvers), and the answer recorded after. No
retrieval logic: the store finds the likely updates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from corrigenda.store import Draft
from corrigenda.store.views import Confirmed, Remembered
from mcp.server.elicitation import AcceptedElicitation, DeclinedElicitation, ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from . import render
from .access import answerer_of, app_of, call, granted_scope


class Answer(BaseModel):
    """The person's answer to "does the new note replace the older one?"."""

    answer: Literal["replaces", "refines", "keep both"] = Field(
        title="The new note…",
        description="replaces: the older note becomes history; refines: it adds detail, both stay current; "
        "keep both: they are different facts.",
    )


ANSWERED = {"replaces": "supersedes", "refines": "refines", "keep both": "distinct"}  # the edge each answer records


@dataclass(frozen=True)
class Question:
    """What the person is asked about a likely update: the message, and the older note it names."""

    message: str
    note_id: str


def can_elicit(ctx: Context) -> bool:
    """Whether the client declared form elicitation (a bare `elicitation: {}` counts, url-only does not)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


async def likely_update_question(
    ctx: Context,
    text: str,
    scope: str | None,
    kind: str,
    subject: str | None,
    tags: list[str],
    source: str | None,
    confidence: float,
    valid_from: datetime | None,
    valid_until: datetime | None,
    supersedes: list[str],
) -> Question | None:
    """`remember`'s question to the person about the note its draft most likely replaces (the first of its
    likely updates); None when the server is not set to ask, the client cannot ask, or nothing looks
    replaced. It stores nothing: the SDK may run it again on each round of one call."""
    if not app_of(ctx).settings.ask_on_update or not can_elicit(ctx):
        return None
    draft = Draft(
        text=text, kind=kind, subject=subject, tags=tags, source=source, confidence=confidence,
        valid_from=valid_from, valid_until=valid_until,
    )  # fmt: skip
    where = await granted_scope(ctx, scope, "remember", write=True)
    found = await call(ctx, "remember", lambda m: m.likely_updates(draft, scope=where, supersedes=supersedes))
    return Question(render.update_question(draft, found[0]), found[0].note.id) if found else None


async def ask_person(question: Annotated[Question | None, Resolve(likely_update_question)]) -> Elicit[Answer] | None:
    """Ask the question, if there is one (the SDK sends it in the way the client's protocol version takes)."""
    return None if question is None else Elicit(question.message, Answer)


def person_answer(outcome: ElicitationResult[Answer]) -> str:
    """The answer to record: the person's choice, or that they declined or cancelled."""
    if isinstance(outcome, AcceptedElicitation):
        return str(outcome.data.answer)
    return "declined" if isinstance(outcome, DeclinedElicitation) else "cancelled"


async def record_answer(ctx: Context, r: Remembered, question: Question, answer: str) -> Remembered:
    """The person's answer recorded: replaces, refines or keep both link the new note to the older one
    (supersedes, refines, distinct), with the caller as actor (`answerer_of`) and the question as
    reason, if the older note is still among the likely updates of the note stored. An answer (not a
    decline or cancel) settles that proposal."""
    proposed = {u.note.id for u in r.likely_updates}
    event = None
    if answer in ANSWERED and question.note_id in proposed:
        kind = ANSWERED[answer]
        linked = await call(ctx, "remember", lambda m: m.link(src_id=r.note.id, dst_id=question.note_id,
                            kind=kind, reason=question.message, actor=answerer_of(ctx)))  # fmt: skip
        event = linked.event
    left = r.likely_updates
    if answer in ANSWERED:
        left = [u for u in r.likely_updates if u.note.id != question.note_id]
    confirmed = Confirmed(note_id=question.note_id, question=question.message, answer=answer, event=event)
    return r.model_copy(update={"confirmed": confirmed, "likely_updates": left})
