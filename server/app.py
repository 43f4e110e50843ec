"""The MCP server: tool signatures, descriptions, annotations and transports. No retrieval logic."""

from __future__ import annotations

import gc
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Any, Literal, TypeVar
from weakref import WeakKeyDictionary

import anyio.to_thread
from corrigenda.store import CorrigendaError, Draft, Memory, RetrievalSettings, SentenceTransformerEmbedder
from corrigenda.store.browse import PAGE_MAX
from corrigenda.store.errors import InvalidArgument
from corrigenda.store.model import (
    MAX_KIND,
    MAX_REASON,
    MAX_SOURCE,
    MAX_SUBJECT,
    MAX_TAG,
    MAX_TAGS,
    MAX_TEXT,
    agent_actor,
    check_time,
    credential_actor,
)
from corrigenda.store.views import (
    Changes,
    Confirmed,
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
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.elicitation import AcceptedElicitation, DeclinedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp_types import (
    CallToolResult,
    EmptyResult,
    InputRequiredResult,
    NotificationParams,
    SetLevelRequestParams,
    TextContent,
    ToolAnnotations,
)
from mcp_types import Tool as MCPTool
from pydantic import BaseModel, BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from . import http, mcp_app, project, render, roots, schemas
from .config import ScopeName, Settings, package_version
from .errors import invalid_arguments, tool_errors
from .grants import Grant, Grants
from .grants import load as load_grants

log = logging.getLogger(__name__)
audit = logging.getLogger("corrigenda.audit")  # who read and wrote which scope: never a note's text

INSTRUCTIONS = """\
corrigenda is a long-term memory in which corrections are first-class.

Capture protocol:
- Call `remember` for a durable fact, decision, preference or procedure worth keeping across sessions.
  It answers with `similar_active`: the closest current notes. If one of them states an older or
  different value of the same fact, do not leave both standing: call `correct` on that note with the
  new text and a reason; or, since your new note is already stored, `link` it to the old one with
  kind `supersedes`. When the new note looks like a new value of an active one, the answer also lists it
  under `likely_updates`, with why and the exact `link` call; check it and make the call (nothing is
  linked on a guess). When you know beforehand that you are updating a fact, call `correct` instead of
  `remember` (or pass `supersedes=[id]`).
- When you learn a stored note is wrong and there is no replacement, call `revoke` with a reason.
- When a revocation or correction was itself a mistake, call `reinstate` (note id or event id).
- Use `link` to record that a note depends on another (`depends_on`) or adds detail to it (`refines`).

Recall protocol:
- Call `recall_chains` before answering from memory. Each chain leads with its NOW notes (current);
  HISTORY notes were superseded or revoked and must not be used as current facts. A CONTESTED chain
  has several current notes that disagree: resolve it (ask, or correct one). A chain marked POSSIBLY
  OUTDATED has a newer note elsewhere in the result that looks like the same fact with a different
  value and no edge: prefer the newer, and link them if it does replace the old one.
- `why_excluded` says why a note you expected is not current or not delivered.
- `forget` deletes a note for real; use it only when a person asks for data to be erased.

Scopes: every note lives in a scope (a user, project or agent). A call that names no scope uses
this session's default scope: {scope_line} `scopes` lists every scope with its counts.
"""

CONFIGURED_SCOPE = "'{scope}', set in the server's configuration."
SCOPE_OF_PROJECT = (
    "the scope of your project (its folder name and a short hash of its path: the project folder set in "
    "the server's configuration, else your workspace root), or 'default' when there is none; each result "
    "names the scope it used."
)

RECENT = 20  # notes in a scope's recent-notes resource

RECALL_PROMPT = """\
Before you answer, call `recall_chains` with a query for this question in scope {scope!r}.
Answer from the NOW notes of the chains it returns (and the NEEDS notes they rest on). HISTORY notes
were replaced or withdrawn: never state them as current, though you may say what changed and why.
If a chain is CONTESTED, say that its current notes disagree. If nothing relevant comes back, say that
memory holds nothing on it rather than guessing.

Question: {question}"""

CORRECTION_PROMPT = """\
Something stored in memory (scope {scope!r}) is wrong and must be corrected, keeping the old value as history.
Wrong: {wrong}
Right: {right}
Reason: {reason}

1. Call `recall_chains` with a query for the wrong statement, and find the NOW note that states it.
2. Call `correct` on that note id with the right text and the reason. If the note is no longer current,
   the error names the current one: correct that one instead.
3. If no note states it, call `remember` with the right text. If the right answer is that nothing holds
   any more, call `revoke` on the wrong note with the reason instead of correcting it.
Then say in one line what was corrected."""

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

Scope = Annotated[
    ScopeName,
    Field(description="Namespace (a user, project or agent; any name). Omit it for this session's default scope."),
]
NoteId = Annotated[str, Field(description="A note id returned by this server (n_…).", pattern=r"^n_[0-9a-z]{26}$")]
Reason = Annotated[
    str, Field(description="Why: kept with the event and shown with the history.", min_length=1, max_length=MAX_REASON)
]
Text = Annotated[
    str, Field(description="The note, self-contained: say what it is about.", min_length=1, max_length=MAX_TEXT)
]
Kind = Annotated[
    str, Field(description="fact, decision, preference, procedure, observation, …", min_length=1, max_length=MAX_KIND)
]
Subject = Annotated[
    str | None,
    Field(description="Optional key of what the note is about, e.g. 'service.port'.", max_length=MAX_SUBJECT),
]
Tags = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG)]], Field(description="Free labels.", max_length=MAX_TAGS)
]
Source = Annotated[
    str | None, Field(description="Where the note came from (file, URL, conversation).", max_length=MAX_SOURCE)
]
Confidence = Annotated[float, Field(description="How sure the writer is, 0 to 1.", ge=0.0, le=1.0)]


