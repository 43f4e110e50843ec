"""Secrets and note texts in the logs: every line a server and the CLI print at DEBUG, searched for them.

One store, a grants file with two static credentials (ada: team-* and ada; bob: bob) and
CORRIGENDA_TOKEN beside it. Every entry point is driven as a client or a person drives it, with its
stdout and stderr (uvicorn writes its access lines to stdout) kept apart:
- http: `serve --transport http --ui --log-level DEBUG`: each credential's MCP session over HTTP
  (Authorization: Bearer) calls remember, correct, recall_chains, list_notes, changes, history,
  why_excluded, forget, the recall prompt and the recent resource, and the same calls on a scope it
  may not read; the web view is opened with ?token= (also percent-encoded, also a wrong token), its
  pages read with the session cookie, a note corrected by hand (POST /act) and the session logged out.
- cli: `corrigenda remember / correct / recall / list / export` with CORRIGENDA_LOG_LEVEL=DEBUG.
- stdio: `serve` on stdio at DEBUG, a session that remembers and recalls.
Then each output is searched for every token (the two credentials', CORRIGENDA_TOKEN, the wrong one)
and for the text of every note written (each has a marker word of its own, so a hit is unambiguous).
A hit is a line that holds one; the bench lists each.

Run from the repository root (about a minute):

    .venv/bin/python bench/log_secrets.py [--json PATH]
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
from harness import markdown_table, parser, write_results
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
TOKENS = {
    "ada": "ada-secret-token-log-bench-4f1c9a",
    "bob": "bob-secret-token-log-bench-77e0d2",
    "server": "server-secret-token-log-bench-0b93",
    "wrong": "wrong-secret-token-log-bench-5d8e",
}
NOTE = "The {marker} vault code is 4711 and its alarm is armed at 22:00."  # each note's own marker word


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _grants(path: Path) -> None:
    digest = {name: hashlib.sha256(token.encode()).hexdigest() for name, token in TOKENS.items()}
    path.write_text(
        f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{digest["ada"]}"\nread = ["team-*"]\nwrite = ["ada"]\n\n'
        f'[[credentials]]\nname = "bob"\ntoken_sha256 = "{digest["bob"]}"\nwrite = ["bob"]\n'
    )


class Markers:
    """A fresh marker word per note written, so that a note's text found in a log is found for sure."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def note(self) -> str:
        marker = f"zx{len(self.used):03d}quill"
        self.used.append(marker)
        return NOTE.format(marker=marker)


@asynccontextmanager
async def bearer(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def _tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    return dict(result.structured_content or {})


async def mcp_session(url: str, name: str, scope: str, foreign: str, markers: Markers) -> int:
    """One credential's session: every tool on its own scope, and reads of a scope it may not read."""
    calls = 0
    async with bearer(url, TOKENS[name]) as client:
        first = (await _tool(client, "remember", text=markers.note(), scope=scope))["note"]["id"]
        second = await _tool(client, "correct", note_id=first, text=markers.note(), reason=markers.note())
        await _tool(client, "recall_chains", query=markers.note(), scope=scope)
        await _tool(client, "list_notes", scope=scope)
        await _tool(client, "changes", scope=scope, since="2020-01-01T00:00:00Z")
        await _tool(client, "history", note_id=second["note"]["id"])
        await _tool(client, "why_excluded", note_id=first, query=markers.note(), scope=scope)
        extra = (await _tool(client, "remember", text=markers.note(), scope=scope))["note"]["id"]
        await _tool(client, "forget", note_id=extra, reason=markers.note())
        await client.get_prompt("recall_before_answering", {"question": markers.note(), "scope": scope})
        await client.read_resource(f"corrigenda://scopes/{scope}/recent")
        for refused in ("recall_chains", "list_notes"):
            args = {"query": markers.note()} if refused == "recall_chains" else {}
            await client.call_tool(refused, {**args, "scope": foreign})
        calls += 13
    return calls


def web_view(base: str, markers: Markers) -> int:
    requests = 0
    with httpx2.Client(base_url=base, trust_env=False, timeout=60) as http:
        for address in (
            f"/ui/?token={TOKENS['ada']}",
            f"/ui/?tok%65n={TOKENS['ada']}",
            f"/ui/?token={TOKENS['wrong']}",
        ):
            http.get(address, headers={"Sec-Fetch-Site": "none"})
            requests += 1
        page = http.get("/ui/?scope=ada").text
        http.get("/ui/", params={"scope": "ada", "q": markers.note()})
        requests += 2
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        note = re.search(r"/ui/chain/(n_[0-9a-z]+)", page)
        if found and note:
            fields = {"action": "correct", "note_id": note.group(1), "text": markers.note(), "reason": markers.note(),
                      "csrf": found.group(1), "confirmed": "yes"}  # fmt: skip
            http.post("/ui/act", data=fields, headers={"Origin": base})
            http.post("/ui/logout", data={"csrf": found.group(1)}, headers={"Origin": base})
            requests += 2
    return requests


def run_http(folder: Path, markers: Markers) -> dict[str, Any]:
    grants, db, port = folder / "grants.toml", folder / "store", _free_port()
    _grants(grants)
    env = {**ENV, "CORRIGENDA_GRANTS": str(grants), "CORRIGENDA_TOKEN": TOKENS["server"]}
    out, err = folder / "http.out", folder / "http.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        server = subprocess.Popen(
            [CORRIGENDA, "serve", "--transport", "http", "--ui", "--port", str(port), "--db", str(db),
             "--log-level", "DEBUG"], env=env, stdout=stdout, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None:
                raise RuntimeError(err.read_text())
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/mcp"
        calls = asyncio.run(mcp_session(url, "ada", "ada", "bob", markers))
        calls += asyncio.run(mcp_session(url, "bob", "bob", "ada", markers))
        calls += web_view(f"http://127.0.0.1:{port}", markers)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "calls": calls,
        "outputs": {"stdout": out.read_text(errors="replace"), "stderr": err.read_text(errors="replace")},
    }


