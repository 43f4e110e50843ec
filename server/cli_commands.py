"""The store commands of the command line, a function each (the table of commands, cli_parser.py, names
them): what they are handed (Call), how they are run on the store (store_command), what they print, and
the question a person answers on the terminal before an erasure."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from corrigenda.store import CorrigendaError, Draft, Memory

from . import render
from .cli_shared import Invocation, _fail, _resolve_scope, _show, _store_path, in_cli_words, parse_time
from .config import build_memory


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


def _confirm(question: str) -> bool:
    """Ask on the terminal; without one (a script, CI) the answer is no: pass --yes."""
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


@dataclass(frozen=True)
class Call:
    """What a store command is handed: its arguments, the store, the scope it works in (and whether it
    was `named`: else this folder's project's, where a new one is empty rather than a typo), the store's
    time, `--as-of`'s, and the actor a person's write is recorded as."""

    args: argparse.Namespace
    memory: Memory
    scope: str
    named: bool
    now: datetime
    as_of: datetime | None
    actor: str


log = logging.getLogger("corrigenda.server.cli")  # the command line's: a failure's traceback, at DEBUG


def store_command(command: Callable[[Call], int | None]) -> Callable[[Invocation], int]:
    """A store command as the table runs it: `command` (None when it went well, else its exit status)
    on the store the settings name (the shared engine's, else opened here and closed after), in the
    scope they name or this folder's project's. Its failure is one line on stderr, exit status 2; a
    store it made is said once. A person's writes are recorded with the settings' person as their actor."""

    def run(given: Invocation) -> int:
        args, settings = given.args, given.settings
        memory = (given.memory_of or build_memory)(settings)
        try:
            now = memory.clock()
            as_of = parse_time("--as-of", getattr(args, "as_of", None), now)
            scope = _resolve_scope(settings, memory)
            named = settings.scope is not None  # else this folder's project's: a new one is empty, not a typo
            done = command(Call(args, memory, scope, named, now, as_of, settings.person_actor))
            if done is not None:
                return done
        except (CorrigendaError, ValueError) as exc:
            return _fail(f"{args.command}: {exc}")
        except (KeyboardInterrupt, BrokenPipeError):
            raise
        except Exception as exc:  # a person reads this: one line, the traceback only with CORRIGENDA_LOG_LEVEL=DEBUG
            log.debug("%s failed", args.command, exc_info=True)
            return _fail(f"{args.command} failed: {type(exc).__name__}: {exc}")
        finally:
            if given.memory_of is None:  # this command opened the store; the engine's outlives the command
                memory.close()
        if given.missing is not None:  # a write (a read of a store that is not there stops before, cli.py)
            sys.stderr.write(f"corrigenda: made a new store at {_store_path(settings)}\n")
        return 0

    return run


@store_command
def recall(c: Call) -> None:
    r = c.memory.recall(c.args.query, c.scope, c.args.budget_tokens, as_of=c.as_of, named=c.named)
    _show(r, render.recall(r), c.args.json)


@store_command
def show_note(c: Call) -> None:
    h = c.memory.history(c.args.note_id)
    _show(h, render.history(h), c.args.json)


@store_command
def why(c: Call) -> None:
    x = c.memory.why_excluded(c.args.note_id, c.args.query, c.scope)
    _show(x, render.exclusion(x), c.args.json)


@store_command
def stats(c: Call) -> None:
    stats = c.memory.stats()
    _show(stats, "\n".join(f"{k}: {v}" for k, v in stats.items()), c.args.json)


@store_command
def scopes(c: Call) -> None:
    listed = c.memory.scope_page(c.args.offset, c.args.limit, c.args.contains, default_scope=c.scope)
    _show(listed, render.scopes(listed), c.args.json)


@store_command
def list_notes(c: Call) -> None:
    page = c.memory.list_notes(c.scope, c.args.state, c.args.offset, c.args.limit, c.as_of, named=c.named)
    _show(page, render.note_list(page), c.args.json)


@store_command
def changes(c: Call) -> None:
    since = parse_time("--since", c.args.since, c.now)
    assert since is not None
    found = c.memory.changes(since, c.scope, c.args.limit, named=c.named)
    _show(found, render.changes(found), c.args.json)


@store_command
def export_command(c: Call) -> None:
    _export(c.memory, c.args.scope, c.args.out, c.args.vectors)


@store_command
def import_command(c: Call) -> int | None:
    args = c.args
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
    done = c.memory.import_lines(
        lines, c.scope, actor="corrigenda import", source=os.path.basename(args.file), progress=_progress,
        partial=args.partial,
    )  # fmt: skip
    _show(done, render.imported(done), args.json)
    return None


def _draft(c: Call) -> Draft:
    given = {k: getattr(c.args, k) for k in ("kind", "subject", "tags", "source") if getattr(c.args, k)}
    valid = {
        k: parse_time(f"--{k.replace('_', '-')}", getattr(c.args, k), c.now) for k in ("valid_from", "valid_until")
    }
    return Draft(text=c.args.text, **given, **{k: v for k, v in valid.items() if v is not None})


@store_command
def remember(c: Call) -> None:
    remembered = c.memory.remember(_draft(c), scope=c.scope, actor=c.actor, one_value=c.args.one_value)
    _show(remembered, render.remembered(remembered), c.args.json)


@store_command
def confirm_note(c: Call) -> None:
    confirmed = c.memory.confirm(c.args.note_id, reason=c.args.reason, actor=c.actor)
    _show(confirmed, render.lifecycle(confirmed, "Confirmed"), c.args.json)


@store_command
def check_every(c: Call) -> None:
    event = c.memory.check_every(c.args.days, scope=c.scope, reason=c.args.reason, actor=c.actor)
    said = (
        f"a current note neither written nor confirmed for {c.args.days} day{'s' * (c.args.days != 1)} reads UNCHECKED since …"
        if c.args.days else "no current note is marked UNCHECKED"
    )  # fmt: skip
    _show(
        event,
        f"Scope {c.scope}: {said} (event {event.id}).",
        c.args.json,
    )


@store_command
def subject(c: Call) -> None:
    if c.args.subject is None:
        found = c.memory.one_value_subjects(c.scope)
        listed = {"scope": c.scope, "one_value": [e.model_dump(mode="json") for e in found]}
        _show(listed, render.one_value_subjects(found, c.scope), c.args.json)
        return
    declared = c.memory.declare_subject(c.args.subject, scope=c.scope, one_value=not c.args.many_values,
                                        reason=c.args.reason, actor=c.actor)  # fmt: skip
    _show(declared, render.declared(declared), c.args.json)


@store_command
def correct(c: Call) -> None:
    corrected = c.memory.correct(c.args.note_id, _draft(c), reason=c.args.reason, actor=c.actor, fork=c.args.fork)
    _show(corrected, render.corrected(corrected), c.args.json)


@store_command
def revoke(c: Call) -> None:
    revoked = c.memory.revoke(c.args.note_id, reason=c.args.reason, actor=c.actor)
    _show(revoked, render.lifecycle(revoked, "Revoked"), c.args.json)


@store_command
def reinstate(c: Call) -> None:
    reinstated = c.memory.reinstate(c.args.target_id, reason=c.args.reason, actor=c.actor)
    _show(reinstated, render.lifecycle(reinstated, "Reinstated"), c.args.json)


@store_command
def link(c: Call) -> None:
    linked = c.memory.link(c.args.src_id, c.args.dst_id, c.args.kind, reason=c.args.reason, actor=c.actor)
    _show(linked, render.linked(linked), c.args.json)


@store_command
def forget(c: Call) -> int | None:
    if not c.args.yes:
        note = c.memory.history(c.args.note_id).note
        if not _confirm(f"Erase note {note.id} for good: {note.text[:80]!r}?"):
            return _fail("forget: not confirmed, nothing erased (pass --yes to skip the question)")
    forgotten = c.memory.forget(c.args.note_id, reason=c.args.reason, actor=c.actor)
    _show(forgotten, render.forgotten(forgotten), c.args.json)
    return None
