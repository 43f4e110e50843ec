"""The one mapping from engine errors and refused arguments to tool errors.

In mcp 2.x only a ToolError carries its message to the client; anything else reaches the agent
as a bare "Error executing tool". So every refusal of the store becomes a ToolError that names
the field or id, and anything unexpected is logged and reported without internals. Arguments the
tool's schema refuses read the same way: one line, each field with what it needs, instead of
pydantic's multi-line report with its documentation URLs. A prompt's refusal is a JSON-RPC error
naming what was refused, and a credential's error names no scope it may not read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from corrigenda.store import CorrigendaError, UnknownScope
from corrigenda.store.errors import InvalidArgument
from corrigenda.store.ids import ID_PATTERN, NOTE_ID_PATTERN
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
        if "No space left on device" in str(exc):  # Lance says so in its own words, errno or not
            raise ToolError(
                f"{tool} failed: the disk that holds the store is full (no space left on device); nothing of this "
                "call was stored. Free some space and call again"
            ) from exc
        raise ToolError(f"{tool} failed inside the store ({type(exc).__name__}); see the server log") from exc


def prompt_error(message: str) -> MCPError:
    """A prompt's refusal (a scope outside the grants, or not a scope at all): a JSON-RPC error whose
    message names it. Anything else a prompt raises, the SDK answers with "Error rendering prompt" (or
    -32603 on 2026-07-28) and a traceback in the log."""
    return MCPError(INVALID_PARAMS, message)


@contextmanager
def readable_scopes_only(may_read: Callable[[str], bool] | None) -> Iterator[None]:
    """Store work for a caller who may read only the scopes that `may_read` accepts (None: the local user,
    every one): the store's refusal of a scope nothing was ever stored in (UnknownScope) names the
    nearest scopes of the whole store; such a caller hears of the nearest it may read alone."""
    try:
        yield
    except UnknownScope as exc:
        if may_read is None:
            raise
        raise InvalidArgument("scope", exc.said(may_read)) from None


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
