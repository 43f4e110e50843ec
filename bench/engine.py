"""The shared engine (issue 53): CLI commands, stdio servers and the web view of one store, each in a
process of its own (CORRIGENDA_ENGINE=off: as before) against all of them handing their work to the
store's one engine process.

One sitting, one store: 53 notes remembered in-process first (untimed), the engines' sockets in a
temporary folder of their own (CORRIGENDA_RUNTIME_DIR), HF_HUB_OFFLINE=1, every command run outside
any work tree with `--scope bench`, on a copy of store/ and server/ taken when it starts (`snapshot`:
an edit during the run would change which engine the commands meet). Each figure is taken up to
three ways: off (every command and server its own process: today), cold (no engine running: the
command starts one and waits for it) and warm (an engine running, started and used before):

- CLI: `corrigenda remember`, `recall` and `scopes`, spawn to exit, --runs rounds; each round runs
  the three commands warm, then off, then cold (each cold run after `corrigenda engine stop`, once
  the engine's socket and process are gone);
- stdio: a `corrigenda serve` spawned by the MCP SDK client, spawn to its first `recall_chains`
  answer (and to the end of the handshake), --runs rounds: off; cold, a first client, which starts
  the engine; warm, a second client spawned while the first is connected (off first in every other
  round, on first in the others);
- memory: the summed VmRSS (/proc/PID/status) of every process involved, with three stdio clients
  connected (each has recalled) and `corrigenda ui` open (one search page loaded): engine on, after
  ten CLI calls through it, the engine and its four forwarders; off, the three servers and the web
  view's process; and one stdio server alone, off, the target's yardstick. --memory-runs rounds, the
  engine stopped before each so that each set starts with none;
- recall latency: --calls `recall_chains` calls in one stdio session through a warm engine and in
  one off, the two sessions open side by side and called in turn, the same 10 questions (each asked
  once in each session first); p50 and p99;
- what `ps -o pid,rss,args` shows with the three clients and the web view open, engine on (the
  temporary paths shortened: $TMP the store's folder, $RUNTIME the sockets').

Every engine it started is stopped at the end, on failure too.

Run from the repository root:

    .venv/bin/python bench/engine.py [--runs N] [--memory-runs N] [--calls N] [--json PATH] [--code TREE]

(--code TREE: measure the store/ and server/ of another tree, say the code before a change, its
results written where --json says; run it beside a run of this tree to compare the two.)

It prints the medians (min-max) against the issue's targets and the ps lines; the results file
(default bench/results/engine.json) keeps every figure. Linux only (/proc, ps).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from one_process import SCOPE, free_port, search_page
from startup import CORRIGENDA, EXPECTED_IN_RECALL, QUERY, SEED_NOTES, BenchError

SWITCH = "CORRIGENDA_ENGINE"  # forward.SWITCH: "off", each command and server in its own process
RUNTIME = "CORRIGENDA_RUNTIME_DIR"  # forward.RUNTIME: where the engines' sockets live
COMMANDS = ("remember", "recall", "scopes")
SERVICES = ("billing", "search", "auth", "reports", "mailer", "gateway", "scheduler", "uploads", "metrics", "exports")
TEAMS = ("platform", "payments", "identity", "data", "growth")
QUERIES = (
    QUERY,
    "who owns the billing service?",
    "how often is the search database backed up?",
    "where does the auth service write its logs?",
    "when does on-call for the mailer rotate?",
    "when do deploys happen?",
    "what does Alice prefer in her editor?",
    "what is the gateway's request timeout?",
    "which team owns uploads?",
    "how often is the metrics database backed up?",
)
CLIENTS = 3  # stdio clients in the memory sets
CLI_CALLS = 10  # CLI calls through the engine before its set's memory is read
FALLBACK = "running in this process"  # forward.dispatch's word when a command could not reach an engine
# forward.run_command's word when the connection ended without the command's answer. forward.connect
# once read the engine's hello answer through a buffered reader of its own and dropped whatever else
# it had read: the answer of a quick command that came in the same read was lost, the command having
# run (it now reads that line a byte at a time). Such a run is still counted (`lost`) and run again.
LOST = "stopped before it answered"
ATTEMPTS = 5
COMMAND_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 150.0  # an engine finishes its upkeep before it exits (engine.STOP_WAIT is 120 s)
PHASE_TIMEOUT_S = 900.0

# The issue's targets.
CLI_WARM_S = 0.3
STDIO_WARM_S = 0.5
MEMORY_RATIO = 1.15
LATENCY_RATIO = 1.1


def seed_texts() -> list[str]:
    texts = list(SEED_NOTES)
    for i, service in enumerate(SERVICES):
        texts += [
            f"the {service} service is owned by the {TEAMS[i % len(TEAMS)]} team",
            f"the {service} database is backed up every {2 + i} hours",
            f"the {service} service writes its logs to /var/log/{service}.log",
            f"on-call for {service} rotates every {'Monday' if i % 2 else 'Thursday'}",
            f"the {service} service times out requests after {5 * (i + 1)} seconds",
        ]
    return texts


def snapshot(folder: Path, source: Path = harness.ROOT) -> str:
    """The code of `source` (this repository unless --code names another tree), copied to
    `folder`/corrigenda and first on this process's path (and on PYTHONPATH for every command the bench
    runs): an edit of store/ or server/ during the run would otherwise change the engine's identity
    (forward.code) and start another engine mid-run. Its forward.code()."""
    if "corrigenda" in sys.modules:
        raise BenchError("corrigenda was imported before its snapshot was taken")
    package = folder / "corrigenda"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for part in ("store", "server"):
        shutil.copytree(source / part, package / part, ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(folder))
    from corrigenda.server.forward import code

    return code()


def seed(db: str) -> int:
    """The store's notes, remembered in this process (the model loaded here, untimed)."""
    from corrigenda.server.config import Settings, build_memory
    from corrigenda.store import Draft

    texts = seed_texts()
    memory = build_memory(Settings(db=db))
    try:
        for text in texts:
            memory.remember(Draft(text=text), scope=SCOPE)
    finally:
        memory.close()
    return len(texts)


