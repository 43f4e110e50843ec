"""The MCP server: what it says to a client on connecting, its tools (tools.py), resources and
prompts registered in one place, and the session hooks. No retrieval logic."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any

import anyio.to_thread
from corrigenda.store import CorrigendaError, Memory
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp_types import CallToolResult, EmptyResult, Icon, InputRequiredResult, SetLevelRequestParams
from mcp_types import Resource as MCPResource
from mcp_types import Tool as MCPTool
from pydantic import Field, ValidationError

from . import http, mcp_app, render, schemas
from .access import AppContext, app_of, forget_session_scope, granted_scope, on_store, permit, permit_ids
from .config import DB_DEFAULT, Settings, build_memory, db_origin, missing_store, package_version
from .errors import invalid_arguments, prompt_error
from .grants import Grants
from .grants import load as load_grants
from .sdk import lowlevel
from .tools import TOOLS
from .tools_links import CHAIN_URI, NOTE_URI
from .tools_truth import confirm as confirm  # registers its tools in TOOLS

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
corrigenda is a long-term memory in which corrections are first-class.

Capture protocol:
- Call `remember` for a durable fact, decision, preference or procedure worth keeping across sessions.
  It answers with `similar_active`: the closest current notes. If one of them states an older or
  different value of the same fact, do not leave both standing: call `correct` on that note with the
  new text and a reason; or, since your new note is already stored, `link` it to the old one with
  kind `supersedes`. When the new note looks like a new value of an active one, the answer also lists it
  under `likely_updates`, with why and the exact `link` call; check it and make the call (nothing is
  linked on a guess), or if they are different facts, `link` them with kind `distinct`. When you know
  beforehand that you are updating a fact, call `correct` instead of `remember` (or pass
  `supersedes=[id]`).
- When a subject holds one value (a setting, a version, someone's current role), pass its `subject` and
  `one_value: true` to `remember`: from then on each `remember` of that subject replaces its current note in
  the same call, and says what it replaced and how to undo it.
- When you learn a stored note is wrong and there is no replacement, call `revoke` with a reason.
- When a revocation or correction was itself a mistake, call `reinstate` (note id or event id).
- When you checked a note you relied on and it still holds, call `confirm` on it (a note marked UNCHECKED
  asks for that check).
- Use `link` to record that a note depends on another (`depends_on`) or adds detail to it (`refines`).

Recall protocol:
- Call `recall_chains` before answering from memory. Each chain leads with its NOW notes (current);
  HISTORY notes were superseded or revoked and must not be used as current facts. A CONTESTED chain
  has several current notes that disagree: resolve it (ask, or correct one). A chain marked POSSIBLY
  OUTDATED has a newer note elsewhere in the result filed under the same subject with another value
  and no edge between them: a suspicion, which never changes the order. Check which holds and link
  them: `supersedes` if the newer replaces the old one, `distinct` if they are different facts (the
  mark then goes).
- `why_excluded` says why a note you expected is not current or not delivered.
- `forget` deletes a note for real; use it only when a person asks for data to be erased.

Scopes: every note lives in a scope (a user, project or agent). A call that names no scope uses
this session's default scope: {scope_line} `scopes` lists every scope with its counts.
"""

# What a client shows beside the server's name (the spec's `Implementation.description`).
DESCRIPTION = "Long-term memory for agents in which corrections are first-class: recall delivers each fact's current value with what it replaced, and why."

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

