"""Any server answers any request: three `corrigenda serve --transport http` on one store in a bucket,
HAProxy round-robin in front with no stickiness, and a 300-call mix through it for each protocol version.

The store is a bucket on moto's S3 server (local_s3.py) in this process, the servers log each call at
INFO, and HAProxy (haproxy.py) names the server of each response. One client per protocol version
(2025-11-25: the initialize handshake; 2026-07-28: no handshake), one credential of a grants file,
calls one after another, so that round-robin sends each to the next server. Each fact takes seven
calls, in this order:

    remember (the old value), correct (the new one), recall_chains, list_notes, why_excluded (the old
    note), history (the old note), scopes

and each answer is checked against the writes before it, made on other servers: the correction at the
head of its chain and nowhere as history, the newest current note, the old note history and replaced
by the new one, the scope's count of notes. A call that fails or answers otherwise is an error. Before
the first run, each server is warmed with two calls (its model loaded), so that no timed call waits for
that.

Run from the repository root:

    .venv/bin/python bench/balancer.py [--calls N] [--json PATH] [--dir DIR]

It prints, per protocol version, the calls each server answered (by the responses' X-Served-By), the
errors, how many responses carried an Mcp-Session-Id, and remember / correct / recall_chains p50 and
p99 as the client measured them (through the balancer); bench/results/balancer.json keeps these and
the server of every call. --dir keeps HAProxy's configuration and log and the servers' logs.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
import httpx2
from faults import SERVER_ENV, http_server
from haproxy import SERVED_BY, Balancer, balancing
from local_s3 import KEY_ID, LocalS3
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

VERSIONS = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}  # protocol version → the SDK client's mode
CALLS = 300
CYCLE = ("remember", "correct", "recall_chains", "list_notes", "why_excluded", "history", "scopes")
TIMED = ("remember", "correct", "recall_chains")
SERVERS = 3
TOKEN = "balancer-bench-token-0123456789abcdef"
GRANTS = f"""
[[credentials]]
name = "team"
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
write = ["team-*"]
"""
# What app.py logs of each call, at INFO: which tool, and how it ended.
LOGGED = re.compile(
    r"corrigenda\.server\.app INFO (\w+) (answered|failed|answered with an error|refused its arguments) in"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the fleet -------------------------------------------------------------------------------------


@contextmanager
def seaweed_store(bucket: str = "corrigenda-balancer") -> Iterator[tuple[str, dict[str, str]]]:
    """A bucket on a SeaweedFS cluster on loopback (bench/seaweed.py: a master, three volume servers with
    two copies, a filer, the S3 gateway): the store's URI, and the variables a server needs to reach it."""
    from seaweed import SeaweedCluster

    with SeaweedCluster([bucket]) as cluster:
        yield f"s3://{bucket}/team", cluster.env


STORES = ("seaweedfs", "moto")


@contextmanager
def moto_store(bucket: str = "corrigenda-balancer") -> Iterator[tuple[str, dict[str, str]]]:
    """A bucket on moto's S3 server on a free loopback port, that takes only its own key and makes each
    conditional write atomic: the store's URI, and the variables a server needs to reach it."""
    s3 = LocalS3(free_port(), [bucket], access_key=KEY_ID).start()
    try:
        yield f"s3://{bucket}/team", s3.env
    finally:
        s3.stop()


@dataclass
class Fleet:
    balancer: Balancer
    logs: dict[str, Path]  # HAProxy's name of each server (s1, s2, …) → the server's log

    @property
    def url(self) -> str:
        return self.balancer.url

    def logged(self) -> dict[str, Counter[str]]:
        """The calls each server's own log says it answered, by tool (whatever the outcome)."""
        return {name: Counter(tool for tool, _ in LOGGED.findall(log.read_text())) for name, log in self.logs.items()}