def iso_8601(value: object) -> datetime | None:
    """A time argument: an ISO 8601 string only (pydantic alone would also take 1 or "1" as seconds
    since 1970), inside what the store can write and read back (`model.check_time`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise PydanticCustomError(
            "iso_8601",
            "must be an ISO 8601 string such as 2026-11-01T09:00:00Z, not {kind}",
            {"kind": type(value).__name__},
        )
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError(
            "iso_8601", "'{value}' is not an ISO 8601 time such as 2026-11-01T09:00:00Z", {"value": value[:64]}
        ) from None
    try:
        check_time("time", moment)
    except InvalidArgument:
        raise PydanticCustomError(
            "time_range",
            "{value} is outside the supported range, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z in UTC",
            {"value": value[:64]},
        ) from None
    return moment


Time = BeforeValidator(iso_8601)
ValidFrom = Annotated[datetime | None, Time, Field(description="When it starts to hold in the world (ISO 8601).")]
ValidUntil = Annotated[
    datetime | None,
    Time,
    Field(description="When it stops holding (ISO 8601); after it the note is expired, not deleted."),
]
Budget = Annotated[int, Field(description="Token budget for the whole answer.", ge=50, le=100_000)]
AsOf = Annotated[datetime | None, Time, Field(description="Replay what the store believed at this time (ISO 8601).")]

LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING,
              "error": logging.ERROR, "critical": logging.CRITICAL, "alert": logging.CRITICAL,
              "emergency": logging.CRITICAL}  # fmt: skip

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class Answer(BaseModel):
    """The person's answer to "does the new note replace the older one?"."""

    answer: Literal["replaces", "refines", "keep both"] = Field(
        title="The new note…",
        description="replaces: the older note becomes history; refines: it adds detail, both stay current; "
        "keep both: they are different facts.",
    )


@dataclass(frozen=True)
class Question:
    """What the person is asked about a likely update: the message, and the older note it names."""

    message: str
    note_id: str


# (context, the note to be remembered, the scope the call names, the notes it supersedes) → the question
AskAbout = Callable[[Context, Draft, str | None, list[str]], Awaitable[Question | None]]


@dataclass
class AppContext:
    memory: Memory
    ask_about: AskAbout | None = None  # set when the ask_on_update setting is on


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
    """`remember`'s question to the person about the note its draft most likely replaces; None when the
    server is not set to ask, the client cannot ask, or nothing looks replaced. It stores nothing: the
    SDK may run it again on each round of one call."""
    app: AppContext = ctx.request_context.lifespan_context  # type: ignore[assignment]
    if app.ask_about is None or not can_elicit(ctx):
        return None
    draft = Draft(
        text=text, kind=kind, subject=subject, tags=tags, source=source, confidence=confidence,
        valid_from=valid_from, valid_until=valid_until,
    )  # fmt: skip
    return await app.ask_about(ctx, draft, scope, supersedes)


