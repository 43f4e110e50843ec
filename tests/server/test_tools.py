"""Every tool through an MCP client session (in memory, the real protocol), with its error cases."""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest
from corrigenda.server import render
from corrigenda.server import tools as server_tools
from corrigenda.store.ids import NOTE_ID_PATTERN
from corrigenda.store.tokens import estimate_tokens
from corrigenda.store.views import RecallResult
from mcp import Client

from ..conftest import call, call_error

pytestmark = pytest.mark.anyio

TOOLS = {
    "remember", "correct", "revoke", "reinstate", "recall_chains", "why_excluded", "history", "link", "forget",
    "scopes", "list_notes", "changes", "declare_subject", "confirm",
}  # fmt: skip


async def snapshot(client: Client, note_ids: list[str]) -> list[dict[str, Any]]:
    """The full history of each note: what a refused call must leave exactly as it was."""
    return [await call(client, "history", note_id=i) for i in note_ids]


async def test_tools_are_listed_with_schemas_descriptions_and_honest_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.title and tool.title != tool.name, tool.name
        assert tool.output_schema is not None, tool.name
        assert tool.annotations is not None
    for name in ("recall_chains", "why_excluded", "history", "scopes", "list_notes", "changes"):
        assert tools[name].annotations.read_only_hint is True  # type: ignore[union-attr]
    for name in ("revoke", "reinstate"):
        assert tools[name].annotations.idempotent_hint is True  # type: ignore[union-attr]
    assert tools["forget"].annotations.destructive_hint is True  # type: ignore[union-attr]
    assert tools["remember"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert tools["recall_chains"].input_schema["properties"]["budget_tokens"]["minimum"] == 50


async def test_each_tool_is_one_function_found_by_its_name_described_without_the_sources_line_breaks(
    client: Client,
) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(server_tools.TOOLS) == list(listed)  # registered in one place, in the order defined
    for name, tool in server_tools.TOOLS.items():
        module = importlib.import_module(tool.fn.__module__)  # tools.py, or tools_truth.py
        assert module.__name__.startswith("corrigenda.server.tools")
        assert tool.fn is getattr(module, name) and tool.fn.__name__ == name
        description = listed[name].description or ""
        assert "\n" not in description.replace("\n\n", ""), name  # paragraphs, no wrapped lines
        assert description.split()[:4] == (tool.fn.__doc__ or "").split()[:4]
    # the schema's id pattern is the store's: it refuses what the store would (no 'i', 'l', 'o', 'u')
    pattern = listed["history"].input_schema["properties"]["note_id"]["pattern"]
    assert pattern == NOTE_ID_PATTERN and not re.match(pattern, "n_" + "u" * 26)


async def test_server_instructions_teach_the_capture_protocol(client: Client) -> None:
    instructions = client.instructions
    assert instructions is not None and "similar_active" in instructions and "`correct`" in instructions


async def test_remember_lists_similar_active_notes_and_never_links_on_its_own(client: Client) -> None:
    first = (await call(client, "remember", text="The staging database runs PostgreSQL 15 on db-staging-1"))["note"]
    await call(client, "remember", text="Bob likes to review pull requests in the morning")
    second = await call(client, "remember", text="The staging database now runs PostgreSQL 16 on db-staging-2")
    similar = [s["note"]["id"] for s in second["similar_active"]]
    assert similar[0] == first["id"]
    assert second["similar_active"][0]["similarity"] > 0.5
    assert second["events"] == []  # no edge was guessed
    chain = (await call(client, "history", note_id=first["id"]))["chain"]
    assert [h["id"] for h in chain["heads"]] == [first["id"]]


async def test_remember_with_supersedes_and_depends_on_writes_the_edges(client: Client) -> None:
    base = (await call(client, "remember", text="Deploys go through the blue-green pipeline in CI"))["note"]
    old = (await call(client, "remember", text="Release tags look like v1.2.3"))["note"]
    new = await call(
        client, "remember", text="Release tags look like release-1.2.3", supersedes=[old["id"]], depends_on=[base["id"]]
    )
    kinds = sorted((e["kind"], e["dst"]) for e in new["events"])
    assert kinds == sorted([("supersedes", old["id"]), ("depends_on", base["id"])])
    recalled = await call(client, "recall_chains", query="how are release tags named?")
    chain = next(c for c in recalled["chains"] if c["heads"][0]["id"] == new["note"]["id"])
    assert [p["id"] for p in chain["prerequisites"]] == [base["id"]]
    assert [h["note"]["id"] for h in chain["history"]] == [old["id"]]


async def test_correct_keeps_the_old_notes_kind_subject_and_scope(client: Client) -> None:
    old = (await call(client, "remember", text="Use tabs", kind="preference", subject="style.indent", scope="proj-a"))[
        "note"
    ]
    corrected = await call(client, "correct", note_id=old["id"], text="Use four spaces", reason="team vote")
    assert corrected["note"]["kind"] == "preference" and corrected["note"]["subject"] == "style.indent"
    assert corrected["note"]["scope"] == "proj-a"
    error = await call_error(client, "correct", note_id=old["id"], text="x", reason="y", scope="proj-b")
    assert "scope" in error and "proj-a" in error


async def test_correcting_a_replaced_note_is_refused_unless_the_caller_forks(client: Client) -> None:
    old = (await call(client, "remember", text="The cache TTL is 60 seconds"))["note"]
    first = await call(client, "correct", note_id=old["id"], text="The cache TTL is 120 seconds", reason="ops said so")
    before = await snapshot(client, [old["id"], first["note"]["id"]])
    error = await call_error(client, "correct", note_id=old["id"], text="The cache TTL is 30 seconds", reason="dev")
    # one line, naming the note, what replaced it, the current head and both ways forward
    assert "\n" not in error and error.count(first["note"]["id"]) >= 2 and "superseded" in error
    assert "fork=true" in error and "correct the current note" in error
    assert await snapshot(client, [old["id"], first["note"]["id"]]) == before
    second = await call(
        client, "correct", note_id=old["id"], text="The cache TTL is 30 seconds", reason="dev said so", fork=True
    )
    assert second["chain"]["status"] == "contested" and len(second["chain"]["heads"]) == 2
    result = await client.call_tool("recall_chains", {"query": "cache TTL"})
    assert "CONTESTED" in result.content[0].text  # type: ignore[union-attr]


async def test_revoke_and_reinstate_are_idempotent(client: Client) -> None:
    note = (await call(client, "remember", text="The API rate limit is 100 requests per minute"))["note"]
    first = await call(client, "revoke", note_id=note["id"], reason="misread the docs")
    again = await call(client, "revoke", note_id=note["id"], reason="misread the docs")
    assert first["changed"] and not again["changed"] and again["event"]["id"] == first["event"]["id"]
    assert first["chain"]["status"] == "retracted" and first["chain"]["heads"] == []
    back = await call(client, "reinstate", target_id=note["id"], reason="the docs were right")
    back_again = await call(client, "reinstate", target_id=note["id"], reason="the docs were right")
    assert back["changed"] and not back_again["changed"]
    assert back_again["event"]["id"] == back["event"]["id"]
    assert back["chain"]["heads"][0]["reinstated_by"] == back["event"]["id"]


async def test_reinstate_an_event_retracts_just_that_event(client: Client) -> None:
    old = (await call(client, "remember", text="The default branch is master"))["note"]
    corrected = await call(client, "correct", note_id=old["id"], text="The default branch is main", reason="renamed")
    back = await call(client, "reinstate", target_id=corrected["event"]["id"], reason="the rename was rolled back")
    assert back["chain"]["status"] == "contested"
    events = (await call(client, "history", note_id=old["id"]))["events"]
    supersedes = next(e for e in events if e["kind"] == "supersedes")
    assert supersedes["in_force"] is False and supersedes["retracted_by"] == back["event"]["id"]
    error = await call_error(client, "reinstate", target_id=back["event"]["id"], reason="x")
    assert "only revokes and supersedes events" in error


async def test_link_refines_and_depends_on(client: Client) -> None:
    a = (await call(client, "remember", text="Backups run nightly"))["note"]
    b = (await call(client, "remember", text="Nightly backups start at 02:00 UTC and keep 30 days"))["note"]
    linked = await call(client, "link", src_id=b["id"], dst_id=a["id"], kind="refines", reason="adds the schedule")
    assert linked["changed"] and linked["chain"]["status"] == "current" and len(linked["chain"]["heads"]) == 2
    again = await call(client, "link", src_id=b["id"], dst_id=a["id"], kind="refines")
    assert not again["changed"] and again["event"]["id"] == linked["event"]["id"]
    assert "not" in await call_error(client, "link", src_id=a["id"], dst_id=a["id"], kind="depends_on")
    error = await call_error(client, "link", src_id=a["id"], dst_id=b["id"], kind="revokes")
    assert "kind" in error


async def test_recall_text_shows_prerequisites_of_prerequisites(client: Client) -> None:
    root = (await call(client, "remember", text="The staging database was restored from the March snapshot"))["note"]
    mid = await call(client, "remember", text="So staging user accounts date from March", depends_on=[root["id"]])
    top = await call(
        client, "remember", text="Staging login tests must use the March test accounts", depends_on=[mid["note"]["id"]]
    )
    result = await client.call_tool("recall_chains", {"query": "which accounts do staging login tests use?"})
    text = result.content[0].text  # type: ignore[union-attr]
    lines = text.splitlines()
    now = next(i for i, line in enumerate(lines) if "NOW " + top["note"]["id"] in line)
    assert lines[now + 1].startswith("    NEEDS " + mid["note"]["id"])
    assert lines[now + 2].startswith(f"    NEEDS (2 hops) {root['id']}")
    chain = next(c for c in (await call(client, "recall_chains", query="staging login accounts"))["chains"])
    assert [p["needed_by"] for p in chain["prerequisites"]] == [top["note"]["id"], mid["note"]["id"]]


async def test_the_tokens_a_chain_is_charged_cover_its_text(client: Client) -> None:
    old = await call(client, "remember", text="The API gateway listens on port 8080 behind the internal balancer.")
    base = await call(client, "remember", text="Gateway settings live in the infra repository under gateway/.")
    fixed = await call(
        client, "correct", note_id=old["note"]["id"], text="The API gateway listens on port 9090 now.",
        reason="moved during the April migration",
    )  # fmt: skip
    await call(
        client, "correct", note_id=fixed["note"]["id"], text="The API gateway listens on 9443.", reason="TLS",
        depends_on=[base["note"]["id"]],
    )  # fmt: skip
    result = await call(client, "recall_chains", query="which port does the API gateway listen on?")
    recalled = RecallResult.model_validate(result)
    chain = recalled.chains[0]
    assert len(chain.history) == 2 and len(chain.prerequisites) == 1
    assert estimate_tokens("\n".join(render.chain(chain, 1))) <= chain.tokens


async def test_history_lists_every_event_with_who_when_why(client: Client) -> None:
    old = (await call(client, "remember", text="Logs are kept for 7 days"))["note"]
    new = (await call(client, "correct", note_id=old["id"], text="Logs are kept for 14 days", reason="compliance"))[
        "note"
    ]
    await call(client, "revoke", note_id=new["id"], reason="compliance change was cancelled")
    h = await call(client, "history", note_id=old["id"])
    assert h["note"]["state"] == "active"
    assert all(e["actor"] for e in h["events"])  # the client's name, from the handshake
    assert [(e["kind"], e["reason"]) for e in h["events"]] == [
        ("supersedes", "compliance"),
        ("revokes", "compliance change was cancelled"),
    ]


async def test_history_of_a_note_shows_the_edges_other_notes_point_at_it_with_those_notes(client: Client) -> None:
    """A dependant's depends_on and a distinct note's edge are in the history of the note they name, not
    only in their own, and the notes they come from are listed beside the chain."""
    proxy = (await call(client, "remember", text="The proxy forwards port 443 to the gateway"))["note"]
    gateway = (await call(client, "remember", text="The gateway listens on 9090"))["note"]
    other = (await call(client, "remember", text="The admin console listens on 9091"))["note"]
    await call(client, "link", src_id=gateway["id"], dst_id=proxy["id"], kind="depends_on", reason="behind it")
    await call(client, "link", src_id=other["id"], dst_id=gateway["id"], kind="distinct", reason="another service")
    h = await call(client, "history", note_id=gateway["id"])
    assert {(e["kind"], e["src"], e["dst"]) for e in h["events"]} == {
        ("depends_on", gateway["id"], proxy["id"]),
        ("distinct", other["id"], gateway["id"]),
    }
    assert [n["id"] for n in h["related"]] == [other["id"]]  # the proxy arrives as the chain's prerequisite
    h = await call(client, "history", note_id=proxy["id"])
    assert [(e["kind"], e["src"]) for e in h["events"]] == [("depends_on", gateway["id"])]
    assert [n["text"] for n in h["related"]] == ["The gateway listens on 9090"]
    text = (await client.call_tool("history", {"note_id": proxy["id"]})).content[0].text  # type: ignore[union-attr]
    assert "Other notes these events name:" in text and "The gateway listens on 9090" in text


async def test_forget_deletes_the_note_and_its_events_and_says_what_changed(client: Client) -> None:
    old = (await call(client, "remember", text="The on-call phone is +1 555 0100"))["note"]
    new = (
        await call(client, "correct", note_id=old["id"], text="The on-call phone is +1 555 0199", reason="new rota")
    )["note"]
    gone = await call(client, "forget", note_id=new["id"], reason="user asked to erase the number")
    assert gone["note_id"] == new["id"] and len(gone["events_removed"]) == 1
    assert [(n["id"], n["state"]) for n in gone["notes_changed"]] == [(old["id"], "active")]
    assert new["id"] in await call_error(client, "history", note_id=new["id"])
    recalled = await call(client, "recall_chains", query="on-call phone number")
    assert "0199" not in str(recalled)


async def test_budget_trims_history_oldest_first_and_omits_what_cannot_fit(client: Client) -> None:
    note = (await call(client, "remember", text="The build uses Python 3.9"))["note"]
    for version in ("3.10", "3.11", "3.12"):
        note = (await call(client, "correct", note_id=note["id"], text=f"The build uses Python {version}", reason=f"upgrade to {version}"))["note"]  # fmt: skip
    full = await call(client, "recall_chains", query="which Python version does the build use?")
    chain = full["chains"][0]
    assert [h["note"]["text"][-4:] for h in chain["history"]] == ["3.11", "3.10", " 3.9"]
    tight = await call(client, "recall_chains", query="which Python version does the build use?", budget_tokens=80)
    chain = tight["chains"][0]
    assert chain["heads"][0]["text"].endswith("3.12")
    assert chain["trimmed_history"] >= 1 and len(chain["history"]) == 3 - chain["trimmed_history"]
    assert [h["note"]["text"][-4:] for h in chain["history"]] == ["3.11", "3.10", " 3.9"][: len(chain["history"])]
    assert tight["used_tokens"] <= 80
    nothing = await call(client, "recall_chains", query="which Python version does the build use?", budget_tokens=50,
                         include_history=False, max_chains=1)  # fmt: skip
    assert nothing["used_tokens"] <= 50


async def test_a_chain_that_cannot_fit_is_omitted_and_listed(client: Client) -> None:
    await call(client, "remember", text="The deployment checklist: " + "verify migrations, " * 40 + "then deploy")
    result = await call(client, "recall_chains", query="deployment checklist", budget_tokens=60)
    assert result["chains"] == [] and result["omitted"][0]["reason"] == "budget"
    assert result["omitted"][0]["tokens"] > 60


async def test_scopes_are_separate(client: Client) -> None:
    mine = (await call(client, "remember", text="The staging URL is staging.example.internal", scope="team-a"))["note"]
    await call(client, "remember", text="The staging URL is stg.other.internal", scope="team-b")
    recalled = await call(client, "recall_chains", query="staging URL", scope="team-a")
    assert [c["heads"][0]["id"] for c in recalled["chains"]] == [mine["id"]]
    why = await call(client, "why_excluded", note_id=mine["id"], query="staging URL", scope="team-b")
    assert why["verdict"] == "excluded" and why["reasons"][0]["stage"] == "scope"


async def test_why_excluded_names_the_budget(client: Client) -> None:
    long_note = (await call(client, "remember", text="Release notes are drafted " + "carefully " * 60))["note"]
    why = await call(client, "why_excluded", note_id=long_note["id"], query="release notes drafting", budget_tokens=50)
    assert why["verdict"] == "excluded" and why["reasons"][-1]["stage"] == "budget"


async def test_bad_arguments_name_the_field_and_change_nothing(client: Client) -> None:
    note = (await call(client, "remember", text="The service owner is the platform team"))["note"]
    before = await snapshot(client, [note["id"]])
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("remember", {"text": ""}, "text"),
        ("remember", {"text": "x", "confidence": 2}, "confidence"),
        ("remember", {"text": "x", "scope": "bad\nscope"}, "scope"),
        ("remember", {"text": "x", "scope": "   "}, "scope"),
        ("remember", {"text": "x", "scope": "x" * 129}, "scope"),
        ("remember", {"text": "x", "supersedes": ["n_00000000000000000000000000"]}, "supersedes"),
        (
            "remember",
            {"text": "x", "valid_from": "2026-02-01T00:00:00Z", "valid_until": "2026-01-01T00:00:00Z"},
            "valid_until",
        ),
        ("correct", {"note_id": note["id"], "text": "y", "reason": ""}, "reason"),
        ("correct", {"note_id": "not-an-id", "text": "y", "reason": "z"}, "note_id"),
        ("revoke", {"note_id": "n_00000000000000000000000000", "reason": "z"}, "n_00000000000000000000000000"),
        ("reinstate", {"target_id": "e_00000000000000000000000000", "reason": "z"}, "e_00000000000000000000000000"),
        ("reinstate", {"target_id": "x' OR 1=1 --", "reason": "z"}, "target_id"),
        ("recall_chains", {"query": "x", "budget_tokens": 10}, "budget_tokens"),
        ("recall_chains", {"query": "x", "as_of": "yesterday"}, "as_of"),
        ("why_excluded", {"note_id": "n_00000000000000000000000000"}, "n_00000000000000000000000000"),
        ("link", {"src_id": note["id"], "dst_id": "n_00000000000000000000000000", "kind": "depends_on"}, "dst_id"),
        ("forget", {"note_id": note["id"], "reason": ""}, "reason"),
    ]
    for tool, arguments, named in cases:
        error = await call_error(client, tool, **arguments)
        assert named in error, (tool, arguments, error)
    assert await snapshot(client, [note["id"]]) == before
    recalled = await call(client, "recall_chains", query="who owns the service?")
    assert [c["heads"][0]["id"] for c in recalled["chains"]] == [note["id"]]


