"""The person confirms a likely update, where the client can ask (CORRIGENDA_ASK_ON_UPDATE).

Two protocol paths, each test saying which it covers:
- "legacy": the initialize handshake (a pre-2026-07-28 version): the server sends a standalone
  `elicitation/create` request in the middle of the `tools/call`;
- "2026-07-28": the call answers with an InputRequiredResult carrying the question, and the client
  calls again with the answer (the SDK's Client does the second round itself).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from corrigenda.server import render
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.server.connections import Admission
from corrigenda.server.grants import digest
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestParams, ElicitResult, InputRequiredResult

from ..conftest import call
from .test_http_security import authorized, serving
from .test_processes import _free_port

pytestmark = pytest.mark.anyio

PATHS = ["legacy", "2026-07-28"]  # mid-call elicitation/create; InputRequiredResult and a retry
OLD = "The service listens on port 8080."
NEW = "The service listens on port 9090."
SCOPE = "ops"


class Person:
    """A client's elicitation callback: records each question and gives one answer."""

    def __init__(self, reply: ElicitResult, db: str, embedder: SentenceTransformerEmbedder) -> None:
        self.reply = reply
        self.asked: list[dict[str, Any]] = []
        self.stored_when_asked: list[int] = []
        self.reader = Memory(db, embedder)

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        self.stored_when_asked.append(self.reader.list_notes(scope=SCOPE).total)
        return self.reply


def accept(answer: str) -> ElicitResult:
    return ElicitResult(action="accept", content={"answer": answer})


@asynccontextmanager
async def connect(
    db: str,
    embedder: SentenceTransformerEmbedder,
    mode: str,
    elicitation: Callable[..., Any] | None,
    ask_on_update: bool = True,
) -> AsyncIterator[Client]:
    # Off, the setting is left at its default.
    settings = Settings(db=db, person="Ada", ask_on_update=True) if ask_on_update else Settings(db=db, person="Ada")
    server = build_server(settings, lambda s: Memory(s.db, embedder))
    async with Client(server, raise_exceptions=True, mode=mode, elicitation_callback=elicitation) as client:  # type: ignore[arg-type]
        yield client