def run_cli(folder: Path, markers: Markers) -> dict[str, Any]:
    db = str(folder / "cli-store")
    outputs: list[str] = []

    def cli(*args: str) -> str:
        done = subprocess.run([CORRIGENDA, *args, "--db", db], env={**ENV, "CORRIGENDA_LOG_LEVEL": "DEBUG"},
                              capture_output=True, text=True, timeout=300, cwd=folder)  # fmt: skip
        outputs.append(done.stderr)
        return done.stdout

    written = cli("remember", markers.note(), "--scope", "cli", "--json")
    note_id = json.loads(written)["note"]["id"] if written.strip().startswith("{") else None
    if note_id:
        cli("correct", note_id, markers.note(), "--reason", markers.note(), "--scope", "cli")
    cli("recall", markers.note(), "--scope", "cli")
    cli("list", "--scope", "cli")
    cli("export", "--scope", "cli", "--out", str(folder / "export.jsonl"))
    return {"calls": 5, "outputs": {"stderr": "\n".join(outputs)}}


async def _stdio(db: str, err: Path, markers: Markers) -> None:
    serve = f"exec {CORRIGENDA} serve --db {db} --log-level DEBUG 2>>{err}"  # the server's stderr, kept
    params = StdioServerParameters(command="sh", args=["-c", serve], env=ENV)
    async with Client(params) as client:
        await _tool(client, "remember", text=markers.note(), scope="stdio")
        await _tool(client, "recall_chains", query=markers.note(), scope="stdio")


def run_stdio(folder: Path, markers: Markers) -> dict[str, Any]:
    err = folder / "stdio.err"
    asyncio.run(_stdio(str(folder / "stdio-store"), err, markers))
    return {"calls": 2, "outputs": {"stderr": err.read_text(errors="replace")}}


def hits(text: str, markers: Sequence[str]) -> dict[str, list[str]]:
    lines = text.splitlines()
    return {
        "tokens": [line for line in lines if any(t in line for t in TOKENS.values())],
        "note texts": [line for line in lines if any(m in line for m in markers)],
    }


def table(payload: dict[str, Any]) -> str:
    rows = [
        [name, e["calls"], e["lines"], len(e["hits"]["tokens"]), len(e["hits"]["note texts"])]
        for name, e in payload["entry_points"].items()
    ]
    return markdown_table(
        ["entry point", "calls and requests", "log lines", "lines with a token", "lines with a note's text"], rows
    )


TABLES = {"main": table}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, results="log_secrets").parse_args(argv)
    markers = Markers()
    entry_points: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="log-secrets-") as scratch:
        for name, run in (("http (MCP and web view)", run_http), ("cli", run_cli), ("stdio", run_stdio)):
            done = run(Path(scratch), markers)
            text = "\n".join(done["outputs"].values())
            entry_points[name] = {"calls": done["calls"], "lines": len(text.splitlines()),
                                  "hits": hits(text, markers.used)}  # fmt: skip
    payload = {"tokens": len(TOKENS), "notes_written": len(markers.used), "entry_points": entry_points}
    print(table(payload))
    for name, e in entry_points.items():
        for kind, lines in e["hits"].items():
            for line in lines[:5]:
                print(f"{name}: {kind}: {line[:200]}")
    write_results(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
