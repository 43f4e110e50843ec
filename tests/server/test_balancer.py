"""Any server answers any request: three `corrigenda serve --transport http` processes on one store in a
bucket, behind HAProxy (Debian's) round-robin with no stickiness, everything on loopback. The servers
trust an OAuth authorization server (tests/oauth_as) and share a grants file, a session secret and
CORRIGENDA_ASK_ON_UPDATE. bench/balancer.py starts them and runs the same mix; which server answered
each call is what HAProxy wrote in its response (X-Served-By), checked against each server's own log
line per call. A few tests run in this process, on a directory store: they need no balancer."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
from corrigenda.server.config import Settings
from corrigenda.store import Memory, SentenceTransformerEmbedder
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, InputRequiredResult

from bench.balancer import CYCLE, VERSIONS, Fleet, fleet, run, seaweed_store, through, warm
from bench.haproxy import SERVED_BY

from ..conftest import call
from .test_grants import OAUTH_GRANTS, OPS_BOT
from .test_http_security import serving
from .test_oauth import AuthorizationServer, authorization_server, token_of  # noqa: F401 - a fixture
from .test_processes import _free_port

SECRET = "the-fleet-s-session-secret-0123456789abcdef"
CALLS = 300
SERVERS = {"s1", "s2", "s3"}
OLD = "The gateway listens on port 8080."
NEW = "The gateway listens on port 9090."
JSON_RPC = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def on_the_fleet(test: Any) -> Any:
    """Marks a test of the three servers behind the balancer: processes on a bucket (slow), all on one
    pytest-xdist worker (they share the fleet)."""
    for mark in (pytest.mark.processes, pytest.mark.bucket, pytest.mark.xdist_group("test_balancer.py")):
        test = mark(test)
    return test


def team_store() -> AbstractContextManager[tuple[str, dict[str, str]]]:
    """The store the three servers share, and the variables that reach it: a bucket on a SeaweedFS
    cluster on loopback (bench/seaweed.py). The one place to change to run the fleet on another store."""
    return seaweed_store("corrigenda-team")


@dataclass
class Team:
    fleet: Fleet
    issuer: AuthorizationServer

    @property
    def url(self) -> str:
        return self.fleet.url

    def token(self, client: str) -> str:
        """An access token of the authorization server's `client`, for the balancer's URL (the resource)."""
        return token_of(self.issuer.issuer, client, self.url)


@pytest.fixture(scope="module")
def team(authorization_server: AuthorizationServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:  # noqa: F811
    folder = tmp_path_factory.mktemp("balancer")
    grants = folder / "grants.toml"
    grants.write_text(OAUTH_GRANTS)
    port = _free_port()
    with team_store() as (db, reach):
        settings = {
            **reach, "CORRIGENDA_GRANTS": str(grants), "CORRIGENDA_OAUTH_ISSUER": authorization_server.issuer,
            "CORRIGENDA_RESOURCE": f"http://127.0.0.1:{port}/mcp", "CORRIGENDA_SESSION_SECRET": SECRET,
            "CORRIGENDA_ASK_ON_UPDATE": "1",
        }  # fmt: skip
        with fleet(db, settings, folder, port) as running:
            anyio.run(warm, running.url, OPS_BOT, "team-ops")
            yield Team(running, authorization_server)


def post(http: httpx2.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx2.Response:
    return http.post(url, content=json.dumps(body), headers={**JSON_RPC, **headers})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def initialize(version: str) -> dict[str, Any]:
    client = {"name": "probe", "version": "0"}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": client}}  # fmt: skip


def tools_list(version: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A tools/list of 2026-07-28's shape at `version`: the body, with the version in its _meta, and
    the headers that route it."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "0"},
    }  # fmt: skip
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}
    return body, {"MCP-Protocol-Version": version, "Mcp-Method": "tools/list"}


def result_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, in JSON or as the one event of an SSE stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        [data] = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
        return json.loads(data)  # type: ignore[no-any-return]
    return response.json()  # type: ignore[no-any-return]


def text_of(result: Any) -> str:
    return str(result.content[0].text)


# -- through the balancer --------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@on_the_fleet
@pytest.mark.anyio
async def test_three_hundred_calls_through_round_robin_with_no_error_and_no_session(team: Team, version: str) -> None:
    """bob's OAuth token (group ops: credential 'ops') on every call. Per fact: remember on one server,
    correct on the next, recall_chains and history on the third, each answer checked against the writes
    made on the other two (bench/balancer.py, `wrong`)."""
    done = await run(team.fleet, version, CALLS, team.token("bob"), scope=f"team-mix-{version}")
    summary = done.summary()
    assert summary["errors"] == 0, summary["error_samples"]
    assert done.wire.session_ids == []  # none given, none needed
    answered = Counter(a.server for a in done.answers)
    assert answered == {"s1": 100, "s2": 100, "s3": 100}, answered
    by_header = {name: Counter(a.tool for a in done.answers if a.server == name) for name in SERVERS}
    assert done.logged == by_header  # each server's own log says it answered exactly those calls
    facts = [done.answers[i : i + len(CYCLE)] for i in range(0, CALLS, len(CYCLE))]
    for fact in facts[:-1]:  # the last one ends before its `scopes`
        role = {a.tool: a.server for a in fact}
        assert len({role["remember"], role["correct"], role["recall_chains"]}) == 3, role
        assert role["history"] == role["recall_chains"], role
    assert {fact[0].server for fact in facts} == SERVERS  # each server had each role in turn


@on_the_fleet
def test_every_server_refuses_a_request_without_a_credential_it_knows(team: Team) -> None:
    metadata = team.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    with httpx2.Client(trust_env=False, timeout=60) as http:
        for headers in ({}, bearer(team.token("eve")), bearer("not-a-token-of-anyone-0123456789")):
            refused = [post(http, team.url, initialize("2025-11-25"), headers) for _ in SERVERS]
            assert [r.status_code for r in refused] == [401, 401, 401]
            assert {r.headers[SERVED_BY] for r in refused} == SERVERS
            assert all(f'resource_metadata="{metadata}"' in r.headers["www-authenticate"] for r in refused)
        published = [http.get(metadata) for _ in SERVERS]
    assert {r.headers[SERVED_BY] for r in published} == SERVERS
    assert {r.json()["resource"] for r in published} == {team.url}  # the public URL, on every server


@pytest.mark.parametrize("version", VERSIONS)
@on_the_fleet
@pytest.mark.anyio
async def test_every_server_applies_the_grants_to_oauth_and_static_tokens(team: Team, version: str) -> None:
    """ops-bot (a static token of the grants file) writes team-ops; ada (OAuth subject) reads team-* and
    may not write team-ops: each three times in a row, so that each server decides once."""
    async with through(team.url, version, OPS_BOT) as (client, wire):
        start = len(wire.served)
        written = [await call(client, "remember", text=f"Deploys freeze on day {i} ({version})", scope="team-ops")
                   for i in range(3)]  # fmt: skip
        assert set(wire.calls_since(start)) == SERVERS
    # A 2025-11-25 client's name is not known past its initialize, which another server may have answered.
    actor = "ops-bot via mcp" if version == "2026-07-28" else "ops-bot via unnamed client"
    assert {w["note"]["actor"] for w in written} == {actor}
    async with through(team.url, version, team.token("ada")) as (client, wire):
        start = len(wire.served)
        refused = [
            await client.call_tool("remember", {"text": f"ada was here {i}", "scope": "team-ops"}) for i in range(3)
        ]
        read = [await client.call_tool("list_notes", {"scope": "team-ops"}) for _ in range(3)]
        assert set(wire.calls_since(start)[:3]) == set(wire.calls_since(start)[3:]) == SERVERS
    assert all(r.is_error and "scope 'team-ops': credential 'ada' may not write it" in text_of(r) for r in refused)
    assert [text_of(r) for r in read if r.is_error] == []
    assert all(
        {n["id"] for n in (r.structured_content or {})["notes"]} >= {w["note"]["id"] for w in written} for r in read
    )


@on_the_fleet
def test_a_protocol_version_no_server_speaks_gets_the_specs_error_from_every_server(team: Team) -> None:
    with httpx2.Client(trust_env=False, timeout=60) as http:
        for version in ("2099-01-01", "not-a-version"):
            body, headers = tools_list(version)
            answers = [post(http, team.url, body, {**headers, **bearer(OPS_BOT)}) for _ in SERVERS]
            assert {r.headers[SERVED_BY] for r in answers} == SERVERS
            for answer in answers:
                assert answer.status_code == 400, answer.text
                error = answer.json()["error"]
                assert error["code"] == -32022 and error["message"] == "Unsupported protocol version"
                assert error["data"] == {"supported": ["2026-07-28"], "requested": version}
        # the handshake's own negotiation: an initialize of a version it does not speak is answered with
        # one it does, which the client may take or leave (2025-11-25, lifecycle)
        offered = [post(http, team.url, initialize("1999-01-01"), bearer(OPS_BOT)) for _ in SERVERS]
    assert [r.status_code for r in offered] == [200, 200, 200]
    assert {result_of(r)["result"]["protocolVersion"] for r in offered} == {"2025-11-25"}
    assert not any("mcp-session-id" in r.headers for r in offered)


@on_the_fleet
def test_any_server_answers_a_2025_11_25_request_without_the_session_it_was_never_given(team: Team) -> None:
    """The wire itself: an initialize answered by one server with no Mcp-Session-Id, then requests that
    carry none (or one no server made) answered by the others; a GET for a stream of the server's own
    messages is 405 on every server (nothing could ever be sent on it)."""
    auth = bearer(OPS_BOT)
    with httpx2.Client(trust_env=False, timeout=60) as http:
        opened = post(http, team.url, initialize("2025-11-25"), auth)
        assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
        listed = [
            post(http, team.url, {"jsonrpc": "2.0", "id": i, "method": "tools/list"},
                 {**auth, "MCP-Protocol-Version": "2025-11-25", **({"Mcp-Session-Id": "made-up"} if i % 2 else {})})
            for i in range(1, 4)
        ]  # fmt: skip
        streams = [
            http.get(team.url, headers={**JSON_RPC, **auth, "MCP-Protocol-Version": "2025-11-25"}) for _ in SERVERS
        ]
    assert [r.status_code for r in listed] == [200, 200, 200]
    assert {r.headers[SERVED_BY] for r in listed} == SERVERS
    assert all("remember" in {t["name"] for t in result_of(r)["result"]["tools"]} for r in listed)
    assert not any("mcp-session-id" in r.headers for r in listed)
    assert [(r.status_code, r.headers["allow"]) for r in streams] == [(405, "POST")] * 3
    assert {r.headers[SERVED_BY] for r in streams} == SERVERS


class Person:
    """A client's elicitation callback: notes each question and answers `replaces`."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "replaces"})


