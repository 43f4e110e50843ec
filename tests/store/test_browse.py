"""Looking through a memory: a scope's notes by state, page by page, and what changed since a time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from corrigenda.server import render
from corrigenda.store import Draft, InvalidArgument, Memory, NoteState, SentenceTransformerEmbedder
from mcp import Client

from ..conftest import call, call_error
from ..server.test_cli import run

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def at(self, hours: float) -> datetime:
        self.now = T0 + timedelta(hours=hours)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(db: str, embedder: SentenceTransformerEmbedder, clock: Clock) -> Memory:
    return Memory(db, embedder, clock=clock)


def test_a_scope_lists_current_and_history_newest_first_in_pages(mem: Memory, clock: Clock) -> None:
    clock.at(0)
    port = mem.remember(Draft(text="The service listens on 8080"), scope="ops").note
    clock.at(1)
    owner = mem.remember(Draft(text="Alice owns the billing service"), scope="ops").note
    clock.at(2)
    wrong = mem.remember(Draft(text="Backups run at midnight"), scope="ops").note
    clock.at(3)
    fixed = mem.correct(port.id, Draft(text="The service listens on 9090"), reason="moved behind the proxy").note
    clock.at(4)
    mem.revoke(wrong.id, reason="there are no backups")
    mem.remember(Draft(text="An unrelated note elsewhere"), scope="home")

    current = mem.list_notes("ops", "current")
    assert [n.id for n in current.notes] == [fixed.id, owner.id]
    assert current.counts[NoteState.ACTIVE] == 2 and current.counts[NoteState.SUPERSEDED] == 1
    assert current.counts[NoteState.REVOKED] == 1 and current.counts[NoteState.EXPIRED] == 0
    history = mem.list_notes("ops", "history")
    assert [(n.id, n.state) for n in history.notes] == [
        (wrong.id, NoteState.REVOKED),
        (port.id, NoteState.SUPERSEDED),
    ]

    first = mem.list_notes("ops", "all", limit=3)
    assert [n.id for n in first.notes] == [fixed.id, wrong.id, owner.id] and first.total == 4
    assert first.next_offset == 3
    last = mem.list_notes("ops", "all", offset=first.next_offset, limit=3)
    assert [n.id for n in last.notes] == [port.id] and last.next_offset is None

    before = mem.list_notes("ops", "current", as_of=T0 + timedelta(hours=2, minutes=30))
    assert [n.id for n in before.notes] == [wrong.id, owner.id, port.id]  # the old port, current then


def test_an_unknown_scope_is_named_with_the_scopes_that_exist(mem: Memory) -> None:
    mem.remember(Draft(text="The service listens on 8080"), scope="ops")
    for attempt in (lambda: mem.list_notes("osp"), lambda: mem.changes(T0, scope="osp")):
        with pytest.raises(InvalidArgument, match=r"scope 'osp'.*'ops' \(1 note\)"):
            attempt()
    with pytest.raises(InvalidArgument, match="state"):
        mem.list_notes("ops", "stale")  # type: ignore[arg-type]
    assert mem.stats()["notes"] == 1 and "osp" not in {c.scope for c in mem.scopes()}


def test_changes_since_a_time_are_newest_first_with_the_chains_current_head(mem: Memory, clock: Clock) -> None:
    clock.at(0)
    port = mem.remember(Draft(text="The service listens on 8080"), scope="ops").note
    token = mem.remember(Draft(text="The deploy token is in vault path ops/deploy"), scope="ops").note
    db_note = mem.remember(Draft(text="The database is PostgreSQL 15"), scope="ops").note
    clock.at(1)
    old_fix = mem.correct(db_note.id, Draft(text="The database is PostgreSQL 16"), reason="upgraded").note
    clock.at(2)  # `since` lies here: what came before is not listed
    fix = mem.correct(port.id, Draft(text="The service listens on 9090"), reason="moved behind the proxy")
    clock.at(3)
    revoked = mem.revoke(fix.note.id, reason="the move was rolled back")
    clock.at(4)
    back = mem.reinstate(revoked.event.id, reason="the rollback was itself undone")  # type: ignore[union-attr]
    clock.at(5)
    mem.forget(token.id, reason="a person asked for it to be erased")

    since = T0 + timedelta(hours=1, minutes=30)
    found = mem.changes(since, scope="ops")
    assert [c.change for c in found.changes] == ["forgotten", "reinstated", "revoked", "corrected"]
    forgotten, reinstated, rev, corrected = found.changes
    assert forgotten.note_id == token.id and forgotten.note is None and forgotten.heads == []
    assert "vault" not in forgotten.model_dump_json()  # a tombstone keeps no text
    assert reinstated.event.id == back.event.id and reinstated.note_id == fix.note.id  # type: ignore[union-attr]
    for change in (reinstated, rev, corrected):  # every change shows where its chain stands now
        assert [h.text for h in change.heads] == ["The service listens on 9090"]
    assert corrected.note_id == port.id and corrected.by is not None and corrected.by.id == fix.note.id
    assert corrected.event.reason == "moved behind the proxy" and corrected.note.state is NoteState.SUPERSEDED  # type: ignore[union-attr]
    assert db_note.id not in {c.note_id for c in found.changes} and old_fix.id not in {c.note_id for c in found.changes}

    newest = mem.changes(since, scope="ops", limit=2)
    assert [c.change for c in newest.changes] == ["forgotten", "reinstated"] and newest.more == 2
    assert mem.changes(T0 + timedelta(hours=6), scope="ops").changes == []


def test_changes_list_the_scopes_settings_made_since(mem: Memory, clock: Clock) -> None:
    """A subject declared to hold one value, that declaration withdrawn, and how often notes are to be
    checked: an agent resuming work learns them from `changes` as it learns corrections."""
    clock.at(0)
    mem.declare_subject("deploy.window", scope="ops", reason="set before the move")
    mem.remember(Draft(text="Deploys run on Tuesdays", subject="deploy.window"), scope="ops")
    clock.at(2)
    mem.declare_subject("Payments timeout", scope="ops", reason="one timeout at a time", actor="ada")
    clock.at(3)
    mem.check_every(30, scope="ops")
    clock.at(4)
    mem.declare_subject("payments.timeout", scope="ops", one_value=False, reason="two regions, two timeouts")

    found = mem.changes(T0 + timedelta(hours=1), scope="ops")
    assert [(c.change, c.subject, c.check_every_days) for c in found.changes] == [
        ("withdrawn", "payments.timeout", None),
        ("check_every", None, 30),
        ("declared", "Payments timeout", None),
    ]
    assert all(c.note_id is None and c.note is None and c.heads == [] for c in found.changes)
    assert found.changes[2].event.actor == "ada" and found.changes[2].event.reason == "one timeout at a time"
    text = render.changes(found)
    assert "DECLARED subject 'Payments timeout' holds one value by ada" in text
    assert "WITHDRAWN subject 'payments.timeout' holds any number of values" in text
    assert "CHECK_EVERY current notes are checked every 30 day(s)" in text


@pytest.mark.anyio
async def test_list_notes_and_changes_through_the_protocol(client: Client) -> None:
    start = datetime.now(UTC).isoformat()
    old = (await call(client, "remember", text="The service listens on 8080", scope="ops"))["note"]
    await call(client, "remember", text="Alice owns the billing service", scope="ops")
    new = (await call(client, "correct", note_id=old["id"], text="The service listens on 9090", reason="moved"))["note"]

    page = await call(client, "list_notes", scope="ops", state="current", limit=1)
    assert [n["id"] for n in page["notes"]] == [new["id"]] and page["total"] == 2 and page["next_offset"] == 1
    assert page["counts"] == {"active": 2, "superseded": 1, "revoked": 0, "expired": 0, "pending": 0}

    found = await call(client, "changes", scope="ops", since=start)
    (change,) = found["changes"]
    assert change["change"] == "corrected" and change["note_id"] == old["id"]
    assert [h["id"] for h in change["heads"]] == [new["id"]]
    text = (await client.call_tool("changes", {"scope": "ops", "since": start})).content[0].text  # type: ignore[union-attr]
    assert "CORRECTED" in text and "NOW" in text and "9090" in text

    assert "nothing was ever stored in scope 'osp'" in await call_error(client, "list_notes", scope="osp")
    assert "ISO 8601" in await call_error(client, "changes", scope="ops", since="yesterday")


def test_the_list_and_changes_commands(db: str, mem: Memory, clock: Clock) -> None:
    clock.at(0)
    old = mem.remember(Draft(text="The service listens on 8080"), scope="ops").note
    clock.at(2)
    mem.correct(old.id, Draft(text="The service listens on 9090"), reason="moved behind the proxy")

    listed = run("list", "--db", db, "--scope", "ops", "--state", "history")
    assert listed.returncode == 0, listed.stderr
    assert "SUPERSEDED" in listed.stdout and "8080" in listed.stdout and "9090" not in listed.stdout

    since = (T0 + timedelta(hours=1)).isoformat()
    changed = run("changes", "--db", db, "--scope", "ops", "--since", since, "--json")
    assert changed.returncode == 0, changed.stderr
    assert [c["change"] for c in json.loads(changed.stdout)["changes"]] == ["corrected"]

    mistyped = run("list", "--db", db, "--scope", "osp")
    assert mistyped.returncode == 2 and "'ops'" in mistyped.stderr
