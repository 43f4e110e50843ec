"""The client's workspace roots: how a session finds its project on clients of protocol versions
before 2026-07-28, which deprecates roots (project.py says what else decides a session's scope)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import anyio
from mcp.shared.exceptions import NoBackChannelError
from mcp_types import ClientCapabilities, RootsCapability

from .project import DEFAULT_SCOPE as DEFAULT_SCOPE
from .project import scope_from_root as scope_from_root

log = logging.getLogger(__name__)

ROOTS_TIMEOUT = 5.0  # seconds a client gets to answer roots/list before the session goes on without


async def first_root(session: Any) -> str | None:
    """The URI of the client's first workspace root, or None (no roots offered, none open, or the
    protocol lets the server ask nothing)."""
    if not session.check_client_capability(ClientCapabilities(roots=RootsCapability())):
        return None
    try:
        with anyio.fail_after(ROOTS_TIMEOUT), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated in the newest protocol; clients still send them
            result = await session.list_roots()
    except NoBackChannelError:  # a 2026-07-28 connection: the server cannot ask the client anything
        return None
    except Exception as exc:  # a client that declared roots but cannot answer: still serve
        log.warning("roots/list failed (%s); going on without the client's roots", exc)
        return None
    return str(result.roots[0].uri) if result.roots else None
