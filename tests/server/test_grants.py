"""Grants per scope over HTTP: each credential reads and writes the scopes its grants file names, is
recorded as the actor with its client beside it, and is audited. Real servers on loopback, the SDK
client over streamable HTTP, the real store."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from corrigenda.server.config import Settings
from corrigenda.server.grants import GrantsError, NotGranted, admit, digest, parse
from corrigenda.server.oauth import Refused, metadata_urls
from corrigenda.server.ui import announcement
from corrigenda.store import Draft, Memory
from corrigenda.store.model import acted_by, agent_actor, credential_actor
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..conftest import call, call_error
from .test_http_security import authorized, serving
from .test_processes import CORRIGENDA, _free_port
from .test_processes import ENV as PROCESS_ENV

# The server process runs the code under test: the tree PYTHONPATH points at, when it is set.
ENV = {**PROCESS_ENV, **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {})}

ADA = "ada-token-for-tests-0123456789abcdef"
BOB = "bob-token-for-tests-0123456789abcdef"
SHARED = "shared-token-for-tests-0123456789ab"
GRANTS = f"""
[[credentials]]
name = "ada"
token_sha256 = "{digest(ADA)}"
read = ["team-*"]
write = ["ada"]

[[credentials]]
name = "bob"
token_sha256 = "{digest(BOB)}"
read = ["team-*"]
write = ["team-*"]
"""
TEXT = "The payments service listens on port 9090"  # never in an audit line


@dataclass
class Served:
    url: str
    memory: Memory
    ids: dict[str, str]  # a note id per scope


@pytest.fixture
def served(db: str, memory: Memory, tmp_path: Path) -> Iterator[Served]:
    """A server with the grants above (and a shared token) over a store holding one note in 'ada', in
    'team-ops' and in 'private'."""
    ids = {s: memory.remember(Draft(text=f"{TEXT} ({s})"), scope=s).note.id for s in ("ada", "team-ops", "private")}
    grants = tmp_path / "grants.toml"
    grants.write_text(GRANTS)
    settings = Settings(db=db, transport="http", grants=str(grants), token=SHARED, port=_free_port())
    with serving(settings, memory) as url:
        yield Served(url, memory, ids)


async def outcome(url: str, token: str, tool: str, **arguments: object) -> str:
    """'allowed', or the text of the tool error."""
    async with authorized(url, token) as client:
        result = await client.call_tool(tool, arguments)
    return result.content[0].text if result.is_error else "allowed"  # type: ignore[union-attr]


# credential, scope, read or write: the answer
MATRIX = [
    (ADA, "ada", "read", "allowed"),
    (ADA, "ada", "write", "allowed"),
    (ADA, "team-ops", "read", "allowed"),
    (ADA, "team-ops", "write", "refused"),
    (BOB, "ada", "read", "refused"),
    (BOB, "ada", "write", "refused"),
    (BOB, "team-ops", "read", "allowed"),
    (BOB, "team-ops", "write", "allowed"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("token", "scope", "access", "answer"), MATRIX)
async def test_each_credential_reads_and_writes_only_the_scopes_it_is_granted(
    served: Served, token: str, scope: str, access: str, answer: str
) -> None:
    before = served.memory.list_notes(scope=scope).total
    if access == "read":
        got = await outcome(served.url, token, "recall_chains", query="which port?", scope=scope)
    else:
        got = await outcome(served.url, token, "remember", text="The payments service moved to port 9191", scope=scope)
    if answer == "allowed":
        assert got == "allowed"
    else:
        assert f"scope {scope!r}" in got and f"may not {access}" in got, got
    written = served.memory.list_notes(scope=scope).total - before
    assert written == (1 if (access, answer) == ("write", "allowed") else 0)


@pytest.mark.anyio
async def test_note_id_tools_on_a_note_of_an_ungranted_scope_are_refused(served: Served) -> None:
    private, ada = served.ids["private"], served.ids["ada"]
    for tool, arguments in [
        ("history", {"note_id": private}),
        ("why_excluded", {"note_id": private}),
        ("correct", {"note_id": private, "text": "The payments service listens on 9191", "reason": "moved"}),
        ("revoke", {"note_id": private, "reason": "wrong"}),
        ("forget", {"note_id": private, "reason": "erase"}),
        ("link", {"src_id": ada, "dst_id": served.ids["team-ops"], "kind": "refines"}),  # team-ops: read only
    ]:
        got = await outcome(served.url, ADA, tool, **arguments)
        assert "may not" in got and ("'private'" in got or "'team-ops'" in got), (tool, got)
    history = served.memory.history(private)
    assert history.events == [] and history.note.state.value == "active"  # nothing stored
    assert served.memory.history(ada).events == []
    assert await outcome(served.url, ADA, "history", note_id=served.ids["team-ops"]) == "allowed"


@pytest.mark.anyio
async def test_scopes_lists_only_the_granted_scopes(served: Served) -> None:
    async with authorized(served.url, ADA) as client:
        listed = await call(client, "scopes")
    assert {s["scope"] for s in listed["scopes"]} == {"ada", "team-ops"} and listed["total"] == 2
    async with authorized(served.url, SHARED) as client:  # CORRIGENDA_TOKEN: every grant
        listed = await call(client, "scopes")
    assert {s["scope"] for s in listed["scopes"]} == {"ada", "team-ops", "private"}


@pytest.mark.anyio
async def test_resources_of_an_ungranted_scope_are_refused(served: Served) -> None:
    async with authorized(served.url, BOB) as client:
        recent = await client.read_resource("corrigenda://scopes/team-ops/recent")
        assert "port 9090" in recent.contents[0].text  # type: ignore[union-attr]
        for uri in ("corrigenda://scopes/ada/recent", f"corrigenda://notes/{served.ids['ada']}"):
            with pytest.raises(Exception, match="may not read"):
                await client.read_resource(uri)


@pytest.mark.anyio
async def test_the_shared_token_alone_still_has_every_grant(served: Served) -> None:
    for scope in ("ada", "team-ops", "private"):
        assert await outcome(served.url, SHARED, "recall_chains", query="port?", scope=scope) == "allowed"
    got = await outcome(
        served.url, SHARED, "correct", note_id=served.ids["private"], text="The payments service listens on 9191",
        reason="moved",
    )  # fmt: skip
    assert got == "allowed"


@pytest.mark.anyio
async def test_the_actor_is_the_credential_with_its_client_beside_it(served: Served) -> None:
    async with authorized(served.url, ADA) as client:  # the SDK client names itself "mcp"
        note = (await call(client, "remember", text="Ada prefers tabs", scope="ada"))["note"]
        fixed = await call(client, "correct", note_id=note["id"], text="Ada prefers spaces", reason="asked again")
        history = await call(client, "history", note_id=note["id"])
    stored = served.memory.history(note["id"])
    assert stored.note.actor == credential_actor("ada", "mcp") == "ada via mcp"
    assert [e.actor for e in stored.events] == ["ada via mcp"]
    assert fixed["note"]["actor"] == "ada via mcp"
    assert {e["actor"] for e in history["events"]} == {"ada via mcp"}
    assert acted_by("ada via mcp") == ("ada", "mcp")


def test_a_client_cannot_pass_for_a_credential_or_a_person() -> None:
    assert agent_actor("ada via mcp") == "client:ada via mcp"
    assert agent_actor("person:ada") == "client:person:ada"
    assert acted_by(agent_actor("ada via mcp")) == (None, "client:ada via mcp")
    assert acted_by("claude-code") == (None, "claude-code")
    assert acted_by(credential_actor("ada", "bob via x")) == ("ada", "bob via x")


@pytest.mark.anyio
async def test_audit_lines_say_who_read_and_wrote_which_scope_without_note_text(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="corrigenda.audit")
    async with authorized(served.url, ADA) as client:
        await call(client, "recall_chains", query="which port?", scope="team-ops")
        written = (await call(client, "remember", text="Ada's port is 7070", scope="ada"))["note"]["id"]
        await call(client, "correct", note_id=written, text="Ada's port is 7171", reason="moved")
        await client.call_tool("remember", {"text": "Ops port is 6060", "scope": "team-ops"})
        await call(client, "scopes")
    lines = [r.getMessage() for r in caplog.records if r.name == "corrigenda.audit"]
    assert "ada read team-ops (recall_chains)" in lines
    assert "ada wrote ada (remember)" in lines
    assert f"ada wrote ada (correct {written})" in lines
    assert "ada refused write team-ops (remember)" in lines
    assert "ada listed 2 of 2 granted scopes (scopes)" in lines
    assert not any("port" in line for line in lines), lines


@pytest.mark.anyio
async def test_an_empty_scope_is_refused_naming_only_scopes_the_credential_may_read(served: Served) -> None:
    async with authorized(served.url, ADA) as client:
        for tool, arguments in [
            ("list_notes", {}),
            ("recall_chains", {"query": "which port?"}),
            ("changes", {"since": "2020-01-01T00:00:00Z"}),
        ]:
            got = await call_error(client, tool, scope="team-payments", **arguments)
            assert "nothing was ever stored in scope 'team-payments'" in got, (tool, got)
            assert "'team-ops' (1 note)" in got and "'ada' (1 note)" in got, (tool, got)
            assert "private" not in got, (tool, got)
        with pytest.raises(MCPError) as refused:
            await client.read_resource("corrigenda://scopes/team-payments/recent")
    assert "'team-ops'" in str(refused.value) and "private" not in str(refused.value)


CAFE = "café-team"  # in NFC, as the store keeps it; its NFD spelling matches a `cafe*` grant, which it is not


@pytest.fixture
def cafe(db: str, memory: Memory, tmp_path: Path) -> Iterator[str]:
    """A server where cleo may read `cafe*` only, over a store holding a note in 'café-team'."""
    memory.remember(Draft(text=f"{TEXT} ({CAFE})"), scope=CAFE)
    memory.remember(Draft(text=f"{TEXT} (cafe-team)"), scope="cafe-team")
    grants = tmp_path / "grants.toml"
    grants.write_text(f'[[credentials]]\nname = "cleo"\ntoken_sha256 = "{digest(ADA)}"\nread = ["cafe*"]\n')
    settings = Settings(db=db, transport="http", grants=str(grants), port=_free_port())
    with serving(settings, memory) as url:
        yield url


@pytest.mark.anyio
async def test_a_scope_outside_the_grants_is_refused_in_any_unicode_spelling(cafe: str) -> None:
    nfd = unicodedata.normalize("NFD", CAFE)
    async with authorized(cafe, ADA) as client:
        assert "(cafe-team)" in (await client.read_resource("corrigenda://scopes/cafe-team/recent")).contents[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as refused:
            await client.read_resource(f"corrigenda://scopes/{quote(nfd)}/recent")
        assert f"scope {CAFE!r}: credential 'cleo' may not read it" in str(refused.value)
        got = await call_error(client, "list_notes", scope=nfd)
        assert f"scope {CAFE!r}: credential 'cleo' may not read it" in got
        with pytest.raises(MCPError, match="may not read"):
            await client.get_prompt("recall_before_answering", {"question": "which port?", "scope": nfd})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])  # the SDK answered code 0, and -32603 on 2026-07-28
async def test_a_prompt_on_a_scope_outside_the_grants_is_an_error_naming_the_scope(
    served: Served, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with authorized(served.url, ADA, mode=mode) as client:
        for name, arguments in [
            ("recall_before_answering", {"question": "which port?", "scope": "private"}),
            ("record_correction", {"wrong": "9090", "right": "9191", "reason": "moved", "scope": "team-ops"}),
        ]:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt(name, arguments)
            assert refused.value.code == INVALID_PARAMS, (name, refused.value.code, refused.value.message)
            assert "credential 'ada' may not" in refused.value.message and arguments["scope"] in refused.value.message
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]


def test_a_pattern_is_matched_against_the_name_the_store_reads() -> None:
    """One normalisation, then one check: scope and patterns both in NFC, whichever spelling each came in."""
    creme = unicodedata.normalize("NFD", "crème")  # a pattern typed on macOS
    text = f'[[credentials]]\nname = "cleo"\ntoken_sha256 = "{digest(ADA)}"\nread = ["cafe*", "{creme}"]\n'
    cleo = parse(text).by_digest[digest(ADA)]
    with pytest.raises(NotGranted, match="credential 'cleo' may not read it"):
        admit(cleo, unicodedata.normalize("NFD", CAFE), False, "test")
    assert admit(cleo, "crème", False, "test") == "crème" == admit(cleo, creme, False, "test")
    assert admit(None, unicodedata.normalize("NFD", CAFE), True, "test") == CAFE  # the local user: NFC all the same


def grants_error(text: str) -> str:
    with pytest.raises(GrantsError) as refused:
        parse(text, "grants.toml")
    return str(refused.value)


def test_a_broken_grants_file_is_refused_naming_the_line() -> None:
    sha = digest(ADA)
    assert "line 3" in grants_error(f'[[credentials]]\nname = "ada"\ntoken_sha256 = {sha}\n')  # TOML: a bare value
    error = grants_error(f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{sha}"\nwrite = "ada"\n')
    assert "line 4" in error and "credentials[0].write" in error and "list of scope patterns" in error
    error = grants_error(f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{ADA}"\nread = ["*"]\n')
    assert "line 3" in error and "SHA-256" in error and ADA not in error.replace(f'"{ADA}"', "")
    twice = f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{sha}"\nread = ["*"]\n'
    error = grants_error(twice + twice.replace(sha, digest(BOB)))
    assert "line 6" in error and "earlier credential" in error
    assert "line 2" in grants_error(f'[[credentials]]\nname = "person:ada"\ntoken_sha256 = "{sha}"\nread = ["*"]\n')
    assert "unknown key 'scopes'" in grants_error(f'[[credentials]]\nname = "a"\ntoken_sha256 = "{sha}"\nscopes = []\n')


OPS_BOT = "ops-bot-token-for-tests-0123456789"
OAUTH_GRANTS = f"""
[[credentials]]
name = "ada"
oauth_subject = "ada"
read = ["team-*"]
write = ["ada"]

