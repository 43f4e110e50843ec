"""What a call may touch, and as whom: the session's scope, the caller's grant and the audit line,
the actor its writes record, and store work run off the event loop. Every tool, resource and prompt
goes through these (tools.py, app.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

import anyio.to_thread
from corrigenda.store import CorrigendaError, Memory
from corrigenda.store.model import agent_actor, credential_actor
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from . import project, roots
from .config import Settings, missing_store
from .errors import readable_scopes_only, tool_errors
from .grants import Grant, Grants, NotGranted, admit

log = logging.getLogger(__name__)
audit = logging.getLogger("corrigenda.audit")  # who read and wrote which scope: never a note's text
T = TypeVar("T")


@dataclass
class AppContext:
    """What every call of one server shares: the store, the settings, the credentials' grants (None:
    every caller is the local user: stdio, or HTTP without credentials) and each session's scope."""

    memory: Memory
    settings: Settings
    grants: Grants | None = None
    session_scopes: WeakKeyDictionary[Any, tuple[str, str]] = field(default_factory=WeakKeyDictionary)
    working_directory: str | None = None  # where the process started: the last folder a scope comes from
    environment: Mapping[str, str] | None = None  # the client's variables project.py reads; None: the process's


def app_of(ctx: Context) -> AppContext:
    app: AppContext = ctx.request_context.lifespan_context  # type: ignore[assignment]
    return app


async def call(ctx: Context, tool: str, work: Callable[[Memory], T]) -> T:
    """Run store work off the event loop (`on_store`), with store errors turned into tool errors."""
    with tool_errors(tool):
        return await on_store(ctx, work)


async def on_store(ctx: Context, work: Callable[[Memory], T]) -> T:
    """Run store work off the event loop; a scope it finds holding nothing is refused naming only scopes
    the caller may read (errors.readable_scopes_only)."""
    grant = grant_of(ctx)
    may_read = grant.may_read if grant is not None else None

    def confined(memory: Memory) -> T:
        with readable_scopes_only(may_read):
            return work(memory)

    return await anyio.to_thread.run_sync(confined, app_of(ctx).memory)


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    """A tool's result: the text the model reads, and the same as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=model.model_dump(mode="json")
    )


def scope_named(ctx: Context, given: str | None) -> bool:
    """Whether a call's scope was named (by the call, or in the server's configuration), where a scope that
    holds nothing is most often a typo; else the session derived it from its project, and it is new."""
    return given is not None or app_of(ctx).settings.scope is not None


async def scope_for(ctx: Context, given: str | None) -> str:
    """The scope a call names, else the configured one, else the session's project's (project.py)."""
    if given is not None:
        return given
    app = app_of(ctx)
    if app.settings.scope is not None:
        return app.settings.scope
    session = ctx.request_context.session
    connection = connection_of(session)
    if connection not in app.session_scopes:
        root = await roots.first_root(session)

        def stored() -> list[str]:  # a store not made yet holds no scope: reading it would make it
            return [] if missing_store(app.settings) else [c.scope for c in app.memory.scopes()]

        with tool_errors("the session's scope"):
            app.session_scopes[connection] = await anyio.to_thread.run_sync(
                project.resolve, app.settings.project, root, stored, app.working_directory, app.environment
            )
        log.info("session scope %r, from %s", *app.session_scopes[connection])
    return app.session_scopes[connection][0]


def connection_of(session: Any) -> Any:
    """The client's connection, which a session's scope is kept for: the SDK (2.3) makes a ServerSession
    for each request, over the one Connection of the client, which it names only privately. Without it,
    the session itself (tests/server/test_project.py asks roots/list once per connection)."""
    return getattr(session, "_connection", session)


def forget_session_scope(app: AppContext, session: Any) -> None:
    """The session's roots changed: its next call resolves its scope again."""
    app.session_scopes.pop(connection_of(session), None)


def grant_of(ctx: Context) -> Grant | None:
    """The calling credential's grant (grants.py); None for the local user, who may do anything."""
    grants = app_of(ctx).grants
    token = get_access_token()
    if grants is None or token is None:
        return None
    return grants.named(token.client_id) or Grant(token.client_id)  # a name no longer granted: nothing


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


def actor_of(ctx: Context) -> str | None:
    """The actor recorded for what this call writes: the credential's name with the client's beside
    it ('ada via claude-code'), else the client's name."""
    grant = grant_of(ctx)
    return client_name(ctx) if grant is None else credential_actor(grant.name, client_name(ctx))


def answerer_of(ctx: Context) -> str:
    """The actor recorded for the person's answer to a question this call asked (an elicitation): the
    caller, as for what the call writes. A credential's answer is the credential's ('ada via
    claude-code'): the configured person ('person:NAME') runs the server, and is the answerer only for
    the local user, who holds no credential."""
    grant = grant_of(ctx)
    return app_of(ctx).settings.person_actor if grant is None else credential_actor(grant.name, client_name(ctx))


Refuse = Callable[[str], Exception]  # what a refusal is raised as: ToolError, ResourceError, errors.prompt_error


def permit(
    ctx: Context, scope: str, write: bool, tool: str, target: str | None = None, refuse: Refuse = ToolError
) -> str:
    """The scope as the store names it, once the caller may read (or write) it (grants.admit); else
    raise `refuse` naming it. The access goes to the audit log either way (a credential's calls only:
    the local user is not audited)."""
    try:
        return admit(grant_of(ctx), scope, write, f"{tool} {target}" if target else tool)
    except NotGranted as exc:
        raise refuse(f"{exc} (the server's grants file); nothing was done") from None
    except CorrigendaError as exc:
        raise refuse(str(exc)) from None


async def granted_scope(
    ctx: Context, given: str | None, tool: str, write: bool = False, refuse: Refuse = ToolError
) -> str:
    """`scope_for`, as the store names it, once the caller is found to hold a grant for it."""
    return permit(ctx, await scope_for(ctx, given), write, tool, refuse=refuse)


async def permit_ids(ctx: Context, tool: str, ids: list[str], write: bool, refuse: Refuse = ToolError) -> None:
    """`permit` for the scope of each note or event id a call names (looked up only for a credential)."""
    if grant_of(ctx) is None:
        return
    for target in ids:
        scope = await call(ctx, tool, partial(Memory.scope_of, target_id=target))
        permit(ctx, scope, write, tool, target, refuse)
