"""Two writers correct one current note at the same moment: one wins, the other is told, every round?

Each round the bench remembers a note, then two writers correct it at once (started together, within a
millisecond or so), and the round is judged from a third connection: the chain's current notes after
both answered, and what each writer was told. A round is **clean** when one correction is the chain's
only current note and the other writer got a Conflict naming it; **two current** when the chain ends
with two current notes (the fault this guards against: both callers told they succeeded). The writers,
by mode:

- `threads`: two threads of one process sharing one `Memory` (one server, two requests at once);
- `connections`: two threads of one process, each with its own `Memory` (as two server processes);
- `processes`: two long-lived processes, each with its own `Memory`, which read the note first (as a
  running server would have);
- `fresh`: two new processes whose first operation on the store is the correction (every CLI
  `correct` is one): started, model loaded, store untouched, then told to go at once;
- `servers`: two `corrigenda serve --transport http` processes on one store, a correct tool call to each;
- `ui`: the web view (`corrigenda ui`, its form posted) against an MCP server (`serve --transport http`).

    .venv/bin/python bench/correction_race.py                        # 200 rounds of each mode
    .venv/bin/python bench/correction_race.py --rounds 20 --modes threads,fresh --json /tmp/r.json
    .venv/bin/python bench/correction_race.py --before /tmp/before.json   # its figures shown beside

`--before` takes the results file of a run on other code (the code before a fix, put first on
PYTHONPATH): its rows are shown beside this run's. Exits 1 if a round of this run was not clean.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import harness
from corrigenda.store import Conflict, Draft, Memory

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
MODES = ("threads", "connections", "processes", "servers", "ui", "fresh")
SCOPE = "race"
LEAD_S = 0.05  # writers in other processes are told a moment this far ahead, and both start then
WAIT_S = 120.0
Outcome = tuple[str, str]  # ("corrected", the new note's id) or ("refused", the error's text)


def judge(memory: Memory, old_id: str, outcomes: Sequence[Outcome]) -> str:
    """What a round came to: clean, two current, both refused, or other (an error, a wrong head)."""
    heads = [h.id for h in memory.history(old_id).chain.heads]
    won = [detail for kind, detail in outcomes if kind == "corrected"]
    told = [detail for kind, detail in outcomes if kind == "refused"]
    if len(heads) > 1:
        return "two current"
    if len(won) == 1 and len(told) == 1 and heads == won and won[0] in told[0]:
        return "clean"
    if not won and len(told) == 2:
        return "both refused"
    return "other"


def correct_once(memory: Memory, old_id: str, text: str) -> Outcome:
    try:
        return "corrected", memory.correct(old_id, Draft(text=text), reason="moved").note.id
    except Conflict as exc:
        return "refused", str(exc)
    except Exception as exc:  # counted as "other"
        return "error", f"{type(exc).__name__}: {exc}"


# -- writers in this process ----------------------------------------------------------------------


def in_threads(memory: Memory, writers: Sequence[Memory], old_id: str, round_: int) -> list[Outcome]:
    barrier = threading.Barrier(2)
    outcomes: list[Outcome] = []

    def write(writer: Memory, day: str) -> None:
        barrier.wait()
        outcomes.append(correct_once(writer, old_id, f"Round {round_}: the deploy window is {day}"))

    threads = [
        threading.Thread(target=write, args=(w, d)) for w, d in zip(writers, ("Wednesday", "Friday"), strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


# -- writers in processes of their own --------------------------------------------------------------


def worker(db: str) -> None:
    """A writer process: loads the model, says `ready`, then answers each line of stdin: `read ID` (reads
    the note's history), `correct ID AT TEXT` (waits until the time AT, then corrects), `quit`."""
    memory = Memory(db)
    memory.embedder.embed(["load"])
    print("ready", flush=True)
    for line in sys.stdin:
        command, *rest = line.rstrip("\n").split(" ", 3)
        if command == "read":
            memory.history(rest[0])
            print("ok", flush=True)
        elif command == "correct":
            old_id, at, text = rest
            time.sleep(max(0.0, float(at) - time.time()))
            kind, detail = correct_once(memory, old_id, text)
            print(json.dumps([kind, detail]), flush=True)
        else:
            break
    memory.close()


class Worker:
    def __init__(self, db: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", db], env=ENV, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def answer(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a writer process ended (exit {self.proc.wait()})")
        return line.strip()

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
        try:
            self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def in_processes(pair: Sequence[Worker], old_id: str, round_: int, read_first: bool) -> list[Outcome]:
    if read_first:
        for w in pair:
            w.send(f"read {old_id}")
        for w in pair:
            assert w.answer() == "ok"
    at = time.time() + LEAD_S
    for w, day in zip(pair, ("Wednesday", "Friday"), strict=True):
        w.send(f"correct {old_id} {at} Round {round_}: the deploy window is {day}")
    return [tuple(json.loads(w.answer())) for w in pair]  # type: ignore[misc]


# -- servers -----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(db: str, *args: str) -> Iterator[int]:
    """A `corrigenda` process listening on a free port of loopback (`serve --transport http`, or `ui`)."""
    port = free_port()
    command = ["ui", "--port", str(port)] if args == ("ui",) else ["serve", "--transport", "http", "--port", str(port)]
    proc = subprocess.Popen([CORRIGENDA, *command, "--db", db], env=ENV, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"corrigenda {command[0]} did not start")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=WAIT_S)


