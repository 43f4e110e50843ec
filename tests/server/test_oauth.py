"""The HTTP server as an OAuth 2.1 resource server, end to end: a real authorization server
(oidc-provider, tests/oauth_as, installed with `npm ci` once a session and started on loopback)
issues JWT access tokens by the client credentials grant for the resource each request names; the
server publishes its RFC 9728 metadata, maps each token to a credential of its grants file, and
answers every bad token 401 with the metadata's address. The server runs in this process over the
real store; the SDK client over streamable HTTP."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from corrigenda.server.config import Settings
from corrigenda.server.oauth import FAILED_FETCH_BACKOFF, Issuer, Refused
from corrigenda.store import Draft, Memory
from corrigenda.store.model import credential_actor
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ..conftest import call
from .test_grants import OAUTH_GRANTS, OPS_BOT, outcome, serving
from .test_http_security import authorized
from .test_processes import _free_port

AS_SOURCE = Path(__file__).resolve().parents[1] / "oauth_as"
ANOTHER_RESOURCE = "https://calendar.example.com/api"  # a URL the AS is asked about, never reached
TEXT = "The payments service listens on port 9090"


@dataclass
class AuthorizationServer:
    issuer: str
    other_issuer: str  # the same signing key, another issuer


@pytest.fixture(scope="session")
def authorization_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthorizationServer]:
    """oidc-provider at the version package-lock.json pins, installed into a temp dir once a session."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "Node.js (node, npm) is needed for the authorization server; .ci/run installs it"
    home = tmp_path_factory.mktemp("oauth_as")
    for name in ("package.json", "package-lock.json", "server.mjs"):
        shutil.copy(AS_SOURCE / name, home / name)
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=home, check=True, capture_output=True,
        timeout=600,
    )  # fmt: skip
    errors = home / "stderr.txt"
    with errors.open("wb") as stderr:
        proc = subprocess.Popen([node, "server.mjs"], cwd=home, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocking: the test's timeout bounds it
        assert line, f"the authorization server stopped before it listened: {errors.read_text()}"
        issuers = json.loads(line)
        yield AuthorizationServer(issuers["issuer"], issuers["other_issuer"])
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def token_of(issuer: str, client: str, resource: str, scope: str | None = None) -> str:
    """An access token from the issuer's token endpoint: client credentials, for `resource` (RFC 8707)."""
    with httpx2.Client(trust_env=False, timeout=30) as http:
        endpoint = http.get(f"{issuer}/.well-known/openid-configuration").json()["token_endpoint"]
        form = {"grant_type": "client_credentials", "resource": resource, **({"scope": scope} if scope else {})}
        answer = http.post(endpoint, data=form, auth=(client, f"{client}-secret"))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def claims_of(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class Served:
    url: str
    resource: str
    memory: Memory
    issuer: AuthorizationServer

    def token(self, client: str, scope: str | None = None) -> str:
        return token_of(self.issuer.issuer, client, self.resource, scope)


@pytest.fixture
def served(db: str, memory: Memory, tmp_path: Path, authorization_server: AuthorizationServer) -> Iterator[Served]:
    """A resource server trusting the authorization server, with OAUTH_GRANTS, over a store holding one
    note in 'ada', in 'team-ops' and in 'private'."""
    for scope in ("ada", "team-ops", "private"):
        memory.remember(Draft(text=f"{TEXT} ({scope})"), scope=scope)
    grants = tmp_path / "grants.toml"
    grants.write_text(OAUTH_GRANTS)
    port = _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    settings = Settings(
        db=db, transport="http", port=port, grants=str(grants), oauth_issuer=authorization_server.issuer,
        resource=resource,
    )  # fmt: skip
    with serving(settings, memory) as url:
        yield Served(url, resource, memory, authorization_server)


def test_the_metadata_names_this_resource_and_its_authorization_server(served: Served) -> None:
    metadata_url = served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    with httpx2.Client(trust_env=False, timeout=30) as http:
        metadata = http.get(metadata_url).json()
        refused = http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert metadata["resource"] == served.resource
    assert metadata["authorization_servers"] == [served.issuer.issuer]
    assert metadata["scopes_supported"] == ["memory.audit"]  # the grants file's oauth_scope values
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer ")
    assert f'resource_metadata="{metadata_url}"' in refused.headers["www-authenticate"]


class TokensInMemory:
    """The SDK client's TokenStorage, for one test."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@pytest.mark.anyio
async def test_an_mcp_client_with_only_its_client_credentials_finds_the_issuer_from_the_401(served: Served) -> None:
    """The SDK's own OAuth client: the 401 names the metadata, the metadata the issuer, the issuer's
    metadata its token endpoint; the token it gets there for this resource (RFC 8707) is accepted."""
    storage = TokensInMemory()
    oauth = ClientCredentialsOAuthProvider(
        served.url, storage, client_id="ada", client_secret="ada-secret", issuer=served.issuer.issuer
    )
    async with (
        httpx2.AsyncClient(auth=oauth, trust_env=False, timeout=30) as http,
        Client(streamable_http_client(served.url, http_client=http)) as client,
    ):
        note = (await call(client, "remember", text="Ada prefers tabs", scope="ada"))["note"]
    assert storage.tokens is not None and claims_of(storage.tokens.access_token)["aud"] == served.resource
    assert served.memory.history(note["id"]).note.actor == "ada via mcp"


@pytest.mark.anyio
async def test_an_access_token_reads_and_writes_as_the_credential_its_subject_names(served: Served) -> None:
    ada = served.token("ada")
    assert claims_of(ada)["aud"] == served.resource and claims_of(ada)["sub"] == "ada"
    async with authorized(served.url, ada) as client:
        note = (await call(client, "remember", text="Ada prefers tabs", scope="ada"))["note"]
        assert (await call(client, "recall_chains", query="which port?", scope="team-ops"))["chains"]
        refused = await client.call_tool("remember", {"text": "Ops moved to 9191", "scope": "team-ops"})
    assert refused.is_error
    assert "scope 'team-ops': credential 'ada' may not write it" in refused.content[0].text  # type: ignore[union-attr]
    assert served.memory.history(note["id"]).note.actor == credential_actor("ada", "mcp") == "ada via mcp"
    assert served.memory.list_notes(scope="team-ops").total == 1


@pytest.mark.anyio
async def test_a_group_or_a_scope_of_the_token_names_its_credential_and_static_tokens_still_work(
    served: Served,
) -> None:
    bob = served.token("bob")  # groups ["ops"]
    assert claims_of(bob)["groups"] == ["ops"]
    assert await outcome(served.url, bob, "remember", text="Ops moved to 9191", scope="team-ops") == "allowed"
    assert "credential 'ops' may not read" in await outcome(served.url, bob, "list_notes", scope="ada")
    carol = served.token("carol", scope="memory.audit")
    assert claims_of(carol)["scope"] == "memory.audit"
    assert await outcome(served.url, carol, "list_notes", scope="private") == "allowed"
    assert "credential 'auditors' may not write" in await outcome(
        served.url, carol, "remember", text="Audit passed", scope="private"
    )
    async with authorized(served.url, OPS_BOT) as client:
        written = (await call(client, "remember", text="Deploys freeze on Fridays", scope="team-ops"))["note"]
    assert written["actor"] == "ops-bot via mcp"
    assert served.memory.list_notes(scope="private").total == 1


def tampered(token: str) -> str:
    """The token with one byte of its payload changed (its signature kept)."""
    header, payload, signature = token.split(".")
    claims = claims_of(token)
    claims["sub"] = "bob"
    changed = b64(json.dumps(claims, separators=(",", ":")).encode())
    assert changed != payload
    return f"{header}.{changed}.{signature}"


def unsigned(token: str) -> str:
    """The token's claims under `alg: none`, with no signature: the attack the algorithm list stops."""
    return f"{b64(json.dumps({'alg': 'none', 'typ': 'at+jwt'}).encode())}.{token.split('.')[1]}."


# name: (how to get the token, what the server's log says of it)
BAD = {
    "expired": (lambda s: s.token("late"), "Signature has expired"),
    "not yet valid": (lambda s: s.token("early"), "The token is not yet valid (iat)"),
    "wrong issuer": (lambda s: token_of(s.issuer.other_issuer, "ada", s.resource), "Invalid issuer"),
    "wrong audience": (
        lambda s: token_of(s.issuer.issuer, "ada", s.resource.removesuffix("/mcp")),
        "Audience doesn't match",
    ),
    "another resource": (lambda s: token_of(s.issuer.issuer, "ada", ANOTHER_RESOURCE), "Audience doesn't match"),
    "tampered": (lambda s: tampered(s.token("ada")), "Signature verification failed"),
    "alg none": (lambda s: unsigned(s.token("ada")), "algorithm 'none' is not allowed"),
    "no credential": (lambda s: s.token("eve"), "no credential of the grants file matches token of subject 'eve'"),
    "two credentials": (lambda s: s.token("dan"), "its groups match credentials 'dev', 'ops'"),
    "not a token": (lambda s: "x" * 40, "neither a credential's static token nor a JWT"),
}


@pytest.mark.parametrize("bad", list(BAD))
def test_a_bad_token_is_refused_with_401_and_the_metadata_address_and_nothing_is_stored(
    served: Served, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    make, reason = BAD[bad]
    token = make(served)
    caplog.set_level(logging.WARNING, logger="corrigenda.audit")
    before = {s: served.memory.list_notes(scope=s).total for s in ("ada", "team-ops", "private")}
    remember = {"name": "remember", "arguments": {"text": "Ada's port is 7070", "scope": "ada"}}
    with httpx2.Client(trust_env=False, timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        answer = http.post(
            served.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": remember},
            headers={"Accept": "application/json, text/event-stream"},
        )  # fmt: skip
    metadata_url = served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"] == (
        f'Bearer error="invalid_token", error_description="Authentication required", resource_metadata="{metadata_url}"'
    )
    assert answer.json() == {"error": "invalid_token", "error_description": "Authentication required"}
    refusals = [r.getMessage() for r in caplog.records if r.name == "corrigenda.audit"]
    # pytest -s shows each answer and the server's reason for it
    print(f"\n{bad}: {answer.status_code}\nWWW-Authenticate: {answer.headers.get('www-authenticate')}")
    print(f"{answer.text}\nlog: {'; '.join(refusals)}")
    assert any(reason in line for line in refusals), refusals
    assert {s: served.memory.list_notes(scope=s).total for s in before} == before


class SilentKeys:
    """A key-set address on loopback that accepts each connection and never answers, until released;
    after that it closes each one at once. It counts the connections: the key fetches tried."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.listener.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/jwks"
        self.fetches = 0
        self.held: list[socket.socket] = []
        self.released = False
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    def accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            with self.lock:
                self.fetches += 1
                if self.released:
                    connection.close()
                else:
                    self.held.append(connection)

    def release(self) -> None:
        with self.lock:
            self.released = True
            for connection in self.held:
                connection.close()

    def stop(self) -> None:
        self.release()
        self.stopped.set()
        self.thread.join(timeout=10)
        self.listener.close()


def made_up_token(n: int) -> str:
    """An RS256 JWT in form, for a key id no issuer has, signed by no one."""
    header = {"alg": "RS256", "typ": "at+jwt", "kid": f"made-up-{n}"}
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps({'sub': f'nobody-{n}'}).encode())}.{b64(b'x' * 256)}"


CROWD = 45  # made-up tokens at once: more than the 40 worker threads that tool calls share


@pytest.mark.anyio
async def test_a_silent_issuer_holds_no_static_token_call_and_is_asked_once_per_back_off(
    db: str, memory: Memory, tmp_path: Path
) -> None:
    """Tokens with made-up key ids crowd in while the issuer's key set does not answer: a static token's
    tool call is answered while they all still wait, the key set is asked for once, and once that
    fetch has failed, every waiting token and every new one is refused without asking again."""
    keys = SilentKeys()
    grants = tmp_path / "grants.toml"
    grants.write_text(OAUTH_GRANTS)
    os.makedirs(db)  # an empty store to read (a read of none at a named path is refused)
    port = _free_port()
    settings = Settings(
        db=db, transport="http", port=port, grants=str(grants), oauth_issuer=keys.url.removesuffix("/jwks"),
        resource=f"http://127.0.0.1:{port}/mcp", oauth_jwks=keys.url,
    )  # fmt: skip
    statuses: list[int] = []

    async def made_up(http: httpx2.AsyncClient, n: int) -> None:
        answer = await http.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": f"Bearer {made_up_token(n)}", "Accept": "application/json, text/event-stream"},
        )  # fmt: skip
        statuses.append(answer.status_code)

    try:
        with serving(settings, memory) as url:
            async with httpx2.AsyncClient(trust_env=False, timeout=120) as http:
                async with anyio.create_task_group() as crowd:
                    for n in range(CROWD):
                        crowd.start_soon(made_up, http, n)
                    with anyio.fail_after(60):  # a guard against a hang, not a measure
                        while keys.fetches == 0:
                            await anyio.sleep(0.05)
                    await anyio.sleep(0.5)  # for the rest of the crowd to reach the server too
                    async with authorized(url, OPS_BOT) as client:
                        listed = await call(client, "scopes")
                    answered_first, fetches_while_silent = len(statuses), keys.fetches
                    keys.release()  # the fetch under way fails: the crowd is refused
                assert answered_first == 0, f"{answered_first} made-up tokens were answered before the static token"
                assert fetches_while_silent == 1
                assert statuses == [401] * CROWD
                async with anyio.create_task_group() as later:  # within the back-off after the failed fetch
                    for n in range(CROWD, 2 * CROWD):
                        later.start_soon(made_up, http, n)
        assert statuses == [401] * 2 * CROWD
        assert keys.fetches == 1, f"{keys.fetches} key fetches"
        assert {s["scope"] for s in listed["scopes"]} <= {"team-ops"}
    finally:
        keys.stop()


@pytest.mark.anyio
async def test_after_a_failed_key_fetch_the_next_waits_out_the_back_off() -> None:
    keys = SilentKeys()
    keys.release()  # every fetch fails at once
    now = [1000.0]
    issuer = Issuer("http://127.0.0.1/issuer", "http://127.0.0.1/mcp", keys.url, clock=lambda: now[0])
    try:
        for _ in range(3):
            with pytest.raises(Refused, match="fetching the issuer's keys failed"):
                await issuer.claims(made_up_token(1))
        assert keys.fetches == 1
        now[0] += FAILED_FETCH_BACKOFF
        with pytest.raises(Refused, match="fetching the issuer's keys failed 0 s ago"):
            await issuer.claims(made_up_token(2))
        assert keys.fetches == 2
        with pytest.raises(Refused, match="names no key"):
            await issuer.claims(f"{b64(json.dumps({'alg': 'RS256'}).encode())}.e30.c2ln")
        assert keys.fetches == 2
    finally:
        keys.stop()
