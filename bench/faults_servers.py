"""bench/faults.py's part 2: several real servers on one store (a directory or a bucket), all writing at
once, with an optional fault of the store in the middle (an `Outage`), then the checks; each kind of
write's latency, the bucket's requests, and the CPU the writes cost each group of processes.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corrigenda.store import Embedder
from faults_check import PhaseResult, check_store, standing
from faults_common import QUERY, Ledger, Pools, choose_write, note_text, progress
from faults_cpu import StoreProcesses, census, cpu_figures
from faults_serving import Front, Outcome, Server, call_tool, started_servers
from harness import LOCAL_BUCKET, local_s3
from seaweed import SeaweedCluster

if TYPE_CHECKING:
    import anyio

POLL_S = 0.05  # how often a waiting phase looks again (an outage waiting for its moment)


@dataclass
class Outage:
    """A fault of the store in the middle of a servers phase: `begin` once `after` writes are acknowledged,
    `end` once every server has had `writes_while_out` writes answered that it began after the fault
    took hold, so that each met it. A call that overlapped [began, restored] may fail (with a one-line
    error that says what is wrong); every call after `restored` must succeed, with no server
    restarted. A read-back that failed while the store was out is made again at the end."""

    name: str
    begin: Callable[[], None]
    end: Callable[[], None]
    after: int
    writes_while_out: int = 1  # each server's, begun once the fault holds, before `end`
    began: float | None = None  # as `begin` was called
    held: float | None = None  # `begin` returned: the fault holds
    restored: float | None = None  # `end` returned: the store answers again
    unread: list[tuple[Server, str, int]] = field(default_factory=list)  # (server asked, note, server that wrote it)

    def written_after(self, server: Server) -> bool:
        """Whether `server` has had a write acknowledged that it began once the store was back."""
        return self.restored is not None and any(
            o.kind == "ack" and o.op != "history" and o.started >= self.restored for o in server.outcomes
        )

    def met(self, outcome: Outcome) -> bool:
        """Whether a call overlapped the fault."""
        return (
            self.began is not None
            and outcome.finished >= self.began
            and (self.restored is None or outcome.started < self.restored)
        )


async def drive_server(
    server: Server, others: Sequence[Server], writes: int, rng: random.Random, pools: Pools, ledger: Ledger,
    result: PhaseResult, mix: str = "all", outage: Outage | None = None,
) -> None:  # fmt: skip
    """Write to one server through its client (`pools` shares notes between servers; `mix`: see
    `choose_write`); after each write that stored a note, ask the next server for it: it must see it at
    once, or, if the store was out (`outage`), once it is back. With an outage, a server that made its
    `writes` before the store was back goes on until it has written once more after (up to three
    times as many writes in all): whether it recovers by itself is the point."""
    mine = Pools(shared=pools.shared, retractable=pools.retractable)  # its own notes to forget
    for i in itertools.count():
        if i >= writes and (outage is None or outage.written_after(server) or i >= 3 * writes):
            break
        op, args = choose_write(rng, note_text(rng, f"server {server.k} write {i}"), mine, mix)
        started = time.perf_counter()
        message = await call_tool(server.client, op, args)
        if op == "forget" and message["kind"] == "failed":  # as a user would: its delete may have landed
            result.count([message], ledger)
            result.extra["forgets_retried"] = result.extra.get("forgets_retried", 0) + 1
            message = await call_tool(server.client, op, args)
        result.count([message], ledger)
        server.outcomes.append(Outcome(op, started, time.perf_counter(), message["kind"], message.get("error", "")))
        if message["kind"] != "ack":
            continue
        server.latencies_ms.setdefault(op, []).append((time.perf_counter() - started) * 1000)
        server.calls.append((op, started, server.latencies_ms[op][-1]))
        mine.take(op, message, private=rng.random() < 0.5)
        if message.get("note") and op != "forget" and others:
            other = others[i % len(others)]
            asked = time.perf_counter()
            seen = await call_tool(other.client, "history", {"note_id": message["note"]})
            read = Outcome("history", asked, time.perf_counter(), seen["kind"], seen.get("error", ""))
            other.outcomes.append(read)
            result.extra["seen_by_another_server"] = result.extra.get("seen_by_another_server", 0) + 1
            if seen["kind"] != "ack" and outage is not None and outage.met(read):
                outage.unread.append((other, message["note"], server.k))
            elif seen["kind"] != "ack":
                result.corrupt.setdefault(
                    f"server {other.k} did not see {message['note']}, acknowledged by server {server.k}: "
                    f"{seen['error'][:200]}",
                    0,
                )


async def inject(outage: Outage, servers: Sequence[Server], result: PhaseResult, written: anyio.Event) -> None:
    """Run `outage` (its docstring) while `servers` write; give up waiting once the writes are done
    (`written` is set), but never leave the store out."""
    import anyio

    while result.acknowledged < outage.after and not written.is_set():
        await anyio.sleep(POLL_S)
    if written.is_set():
        return
    outage.began = time.perf_counter()
    progress(f"servers: {outage.name} after {result.acknowledged} acknowledged writes")
    await anyio.to_thread.run_sync(outage.begin)
    outage.held = time.perf_counter()
    try:
        while not written.is_set() and not all(
            sum(o.started >= (outage.held or 0) and o.op != "history" for o in s.outcomes) >= outage.writes_while_out
            for s in servers
        ):
            await anyio.sleep(POLL_S)
    finally:
        await anyio.to_thread.run_sync(outage.end)
        outage.restored = time.perf_counter()
        progress(f"servers: the store is back after {outage.restored - outage.began:.1f} s")


async def read_again(outage: Outage, result: PhaseResult) -> None:
    """Each read-back that failed while the store was out, made again: the note must be there now."""
    for server, note, writer in outage.unread:
        seen = await call_tool(server.client, "history", {"note_id": note})
        if seen["kind"] != "ack":
            result.corrupt.setdefault(
                f"server {server.k} did not see {note}, acknowledged by server {writer}, once the store was back: "
                f"{seen['error'][:200]}",
                0,
            )


def outage_summary(outage: Outage, servers: Sequence[Server]) -> dict[str, Any]:
    """What the servers answered while the store was out, and how soon each wrote again once it was back."""
    calls = [o for s in servers for o in s.outcomes]
    errors = [o for o in calls if o.kind != "ack"]
    during = [o for o in errors if outage.met(o)]
    first_back = [
        min((o.finished for o in s.outcomes if o.kind == "ack" and o.op != "history" and o.started >= (outage.restored or 0)),
            default=None)
        for s in servers
    ]  # fmt: skip
    return {
        "fault": outage.name,
        "happened": outage.began is not None,
        "took_hold_s": round((outage.held or 0) - (outage.began or 0), 2),
        "lasted_s": round((outage.restored or 0) - (outage.began or 0), 1),
        "calls_that_met_it": sum(outage.met(o) for o in calls),
        "errors_while_out": len(during),
        "errors_of_more_than_one_line": sum("\n" in o.error.strip() for o in during),
        "errors_said": dict(Counter(_said(o.error) for o in during)),
        "errors_outside_it": [f"{o.op}: {o.error[:300]}" for o in errors if not outage.met(o)],
        "read_backs_made_again": len(outage.unread),
        # from the store's return to each server's first write acknowledged after it; None: it wrote no more
        "wrote_again_after_s": [None if t is None else round(t - (outage.restored or 0), 2) for t in first_back],
    }


def _said(error: str) -> str:
    """An error's text without what changes from one call to the next (ids, URLs, durations), to count kinds."""
    error = re.sub(
        r"s3://\S+|https?://\S+|\b[ne]_[0-9a-z]{26}\b", "…", error.strip().splitlines()[0] if error.strip() else ""
    )
    return re.sub(r"\d+(\.\d+)?(ms|s)\b", "…", error)[:300]