@contextmanager
def fleet(
    db: str, env: Mapping[str, str], folder: Path, port: int | None = None, count: int = SERVERS
) -> Iterator[Fleet]:
    """`count` servers on the store `db` (`env`: what they need to reach it, and any other setting) and
    HAProxy in front of them on 127.0.0.1:`port`, which their CORRIGENDA_ALLOWED_HOSTS names; logs in
    `folder`. Everything stops when the block ends."""
    port = port or free_port()
    env = {**SERVER_ENV, **env, "CORRIGENDA_ALLOWED_HOSTS": f"127.0.0.1:{port}", "CORRIGENDA_LOG_LEVEL": "INFO"}
    with ExitStack() as stack:
        urls = [stack.enter_context(http_server(["serve", "--db", db], env, folder)) for _ in range(count)]
        backends = [urlsplit(url).port or 0 for url in urls]
        balancer = stack.enter_context(balancing(port, backends, folder))
        yield Fleet(balancer, {f"s{i}": folder / f"server-{p}.log" for i, p in enumerate(backends, 1)})


# -- a client through the balancer -----------------------------------------------------------------


@dataclass
class Wire:
    """What the client's HTTP exchanges carried."""

    served: list[tuple[str, str]] = field(default_factory=list)  # (JSON-RPC method, X-Served-By) of each POST
    statuses: list[int] = field(default_factory=list)
    session_ids: list[str] = field(default_factory=list)  # any Mcp-Session-Id, sent or received

    def calls_since(self, start: int) -> list[str]:
        """Who answered each tools/call request from the `start`-th POST on."""
        return [server for method, server in self.served[start:] if method == "tools/call"]


@asynccontextmanager
async def through(
    url: str, version: str, token: str, elicitation: ElicitationFnT | None = None
) -> AsyncIterator[tuple[Client, Wire]]:
    """The SDK client speaking `version` (a key of VERSIONS) to `url` with `token` on every request, and
    what its requests and responses carried; `elicitation`: the person who answers questions (none: the
    client declares it cannot ask)."""
    wire = Wire()

    async def seen(response: httpx2.Response) -> None:
        request = response.request
        wire.statuses.append(response.status_code)
        wire.session_ids += [
            s for s in (request.headers.get("mcp-session-id"), response.headers.get("mcp-session-id")) if s
        ]
        if request.method == "POST":
            try:
                method = str(json.loads(request.content).get("method", "a response"))
            except (ValueError, AttributeError):
                method = "unreadable"
            wire.served.append((method, response.headers.get(SERVED_BY, "?")))

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, trust_env=False, timeout=120, event_hooks={"response": [seen]}) as http,
        Client(streamable_http_client(url, http_client=http), mode=VERSIONS[version], elicitation_callback=elicitation) as client,
    ):  # fmt: skip
        await client.list_tools()  # the client's first call would ask for it (its results' schemas): ask now
        yield client, wire


async def warm(url: str, token: str, scope: str = "team-warm", count: int = SERVERS) -> None:
    """Two calls per server that load its model (round-robin: twice `count` calls in a row), in a scope
    the token may read."""
    async with through(url, "2026-07-28", token) as (client, _):
        for _ in range(2 * count):
            await client.call_tool("recall_chains", {"query": "warm up", "scope": scope})


# -- the mix ---------------------------------------------------------------------------------------


@dataclass
class Answer:
    """One tool call through the balancer."""

    tool: str
    servers: list[str]  # who answered each of its tools/call requests (two when a question was answered)
    ms: float
    error: str | None  # the tool's error, or what its answer got wrong

    @property
    def server(self) -> str:
        return self.servers[-1] if self.servers else "?"


def old_text(k: int) -> str:
    return f"The billing-{k:03d} service listens on port {8000 + k}."


def new_text(k: int) -> str:
    return f"The billing-{k:03d} service listens on port {9000 + k}."


