""" "Still true" (issue 49, item 3): `confirm` records that a current note was checked and holds; a scope's
`check_every` marks a current note UNCHECKED once it was neither written nor confirmed for that long:
never hidden, never moved."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta

import pytest
from corrigenda.server import render
from corrigenda.store.embedder import SentenceTransformerEmbedder
from corrigenda.store.errors import Conflict, InvalidArgument, NotFound
from corrigenda.store.memory import Memory
from corrigenda.store.model import Draft
from mcp import Client

from ..conftest import call, call_error

pytestmark = pytest.mark.anyio
START = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


async def test_an_agent_confirms_a_note_and_recall_and_history_show_the_check(client: Client) -> None:
    note = (await call(client, "remember", text="The VPN gateway is vpn-2"))["note"]
    result = await client.call_tool("confirm", {"note_id": note["id"], "reason": "pinged vpn-2"})
    assert not result.is_error and result.structured_content is not None
    event = result.structured_content["event"]
    assert (event["kind"], event["dst"], event["reason"]) == ("confirms", note["id"], "pinged vpn-2")
    history = await call(client, "history", note_id=note["id"])
    assert history["note"]["last_checked"]["event_id"] == event["id"]
    recalled = await client.call_tool("recall_chains", {"query": "vpn gateway"})
    assert "checked " in recalled.content[0].text  # type: ignore[union-attr]
    listed = await call(client, "list_notes", state="current")
    assert listed["notes"][0]["last_checked"]["reason"] == "pinged vpn-2"


async def test_confirming_a_note_that_is_history_names_its_state_and_what_is_current(client: Client) -> None:
    old = (await call(client, "remember", text="The VPN gateway is vpn-2"))["note"]["id"]
    new = (await call(client, "correct", note_id=old, text="The VPN gateway is vpn-3", reason="moved"))["note"]["id"]
    said = await call_error(client, "confirm", note_id=old)
    assert f"superseded by {new}" in said and f"confirm its chain's current note ({new}) instead" in said
    await call(client, "revoke", note_id=new, reason="vpn-3 never went live")  # old is current again
    assert "revoked" in await call_error(client, "confirm", note_id=new)
    await call(client, "forget", note_id=old, reason="erase it")
    assert "was forgotten (erased for good)" in await call_error(client, "confirm", note_id=old)


def test_a_note_unchecked_for_longer_than_the_scope_asks_is_marked_never_moved(
    embedder: SentenceTransformerEmbedder,
) -> None:
    clock = Clock()
    memory = Memory(tempfile.mkdtemp(), embedder, clock=clock)
    vpn = memory.remember(Draft(text="The VPN gateway is vpn-2")).note
    clock.now += timedelta(days=1)
    wiki = memory.remember(Draft(text="The VPN help page lives at wiki.internal/vpn")).note
    order = [h.id for c in memory.recall("vpn gateway").chains for h in c.heads]
    memory.check_every(30, actor="ada", reason="a monthly look")
    clock.now += timedelta(days=40)
    chains = memory.recall("vpn gateway").chains
    assert [h.id for c in chains for h in c.heads] == order  # marked, not moved nor hidden
    marked = {h.id: h.unchecked_since for c in chains for h in c.heads}
    assert marked == {vpn.id: vpn.recorded_at, wiki.id: wiki.recorded_at}
    confirmed = memory.confirm(vpn.id, reason="pinged it", actor="ada")
    assert confirmed.chain.heads[0].unchecked_since is None
    assert confirmed.chain.heads[0].last_checked is not None
    assert "UNCHECKED since 2026-01-02" in render.recall(memory.recall("vpn gateway"))
    # as_of: before the confirmation it was unchecked; before the setting nothing was marked
    before = memory.recall("vpn gateway", as_of=clock.now - timedelta(hours=1)).chains
    assert {h.id: h.unchecked_since for c in before for h in c.heads}[vpn.id] == vpn.recorded_at
    early = memory.recall("vpn gateway", as_of=START + timedelta(days=2)).chains
    assert all(h.unchecked_since is None for c in early for h in c.heads)
    memory.check_every(0)  # withdrawn: no limit
    assert all(h.unchecked_since is None for c in memory.recall("vpn gateway").chains for h in c.heads)


def test_confirmations_and_the_setting_travel_through_changes_export_and_import(
    embedder: SentenceTransformerEmbedder,
) -> None:
    clock = Clock()
    memory = Memory(tempfile.mkdtemp(), embedder, clock=clock)
    note = memory.remember(Draft(text="Backups run at 02:00")).note
    memory.check_every(7)
    clock.now += timedelta(days=10)
    confirmed = memory.confirm(note.id, reason="saw last night's run", actor="ada")
    (change,) = memory.changes(since=START).changes
    assert (change.change, change.note_id) == ("confirmed", note.id)
    copy = Memory(tempfile.mkdtemp(), embedder, clock=clock)
    copy.import_lines(iter(list(memory.export("default"))))
    view = copy.history(note.id).note
    assert view.last_checked is not None and view.last_checked.event_id == confirmed.event.id  # type: ignore[union-attr]
    clock.now += timedelta(days=8)
    assert copy.history(note.id).note.unchecked_since == confirmed.event.recorded_at  # type: ignore[union-attr]


def test_bad_settings_and_unknown_notes_are_refused_by_name(memory: Memory) -> None:
    for days in (-1, 40_000):
        with pytest.raises(InvalidArgument, match="days"):
            memory.check_every(days)
    with pytest.raises(NotFound):
        memory.confirm("n_" + "0" * 26)
    note = memory.remember(Draft(text="A note valid for a day", valid_until=datetime.now(UTC) - timedelta(hours=1),
                                 at=datetime.now(UTC) - timedelta(days=1))).note  # fmt: skip
    with pytest.raises(Conflict, match="expired by its validity window"):
        memory.confirm(note.id)
