"""The command line's grammar: every command, its flags and their help (cli.py runs them)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from .config import package_version


class Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr, exit status 2: what was wrong and where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"corrigenda: {message} (see `{self.prog} --help`)\n")


def parser() -> argparse.ArgumentParser:
    """Every command, its flags and their help."""
    common = Parser(add_help=False)
    common.add_argument("--db", help="store directory or s3://… (env CORRIGENDA_DB; default: per-user data dir)")
    common.add_argument(
        "--single-writer",
        action="store_true",
        default=None,  # unset: CORRIGENDA_SINGLE_WRITER decides
        help="only one process writes this store: start on a bucket that ignores conditional writes, with a "
        "warning, instead of refusing (env CORRIGENDA_SINGLE_WRITER=1)",
    )
    common.add_argument("--model", help="sentence-transformers model name or path (env CORRIGENDA_MODEL)")
    common.add_argument("--scope", help="scope by name (env CORRIGENDA_SCOPE; default: this folder's project's)")
    common.add_argument(
        "--project", help="project folder whose scope to use (env CORRIGENDA_PROJECT; default: the working directory)"
    )
    printed = Parser(add_help=False)  # a command that prints a result (not `serve`, `ui`, `install`)
    printed.add_argument("--json", action="store_true", help="print the structured result (JSON) instead of text")
    note = Parser(add_help=False)  # what a written note may carry besides its text
    note.add_argument("--kind", help="fact, decision, preference, procedure, observation, … (default fact)")
    note.add_argument("--subject", help="key of what the note is about, e.g. service.port")
    note.add_argument("--tag", dest="tags", action="append", help="a free label (repeat for more)")
    note.add_argument("--source", help="where the note came from")
    note.add_argument("--valid-from", help="when it starts to hold: ISO 8601, a date, or e.g. 2d (ago)")
    note.add_argument("--valid-until", help="when it stops holding: ISO 8601 or a date")

    parser = Parser(prog="corrigenda", description="Agent memory with first-class corrections (MCP server).")
    parser.add_argument("--version", action="version", version=f"corrigenda {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
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
    remember.add_argument(
        "--one-value", action="store_true", help="declare that --subject holds one value in the scope: this note "
        "and every later one of it replace its current note (see `corrigenda subject`)",
    )  # fmt: skip
    confirm = commands.add_parser(
        "confirm", parents=[common, printed], help="record that a current note was checked and still holds"
    )
    confirm.add_argument("note_id")
    confirm.add_argument("--reason", help="how it was checked, kept with the confirmation")
    check_every = commands.add_parser(
        "check-every", parents=[common, printed], help="mark the scope's current notes UNCHECKED once DAYS have "
        "passed since they were written or confirmed (0: never)",
    )  # fmt: skip
    check_every.add_argument("days", type=int)
    check_every.add_argument("--reason", help="why, kept with the setting")
    subject = commands.add_parser(
        "subject", parents=[common, printed], help="declare that a subject holds one value in the scope (a note "
        "remembered with it then replaces its current note), withdraw that, or list the subjects declared",
    )  # fmt: skip
    subject.add_argument("subject", nargs="?", help="e.g. payments.timeout; none: list the declared subjects")
    subject.add_argument("--many-values", action="store_true", help="withdraw the declaration")
    subject.add_argument("--reason", help="why, kept with the declaration")
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