# How long a stopping server waits for the erasures its forgets left under way (object storage) and
# for a compaction it is running.
SHUTDOWN_WAIT = 60.0


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

    async def list_resources(self) -> list[MCPResource]:
        """The SDK's list, with the size of each resource whose size is known (a client shows it, and can
        tell what reading it adds to a context)."""
        sizes = mcp_app.sizes()
        return [r.model_copy(update={"size": sizes.get(r.uri, r.size)}) for r in await super().list_resources()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[AppContext, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """The SDK's call, with arguments the schema refuses reported through `errors`, one line; each
        call logged at INFO with how long it took (behind a load balancer, which server was slow)."""
        started = time.perf_counter()
        outcome = "failed"
        try:
            if context is not None and name in TOOLS and TOOLS[name].annotations.read_only_hint:
                refuse_a_read_of_no_store(context.request_context.lifespan_context.settings)
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


def refuse_a_read_of_no_store(settings: Settings, refuse: Callable[[str], Exception] = ToolError) -> None:
    """A read of a store that is not there at a path someone named (--db, CORRIGENDA_DB) says so rather
    than make it (config.missing_store): a mistyped path must not answer as an empty memory. At the
    default path it is a new user's first call, which answers empty like any new project's scope."""
    missing = missing_store(settings)
    if missing is not None and db_origin(settings) != DB_DEFAULT:
        raise refuse(
            f"{missing}, as the server was started: nothing was ever remembered in it (a mistyped path?). "
            "`remember` makes it; no read does"
        )


class SessionHooks:
    """Server middleware (the SDK's public hook on every inbound message) for two notifications: when
    the handshake is done, the model loads in the background, so that `initialize` never waits for it
    and the first tool call rarely does; then what the process holds for good (torch, the model,
    LanceDB: ~590,000 objects) is taken out of the garbage collector's full passes, which took ~300 ms
    each with it and paused calls (docs/scale.md, "Scale"). When a session's roots change, its next
    call resolves its scope again."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized":
            if missing_store(ctx.lifespan_context.settings) is None:  # warming opens the store: a read
                ctx.lifespan_context.memory.warm(then=gc.freeze)
        elif ctx.method == "notifications/roots/list_changed":
            forget_session_scope(ctx.lifespan_context, ctx.session)
        return result


# -- resources and prompts: the same reads for a client to show a person or attach -----------------


async def read(ctx: Context, work: Callable[[Memory], str]) -> str:
    refuse_a_read_of_no_store(app_of(ctx).settings, ResourceError)
    try:
        return await on_store(ctx, work)
    except CorrigendaError as exc:
        raise ResourceError(str(exc)) from exc


async def note_resource(note_id: str, ctx: Context) -> str:
    await permit_ids(ctx, "resource note", [note_id], write=False, refuse=ResourceError)
    return await read(ctx, lambda m: render.history(m.history(note_id)))


async def chain_resource(note_id: str, ctx: Context) -> str:
    await permit_ids(ctx, "resource chain", [note_id], write=False, refuse=ResourceError)
    return await read(ctx, lambda m: "\n".join(render.chain(m.history(note_id).chain)))


async def recent_resource(scope: str, ctx: Context) -> str:
    scope = permit(ctx, scope, False, "resource recent", refuse=ResourceError)
    return await read(ctx, lambda m: render.note_list(m.list_notes(scope=scope, limit=RECENT)))


PromptScope = Annotated[
    str | None, Field(description="The scope to recall from or write to; omitted: the session's default scope.")
]


async def recall_before_answering(
    question: Annotated[str, Field(description="The question to answer from memory, in the user's words.")],
    ctx: Context,
    scope: PromptScope = None,
) -> str:
    """Answer a question from memory: recall the chains first, use current notes, say what changed."""
    where = await granted_scope(ctx, scope, "prompt recall_before_answering", refuse=prompt_error)
    return RECALL_PROMPT.format(question=question, scope=where)


async def record_correction(
    wrong: Annotated[str, Field(description="The statement stored in memory that is wrong, as it was said.")],
    right: Annotated[str, Field(description="What is true instead: the corrected statement.")],
    reason: Annotated[str, Field(description="Why it changed; kept with the correction as its reason.")],
    ctx: Context,
    scope: PromptScope = None,
) -> str:
    """Record that something stored is wrong: find the note, correct it (or revoke it), keep the reason."""
    where = await granted_scope(ctx, scope, "prompt record_correction", write=True, refuse=prompt_error)
    return CORRECTION_PROMPT.format(wrong=wrong, right=right, reason=reason, scope=where)


def build_server(
    settings: Settings,
    memory_factory: Callable[[Settings], Memory] = build_memory,
    working_directory: str | None = None,
    environment: Mapping[str, str] | None = None,
    owns_store: bool = True,
) -> MCPServer[AppContext]:
    """The server with every tool, resource and prompt; the lifespan owns the store unless `owns_store` is
    False (the shared engine's, engine.py, outlives each client). `working_directory`: where the process
    started, the folder whose project a session with no root nor --project uses; `environment`: the
    client's variables project.py reads (its own process's when None). GrantsError if the grants file
    cannot be used."""
    grants: Grants | None = None  # None: every caller is the local user (stdio, or HTTP without credentials)
    if settings.transport == "http" and http.authenticates(settings):
        token = settings.token.get_secret_value() if settings.token else None
        grants = load_grants(settings.grants, token, oauth=settings.oauth_issuer is not None)
    lifespan = _lifespan(settings, memory_factory, grants, working_directory, environment, owns_store)

    scope_line = SCOPE_OF_PROJECT if settings.scope is None else CONFIGURED_SCOPE.format(scope=settings.scope)
    icons = mcp_app.icons()
    server = CorrigendaServer(
        "corrigenda", title="corrigenda", description=DESCRIPTION, icons=icons,
        instructions=INSTRUCTIONS.replace("{scope_line}", scope_line), version=package_version(),
        lifespan=lifespan, log_level=settings.log_level, extensions=[mcp_app.extension()], middleware=[SessionHooks()],
        **http.auth(settings, grants), **http.request_state(settings),
    )  # fmt: skip

    async def on_set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        # A client's level filters the log notifications sent to that client, and this server sends none.
        # It never reaches the server's own logs: any credential, a read-only one too, could otherwise
        # switch off the audit log of the whole process. Those follow CORRIGENDA_LOG_LEVEL alone.
        return EmptyResult()

    lowlevel(server).add_request_handler("logging/setLevel", SetLevelRequestParams, on_set_level)
    _register(server, icons)
    return server


def _lifespan(
    settings: Settings,
    memory_factory: Callable[[Settings], Memory],
    grants: Grants | None,
    working_directory: str | None,
    environment: Mapping[str, str] | None,
    owns_store: bool,
) -> Callable[[MCPServer[AppContext]], AbstractAsyncContextManager[AppContext]]:
    """build_server's lifespan: the store made by `memory_factory` and the context every call reads; on
    stopping, the upkeep under way finished first when the store is the server's own (`owns_store`)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppContext]) -> AsyncIterator[AppContext]:
        memory = memory_factory(settings)
        try:
            yield AppContext(
                memory=memory, settings=settings, grants=grants, working_directory=working_directory,
                environment=environment,
            )  # fmt: skip
        finally:
            # On object storage a forget answers before its erasure is done, and a compaction holds the
            # upkeep lease every server's erasures wait for: finish both before stopping.
            with anyio.CancelScope(shield=True):
                if owns_store and not await anyio.to_thread.run_sync(memory.finish_upkeep, SHUTDOWN_WAIT):
                    log.warning("stopping with upkeep under way; the next upkeep, on any server, finishes it")

    return lifespan


def _register(server: MCPServer[AppContext], icons: list[Icon]) -> None:
    """Every tool (tools.TOOLS), resource and prompt, registered with `server`, each with the server's icons."""
    for name, tool in TOOLS.items():
        server.add_tool(
            tool.fn, name=name, title=tool.title, description=tool.description, annotations=tool.annotations,
            icons=icons, meta=tool.meta,
        )  # fmt: skip

    any_scope = ResourceSecurity(exempt_params={"scope"})  # a scope is a name, never a path on disk
    server.resource(NOTE_URI, name="note", title="A note and its history", mime_type="text/plain", icons=icons,
                    description="One note with its chain and every lifecycle event (who, when, why).")(note_resource)  # fmt: skip
    server.resource(CHAIN_URI, name="chain", title="A note's chain", mime_type="text/plain", icons=icons,
                    description="The chain a note belongs to, as recall delivers it: NOW, NEEDS, HISTORY.")(chain_resource)  # fmt: skip
    server.resource("corrigenda://scopes/{scope}/recent", name="recent", title="A scope's recent notes",
                    mime_type="text/plain", security=any_scope, icons=icons,
                    description="The newest notes of a scope (percent-encode the scope), current and history.")(recent_resource)  # fmt: skip
    server.prompt(name="recall_before_answering", title="Recall before answering", icons=icons)(recall_before_answering)
    server.prompt(name="record_correction", title="Record a correction", icons=icons)(record_correction)