async def test_link_supersedes_two_stored_notes_and_refuses_a_cycle(client: Client) -> None:
    a = (await call(client, "remember", text="Feature flags live in LaunchDarkly"))["note"]
    b = (await call(client, "correct", note_id=a["id"], text="Feature flags live in Unleash", reason="migrated"))[
        "note"
    ]
    c = (await call(client, "remember", text="Feature flags live in a YAML file in the repo"))["note"]
    linked = await call(client, "link", src_id=c["id"], dst_id=b["id"], kind="supersedes", reason="simplified")
    assert [h["id"] for h in linked["chain"]["heads"]] == [c["id"]]
    assert "reason" in await call_error(client, "link", src_id=c["id"], dst_id=a["id"], kind="supersedes")
    before = await snapshot(client, [a["id"], b["id"], c["id"]])
    error = await call_error(client, "link", src_id=a["id"], dst_id=c["id"], kind="supersedes", reason="loop")
    assert "cycle" in error
    assert await snapshot(client, [a["id"], b["id"], c["id"]]) == before
    duplicate = await call_error(client, "remember", text="Flags again", supersedes=[a["id"], a["id"]])
    assert "supersedes" in duplicate and "more than once" in duplicate


async def test_an_expired_note_is_a_state_not_a_delete(client: Client) -> None:
    note = (
        await call(
            client, "remember", text="The freeze on merges lasts until the release", valid_until="2020-01-01T00:00:00Z"
        )
    )["note"]
    assert note["state"] == "expired"
    chain = (await call(client, "recall_chains", query="merge freeze"))["chains"][0]
    assert chain["status"] == "expired" and chain["heads"] == [] and chain["history"][0]["role"] == "expired"
    why = await call(client, "why_excluded", note_id=note["id"])
    assert why["verdict"] == "history" and why["reasons"][0]["stage"] == "validity"
    replay = await call(client, "recall_chains", query="merge freeze", as_of="2019-12-31T00:00:00Z")
    assert replay["chains"] == []  # it was recorded after that time


