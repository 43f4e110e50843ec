"""`corrigenda serve` for MCP clients, and commands that print what an agent would receive."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from .config import Settings

if TYPE_CHECKING:
    from corrigenda.store import Memory


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", help="store directory or s3://… (env CORRIGENDA_DB; default: per-user data dir)")
    common.add_argument("--model", help="sentence-transformers model name or path (env CORRIGENDA_MODEL)")
    common.add_argument("--scope", help="default scope (env CORRIGENDA_SCOPE; default 'default')")
    common.add_argument("--json", action="store_true", help="print the structured result instead of text")

    parser = argparse.ArgumentParser(
        prog="corrigenda", description="Agent memory with first-class corrections (MCP server)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run the MCP server (stdio by default)",
        epilog="HTTP access, from the environment only (a flag would show in ps): CORRIGENDA_TOKEN, a bearer "
        "token of 16+ characters that every request must carry (required unless --host is loopback); "
        "CORRIGENDA_ALLOWED_HOSTS and CORRIGENDA_ALLOWED_ORIGINS, comma-separated Host and Origin values to "
        "accept instead of the defaults (the loopback names and --host, with the port).",
    )
    serve.add_argument("--transport", choices=["stdio", "http"], help="env CORRIGENDA_TRANSPORT")
    serve.add_argument("--host", help="http only; env CORRIGENDA_HOST (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="http only; env CORRIGENDA_PORT (default 8765)")
    serve.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")
    serve.add_argument(
        "--ui", action="store_true", help="also run the read-only web view on --ui-port (loopback --host only)"
    )
    serve.add_argument("--ui-port", type=int, help="env CORRIGENDA_UI_PORT (default 8766)")

    recall = commands.add_parser("recall", parents=[common], help="print what recall_chains returns for a query")
    recall.add_argument("query")
    recall.add_argument("--budget-tokens", type=int, default=2000)
    recall.add_argument("--as-of", help="ISO 8601 time to replay")
    show = commands.add_parser("show", parents=[common], help="print a note with its chain and events")
    show.add_argument("note_id")
    why = commands.add_parser("why", parents=[common], help="print why_excluded for a note")
    why.add_argument("note_id")
    why.add_argument("--query")
    commands.add_parser("stats", parents=[common], help="print what the store holds")
    commands.add_parser("scopes", parents=[common], help="list every scope with its counts")

    listing = commands.add_parser("list", parents=[common], help="list a scope's notes, newest first, by state")
    listing.add_argument("--state", choices=["current", "history", "all"], default="all")
    listing.add_argument("--offset", type=int, default=0)
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--as-of", help="ISO 8601 time to replay")
    changed = commands.add_parser(
        "changes", parents=[common], help="what was corrected, revoked, reinstated or forgotten since a time"
    )
    changed.add_argument("--since", required=True, help="ISO 8601 time, e.g. 2026-11-30T09:00:00Z")
    changed.add_argument("--limit", type=int, default=50)
    export = commands.add_parser(
        "export", parents=[common], help="write notes and events as JSON Lines (every scope, or --scope)"
    )
    export.add_argument("--out", help="file to write (default: stdout)")
    export.add_argument(
        "--vectors", action="store_true", help="include the embeddings (an import then skips the model)"
    )
    load = commands.add_parser(
        "import", parents=[common], help="import a corrigenda export, or a knowledge-graph memory.jsonl into --scope"
    )
    load.add_argument("file")
    web = commands.add_parser("ui", parents=[common], help="a read-only web view of the memory, on loopback")
    web.add_argument("--host", help="a loopback address (env CORRIGENDA_HOST; default 127.0.0.1)")
    web.add_argument("--port", dest="ui_port", type=int, help="env CORRIGENDA_UI_PORT (default 8766)")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    given = {k: v for k, v in vars(args).items() if v is not None and k in Settings.model_fields}
    return Settings(**given)


def _show(model: BaseModel | dict[str, Any], text: str, as_json: bool) -> None:
    """Human commands only: `serve` never writes to stdout, which belongs to the protocol there."""
    if hasattr(sys.stdout, "reconfigure"):  # a Windows pipe would otherwise take the code page, not CJK
        sys.stdout.reconfigure(encoding="utf-8")
    if as_json:
        data = model.model_dump(mode="json") if isinstance(model, BaseModel) else model
        text = json.dumps(data, ensure_ascii=False, indent=2)
    sys.stdout.write(text + "\n")


def _fail(message: str) -> int:
    sys.stderr.write(f"corrigenda: {message}\n")
    return 2


def _export(memory: Memory, scope: str | None, out: str | None, vectors: bool) -> None:
    """Every scope unless --scope names one (not the CORRIGENDA_SCOPE default: an export is a backup)."""
    lines = memory.export(scope, vectors)
    if out is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    partial = out + ".partial"  # a file cut short never passes for an export
    try:
        with open(partial, "w", encoding="utf-8") as file:
            for line in lines:
                file.write(line + "\n")
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
        raise
    os.replace(partial, out)


def _progress(done: int, total: int) -> None:
    """A bar on stderr, redrawn in place: stdout keeps the summary (or --json) alone."""
    filled = 30 * done // total if total else 30
    sys.stderr.write(f"\rimporting notes [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return _fail(f"bad setting ({problems}); flags override CORRIGENDA_* variables")
    # stdout belongs to the protocol on stdio: logs go to stderr.
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )

    if args.command == "serve":
        import anyio
        from corrigenda.store import CorrigendaError
        from corrigenda.store.storage.location import Location
        from corrigenda.store.tables import Tables

        from .app import build_server
        from .http import RefusedToListen, serve_http
        from .stdio import serve_stdio

        server = build_server(settings)
        if settings.transport == "http":
            try:
                # a bucket that cannot be opened stops an HTTP server before it listens
                if Location(settings.db).is_remote:
                    Tables(settings.db, settings.storage_options).count()
                if args.ui:
                    from .app import build_memory
                    from .ui import serve_ui_beside

                    serve_ui_beside(
                        build_memory(settings), settings.scope or "default", settings.host, settings.ui_port
                    )
                serve_http(server, settings)
            except (RefusedToListen, CorrigendaError) as exc:
                return _fail(str(exc))
        else:
            anyio.run(serve_stdio, server)
        # Every write is on disk by now. Leave without interpreter teardown, which can abort
        # ("exception not rethrown") while the background thread is still inside torch's import.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    from corrigenda.store import CorrigendaError
    from corrigenda.store.views import ScopeList

    from . import render
    from .app import build_memory, iso_8601
    from .roots import DEFAULT_SCOPE

    scope = settings.scope or DEFAULT_SCOPE  # no client, so no roots
    try:
        as_of = iso_8601(getattr(args, "as_of", None))
    except PydanticCustomError as exc:
        return _fail(f"--as-of: {exc}")
    memory = build_memory(settings)
    if args.command == "ui":
        from .http import RefusedToListen
        from .ui import serve_ui

        try:
            serve_ui(memory, scope, settings.host, settings.ui_port)
        except RefusedToListen as exc:
            return _fail(str(exc))
        return 0
    try:
        if args.command == "recall":
            r = memory.recall(args.query, scope, args.budget_tokens, as_of=as_of)
            _show(r, render.recall(r), args.json)
        elif args.command == "show":
            h = memory.history(args.note_id)
            _show(h, render.history(h), args.json)
        elif args.command == "why":
            x = memory.why_excluded(args.note_id, args.query, scope)
            _show(x, render.exclusion(x), args.json)
        elif args.command == "stats":
            stats = memory.stats()
            _show(stats, "\n".join(f"{k}: {v}" for k, v in stats.items()), args.json)
        elif args.command == "scopes":
            listed = ScopeList(scopes=memory.scopes(), default_scope=scope)
            _show(listed, render.scopes(listed), args.json)
        elif args.command == "list":
            page = memory.list_notes(scope, args.state, args.offset, args.limit, as_of)
            _show(page, render.note_list(page), args.json)
        elif args.command == "changes":
            try:
                since = iso_8601(args.since)
            except PydanticCustomError as exc:
                return _fail(f"--since: {exc}")
            assert since is not None
            found = memory.changes(since, scope, args.limit)
            _show(found, render.changes(found), args.json)
        elif args.command == "export":
            _export(memory, args.scope, args.out, args.vectors)
        elif args.command == "import":
            with open(args.file, encoding="utf-8") as file:
                lines = file.read().splitlines()  # checked in full before anything is written
            done = memory.import_lines(
                lines, scope, actor="corrigenda import", source=os.path.basename(args.file), progress=_progress
            )
            _show(done, render.imported(done), args.json)
    except CorrigendaError as exc:
        return _fail(f"{args.command}: {exc}")
    except Exception as exc:  # a person reads this: one line, the traceback only with --log-level DEBUG
        logging.getLogger(__name__).debug("%s failed", args.command, exc_info=True)
        return _fail(f"{args.command} failed: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
