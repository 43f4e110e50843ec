"""The store commands of the command line, a function each (COMMANDS): what they are handed (Call),
what they print, and the question a person answers on the terminal before an erasure."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from corrigenda.store import Draft, Memory

from . import render
from .cli import _fail, _show, in_cli_words, parse_time


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


def _recall(c: Call) -> None:
    r = c.memory.recall(c.args.query, c.scope, c.args.budget_tokens, as_of=c.as_of, named=c.named)
    _show(r, render.recall(r), c.args.json)


def _show_note(c: Call) -> None:
    h = c.memory.history(c.args.note_id)
    _show(h, render.history(h), c.args.json)


def _why(c: Call) -> None:
    x = c.memory.why_excluded(c.args.note_id, c.args.query, c.scope)
    _show(x, render.exclusion(x), c.args.json)


def _stats(c: Call) -> None:
    stats = c.memory.stats()
    _show(stats, "\n".join(f"{k}: {v}" for k, v in stats.items()), c.args.json)


def _scopes(c: Call) -> None:
    listed = c.memory.scope_page(c.args.offset, c.args.limit, c.args.contains, default_scope=c.scope)
    _show(listed, render.scopes(listed), c.args.json)


def _list(c: Call) -> None:
    page = c.memory.list_notes(c.scope, c.args.state, c.args.offset, c.args.limit, c.as_of, named=c.named)
    _show(page, render.note_list(page), c.args.json)


def _changes(c: Call) -> None:
    since = parse_time("--since", c.args.since, c.now)
    assert since is not None
    found = c.memory.changes(since, c.scope, c.args.limit, named=c.named)
    _show(found, render.changes(found), c.args.json)


def _export_command(c: Call) -> None:
    _export(c.memory, c.args.scope, c.args.out, c.args.vectors)


def _import(c: Call) -> int | None:
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


def _remember(c: Call) -> None:
    remembered = c.memory.remember(_draft(c), scope=c.scope, actor=c.actor, one_value=c.args.one_value)
    _show(remembered, render.remembered(remembered), c.args.json)


def _confirm_note(c: Call) -> None:
    confirmed = c.memory.confirm(c.args.note_id, reason=c.args.reason, actor=c.actor)
    _show(confirmed, render.lifecycle(confirmed, "Confirmed"), c.args.json)


def _check_every(c: Call) -> None:
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


def _subject(c: Call) -> None:
    if c.args.subject is None:
        found = c.memory.one_value_subjects(c.scope)
        listed = {"scope": c.scope, "one_value": [e.model_dump(mode="json") for e in found]}
        _show(listed, render.one_value_subjects(found, c.scope), c.args.json)
        return
    declared = c.memory.declare_subject(c.args.subject, scope=c.scope, one_value=not c.args.many_values,
                                        reason=c.args.reason, actor=c.actor)  # fmt: skip
    _show(declared, render.declared(declared), c.args.json)


def _correct(c: Call) -> None:
    corrected = c.memory.correct(c.args.note_id, _draft(c), reason=c.args.reason, actor=c.actor, fork=c.args.fork)
    _show(corrected, render.corrected(corrected), c.args.json)


def _revoke(c: Call) -> None:
    revoked = c.memory.revoke(c.args.note_id, reason=c.args.reason, actor=c.actor)
    _show(revoked, render.lifecycle(revoked, "Revoked"), c.args.json)


def _reinstate(c: Call) -> None:
    reinstated = c.memory.reinstate(c.args.target_id, reason=c.args.reason, actor=c.actor)
    _show(reinstated, render.lifecycle(reinstated, "Reinstated"), c.args.json)


def _link(c: Call) -> None:
    linked = c.memory.link(c.args.src_id, c.args.dst_id, c.args.kind, reason=c.args.reason, actor=c.actor)
    _show(linked, render.linked(linked), c.args.json)


def _forget(c: Call) -> int | None:
    if not c.args.yes:
        note = c.memory.history(c.args.note_id).note
        if not _confirm(f"Erase note {note.id} for good: {note.text[:80]!r}?"):
            return _fail("forget: not confirmed, nothing erased (pass --yes to skip the question)")
    forgotten = c.memory.forget(c.args.note_id, reason=c.args.reason, actor=c.actor)
    _show(forgotten, render.forgotten(forgotten), c.args.json)
    return None


# Every store command: the function that runs it (None when it went well, else its exit status). A
# person's writes are recorded with the settings' person as their actor.
COMMANDS: dict[str, Callable[[Call], int | None]] = {
    "recall": _recall, "show": _show_note, "why": _why, "stats": _stats, "scopes": _scopes, "list": _list,
    "changes": _changes, "export": _export_command, "import": _import, "remember": _remember,
    "subject": _subject, "confirm": _confirm_note, "check-every": _check_every, "correct": _correct, "revoke": _revoke, "reinstate": _reinstate, "link": _link, "forget": _forget,
}  # fmt: skip
