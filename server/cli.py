"""`corrigenda serve` for MCP clients, and commands that print what an agent would receive."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from corrigenda.store import InvalidArgument
from corrigenda.store.storage.location import Location
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from .config import DB_DEFAULT, DB_FLAG, Settings, db_origin, default_db, missing_store, package_version

if TYPE_CHECKING:
    from corrigenda.store import Memory


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr, exit status 2: what was wrong and where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"corrigenda: {message} (see `{self.prog} --help`)\n")


# Commands that only read: they never make a store (a mistyped --db would look like an empty memory).
READS = {"recall", "show", "why", "stats", "scopes", "list", "changes", "export"}
# Commands that write: they make the store if there is none, and say so once.
WRITES = {"remember", "correct", "revoke", "reinstate", "link", "forget", "import"}


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--db", help="store directory or s3://… (env CORRIGENDA_DB; default: per-user data dir)")
    common.add_argument("--model", help="sentence-transformers model name or path (env CORRIGENDA_MODEL)")
    common.add_argument("--scope", help="scope by name (env CORRIGENDA_SCOPE; default: this folder's project's)")
    common.add_argument(
        "--project", help="project folder whose scope to use (env CORRIGENDA_PROJECT; default: the working directory)"
    )
    printed = _Parser(add_help=False)  # a command that prints a result (not `serve`, `ui`, `install`)
    printed.add_argument("--json", action="store_true", help="print the structured result (JSON) instead of text")
    note = _Parser(add_help=False)  # what a written note may carry besides its text
    note.add_argument("--kind", help="fact, decision, preference, procedure, observation, … (default fact)")
    note.add_argument("--subject", help="key of what the note is about, e.g. service.port")
    note.add_argument("--tag", dest="tags", action="append", help="a free label (repeat for more)")
    note.add_argument("--source", help="where the note came from")
    note.add_argument("--valid-from", help="when it starts to hold: ISO 8601, a date, or e.g. 2d (ago)")
    note.add_argument("--valid-until", help="when it stops holding: ISO 8601 or a date")

    parser = _Parser(prog="corrigenda", description="Agent memory with first-class corrections (MCP server).")
    parser.add_argument("--version", action="version", version=f"corrigenda {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run the MCP server (stdio by default: an MCP client launches it)",
        epilog="HTTP access, from the environment only (a flag would show in ps): CORRIGENDA_TOKEN, a bearer "
        "token of 16+ characters that every request must carry (required unless --host is loopback); "
        "CORRIGENDA_ALLOWED_HOSTS and CORRIGENDA_ALLOWED_ORIGINS, comma-separated Host and Origin values to "
        "accept instead of the defaults (the loopback names and --host, with the port); CORRIGENDA_GRANTS, a "
        "grants file, and CORRIGENDA_OAUTH_ISSUER with CORRIGENDA_RESOURCE for OAuth access tokens; "
        "CORRIGENDA_SESSION_SECRET, 32+ characters, the key of the web view's session cookies, the same on every "
        "server behind one load balancer (docs/reference.md).",
    )
    serve.add_argument("--transport", choices=["stdio", "http"], help="env CORRIGENDA_TRANSPORT (default stdio)")
    serve.add_argument("--host", help="http, and the web view of stdio --ui; env CORRIGENDA_HOST (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="http only; env CORRIGENDA_PORT (default 8765)")
    serve.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")
    serve.add_argument(
        "--ui",
        action="store_true",
        default=None,  # unset: CORRIGENDA_UI decides
        help="also serve the web view from this process and its memory: with --transport http under "
        "/ui on --port; on stdio on --ui-port. It asks for CORRIGENDA_TOKEN too, if set. env CORRIGENDA_UI=1",
    )
    serve.add_argument(
        "--ui-port",
        type=int,
        help="stdio --ui only (with --transport http the web view is under /ui on --port); env "
        "CORRIGENDA_UI_PORT (default 8766)",
    )

    recall = commands.add_parser(
        "recall", parents=[common, printed], help="print what recall_chains returns for a query"
    )
    recall.add_argument("query")
    recall.add_argument("--budget-tokens", type=int, default=2000, help="token budget of the answer (default 2000)")
    recall.add_argument("--as-of", help="replay what the store believed then: ISO 8601, a date, or e.g. 2d (ago)")
    show = commands.add_parser(
        "show", parents=[common, printed], help="print a note with its chain and events (history)"
    )
    show.add_argument("note_id")
    why = commands.add_parser("why", parents=[common, printed], help="print why_excluded for a note")
    why.add_argument("note_id")
    why.add_argument("--query", help="replay this recall to see where the note fell out")
    commands.add_parser("stats", parents=[common, printed], help="print what the store holds")
    scoping = commands.add_parser(
        "scopes", parents=[common, printed], help="list the scopes, most recently changed first, with their counts"
    )
    scoping.add_argument("--offset", type=int, default=0, help="scopes to skip (default 0)")
    scoping.add_argument("--limit", type=int, default=100, help="scopes to show (default 100)")
    scoping.add_argument("--contains", help="only scopes whose name contains this (any case)")

    listing = commands.add_parser(
        "list", parents=[common, printed], help="list a scope's notes, newest first, by state"
    )
    listing.add_argument("--state", choices=["current", "history", "all"], default="all", help="default all")
    listing.add_argument("--offset", type=int, default=0, help="notes to skip (default 0)")
    listing.add_argument("--limit", type=int, default=50, help="notes to show (default 50)")
    listing.add_argument("--as-of", help="replay what the store believed then: ISO 8601, a date, or e.g. 2d (ago)")
    changed = commands.add_parser(
        "changes", parents=[common, printed], help="what was corrected, revoked, reinstated or forgotten since a time"
    )
    changed.add_argument("--since", required=True, help="ISO 8601, a date (2026-12-01), or ago: 30m, 12h, 2d, 1w")
    changed.add_argument("--limit", type=int, default=50, help="changes to show (default 50)")

    remember = commands.add_parser("remember", parents=[common, printed, note], help="store a note")
    remember.add_argument("text")
    correct = commands.add_parser(
        "correct",
        parents=[common, printed, note],
        help="replace a note with a corrected one (the old one becomes history)",
    )
    correct.add_argument("note_id")
    correct.add_argument("text")
    correct.add_argument("--reason", required=True, help="why: kept with the event and shown with the history")
    correct.add_argument(
        "--fork",
        action="store_true",
        help="correct a note that is no longer current, keeping a second current version beside the chain's",
    )
    revoke = commands.add_parser("revoke", parents=[common, printed], help="mark a note as wrong, with no replacement")
    revoke.add_argument("note_id")
    revoke.add_argument("--reason", required=True, help="why it is wrong")
    reinstate = commands.add_parser(
        "reinstate", parents=[common, printed], help="undo a revocation or correction (a note id or an event id)"
    )
    reinstate.add_argument("target_id")
    reinstate.add_argument("--reason", required=True, help="why the revocation or correction was a mistake")
    link = commands.add_parser(
        "link",
        parents=[common, printed],
        help="record that a note depends on, refines or replaces another, or states another fact (distinct)",
    )
    link.add_argument("src_id")
    link.add_argument("kind", choices=["depends_on", "refines", "supersedes", "distinct"])
    link.add_argument("dst_id")
    link.add_argument("--reason", help="why (required for supersedes)")
    forget = commands.add_parser(
        "forget", parents=[common, printed], help="delete a note for real (for privacy); asks first"
    )
    forget.add_argument("note_id")
    forget.add_argument("--reason", required=True, help="why it is erased (kept; the text is not)")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    export = commands.add_parser(
        "export", parents=[common], help="write notes and events as JSON Lines (every scope, or --scope)"
    )
    export.add_argument("--out", help="file to write (default: stdout)")
    export.add_argument(
        "--vectors", action="store_true", help="include the embeddings (an import then skips the model)"
    )
    load = commands.add_parser(
        "import",
        parents=[common, printed],
        help="import a corrigenda export (into the scopes it names), or a knowledge-graph memory.jsonl "
        "(into --scope, else this folder's project's)",
    )
    load.add_argument("file")
    load.add_argument(
        "--partial",
        action="store_true",
        help="restore an export whose trailer is missing or does not match (cut short, or made before trailers)",
    )
    setup = commands.add_parser(
        "install",
        help="write corrigenda's entry into an MCP client's configuration (keeps the rest, and a backup)",
        description="VS Code's folders (its MCP roots) and Cursor's (its WORKSPACE_FOLDER_PATHS) choose the "
        "project, a window without one is scope 'default'; Claude Code starts the server in the project; "
        "Claude Desktop has no workspace (scope 'default' unless --project or --scope is given). --db, --scope "
        "and --model are passed on as CORRIGENDA_* variables. An entry already there is updated, keeping its "
        "env and other keys; comments, the file's mode and a symlink are kept; each run leaves a backup.",
    )
    setup.add_argument("client", choices=["claude-desktop", "claude-code", "cursor", "vscode"])
    setup.add_argument("--print", dest="print_only", action="store_true", help="print the entry; write nothing")
    setup.add_argument("--project", help="a fixed project folder for every session of this client")
    setup.add_argument("--db", help="the store every session of this client uses (default: per-user data dir)")
    setup.add_argument("--scope", help="a fixed scope for every session of this client")
    setup.add_argument("--model", help="sentence-transformers model name or path")
    engine = commands.add_parser(
        "engine",
        parents=[common],
        help="the shared engine of a store: status (pid, clients, memory) or stop",
        description="Every client, command and web view of one store on this machine shares one engine "
        "process, started by the first and stopped after CORRIGENDA_ENGINE_IDLE seconds without a client "
        "(default 300). CORRIGENDA_ENGINE=off runs each in its own process instead.",
    )
    engine.add_argument("action", choices=["status", "stop"])
    web = commands.add_parser(
        "ui", parents=[common], help="a web view to look through and fix the memory (on loopback by default)"
    )
    web.add_argument(
        "--host",
        help="env CORRIGENDA_HOST (default 127.0.0.1); off loopback only with CORRIGENDA_TOKEN set, which every "
        "request must then carry (if set, on loopback too)",
    )
    web.add_argument("--port", dest="ui_port", type=int, help="env CORRIGENDA_UI_PORT (default 8766)")
    return parser


RELATIVE = re.compile(r"^(\d+)\s*(s|m|h|d|w)$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_time(flag: str, text: str | None, now: datetime) -> datetime | None:
    """A time a person types: ISO 8601 (2026-12-01T09:00:00Z), a date (2026-12-01, midnight UTC), or a
    span ago (30m, 12h, 2d, 1w). Raises ValueError with one line saying what is accepted."""
    if text is None:
        return None
    ago = RELATIVE.match(text.strip())
    if ago:
        return now - timedelta(**{UNITS[ago[2]]: int(ago[1])})
    from .arguments import iso_8601

    try:
        return iso_8601(text)
    except PydanticCustomError as exc:
        raise ValueError(f"{flag}: {exc}; or a date (2026-12-01) or a span ago (30m, 12h, 2d, 1w)") from None


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
    else:
        text = in_cli_words(text)
    sys.stdout.write(text + "\n")


def _fail(message: str) -> int:
    sys.stderr.write(f"corrigenda: {in_cli_words(message)}\n")
    return 2


# The store's and the renderers' words are an agent's: a tool result names tool calls (`link(src_id=…)`,
# `fork=true`), and keeps them. A person at the command line reads the command to type instead.
_LINK_CALL = re.compile(
    r'(?P<verb>call:? )?link\(src_id="?(?P<src>[^",)]+)"?, dst_id="?(?P<dst>[^",)]+)"?, '
    r'kind="?(?P<kind>[a-z_]+(?: or [a-z_]+)*)"?(?:, reason=(?P<reason>"(?:[^"\\]|\\.)*"|…))?\)'
)
_TOOL_WORDS = (
    (re.compile(r"\bpass fork=true\b"), "pass --fork"),
    (re.compile(r"\bnot an id this server issued\b"), "not a corrigenda id"),
    (re.compile(r"\bnot a note id this server issued\b"), "not a corrigenda note id"),
    (re.compile(r"\breinstate (n_\w+) first\b"), r"run `corrigenda reinstate \1 --reason …` first"),
    (
        re.compile(r"`scopes` lists them; its `contains` finds one by name"),
        "`corrigenda scopes` lists them; `corrigenda scopes --contains PART` finds one by name",
    ),
    (re.compile(r'link them with kind="distinct"'), "link them with `corrigenda link NEW_ID distinct OLD_ID`"),
    (re.compile(r"\bMore: offset=(\d+)"), r"More: --offset \1"),
    (re.compile(r"find one by name with contains\b"), "find one by name with --contains"),
    (re.compile(r"raise `limit` or move `since` forward"), "raise --limit or move --since forward"),
    (re.compile(r"(?<![\d.,])1 (note|event|chain|scope)s\b"), r"1 \1"),
)


def _link_command(call: re.Match[str]) -> str:
    dst = "OLD_ID" if call["dst"] in ("…", "<old id>") else call["dst"]
    kind = call["kind"] if " or " not in call["kind"] else "{" + call["kind"].replace(" or ", ",") + "}"
    reason = {None: "", "…": ' --reason "…"'}.get(call["reason"], f" --reason {call['reason']}")
    command = f"corrigenda link {call['src']} {kind} {dst}{reason}"
    return {"call: ": f"run: {command}", "call ": f"run `{command}`"}.get(call["verb"] or "", f"`{command}`")


def in_cli_words(text: str) -> str:
    """`text` with each tool call it names as the corrigenda command that does the same, and "1 notes"
    as one note: for what a command prints (its --json output is the structured result, left as is)."""
    text = _LINK_CALL.sub(_link_command, text)
    for pattern, words in _TOOL_WORDS:
        text = pattern.sub(words, text)
    return text


def _export(memory: Memory, scope: str | None, out: str | None, vectors: bool) -> None:
    """Every scope unless --scope names one (not the CORRIGENDA_SCOPE default: an export is a backup). To
    a file, it says on stderr what it wrote where; to stdout, the lines alone."""
    lines = memory.export(scope, vectors)
    if out is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    first = last = ""
    partial = out + ".partial"  # a file cut short never passes for an export
    try:
        with open(partial, "w", encoding="utf-8") as file:
            for line in lines:
                first = first or line
                last = line
                file.write(line + "\n")
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
        raise
    os.replace(partial, out)
    header, trailer = json.loads(first), json.loads(last)  # the export's first and last lines: what it holds
    scopes = ", ".join(header["scopes"]) or "none"
    sys.stderr.write(
        in_cli_words(f"corrigenda: wrote {trailer['notes']} notes and {trailer['events']} events (scopes: {scopes}) "
                     f"to {os.path.abspath(out)}\n")
    )  # fmt: skip


def _progress(done: int, total: int) -> None:
    """A bar on stderr, redrawn in place: stdout keeps the summary (or --json) alone."""
    filled = 30 * done // total if total else 30
    sys.stderr.write(f"\rimporting notes [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _store_path(settings: Settings) -> str | None:
    """The directory of a store on this machine's disk; None for a bucket (or LanceDB's memory://)."""
    return settings.db if Location(settings.db).is_local else None


