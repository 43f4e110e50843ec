"""Subjects that hold one value (issue 49, item 2): declared on `remember` or with `declare_subject`, a new
note of the subject replaces its current note in the same call; without a declaration nothing changes."""

from __future__ import annotations

import json
import tempfile

import pytest
from corrigenda.store.errors import InvalidArgument
from corrigenda.store.memory import Memory
from corrigenda.store.model import Draft, EventKind, NoteState
from corrigenda.store.subjects import subject_key
from mcp import Client

from ..conftest import call, call_error

pytestmark = pytest.mark.anyio


def test_subjects_that_differ_only_by_case_spaces_or_punctuation_are_one() -> None:
    assert subject_key("Payments Timeout") == subject_key("payments.timeout") == subject_key("payments_timeout")
    assert subject_key("ＰＡＹＭＥＮＴＳ timeout") == subject_key("payments-timeout")  # full-width letters
    assert subject_key("payments.port") != subject_key("payments.timeout")
    assert subject_key("支付 超时") == "支付超时"


async def test_an_agent_replaces_a_one_value_subjects_note_in_one_call_and_undoes_it(client: Client) -> None:
    first = await call(client, "remember", text="The payments timeout is 30 seconds", subject="payments.timeout",
                       one_value=True)  # fmt: skip
    assert first["replaced"] == {"subject": "payments.timeout", "declared": True, "notes": [],
                                 "undo": first["replaced"]["undo"]}  # fmt: skip
    # one call, and the agent never learned the old note's id; another spelling of the subject
    result = await client.call_tool(
        "remember", {"text": "The payments timeout is 45 seconds", "subject": "Payments Timeout"}
    )
    assert not result.is_error
    second = result.structured_content
    assert second is not None
    old_id, new_id = first["note"]["id"], second["note"]["id"]
    assert [n["id"] for n in second["replaced"]["notes"]] == [old_id]
    assert second["replaced"]["notes"][0]["state"] == "superseded"
    (edge,) = second["events"]
    assert (edge["kind"], edge["src"], edge["dst"]) == ("supersedes", new_id, old_id)
    assert edge["reason"] == "one value: Payments Timeout"
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Replaced (now history):" in text and old_id in text and f'revoke(note_id="{new_id}"' in text
    recalled = await call(client, "recall_chains", query="what is the payments timeout?")
    heads = [h["id"] for c in recalled["chains"] for h in c["heads"]]
    assert heads[0] == new_id and old_id not in heads
    await call(client, "revoke", note_id=new_id, reason="the rise was not rolled out")  # the undo it named
    history = await call(client, "history", note_id=old_id)
    assert history["note"]["state"] == "active"


async def test_without_a_declaration_a_subjects_notes_all_stay_current(client: Client) -> None:
    a = await call(client, "remember", text="Ada reviews the payments service", subject="payments.reviewer")
    b = await call(client, "remember", text="Grace reviews the payments service", subject="payments.reviewer")
    assert b["replaced"] is None and b["events"] == []
    for note in (a, b):
        assert (await call(client, "history", note_id=note["note"]["id"]))["note"]["state"] == "active"


async def test_declaring_a_subject_with_several_current_notes_leaves_them_and_says_so(client: Client) -> None:
    for port in (8443, 9443):
        await call(client, "remember", text=f"The payments port is {port}", subject="payments.port")
    result = await client.call_tool("declare_subject", {"subject": "payments.port", "reason": "one port"})
    declared = result.structured_content
    assert declared is not None and declared["changed"] and declared["one_value"]
    assert len(declared["current"]) == 2 and all(n["state"] == "active" for n in declared["current"])
    assert "2 current notes; they stay until someone settles them" in result.content[0].text  # type: ignore[union-attr]
    assert declared["declared_by"]["actor"] is not None and declared["declared_by"]["reason"] == "one port"
    again = await call(client, "declare_subject", subject="Payments Port")
    assert again["changed"] is False and again["declared_by"]["id"] == declared["event"]["id"]
    # the next remember of the subject settles both
    third = await call(client, "remember", text="The payments port is 10443", subject="payments.port")
    assert sorted(n["id"] for n in third["replaced"]["notes"]) == sorted(n["id"] for n in declared["current"])


async def test_a_withdrawn_declaration_replaces_nothing_and_bad_subjects_are_refused(client: Client) -> None:
    await call(client, "remember", text="The cache size is 2 GB", subject="cache.size", one_value=True)
    withdrawn = await call(client, "declare_subject", subject="cache size", one_value=False)
    assert withdrawn["changed"] and not withdrawn["one_value"] and withdrawn["event"]["kind"] == "many_values"
    later = await call(client, "remember", text="The cache size is 4 GB", subject="cache.size")
    assert later["replaced"] is None
    assert "subject" in await call_error(client, "declare_subject", subject="...")
    assert "no letter or digit" in await call_error(client, "declare_subject", subject="-- ..")
    assert "subject: must not be empty" in await call_error(client, "remember", text="A note", one_value=True)
    assert "256" in await call_error(client, "declare_subject", subject="x" * 257)


def test_a_declaration_is_kept_with_who_and_when_read_as_of_and_carried_by_export(memory: Memory) -> None:
    kept = memory.remember(Draft(text="The release train leaves on Tuesdays", subject="release.day"))
    declared = memory.declare_subject("release.day", actor="ada", reason="one train")
    assert declared.event is not None and declared.event.kind is EventKind.ONE_VALUE
    (standing,) = memory.one_value_subjects("default")
    assert (standing.actor, standing.reason, standing.id) == ("ada", "one train", declared.event.id)
    assert memory.one_value_subjects("default", at=kept.note.recorded_at) == []  # not yet declared then
    # the same text again under the declaration: the same note, nothing replaced
    same = memory.remember(Draft(text="The release train leaves on Tuesdays", subject="release.day"))
    assert same.changed is False and same.note.id == kept.note.id
    lines = list(memory.export("default"))
    assert any(json.loads(line).get("kind") == "one_value" for line in lines)
    copy = Memory(tempfile.mkdtemp(), memory.embedder)
    copy.import_lines(iter(lines))
    assert [e.id for e in copy.one_value_subjects("default")] == [declared.event.id]
    moved = copy.remember(Draft(text="The release train leaves on Thursdays", subject="Release day"))
    assert moved.replaced is not None and [n.id for n in moved.replaced.notes] == [kept.note.id]
    assert copy.history(kept.note.id).note.state is NoteState.SUPERSEDED


def test_an_import_refuses_a_declaration_that_names_no_subject(memory: Memory) -> None:
    memory.remember(Draft(text="A note so the scope exists", subject="a.b"))
    memory.declare_subject("a.b")
    lines = list(memory.export("default"))
    bad = [line.replace('"dst":"subject:a.b"', '"dst":"subject:..."') for line in lines]
    with pytest.raises(InvalidArgument, match="dst"):
        Memory(tempfile.mkdtemp(), memory.embedder).import_lines(iter(bad))
