"""A stdio server's messages, carried between the client and the engine (forward.py's docstring, "What
travels"): a stopped engine started again at the client's next message, each request under way
answered as unknown. Standard library only (forward.py)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading

TYPE_CHECKING = False  # typing itself is ~2 MiB in a forwarder that never needs it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import IO, Any

# As corrigenda.server's module, or by its own name in the lean interpreter (forward.LEAN), whose
# path holds this folder and no package.
if TYPE_CHECKING or __package__:
    from .forward_start import connect
    from .forward_target import NoEngine, Target
else:
    from forward_start import connect
    from forward_target import NoEngine, Target


class Pump:
    """A stdio server's messages, carried between this process's stdin and stdout and the engine's socket
    (forward.py's docstring: a stopped engine is started again at the client's next message)."""

    def __init__(self, target: Target, argv: Sequence[str], env: Mapping[str, str], sock: socket.socket) -> None:
        self.target, self.argv, self.env = target, argv, env
        self.sock: socket.socket | None = sock
        self.lock = threading.Lock()  # the socket, and the requests under way
        self.pending: dict[Any, str] = {}  # id -> method of each request sent and not yet answered
        self.initialize: bytes | None = None
        self.initialized: bytes | None = None
        self.out = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)  # a stray print must not corrupt the protocol

    def run(self) -> int:
        threading.Thread(target=self._answers, args=(self.sock,), daemon=True).start()
        for line in iter(sys.stdin.buffer.readline, b""):
            self._send(line)
        with self.lock:  # the client is done: the engine ends the session and closes
            if self.sock is not None:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_WR)
                    while self.sock.recv(1 << 16):
                        pass
        return 0

    def _send(self, line: bytes) -> None:
        message = _parsed(line)
        with self.lock:
            if message.get("method") == "initialize":
                self.initialize = line
            elif message.get("method") == "notifications/initialized":
                self.initialized = line
            if "method" in message and "id" in message:
                self.pending[_key(message["id"])] = message["method"]
            if self.sock is None:
                try:
                    self.sock = self._again()
                except NoEngine as exc:
                    self._answer_lost(message, f"corrigenda's shared engine could not be started again: {exc}")
                    return
            try:
                self.sock.sendall(line if line.endswith(b"\n") else line + b"\n")
            except OSError:
                self._lost(self.sock)

    def _again(self) -> socket.socket:
        """A new engine's connection, brought to where the last one was: initialized."""
        sock, _ = connect("mcp", self.argv, self.env, self.target)
        replies = sock.makefile("rb")
        if self.initialize is not None:
            sock.sendall(self.initialize)
            replies.readline()  # its answer went to the client the first time
            if self.initialized is not None:
                sock.sendall(self.initialized)
        threading.Thread(target=self._answers, args=(sock, replies), daemon=True).start()
        return sock

    def _answers(self, sock: socket.socket, replies: IO[bytes] | None = None) -> None:
        replies = replies or sock.makefile("rb")
        with contextlib.suppress(OSError):  # a reset (an engine killed with unread bytes) ends it as an end does
            for line in iter(replies.readline, b""):
                message = _parsed(line)
                if "method" not in message and "id" in message:
                    with self.lock:
                        self.pending.pop(_key(message["id"]), None)
                self.out.write(line)
                self.out.flush()
        with self.lock:
            self._lost(sock)

    def _answer_lost(self, message: dict, why: str) -> None:
        if "method" in message and "id" in message:
            self.pending.pop(_key(message["id"]), None)
            self._error(message["id"], why)
            self.out.flush()

    def _error(self, request_id: Any, why: str) -> None:
        """A JSON-RPC error for the client's request `request_id`, written (not flushed)."""
        error = {"code": -32603, "message": why}
        self.out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n")

    def _lost(self, sock: socket.socket) -> None:
        """The engine's connection ended (the lock held): each request under way is answered as unknown."""
        if self.sock is not sock:
            return
        self.sock = None
        with contextlib.suppress(OSError):
            sock.close()
        for key, method in self.pending.items():
            self._error(json.loads(key), (
                f"corrigenda's shared engine stopped during this {method} call; whether it took effect is "
                "unknown: read (recall_chains, history) before doing it again. The next call starts another engine."
            ))  # fmt: skip
        self.out.flush()
        self.pending.clear()


def _parsed(line: bytes) -> dict:
    with contextlib.suppress(ValueError):
        message = json.loads(line)
        if isinstance(message, dict):
            return message
    return {}


def _key(request_id: Any) -> str:
    return json.dumps(request_id)