# -- processes ------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def descendants(root: int) -> set[int]:
    """Every process below `root` now."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def rss_mib(pid: int) -> float | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024  # kB
    return None


def end(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class LostAnswer(BenchError):
    """The command ran in the engine, but its answer did not reach the forwarder (LOST)."""


class Sitting:
    """The store, the two environments (engine on and off) and the engines this bench started."""

    def __init__(self, root: Path, runtime: Path, code: Path) -> None:
        self.root, self.runtime = root, runtime
        self.db = str(root / "store")
        base = {k: v for k, v in os.environ.items() if not k.startswith("CORRIGENDA_")}
        self.on = {**base, "HF_HUB_OFFLINE": "1", RUNTIME: str(runtime), "PYTHONPATH": str(code)}
        self.off = {**self.on, SWITCH: "off"}
        self.code = ""  # forward.code() of the snapshot: the engine must say the same
        self.engines: set[int] = set()
        self.said: dict[str, int] = {name: 0 for name in COMMANDS}
        self.lost: dict[str, list[str]] = {way: [] for way in ("off", "cold", "warm", "other")}

    # -- CLI ---------------------------------------------------------------------------------

    def run(self, args: Sequence[str], env: dict[str, str]) -> tuple[float, str]:
        """A command from spawn to exit (it must exit 0; with the engine on, reach it): its seconds and output.
        LostAnswer when the forwarder got no answer from the engine (see LOST)."""
        started = time.perf_counter()
        done = subprocess.run(
            [CORRIGENDA, *args, "--db", self.db], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
            env=env, cwd=str(self.root),
        )  # fmt: skip
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            failure = LostAnswer if env is self.on and LOST in done.stderr else BenchError
            raise failure(f"corrigenda {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        if env is self.on and FALLBACK in done.stderr:
            raise BenchError(f"corrigenda {' '.join(args)} did not reach the engine: {done.stderr.strip()}")
        return seconds, done.stdout

    def call(self, name: str, way: str) -> float:
        """The next `name` command, `way` (off, cold, warm; other: untimed), again after a lost answer
        (counted in `lost`); its seconds."""
        for _ in range(ATTEMPTS):
            if way == "cold":
                self.stop_engine()
            try:
                return self.run(self.command(name), self.off if way == "off" else self.on)[0]
            except LostAnswer as exc:
                self.lost[way].append(str(exc).splitlines()[0][:200])
        raise BenchError(f"corrigenda {name} lost its answer {ATTEMPTS} times in a row")

    def command(self, name: str) -> list[str]:
        """The next `name` command: each `remember` a new note, `recall` the questions in turn."""
        self.said[name] += 1
        n = self.said[name]
        if name == "remember":
            return ["remember", f"the nightly export run {n} took {30 + n % 17} minutes", "--scope", SCOPE]
        if name == "recall":
            return ["recall", QUERIES[n % len(QUERIES)], "--scope", SCOPE]
        return ["scopes"]

    # -- the engine ----------------------------------------------------------------------------

    def status(self) -> str:
        return self.run(["engine", "status"], self.on)[1]

    def engine(self) -> tuple[int, Path] | None:
        """The running engine's pid and socket, from `corrigenda engine status`; None when there is none."""
        said = self.status()
        found = re.search(r"^engine: pid (\d+), corrigenda \S+ \((\w+)\)", said, re.M)
        where = re.search(r"^socket: (.+?); log:", said, re.M)
        if found is None or where is None:
            if "no engine is running" not in said:
                raise BenchError(f"`corrigenda engine status` said: {said}")
            return None
        if found[2] != self.code:
            raise BenchError(f"the engine runs code {found[2]}, the snapshot is {self.code}")
        self.engines.add(int(found[1]))
        return int(found[1]), Path(where[1])

    def engine_pid(self) -> int | None:
        running = self.engine()
        return running[0] if running else None

    def warm_engine(self) -> int:
        """An engine running, each command run through it once (the first starts it if none runs)."""
        for name in COMMANDS:
            self.call(name, "other")
        pid = self.engine_pid()
        if pid is None:
            raise BenchError("the commands ran, yet `corrigenda engine status` finds no engine")
        return pid

    def stop_engine(self) -> None:
        """`corrigenda engine stop`, then wait until its socket and its process are gone: an engine that
        is stopping still holds its lock, and a forwarder starting then would wait for nothing."""
        running = self.engine()
        if running is None:
            return
        pid, socket = running
        self.run(["engine", "stop"], self.on)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while socket.exists() or alive(pid):
            if time.monotonic() > deadline:
                raise BenchError(f"the engine (pid {pid}) was still there {STOP_TIMEOUT_S:.0f} s after `engine stop`")
            time.sleep(0.05)

    def cleanup(self) -> None:
        """Stop the engine; kill any engine this bench saw that is still there."""
        try:
            self.stop_engine()
        except (BenchError, subprocess.SubprocessError, OSError) as exc:
            print(f"stopping the engine: {exc}", file=sys.stderr)
        for pid in self.engines:
            with contextlib.suppress(OSError):
                if alive(pid) and b"corrigenda.server.engine" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
                    print(f"killed the engine pid {pid}", file=sys.stderr)

    def log_tail(self) -> str:
        logs = sorted(self.runtime.glob("*.log"))
        return "".join(log.read_text(errors="replace")[-3000:] for log in logs) or "(no engine log)"

    def shortened(self, line: str) -> str:
        for long, short in ((str(self.runtime), "$RUNTIME"), (str(self.root), "$TMP"), (f"{harness.ROOT}/", "")):
            line = line.replace(long, short)
        return line

    # -- stdio ---------------------------------------------------------------------------------

    async def client(self, stack: contextlib.AsyncExitStack, env: dict[str, str]) -> tuple[Client, float, float]:
        """A `corrigenda serve` spawned by the SDK client: the client, and the seconds from spawn to the end
        of the handshake and to the first `recall_chains` answer."""
        params = StdioServerParameters(
            command=CORRIGENDA, args=["serve", "--db", self.db, "--scope", SCOPE], env=env, cwd=str(self.root)
        )
        started = time.perf_counter()
        client = await stack.enter_async_context(Client(params))
        connected = time.perf_counter()
        await recall(client, QUERY)
        return client, connected - started, time.perf_counter() - started


