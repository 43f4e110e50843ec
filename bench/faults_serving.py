"""Real `corrigenda serve` processes for bench/faults.py's servers and cluster parts (and bench/balancer.py):
started over stdio or HTTP, each with a connected client, optionally behind a front (a load balancer), and
a tool call as the message a child would have printed for it.
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faults_common import CHILD_WAIT_S, CORRIGENDA, SCOPE, SERVER_ENV, acknowledgement
from harness import free_port

if TYPE_CHECKING:
    from mcp import Client

# For a server told to stop: it first waits up to a minute for its forgets' erasures (server/app.py).
STOP_WAIT_S = 90.0


@dataclass
class Server:
    """One server process and the client that writes to it."""

    k: int
    client: Client
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)  # op → each acknowledged call's time
    calls: list[tuple[str, float, float]] = field(default_factory=list)  # (op, started s, ms) of each of those
    outcomes: list[Outcome] = field(default_factory=list)  # every write and read-back, answered or not


@dataclass(frozen=True)
class Outcome:
    """One call a client made and what came of it (`call_tool`'s kind: ack, refused or failed)."""

    op: str
    started: float  # time.perf_counter()
    finished: float
    kind: str
    error: str = ""


# What the clients of an HTTP servers phase reach the servers through: given the servers' URLs, a context
# that yields the URLs the clients connect to, client k to the k-th (modulo). A load balancer goes here:
# it starts in front of the servers and yields its own URL. None: each client talks to its own server.
Front = Callable[[Sequence[str]], AbstractContextManager[Sequence[str]]]
# The servers' allowed Host values behind a front: its port is chosen after they start.
BEHIND_A_FRONT = {"CORRIGENDA_ALLOWED_HOSTS": "127.0.0.1:*"}


@contextmanager
def haproxy_front(urls: Sequence[str]) -> Iterator[Sequence[str]]:
    """Debian's HAProxy on a free loopback port, round-robin over the servers at `urls` (bench/haproxy.py):
    every client reaches every server, one request here, the next there."""
    from urllib.parse import urlsplit

    from haproxy import balancing

    port = free_port()
    with (
        tempfile.TemporaryDirectory() as folder,
        balancing(port, [urlsplit(u).port or 0 for u in urls], Path(folder)) as b,
    ):
        yield [b.url]


@asynccontextmanager
async def started_servers(
    db: str, count: int, transport: str, env: Mapping[str, str], logs: Path, closing_errors: list[str],
    front: Front | None = None,
) -> AsyncIterator[list[Server]]:  # fmt: skip
    """`count` real server processes on one store, each with its own connected client (HTTP servers log
    to `logs`; `front`: see Front). A client that fails as it closes (its server broke under it: a
    store without conditional writes can leave a server unable to open a table) is added to
    `closing_errors`, not raised: the phase's checks still run."""
    from mcp.client.stdio import StdioServerParameters

    async with AsyncExitStack() as stack:
        args = ["serve", "--db", db, "--scope", SCOPE]
        if transport == "stdio":
            if front is not None:
                raise ValueError("a front (a load balancer) stands before HTTP servers only")
            targets: Sequence[Any] = [
                StdioServerParameters(command=CORRIGENDA, args=args, env={**SERVER_ENV, **env}) for _ in range(count)
            ]
        else:
            targets = [stack.enter_context(http_server(args, {**SERVER_ENV, **env}, logs)) for _ in range(count)]
            if front is not None:
                targets = stack.enter_context(front(targets))
        servers = []
        for k in range(count):
            client = await stack.enter_async_context(connected(targets[k % len(targets)], k, closing_errors))
            servers.append(Server(k, client))
        yield servers


@asynccontextmanager
async def connected(target: Any, k: int, closing_errors: list[str]) -> AsyncIterator[Client]:
    from mcp import Client

    client = Client(target)
    await client.__aenter__()
    try:
        yield client
    finally:
        try:
            await client.__aexit__(None, None, None)
        except Exception as exc:
            closing_errors.append(f"server {k}'s client failed as it closed: {exc!r}"[:300])


@contextmanager
def http_server(args: Sequence[str], env: Mapping[str, str], logs: Path) -> Iterator[str]:
    """`corrigenda serve --transport http` on a free loopback port, its log in `logs`; yields its URL
    once it listens."""
    port = free_port()
    cmd = [CORRIGENDA, *args, "--transport", "http", "--port", str(port)]
    log = (logs / f"server-{port}.log").open("w")
    proc = subprocess.Popen(cmd, env=dict(env), stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + CHILD_WAIT_S
        while not listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{' '.join(cmd)} did not start: {(logs / f'server-{port}.log').read_text()[-2000:]}"
                )
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_WAIT_S)
        log.close()


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def call_tool(client: Client, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool call, as the message a child would have printed for it."""
    answer = await client.call_tool(op, args)
    if answer.is_error:
        text = " ".join(getattr(c, "text", "") for c in answer.content)
        # the server maps a store refusal to its message, anything else to "... failed inside the store"
        kind = "failed" if "failed inside the store" in text else "refused"
        return {"kind": kind, "op": op, "error": text}
    assert answer.structured_content is not None
    if op in ("history", "recall_chains"):  # reads: nothing to acknowledge
        return {"kind": "ack", "op": op}
    return {"kind": "ack", "op": op, **acknowledgement(op, answer.structured_content)}
