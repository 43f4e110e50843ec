"""`corrigenda serve` over stdio, driven with raw JSON-RPC lines: every request gets an answer, even
one the protocol layer cannot read, and the server keeps answering after it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from corrigenda.server.stdio import MAX_MESSAGE_BYTES

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": os.environ["PATH"], "CORRIGENDA_ENGINE": "off"}


class RawSession:
    """A server process spoken to line by line, as a client's stdio transport does."""

    def __init__(self, db: str, *arguments: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [CORRIGENDA, "serve", "--db", db, *arguments], env=env or ENV,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 20) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no answer within {timeout} s"
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(
        self, id: int, method: str, params: dict[str, Any] | None = None, timeout: float = 20
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message))
        return self.receive(timeout)

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.stderr.read().decode()

    def initialize(self) -> None:
        hello = self.request(
            1,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        assert hello["result"]["serverInfo"]["name"] == "corrigenda"
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))


@pytest.fixture
def session(db: str) -> Iterator[RawSession]:
    raw = RawSession(db)
    try:
        raw.initialize()
        yield raw
    finally:
        raw.close()


def assert_still_answers(session: RawSession, id: int) -> None:
    tools = session.request(id, "tools/list")
    assert tools["id"] == id and {t["name"] for t in tools["result"]["tools"]} >= {"remember", "recall_chains"}


def test_a_lone_surrogate_escape_is_answered_with_an_error_naming_the_field(session: RawSession) -> None:
    session.send(
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember","arguments":{"text":"\\ud800"}}}'
    )
    answer = session.receive()
    assert answer["id"] == 2 and answer["error"]["code"] == -32602, answer
    message = answer["error"]["message"]
    assert "params.arguments.text" in message and "surrogate" in message and "\n" not in message
    assert_still_answers(session, 3)


def test_a_line_that_is_not_json_is_answered_with_a_parse_error(session: RawSession) -> None:
    session.send("this is not json")
    answer = session.receive()
    assert answer["id"] is None and answer["error"]["code"] == -32700, answer
    session.send('{"jsonrpc":"2.0","id":2,"method":')  # cut short: its id can still be read
    answer = session.receive()
    assert answer["id"] == 2 and answer["error"]["code"] == -32700, answer
    session.send('{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}')  # JSON, not a request
    answer = session.receive()
    assert answer["id"] == 3 and answer["error"]["code"] == -32600, answer
    assert_still_answers(session, 4)
    session.send(b'{"jsonrpc":"2.0","id":5,"method":"tools/list","x":"\xff"}')  # not UTF-8
    answer = session.receive()
    assert answer["id"] == 5 and answer["error"]["code"] == -32700 and "UTF-8" in answer["error"]["message"]
    assert_still_answers(session, 6)


def test_a_message_over_the_size_cap_is_refused_and_the_server_keeps_answering(session: RawSession) -> None:
    text = "x" * (MAX_MESSAGE_BYTES + 100_000)
    started = time.monotonic()
    session.send(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "remember", "arguments": {"text": text}},
            }
        )
    )
    answer = session.receive()
    assert answer["id"] == 2 and answer["error"]["code"] == -32600, answer
    assert str(MAX_MESSAGE_BYTES) in answer["error"]["message"] or "MiB" in answer["error"]["message"]
    assert_still_answers(session, 3)
    assert time.monotonic() - started < 20


def test_a_message_just_under_the_cap_is_read(session: RawSession) -> None:
    envelope = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"text": ""}},
    }
    padding = MAX_MESSAGE_BYTES - len(json.dumps(envelope))
    envelope["params"]["arguments"]["text"] = "x" * padding  # type: ignore[index]
    line = json.dumps(envelope)
    assert len(line) == MAX_MESSAGE_BYTES
    session.send(line)
    answer = session.receive()
    # Read and validated: the tool refuses the text by its own limit, as a tool error.
    assert answer["id"] == 2 and answer["result"]["isError"] is True, answer
    assert "text" in answer["result"]["content"][0]["text"]
