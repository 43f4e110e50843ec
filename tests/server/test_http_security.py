"""Streamable HTTP: who may connect. A server reachable from other machines needs a bearer token;
Host and Origin are always checked. Tests bind 0.0.0.0 but only ever connect to 127.0.0.1."""

from __future__ import annotations

import json
import logging
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path

import anyio
import httpx2
import pytest
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.server.connections import Admission, bounded_server
from corrigenda.server.http import is_loopback, mcp_app, transport_security
from corrigenda.server.redaction import redact
from corrigenda.server.ui import mounted_ui
from corrigenda.store import Draft, Memory
from mcp import Client
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.routing import BaseRoute

from ..conftest import call
from .test_processes import CORRIGENDA, ENV, STOP_WAIT_S, Running, _free_port, serve_http

TOKEN = "s3cret-token-for-tests-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}},
}


@pytest.fixture
def exposed(db: str) -> Iterator[Running]:
    """Bound to every interface, with a token."""
    yield from serve_http(db, "--host", "0.0.0.0", env={"CORRIGENDA_TOKEN": TOKEN})


@pytest.fixture
def local_with_token(db: str) -> Iterator[Running]:
    yield from serve_http(db, "--host", "127.0.0.1", env={"CORRIGENDA_TOKEN": TOKEN})


def post(url: str, headers: dict[str, str]) -> httpx2.Response:
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    with httpx2.Client(trust_env=False, timeout=30) as http:  # trust_env off: never through a proxy
        return http.post(url, content=json.dumps(INITIALIZE), headers={**base, **headers})


@asynccontextmanager
async def authorized(
    url: str,
    token: str = TOKEN,
    statuses: list[int] | None = None,
    mode: str = "auto",
    elicitation: ElicitationFnT | None = None,
) -> AsyncIterator[Client]:
    """The SDK client over HTTP, sending the token on every request (and noting each status); `mode`: how
    it connects ("legacy": the initialize handshake; a protocol version, e.g. "2026-07-28");
    `elicitation`: the person answering the server's questions (none: the client declares it cannot)."""

    async def note(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, trust_env=False, timeout=30, event_hooks={"response": [note]}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=elicitation) as client,
    ):
        yield client


def first_stderr_line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], 10)
    assert ready, "the server printed nothing on stderr"
    return proc.stderr.readline().decode()


