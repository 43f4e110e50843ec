"""Startup benchmark for the real `corrigenda serve` process over stdio.

Each run gets a fresh temporary store, seeded (untimed) with three notes by a first server process
through the MCP SDK client. A second process is then spawned by hand with subprocess.Popen, so that
no client machinery sits between the clock and the pipe, and the benchmark measures:

- initialize:      spawn -> the `initialize` answer (id 1);
- recall #1:       spawn -> the answer to `recall_chains` (id 2), sent right after the
                   `notifications/initialized` notification; this call waits for the embedding
                   model, which the server starts loading when the handshake is done;
- recall #1 call:  the same answer, timed from when the request was written;
- peak RSS:        VmHWM of the server process, read from /proc/PID/status after recall #1;
- recall #2:       a second, warm `recall_chains` (id 3), from spawn and from the request.

The first recall must succeed and mention the seeded port note. Then stdin is closed and the exit
code recorded; anything but 0 is reported as a problem and makes the script exit with status 1.

Run from the repository root:

    .venv/bin/python bench/startup.py [--runs N] [--json PATH]

It prints median, min and max of every metric over the runs as a markdown table; --json also writes
every run's raw figures and the medians (bench/harness.py). Linux only (/proc). The server gets
HF_HUB_OFFLINE=1: no network.
"""

from __future__ import annotations

import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import IO, Any

import anyio
import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
from mcp import Client
from mcp.client.stdio import StdioServerParameters

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
SEED_NOTES = ("the service listens on 9090", "Alice prefers dark mode in her editor", "deploys happen on Tuesdays")
QUERY = "which port does the service use?"
EXPECTED_IN_RECALL = "9090"
PROTOCOL_VERSION = "2025-06-18"
ANSWER_TIMEOUT_S = 180.0
EXIT_TIMEOUT_S = 30.0


class BenchError(RuntimeError):
    """The server did not behave as the benchmark requires."""


@dataclass(frozen=True)
class Run:
    """One run's figures: times in seconds, memory in MiB."""

    initialize_s: float
    first_recall_s: float
    first_recall_call_s: float
    second_recall_s: float
    second_recall_call_s: float
    peak_rss_mib: float
    exit_code: int | None


LABELS = {
    "initialize_s": "spawn -> initialize (s)",
    "first_recall_s": "spawn -> recall #1 (s)",
    "first_recall_call_s": "recall #1 call (s)",
    "second_recall_s": "spawn -> recall #2 warm (s)",
    "second_recall_call_s": "recall #2 call, warm (s)",
    "peak_rss_mib": "peak RSS after recall #1 (MiB)",
}


# -- seeding (untimed) --------------------------------------------------------------------------


async def _seed(db: str) -> None:
    params = StdioServerParameters(command=CORRIGENDA, args=["serve", "--db", db], env=SERVER_ENV)
    async with Client(params) as client:
        for text in SEED_NOTES:
            result = await client.call_tool("remember", {"text": text})
            if result.is_error:
                details = " ".join(getattr(c, "text", "") for c in result.content)
                raise BenchError(f"seeding {text!r} failed: {details}")


def seed(db: str) -> None:
    anyio.run(_seed, db)


# -- the timed server process -------------------------------------------------------------------