async def test_a_correction_keeps_what_the_old_note_needed_unless_told_otherwise(client: Client) -> None:
    base = (await call(client, "remember", text="Dana holds access bundle B7 for the backup system"))["note"]
    rule = await call(client, "remember", text="Bundle B7 may start a restore", depends_on=[base["id"]])
    fixed = await call(
        client, "correct", note_id=rule["note"]["id"], text="Bundle B7 may start a restore with a second approver",
        reason="policy changed in May",
    )  # fmt: skip
    assert [(e["kind"], e["dst"]) for e in (await call(client, "history", note_id=fixed["note"]["id"]))["events"]
            if e["src"] == fixed["note"]["id"]] == [("supersedes", rule["note"]["id"]), ("depends_on", base["id"])]  # fmt: skip
    recalled = await call(client, "recall_chains", query="who may start a restore with bundle B7?")
    chain = next(c for c in recalled["chains"] if c["heads"][0]["id"] == fixed["note"]["id"])
    assert [p["id"] for p in chain["prerequisites"]] == [base["id"]]

    again = await call(
        client, "correct", note_id=fixed["note"]["id"], text="Anyone on call may start a restore", reason="B7 retired",
        depends_on=[],
    )  # fmt: skip
    chain = (await call(client, "history", note_id=again["note"]["id"]))["chain"]
    assert chain["prerequisites"] == []


