"""The real server process: over stdio (SDK client), streamable HTTP, the Inspector CLI, and two
processes writing to one store at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from corrigenda.store import Draft, Memory
from corrigenda.store.tables import Tables
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench.faults import STOP_WAIT_S

from ..conftest import call, call_error

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
INSPECTOR = "@modelcontextprotocol/inspector@0.17.5"  # the 0.x CLI runs on Node 20
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": os.environ["PATH"], "CORRIGENDA_ENGINE": "off"}


def stdio(db: str) -> StdioServerParameters:
    return StdioServerParameters(command=CORRIGENDA, args=["serve", "--db", db], env=ENV)


@pytest.mark.anyio
async def test_stdio_server_answers_the_story(db: str) -> None:
    async with Client(stdio(db)) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"remember", "recall_chains"}
        old = (await call(client, "remember", text="the service listens on 8080"))["note"]
        new = (await call(client, "correct", note_id=old["id"], text="the service listens on 9090", reason="moved"))[
            "note"
        ]
        chain = (await call(client, "recall_chains", query="which port?"))["chains"][0]
        assert chain["heads"][0]["id"] == new["id"] and chain["history"][0]["note"]["id"] == old["id"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"  # whatever the bind address: connect over loopback only


def serve_http(db: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[Running]:
    """A server process over streamable HTTP, started in `cwd`, until the fixture using it ends."""
    port = _free_port()
    proc = subprocess.Popen(
        [CORRIGENDA, "serve", "--transport", "http", "--port", str(port), "--db", db, *args],
        env={**ENV, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server exited"
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield Running(port, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_WAIT_S)


@pytest.fixture
def http_server(db: str) -> Iterator[str]:
    for running in serve_http(db):
        yield running.url


@pytest.mark.anyio
async def test_streamable_http_server(http_server: str) -> None:
    async with Client(http_server) as client:
        note = (await call(client, "remember", text="Deploy windows are Tuesdays and Thursdays"))["note"]
        chains = (await call(client, "recall_chains", query="when can we deploy?"))["chains"]
        assert chains[0]["heads"][0]["id"] == note["id"]
    async with Client(http_server) as second:  # a second session sees the same store
        assert (await call(second, "history", note_id=note["id"]))["note"]["text"].startswith("Deploy windows")


def _inspector(db: str, *method: str) -> Any:
    npx = shutil.which("npx")
    assert npx is not None, "npx (Node.js) is needed for the Inspector CLI test; .ci/run installs it"
    out = subprocess.run(
        [npx, "-y", INSPECTOR, "--cli", CORRIGENDA, "serve", "--db", db, *method],
        capture_output=True, text=True, timeout=300, env={**os.environ, **ENV},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_inspector_cli_lists_and_calls_tools(db: str) -> None:
    listed = _inspector(db, "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert "recall_chains" in tools and tools["recall_chains"]["annotations"]["readOnlyHint"] is True
    assert all([i["mimeType"] for i in t["icons"]] == ["image/png", "image/svg+xml"] for t in tools.values())
    assert all(t["icons"][0]["src"].startswith("data:image/png;base64,") for t in tools.values())
    called = _inspector(
        db, "--method", "tools/call", "--tool-name", "remember", "--tool-arg", "text=The CI runner has 2 cores"
    )
    assert called.get("isError") is not True
    assert called["structuredContent"]["note"]["text"] == "The CI runner has 2 cores"
    recalled = _inspector(
        db, "--method", "tools/call", "--tool-name", "recall_chains", "--tool-arg", "query=CI runner cores"
    )
    assert "NOW" in recalled["content"][0]["text"] and "2 cores" in recalled["content"][0]["text"]
    links = [c["uri"] for c in recalled["content"] if c["type"] == "resource_link"]
    assert [link.split("/")[2] for link in links] == ["chains", "notes"]


def test_inspector_cli_reads_a_resource_and_a_prompt(db: str) -> None:
    templates = _inspector(db, "--method", "resources/templates/list")["resourceTemplates"]
    assert "corrigenda://scopes/{scope}/recent" in {t["uriTemplate"] for t in templates}
    note = _inspector(
        db, "--method", "tools/call", "--tool-name", "remember", "--tool-arg", "text=Staging lives on host s-2",
        "--tool-arg", "scope=My Project",
    )["structuredContent"]["note"]  # fmt: skip
    read = _inspector(db, "--method", "resources/read", "--uri", f"corrigenda://notes/{note['id']}")
    assert read["contents"][0]["text"].startswith(f"{note['id']} [fact;")
    recent = _inspector(db, "--method", "resources/read", "--uri", "corrigenda://scopes/My%20Project/recent")
    assert "Staging lives on host s-2" in recent["contents"][0]["text"]
    prompt = _inspector(
        db, "--method", "prompts/get", "--prompt-name", "recall_before_answering", "--prompt-args", "question=Where is staging?"
    )  # fmt: skip
    assert "recall_chains" in prompt["messages"][0]["content"]["text"]


@pytest.mark.anyio
async def test_two_server_processes_on_one_store_lose_nothing(db: str) -> None:
    acknowledged: dict[str, list[str]] = {"notes": [], "events": []}

    async def writer(name: str) -> None:
        async with Client(stdio(db)) as client:
            previous = None
            for i in range(12):
                if previous is not None and i % 3 == 0:
                    r = await call(
                        client, "correct", note_id=previous, text=f"{name} fact {i} (corrected)", reason="newer"
                    )
                    acknowledged["events"].append(r["event"]["id"])
                else:
                    r = await call(client, "remember", text=f"{name} writes fact number {i}", scope="shared")
                acknowledged["notes"].append(r["note"]["id"])
                previous = r["note"]["id"]
            revoked = await call(client, "revoke", note_id=previous, reason="last one was wrong")
            acknowledged["events"].append(revoked["event"]["id"])

    async with anyio.create_task_group() as group:
        group.start_soon(writer, "alpha")
        group.start_soon(writer, "beta")

    tables = Tables(db)
    note_ids: Counter[str] = Counter(tables.handles.notes_table().to_arrow()["id"].to_pylist())  # type: ignore[union-attr]
    event_ids = Counter(tables.handles.events_table().to_arrow()["id"].to_pylist())
    assert len(acknowledged["notes"]) == 24 and len(acknowledged["events"]) == 8
    assert all(note_ids[i] == 1 for i in acknowledged["notes"]), note_ids
    assert all(event_ids[i] == 1 for i in acknowledged["events"]), event_ids
    assert sum(note_ids.values()) == 24 and sum(event_ids.values()) == 8


@pytest.mark.anyio
async def test_a_running_server_sees_another_process_writes_at_once(db: str) -> None:
    os.makedirs(db)  # an empty store (a read never makes one)
    async with Client(stdio(db)) as reader, Client(stdio(db)) as writer:
        await call(reader, "recall_chains", query="anything")  # the reader has opened the store
        old = (await call(writer, "remember", text="The message queue is RabbitMQ"))["note"]
        new = await call(writer, "correct", note_id=old["id"], text="The message queue is Kafka", reason="migrated")
        chain = (await call(reader, "recall_chains", query="which message queue do we use?"))["chains"][0]
        assert chain["heads"][0]["id"] == new["note"]["id"] and chain["history"][0]["note"]["id"] == old["id"]
        revoked = await call(reader, "revoke", note_id=new["note"]["id"], reason="migration was cancelled")
        assert revoked["chain"]["heads"][0]["id"] == old["id"]
        assert (await call(writer, "history", note_id=old["id"]))["note"]["state"] == "active"


# A program that uses the store without closing it, and ends while a compaction it set off runs.
EXIT_WHILE_COMPACTING = """
import sys, threading
from corrigenda.store import Draft, Memory
memory = Memory(sys.argv[1])
memory.import_notes([Draft(text=f"service {i} listens on port {8000 + i}") for i in range(200)])
for i in range(100):
    memory.remember(Draft(text=f"service {i} moved to port {9000 + i}"))
    if any(t.name == "corrigenda-compact" for t in threading.enumerate()):
        print("exiting while it compacts", flush=True)
        break