class StdioServer:
    """A server process spoken to in raw JSON-RPC lines; every stdout line is stamped on arrival."""

    def __init__(self, db: str, stderr: IO[bytes], arguments: Sequence[str] = ()) -> None:
        self.spawned_at = time.perf_counter()
        self.proc = subprocess.Popen(
            [CORRIGENDA, "serve", "--db", db, *arguments],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=SERVER_ENV,
        )  # fmt: skip
        self._lines: queue.Queue[tuple[float, bytes | None]] = queue.Queue()
        threading.Thread(target=self._read_stdout, name="bench-stdout", daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put((time.perf_counter(), line))
        self._lines.put((time.perf_counter(), None))

    def send(self, message: dict[str, Any]) -> float:
        """Write one message; return when it was written."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return time.perf_counter()

    def answer(self, request_id: int) -> tuple[float, dict[str, Any]]:
        """The response to `request_id` and when it arrived; other messages are skipped."""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            try:
                at, line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise BenchError(f"no answer to request {request_id} within {ANSWER_TIMEOUT_S:.0f} s") from None
            if line is None:
                raise BenchError(f"server closed stdout before answering request {request_id}")
            message = json.loads(line)
            if message.get("id") == request_id:
                return at, message

    def call(self, request_id: int, method: str, params: dict[str, Any]) -> tuple[float, float, dict[str, Any]]:
        """Send a request; return when it was sent, when it was answered, and the answer."""
        sent_at = self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        answered_at, message = self.answer(request_id)
        if "error" in message:
            raise BenchError(f"{method} (id {request_id}) failed: {message['error']}")
        return sent_at, answered_at, message

    def peak_rss_mib(self) -> float:
        """VmHWM, the peak resident set size of the process so far."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
        raise BenchError("no VmHWM in /proc/PID/status")

    def close(self) -> int | None:
        """Close stdin and wait for the exit; None if the process had to be killed."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def _text_of(result: dict[str, Any]) -> str:
    """The text content of a raw `tools/call` result."""
    return "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


def _recall(server: StdioServer, request_id: int) -> tuple[float, float]:
    """Call recall_chains, check that it found the port note; return (from spawn, from send)."""
    params = {"name": "recall_chains", "arguments": {"query": QUERY}}
    sent_at, answered_at, message = server.call(request_id, "tools/call", params)
    result = message["result"]
    text = _text_of(result)
    if result.get("isError"):
        raise BenchError(f"recall_chains (id {request_id}) returned an error: {text}")
    if EXPECTED_IN_RECALL not in text:
        raise BenchError(f"recall_chains (id {request_id}) did not find the port note:\n{text}")
    return answered_at - server.spawned_at, answered_at - sent_at


def _initialize_params() -> dict[str, Any]:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}


def measure(db: str, stderr: IO[bytes]) -> Run:
    """Spawn a server on a seeded store and time its handshake and two recalls."""
    server = StdioServer(db, stderr)
    try:
        _, initialized_at, _ = server.call(1, "initialize", _initialize_params())
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        first, first_call = _recall(server, 2)
        peak_rss = server.peak_rss_mib()
        second, second_call = _recall(server, 3)
    except BaseException:
        server.proc.kill()
        server.proc.wait()
        raise
    return Run(
        initialize_s=initialized_at - server.spawned_at,
        first_recall_s=first,
        first_recall_call_s=first_call,
        second_recall_s=second,
        second_recall_call_s=second_call,
        peak_rss_mib=peak_rss,
        exit_code=server.close(),
    )


def one_run() -> Run:
    """A fresh store: seed it, then measure a new server process on it."""
    with tempfile.TemporaryDirectory(prefix="corrigenda-bench-") as tmp:
        db = str(Path(tmp) / "store")
        seed(db)
        log_path = Path(tmp) / "server.stderr"
        with log_path.open("wb") as stderr:
            try:
                return measure(db, stderr)
            except BenchError as exc:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise BenchError(f"{exc}\n--- server stderr (tail) ---\n{tail}") from None


# -- reporting ----------------------------------------------------------------------------------


def _metric_names() -> list[str]:
    return [f.name for f in fields(Run) if f.name in LABELS]


def medians(runs: Sequence[Run]) -> dict[str, float]:
    return {name: statistics.median(getattr(r, name) for r in runs) for name in _metric_names()}


def report(runs: Sequence[Run]) -> dict[str, Any]:
    """What --json writes: every run's figures and the medians."""
    return {"query": QUERY, "seed_notes": list(SEED_NOTES), "runs": [asdict(r) for r in runs], "median": medians(runs)}


def table(results: dict[str, Any]) -> str:
    """Median, min and max of each metric over the runs."""
    rows = []
    for name, label in LABELS.items():
        values = [run[name] for run in results["runs"]]
        rows.append([label, results["median"][name], min(values), max(values)])
    return harness.markdown_table(["metric", "median", "min", "max"], rows)


TABLES = {"main": table}


def _summary(run: Run) -> str:
    return ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in asdict(run).items())


def main(argv: Sequence[str] | None = None) -> int:
    args = harness.parser(__doc__, runs=5).parse_args(argv)
    runs = harness.repeat(one_run, args.runs, _summary)

    payload = report(runs)
    if args.json:
        harness.write_results(args.json, payload)
    print(table(payload))
    print(f"server exit codes: {', '.join(str(r.exit_code) for r in runs)}")
    bad = [r.exit_code for r in runs if r.exit_code != 0]
    if bad:
        print(f"problem: server exit codes {bad} (None: killed after {EXIT_TIMEOUT_S:.0f} s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
