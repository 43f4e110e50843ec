"""Scopes per project: any folder name is a scope, the client's root picks one, and `scopes` lists them."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from corrigenda.server import render
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.server.roots import scope_from_root
from corrigenda.server.ui import build_ui
from corrigenda.store import Draft, InvalidArgument, Memory, SentenceTransformerEmbedder
from corrigenda.store.browse import PAGE_MAX
from corrigenda.store.ids import new_note_id
from corrigenda.store.where import SCOPE_MAX
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.shared.message import SessionMessage
from mcp_types import ListRootsResult, Root
from starlette.testclient import TestClient

from ..conftest import call, call_error
from ..store.test_browse import T0, Clock
from .test_cli import run

pytestmark = pytest.mark.anyio

# What VS Code's ${workspaceFolderBasename} or a root can hand over, SQL's quote and escape included.
NAMES = ["My Project", "café", "项目", "O'Brien's notes", "back\\slash", "100% _done_", "a/b", "'; DROP TABLE notes --"]


def roots(*uris: str) -> Callable[..., Any]:
    async def list_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri) for uri in uris])  # type: ignore[arg-type]

    return list_roots


@asynccontextmanager
async def session(
    db: str, embedder: SentenceTransformerEmbedder, scope: str | None = None, project: str | None = None, **client: Any
) -> AsyncIterator[Client]:
    server = build_server(Settings(db=db, scope=scope, project=project), lambda settings: Memory(settings.db, embedder))
    # The initialize handshake, as the clients that offer roots speak it today.
    async with Client(server, raise_exceptions=True, mode="legacy", **client) as connected:
        yield connected


async def test_any_folder_name_is_a_scope_of_its_own(client: Client) -> None:
    ids = {}
    for name in NAMES:
        ids[name] = (await call(client, "remember", text=f"The deploy key of this project is kept in {name} vault", scope=name))["note"]["id"]  # fmt: skip
    for name in NAMES:
        chains = (await call(client, "recall_chains", query="where is the deploy key kept?", scope=name))["chains"]
        assert [c["heads"][0]["id"] for c in chains] == [ids[name]], name
    listed = {s["scope"]: s["notes"] for s in (await call(client, "scopes"))["scopes"]}
    assert listed == dict.fromkeys(NAMES, 1)


async def test_a_name_spelled_with_a_combining_accent_is_the_same_scope(client: Client) -> None:
    composed, decomposed = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert composed != decomposed  # macOS hands folder names over decomposed
    note = (await call(client, "remember", text="The café project ships on Fridays", scope=decomposed))["note"]
    assert note["scope"] == composed
    chains = (await call(client, "recall_chains", query="when does it ship?", scope=composed))["chains"]
    assert chains[0]["heads"][0]["id"] == note["id"]


async def test_a_scope_that_is_no_name_is_refused_naming_the_field(client: Client) -> None:
    for bad in ["", "   ", "tab\there", "x" * 129]:
        error = await call_error(client, "remember", text="x", scope=bad)
        assert "scope" in error and "not all blank" in error and "\\x00" not in error  # words, not a regex
    assert (await call(client, "scopes"))["scopes"] == []


def test_a_roots_scope_is_the_folder_name_and_a_hash_of_its_path() -> None:
    mine = scope_from_root("file:///home/ana/code/My%20Project")
    assert mine.startswith("My Project#") and len(mine) == len("My Project#") + 6
    assert scope_from_root("file:///home/ana/code/My%20Project/") == mine  # a trailing slash is the same folder
    assert scope_from_root("file:///home/bo/work/My%20Project") != mine  # same name elsewhere: another memory
    assert scope_from_root("file:///c:/Users/ana/api") == scope_from_root("file:///C:/Users/ana/api")
    assert scope_from_root("file:///C:/Users/ana/api").startswith("api#")
    assert len(scope_from_root("file:///" + "x" * 300)) <= 128


async def test_without_a_configured_scope_the_clients_root_chooses_it(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    first, second = "file:///home/ana/code/api", "file:///home/ana/old/api"
    async with session(db, embedder, list_roots_callback=roots(first, "file:///home/ana/notes")) as client:
        note = (await call(client, "remember", text="The api service listens on port 8080"))["note"]
        assert note["scope"] == scope_from_root(first)
        assert (await call(client, "scopes"))["default_scope"] == scope_from_root(first)
        assert "in scope api#" in (await client.call_tool("recall_chains", {"query": "api port"})).content[0].text  # type: ignore[union-attr]
    async with session(db, embedder, list_roots_callback=roots(second)) as client:
        # the session's own scope, new while another holds notes: empty, saying so, and naming no other
        # project's scope (a typo is a scope someone named: a session derived this one)
        result = await client.call_tool("recall_chains", {"query": "which port does the api listen on?"})
        text = result.content[0].text  # type: ignore[union-attr]
        assert not result.is_error and result.structured_content is not None
        assert result.structured_content["scope_is_new"] is True and result.structured_content["chains"] == []
        assert f"Nothing is stored in scope {scope_from_root(second)} yet" in text
        assert scope_from_root(first) not in text
        for tool, arguments in (("list_notes", {}), ("changes", {"since": "2026-01-01T00:00:00Z"})):
            listed = await client.call_tool(tool, arguments)
            assert not listed.is_error and scope_from_root(first) not in listed.content[0].text, tool  # type: ignore[union-attr]
        named = await call_error(client, "recall_chains", query="which port?", scope=scope_from_root(second))
        assert f"the nearest scopes: {scope_from_root(first)!r} (1 note)" in named  # named: a typo, as before
        other = (await call(client, "remember", text="The old api listened on port 7070"))["note"]
        assert other["scope"] == scope_from_root(second) != note["scope"]
    async with session(db, embedder) as client:  # a client with no roots
        assert (await call(client, "remember", text="Coffee is in the second drawer"))["note"]["scope"] == "default"
    async with session(db, embedder, scope="team", list_roots_callback=roots(first)) as client:  # configured wins
        assert (await call(client, "remember", text="Stand-up is at ten"))["note"]["scope"] == "team"
        assert "'team', set in the server's configuration" in (client.instructions or "")


async def test_a_roots_change_moves_the_session_to_the_new_root(db: str, embedder: SentenceTransformerEmbedder) -> None:
    current = ["file:///home/ana/code/web"]

    async def list_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=current[0])])  # type: ignore[arg-type]

    async with session(db, embedder, list_roots_callback=list_roots) as client:
        assert (await call(client, "remember", text="The web app uses React"))["note"]["scope"].startswith("web#")
        current[0] = "file:///home/ana/code/cli"
        await client.send_roots_list_changed()
        moved = (await call(client, "remember", text="The cli is written in Go"))["note"]
        assert moved["scope"] == scope_from_root(current[0])


async def test_scopes_counts_notes_and_events_per_scope(client: Client) -> None:
    old = (await call(client, "remember", text="Lunch is at noon", scope="office"))["note"]
    await call(client, "correct", note_id=old["id"], text="Lunch is at one", reason="new schedule")
    await call(client, "remember", text="The printer is on floor 2", scope="floor")
    listed = await call(client, "scopes")
    counts = {s["scope"]: (s["notes"], s["events"]) for s in listed["scopes"]}
    assert counts == {"office": (2, 1), "floor": (1, 0)}
    assert [s["scope"] for s in listed["scopes"]] == ["floor", "office"]  # the most recently changed first
    assert listed["default_scope"] == "default"


def test_scopes_come_a_page_at_a_time_the_most_recently_changed_first(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    clock = Clock()
    mem = Memory(db, embedder, clock=clock)
    clock.at(0)
    mem.remember(Draft(text="The cli is written in Go"), scope="cli")
    clock.at(1)
    cafe = mem.remember(Draft(text="The café opens at eight"), scope="Café").note
    clock.at(2)
    mem.remember(Draft(text="The web app uses React"), scope="web-app")
    mem.remember(Draft(text="The web api speaks JSON"), scope="Web API")
    clock.at(3)
    mem.revoke(cafe.id, reason="it opens at nine")  # an event alone is a change

    first = mem.scope_page(limit=3)
    assert [c.scope for c in first.scopes] == ["Café", "Web API", "web-app"]  # a tie goes by name
    assert first.scopes[0].latest_change_at == T0 + timedelta(hours=3)
    assert first.scopes[0].latest_note_at == T0 + timedelta(hours=1)
    assert (first.scopes[0].notes, first.scopes[0].events) == (1, 1)
    assert (first.total, first.offset, first.next_offset) == (4, 0, 3)
    assert first.next_offset is not None
    last = mem.scope_page(offset=first.next_offset, limit=3)
    assert [c.scope for c in last.scopes] == ["cli"] and last.next_offset is None
    beyond = mem.scope_page(offset=10)
    assert (beyond.scopes, beyond.total, beyond.next_offset) == ([], 4, None)
    assert [c.scope for c in mem.scope_page().scopes] == [c.scope for c in first.scopes + last.scopes]


def test_contains_finds_a_scope_by_part_of_its_name_in_any_case(memory: Memory) -> None:
    for name in ("web-app", "Web API", "Café", "cli"):
        memory.remember(Draft(text=f"A note about {name}"), scope=name)
    assert {c.scope for c in memory.scope_page(contains="WEB").scopes} == {"web-app", "Web API"}
    assert memory.scope_page(contains="WEB").total == 2 and memory.scope_page().total == 4
    decomposed = unicodedata.normalize("NFD", "CAFÉ")
    assert [c.scope for c in memory.scope_page(contains=decomposed).scopes] == ["Café"]
    nothing = memory.scope_page(contains="zzz")
    assert (nothing.scopes, nothing.total, nothing.next_offset, nothing.contains) == ([], 0, None, "zzz")


def test_the_default_scope_is_reported_whether_or_not_it_is_on_the_page(memory: Memory) -> None:
    memory.remember(Draft(text="Stand-up is at ten"), scope="team")
    memory.remember(Draft(text="Deploys are on Fridays"), scope="ops")
    page = memory.scope_page(limit=1, default_scope="team")
    assert [c.scope for c in page.scopes] == ["ops"]
    assert page.default_scope == "team" and page.default_counts is not None and page.default_counts.notes == 1
    assert "* 'team': 1 notes, 0 events" in render.scopes(page) and "(not on this page)" in render.scopes(page)
    empty = memory.scope_page(default_scope="new")
    assert empty.default_counts is None and "* 'new': empty so far" in render.scopes(empty)


def test_a_page_out_of_bounds_is_refused_naming_the_field(memory: Memory) -> None:
    memory.remember(Draft(text="Stand-up is at ten"), scope="team")
    for field, bad in (
        ("limit", {"limit": 0}), ("limit", {"limit": PAGE_MAX + 1}), ("limit", {"limit": True}),
        ("offset", {"offset": -1}), ("offset", {"offset": 1.5}), ("contains", {"contains": "x" * (SCOPE_MAX + 1)}),
    ):  # fmt: skip
        with pytest.raises(InvalidArgument) as refused:
            memory.scope_page(**bad)
        assert refused.value.field == field, bad
    assert len(memory.scope_page(limit=PAGE_MAX).scopes) == 1


async def test_the_scopes_tool_pages_and_says_how_to_get_the_next_page(client: Client) -> None:
    for name in ("one", "two", "three"):
        await call(client, "remember", text=f"Project {name} builds with make", scope=name)
    result = await client.call_tool("scopes", {"limit": 2})
    first = result.structured_content
    assert first is not None
    assert [s["scope"] for s in first["scopes"]] == ["three", "two"]
    assert (first["total"], first["offset"], first["next_offset"]) == (3, 0, 2)
    text = result.content[0].text  # type: ignore[union-attr]
    assert "showing 1–2 of 3" in text and "More: offset=2" in text and "* 'default': empty so far" in text
    last = await client.call_tool("scopes", {"offset": 2, "limit": 2})
    assert [s["scope"] for s in last.structured_content["scopes"]] == ["one"]  # type: ignore[index]
    assert "showing 3–3 of 3" in last.content[0].text and "More" not in last.content[0].text  # type: ignore[union-attr]
    found = await call(client, "scopes", contains="TW")
    assert [s["scope"] for s in found["scopes"]] == ["two"] and found["total"] == 1
    for bad in ({"limit": 0}, {"limit": PAGE_MAX + 1}, {"offset": -1}, {"contains": "x" * (SCOPE_MAX + 1)}):
        assert next(iter(bad)) in await call_error(client, "scopes", **bad)


@asynccontextmanager
async def wire(server: Any, received: list[str]) -> AsyncIterator[tuple[Any, Any]]:
    """A stream transport to `server` whose client end keeps each message it receives as JSON, as the
    stdio and HTTP transports write it (a server object given to Client directly skips JSON-RPC)."""
    async with InMemoryTransport(server, raise_exceptions=True) as (read, write):
        yield _Tapped(read, received), write


class _Tapped:
    def __init__(self, stream: Any, received: list[str]) -> None:
        self.stream, self.received = stream, received

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def _keep(self, item: Any) -> Any:
        if isinstance(item, SessionMessage):
            self.received.append(item.message.model_dump_json(by_alias=True, exclude_unset=True))
        return item

    async def receive(self) -> Any:
        return self._keep(await self.stream.receive())

    def __aiter__(self) -> _Tapped:
        return self

    async def __anext__(self) -> Any:
        return self._keep(await self.stream.__anext__())

    async def __aenter__(self) -> _Tapped:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.stream.__aexit__(*exc)


def store_of_scopes(memory: Memory, n: int) -> None:
    """`n` scopes of one note each, written as a restore writes them: an export of one real note (with
    its vector) copied into each scope under a new id, imported whole, so no note is embedded again."""
    memory.remember(Draft(text="The build runs with make"), scope="p00000")
    header, note = (json.loads(line) for line in list(memory.export(vectors=True))[:2])
    header["scopes"] = [f"p{i:05d}" for i in range(n)]
    notes = [json.dumps(note | ({"id": new_note_id(), "scope": f"p{i:05d}"} if i else {})) for i in range(n)]
    digest = hashlib.sha256("".join(line + "\n" for line in notes).encode()).hexdigest()
    trailer = {"type": "end", "notes": n, "events": 0, "sha256": digest}
    memory.import_lines([json.dumps(header), *notes, json.dumps(trailer)])


@pytest.mark.slow
@pytest.mark.processes
async def test_a_store_of_ten_thousand_scopes_answers_scopes_in_under_100_kb(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    memory = Memory(db, embedder)
    store_of_scopes(memory, 10_000)
    assert memory.stats()["notes"] == 10_000
    server = build_server(Settings(db=db), lambda settings: Memory(settings.db, embedder))
    received: list[str] = []
    async with Client(wire(server, received), raise_exceptions=True) as client:
        result = await client.call_tool("scopes", {})
    (response,) = [m for m in received if '"structuredContent"' in m]  # the tools/call answer
    assert len(response.encode()) < 100_000, len(response.encode())
    page = json.loads(response)["result"]
    assert page["structuredContent"] == result.structured_content
    assert (page["structuredContent"]["total"], page["structuredContent"]["next_offset"]) == (10_000, 100)
    assert len(page["structuredContent"]["scopes"]) == 100 and "showing 1–100 of 10000" in page["content"][0]["text"]

    for flags in ([], ["--json"]):
        printed = run("scopes", "--db", db, *flags)
        assert printed.returncode == 0, printed.stderr
        assert len(printed.stdout.encode()) < 100_000, (flags, len(printed.stdout.encode()))
    listed = json.loads(printed.stdout)
    assert listed["total"] == 10_000 and len(listed["scopes"]) == 100
    found = json.loads(run("scopes", "--db", db, "--contains", "P0999", "--json").stdout)
    assert sorted(s["scope"] for s in found["scopes"]) == [f"p0999{i}" for i in range(10)]

    # the web view: its landing page, the pages of /scopes and a name search
    app = build_ui(memory, "default", Settings(db=db))
    with TestClient(app, base_url="http://127.0.0.1:8766") as browser:
        for path in ("/", "/scopes", "/scopes?offset=9900", "/scopes?contains=p0999"):
            answer = browser.get(path)
            assert answer.status_code == 200 and len(answer.content) < 100_000, (path, len(answer.content))
        assert "Scopes 9901–10000 of 10000" in browser.get("/scopes?offset=9900").text
        assert browser.get("/scopes?contains=p0999").text.count('<tr><td><a href="/?scope=p0999') == 10
