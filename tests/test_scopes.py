"""Scopes per project: any folder name is a scope, the client's root picks one, and `scopes` lists them."""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.server.roots import scope_from_root
from corrigenda.store import Memory, SentenceTransformerEmbedder
from mcp import Client
from mcp_types import ListRootsResult, Root

from .conftest import call, call_error

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
        # nothing there yet, while another scope holds notes: an error naming it, not an empty memory
        empty = await call_error(client, "recall_chains", query="which port does the api listen on?")
        assert f"nothing was ever stored in scope {scope_from_root(second)!r}" in empty
        assert f"the nearest scopes: {scope_from_root(first)!r} (1 note)" in empty
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
    assert [s["scope"] for s in listed["scopes"]] == ["office", "floor"]  # busiest first
    assert listed["default_scope"] == "default"