async def mcp_correct(client: Any, old_id: str, text: str) -> Outcome:
    result = await client.call_tool("correct", {"note_id": old_id, "text": text, "reason": "moved"})
    if result.is_error:
        return "refused", result.content[0].text
    return "corrected", result.structured_content["note"]["id"]


class WebView:
    """The web view's form, posted as a person's browser would (the page's form token, its Origin)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        page = urllib.request.urlopen(self.base + "/", timeout=WAIT_S).read().decode()
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found, "no form token on the web view's page"
        self.csrf = found.group(1)

    def post(self, old_id: str, text: str) -> Outcome:
        form = {"csrf": self.csrf, "action": "correct", "note_id": old_id, "reason": "moved", "text": text,
                "confirmed": "yes"}  # fmt: skip
        request = urllib.request.Request(
            self.base + "/act", data=urllib.parse.urlencode(form).encode(), headers={"Origin": self.base}
        )
        try:
            urllib.request.build_opener(NoRedirect).open(request, timeout=WAIT_S)
        except urllib.error.HTTPError as answer:
            if answer.code == 303:
                return "corrected", answer.headers["location"].split("/chain/")[1].split("?")[0]
            return "refused", html.unescape(re.sub(r"<[^>]+>", " ", answer.read().decode()))
        return "error", "the web view answered without a redirect"

    async def correct(self, old_id: str, text: str) -> Outcome:
        return await asyncio.to_thread(self.post, old_id, text)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any) -> None:
        return None


async def via_servers(
    memory: Memory, db: str, mode: str, rounds: int, say: Callable[[int, str, Sequence[Outcome]], None]
) -> None:
    from mcp import Client

    async with AsyncExitStack() as stack:
        first = stack.enter_context(server(db))
        second = stack.enter_context(server(db, *(("ui",) if mode == "ui" else ())))
        mcp = await stack.enter_async_context(Client(f"http://127.0.0.1:{first}/mcp"))
        if mode == "ui":
            web = WebView(second)
            other: Callable[[str, str], Any] = web.correct
        else:
            other_client = await stack.enter_async_context(Client(f"http://127.0.0.1:{second}/mcp"))
            other = lambda old_id, text: mcp_correct(other_client, old_id, text)  # noqa: E731
        for round_ in range(rounds):
            old = memory.remember(Draft(text=f"Round {round_}: the deploy window is Tuesday"), scope=SCOPE).note
            await mcp.call_tool("history", {"note_id": old.id})  # each has read it, as before a correction
            if mode != "ui":
                await other_client.call_tool("history", {"note_id": old.id})
            outcomes = await asyncio.gather(
                mcp_correct(mcp, old.id, f"Round {round_}: the deploy window is Wednesday"),
                other(old.id, f"Round {round_}: the deploy window is Friday"),
            )
            say(round_, judge(memory, old.id, outcomes), outcomes)


# -- the run -----------------------------------------------------------------------------------------


def run_mode(mode: str, rounds: int, root: Path) -> dict[str, Any]:
    db = str(root / mode)
    memory = Memory(db)
    memory.remember(Draft(text="The store is open"), scope=SCOPE)  # made before any writer opens it
    counts: Counter[str] = Counter()
    started = time.monotonic()

    def say(round_: int, verdict: str, outcomes: Sequence[Outcome]) -> None:
        counts[verdict] += 1
        if verdict != "clean" or (round_ + 1) % 20 == 0:
            told = "" if verdict == "clean" else f": {[(kind, detail[:300]) for kind, detail in outcomes]}"
            print(f"{mode} round {round_ + 1}/{rounds}: {verdict} ({dict(counts)}){told}", file=sys.stderr, flush=True)

    if mode in ("servers", "ui"):
        asyncio.run(via_servers(memory, db, mode, rounds, say))
    else:
        writers = {"threads": [memory, memory], "connections": [Memory(db, memory.embedder) for _ in range(2)]}.get(
            mode, []
        )
        pairs: list[list[Worker]] = [[Worker(db), Worker(db)]] if mode == "processes" else []
        if mode == "processes":
            for w in pairs[0]:
                assert w.answer() == "ready"
        ahead: list[list[Worker]] = []
        for round_ in range(rounds):
            old = memory.remember(Draft(text=f"Round {round_}: the deploy window is Tuesday"), scope=SCOPE).note
            if writers:
                for writer in set(writers):
                    writer.history(old.id)  # each writer has read it, as before a correction
                outcomes = in_threads(memory, writers, old.id, round_)
            elif mode == "processes":
                outcomes = in_processes(pairs[0], old.id, round_, read_first=True)
            else:  # fresh: the next round's pair starts (and loads its model) while this one races
                while len(ahead) < 2:
                    ahead.append([Worker(db), Worker(db)])
                pair = ahead.pop(0)
                for w in pair:
                    assert w.answer() == "ready"
                outcomes = in_processes(pair, old.id, round_, read_first=False)
                for w in pair:
                    w.stop()
            say(round_, judge(memory, old.id, outcomes), outcomes)
        for pair in [*pairs, *ahead]:
            for w in pair:
                w.stop()
    memory.close()
    return {"rounds": rounds, **{k: counts[k] for k in ("clean", "two current", "both refused", "other")},
            "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


def main_table(payload: dict[str, Any]) -> str:
    runs = [("before", payload["before"]["modes"])] if "before" in payload else []
    runs.append(("now" if runs else "", payload["modes"]))
    rows = [
        [*([label] if len(runs) > 1 else []), mode, m["rounds"], m["clean"], m["two current"], m["both refused"],
         m["other"], m["seconds"]]
        for label, modes in runs for mode, m in modes.items()
    ]  # fmt: skip
    header = ["mode", "rounds", "clean", "two current", "both refused", "other", "seconds"]
    if len(runs) > 1:
        header.insert(0, "code")
        before = payload["before"]["run"]
        rows = [[f"before ({before['commit']})" if r[0] == "before" else r[0], *r[1:]] for r in rows]
    return harness.markdown_table(header, rows)


TABLES = {"main": main_table}


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--worker"]:
        worker(args[1])
        return 0
    parser = harness.parser(__doc__, results="correction_race")
    parser.add_argument("--rounds", type=int, default=200, help="rounds of each mode (default 200)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"a comma-separated list of {', '.join(MODES)}")
    parser.add_argument("--before", type=Path, help="the results file of a run on other code, shown beside")
    parsed = parser.parse_args(args)
    modes = parsed.modes.split(",")
    if set(modes) - set(MODES):
        parser.error(f"--modes: one of {', '.join(MODES)}")
    payload: dict[str, Any] = {"modes": {}}
    with tempfile.TemporaryDirectory(prefix="correction-race-") as root:
        for mode in modes:
            payload["modes"][mode] = run_mode(mode, parsed.rounds, Path(root))
            if parsed.before is not None and parsed.before.is_file():  # read as late as can be: it may run beside
                before = harness.read_results(parsed.before)
                payload["before"] = {"run": before["run"], "modes": before["modes"]}
            harness.write_results(parsed.json, payload)  # what is done so far, should a later mode fail
    print(main_table(payload))
    return 0 if all(m["clean"] == m["rounds"] for m in payload["modes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
