"""The scope a session uses when a tool call names none (README, "Scopes").

A scope set with --scope or CORRIGENDA_SCOPE wins. Without one, a client that offers MCP roots
(its open workspace folders) gets a scope of its own: the first root's folder name and a short
hash of its full path, "My Project#3f2a9c", so that two folders named "api" in different places
keep different memories while a person still reads which project a scope is. Without roots the
scope is "default".
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
from corrigenda.store.where import SCOPE_MAX
from mcp.shared.exceptions import NoBackChannelError
from mcp_types import ClientCapabilities, RootsCapability

log = logging.getLogger(__name__)

DEFAULT_SCOPE = "default"
HASH_CHARS = 6
ROOTS_TIMEOUT = 5.0  # seconds a client gets to answer roots/list before the session uses "default"


def scope_from_root(uri: str) -> str:
    """'file:///home/me/My%20Project/' -> 'My Project#<6 hex of sha256("/home/me/My Project")>'."""
    parts = urlsplit(uri)
    path = unquote(parts.path if parts.scheme else uri).rstrip("/\\") or "/"
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # file:///C:/… on Windows
        path = path[1:]
    if len(path) >= 2 and path[1] == ":":  # drive letters are case-insensitive
        path = path[0].upper() + path[1:]
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or parts.netloc or "root"
    digest = hashlib.sha256(f"{parts.netloc}{path}".encode()).hexdigest()[:HASH_CHARS]
    return f"{name[: SCOPE_MAX - HASH_CHARS - 1]}#{digest}"


async def session_scope(session: Any) -> tuple[str, str]:
    """The scope for a session that configured none, and where it came from (said to the agent)."""
    if not session.check_client_capability(ClientCapabilities(roots=RootsCapability())):
        return DEFAULT_SCOPE, "the client offers no workspace roots"
    try:
        with anyio.fail_after(ROOTS_TIMEOUT), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the newest protocol; clients still send them
            result = await session.list_roots()
    except NoBackChannelError:  # a 2026-07-28 connection: the server cannot ask the client anything
        return DEFAULT_SCOPE, "this protocol version lets the server ask no roots"
    except Exception as exc:  # a client that declared roots but cannot answer: still serve
        log.warning("roots/list failed (%s); using scope %r", exc, DEFAULT_SCOPE)
        return DEFAULT_SCOPE, "the client did not answer roots/list"
    if not result.roots:
        return DEFAULT_SCOPE, "the client has no workspace root open"
    uri = str(result.roots[0].uri)
    return scope_from_root(uri), f"the client's workspace root {uri}"