async def test_remembering_a_current_notes_exact_text_returns_that_note(client: Client) -> None:
    first = await call(client, "remember", text="The on-call phone number is 555-0100", scope="ops")
    again = await call(client, "remember", text="  The on-call phone number is 555-0100 ", scope="ops", kind="note")
    assert first["changed"] and not again["changed"] and again["note"]["id"] == first["note"]["id"]
    text = (
        await client.call_tool("remember", {"text": "The on-call phone number is 555-0100", "scope": "ops"})
    ).content
    assert "Already remembered" in text[0].text  # type: ignore[union-attr]
    assert [s["notes"] for s in (await call(client, "scopes"))["scopes"]] == [1]
    other = await call(client, "remember", text="The on-call phone number is 555-0100", scope="dev")
    assert other["changed"] and other["note"]["id"] != first["note"]["id"]  # another scope, another note
    error = await call_error(
        client, "remember", text="The on-call phone number is 555-0100", scope="ops", depends_on=[first["note"]["id"]]
    )
    assert first["note"]["id"] in error and "link(" in error


async def test_the_text_of_a_replaced_note_can_be_remembered_again(client: Client) -> None:
    old = (await call(client, "remember", text="The build uses Gradle"))["note"]
    await call(client, "correct", note_id=old["id"], text="The build uses Bazel", reason="migrated")
    back = await call(client, "remember", text="The build uses Gradle")  # not current any more: a new note
    assert back["changed"] and back["note"]["id"] != old["id"]


