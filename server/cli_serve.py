"""The commands that run no store command: `serve` and `ui` in this process, `install` and `engine`."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from corrigenda.store.storage.location import Location

from .cli_shared import Invocation, _fail, _resolve_scope
from .config import Settings, build_memory

if TYPE_CHECKING:
    from corrigenda.store import Memory
    from mcp.server.mcpserver import MCPServer


def install_entry(given: Invocation) -> int:
    """`corrigenda install CLIENT`: the entry written (or printed), what changed and what was kept."""
    from . import install

    args = given.args
    given_env = {"CORRIGENDA_DB": args.db, "CORRIGENDA_SCOPE": args.scope, "CORRIGENDA_MODEL": args.model}
    env = {name: value for name, value in given_env.items() if value}
    if args.db and Location.of(args.db).directory is not None:
        env["CORRIGENDA_DB"] = os.path.abspath(os.path.expanduser(args.db))  # a client starts elsewhere
    project = os.path.abspath(os.path.expanduser(args.project)) if args.project else None
    try:
        made = install.entry(args.client, install.executable(), project, env)
        if args.print_only:
            sys.stdout.write(made.snippet() + "\n")
            return 0
        done = install.write(made)
    except install.InstallError as exc:
        return _fail(f"install: {exc}")
    if done.changed:
        was = f"; the file as it was is {done.backup}" if done.backup else ""
        said = f"corrigenda: wrote the {install.NAME!r} entry into {done.file}{was}. Restart the client.\n"
    else:
        said = f"corrigenda: {done.file} already has this {install.NAME!r} entry; nothing written.\n"
    lines = [said, *(f"  {change}\n" for change in done.changed if change != "added the entry")]
    sys.stderr.write("".join(lines + [f"  kept {kept}\n" for kept in done.kept]))
    return 0


def engine(given: Invocation) -> int:
    """`corrigenda engine ACTION`: through forward.py (entry.py), which needs none of this."""
    from . import forward

    argv = list(sys.argv[1:] if given.argv is None else given.argv)
    return forward.engine_command(given.args.action, argv, os.environ)


def web_view(given: Invocation) -> int:
    """`corrigenda ui`: the web view of the store, served from this process until it is stopped."""
    from .grants import GrantsError
    from .http import RefusedToListen
    from .ui import serve_ui

    settings = given.settings
    memory = (given.memory_of or build_memory)(settings)
    try:
        serve_ui(memory, _resolve_scope(settings, memory), settings)
    except (RefusedToListen, GrantsError) as exc:
        return _fail(str(exc))
    return 0


def serve(given: Invocation) -> int:
    """`corrigenda serve` in this process: stdio (with the web view beside it if asked) or HTTP."""
    from .app import build_server
    from .grants import GrantsError

    settings = given.settings
    if settings.transport == "http" and given.args.ui_port is not None:
        return _fail("--ui-port: with --transport http the web view is served under /ui on --port, beside the MCP "
                     "endpoint; --ui-port is for the web view of a stdio server")  # fmt: skip
    # One Memory for the process: the MCP server's lifespan takes this one, and the web view reads it.
    memory = build_memory(settings)
    try:
        server = build_server(settings, lambda _: memory, os.getcwd())
    except GrantsError as exc:
        return _fail(str(exc))
    notices = _notices(settings, given.missing, memory)
    try:
        on = _serve_http if settings.transport == "http" else _serve_stdio
        refused = on(server, memory, settings, notices)
        if refused is not None:
            return refused
    except KeyboardInterrupt:  # Ctrl-C (uvicorn raises it again once it has shut down): the lifespan is done
        sys.stderr.write("corrigenda: stopped\n")
        leave(130)
    leave(0)


def _notices(settings: Settings, missing: str | None, memory: Memory) -> list[str]:
    """What a server says on stderr as it starts: a store not made yet, a question's answer that one
    server alone would know, grants that match no scope."""
    from . import grants

    notices = [f"{missing} yet; an agent's first write makes it (until then a read says there is none)"]
    notices = notices if missing else []
    if settings.transport == "http" and settings.ask_on_update and settings.session_secret is None:
        notices.append(
            "CORRIGENDA_ASK_ON_UPDATE: a client's answer to a question is good on this server alone; behind a load "
            "balancer, give every server the same CORRIGENDA_SESSION_SECRET (32+ characters)"
        )
    if settings.transport == "http" and settings.grants is not None and not missing:
        unmatched = grants.load(settings.grants, oauth=settings.oauth_issuer is not None).unmatched(
            c.scope for c in memory.scopes()
        )
        if unmatched:
            notices.append(f"grants: no scope matches {'; '.join(unmatched)} (yet)")
    return notices


def _serve_http(server: MCPServer[Any], memory: Memory, settings: Settings, notices: list[str]) -> int | None:
    """Serve over HTTP (the web view under /ui if asked) until stopped: None, else the exit status of a
    refusal to start (a bucket that cannot be opened, an address it may not listen on)."""
    from corrigenda.store import CorrigendaError
    from corrigenda.store.tables import Tables

    from .http import RefusedToListen, netloc, serve_http

    try:
        # a bucket that cannot be opened stops it before it listens
        if Location.of(settings.db).directory is None:
            Tables(settings.db, settings.storage_options).search.count()
        routes = []
        if settings.ui:
            from .ui import PREFIX, announcement, mounted_ui

            routes.append(mounted_ui(memory, _resolve_scope(settings, memory), settings))
            notices.append(announcement(f"http://{netloc(settings.host, settings.port)}{PREFIX}/", settings))
        serve_http(server, settings, notices, routes)
    except (RefusedToListen, CorrigendaError) as exc:
        return _fail(str(exc))
    return None


def _serve_stdio(server: MCPServer[Any], memory: Memory, settings: Settings, notices: list[str]) -> int | None:
    """Serve on stdio (the web view beside it on --ui-port if asked) until the client goes: None, else
    the exit status of a web view that may not listen where it was asked to."""
    import anyio

    from .http import RefusedToListen, netloc, refuse_exposure_without_token
    from .stdio import serve_stdio

    if settings.ui:
        from .ui import serve_ui_beside

        try:
            refuse_exposure_without_token(settings, netloc(settings.host, settings.ui_port), "the web view")
        except RefusedToListen as exc:
            return _fail(str(exc))
        serve_ui_beside(memory, lambda: _resolve_scope(settings, memory), settings)
    for notice in notices:
        sys.stderr.write(f"corrigenda: {notice}\n")
    if sys.stdin.isatty():  # a person ran it in a terminal: say why it looks idle
        sys.stderr.write(
            "corrigenda: an MCP server on stdio, waiting for a client's messages on stdin (an MCP client "
            "launches it; `corrigenda install CLIENT` sets one up). Ctrl-C stops it.\n"
        )
    anyio.run(serve_stdio, server)
    return None


def leave(status: int) -> NoReturn:
    """Every write is on disk by now. Leave without interpreter teardown, which can abort ("exception not
    rethrown") while the background thread is still inside torch's import."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
