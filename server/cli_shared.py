"""What every command of the command line shares: what it is handed (Invocation), how it prints and
fails, the times a person types, the scope it works in, and where its store is on this machine's disk."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from corrigenda.store.storage.location import Location
from pydantic import BaseModel
from pydantic_core import PydanticCustomError

from .config import Settings

if TYPE_CHECKING:
    from corrigenda.store import Memory


@dataclass(frozen=True)
class Invocation:
    """What a command is handed once it has passed the checks every command passes (cli.py): its
    arguments, the argv they were parsed from (None: this process's), its settings, why its store is
    missing (None: it is there, or is a bucket), and `memory_of`, which gives the store its settings
    name (the shared engine's, engine.py; None: the command opens it)."""

    args: argparse.Namespace
    argv: Sequence[str] | None
    settings: Settings
    missing: str | None
    memory_of: Callable[[Settings], Memory] | None


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


def _resolve_scope(settings: Settings, memory: Memory) -> str:
    from .project import resolve

    if settings.scope is not None:
        return settings.scope
    return resolve(settings.project, None, lambda: [c.scope for c in memory.scopes()], os.getcwd())[0]