async def test_remember_proposes_a_changed_value_of_the_same_subject_with_the_call_and_links_nothing(
    client: Client,
) -> None:
    old = (await call(client, "remember", text="the service listens on 8080", subject="service.port"))["note"]
    result = await client.call_tool("remember", {"text": "the service listens on 9090", "subject": "service.port"})
    new = result.structured_content
    assert new is not None
    [proposal] = new["likely_updates"]
    assert proposal["note"]["id"] == old["id"]
    assert proposal["reason"] == "same subject 'service.port'; 8080 → 9090"
    assert proposal["call"].startswith(
        f'link(src_id="{new["note"]["id"]}", dst_id="{old["id"]}", kind="supersedes", reason='
    )
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Likely updates" in text and proposal["call"] in text
    assert old["id"] in [s["note"]["id"] for s in new["similar_active"]]  # in the structured answer, both lists
    assert text.count(old["text"]) == 1  # the text shows it once, as the likely update
    assert new["events"] == []
    history = await call(client, "history", note_id=old["id"])
    assert history["events"] == [] and [h["id"] for h in history["chain"]["heads"]] == [old["id"]]


async def test_remember_proposes_an_unsubjected_numeric_update_but_not_a_merely_similar_note(client: Client) -> None:
    old = (
        await call(
            client, "remember", text="I have added 17 new postcards to my collection since I started collecting again."
        )
    )["note"]
    similar = await call(client, "remember", text="I have added 17 new stamps to my album since the spring fair.")
    assert similar["likely_updates"] == []
    assert old["id"] in [s["note"]["id"] for s in similar["similar_active"]]  # similar, and not proposed
    plain = await call(client, "remember", text="I love collecting postcards from my trips with my family.")
    assert plain["likely_updates"] == []
    new = await call(
        client, "remember",
        text="By the way, I have added 25 new postcards to my collection since I started collecting again!",
    )  # fmt: skip
    assert [u["note"]["id"] for u in new["likely_updates"]] == [old["id"]]
    assert "17 → 25" in new["likely_updates"][0]["reason"]
    assert (await call(client, "history", note_id=old["id"]))["events"] == []