[[credentials]]
name = "ops"
oauth_group = "ops"
write = ["team-*"]

[[credentials]]
name = "dev"
oauth_group = "dev"
read = ["team-dev"]

[[credentials]]
name = "auditors"
oauth_scope = "memory.audit"
read = ["*"]

[[credentials]]
name = "ops-bot"
token_sha256 = "{digest(OPS_BOT)}"
write = ["team-ops"]
"""


def test_an_oauth_credential_is_shown_by_exactly_one_subject_group_or_scope() -> None:
    both = '[[credentials]]\nname = "ada"\noauth_subject = "ada"\noauth_group = "ops"\nread = ["*"]\n'
    error = grants_error(both)
    assert "line 4 (credentials[0].oauth_group)" in error and "exactly one of token_sha256, oauth_subject" in error
    assert "(this one has oauth_subject too)" in error
    error = grants_error('[[credentials]]\nname = "ada"\nread = ["*"]\n')
    assert "line 1 (credentials[0])" in error and "exactly one of" in error
    error = grants_error('[[credentials]]\nname = "ada"\noauth_group = ["ops"]\nread = ["*"]\n')
    assert "line 3 (credentials[0].oauth_group)" in error and "non-empty string" in error
    twice = '[[credentials]]\nname = "NAME"\noauth_group = "ops"\nread = ["*"]\n'
    error = grants_error(twice.replace("NAME", "a") + twice.replace("NAME", "b"))
    assert "line 7 (credentials[1].oauth_group)" in error and "'ops' is an earlier credential's too" in error


def test_an_oauth_credential_without_an_issuer_stops_the_server_naming_the_line() -> None:
    with pytest.raises(GrantsError) as refused:
        parse(OAUTH_GRANTS, "grants.toml", oauth=False)
    assert "grants.toml, line 4 (credentials[0].oauth_subject)" in str(refused.value)
    assert "CORRIGENDA_OAUTH_ISSUER" in str(refused.value)
    assert parse(OAUTH_GRANTS.split("[[credentials]]")[-1].join(["[[credentials]]", ""]), oauth=False).every


@pytest.mark.parametrize(
    ("claims", "credential"),
    [
        ({"sub": "ada", "groups": ["ops"], "scope": "memory.audit"}, "ada"),  # the subject first
        ({"sub": "bob", "groups": ["ops"], "scope": "memory.audit"}, "ops"),  # then a group
        ({"sub": "bob", "groups": "ops"}, "ops"),  # a lone group as a string
        ({"sub": "carol", "scope": "openid memory.audit"}, "auditors"),  # then a scope
        ({"sub": "carol", "scp": ["memory.audit"]}, "auditors"),  # scopes as `scp`, a list
    ],
)
def test_a_token_is_the_credential_its_subject_else_its_group_else_its_scope_names(
    claims: dict[str, object], credential: str
) -> None:
    assert parse(OAUTH_GRANTS).for_claims(claims).name == credential


def test_a_token_that_names_no_credential_or_two_is_refused() -> None:
    grants = parse(OAUTH_GRANTS)
    with pytest.raises(Refused, match=r"no credential .* subject 'eve' \(groups \['qa'\], scopes \[\]\)"):
        grants.for_claims({"sub": "eve", "groups": ["qa"]})
    with pytest.raises(Refused, match=r"ambiguous .* 'dan': its groups match credentials 'dev', 'ops'"):
        grants.for_claims({"sub": "dan", "groups": ["ops", "dev"], "scope": "memory.audit"})


def test_a_pattern_of_an_oauth_credential_that_matches_no_scope_is_named() -> None:
    assert parse(OAUTH_GRANTS).unmatched(["ada", "team-ops"]) == ["dev read 'team-dev'"]


def test_oauth_settings_come_together_with_a_grants_file_and_https_off_loopback() -> None:
    issuer, resource = "https://login.example.com", "https://memory.example.com/mcp"
    for given, needs in [
        ({"oauth_issuer": issuer, "grants": "g.toml"}, "only CORRIGENDA_OAUTH_ISSUER is set"),
        ({"resource": resource, "grants": "g.toml"}, "only CORRIGENDA_RESOURCE is set"),
        ({"oauth_issuer": issuer, "resource": resource}, "OAuth needs CORRIGENDA_GRANTS"),
        ({"oauth_issuer": "http://login.example.com", "resource": resource, "grants": "g"}, "must be https"),
        ({"oauth_issuer": issuer, "resource": "memory.example.com/mcp", "grants": "g"}, "not an http(s) URL"),
    ]:
        with pytest.raises(ValueError, match=re.escape(needs)):
            Settings(**given)  # type: ignore[arg-type]
    local = Settings(oauth_issuer="http://127.0.0.1:9000", resource="http://localhost:8765/mcp", grants="g.toml")
    assert local.oauth_issuer == "http://127.0.0.1:9000"


def test_the_issuers_metadata_is_looked_for_where_rfc_8414_then_openid_connect_put_it() -> None:
    assert metadata_urls("https://login.example.com/realms/team") == [
        "https://login.example.com/.well-known/oauth-authorization-server/realms/team",
        "https://login.example.com/realms/team/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://login.example.com") == [
        "https://login.example.com/.well-known/oauth-authorization-server",
        "https://login.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.processes
def test_a_server_with_a_broken_grants_file_does_not_start(db: str, tmp_path: Path) -> None:
    grants = tmp_path / "grants.toml"
    grants.write_text(f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{digest(ADA)}"\nread = "team-*"\n')
    out = subprocess.run(
        [CORRIGENDA, "serve", "--transport", "http", "--port", str(_free_port()), "--db", db],
        env={**ENV, "CORRIGENDA_GRANTS": str(grants)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0
    assert "grants.toml, line 4 (credentials[0].read)" in out.stderr and "listening" not in out.stderr, out.stderr


@pytest.mark.processes
def test_a_pattern_that_matches_no_scope_is_warned_about_at_start(db: str, memory: Memory, tmp_path: Path) -> None:
    memory.remember(Draft(text=TEXT), scope="team-ops")
    grants = tmp_path / "grants.toml"
    grants.write_text(GRANTS.replace('write = ["ada"]', 'write = ["ada", "tema-*"]'))
    port = _free_port()
    proc = subprocess.Popen(
        [CORRIGENDA, "serve", "--transport", "http", "--port", str(port), "--db", db],
        env={**ENV, "CORRIGENDA_GRANTS": str(grants)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        # It comes right after the listening line. Blocking reads (the test's timeout bounds them): a
        # select() on the pipe misses a line the buffered reader already holds, as both lines often
        # arrive in one read.
        while not any("grants:" in line for line in lines):
            lines.append(proc.stderr.readline().decode())
            assert lines[-1], f"the server stopped: {lines}"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    listening = next(line for line in lines if "listening on" in line)
    assert "bearer token required (CORRIGENDA_GRANTS)" in listening, lines
    assert lines[-1].startswith("corrigenda: grants: no scope matches ada write 'ada'; ada write 'tema-*' (yet)")


@pytest.mark.parametrize("given", [{}, {"token": "s3cret-token-of-32-characters-ok"}, {"grants": "/etc/grants.toml"}])
def test_the_web_views_address_on_stderr_ends_where_a_terminal_ends_a_link(given: dict[str, str]) -> None:
    """A terminal makes the address a link up to the first space: `http://127.0.0.1:8766/;` opened 'No such page'."""
    said = announcement("http://127.0.0.1:8766/", Settings(db="/tmp/unused", **given))  # type: ignore[arg-type]
    assert re.search(r"http://127\.0\.0\.1:8766/\s", said), said