def servers_phase(
    root: Path, servers: int, writes: int, seed: int, db: str | None = None, transport: str = "stdio",
    env: Mapping[str, str] | None = None, embedder: Embedder | None = None,
    counter: Callable[[], dict[str, Any]] | None = None, mix: str = "all", outage: Outage | None = None,
    front: Front | None = None, name: str | None = None, store_processes: StoreProcesses | None = None,
) -> PhaseResult:  # fmt: skip
    """`servers` real servers on one store (`db`, default a directory under `root`; `env` reaches them
    and must already be in this process's environment for an object store), all writing at once, their
    writes drawn from `mix` (`choose_write`). With `counter`, the bucket's counts in the shape of
    `gate_counts` (a local S3 API's gate, or `SeaweedCluster.counts`): how many commits it refused and the
    requests it served during the writes, by kind. With `outage`, a fault of the store in the middle
    of the writes (`Outage`). With `front` (HTTP only), the clients reach the servers through what it
    puts in front of them, a load balancer say (`Front`). `name` names the phase. With `store_processes`
    (`StoreProcesses`: none for a directory), the CPU the writes cost by group of processes (`cpu_figures`);
    without it, none: a process of the store that this one started would pass for a server."""
    import anyio
    from corrigenda.store import SentenceTransformerEmbedder

    started = time.perf_counter()
    db = db or str(root / "servers" / "store")
    ledger = Ledger()
    result = PhaseResult(name or f"{servers} servers x {writes} writes ({transport})")
    per_server: list[Server] = []
    closing_errors: list[str] = []

    async def run() -> None:
        logs = root / "servers"
        logs.mkdir(parents=True, exist_ok=True)
        async with started_servers(db, servers, transport, env or {}, logs, closing_errors, front) as running:
            per_server.extend(running)
            for server in running:  # each loads its model before the first timed write
                await call_tool(server.client, "recall_chains", {"query": QUERY})
            result.extra["servers_started_s"] = round(time.perf_counter() - started, 1)
            before = counter() if counter else {}
            writing = census(store_processes()) if store_processes else None  # just before the writes
            await write_at_once(running, writes, seed, ledger, result, mix, outage)
            if store_processes and writing:  # and just after
                outcomes = [o for server in running for o in server.outcomes]
                reads = sum(o.op == "history" for o in outcomes)
                cpu = cpu_figures(writing, census(store_processes()), len(running), len(outcomes) - reads, reads)
                result.extra["cpu"] = cpu | {"p50_ms": latency_summary(running).get("all writes", {}).get("p50")}
            if outage is not None:
                await read_again(outage, result)
            if counter:
                bucket_figures(before, counter(), servers * writes, result)

    anyio.run(run)
    result.extra["client_closing_errors"] = closing_errors
    result.extra["writes_seconds"] = round(time.perf_counter() - started, 1)
    result.extra["write_latency_ms"] = latency_summary(per_server)
    result.extra["slowest_writes"] = slowest(per_server)
    if outage is not None:
        result.extra["outage"] = outage_summary(outage, per_server)
    progress(f"servers: {result.acknowledged} writes acknowledged in {result.extra['writes_seconds']} s; checking")
    check = check_store(
        db, embedder or SentenceTransformerEmbedder(), ledger, ledger.live_notes(), list(ledger.forgotten)
    )
    result.absorb(check, 1)
    result.trials = servers
    standing(result, ledger)
    result.seconds = time.perf_counter() - started
    return result