def _resolve_scope(settings: Settings, memory: Memory) -> str:
    from .project import resolve

    if settings.scope is not None:
        return settings.scope
    return resolve(settings.project, None, lambda: [c.scope for c in memory.scopes()], os.getcwd())[0]


def _confirm(question: str) -> bool:
    """Ask on the terminal; without one (a script, CI) the answer is no: pass --yes."""
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:  # Ctrl-C: a person stopped it; nothing went wrong
        sys.stderr.write("corrigenda: stopped\n")
        return 130
    except BrokenPipeError:  # `corrigenda export | head`: the reader had enough
        _quiet_stdout()
        return 141  # as a command killed by SIGPIPE


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush of a closed pipe says nothing."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _no_store(command: str, settings: Settings, missing: str) -> str:
    """A read of a store that is not there: where it looked, whence that path, and what to type."""
    origin = db_origin(settings)
    if origin == DB_DEFAULT:
        return (
            f'{command}: {missing} yet: nothing has been remembered. `corrigenda remember "…"` makes it, as does '
            "an agent's first write through `corrigenda serve`; a store elsewhere: --db DIR (or CORRIGENDA_DB)"
        )
    unset = "leave out --db" if origin == DB_FLAG else "unset CORRIGENDA_DB"
    return (
        f"{command}: {missing}: mistyped? Give the folder of your store, or {unset} for the default, "
        f'{default_db()}; `corrigenda remember "…" {"--db " if origin == DB_FLAG else ""}…` makes a new one'
    )