async def recall(client: Client, query: str) -> float:
    """One `recall_chains` call's seconds; it must succeed (and find the port note for QUERY)."""
    started = time.perf_counter()
    result = await client.call_tool("recall_chains", {"query": query})
    seconds = time.perf_counter() - started
    text = "\n".join(getattr(c, "text", "") for c in result.content)
    if result.is_error or (query == QUERY and EXPECTED_IN_RECALL not in text):
        raise BenchError(f"recall_chains({query!r}) answered: {text[:500]}")
    return seconds


# -- the phases -----------------------------------------------------------------------------------


def cli_rounds(s: Sitting, runs: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {name: {"off": [], "cold": [], "warm": []} for name in COMMANDS}
    for i in range(runs):
        s.warm_engine()
        for name in COMMANDS:
            times[name]["warm"].append(s.call(name, "warm"))
        for name in COMMANDS:
            times[name]["off"].append(s.call(name, "off"))
        for name in COMMANDS:
            times[name]["cold"].append(s.call(name, "cold"))
        said = "; ".join(f"{n} " + ", ".join(f"{w} {times[n][w][-1]:.2f}" for w in times[n]) for n in COMMANDS)
        print(f"cli {i + 1}/{runs}: {said} s", file=sys.stderr)
    return times


async def stdio_round(s: Sitting, off_first: bool) -> dict[str, dict[str, float]]:
    """One client off, and two on (cold, then warm while the first is connected); which goes first
    alternates from round to round, so that neither side always meets the other's leftovers (the page
    cache as one left it, an engine idling beside the off client)."""
    figures: dict[str, dict[str, float]] = {}

    async def off() -> None:
        async with contextlib.AsyncExitStack() as stack:
            _, connect, first = await s.client(stack, s.off)
            figures["off"] = {"connect_s": connect, "first_recall_s": first}

    async def on() -> None:
        await anyio.to_thread.run_sync(s.stop_engine)
        async with contextlib.AsyncExitStack() as stack:
            _, connect, first = await s.client(stack, s.on)
            figures["cold"] = {"connect_s": connect, "first_recall_s": first}
            _, connect, first = await s.client(stack, s.on)
            figures["warm"] = {"connect_s": connect, "first_recall_s": first}
            status = await anyio.to_thread.run_sync(s.status)
            if len(re.findall(r"^  mcp \(pid", status, re.M)) != 2:
                raise BenchError(f"two stdio clients are connected, but the engine says:\n{status}")

    for part in (off, on) if off_first else (on, off):
        await part()
    return {way: figures[way] for way in ("off", "cold", "warm")}


async def memory_set(s: Sitting, env: dict[str, str], clients: int, web_view: bool, cli_calls: int) -> dict[str, Any]:
    """The summed VmRSS of the processes serving `clients` stdio clients (each has recalled), the web view
    (a search page loaded) and `cli_calls` commands before; with each process's ps line."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(clients):
            await s.client(stack, env)
        if web_view:
            port = free_port()
            said = s.root / "ui.stderr"
            with said.open("wb") as stderr:
                ui = subprocess.Popen(
                    [CORRIGENDA, "ui", "--db", s.db, "--scope", SCOPE, "--port", str(port)], env=env, cwd=str(s.root),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                )  # fmt: skip
            stack.callback(end, ui)
            await anyio.to_thread.run_sync(search_page, port, [ui])
            if (env is s.on) != ("served by the shared engine" in said.read_text(errors="replace")):
                raise BenchError(f"the web view was not served as expected: {said.read_text(errors='replace')}")
        for i in range(cli_calls):
            await anyio.to_thread.run_sync(s.call, COMMANDS[i % len(COMMANDS)], "other" if env is s.on else "off")
        engine = await anyio.to_thread.run_sync(s.engine_pid) if env is s.on else None
        if env is s.on and engine is None:
            raise BenchError("no engine is running while its clients are connected")
        pids = descendants(os.getpid()) | ({engine} if engine else set())
        rss = {pid: r for pid in pids if (r := rss_mib(pid)) is not None}
        listed = subprocess.run(
            ["ps", "-o", "pid,rss,args", "-p", ",".join(map(str, sorted(rss)))], capture_output=True, text=True
        ).stdout.splitlines()
    return {
        "processes": len(rss),
        "rss_mib": sum(rss.values()),
        "engine_rss_mib": rss.get(engine, 0.0) if engine else None,
        "ps": [s.shortened(line.rstrip()) for line in listed],
    }


async def memory_round(s: Sitting) -> dict[str, dict[str, Any]]:
    await anyio.to_thread.run_sync(s.stop_engine)
    on = await memory_set(s, s.on, CLIENTS, True, CLI_CALLS)
    off = await memory_set(s, s.off, CLIENTS, True, 0)
    one = await memory_set(s, s.off, 1, False, 0)
    return {"on": on, "off": off, "one_off": one}


async def latency(s: Sitting, calls: int) -> dict[str, list[float]]:
    """`calls` recall_chains in one session through the engine and one off, in turn (ms)."""
    await anyio.to_thread.run_sync(s.warm_engine)
    times: dict[str, list[float]] = {"off": [], "on": []}
    async with contextlib.AsyncExitStack() as stack:
        sessions = {"on": (await s.client(stack, s.on))[0], "off": (await s.client(stack, s.off))[0]}
        for query in QUERIES:
            for client in sessions.values():
                await recall(client, query)
        for i in range(calls):
            for way in ("off", "on") if i % 2 == 0 else ("on", "off"):
                times[way].append(1000 * await recall(sessions[way], QUERIES[i % len(QUERIES)]))
    return times


# -- the tables -----------------------------------------------------------------------------------


def _spread(values: Sequence[float], decimals: int) -> str:
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:,.{decimals}f}"
    return f"{median:,.{decimals}f} ({min(values):,.{decimals}f}–{max(values):,.{decimals}f})"


def _met(ok: bool, detail: str = "") -> str:
    return ("yes" if ok else "**no**") + (f" ({detail})" if detail else "")


def verdicts(results: dict[str, Any]) -> dict[str, bool]:
    cli, stdio, memory, lat = results["cli"], results["stdio"], results["memory"], results["latency"]
    found = {
        f"cli {name} warm <= {CLI_WARM_S} s": statistics.median(cli[name]["warm"]) <= CLI_WARM_S for name in COMMANDS
    }
    first = {way: statistics.median(r[way]["first_recall_s"] for r in stdio) for way in ("off", "cold", "warm")}
    found[f"stdio second client's first recall <= {STDIO_WARM_S} s"] = first["warm"] <= STDIO_WARM_S
    found["stdio first client's first recall <= off"] = first["cold"] <= first["off"]
    on, one = (statistics.median(r[k]["rss_mib"] for r in memory) for k in ("on", "one_off"))
    found[f"engine-on set RSS <= {MEMORY_RATIO}x one server off"] = on <= MEMORY_RATIO * one
    for q in (50, 99):
        ratio = harness.percentile(lat["on"], q) / harness.percentile(lat["off"], q)
        found[f"recall through the engine p{q} <= {LATENCY_RATIO}x off"] = ratio <= LATENCY_RATIO
    return found


def table(results: dict[str, Any]) -> str:
    """Rows: each figure; columns: off, cold, warm, the target and whether it is met."""
    cli, stdio, memory, lat = results["cli"], results["stdio"], results["memory"], results["latency"]
    runs, memory_runs = len(cli[COMMANDS[0]]["off"]), len(memory)
    rows: list[list[object]] = []
    for name in COMMANDS:
        warm = statistics.median(cli[name]["warm"])
        rows.append(
            [f"`corrigenda {name}`, spawn to exit (s)", *(_spread(cli[name][w], 2) for w in ("off", "cold", "warm")),
             f"warm ≤ {CLI_WARM_S}", _met(warm <= CLI_WARM_S)]
        )  # fmt: skip
    lost = {way: len(said) for way, said in results["lost_answers"].items()}
    rows.append(
        [f"CLI calls whose answer was lost on the way back, each run again ({lost['other']} more untimed)",
         *(str(lost[w]) for w in ("off", "cold", "warm")), "none", _met(not any(lost.values()))]
    )  # fmt: skip
    first = {way: [r[way]["first_recall_s"] for r in stdio] for way in ("off", "cold", "warm")}
    connect = {way: [r[way]["connect_s"] for r in stdio] for way in ("off", "cold", "warm")}
    median = {way: statistics.median(v) for way, v in first.items()}
    paired = statistics.median(r["cold"]["first_recall_s"] / r["off"]["first_recall_s"] for r in stdio)
    rows.append(
        ["stdio `serve`: spawn to the end of the handshake (s)", *(_spread(connect[w], 2) for w in connect), "", ""]
    )
    rows.append(
        ["stdio `serve`: spawn to the first `recall_chains` answer (s); cold: the first client, warm: a second",
         *(_spread(first[w], 2) for w in first), f"warm ≤ {STDIO_WARM_S}; cold ≤ off",
         f"warm {_met(median['warm'] <= STDIO_WARM_S)}; cold {_met(median['cold'] <= median['off'])}, "
         f"{median['cold'] / median['off']:.2f}× off (round by round: median {paired:.2f}×)"]
    )  # fmt: skip
    rss = {key: [r[key]["rss_mib"] for r in memory] for key in ("on", "off", "one_off")}
    processes = {key: memory[0][key]["processes"] for key in rss}
    ratio = statistics.median(rss["on"]) / statistics.median(rss["one_off"])
    rows.append(
        [f"RSS (MiB), {CLIENTS} stdio clients and the web view open; engine on: after {CLI_CALLS} CLI calls "
         f"({processes['off']} processes off, {processes['on']} on)", _spread(rss["off"], 0), "–",
         _spread(rss["on"], 0), f"on ≤ {MEMORY_RATIO}× one server off", _met(ratio <= MEMORY_RATIO, f"{ratio:.2f}×")]
    )  # fmt: skip
    engine = [r["on"]["engine_rss_mib"] for r in memory]
    rows.append(
        ["RSS (MiB), of which the engine process", "–", "–", _spread(engine, 0),
         f"({statistics.median(engine) / statistics.median(rss['one_off']):.2f}× one server off)", ""]
    )  # fmt: skip
    rows.append(["RSS (MiB), one stdio server alone", _spread(rss["one_off"], 0), "–", "–", "(the yardstick)", ""])
    for q in (50, 99):
        off, on = harness.percentile(lat["off"], q), harness.percentile(lat["on"], q)
        rows.append(
            [f"`recall_chains` in one stdio session, p{q} of {len(lat['on'])} calls (ms)", f"{off:.1f}", "–",
             f"{on:.1f}", f"warm ≤ {LATENCY_RATIO}× off", _met(on <= LATENCY_RATIO * off, f"{on / off:.2f}×")]
        )  # fmt: skip
    header = ["figure", "off (today)", "cold engine", "warm engine", "target", "met?"]
    note = (
        f"Medians (min–max) of {runs} rounds (memory: {memory_runs}); cold: no engine running, the command "
        "starts it; warm: an engine running and used before."
    )
    return f"{harness.markdown_table(header, rows)}\n\n{note}\n"


def processes(results: dict[str, Any]) -> str:
    """ps's lines for the engine-on set (the first memory round)."""
    lines = results["memory"][0]["on"]["ps"]
    return "```\n" + "\n".join(lines) + "\n```\n"


TABLES = {"main": table, "processes": processes}


# -- the sitting ----------------------------------------------------------------------------------


async def measure(s: Sitting, runs: int, memory_runs: int, calls: int) -> dict[str, Any]:
    with anyio.fail_after(PHASE_TIMEOUT_S * 4):
        cli = await anyio.to_thread.run_sync(cli_rounds, s, runs)
    stdio = []
    for i in range(runs):
        with anyio.fail_after(PHASE_TIMEOUT_S):
            stdio.append(await stdio_round(s, off_first=i % 2 == 0))
        said = ", ".join(f"{w} {f['first_recall_s']:.2f}" for w, f in stdio[-1].items())
        print(f"stdio {i + 1}/{runs}: first recall {said} s", file=sys.stderr)
    memory = []
    for i in range(memory_runs):
        with anyio.fail_after(PHASE_TIMEOUT_S):
            memory.append(await memory_round(s))
        said = ", ".join(f"{k} {v['rss_mib']:.0f}" for k, v in memory[-1].items())
        print(f"memory {i + 1}/{memory_runs}: RSS {said} MiB", file=sys.stderr)
    with anyio.fail_after(PHASE_TIMEOUT_S):
        lat = await latency(s, calls)
    return {"cli": cli, "stdio": stdio, "memory": memory, "latency": lat}


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__, runs=7, results="engine")
    parser.add_argument("--memory-runs", type=int, default=3, help="rounds of the memory sets (default 3)")
    parser.add_argument("--calls", type=int, default=50, help="recall_chains calls each way (default 50)")
    parser.add_argument(
        "--code", type=Path, default=harness.ROOT,
        help="a tree whose store/ and server/ to measure (default: this one), e.g. the code before a change, "
        "to compare the two in one sitting",
    )  # fmt: skip
    args = parser.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="corrigenda-engine-"))
    runtime = Path(tempfile.mkdtemp(prefix="be-", dir="/tmp"))
    s = Sitting(root, runtime, root / "code")
    try:
        s.code = snapshot(root / "code", args.code)
        notes = seed(s.db)
        figures = anyio.run(measure, s, args.runs, args.memory_runs, args.calls)
        figures["lost_answers"] = s.lost
    except BaseException:
        print(f"--- the engine's log (tail) ---\n{s.log_tail()}", file=sys.stderr)
        raise
    finally:
        s.cleanup()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)
    payload: dict[str, Any] = {
        "settings": {"code": s.code, "notes": notes, "scope": SCOPE, "runs": args.runs, "memory_runs": args.memory_runs,
                     "calls": args.calls, "queries": list(QUERIES), "clients": CLIENTS, "cli_calls": CLI_CALLS},
        **figures,
        "seconds": round(time.monotonic() - started),
    }  # fmt: skip
    payload["verdicts"] = verdicts(payload)
    if args.json:
        harness.write_results(args.json, payload)
    print(table(payload))
    print(processes(payload))
    print(f"wall time {payload['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