"""


def test_a_program_that_ends_while_its_store_compacts_exits_cleanly(tmp_path: Path) -> None:
    """The interpreter waits for the compaction (as `Memory.close` would) instead of stopping its thread
    inside Lance, which aborted the process in about half of such exits. Three programs at once."""
    programs = [
        subprocess.Popen([sys.executable, "-c", EXIT_WHILE_COMPACTING, str(tmp_path / f"store{i}")],
                         env={**ENV, "PYTHONWARNINGS": "ignore"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(3)
    ]  # fmt: skip
    for program in programs:
        out, err = program.communicate(timeout=300)
        assert b"exiting while it compacts" in out
        assert program.returncode == 0, err.decode(errors="replace")[-2000:]


def _started(command: str, db: str, port: int) -> subprocess.Popen[bytes]:
    """`command` running and ready: a stdio server that has answered `initialize`, or a port that accepts."""
    args = {
        "serve": ["serve", "--db", db],
        "serve --transport http": ["serve", "--transport", "http", "--port", str(port), "--db", db],
        "ui": ["ui", "--port", str(port), "--db", db],
    }[command]
    proc = subprocess.Popen([CORRIGENDA, *args], env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    if command == "serve":
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
        proc.stdin.write(json.dumps(hello).encode() + b"\n")
        proc.stdin.flush()
        assert b'"id":1' in proc.stdout.readline()
        return proc
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.1)
    raise AssertionError(f"{command} did not start")


@pytest.mark.parametrize("command", ["serve", "serve --transport http", "ui"])
def test_ctrl_c_ends_the_servers_quietly_with_status_130(command: str, db: str, memory: Memory) -> None:
    memory.remember(Draft(text="The web view opens on this note"))  # `ui` wants a store to look through
    proc = _started(command, db, _free_port())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=STOP_WAIT_S)
    said = err.decode()
    assert proc.returncode == 130, said
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    assert said.strip().splitlines()[-1] == "corrigenda: stopped", said


@pytest.mark.anyio
async def test_a_new_users_first_recall_at_the_default_store_is_empty_not_an_error(tmp_path: Path) -> None:
    """Nothing remembered yet, no --db, no CORRIGENDA_DB: the first call an agent makes (recall, as the
    instructions say) answers empty, saying the scope is new; only a path someone named is a typo."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in ENV.items() if k not in ("CORRIGENDA_DB", "XDG_DATA_HOME")} | {"HOME": str(home)}
    params = StdioServerParameters(command=CORRIGENDA, args=["serve"], env=env, cwd=str(tmp_path))
    async with Client(params) as client:
        result = await client.call_tool("recall_chains", {"query": "which port does the api listen on?"})
        assert not result.is_error, result.content
        assert result.structured_content is not None and result.structured_content["scope_is_new"] is True


@pytest.mark.anyio
async def test_a_read_under_serve_at_a_mistyped_store_says_so_and_makes_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "stroe"
    params = StdioServerParameters(command=CORRIGENDA, args=["serve"], env={**ENV, "CORRIGENDA_DB": str(typo)})
    async with Client(params) as client:
        for tool, arguments in (("recall_chains", {"query": "which port?"}), ("scopes", {})):
            said = await call_error(client, tool, **arguments)
            assert f"there is no store at {typo} (from CORRIGENDA_DB)" in said and "`remember` makes it" in said, said
        assert not typo.exists()
        await call(client, "remember", text="The service listens on 8080")  # a write makes it
        assert typo.is_dir() and (await call(client, "scopes"))["scopes"]