async def old_then_new(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    old = await call(client, "remember", text=OLD, subject="service.port", scope=SCOPE)
    new = await call(client, "remember", text=NEW, subject="service.port", scope=SCOPE)
    return old["note"], new


def asked_about_both(person: Person, old_id: str) -> str:
    """The one question the person saw, checked to name both notes and to ask for one of the three answers."""
    [request] = person.asked
    message = request["message"]
    assert OLD in message and NEW in message and old_id in message and "8080 → 9090" in message
    assert request["requestedSchema"]["properties"]["answer"]["enum"] == ["replaces", "refines", "keep both"]
    assert person.stored_when_asked == [1]  # only the old note: nothing is stored before the answer
    return str(message)


@pytest.mark.parametrize("mode", PATHS)
async def test_replaces_records_a_supersedes_edge_by_the_person_with_the_question_as_reason(
    db: str, embedder: SentenceTransformerEmbedder, mode: str
) -> None:
    person = Person(accept("replaces"), db, embedder)
    async with connect(db, embedder, mode, person) as client:
        old, new = await old_then_new(client)
        question = asked_about_both(person, old["id"])
        confirmed = new["confirmed"]
        assert confirmed["answer"] == "replaces" and confirmed["note_id"] == old["id"]
        event = confirmed["event"]
        assert (event["kind"], event["src"], event["dst"]) == ("supersedes", new["note"]["id"], old["id"])
        assert event["actor"] == "person:Ada" and event["reason"] == question
        assert new["likely_updates"] == []  # answered
        history = await call(client, "history", note_id=old["id"])
        assert [h["id"] for h in history["chain"]["heads"]] == [new["note"]["id"]]
        [stored] = history["events"]
        assert (stored["kind"], stored["actor"], stored["reason"]) == ("supersedes", "person:Ada", question)
        result = await client.call_tool("remember", {"text": "The service has 3 replicas.", "scope": SCOPE})
        assert not result.is_error and len(person.asked) == 1  # no likely update: nothing asked


@pytest.mark.parametrize("mode", PATHS)
async def test_refines_records_a_refines_edge_and_both_stay_current(
    db: str, embedder: SentenceTransformerEmbedder, mode: str
) -> None:
    person = Person(accept("refines"), db, embedder)
    async with connect(db, embedder, mode, person) as client:
        old, new = await old_then_new(client)
        question = asked_about_both(person, old["id"])
        event = new["confirmed"]["event"]
        assert (event["kind"], event["src"], event["dst"]) == ("refines", new["note"]["id"], old["id"])
        assert event["actor"] == "person:Ada" and event["reason"] == question
        listed = await call(client, "list_notes", scope=SCOPE, state="current")
        assert {n["id"] for n in listed["notes"]} == {old["id"], new["note"]["id"]}
        assert (await call(client, "history", note_id=new["note"]["id"]))["note"]["refines"] == [old["id"]]


@pytest.mark.parametrize("mode", PATHS)
async def test_keep_both_records_a_distinct_edge_and_recall_marks_neither(
    db: str, embedder: SentenceTransformerEmbedder, mode: str
) -> None:
    person = Person(accept("keep both"), db, embedder)
    async with connect(db, embedder, mode, person) as client:
        old, new = await old_then_new(client)
        question = asked_about_both(person, old["id"])
        event = new["confirmed"]["event"]
        assert new["confirmed"]["answer"] == "keep both" and new["likely_updates"] == []
        assert (event["kind"], event["src"], event["dst"]) == ("distinct", new["note"]["id"], old["id"])
        assert event["actor"] == "person:Ada" and event["reason"] == question
        listed = await call(client, "list_notes", scope=SCOPE, state="current")
        assert {n["id"] for n in listed["notes"]} == {old["id"], new["note"]["id"]}
        history = await call(client, "history", note_id=new["note"]["id"])
        assert [h["id"] for h in history["chain"]["heads"]] == [new["note"]["id"]]  # its own chain: not joined
        assert [e["kind"] for e in history["events"]] == ["distinct"]
        recalled = await call(client, "recall_chains", query="Which port does the service listen on?", scope=SCOPE)
        heads = {c["heads"][0]["id"]: c for c in recalled["chains"]}
        assert set(heads) == {old["id"], new["note"]["id"]}  # both delivered, as two chains
        assert all(c["possibly_outdated_by"] is None for c in recalled["chains"])


@pytest.mark.parametrize("mode", PATHS)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_or_cancelled_question_records_no_edge_and_returns_the_proposals(
    db: str, embedder: SentenceTransformerEmbedder, mode: str, action: str
) -> None:
    person = Person(ElicitResult(action=action), db, embedder)  # type: ignore[arg-type]
    async with connect(db, embedder, mode, person) as client:
        old, new = await old_then_new(client)
        asked_about_both(person, old["id"])
        assert new["confirmed"]["answer"] == {"decline": "declined", "cancel": "cancelled"}[action]
        assert new["confirmed"]["event"] is None
        [proposal] = new["likely_updates"]
        assert proposal["note"]["id"] == old["id"] and proposal["call"].startswith(
            f'link(src_id="{new["note"]["id"]}", dst_id="{old["id"]}", kind="supersedes"'
        )
        assert (await call(client, "history", note_id=old["id"]))["events"] == []


@pytest.mark.parametrize("mode", PATHS)
async def test_a_client_that_cannot_elicit_is_not_asked_and_gets_the_proposals(
    db: str, embedder: SentenceTransformerEmbedder, mode: str
) -> None:
    async with connect(db, embedder, mode, None) as client:  # no callback: no elicitation capability declared
        old, new = await old_then_new(client)
        assert new["confirmed"] is None
        assert [u["note"]["id"] for u in new["likely_updates"]] == [old["id"]]
        assert (await call(client, "history", note_id=old["id"]))["events"] == []
        again = await client.call_tool("remember", {"text": NEW.replace("9090", "9091"), "subject": "service.port",
                                                    "scope": SCOPE})  # fmt: skip
        assert render.NOT_ASKED in again.content[0].text  # type: ignore[union-attr]  # where the person can answer


@pytest.mark.parametrize("mode", PATHS)
async def test_off_by_default_nothing_is_asked_even_of_a_client_that_can(
    db: str, embedder: SentenceTransformerEmbedder, mode: str
) -> None:
    assert Settings(db=db).ask_on_update is False
    person = Person(accept("replaces"), db, embedder)
    async with connect(db, embedder, mode, person, ask_on_update=False) as client:
        old, new = await old_then_new(client)
        assert person.asked == [] and new["confirmed"] is None
        assert [u["note"]["id"] for u in new["likely_updates"]] == [old["id"]]


async def test_2026_07_28_the_call_returns_the_question_and_stores_nothing_until_the_retry(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """The input-required path, driven by hand: the first round is an InputRequiredResult carrying the
    elicitation request, with no note stored; the retry with the answer stores the note and the edge."""
    person = Person(accept("replaces"), db, embedder)
    async with connect(db, embedder, "2026-07-28", person) as client:
        old = (await call(client, "remember", text=OLD, subject="service.port", scope=SCOPE))["note"]
        arguments = {"text": NEW, "subject": "service.port", "scope": SCOPE}
        first = await client.session.call_tool("remember", arguments, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        assert first.input_requests is not None
        [(key, request)] = first.input_requests.items()
        assert request.method == "elicitation/create" and old["id"] in request.params.message  # type: ignore[union-attr]
        assert person.reader.list_notes(scope=SCOPE).total == 1  # the question is asked before any write
        again = await client.session.call_tool(
            "remember", arguments, input_responses={key: accept("replaces")}, request_state=first.request_state,
            allow_input_required=True,
        )  # fmt: skip
        assert not isinstance(again, InputRequiredResult) and again.structured_content is not None
        event = again.structured_content["confirmed"]["event"]
        assert (event["kind"], event["dst"], event["actor"]) == ("supersedes", old["id"], "person:Ada")
        assert person.reader.list_notes(scope=SCOPE).total == 2
        text = again.content[0].text  # type: ignore[union-attr]
        assert "answer: replaces" in text and f"supersedes {event['src']} -> {old['id']} by person:Ada" in text


ADA = "ada-token-for-tests-0123456789abcdef"


@pytest.mark.parametrize("mode", ["2026-07-28"])  # over HTTP a 2025-11-25 client is not asked (http.STATELESS)
async def test_over_http_a_credentials_answer_is_recorded_as_the_credential_not_the_servers_person(
    db: str, memory: Memory, embedder: SentenceTransformerEmbedder, tmp_path: Path, mode: str
) -> None:
    """The caller is the actor of what its call records, its person's answer included: the server's
    CORRIGENDA_PERSON is whoever runs the server, not whoever holds a credential to it."""
    grants = tmp_path / "grants.toml"
    grants.write_text(f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{digest(ADA)}"\nwrite = ["{SCOPE}"]\n')
    settings = Settings(db=db, transport="http", grants=str(grants), person="Owner", ask_on_update=True,
                        port=_free_port())  # fmt: skip
    person = Person(accept("replaces"), db, embedder)
    with serving(settings, memory) as url:
        async with authorized(url, ADA, mode=mode, elicitation=person) as client:
            old, new = await old_then_new(client)
            asked_about_both(person, old["id"])
    event = new["confirmed"]["event"]
    assert (event["kind"], event["dst"], event["actor"]) == ("supersedes", old["id"], "ada via mcp")
    [stored] = memory.history(old["id"]).events
    assert stored.actor == "ada via mcp" == new["note"]["actor"]


async def test_a_person_may_take_longer_to_answer_than_a_request_may_take_to_arrive(
    db: str, memory: Memory, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    """The deadline of a connection (connections.py) is for its request to arrive whole: the person's
    answer, here given between the call's two rounds (2026-07-28), takes as long as it needs."""
    admission = Admission(max_connections=8, request_timeout_s=0.5)
    settings = Settings(db=db, transport="http", token=ADA, ask_on_update=True, port=_free_port())
    person = Person(accept("replaces"), db, embedder)

    async def slowly(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        await anyio.sleep(4 * admission.request_timeout_s)
        return await person(context, params)

    with serving(settings, memory, admission=admission) as url:
        async with authorized(url, ADA, mode="2026-07-28", elicitation=slowly) as client:
            old, new = await old_then_new(client)
    assert new["confirmed"]["event"]["dst"] == old["id"]


def test_the_store_previews_a_drafts_likely_updates_without_storing_it(memory: Memory) -> None:
    """What the question is computed from: `Memory.likely_updates` proposes what `remember` then proposes,
    and writes nothing (the SDK may run the question's resolver on every round of a call)."""
    old = memory.remember(Draft(text=OLD, subject="service.port"), scope=SCOPE).note
    draft = Draft(text=NEW, subject="service.port")
    [preview] = memory.likely_updates(draft, scope=SCOPE)
    assert memory.list_notes(scope=SCOPE).total == 1
    assert preview.note.id == old.id and preview.call.startswith('link(src_id="<new note id>"')
    assert memory.likely_updates(draft, scope=SCOPE, supersedes=[old.id]) == []
    assert memory.likely_updates(Draft(text=OLD, subject="service.port"), scope=SCOPE) == []  # stored as is
    [stored] = memory.remember(draft, scope=SCOPE).likely_updates
    assert (stored.note.id, stored.reason) == (preview.note.id, preview.reason)
