"""The one mapping from engine errors to tool errors.

In mcp 2.x only a ToolError carries its message to the client; anything else reaches the agent
as a bare "Error executing tool". So every refusal of the store becomes a ToolError that names
the field or id, and anything unexpected is logged and reported without internals.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from corrigenda.store import CorrigendaError
from mcp.server.mcpserver.exceptions import ToolError

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
