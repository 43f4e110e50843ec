"""The one adapter over the MCP SDK's private parts, and why each is needed."""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server under `server`, for the two things MCPServer has no public way to do: answer
    `logging/setLevel` (and so declare the logging capability; app.py), and serve stdio on streams of our
    own, so that a stray print cannot corrupt the protocol (stdio.py). tests/server/test_surface.py and
    tests/server/test_stdio.py fail if this attribute goes away."""
    return server._lowlevel_server