async def write_at_once(
    running: Sequence[Server], writes: int, seed: int, ledger: Ledger, result: PhaseResult, mix: str,
    outage: Outage | None,
) -> None:  # fmt: skip
    """Every server's `writes` (`drive_server`), all at once, with `outage` injected while they run."""
    import anyio

    pools = Pools()
    async with anyio.create_task_group() as group:
        written = anyio.Event()
        if outage is not None:
            group.start_soon(inject, outage, running, result, written)
        async with anyio.create_task_group() as writing:
            for server in running:
                rng = random.Random(f"{seed}/server/{server.k}")
                others = [s for s in running if s is not server]
                writing.start_soon(drive_server, server, others, writes, rng, pools, ledger, result, mix, outage)
        written.set()


def bucket_figures(before: Mapping[str, Any], after: Mapping[str, Any], writes: int, result: PhaseResult) -> None:
    """What the bucket's counts (`gate_counts`' shape) say of the `writes`, from `before` and `after` them,
    into `result`: the commits it refused, its requests by kind, and what it spent on each kind."""
    refused = after["refused_writes"] - before["refused_writes"]
    tried = (
        f"{after['conditional_writes'] - before['conditional_writes']} conditional writes during the "
        "writes (commits and lease takes), "
        if "conditional_writes" in after
        else ""
    )
    result.extra["bucket_commits"] = f"{tried}{refused} refused because another writer took the version first"
    result.extra["refused_commits"] = refused
    requests = Counter(after["requests"])
    requests.subtract(before["requests"])
    result.extra["bucket_requests"] = {
        "during the writes": requests.total(), "per write": round(requests.total() / writes, 1),
        **{kind: n for kind, n in requests.most_common() if n},  # by kind (local_s3.kind)
    }  # fmt: skip
    if "cpu_seconds" in after:  # moto's gate: the one process's CPU, and what its listings answered
        cpu = Counter(after["cpu_seconds"])
        cpu.subtract(before["cpu_seconds"])
        result.extra["keys_per_listing"] = round(
            (after["listed_keys"] - before["listed_keys"]) / max(1, requests["list"]), 1
        )
        result.extra["bucket_server_cpu_ms_per_request"] = {
            kind: round(1000 * cpu[kind] / requests[kind], 2) for kind in requests if requests[kind]
        }
    if "answer_seconds" in after:  # SeaweedFS's gateway: its time from request to answer
        answering = Counter(after["answer_seconds"])
        answering.subtract(before["answer_seconds"])
        result.extra["gateway_ms_per_request"] = {
            kind: round(1000 * answering[kind] / requests[kind], 2) for kind in requests if requests[kind]
        }