def arguments(tool: str, k: int, scope: str, ids: Mapping[str, str]) -> dict[str, Any]:
    """The call `tool` makes about fact `k`; `ids`: the fact's old and new note ids, once known."""
    calls: dict[str, Callable[[], dict[str, Any]]] = {
        "remember": lambda: {"text": old_text(k), "subject": f"billing-{k:03d}.port", "scope": scope},
        "correct": lambda: {"note_id": ids["old"], "text": new_text(k), "reason": "moved to the new port"},
        "recall_chains": lambda: {"query": new_text(k), "scope": scope},
        "list_notes": lambda: {"scope": scope, "state": "current", "limit": 1},
        "why_excluded": lambda: {"note_id": ids["old"], "scope": scope},
        "history": lambda: {"note_id": ids["old"]},
        "scopes": lambda: {"contains": scope},
    }
    return calls[tool]()


def wrong(tool: str, k: int, scope: str, ids: dict[str, str], answer: dict[str, Any]) -> str | None:
    """What `answer` gets wrong about the writes before it (None: nothing); a write's answer records its id."""
    if tool in ("remember", "correct"):
        ids["old" if tool == "remember" else "new"] = answer["note"]["id"]
        return None
    old, new = ids["old"], ids["new"]
    if tool == "recall_chains":
        heads = [h["id"] for c in answer["chains"] for h in c["heads"]]
        return None if new in heads and old not in heads else f"recall's heads {heads} lack {new} or hold {old}"
    if tool == "list_notes":
        newest = [n["id"] for n in answer["notes"]]
        return None if newest == [new] else f"the newest current note is {newest}, not {new}"
    if tool == "why_excluded":
        replaced = [n["id"] for n in answer["replaced_by"]]
        return None if (answer["verdict"], replaced) == ("history", [new]) else f"{answer['verdict']}, by {replaced}"
    if tool == "history":
        heads = [h["id"] for h in answer["chain"]["heads"]]
        return None if heads == [new] else f"the chain's heads are {heads}, not [{new}]"
    counts = {s["scope"]: s["notes"] for s in answer["scopes"]}
    return None if counts.get(scope) == 2 * (k + 1) else f"{scope} holds {counts.get(scope)} notes, not {2 * (k + 1)}"


async def mix(client: Client, wire: Wire, scope: str, calls: int = CALLS) -> list[Answer]:
    """`calls` calls of CYCLE, one fact per cycle, in `scope` (a new one), each checked."""
    answers: list[Answer] = []
    ids: dict[str, str] = {}
    for i in range(calls):
        tool, k = CYCLE[i % len(CYCLE)], i // len(CYCLE)
        start, started = len(wire.served), time.perf_counter()
        error = None
        try:
            result = await client.call_tool(tool, arguments(tool, k, scope, ids))
            if result.is_error or result.structured_content is None:
                error = result.content[0].text if result.content else "an error with no text"  # type: ignore[union-attr]
            else:
                error = wrong(tool, k, scope, ids, result.structured_content)
        except Exception as exc:  # a failed request or a missing id after a failed write: counted, not raised
            error = f"{type(exc).__name__}: {exc}"
        ms = (time.perf_counter() - started) * 1000
        answers.append(Answer(tool, wire.calls_since(start), ms, error))
    return answers


def summary(
    answers: list[Answer], wire: Wire, logged: Mapping[str, Counter[str]], balanced: Mapping[str, int]
) -> dict[str, Any]:
    """The figures of one run: calls per server (by the responses, the servers' logs and HAProxy's log),
    errors, session ids seen, per-tool latency, and who answered each call."""
    by_tool: dict[str, list[float]] = {}
    for a in answers:
        by_tool.setdefault(a.tool, []).append(a.ms)
    errors = [f"call {i} {a.tool} on {a.server}: {a.error}" for i, a in enumerate(answers) if a.error]
    return {
        "calls": len(answers),
        "per_server": dict(sorted(Counter(a.server for a in answers).items())),
        "per_server_logged": {name: sum(c.values()) for name, c in sorted(logged.items())},
        "requests_per_server_haproxy": dict(sorted(balanced.items())),
        "errors": len(errors),
        "error_samples": errors[:10],
        "session_ids_seen": len(wire.session_ids),
        "http_statuses": dict(Counter(str(s) for s in wire.statuses)),
        "latency_ms": {
            tool: {
                "p50": round(harness.percentile(ms, 50), 1),
                "p99": round(harness.percentile(ms, 99), 1),
                "max": round(max(ms), 1),
                "calls": len(ms),
            }
            for tool, ms in by_tool.items()
        },
        "answered_by": [f"{a.tool} {'→'.join(a.servers) or '?'}" for a in answers],
    }