async def test_a_distinct_link_settles_a_possibly_outdated_mark_and_keeps_both_current(client: Client) -> None:
    """Two offices' hours that look like one fact's old and new value: recall marks the older POSSIBLY
    OUTDATED until the agent says they are different facts; then neither is marked, both stay current
    in chains of their own, and nothing else changes."""
    zurich = await call(client, "remember", text="The office opens at 8:00 on weekdays.", subject="office.hours")
    geneva = await call(client, "remember", text="The office opens at 9:00 on weekdays.", subject="office.hours")
    old, new = zurich["note"]["id"], geneva["note"]["id"]
    assert [u["note"]["id"] for u in geneva["likely_updates"]] == [old]
    query = "When does the office open?"
    marked = {
        c["heads"][0]["id"]: c["possibly_outdated_by"]
        for c in (await call(client, "recall_chains", query=query))["chains"]
    }
    assert marked == {old: new, new: None}
    linked = await call(client, "link", src_id=new, dst_id=old, kind="distinct", reason="two offices")
    assert linked["changed"] and linked["event"]["kind"] == "distinct"
    recalled = (await call(client, "recall_chains", query=query))["chains"]
    assert {c["heads"][0]["id"]: c["possibly_outdated_by"] for c in recalled} == {old: None, new: None}
    assert all(c["status"] == "current" and len(c["heads"]) == 1 for c in recalled)
    again = await call(client, "link", src_id=new, dst_id=old, kind="distinct", reason="two offices")
    assert not again["changed"]  # idempotent


async def test_instructions_mention_likely_updates_and_possibly_outdated_chains(client: Client) -> None:
    instructions = client.instructions
    assert instructions is not None and "likely_updates" in instructions and "POSSIBLY" in instructions


async def test_recall_chains_takes_a_depth_for_a_history_the_question_shares_little_with(client: Client) -> None:
    for i, topic in enumerate(["gardening tomatoes", "a trip to Lisbon", "the new bicycle", "baking sourdough"]):
        await call(client, "remember", text=f"On day {i} we talked about {topic}", scope="chat")
    assert (await call(client, "recall_chains", query="What colour is my car?", scope="chat"))["chains"] == []
    deeper = await call(client, "recall_chains", query="What colour is my car?", scope="chat", min_entries=2)
    assert len(deeper["chains"]) == 2
    tool = next(t for t in (await client.list_tools()).tools if t.name == "recall_chains")
    schema = tool.input_schema["properties"]["min_entries"]
    assert schema["minimum"] == 0 and schema["maximum"] > 20 and "min_entries" in (tool.description or "")
    assert "min_entries" in await call_error(client, "recall_chains", query="car", min_entries=-1)
