"""How many HTTP connections a process holds open, and for how long one may take to send its request.

uvicorn (h11) arms no timer on a new connection, and cancels its keep-alive timer on the first byte
that arrives: a client that sends half a request head and nothing more holds a socket for good,
without a token, since the token is read from the head. 1,100 such sockets used up an open-file
limit of 1,024 and stopped all service. Nor does anything time a body: a client with a token that
sends a head and then a body that never ends (or never comes) holds its socket as long. So here:
- a connection has `request_timeout_s` to send each request whole, head and body, from when it opens
  and from the end of each response; bytes trickling in do not extend it. Once a request has
  arrived whole, its answer (a long-lived MCP stream among them) takes as long as it needs;
- the process holds at most `max_connections`; when a new one would pass the cap, the connection
  that has waited longest for a request is closed to make room (one whose request has arrived whole
  never is), else the new one is closed. Flooding the port thus delays nobody who sends a request at once;
- at start the soft open-file limit is raised to the hard one, and the cap kept below it.
One `Admission` serves every HTTP server of a process (a stdio server's web view runs on a thread
and loop of its own), since they share one open-file limit.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from .redaction import redact_every_log

# A client on a slow link sends a head in well under a second, and a tool call's arguments (a few
# kilobytes, a note's text at most) in not much more.
REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 1000
RESERVED_FILES = 256  # for the store's files, the model and the listening sockets
UNLIMITED_FILES = 65536  # the soft limit to ask for when the hard one is unlimited


@dataclass
class Admission:
    """Open connections of a process, and the ones waiting for a request to arrive whole, oldest first."""

    max_connections: int
    request_timeout_s: float
    _open: set[Admitted] = field(default_factory=set)
    _waiting: OrderedDict[Admitted, None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, connection: Admitted) -> None:
        with self._lock:
            self._open.add(connection)
            if len(self._open) <= self.max_connections:
                return
            oldest = next(iter(self._waiting), None)
            if oldest is not None:
                self._waiting.pop(oldest)
        if oldest is None:  # every connection is serving a request: refuse the newcomer
            connection.transport.close()
        else:
            oldest.loop.call_soon_threadsafe(oldest.close_if_waiting)

    def waiting(self, connection: Admitted, waits: bool) -> None:
        with self._lock:
            if waits and connection in self._open:
                self._waiting[connection] = None
                self._waiting.move_to_end(connection)
            else:
                self._waiting.pop(connection, None)

    def leave(self, connection: Admitted) -> None:
        with self._lock:
            self._open.discard(connection)
            self._waiting.pop(connection, None)


class Admitted(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request to arrive whole, under an `Admission`."""

    admission: Admission

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._answered: RequestResponseCycle | None = None  # the request last answered

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.admission.admit(self)
        if not transport.is_closing():
            self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        self.admission.leave(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._arrived_whole():  # its answer (a long-lived stream among them) takes as long as it needs
            self._stop_waiting()

    def on_response_complete(self) -> None:
        self._answered = self.cycle
        super().on_response_complete()  # may start a pipelined request, whole or not
        # The next request, or the rest of the body of one answered before it arrived whole.
        if not self._arrived_whole() and not self.transport.is_closing():
            self._await_request()

    def close_if_waiting(self) -> None:
        if self._deadline is not None and not self.transport.is_closing():
            self._stop_waiting()
            self.transport.close()

    def _arrived_whole(self) -> bool:
        """Whether a request not yet answered has arrived, its body to the end."""
        cycle = self.cycle
        return cycle is not None and cycle is not self._answered and not cycle.more_body

    def _await_request(self) -> None:
        self._stop_waiting()
        self._deadline = self.loop.call_later(self.admission.request_timeout_s, self.close_if_waiting)
        self.admission.waiting(self, True)

    def _stop_waiting(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.admission.waiting(self, False)


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit toward the hard one; the soft limit now in force."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to raise
        return UNLIMITED_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = UNLIMITED_FILES if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # macOS refuses more than its per-process maximum: keep what we have
            pass
    return UNLIMITED_FILES if soft == resource.RLIM_INFINITY else soft


@cache
def process_admission() -> Admission:
    """The process's one Admission, with the open-file limit raised once."""
    room = raise_open_file_limit() - RESERVED_FILES
    return Admission(max_connections=max(16, min(MAX_CONNECTIONS, room)), request_timeout_s=REQUEST_TIMEOUT_S)


def bounded_server(
    app: Any, host: str, port: int, log_level: str = "warning", admission: Admission | None = None
) -> uvicorn.Server:
    """A uvicorn server for `app` whose connections go through `admission` (the process's by default), and
    whose log lines, like every other of the process, show no token (redaction.py)."""

    class Protocol(Admitted):
        pass

    Protocol.admission = admission or process_admission()
    config = uvicorn.Config(app, host=host.strip("[]"), port=port, http=Protocol, log_level=log_level.lower())
    redact_every_log()  # the handlers the config has just set up write access lines, which name the query
    return uvicorn.Server(config)