@on_the_fleet
@pytest.mark.anyio
async def test_a_2026_07_28_question_asked_by_one_server_is_answered_on_the_next(team: Team) -> None:
    person = Person()
    async with through(team.url, "2026-07-28", team.token("bob"), person) as (client, wire):
        old = (await call(client, "remember", text=OLD, subject="gateway.port", scope="team-questions"))["note"]
        start = len(wire.served)
        new = await call(client, "remember", text=NEW, subject="gateway.port", scope="team-questions")
        asked_on, answered_on = wire.calls_since(start)  # the question, then the call again with the answer
        history = await call(client, "history", note_id=old["id"])  # on a third server
    assert asked_on != answered_on
    assert len(person.asked) == 1 and OLD in person.asked[0] and NEW in person.asked[0]
    event = new["confirmed"]["event"]
    assert (event["kind"], event["src"], event["dst"]) == ("supersedes", new["note"]["id"], old["id"])
    assert event["actor"] == "ops via mcp"  # bob's token is credential 'ops'
    assert [h["id"] for h in history["chain"]["heads"]] == [new["note"]["id"]]


@on_the_fleet
@pytest.mark.anyio
async def test_a_2025_11_25_client_is_not_asked_mid_call_and_gets_the_proposals(team: Team) -> None:
    """A question in the middle of a call would want the client's reply on the server that asked, which
    the balancer may send elsewhere: over HTTP such a client is not asked, even though it can answer,
    and `remember` proposes the link as it does to a client that cannot ask."""
    person = Person()
    async with through(team.url, "2025-11-25", team.token("bob"), person) as (client, _):
        old = (await call(client, "remember", text=OLD, subject="gateway.port", scope="team-unasked"))["note"]
        new = await call(client, "remember", text=NEW, subject="gateway.port", scope="team-unasked")
        history = await call(client, "history", note_id=old["id"])
    assert person.asked == [] and new["confirmed"] is None
    assert [u["note"]["id"] for u in new["likely_updates"]] == [old["id"]]
    assert history["events"] == []  # nothing linked on a guess