async def ask_person(question: Annotated[Question | None, Resolve(likely_update_question)]) -> Elicit[Answer] | None:
    """Ask the question, if there is one (the SDK sends it in the way the client's protocol version takes)."""
    return None if question is None else Elicit(question.message, Answer)


def person_answer(outcome: ElicitationResult[Answer]) -> str:
    """The answer to record: the person's choice, or that they declined or cancelled."""
    if isinstance(outcome, AcceptedElicitation):
        return str(outcome.data.answer)
    return "declined" if isinstance(outcome, DeclinedElicitation) else "cancelled"


def _result(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def client_name(ctx: Context) -> str | None:
    """The connected client's name (e.g. 'claude-ai'), as `model.agent_actor` keeps it: a client cannot
    pass for a person ('person:…') or for a credential ('… via …')."""
    try:
        params = ctx.request_context.session.client_params  # from `initialize`; absent without a handshake
        if params is None:
            return None
    except AttributeError:
        return None
    return agent_actor(str(params.client_info.name))


# How long a stopping server waits for the erasures its forgets left under way (object storage) and
# for a compaction it is running.
SHUTDOWN_WAIT = 60.0


def build_memory(settings: Settings) -> Memory:
    return Memory(
        settings.db,
        SentenceTransformerEmbedder(settings.model),
        settings=RetrievalSettings(min_similarity=settings.min_similarity),
        storage_options=settings.storage_options,
    )


class CorrigendaServer(MCPServer[AppContext]):
    async def list_tools(self) -> list[MCPTool]:
        """The SDK's list, with each result's schema outlined and the input fields' titles dropped
        (schemas.py says why)."""
        return [
            tool.model_copy(
                update={
                    "input_schema": schemas.untitled(tool.input_schema),
                    "output_schema": schemas.outline(tool.output_schema) if tool.output_schema else None,
                }
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppContext, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The SDK's call, with arguments the schema refuses reported through `errors`, one line; each
        call logged at INFO with how long it took (behind a load balancer, which server was slow)."""
        started = time.perf_counter()
        outcome = "failed"
        try:
            result = await super().call_tool(name, arguments, context)
            outcome = "answered"
            return result
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                raise
            if not isinstance(exc.__cause__, ValidationError):
                outcome = "answered with an error"  # a refusal, or "… failed inside the store" (logged)
                raise
            outcome = "refused its arguments"
            raise ToolError(invalid_arguments(name, exc.__cause__)) from exc.__cause__
        finally:
            log.info("%s %s in %.0f ms", name, outcome, (time.perf_counter() - started) * 1000)


def build_server(
    settings: Settings, memory_factory: Callable[[Settings], Memory] = build_memory
) -> MCPServer[AppContext]:
    """The server with every tool; the lifespan owns the store and starts the model loading."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppContext]) -> AsyncIterator[AppContext]:
        memory = memory_factory(settings)
        try:
            yield AppContext(memory=memory, ask_about=ask_about if settings.ask_on_update else None)
        finally:
            # On object storage a forget answers before its erasure is done, and a compaction holds the
            # upkeep lease every server's erasures wait for: finish both before stopping.
            with anyio.CancelScope(shield=True):
                if not await anyio.to_thread.run_sync(memory.finish_upkeep, SHUTDOWN_WAIT):
                    log.warning("stopping with upkeep under way; the next upkeep, on any server, finishes it")

    grants: Grants | None = None  # None: every caller is the local user (stdio, or HTTP without credentials)
    if settings.transport == "http" and http.authenticates(settings):
        token = settings.token.get_secret_value() if settings.token else None
        grants = load_grants(settings.grants, token, oauth=settings.oauth_issuer is not None)
    scope_line = SCOPE_OF_PROJECT if settings.scope is None else CONFIGURED_SCOPE.format(scope=settings.scope)
    server = CorrigendaServer(
        "corrigenda", instructions=INSTRUCTIONS.replace("{scope_line}", scope_line), version=package_version(),
        lifespan=lifespan, log_level=settings.log_level, extensions=[mcp_app.extension()], **http.auth(settings, grants),
    )  # fmt: skip
    session_scopes: WeakKeyDictionary[Any, tuple[str, str]] = WeakKeyDictionary()

    async def scope_for(ctx: Context, given: str | None) -> str:
        """The scope a call names, else the configured one, else the session's project's (project.py)."""
        if given is not None:
            return given
        if settings.scope is not None:
            return settings.scope
        session = ctx.request_context.session
        if session not in session_scopes:
            root = await roots.first_root(session) if settings.project is None else None
            memory: Memory = ctx.request_context.lifespan_context.memory  # type: ignore[attr-defined]
            with tool_errors("the session's scope"):
                session_scopes[session] = await anyio.to_thread.run_sync(
                    project.resolve, settings.project, root, lambda: [c.scope for c in memory.scopes()]
                )
            log.info("session scope %r, from %s", *session_scopes[session])
        return session_scopes[session][0]

    def grant_of(ctx: Context) -> Grant | None:
        """The calling credential's grant (grants.py); None for the local user, who may do anything."""
        token = get_access_token()
        if grants is None or token is None:
            return None
        return grants.named(token.client_id) or Grant(token.client_id)  # a name no longer granted: nothing

    def actor_of(ctx: Context) -> str | None:
        """The actor recorded for what this call writes: the credential's name with the client's beside
        it ('ada via claude-code'), else the client's name."""
        grant = grant_of(ctx)
        return client_name(ctx) if grant is None else credential_actor(grant.name, client_name(ctx))

    def permit(
        ctx: Context, scope: str, write: bool, tool: str, target: str | None = None,
        refuse: type[Exception] = ToolError,
    ) -> None:  # fmt: skip
        """Raise `refuse` naming the scope unless the caller may read (or write) it; log the access to
        the audit log either way (a credential's calls only: the local user is not audited)."""
        grant = grant_of(ctx)
        if grant is None:
            return
        what = f"{tool} {target}" if target else tool
        if not (grant.may_write(scope) if write else grant.may_read(scope)):
            audit.info("%s refused %s %s (%s)", grant.name, "write" if write else "read", scope, what)
            raise refuse(
                f"scope {scope!r}: credential {grant.name!r} may not {'write' if write else 'read'} it "
                "(the server's grants file); nothing was done"
            )
        audit.info("%s %s %s (%s)", grant.name, "wrote" if write else "read", scope, what)

    async def granted_scope(ctx: Context, given: str | None, tool: str, write: bool = False) -> str:
        """`scope_for`, once the caller is found to hold a grant for it."""
        scope = await scope_for(ctx, given)
        permit(ctx, scope, write, tool)
        return scope

    async def permit_ids(
        ctx: Context, tool: str, ids: list[str], write: bool, refuse: type[Exception] = ToolError
    ) -> None:
        """`permit` for the scope of each note or event id a call names (looked up only for a credential)."""
        if grant_of(ctx) is None:
            return
        for target in ids:
            scope = await call(ctx, tool, partial(Memory.scope_of, target_id=target))
            permit(ctx, scope, write, tool, target, refuse)

    async def ask_about(ctx: Context, draft: Draft, scope: str | None, supersedes: list[str]) -> Question | None:
        """The question about the note a remember would most likely replace (the first of its likely updates)."""
        where = await granted_scope(ctx, scope, "remember", write=True)
        found = await call(ctx, "remember", lambda m: m.likely_updates(draft, scope=where, supersedes=supersedes))
        return Question(render.update_question(draft, found[0]), found[0].note.id) if found else None

    async def on_roots_changed(ctx: Any, params: NotificationParams) -> None:
        session_scopes.pop(ctx.session, None)  # the next call asks again

    server._lowlevel_server.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, on_roots_changed
    )

    async def on_set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        # This server sends no log notifications: the level applies to what it writes to stderr.
        logging.getLogger("corrigenda").setLevel(LOG_LEVELS[params.level])
        return EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, on_set_level)

    async def on_initialized(ctx: Any, params: NotificationParams) -> None:
        # The handshake is done: load the model now, in the background, so that `initialize`
        # never waits for it and the first tool call rarely does. Then what the process holds for
        # good (torch, the model, LanceDB: ~590,000 objects) is taken out of the garbage collector's
        # full passes, which took ~300 ms each with it and paused calls (docs/scale.md, "Scale").
        ctx.lifespan_context.memory.warm(then=gc.freeze)

    server._lowlevel_server.add_notification_handler("notifications/initialized", NotificationParams, on_initialized)

    async def call(ctx: Context, tool: str, work: Callable[[Memory], T]) -> T:
        """Run store work off the event loop, with store errors turned into tool errors."""
        app: AppContext = ctx.request_context.lifespan_context  # type: ignore[assignment]
        memory = app.memory
        with tool_errors(tool):
            return await anyio.to_thread.run_sync(partial(work, memory))

    def tool(annotations: ToolAnnotations, title: str, meta: dict[str, Any] | None = None) -> Callable[[F], F]:
        """Register a tool; its docstring, dedented, is the description the model reads, its title
        the name a client shows a person, and `meta` its `_meta` (the app that draws its result)."""

        def register(fn: F) -> F:
            server.add_tool(
                fn, title=title, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations, meta=meta
            )
            return fn

        return register

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
            list[NoteId], Field(description="Notes this one replaces (known at capture time).", max_length=32)
        ] = [],  # noqa: B006
        depends_on: Annotated[
            list[NoteId], Field(description="Notes this one needs to make sense.", max_length=32)
        ] = [],  # noqa: B006
        reason: Annotated[
            str | None, Field(description="Why this note replaces those in `supersedes`.", max_length=MAX_REASON)
        ] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Store a durable note. Call it when you learn a fact, decision, preference or procedure worth
        keeping; to update a fact you know is stored, call `correct` instead. The answer lists
        `similar_active` notes: if your note updates one of them, `link` it with kind `supersedes` (this
        tool never links notes on its own guess); `likely_updates` names those that look replaced, with the call. The exact text of a current note returns that note."""
        draft = Draft(
            text=text, kind=kind, subject=subject, tags=tags, source=source, confidence=confidence,
            valid_from=valid_from, valid_until=valid_until,
        )  # fmt: skip
        scope = await granted_scope(ctx, scope, "remember", write=True)
        r = await call(ctx, "remember", lambda m: m.remember(draft, scope=scope, supersedes=supersedes,
                       depends_on=depends_on, reason=reason, actor=actor_of(ctx)))  # fmt: skip
        if question is not None and r.changed:
            r = await record_answer(ctx, r, question, person_answer(answer))
        return _result(r, render.remembered(r))

    async def record_answer(ctx: Context, r: Remembered, question: Question, answer: str) -> Remembered:
        """The person's answer recorded: replaces or refines link the new note to the older one, with the
        person as actor and the question as reason, if the older note is still among the likely updates
        of the note stored. An answer (not a decline or cancel) settles that proposal."""
        proposed = {u.note.id for u in r.likely_updates}
        event = None
        if answer in ("replaces", "refines") and question.note_id in proposed:
            kind = "supersedes" if answer == "replaces" else "refines"
            linked = await call(ctx, "remember", lambda m: m.link(src_id=r.note.id, dst_id=question.note_id,
                                kind=kind, reason=question.message, actor=settings.person_actor))  # fmt: skip
            event = linked.event
        left = r.likely_updates
        if answer in ("replaces", "refines", "keep both"):
            left = [u for u in r.likely_updates if u.note.id != question.note_id]
        confirmed = Confirmed(note_id=question.note_id, question=question.message, answer=answer, event=event)
        return r.model_copy(update={"confirmed": confirmed, "likely_updates": left})

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
            list[Annotated[str, Field(max_length=MAX_TAG)]] | None,
            Field(description="Defaults to the old note's tags.", max_length=MAX_TAGS),
        ] = None,
        source: Source = None,
        confidence: Confidence = 1.0,
        valid_from: ValidFrom = None,
        valid_until: ValidUntil = None,
        depends_on: Annotated[
            list[NoteId] | None,
            Field(description="Notes the corrected note needs; omit to keep what the old note needed.", max_length=32),
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
        return _result(r, render.corrected(r))

    @tool(IDEMPOTENT, "Revoke a note")
    async def revoke(ctx: Context, note_id: NoteId, reason: Reason) -> Annotated[CallToolResult, LifecycleChange]:
        """Mark a note as wrong when there is nothing to replace it with. If it was a correction, the note it
        replaced becomes current again. Calling it on an already revoked note changes nothing."""
        await permit_ids(ctx, "revoke", [note_id], write=True)
        r = await call(ctx, "revoke", lambda m: m.revoke(note_id=note_id, reason=reason, actor=actor_of(ctx)))
        return _result(r, render.lifecycle(r, "Revoked"))

    @tool(IDEMPOTENT, "Reinstate a note")
    async def reinstate(
        ctx: Context,
        target_id: Annotated[
            str,
            Field(
                description="A note id (undo whatever now excludes it) or the id of a revokes/supersedes event (retract just that).",
                pattern=r"^[ne]_[0-9a-z]{26}$",
            ),
        ],
        reason: Reason,
    ) -> Annotated[CallToolResult, LifecycleChange]:
        """Undo a revocation or supersession that was itself a mistake: the note becomes current again and its
        history says so. Reinstating one of two corrections' supersedes events makes the chain contested."""
        await permit_ids(ctx, "reinstate", [target_id], write=True)
        r = await call(ctx, "reinstate", lambda m: m.reinstate(target_id=target_id, reason=reason, actor=actor_of(ctx)))
        return _result(r, render.lifecycle(r, "Reinstated"))

    @tool(READ_ONLY, "Recall chains", mcp_app.CHAINS_TOOL_META)
    async def recall_chains(
        ctx: Context,
        query: Annotated[str, Field(description="What you want to know, in words.", min_length=1, max_length=4000)],
        scope: Scope = None,
        budget_tokens: Budget = 2000,
        max_chains: Annotated[int | None, Field(description="At most this many chains.", ge=1, le=200)] = None,
        include_history: Annotated[bool, Field(description="Deliver what the current notes replaced.")] = True,
        as_of: AsOf = None,
    ) -> Annotated[CallToolResult, RecallResult]:
        """Look up memory before answering from it. Returns chains: each claim's current note(s) first (NOW),
        the notes they rest on, however far back (NEEDS, current too), then what they replaced (HISTORY,
        not current), within a token budget; what did not fit or only repeated another chain is listed, and a
        HISTORY note cut to fit is marked clipped (`history` reads it whole)."""
        scope = await granted_scope(ctx, scope, "recall_chains")
        r = await call(ctx, "recall_chains", lambda m: m.recall(query=query, scope=scope, budget_tokens=budget_tokens,
                       max_chains=max_chains, include_history=include_history, as_of=as_of))  # fmt: skip
        return _result(r, render.recall(r))

    @tool(READ_ONLY, "Why is a note excluded")
    async def why_excluded(
        ctx: Context,
        note_id: NoteId,
        query: Annotated[
            str | None, Field(description="Replay this recall to see where the note fell out.", max_length=4000)
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
        return _result(r, render.exclusion(r))

    @tool(READ_ONLY, "Note history", mcp_app.CHAINS_TOOL_META)
    async def history(ctx: Context, note_id: NoteId, as_of: AsOf = None) -> Annotated[CallToolResult, NoteHistory]:
        """Show one note with its whole chain and every lifecycle event (who, when, why), oldest first."""
        await permit_ids(ctx, "history", [note_id], write=False)
        r = await call(ctx, "history", lambda m: m.history(note_id=note_id, as_of=as_of))
        return _result(r, render.history(r))

    @tool(IDEMPOTENT, "Link two notes")
    async def link(
        ctx: Context,
        src_id: NoteId,
        dst_id: NoteId,
        kind: Annotated[
            Literal["depends_on", "refines", "supersedes"],
            Field(
                description="depends_on: src needs dst to make sense (dst travels with src in recall); refines: src adds detail to dst (both stay current); supersedes: src, already stored, replaces dst (a reason is required)."
            ),
        ],
        reason: Annotated[str | None, Field(description="Why; required for supersedes.", max_length=MAX_REASON)] = None,
    ) -> Annotated[CallToolResult, Linked]:
        """Relate two stored notes: one depends on another (its prerequisite travels with it in recall), refines
        it, or replaces it (use this when `remember` showed that the note you just stored updates an older one)."""
        await permit_ids(ctx, "link", [src_id, dst_id], write=True)
        r = await call(
            ctx,
            "link",
            lambda m: m.link(src_id=src_id, dst_id=dst_id, kind=kind, reason=reason, actor=actor_of(ctx)),
        )
        return _result(r, render.linked(r))

    @tool(DESTRUCTIVE, "Forget a note (erase)")
    async def forget(ctx: Context, note_id: NoteId, reason: Reason) -> Annotated[CallToolResult, Forgotten]:
        """Delete a note for real, with the events that name it: only when a person asks for data to be
        erased. To mark a note wrong, use `revoke`; to replace it, `correct`. The note is gone for every
        reader when this answers; `erasure` says whether its text is off the store's files yet."""
        await permit_ids(ctx, "forget", [note_id], write=True)
        r = await call(ctx, "forget", lambda m: m.forget(note_id=note_id, reason=reason, actor=actor_of(ctx)))
        return _result(r, render.forgotten(r))

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
        return _result(r, render.scopes(r))

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
        scope = await granted_scope(ctx, scope, "list_notes")
        r = await call(ctx, "list_notes", lambda m: m.list_notes(scope=scope, state=state, offset=offset,
                       limit=limit, as_of=as_of))  # fmt: skip
        return _result(r, render.note_list(r))

    @tool(READ_ONLY, "What changed since")
    async def changes(
        ctx: Context,
        since: Annotated[datetime, Time, Field(description="List what changed after this time (ISO 8601).")],
        scope: Scope = None,
        limit: Annotated[int, Field(description="How many to return.", ge=1, le=PAGE_MAX)] = 50,
    ) -> Annotated[CallToolResult, Changes]:
        """What was corrected, revoked, reinstated or forgotten in a scope since a time, newest first, each with
        its chain's current note. Call it when resuming work, before relying on what you knew then."""
        scope = await granted_scope(ctx, scope, "changes")
        r = await call(ctx, "changes", lambda m: m.changes(since=since, scope=scope, limit=limit))
        return _result(r, render.changes(r))

    # -- resources and prompts: the same reads for a client to show a person or attach ----------

    async def read(ctx: Context, work: Callable[[Memory], str]) -> str:
        app: AppContext = ctx.request_context.lifespan_context  # type: ignore[assignment]
        try:
            return await anyio.to_thread.run_sync(partial(work, app.memory))
        except CorrigendaError as exc:
            raise ResourceError(str(exc)) from exc

    any_scope = ResourceSecurity(exempt_params={"scope"})  # a scope is a name, never a path on disk

    @server.resource("corrigenda://notes/{note_id}", name="note", title="A note and its history",
                     mime_type="text/plain",
                     description="One note with its chain and every lifecycle event (who, when, why).")  # fmt: skip
    async def note_resource(note_id: str, ctx: Context) -> str:
        await permit_ids(ctx, "resource note", [note_id], write=False, refuse=ResourceError)
        return await read(ctx, lambda m: render.history(m.history(note_id)))

    @server.resource("corrigenda://chains/{note_id}", name="chain", title="A note's chain", mime_type="text/plain",
                     description="The chain a note belongs to, as recall delivers it: NOW, NEEDS, HISTORY.")  # fmt: skip
    async def chain_resource(note_id: str, ctx: Context) -> str:
        await permit_ids(ctx, "resource chain", [note_id], write=False, refuse=ResourceError)
        return await read(ctx, lambda m: "\n".join(render.chain(m.history(note_id).chain)))

    @server.resource("corrigenda://scopes/{scope}/recent", name="recent", title="A scope's recent notes",
                     mime_type="text/plain", security=any_scope,
                     description="The newest notes of a scope (percent-encode the scope), current and history.")  # fmt: skip
    async def recent_resource(scope: str, ctx: Context) -> str:
        permit(ctx, scope, False, "resource recent", refuse=ResourceError)
        return await read(ctx, lambda m: render.note_list(m.list_notes(scope=scope, limit=RECENT)))

    @server.prompt(name="recall_before_answering", title="Recall before answering")
    async def recall_before_answering(question: str, ctx: Context, scope: str | None = None) -> str:
        """Answer a question from memory: recall the chains first, use current notes, say what changed."""
        where = await granted_scope(ctx, scope, "prompt recall_before_answering")
        return RECALL_PROMPT.format(question=question, scope=where)

    @server.prompt(name="record_correction", title="Record a correction")
    async def record_correction(wrong: str, right: str, reason: str, ctx: Context, scope: str | None = None) -> str:
        """Record that something stored is wrong: find the note, correct it (or revoke it), keep the reason."""
        where = await granted_scope(ctx, scope, "prompt record_correction", write=True)
        return CORRECTION_PROMPT.format(wrong=wrong, right=right, reason=reason, scope=where)

    return server