def test_binding_every_interface_without_a_token_refuses_to_start(db: str) -> None:
    port = _free_port()
    out = subprocess.run(
        [CORRIGENDA, "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(port), "--db", db],
        env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert out.stderr.count("\n") == 1, out.stderr
    assert "0.0.0.0" in out.stderr and "CORRIGENDA_TOKEN" in out.stderr


def test_a_token_too_short_to_be_a_secret_is_refused(db: str) -> None:
    out = subprocess.run(
        [CORRIGENDA, "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(_free_port()), "--db", db],
        env={**ENV, "CORRIGENDA_TOKEN": "short"}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0 and "token" in out.stderr and "short" not in out.stderr.replace("too short", "")


def test_an_exposed_server_says_where_it_listens_and_that_auth_is_on(exposed: Running) -> None:
    line = first_stderr_line(exposed.proc)
    assert f"http://0.0.0.0:{exposed.port}/mcp" in line and "bearer token required" in line, line
    assert TOKEN not in line


def test_an_exposed_server_refuses_a_request_without_the_right_token(exposed: Running) -> None:
    assert post(exposed.url, {}).status_code == 401
    assert post(exposed.url, {"Authorization": "Bearer wrong-token-of-some-length-000"}).status_code == 401
    assert post(exposed.url, {"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
    assert post(exposed.url, {"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert post(exposed.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_host_and_origin_are_checked_even_with_the_token(exposed: Running) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert post(exposed.url, {**auth, "Host": "evil.example"}).status_code == 421
    assert post(exposed.url, {**auth, "Host": f"evil.example:{exposed.port}"}).status_code == 421
    assert post(exposed.url, {**auth, "Origin": "http://evil.example"}).status_code == 403
    assert post(exposed.url, {**auth, "Host": f"localhost:{exposed.port}"}).status_code == 200
    assert post(exposed.url, {**auth, "Origin": f"http://127.0.0.1:{exposed.port}"}).status_code == 200


@pytest.mark.anyio
async def test_the_sdk_client_with_the_token_works_and_without_it_is_refused(exposed: Running) -> None:
    async with authorized(exposed.url) as client:
        note = (await call(client, "remember", text="The staging cluster is in Frankfurt"))["note"]
        chains = (await call(client, "recall_chains", query="where is the staging cluster?"))["chains"]
        assert chains[0]["heads"][0]["id"] == note["id"]
    statuses: list[int] = []
    with pytest.raises(ExceptionGroup) as refused:
        async with authorized(exposed.url, "not-the-token-but-long-enough-00", statuses) as client:
            await client.list_tools()
    assert refused.group_contains(MCPError)  # the SDK reports the 401 as an error response
    assert statuses and set(statuses) == {401}, statuses


def test_on_loopback_a_token_that_is_set_is_enforced(local_with_token: Running) -> None:
    assert "bearer token required" in first_stderr_line(local_with_token.proc)
    assert post(local_with_token.url, {}).status_code == 401
    assert post(local_with_token.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_on_loopback_without_a_token_foreign_hosts_and_origins_are_refused(db: str) -> None:
    for running in serve_http(db, "--host", "127.0.0.1"):
        assert "no token" in first_stderr_line(running.proc)
        assert post(running.url, {}).status_code == 200
        assert post(running.url, {"Host": "evil.example"}).status_code == 421
        assert post(running.url, {"Origin": "http://evil.example"}).status_code == 403


def test_allowed_hosts_and_origins_come_from_the_environment(db: str) -> None:
    env = {
        "CORRIGENDA_TOKEN": TOKEN,
        "CORRIGENDA_ALLOWED_HOSTS": "memory.internal:8443, 127.0.0.1:*",
        "CORRIGENDA_ALLOWED_ORIGINS": "https://memory.internal:8443",
    }
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for running in serve_http(db, "--host", "0.0.0.0", env=env):
        assert post(running.url, {**auth, "Host": "memory.internal:8443"}).status_code == 200
        assert post(running.url, {**auth, "Origin": "https://memory.internal:8443"}).status_code == 200
        assert post(running.url, {**auth, "Host": f"localhost:{running.port}"}).status_code == 421  # replaced
        assert post(running.url, {**auth, "Origin": "http://evil.example"}).status_code == 403


def test_the_token_is_read_from_the_environment_only() -> None:
    out = subprocess.run([CORRIGENDA, "serve", "--help"], env=ENV, capture_output=True, text=True, timeout=60)
    assert "--token" not in out.stdout and "CORRIGENDA_TOKEN" in out.stdout


@pytest.mark.parametrize(
    ("host", "loopback", "extra"),
    [
        ("127.0.0.1", True, None),
        ("127.0.0.2", True, "127.0.0.2"),
        ("localhost", True, None),
        ("::1", True, None),
        ("0.0.0.0", False, "0.0.0.0"),
        ("::", False, "[::]"),
        ("memory.lan", False, "memory.lan"),
    ],
)
def test_default_allowed_hosts_are_the_loopback_names_and_the_bind_address(
    host: str, loopback: bool, extra: str | None
) -> None:
    settings = Settings(db="unused", transport="http", host=host, port=8765)
    assert is_loopback(host) is loopback
    security = transport_security(settings)
    names = ["127.0.0.1", "localhost", "[::1]", *([extra] if extra else [])]
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == [f"{name}:8765" for name in names]
    assert security.allowed_origins == [f"http://{name}:8765" for name in names]


HALF_SENT = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"  # and then nothing


@pytest.mark.anyio
async def test_half_sent_requests_are_closed_and_crowd_out_no_authorised_client(db: str, memory: Memory) -> None:
    settings = Settings(db=db, transport="http", token=TOKEN, port=_free_port())
    admission = Admission(max_connections=8, request_timeout_s=2)
    web = bounded_server(
        mcp_app(build_server(settings, lambda _: memory), settings), "127.0.0.1", settings.port, admission=admission
    )
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    half_sent: list[socket.socket] = []
    try:
        while not web.started:
            assert thread.is_alive(), "the server stopped before it listened"
            await anyio.sleep(0.05)
        for _ in range(3 * admission.max_connections):
            half_sent.append(socket.create_connection(("127.0.0.1", settings.port), timeout=60))
            half_sent[-1].sendall(HALF_SENT)
        url = f"http://127.0.0.1:{settings.port}/mcp"
        async with authorized(url) as client:
            assert "remember" in {t.name for t in (await client.list_tools()).tools}
            await anyio.sleep(2 * admission.request_timeout_s)  # a session outlives the deadline for a request
            assert "remember" in {t.name for t in (await client.list_tools()).tools}
        for probe in half_sent:  # each is closed by the server: evicted at once, or when its deadline passed
            with suppress(ConnectionResetError):
                assert probe.recv(1) == b""
    finally:
        for probe in half_sent:
            probe.close()
        web.should_exit = True
        thread.join(timeout=60)


def slow_body(port: int) -> bytes:
    """An authorised request head announcing a body of 4 KiB, and the body's first bytes."""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        'Content-Length: 4096\r\n\r\n{"jsonrpc": "2.0", '
    ).encode()


def trickle(probes: list[socket.socket], stop: threading.Event) -> None:
    """A byte of body to each probe every 0.1 s, until stopped or the server closes them all."""
    sending = list(probes)
    while sending and not stop.wait(0.1):
        for probe in list(sending):
            try:
                probe.sendall(b" ")
            except OSError:  # closed by the server
                sending.remove(probe)


@pytest.mark.anyio
async def test_a_request_whose_body_never_arrives_whole_is_closed_at_its_deadline(db: str, memory: Memory) -> None:
    """An authorised client sends request heads and then no body, or a byte of it now and then: each
    connection is closed when the deadline for the whole request has passed, and the connections it
    held serve others again."""
    settings = Settings(db=db, transport="http", token=TOKEN, port=_free_port())
    admission = Admission(max_connections=4, request_timeout_s=1)
    probes: list[socket.socket] = []
    stop = threading.Event()
    trickling: threading.Thread | None = None
    with serving(settings, memory, admission=admission) as url:
        try:
            for _ in range(admission.max_connections):
                probes.append(socket.create_connection(("127.0.0.1", settings.port), timeout=30))
                probes[-1].sendall(slow_body(settings.port))
            trickling = threading.Thread(target=trickle, args=(probes[::2], stop), daemon=True)
            trickling.start()
            for probe in probes:  # a timeout here: the server kept the connection open
                with suppress(ConnectionResetError):
                    assert probe.recv(1) == b""
            async with authorized(url) as client:
                assert "remember" in {t.name for t in (await client.list_tools()).tools}
        finally:
            stop.set()
            if trickling is not None:
                trickling.join(timeout=10)
            for probe in probes:
                probe.close()


def test_the_web_view_under_ui_keeps_its_own_gate_and_leaves_the_mcp_endpoint_to_the_bearer(
    db: str, memory: Memory
) -> None:
    memory.remember(Draft(text="The payments service listens on port 9090"), scope="ops")
    settings = Settings(db=db, transport="http", token=TOKEN, port=_free_port())
    with serving(settings, memory, [mounted_ui(memory, "ops", settings)]) as endpoint:
        url = endpoint.removesuffix("/mcp")
        with httpx2.Client(base_url=url, trust_env=False, timeout=30) as browser:
            assert browser.get("/ui/").status_code == 401
            assert browser.get("/ui/static/ui.css").status_code == 401
            assert browser.get("/ui/", headers={"Host": "evil.example"}).status_code == 421
            opened = browser.get(f"/ui/?scope=ops&token={TOKEN}")  # sets the web view's session cookie
            assert opened.status_code == 303 and opened.headers["location"] == "/ui/?scope=ops"
            assert browser.get("/ui/").status_code == 200 and "<h1>Scope ops</h1>" in browser.get("/ui/").text
            assert "port 9090" in browser.get("/ui/notes?scope=ops").text  # the server's own memory
            assert browser.get("/ui/static/ui.css").status_code == 200
            assert browser.get("/ui/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            # the cookie (or a token in the query) opens the web view, never the endpoint that writes
            assert browser.post(f"/mcp?token={TOKEN}", json=INITIALIZE).status_code == 401
            session = browser.cookies["corrigenda_ui"]
        assert post(f"{url}/mcp", {"Cookie": f"corrigenda_ui={session}"}).status_code == 401
        assert post(f"{url}/mcp", {"Authorization": f"Bearer {session}"}).status_code == 401
        assert post(f"{url}/mcp", {}).status_code == 401
        assert post(f"{url}/mcp", {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


@contextmanager
def serving(
    settings: Settings, memory: Memory, routes: Sequence[BaseRoute] = (), admission: Admission | None = None
) -> Iterator[str]:
    """The server `settings` describe, over `memory` (with `routes` beside its endpoint, its connections
    under `admission`, the process's by default), listening on loopback in this process: its MCP URL."""
    app = mcp_app(build_server(settings, lambda _: memory), settings, routes)
    web = bounded_server(app, "127.0.0.1", settings.port, admission=admission)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    try:
        while not web.started:
            assert thread.is_alive(), "the server stopped before it listened"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{settings.port}/mcp"
    finally:
        web.should_exit = True
        thread.join(timeout=60)


def test_the_soft_open_file_limit_is_raised_to_the_hard_one() -> None:
    script = (
        "import resource; from corrigenda.server.connections import raise_open_file_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "print(raise_open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], min(hard, 65536))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    reported, soft, expected = out.stdout.split()
    assert int(reported) == int(soft) == int(expected) > 256


def listening(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        return probe.connect_ex((host, port)) == 0


@pytest.mark.anyio
@pytest.mark.processes
async def test_the_sdk_client_remembers_and_recalls_over_ipv6_loopback(db: str) -> None:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [CORRIGENDA, "serve", "--transport", "http", "--host", "::1", "--port", str(port), "--db", db],
        env={**ENV, "CORRIGENDA_TOKEN": TOKEN}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://[::1]:{port}/mcp"
    try:
        assert f"listening on {url}" in first_stderr_line(proc)
        while not listening("::1", port):  # it says so before it binds
            assert proc.poll() is None
            await anyio.sleep(0.1)
        async with authorized(url) as client:
            note = (await call(client, "remember", text="The staging cluster is in Frankfurt"))["note"]
            chains = (await call(client, "recall_chains", query="where is the staging cluster?"))["chains"]
            assert chains[0]["heads"][0]["id"] == note["id"]
        browser_like = {"Authorization": f"Bearer {TOKEN}", "Host": f"[::1]:{port}", "Origin": f"http://[::1]:{port}"}
        assert post(url, browser_like).status_code == 200
        assert post(url, {**browser_like, "Host": "evil.example"}).status_code == 421
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_no_token_reaches_any_log_line_even_at_debug(db: str, tmp_path: Path) -> None:
    """The web view is opened with `?token=`, as its page says to: the access log (uvicorn's, at INFO)
    names the path with the token's value left out, and no other line, at any level, holds it either;
    nor does a bearer token sent to the MCP endpoint."""
    port = _free_port()
    log = tmp_path / "output.txt"  # stdout and stderr both: uvicorn writes its access lines to stdout
    with log.open("wb") as output:
        proc = subprocess.Popen(
            [CORRIGENDA, "serve", "--transport", "http", "--ui", "--port", str(port), "--db", db, "--log-level", "DEBUG"],
            env={**ENV, "CORRIGENDA_TOKEN": TOKEN}, stdout=output, stderr=output,
        )  # fmt: skip
    try:
        while not listening("127.0.0.1", port):
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30) as http:
            assert http.get(f"/ui/?token={TOKEN}").status_code == 303  # opens a session, drops the token
            assert http.get(f"/ui/notes?scope=ops&token={TOKEN}&state=history").status_code == 303
            assert http.get(f"/ui/?tok%65n={TOKEN}").status_code == 303  # the same parameter, percent-encoded
            assert http.get("/ui/?token=wrong-token-for-tests-0123456789").status_code == 401
        assert post(f"http://127.0.0.1:{port}/mcp", {"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_WAIT_S)
    logged = log.read_text()
    assert '"GET /ui/?token=' in logged and '"GET /ui/notes?scope=ops&token=' in logged, logged  # the lines are there
    assert TOKEN not in logged, [line for line in logged.splitlines() if TOKEN in line]
    assert "wrong-token" not in logged  # a mistyped token is someone's secret too
    assert "&state=history" in logged  # the other parameters stay


def test_redaction_hides_token_parameters_and_authorization_credentials_and_keeps_the_rest() -> None:
    assert redact("GET /ui/notes?scope=ops&token=abc&state=history HTTP/1.1") == (
        "GET /ui/notes?scope=ops&token=[redacted]&state=history HTTP/1.1"
    )
    assert redact("/ui/?tok%65n=abc") == "/ui/?tok%65n=[redacted]" and redact("/ui/?tokens=abc") == "/ui/?tokens=abc"
    assert redact("GET /ui/?scope=ops&q=the+vault+code HTTP/1.1") == "GET /ui/?scope=ops&q=[redacted] HTTP/1.1"
    assert redact("Authorization: Bearer abc.def") == "Authorization: Bearer [redacted]"
    assert redact("{'authorization': 'Bearer abc'}") == "{'authorization': 'Bearer [redacted]'}"
    assert redact("(b'authorization', b'Bearer abc')") == "(b'authorization', b'Bearer [redacted]')"
    assert redact("refused a bearer token: Signature has expired") == "refused a bearer token: Signature has expired"


def test_a_streamed_answer_is_logged_by_its_size_never_its_text(caplog: pytest.LogCaptureFixture) -> None:
    """sse_starlette logs each chunk of an event stream at DEBUG: over HTTP, a tool's answer that quotes a
    note (bench/test_run_logs.py found them). The line stays, the chunk's size in place of its text."""
    import corrigenda.server.redaction  # noqa: F401  (every serving process imports it)

    caplog.set_level(logging.DEBUG, logger="sse_starlette.sse")
    chunk = b'event: message\r\ndata: {"result": {"text": "The vault code is 4711"}}\r\n\r\n'
    logging.getLogger("sse_starlette.sse").debug("chunk: %s", chunk)
    logging.getLogger("sse_starlette.sse").debug("ping: %s", "a comment with the vault code 4711")
    assert [r.getMessage() for r in caplog.records] == [
        f"chunk: <{len(chunk)} bytes>",
        "ping: <34 characters>",
    ]