# -- in this process, on a directory store ---------------------------------------------------------


async def answer_on(
    client: Client, arguments: dict[str, Any], key: str, asked: InputRequiredResult
) -> CallToolResult | InputRequiredResult:
    """`remember` called again on `client` with the person's `replaces` to the question `asked`."""
    return await client.session.call_tool(
        "remember", arguments, input_responses={key: ElicitResult(action="accept", content={"answer": "replaces"})},
        request_state=asked.request_state, allow_input_required=True,
    )  # fmt: skip


@pytest.mark.parametrize("same_secret", [True, False])
@pytest.mark.anyio
async def test_an_answer_is_taken_by_another_server_only_if_both_have_the_same_session_secret(
    db: str, memory: Memory, embedder: SentenceTransformerEmbedder, same_secret: bool
) -> None:
    """The round trip by hand: the question from server A, the call again with its answer to server B.
    What the client carries between them is sealed with the session secret: B opens it only if it has
    A's (without one, each process seals with a key of its own)."""
    other = SECRET if same_secret else SECRET.upper()
    given = {"db": db, "transport": "http", "ask_on_update": True, "person": "Ada"}
    first = Settings(**given, port=_free_port(), session_secret=SECRET)  # type: ignore[arg-type]
    second = Settings(**given, port=_free_port(), session_secret=other)  # type: ignore[arg-type]
    arguments = {"text": NEW, "subject": "gateway.port", "scope": "ops"}
    with serving(first, memory) as a, serving(second, Memory(db, embedder)) as b:
        async with (
            Client(a, mode="2026-07-28", elicitation_callback=Person()) as on_a,  # type: ignore[arg-type]
            Client(b, mode="2026-07-28", elicitation_callback=Person()) as on_b,  # type: ignore[arg-type]
        ):
            old = (await call(on_a, "remember", text=OLD, subject="gateway.port", scope="ops"))["note"]
            asked = await on_a.session.call_tool("remember", arguments, allow_input_required=True)
            assert isinstance(asked, InputRequiredResult) and asked.input_requests is not None
            [key] = asked.input_requests
            if not same_secret:
                with pytest.raises(MCPError, match="Invalid or expired requestState"):
                    await answer_on(on_b, arguments, key, asked)
                assert memory.list_notes(scope="ops").total == 1  # nothing stored on a refused answer
                return
            answered = await answer_on(on_b, arguments, key, asked)
    assert not isinstance(answered, InputRequiredResult) and answered.structured_content is not None
    event = answered.structured_content["confirmed"]["event"]
    assert (event["kind"], event["dst"], event["actor"]) == ("supersedes", old["id"], "person:Ada")


def test_over_http_no_client_is_given_a_session_whatever_its_protocol_version(db: str, memory: Memory) -> None:
    """One server in this process: the quick tier's check of what the balancer tests rely on."""
    settings = Settings(db=db, transport="http", port=_free_port())
    body, headers = tools_list("2026-07-28")
    with serving(settings, memory) as url, httpx2.Client(trust_env=False, timeout=60) as http:
        opened = post(http, url, initialize("2025-11-25"), {})
        listed = post(
            http, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, {"MCP-Protocol-Version": "2025-11-25"}
        )
        modern = post(http, url, body, headers)
    assert [r.status_code for r in (opened, listed, modern)] == [200, 200, 200]
    assert not any("mcp-session-id" in r.headers for r in (opened, listed, modern))
    assert result_of(listed)["result"]["tools"] and result_of(modern)["result"]["tools"]