def latency_summary(servers: Sequence[Server]) -> dict[str, dict[str, float]]:
    """p50 / p99 / max of each kind of acknowledged write, over every server, of all writes together, and
    of all but forget."""
    by_op: dict[str, list[float]] = {}
    for server in servers:
        for op, times in server.latencies_ms.items():
            by_op.setdefault(op, []).extend(times)
            by_op.setdefault("all writes", []).extend(times)
            if op != "forget":  # an erasure rewrites files: the others are appends
                by_op.setdefault("all but forget", []).extend(times)
    return {op: percentiles(times) for op, times in sorted(by_op.items())}


def slowest(servers: Sequence[Server], count: int = 5) -> list[str]:
    """The slowest acknowledged writes, each with what was under way as it started: the seconds since
    the last forget any server acknowledged (its server's erasure pass runs for seconds after it),
    beside how long after one every write started; and whether it was its server's first write (on a
    new store, the one that waits for the tables and their indexes to be made)."""
    calls = sorted((at, ms, op, server.k) for server in servers for op, at, ms in server.calls)
    firsts = {(server.k, server.calls[0][1]) for server in servers if server.calls}  # on a new store: its tables made
    forgets = [at + ms / 1000 for at, ms, op, _ in calls if op == "forget"]
    first = calls[0][0] if calls else 0.0

    def since(at: float) -> float | None:
        before = [at - done for done in forgets if done <= at]
        return min(before) if before else None

    gaps = sorted(g for g in (since(at) for at, *_ in calls) if g is not None)
    lines = (
        [f"{len(gaps)} of {len(calls)} started after a forget, at a median {gaps[len(gaps) // 2]:.1f} s"]
        if gaps
        else []
    )
    for at, ms, op, k in sorted(calls, key=lambda c: -c[1])[:count]:
        gap = since(at)
        after = f"{gap:.1f} s after a forget was acknowledged" if gap is not None else "before any forget"
        its_first = ", its server's first write" if (k, at) in firsts else ""
        lines.append(f"{op} on server {k} at {at - first:.1f} s: {ms:.0f} ms{its_first}, {after}")
    return lines


def percentiles(times: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)], 1)

    return {
        "calls": len(ordered), "p50": at(0.50), "p99": at(0.99), "max": round(ordered[-1], 1),
        "mean": round(sum(ordered) / len(ordered), 1),
    }  # fmt: skip


@contextmanager
def bucket(
    store: str | None, dispatcher: bool = False
) -> Iterator[tuple[dict[str, str], Callable[[], dict[str, Any]] | None, StoreProcesses | None]]:
    """The servers part's bucket: its AWS variables (set in this process too), what counts its requests
    and what names its processes (`StoreProcesses`), for moto behind its gate (`local_s3`) or a SeaweedFS
    cluster (bench/seaweed.py); for no store ({}, None, and no processes): a directory, or a bucket
    that `--db` names, not started here."""
    if store == "seaweed":
        with SeaweedCluster([LOCAL_BUCKET]) as cluster:
            os.environ.update(cluster.env)
            yield cluster.env, cluster.counts, cluster.processes
        return
    with local_s3(store == "moto", dispatcher) as env:
        if not env:
            yield env, None, lambda: {}
            return
        counter = partial(gate_counts, env["AWS_ENDPOINT_URL"])
        moto = {"moto": [counter()["pid"]]}
        yield env, counter, lambda: moto


def gate_counts(endpoint: str) -> dict[str, Any]:
    """The counts of the local S3 API's gate serving `endpoint` (bench/local_s3.py, `GET /_gate`)."""
    import urllib.request

    with urllib.request.urlopen(f"{endpoint}/_gate", timeout=10) as answer:
        return dict(json.load(answer))