@dataclass
class Run:
    """The mix through the balancer for one protocol version: each call, what the wire carried, and the
    calls each server's log and HAProxy's log count in that time."""

    answers: list[Answer]
    wire: Wire
    logged: dict[str, Counter[str]]  # server → tool → calls its log says it answered
    balanced: dict[str, int]  # server → requests HAProxy sent it

    def summary(self) -> dict[str, Any]:
        return summary(self.answers, self.wire, self.logged, self.balanced)


async def run(running: Fleet, version: str, calls: int, token: str = TOKEN, scope: str | None = None) -> Run:
    """The mix through the balancer for one protocol version, in a scope of its own (by default
    team-VERSION)."""
    before, balanced_before = running.logged(), running.balancer.answered_by()
    async with through(running.url, version, token) as (client, wire):
        answers = await mix(client, wire, scope or f"team-{version}", calls)
    after, balanced_after = running.logged(), running.balancer.answered_by()
    logged = {name: after[name] - before.get(name, Counter()) for name in after}
    balanced = {name: n - balanced_before.get(name, 0) for name, n in balanced_after.items()}
    return Run(answers, wire, logged, balanced)


def table(payload: dict[str, Any]) -> str:
    stores = payload.get("stores") or {"moto": {"versions": payload["versions"]}}  # a file of before it
    names = sorted({n for on in stores.values() for run in on["versions"].values() for n in run["per_server"]})
    rows = []
    for store, on in stores.items():
        for version, run in on["versions"].items():
            lat = run["latency_ms"]
            rows.append([
                store, version, run["calls"], *(run["per_server"].get(n, 0) for n in names), run["errors"],
                run["session_ids_seen"], *(f"{lat[t]['p50']:.0f} / {lat[t]['p99']:.0f}" for t in TIMED),
            ])  # fmt: skip
    header = ["store", "protocol", "calls", *names, "errors", "session ids", *(f"{t} p50 / p99 ms" for t in TIMED)]
    return harness.markdown_table(header, rows)


TABLES = {"main": table}


def main() -> int:
    parser = harness.parser(__doc__, results="balancer")
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls per protocol version (default {CALLS})")
    parser.add_argument("--dir", type=Path, help="keep HAProxy's and the servers' configuration and logs here")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    args = parser.parse_args()
    stores = {
        "seaweedfs": ("SeaweedFS (bench/seaweed.py)", seaweed_store),
        "moto": ("moto (bench/local_s3.py)", moto_store),
    }
    payload: dict[str, Any] = {"servers": SERVERS, "balancer": "HAProxy, roundrobin, mode http", "stores": {}}
    for name in args.stores:
        label, store = stores[name]
        payload["stores"][name] = {"store": label, "versions": _run_on(store, args)}
    harness.write_results(args.json, payload)
    print(table(payload))
    errors = 0
    for name, on in payload["stores"].items():
        for version, figures in on["versions"].items():
            errors += figures["errors"]
            for line in figures["error_samples"]:
                print(f"{name} {version}: {line}", file=sys.stderr)
    return 1 if errors else 0


def _run_on(store: Callable[[], Any], args: Any) -> dict[str, Any]:
    """The calls of every protocol version through a fleet on `store`."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "grants.toml").write_text(GRANTS)
        with (
            store() as (db, store_env),
            fleet(db, {**store_env, "CORRIGENDA_GRANTS": str(folder / "grants.toml")}, folder) as running,
        ):
            anyio.run(warm, running.url, TOKEN)
            return {version: anyio.run(run, running, version, args.calls).summary() for version in VERSIONS}


if __name__ == "__main__":
    sys.exit(main())
