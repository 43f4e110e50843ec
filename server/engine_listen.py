"""How the shared engine (engine.py) is reached: its lock, its files written whole and private, the Unix
socket or loopback port it listens on, and the wire's small parts (an answer sent, a peer named, a
proof compared)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .forward_target import LOOPBACK

try:
    import fcntl
except ImportError:  # Windows: msvcrt's lock instead
    fcntl = None  # type: ignore[assignment]


def _lock(path: Path) -> int | None:
    """The engine's lock beside its socket, held for its life; None when another engine holds it."""
    fd = os.open(path.with_suffix(".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:  # BlockingIOError; on Windows a PermissionError
        os.close(fd)
        return None
    return fd


def _private(path: Path, text: str) -> None:
    """`text` into `path` (0600), whole or not at all: a reader never sees half of it."""
    draft = path.with_name(f"{path.name}.{os.getpid()}")
    with open(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(draft, path)


def _listen(address: Path) -> socket.socket:
    """A Unix socket at `address` (.sock), born 0600 so that no other user can connect; or a loopback port
    (.port), written into `address` once it listens."""
    with contextlib.suppress(FileNotFoundError):
        address.unlink()  # a killed engine's: the lock says none is running
    if address.suffix == ".port":
        listener = socket.create_server((LOOPBACK, 0), backlog=64)
        _private(address, json.dumps({"port": listener.getsockname()[1], "pid": os.getpid()}))
    else:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)
        try:
            listener.bind(str(address))
        finally:
            os.umask(mask)
        listener.listen(64)
    listener.settimeout(1.0)
    return listener


def _answer(conn: socket.socket, said: Mapping[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(said).encode() + b"\n")


def _peer(conn: socket.socket) -> str:
    with contextlib.suppress(OSError, TypeError, ValueError):
        host, port = conn.getpeername()[:2]
        return f"{host}:{port}"
    return "a client"


def _same(said: str, expected: str) -> bool:
    import hmac  # hashlib's OpenSSL: only an engine on a loopback port needs it

    return hmac.compare_digest(said.encode(), expected.encode())
