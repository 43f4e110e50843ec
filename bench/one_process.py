"""Memory of the MCP server and the web view: two processes against one.

A person with a stdio server (an MCP client launches it) who also wants the web view either runs
`corrigenda ui` beside it, a second process with a second copy of the model, or starts the server with
`--ui`, which serves the web view from the server's own process and memory. Each run measures both on
a fresh store of three notes (seeded untimed, through the MCP SDK client):

- two processes:  `corrigenda serve` over stdio, and `corrigenda ui` on a free port;
- one process:    `corrigenda serve --ui --ui-port PORT` over stdio.

In each, one `recall_chains` goes through MCP and one search page of the web view is loaded (both must
show the seeded port note), so that whoever holds the model has loaded it. Then, per setup: the sum of
the processes' VmRSS (resident now) and of their VmHWM (each process's peak; for two processes the sum
of two peaks, at most their peak together), from /proc/PID/status.

Run from the repository root:

    .venv/bin/python bench/one_process.py [--runs N] [--json bench/results/one_process.json]

Linux only (/proc). The processes get HF_HUB_OFFLINE=1: no network.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from startup import CORRIGENDA, EXPECTED_IN_RECALL, QUERY, SEED_NOTES, SERVER_ENV, BenchError, StdioServer
from startup import _initialize_params as initialize_params
from startup import _recall as recall

SCOPE = "bench"
PAGE_TIMEOUT_S = 180.0
SETUPS = {"two": "stdio server + `corrigenda ui` (two processes)", "one": "stdio server with `--ui` (one process)"}


async def _seed(db: str) -> None:
    params = StdioServerParameters(command=CORRIGENDA, args=["serve", "--db", db, "--scope", SCOPE], env=SERVER_ENV)
    async with Client(params) as client:
        for text in SEED_NOTES:
            result = await client.call_tool("remember", {"text": text})
            if result.is_error:
                raise BenchError(f"seeding {text!r} failed: {result.content}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_mib(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, in MiB."""
    figures = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[key] = int(value.split()[0]) / 1024  # kB
    return figures


def search_page(port: int, processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """Load the web view's search for QUERY (its recall loads the model where the web view runs)."""
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while True:
        try:
            page = httpx2.get(url, params={"scope": SCOPE, "q": QUERY}, trust_env=False, timeout=PAGE_TIMEOUT_S)
            break
        except httpx2.TransportError:  # not listening yet
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                raise BenchError(f"the web view on {url} did not answer") from None
            time.sleep(0.2)
    if page.status_code != 200 or EXPECTED_IN_RECALL not in page.text:
        raise BenchError(f"the web view's search answered {page.status_code} without the port note")


def measure(db: str, setup: str, stderr: IO[bytes]) -> dict[str, float]:
    port = free_port()
    scoped = ["--scope", SCOPE]
    server = StdioServer(db, stderr, [*scoped, "--ui", "--ui-port", str(port)] if setup == "one" else scoped)
    processes = [server.proc]
    try:
        if setup == "two":
            web = subprocess.Popen(
                [CORRIGENDA, "ui", "--db", db, *scoped, "--port", str(port)], env=SERVER_ENV,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip
            processes.append(web)
        server.call(1, "initialize", initialize_params())
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        recall(server, 2)
        search_page(port, processes)
        figures = [memory_mib(p.pid) for p in processes]
    finally:
        for process in processes[1:]:
            process.terminate()
            process.wait(timeout=30)
        server.close()
    return {
        "processes": len(processes),
        "rss_mib": sum(f["VmRSS"] for f in figures),
        "hwm_mib": sum(f["VmHWM"] for f in figures),
    }


def one_run() -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="corrigenda-bench-") as tmp:
        db = str(Path(tmp) / "store")
        anyio.run(_seed, db)
        log_path = Path(tmp) / "processes.stderr"
        with log_path.open("wb") as stderr:
            try:
                return {setup: measure(db, setup, stderr) for setup in SETUPS}
            except BenchError as exc:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise BenchError(f"{exc}\n--- stderr (tail) ---\n{tail}") from None


def table(results: dict[str, Any]) -> str:
    """Per setup: processes, the medians of the summed VmRSS and VmHWM over the runs."""
    rows: list[list[object]] = []
    for setup, label in SETUPS.items():
        median = results["median"][setup]
        rows.append([label, int(median["processes"]), median["rss_mib"], median["hwm_mib"]])
    return harness.markdown_table(
        ["setup (one recall through MCP, one web view search)", "processes", "RSS (MiB)", "peak RSS (MiB)"], rows
    )


TABLES = {"main": table}


def main(argv: Sequence[str] | None = None) -> int:
    args = harness.parser(__doc__, runs=3).parse_args(argv)
    runs = harness.repeat(one_run, args.runs)
    median = {
        setup: {key: statistics.median(run[setup][key] for run in runs) for key in runs[0][setup]} for setup in SETUPS
    }
    payload = {"query": QUERY, "seed_notes": list(SEED_NOTES), "runs": runs, "median": median}
    if args.json:
        harness.write_results(args.json, payload)
    print(table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
