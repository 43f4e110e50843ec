"""The one mapping from engine errors and refused arguments to tool errors.

In mcp 2.x only a ToolError carries its message to the client; anything else reaches the agent
as a bare "Error executing tool". So every refusal of the store becomes a ToolError that names
the field or id, and anything unexpected is logged and reported without internals. Arguments the
tool's schema refuses read the same way: one line, each field with what it needs, instead of
pydantic's multi-line report with its documentation URLs. A prompt's refusal is a JSON-RPC error
naming what was refused, and a credential's error names no scope it may not read.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from corrigenda.store import CorrigendaError, Memory
from corrigenda.store.errors import InvalidArgument
from corrigenda.store.ids import ID_PATTERN, NOTE_ID_PATTERN
from corrigenda.store.memory import SCOPES_NAMED
from corrigenda.store.views import ScopeCount
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import ValidationError
from pydantic_core import ErrorDetails

log = logging.getLogger(__name__)


@contextmanager
def tool_errors(tool: str) -> Iterator[None]:
    try:
        yield
    except CorrigendaError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("%s failed", tool)
        raise ToolError(f"{tool} failed inside the store ({type(exc).__name__}); see the server log") from exc


def prompt_error(message: str) -> MCPError:
    """A prompt's refusal (a scope outside the grants, or not a scope at all): a JSON-RPC error whose
    message names it. Anything else a prompt raises, the SDK answers with "Error rendering prompt" (or
    -32603 on 2026-07-28) and a traceback in the log."""
    return MCPError(INVALID_PARAMS, message)


@contextmanager
def readable_scopes_only(memory: Memory, scope: str | None, may_read: Callable[[str], bool] | None) -> Iterator[None]:
    """Store work reading `scope` (None: no one scope), for a caller who may read only the scopes that
    `may_read` accepts (None: the local user, every one). The store refuses a scope nothing was ever
    stored in naming the nearest scopes of the whole store (store/memory.py, `_unknown_scope`); such a
    caller hears of the nearest it may read alone, re-worded here from the store's scope list."""
    try:
        yield
    except InvalidArgument as exc:
        if may_read is None or scope is None or exc.field != "scope":
            raise
        every = memory.scopes()
        if not every or scope in {c.scope for c in every}:
            raise  # not that refusal: the store names no other scope than this one, which the caller may read
        raise InvalidArgument("scope", unknown_scope(scope, [c for c in every if may_read(c.scope)])) from None


def unknown_scope(scope: str, readable: list[ScopeCount]) -> str:
    """What the store says of a scope nothing was ever stored in, naming the nearest of `readable` alone."""
    said = f"nothing was ever stored in scope {scope!r} (mistyped, or a project with no notes yet?); "
    if not readable:
        return said + f"no scope you may read holds anything yet. A write to {scope!r} makes it"
    notes = {c.scope: c.notes for c in readable}
    nearest = difflib.get_close_matches(scope, list(notes), n=SCOPES_NAMED, cutoff=0.0)
    listed = ", ".join(f"{name!r} ({notes[name]} note{'' if notes[name] == 1 else 's'})" for name in nearest)
    more = ""
    if len(notes) > len(nearest):
        more = f", and {len(notes) - len(nearest)} more (`scopes` lists them; its `contains` finds one by name)"
    return said + f"the nearest scopes you may read: {listed}{more}. A write to {scope!r} makes it"


def invalid_arguments(tool: str, exc: ValidationError) -> str:
    """`Error executing tool remember: valid_until: must be …; text: Field required`: the SDK's prefix,
    as on every other tool error, then each field with what it needs."""
    problems = []
    for error in exc.errors(include_url=False):
        field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
        problems.append(f"{field or 'arguments'}: {_said(error)}")
    return f"Error executing tool {tool}: {'; '.join(problems)}"


def _said(error: ErrorDetails) -> str:
    """What a refused argument needs, in words: an id's pattern read as the kind of id it wants."""
    pattern = (error.get("ctx") or {}).get("pattern")
    if error["type"] == "string_pattern_mismatch" and pattern in ID_WORDS:
        return f"{error['input']!r:.80} is not {ID_WORDS[pattern]}"
    return " ".join(error["msg"].split())


ID_WORDS = {
    NOTE_ID_PATTERN: "a note id this server issued (like 'n_01k…': n_ and 26 letters and digits)",
    ID_PATTERN: "a note or event id this server issued (like 'n_01k…' or 'e_01k…')",
}