def _run(argv: Sequence[str] | None, memory_of: Callable[[Settings], Memory] | None = None) -> int:
    """A command; `memory_of` gives the store its settings name (the shared engine's, engine.py), else
    the command opens it."""
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ValidationError as exc:
        # A rule over several settings has no location: its message names them.
        problems = "; ".join(": ".join(filter(None, (".".join(map(str, e["loc"])), e["msg"]))) for e in exc.errors())
        return _fail(f"bad setting ({problems}); flags override CORRIGENDA_* variables")
    # stdout belongs to the protocol on stdio: logs go to stderr.
    logging.basicConfig(
        level=settings.log_level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        Location(settings.db).check()
    except InvalidArgument as exc:
        return _fail(f"--{exc}")
    path = _store_path(settings)
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        return _fail(f"--db: {path} is a file, not a store directory (CORRIGENDA_DB names the folder of a store)")
    missing = missing_store(settings)
    if missing is not None and args.command in READS | {"ui"}:
        return _fail(_no_store(args.command, settings, missing))
    new_store = missing is not None and args.command in WRITES | {"serve"}

    if args.command == "serve":
        return _serve(args, settings, missing)
    if args.command == "engine":  # through forward.py (entry.py), which needs none of this
        from . import forward

        return forward.engine_command(args.action, list(sys.argv[1:] if argv is None else argv), os.environ)
    if args.command == "install":
        return _install(args)

    from corrigenda.store import CorrigendaError

    from . import render
    from .config import build_memory

    memory = (memory_of or build_memory)(settings)
    if args.command == "ui":
        from .grants import GrantsError
        from .http import RefusedToListen
        from .ui import serve_ui

        try:
            serve_ui(memory, _resolve_scope(settings, memory), settings)
        except (RefusedToListen, GrantsError) as exc:
            return _fail(str(exc))
        return 0
    try:
        now = memory.clock()
        as_of = parse_time("--as-of", getattr(args, "as_of", None), now)
        scope = _resolve_scope(settings, memory)
        named = settings.scope is not None  # else this folder's project's: a new one is empty, not a typo
        if args.command == "recall":
            r = memory.recall(args.query, scope, args.budget_tokens, as_of=as_of, named=named)
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
            listed = memory.scope_page(args.offset, args.limit, args.contains, default_scope=scope)
            _show(listed, render.scopes(listed), args.json)
        elif args.command == "list":
            page = memory.list_notes(scope, args.state, args.offset, args.limit, as_of, named=named)
            _show(page, render.note_list(page), args.json)
        elif args.command == "changes":
            since = parse_time("--since", args.since, now)
            assert since is not None
            found = memory.changes(since, scope, args.limit, named=named)
            _show(found, render.changes(found), args.json)
        elif args.command == "export":
            _export(memory, args.scope, args.out, args.vectors)
        elif args.command == "import":
            try:
                with open(args.file, encoding="utf-8", newline="") as file:
                    lines = file.read().split("\n")  # checked in full before anything is written
            except OSError as exc:
                return _fail(
                    f"import: cannot read {args.file} ({exc.strerror}): give the path of a file that "
                    "`corrigenda export --out FILE` wrote, or of a knowledge-graph memory.jsonl"
                )
            if args.scope is not None and '"corrigenda-export"' in next((line for line in lines if line.strip()), ""):
                raise ValueError(
                    "--scope: a corrigenda export goes back into the scopes it names; --scope is for a "
                    "knowledge-graph memory.jsonl (leave it out)"
                )
            done = memory.import_lines(
                lines, scope, actor="corrigenda import", source=os.path.basename(args.file), progress=_progress,
                partial=args.partial,
            )  # fmt: skip
            _show(done, render.imported(done), args.json)
        elif args.command in WRITES and not _write(args, memory, scope, now, settings.person_actor):
            return _fail("forget: not confirmed, nothing erased (pass --yes to skip the question)")
    except (CorrigendaError, ValueError) as exc:
        return _fail(f"{args.command}: {exc}")
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:  # a person reads this: one line, the traceback only with CORRIGENDA_LOG_LEVEL=DEBUG
        logging.getLogger(__name__).debug("%s failed", args.command, exc_info=True)
        return _fail(f"{args.command} failed: {type(exc).__name__}: {exc}")
    finally:
        memory.close()
    if new_store:
        sys.stderr.write(f"corrigenda: made a new store at {path}\n")
    return 0


def _write(args: argparse.Namespace, memory: Memory, scope: str, now: datetime, actor: str) -> bool:
    """A person's write: recorded with `actor` (the settings' person). False: a forget the person did not confirm."""
    from corrigenda.store import Draft

    from . import render

    if args.command in ("remember", "correct"):
        given = {k: getattr(args, k) for k in ("kind", "subject", "tags", "source") if getattr(args, k)}
        valid = {
            k: parse_time(f"--{k.replace('_', '-')}", getattr(args, k), now) for k in ("valid_from", "valid_until")
        }
        draft = Draft(text=args.text, **given, **{k: v for k, v in valid.items() if v is not None})
        if args.command == "remember":
            remembered = memory.remember(draft, scope=scope, actor=actor)
            _show(remembered, render.remembered(remembered), args.json)
        else:
            c = memory.correct(args.note_id, draft, reason=args.reason, actor=actor, fork=args.fork)
            _show(c, render.corrected(c), args.json)
    elif args.command == "revoke":
        revoked = memory.revoke(args.note_id, reason=args.reason, actor=actor)
        _show(revoked, render.lifecycle(revoked, "Revoked"), args.json)
    elif args.command == "reinstate":
        reinstated = memory.reinstate(args.target_id, reason=args.reason, actor=actor)
        _show(reinstated, render.lifecycle(reinstated, "Reinstated"), args.json)
    elif args.command == "link":
        linked = memory.link(args.src_id, args.dst_id, args.kind, reason=args.reason, actor=actor)
        _show(linked, render.linked(linked), args.json)
    elif args.command == "forget":
        if not args.yes:
            note = memory.history(args.note_id).note
            if not _confirm(f"Erase note {note.id} for good: {note.text[:80]!r}?"):
                return False
        f = memory.forget(args.note_id, reason=args.reason, actor=actor)
        _show(f, render.forgotten(f), args.json)
    return True


def _install(args: argparse.Namespace) -> int:
    from . import install

    given = {"CORRIGENDA_DB": args.db, "CORRIGENDA_SCOPE": args.scope, "CORRIGENDA_MODEL": args.model}
    env = {name: value for name, value in given.items() if value}
    if args.db and Location(args.db).is_local:
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


def _serve(args: argparse.Namespace, settings: Settings, missing: str | None) -> int:
    import anyio
    from corrigenda.store import CorrigendaError
    from corrigenda.store.tables import Tables

    from . import grants
    from .app import build_server
    from .config import build_memory
    from .grants import GrantsError
    from .http import RefusedToListen, netloc, refuse_exposure_without_token, serve_http
    from .stdio import serve_stdio

    if settings.transport == "http" and args.ui_port is not None:
        return _fail("--ui-port: with --transport http the web view is served under /ui on --port, beside the MCP "
                     "endpoint; --ui-port is for the web view of a stdio server")  # fmt: skip
    notices = [f"{missing} yet; an agent's first write makes it (until then a read says there is none)"]
    notices = notices if missing else []
    # One Memory for the process: the MCP server's lifespan takes this one, and the web view reads it.
    memory = build_memory(settings)
    try:
        server = build_server(settings, lambda _: memory, os.getcwd())
    except GrantsError as exc:
        return _fail(str(exc))
    if settings.transport == "http" and settings.grants is not None and not missing:
        unmatched = grants.load(settings.grants, oauth=settings.oauth_issuer is not None).unmatched(
            c.scope for c in memory.scopes()
        )
        if unmatched:
            notices.append(f"grants: no scope matches {'; '.join(unmatched)} (yet)")
    try:
        if settings.transport == "http":
            try:
                if Location(settings.db).is_remote:  # a bucket that cannot be opened stops it before it listens
                    Tables(settings.db, settings.storage_options).count()
                routes = []
                if settings.ui:
                    from .ui import PREFIX, announcement, mounted_ui

                    routes.append(mounted_ui(memory, _resolve_scope(settings, memory), settings))
                    notices.append(announcement(f"http://{netloc(settings.host, settings.port)}{PREFIX}/", settings))
                serve_http(server, settings, notices, routes)
            except (RefusedToListen, CorrigendaError) as exc:
                return _fail(str(exc))
        else:
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
    except KeyboardInterrupt:  # Ctrl-C (uvicorn raises it again once it has shut down): the lifespan is done
        sys.stderr.write("corrigenda: stopped\n")
        _leave(130)
    _leave(0)


def _leave(status: int) -> NoReturn:
    """Every write is on disk by now. Leave without interpreter teardown, which can abort ("exception not
    rethrown") while the background thread is still inside torch's import."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
