"""The `corrigenda` command in this process (entry.py, when no shared engine runs it): the checks every
command passes (its settings, its store's location, a read of a store that is not there, a write that
would lose commits), then the one function that runs it, found in the table of commands (cli_parser.py):
`corrigenda serve` for MCP clients, and commands that print what an agent would receive."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from corrigenda.store import InvalidArgument
from corrigenda.store.storage.location import Location
from pydantic import ValidationError

from .cli_parser import COMMANDS, Command, parser
from .cli_shared import Invocation, _fail, _store_path
from .cli_shared import _resolve_scope as _resolve_scope  # engine.py finds it here
from .config import DB_DEFAULT, DB_FLAG, Settings, db_origin, default_db, missing_store

if TYPE_CHECKING:
    from corrigenda.store import Memory


def _settings(args: argparse.Namespace) -> Settings:
    given = {k: v for k, v in vars(args).items() if v is not None and k in Settings.model_fields}
    return Settings(**given)


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


def _refuse_location(settings: Settings) -> int | None:
    """The exit status if the settings name no place a store can be (a malformed location, or a file
    where its folder would be), else None."""
    try:
        Location.of(settings.db).check()
    except InvalidArgument as exc:
        return _fail(f"--{exc}")
    path = _store_path(settings)
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        return _fail(f"--db: {path} is a file, not a store directory (CORRIGENDA_DB names the folder of a store)")
    return None


def _refuse_command(command: Command, settings: Settings, missing: str | None) -> int | None:
    """The exit status if the store cannot take `command` (the table says what it asks of the store): a
    read of one that is not there (a mistyped --db would look like an empty memory), or a write to a
    bucket that would lose commits; else None."""
    if missing is not None and command.needs_store:
        return _fail(_no_store(command.name, settings, missing))
    if command.writes:
        return _refuse_lost_commits(command.name, settings)
    return None


def _run(argv: Sequence[str] | None, memory_of: Callable[[Settings], Memory] | None = None) -> int:
    """A command; `memory_of` gives the store its settings name (the shared engine's, engine.py), else
    the command opens it."""
    args = parser().parse_args(argv)
    command = COMMANDS[args.command]
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
    refused = _refuse_location(settings)
    if refused is not None:
        return refused
    missing = missing_store(settings)
    refused = _refuse_command(command, settings, missing)
    if refused is not None:
        return refused
    return command.run(Invocation(args, argv, settings, missing, memory_of))


if __name__ == "__main__":
    sys.exit(main())
