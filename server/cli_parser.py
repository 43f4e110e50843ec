"""The command line as a table of commands (COMMANDS): each declared once, with its name and help, the
flags it shares with others, a function that adds its own arguments, the one function that runs it, and
what it asks of the store. `parser` builds the grammar by walking the table; cli.py runs the command it
names, by lookup."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from . import cli_commands as store
from .cli_serve import engine, install_entry, serve, web_view
from .cli_shared import Invocation
from .config import package_version

Arguments = Callable[[argparse.ArgumentParser], None]  # adds flags and positionals to a command's parser


class Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr, exit status 2: what was wrong and where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"corrigenda: {message} (see `{self.prog} --help`)\n")


# The flags commands share: every command's but `install`'s, a printing command's, a written note's.


def common(command: argparse.ArgumentParser) -> None:
    """Where the store is and which scope: the flags of every command but `install`."""
    command.add_argument("--db", help="store directory or s3://… (env CORRIGENDA_DB; default: per-user data dir)")
    command.add_argument(
        "--single-writer",
        action="store_true",
        default=None,  # unset: CORRIGENDA_SINGLE_WRITER decides
        help="only one process writes this store: start on a bucket that ignores conditional writes, with a "
        "warning, instead of refusing (env CORRIGENDA_SINGLE_WRITER=1)",
    )
    command.add_argument("--model", help="sentence-transformers model name or path (env CORRIGENDA_MODEL)")
    command.add_argument("--scope", help="scope by name (env CORRIGENDA_SCOPE; default: this folder's project's)")
    command.add_argument(
        "--project", help="project folder whose scope to use (env CORRIGENDA_PROJECT; default: the working directory)"
    )


def printed(command: argparse.ArgumentParser) -> None:
    """A command that prints a result (not `serve`, `ui`, `install`)."""
    command.add_argument("--json", action="store_true", help="print the structured result (JSON) instead of text")


def note(command: argparse.ArgumentParser) -> None:
    """What a written note may carry besides its text."""
    command.add_argument("--kind", help="fact, decision, preference, procedure, observation, … (default fact)")
    command.add_argument("--subject", help="key of what the note is about, e.g. service.port")
    command.add_argument("--tag", dest="tags", action="append", help="a free label (repeat for more)")
    command.add_argument("--source", help="where the note came from")
    command.add_argument("--valid-from", help="when it starts to hold: ISO 8601, a date, or e.g. 2d (ago)")
    command.add_argument("--valid-until", help="when it stops holding: ISO 8601 or a date")


@dataclass(frozen=True)
class Command:
    """One command: its name and help (and, for its own --help, a description and an epilog), the flags
    it shares (`shares`, added first, in order), `arguments`, which adds its own, and `run`, the one
    function that runs it, given what every command is given (its exit status). What it asks of the
    store (cli.py checks it before `run`): `needs_store`, a store that is there already (a read never
    makes one: a mistyped --db would look like an empty memory); `writes`, a store it may write, which
    it makes if there is none (and says so once), refused on a bucket that would lose commits."""

    name: str
    help: str
    arguments: Arguments
    run: Callable[[Invocation], int]
    shares: tuple[Arguments, ...] = (common, printed)
    needs_store: bool = False
    writes: bool = False
    description: str | None = None
    epilog: str | None = None


# Each command's own arguments, in the table's order.


def serve_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--transport", choices=["stdio", "http"], help="env CORRIGENDA_TRANSPORT (default stdio)")
    command.add_argument("--host", help="http, and the web view of stdio --ui; env CORRIGENDA_HOST (default 127.0.0.1)")
    command.add_argument("--port", type=int, help="http only; env CORRIGENDA_PORT (default 8765)")
    command.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level")
    command.add_argument(
        "--ui",
        action="store_true",
        default=None,  # unset: CORRIGENDA_UI decides
        help="also serve the web view from this process and its memory: with --transport http under "
        "/ui on --port; on stdio on --ui-port. It asks for CORRIGENDA_TOKEN too, if set. env CORRIGENDA_UI=1",
    )
    command.add_argument(
        "--ui-port",
        type=int,
        help="stdio --ui only (with --transport http the web view is under /ui on --port); env "
        "CORRIGENDA_UI_PORT (default 8766)",
    )


AS_OF = "replay what the store believed then: ISO 8601, a date, or e.g. 2d (ago)"


def recall_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("query")
    command.add_argument("--budget-tokens", type=int, default=2000, help="token budget of the answer (default 2000)")
    command.add_argument("--as-of", help=AS_OF)


def show_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("note_id")


def why_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("note_id")
    command.add_argument("--query", help="replay this recall to see where the note fell out")


def no_arguments(command: argparse.ArgumentParser) -> None:
    """A command with the flags it shares alone."""


def scopes_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--offset", type=int, default=0, help="scopes to skip (default 0)")
    command.add_argument("--limit", type=int, default=100, help="scopes to show (default 100)")
    command.add_argument("--contains", help="only scopes whose name contains this (any case)")


def list_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--state", choices=["current", "history", "all"], default="all", help="default all")
    command.add_argument("--offset", type=int, default=0, help="notes to skip (default 0)")
    command.add_argument("--limit", type=int, default=50, help="notes to show (default 50)")
    command.add_argument("--as-of", help=AS_OF)


def changes_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--since", required=True, help="ISO 8601, a date (2026-12-01), or ago: 30m, 12h, 2d, 1w")
    command.add_argument("--limit", type=int, default=50, help="changes to show (default 50)")


def remember_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("text")
    command.add_argument(
        "--one-value", action="store_true", help="declare that --subject holds one value in the scope: this note "
        "and every later one of it replace its current note (see `corrigenda subject`)",
    )  # fmt: skip


def confirm_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("note_id")
    command.add_argument("--reason", help="how it was checked, kept with the confirmation")


def check_every_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("days", type=int)
    command.add_argument("--reason", help="why, kept with the setting")


def subject_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("subject", nargs="?", help="e.g. payments.timeout; none: list the declared subjects")
    command.add_argument("--many-values", action="store_true", help="withdraw the declaration")
    command.add_argument("--reason", help="why, kept with the declaration")


def correct_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("note_id")
    command.add_argument("text")
    command.add_argument("--reason", required=True, help="why: kept with the event and shown with the history")
    command.add_argument(
        "--fork",
        action="store_true",
        help="correct a note that is no longer current, keeping a second current version beside the chain's",
    )


def revoke_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("note_id")
    command.add_argument("--reason", required=True, help="why it is wrong")


def reinstate_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("target_id")
    command.add_argument("--reason", required=True, help="why the revocation or correction was a mistake")


def link_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("src_id")
    command.add_argument("kind", choices=["depends_on", "refines", "supersedes", "distinct"])
    command.add_argument("dst_id")
    command.add_argument("--reason", help="why (required for supersedes)")


def forget_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("note_id")
    command.add_argument("--reason", required=True, help="why it is erased (kept; the text is not)")
    command.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def export_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--out", help="file to write (default: stdout)")
    command.add_argument(
        "--vectors", action="store_true", help="include the embeddings (an import then skips the model)"
    )


def import_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("file")
    command.add_argument(
        "--partial",
        action="store_true",
        help="restore an export whose trailer is missing or does not match (cut short, or made before trailers)",
    )


def install_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("client", choices=["claude-desktop", "claude-code", "cursor", "vscode"])
    command.add_argument("--print", dest="print_only", action="store_true", help="print the entry; write nothing")
    command.add_argument("--project", help="a fixed project folder for every session of this client")
    command.add_argument("--db", help="the store every session of this client uses (default: per-user data dir)")
    command.add_argument("--scope", help="a fixed scope for every session of this client")
    command.add_argument("--model", help="sentence-transformers model name or path")


def engine_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["status", "stop"])


def ui_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--host",
        help="env CORRIGENDA_HOST (default 127.0.0.1); off loopback only with CORRIGENDA_TOKEN set, which every "
        "request must then carry (if set, on loopback too)",
    )
    command.add_argument("--port", dest="ui_port", type=int, help="env CORRIGENDA_UI_PORT (default 8766)")


SERVE_EPILOG = (
    "HTTP access, from the environment only (a flag would show in ps): CORRIGENDA_TOKEN, a bearer "
    "token of 16+ characters that every request must carry (required unless --host is loopback); "
    "CORRIGENDA_ALLOWED_HOSTS and CORRIGENDA_ALLOWED_ORIGINS, comma-separated Host and Origin values to "
    "accept instead of the defaults (the loopback names and --host, with the port); CORRIGENDA_GRANTS, a "
    "grants file, and CORRIGENDA_OAUTH_ISSUER with CORRIGENDA_RESOURCE for OAuth access tokens; "
    "CORRIGENDA_SESSION_SECRET, 32+ characters, the key of the web view's session cookies, the same on every "
    "server behind one load balancer (docs/reference.md)."
)
INSTALL_DESCRIPTION = (
    "VS Code's folders (its MCP roots) and Cursor's (its WORKSPACE_FOLDER_PATHS) choose the "
    "project, a window without one is scope 'default'; Claude Code starts the server in the project; "
    "Claude Desktop has no workspace (scope 'default' unless --project or --scope is given). --db, --scope "
    "and --model are passed on as CORRIGENDA_* variables. An entry already there is updated, keeping its "
    "env and other keys; comments, the file's mode and a symlink are kept; each run leaves a backup."
)
ENGINE_DESCRIPTION = (
    "Every client, command and web view of one store on this machine shares one engine "
    "process, started by the first and stopped after CORRIGENDA_ENGINE_IDLE seconds without a client "
    "(default 300). CORRIGENDA_ENGINE=off runs each in its own process instead."
)

# Every command, in the order of `corrigenda --help`: name and help; its own arguments, the function that
# runs it, and the rest (by default the common and printed flags, and no store asked for).
COMMANDS: dict[str, Command] = {
    command.name: command
    for command in (
        Command("serve", "run the MCP server (stdio by default: an MCP client launches it)",
                serve_arguments, serve, shares=(common,), writes=True, epilog=SERVE_EPILOG),
        Command("recall", "print what recall_chains returns for a query",
                recall_arguments, store.recall, needs_store=True),
        Command("show", "print a note with its chain and events (history)",
                show_arguments, store.show_note, needs_store=True),
        Command("why", "print why_excluded for a note",
                why_arguments, store.why, needs_store=True),
        Command("stats", "print what the store holds",
                no_arguments, store.stats, needs_store=True),
        Command("scopes", "list the scopes, most recently changed first, with their counts",
                scopes_arguments, store.scopes, needs_store=True),
        Command("list", "list a scope's notes, newest first, by state",
                list_arguments, store.list_notes, needs_store=True),
        Command("changes", "what was corrected, revoked, reinstated, forgotten or confirmed, and which settings were made, since a time",
                changes_arguments, store.changes, needs_store=True),
        Command("remember", "store a note",
                remember_arguments, store.remember, shares=(common, printed, note), writes=True),
        Command("confirm", "record that a current note was checked and still holds",
                confirm_arguments, store.confirm_note, writes=True),
        Command("check-every", "mark the scope's current notes UNCHECKED once DAYS have passed since they were "
                "written or confirmed (0: never)",
                check_every_arguments, store.check_every, writes=True),
        Command("subject", "declare that a subject holds one value in the scope (a note remembered with it then "
                "replaces its current note), withdraw that, or list the subjects declared",
                subject_arguments, store.subject, writes=True),
        Command("correct", "replace a note with a corrected one (the old one becomes history)",
                correct_arguments, store.correct, shares=(common, printed, note), writes=True),
        Command("revoke", "mark a note as wrong, with no replacement",
                revoke_arguments, store.revoke, writes=True),
        Command("reinstate", "undo a revocation or correction (a note id or an event id)",
                reinstate_arguments, store.reinstate, writes=True),
        Command("link", "record that a note depends on, refines or replaces another, or states another fact "
                "(distinct)",
                link_arguments, store.link, writes=True),
        Command("forget", "delete a note for real (for privacy); asks first",
                forget_arguments, store.forget, writes=True),
        Command("export", "write notes and events as JSON Lines (every scope, or --scope)",
                export_arguments, store.export_command, shares=(common,), needs_store=True),
        Command("import", "import a corrigenda export (into the scopes it names), or a knowledge-graph "
                "memory.jsonl (into --scope, else this folder's project's)",
                import_arguments, store.import_command, writes=True),
        Command("install", "write corrigenda's entry into an MCP client's configuration (keeps the rest, and a "
                "backup)",
                install_arguments, install_entry, shares=(), description=INSTALL_DESCRIPTION),
        Command("engine", "the shared engine of a store: status (pid, clients, memory) or stop",
                engine_arguments, engine, shares=(common,), description=ENGINE_DESCRIPTION),
        Command("ui", "a web view to look through and fix the memory (on loopback by default)",
                ui_arguments, web_view, shares=(common,), needs_store=True, writes=True),
    )
}  # fmt: skip


def parser() -> argparse.ArgumentParser:
    """Every command, its flags and their help: the table, walked in order."""
    parser = Parser(prog="corrigenda", description="Agent memory with first-class corrections (MCP server).")
    parser.add_argument("--version", action="version", version=f"corrigenda {package_version()}")
    subcommands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS.values():
        added = subcommands.add_parser(
            command.name, help=command.help, description=command.description, epilog=command.epilog
        )
        for shared in command.shares:
            shared(added)
        command.arguments(added)
    return parser
