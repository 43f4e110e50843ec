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
from typing import TYPE_CHECKING, Any

from corrigenda.store import InvalidArgument
from corrigenda.store.storage.location import Location
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

from .cli_parser import parser
from .config import DB_DEFAULT, DB_FLAG, Settings, db_origin, default_db, missing_store

if TYPE_CHECKING:
    from corrigenda.store import Memory


# Commands that only read: they never make a store (a mistyped --db would look like an empty memory).
READS = {"recall", "show", "why", "stats", "scopes", "list", "changes", "export"}
# Commands that write: they make the store if there is none, and say so once.
WRITES = {"remember", "subject", "confirm", "check-every", "correct", "revoke", "reinstate", "link", "forget", "import"}


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
    (re.compile(r'\brevoke\(note_id="(n_\w+)", reason=…\)'), r'`corrigenda revoke \1 --reason "…"`'),
    (re.compile(r'\breinstate\(target_id="(e_\w+)", reason=…\)'), r'`corrigenda reinstate \1 --reason "…"`'),
    (
        re.compile(r'\bdeclare_subject\(subject="([^"]*)", one_value=false\)'),
        r'`corrigenda subject "\1" --many-values`',
    ),
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


def _store_path(settings: Settings) -> str | None:
    """The directory of a store on this machine's disk; None for a bucket (or LanceDB's memory://)."""
    return Location.of(settings.db).directory


def _refuse_lost_commits(command: str, settings: Settings) -> int | None:
    """Before a process writes a store in a bucket: the exit status if its object store would lose
    commits (it ignores conditional writes) or cannot be written, else None. With --single-writer, an
    object store that ignores them is a warning (store/storage/conditional_writes.py)."""
    from corrigenda.store import CorrigendaError
    from corrigenda.store.errors import ConditionalWritesIgnored
    from corrigenda.store.storage import conditional_writes

    said = "" if command == "serve" else f"{command}: "
    try:
        conditional_writes.check(settings.db, settings.storage_options)
    except ConditionalWritesIgnored as exc:
        if not settings.single_writer:
            return _fail(f"{said}{exc}")
        sys.stderr.write(
            f"corrigenda: warning: the object store at {exc.uri} does not honour conditional writes ({exc.detail}); "
            "started as the only process that writes it (--single-writer): a second writer would lose commits\n"
        )
    except CorrigendaError as exc:
        return _fail(f"{said}{exc}")
    return None


def _resolve_scope(settings: Settings, memory: Memory) -> str:
    from .project import resolve

    if settings.scope is not None:
        return settings.scope
    return resolve(settings.project, None, lambda: [c.scope for c in memory.scopes()], os.getcwd())[0]


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
    args = parser().parse_args(argv)
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
        Location.of(settings.db).check()
    except InvalidArgument as exc:
        return _fail(f"--{exc}")
    path = _store_path(settings)
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        return _fail(f"--db: {path} is a file, not a store directory (CORRIGENDA_DB names the folder of a store)")
    missing = missing_store(settings)
    if missing is not None and args.command in READS | {"ui"}:
        return _fail(_no_store(args.command, settings, missing))
    new_store = missing is not None and args.command in WRITES | {"serve"}
    if args.command in WRITES | {"serve", "ui"}:
        refused = _refuse_lost_commits(args.command, settings)
        if refused is not None:
            return refused

    if args.command == "serve":
        from .cli_serve import serve

        return serve(args, settings, missing)
    if args.command == "engine":  # through forward.py (entry.py), which needs none of this
        from . import forward

        return forward.engine_command(args.action, list(sys.argv[1:] if argv is None else argv), os.environ)
    if args.command == "install":
        from .cli_serve import install_entry

        return install_entry(args)

    from corrigenda.store import CorrigendaError

    from .cli_commands import COMMANDS, Call
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
        done = COMMANDS[args.command](Call(args, memory, scope, named, now, as_of, settings.person_actor))
        if done is not None:
            return done
    except (CorrigendaError, ValueError) as exc:
        return _fail(f"{args.command}: {exc}")
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:  # a person reads this: one line, the traceback only with CORRIGENDA_LOG_LEVEL=DEBUG
        logging.getLogger(__name__).debug("%s failed", args.command, exc_info=True)
        return _fail(f"{args.command} failed: {type(exc).__name__}: {exc}")
    finally:
        if memory_of is None:  # this command opened the store; the engine's outlives the command
            memory.close()
    if new_store:
        sys.stderr.write(f"corrigenda: made a new store at {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
