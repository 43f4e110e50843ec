"""`corrigenda ui` end to end: the real command in its own process, driven in headless Chromium
(Debian's `chromium`, installed by .ci/run) by Playwright."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx2
import pytest
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.store import Draft, Memory
from mcp import Client

from ..conftest import call
from .test_cli import CORRIGENDA, run
from .test_stdio import RawSession

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run",
]  # fmt: skip
BEFORE = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
AFTER = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)


def seed(memory: Memory) -> dict[str, str]:
    """A port that was corrected on 20 November, what it rests on, a neighbour, and a forgotten note."""
    old = memory.remember(
        Draft(text="The payments service listens on port 8080", at=BEFORE), scope="ops", actor="claude-code"
    ).note
    proxy = memory.remember(
        Draft(text="Traffic enters through the nginx proxy on lb-1", at=BEFORE), scope="ops", actor="claude-code"
    ).note
    new = memory.correct(
        old.id, Draft(text="The payments service listens on port 9090", at=AFTER), reason="moved behind the new proxy",
        depends_on=[proxy.id], actor="cursor",
    ).note  # fmt: skip
    memory.remember(Draft(text="Alice owns the billing service", at=BEFORE), scope="ops", actor="claude-code")
    gone = memory.remember(Draft(text="The staging root password is tulip", at=BEFORE), scope="ops").note
    memory.forget(gone.id, reason="a person asked for it to be erased")
    return {"old": old.id, "new": new.id, "gone": gone.id}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def start(
    arguments: list[str], ui_port: int, host: str = "127.0.0.1", env: dict[str, str] | None = None, prefix: str = ""
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`corrigenda ARGUMENTS` until the web view on `ui_port`, under `prefix`, answers (any status: it may ask
    for a token). Its stdin stays open, so a stdio server keeps serving."""
    process = subprocess.Popen(
        [CORRIGENDA, *arguments], env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = (f"http://[{host}]:{ui_port}" if ":" in host else f"http://{host}:{ui_port}") + prefix
    try:
        for _ in range(600):  # until it answers (it imports LanceDB first)
            try:
                httpx2.get(base + "/static/ui.css", timeout=2, trust_env=False)
                break
            except httpx2.TransportError:  # not up yet, or busy starting
                assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
                time.sleep(0.2)
        yield base, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def start_ui(db: str, port: int) -> Iterator[str]:
    for base, _ in start(["ui", "--db", db, "--scope", "ops", "--port", str(port)], port):
        yield base


@pytest.fixture
def ui(db: str, memory: Memory) -> Iterator[tuple[str, dict[str, str]]]:
    ids = seed(memory)
    memory.declare_subject("payments.port", scope="ops", reason="one port at a time", actor="ada")  # a setting
    for base in start_ui(db, free_port()):
        yield base, ids


def test_search_open_a_chain_and_replay_the_past_in_a_browser(tmp_path: Path, ui: tuple[str, dict[str, str]]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, ids = ui
    with sync_playwright() as p:
        assert os.path.exists(CHROMIUM), (
            "the browser test needs Debian's chromium: apt-get install chromium (.ci/run does)"
        )
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 700})

        # 1. load: the landing page opens on the scope, with its current notes and the scopes
        page.goto(base + "/")
        expect(page.locator("h1")).to_have_text("Scope ops")
        expect(page.locator("ul.notes").first).to_contain_text("The payments service listens on port 9090")
        expect(page.locator("table.scopes")).to_contain_text("ops")

        # 2. search: the chain as an agent gets it, NOW first, HISTORY with who, when and why
        page.fill("input[name=q]", "which port does the payments service use?")
        page.click("button:has-text('Recall')")
        chain = page.locator("section.chain").first
        expect(chain.locator("li.now .text")).to_have_text("The payments service listens on port 9090")
        expect(chain.locator("li.needs .text")).to_have_text("Traffic enters through the nginx proxy on lb-1")
        history = chain.locator("li.history")
        expect(history.locator(".text")).to_have_text("The payments service listens on port 8080")
        expect(history.locator(".why")).to_contain_text(
            "replaced at 2026-11-20 14:00:00 UTC by cursor (agent) because “moved behind the new proxy”"
        )
        page.screenshot(path=str(tmp_path / "search.png"))

        # 3. open the chain, titled by its head's first words: its timeline in words
        chain.locator("h2 a").click()
        expect(page.locator("h1")).to_have_text("The payments service listens on port 9090")
        row = page.locator("ol.timeline li", has_text="replaced")
        expect(row).to_contain_text(
            "cursor (agent) replaced “The payments service listens on port 8080” with “The payments service "
            "listens on port 9090” because “moved behind the new proxy”"
        )

        # 4. a note page answers why_excluded, for the recall it was opened from
        page.go_back()
        page.locator("section.chain").first.locator("li.history a").click()
        expect(page.locator(".verdict")).to_have_text("HISTORY")
        expect(page.locator("main")).to_contain_text(f"superseded by {ids['new']}")
        expect(page.locator("main")).to_contain_text("delivered as history in chain 1")  # the replayed recall

        # 5. move as_of back before the correction: the old value is NOW, and nothing is history yet
        page.goto(f"{base}/?scope=ops&q=which+port+does+the+payments+service+use%3F")
        page.fill("input[name=as_of]", "2026-11-10T12:00:00")
        page.click("button:has-text('Recall')")
        expect(page.locator(".past")).to_contain_text("as it was at 2026-11-10 12:00:00 UTC")
        first = page.locator("section.chain").first
        expect(first.locator("li.now .text")).to_have_text("The payments service listens on port 8080")
        expect(page.locator("li.history")).to_have_count(0)

        # 6. the changes feed
        page.goto(f"{base}/changes?scope=ops&since=2026-11-01T00:00:00")
        expect(page.locator("li.change.corrected")).to_contain_text("The payments service listens on port 8080")
        expect(page.locator("li.change.corrected li.now")).to_contain_text("9090")
        expect(page.locator("li.change.forgotten")).to_contain_text(ids["gone"])
        expect(page.locator("li.change.declared")).to_contain_text("subject 'payments.port' holds one value")
        expect(page.locator("li.change.declared .meta")).to_contain_text("“one port at a time”")
        assert "tulip" not in page.content()

        # 7. a mistyped scope names the nearest, a forgotten note says so; bad input: a clear message
        response = page.goto(f"{base}/?scope=osp")
        assert response is not None and response.status == 200
        expect(page.locator("main")).to_contain_text("Nothing was ever stored in scope osp")
        page.click("main a:has-text('ops')")
        expect(page.locator("h1")).to_have_text("Scope ops")
        response = page.goto(f"{base}/note/{ids['gone']}")
        assert response is not None and response.status == 200
        expect(page.locator("main")).to_contain_text(f"Note {ids['gone']} was forgotten at")
        response = page.goto(f"{base}/?scope=ops&q=port&as_of=last+week")
        assert response is not None and response.status == 400
        expect(page.locator(".error")).to_contain_text("ISO 8601")
        assert page.request.post(f"{base}/", data={"q": "x"}).status == 405  # writes go to /act alone
        browser.close()


def test_a_correction_by_hand_is_what_recall_chains_then_delivers_with_the_person_as_actor(
    db: str, memory: Memory
) -> None:
    from playwright.sync_api import expect, sync_playwright

    ids = seed(memory)
    port = free_port()
    arguments = ["ui", "--db", db, "--scope", "ops", "--port", str(port)]
    for base, _ in start(arguments, port, env={"CORRIGENDA_PERSON": "Ada Lovelace"}):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.goto(f"{base}/?scope=ops&q=which+port+does+the+payments+service+use%3F")
            page.locator("section.chain h2 a").first.click()
            head = page.locator("li.now").first
            head.locator("summary", has_text="Correct").click()
            head.locator("textarea[name=text]").fill("The payments service listens on port 9443")
            head.locator("details[open] input[name=reason]").fill("moved to TLS on 1 December")
            head.locator("details[open] button").click()
            expect(page.locator(".confirm")).to_contain_text("Replace “The payments service listens on port 9090”")
            assert memory.history(ids["new"]).note.state.value == "active"  # not before it is confirmed
            page.click("button.go")
            expect(page.locator(".notice")).to_contain_text("Corrected")
            expect(page.locator("li.now .text").first).to_have_text("The payments service listens on port 9443")
            expect(page.locator("li.now .meta").first).to_contain_text("Ada Lovelace (person)")
            browser.close()

    async def recall() -> dict[str, Any]:
        server = build_server(Settings(db=db), lambda settings: Memory(settings.db, memory.embedder))
        async with Client(server, raise_exceptions=True) as session:
            return await call(session, "recall_chains", query="which port does the payments service use?", scope="ops")

    chain = anyio.run(recall)["chains"][0]
    assert [h["text"] for h in chain["heads"]] == ["The payments service listens on port 9443"]
    assert chain["heads"][0]["actor"] == "person:Ada Lovelace"
    assert chain["history"][0]["note"]["text"] == "The payments service listens on port 9090"
    assert chain["history"][0]["reason"] == "moved to TLS on 1 December"


def test_a_person_adds_a_note_links_it_by_searching_and_settles_a_mark_in_a_browser(db: str, memory: Memory) -> None:
    """No id typed, no script: the Link form finds the other note by its words (a GET of the chain page), and
    an answer to POSSIBLY OUTDATED comes back to the search, saying what was recorded."""
    from playwright.sync_api import expect, sync_playwright

    ids = seed(memory)
    memory.remember(Draft(text="The office opens at 8:00 on weekdays.", subject="office.hours"), scope="ops")
    memory.remember(Draft(text="The office opens at 9:00 on weekdays.", subject="office.hours"), scope="ops")
    port = free_port()
    for base, _ in start(
        ["ui", "--db", db, "--scope", "ops", "--port", str(port)], port, env={"CORRIGENDA_PERSON": "Ada"}
    ):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.goto(f"{base}/")
            expect(page.locator("header")).to_contain_text("recorded as Ada (person): set CORRIGENDA_PERSON")
            page.click("summary:has-text('Add a note to ops')")
            page.fill("details.add textarea[name=text]", "Payments are run by the platform team")
            page.fill("details.add input[name=subject]", "payments.owner")
            page.click("details.add button")
            expect(page.locator(".notice")).to_contain_text("Added: the note is current")
            expect(page.locator("li.now .meta").first).to_contain_text("Ada (person)")

            page.goto(f"{base}/chain/{ids['new']}")
            head = page.locator("li.now").first
            head.locator("summary", has_text="Link").click()
            head.locator("input[name=find]").fill("who runs payments")
            head.locator("button:has-text('Find')").click()
            head = page.locator("li.now").first
            head.locator("label.candidate", has_text="Payments are run by the platform team").click()
            head.locator("select[name=kind]").select_option("depends_on")
            head.locator("details[open] input[name=reason]").fill("ask them before moving the port")
            head.locator("button:has-text('Link…')").click()
            expect(page.locator(".confirm")).to_contain_text("needs “Payments are run by the platform team”")
            page.click("button.go")
            expect(page.locator(".notice")).to_contain_text("Linked: the note now needs the other one")
            expect(page.locator("li.needs", has_text="platform team")).to_have_count(1)

            page.goto(f"{base}/?scope=ops&q=When+does+the+office+open%3F")
            page.click("summary:has-text('They are different facts')")
            page.fill("details[open] input[name=reason]", "one is the summer timetable")
            page.click("details[open] button")
            page.click("button.go")
            expect(page.locator(".notice")).to_contain_text("Recorded: they are different facts")
            assert "q=When+does+the+office+open" in page.url
            expect(page.locator(".suspect")).to_have_count(0)
            expect(page.locator("section.chain")).to_contain_text(["8:00"])
            browser.close()


def test_the_ui_checks_the_host_and_without_a_token_listens_on_loopback_only(
    tmp_path: Path, ui: tuple[str, dict[str, str]]
) -> None:
    base, _ = ui
    request = urllib.request.Request(base + "/", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 421  # a page elsewhere cannot reach it through a name that points here

    (tmp_path / "other").mkdir()  # a store to open (ui refuses a store that is not there first)
    exposed = run("ui", "--db", str(tmp_path / "other"), "--host", "0.0.0.0")
    assert exposed.returncode == 2 and "without a token" in exposed.stderr and "CORRIGENDA_TOKEN" in exposed.stderr


def test_the_http_server_serves_the_web_view_under_ui_on_its_own_port(db: str, memory: Memory) -> None:
    seed(memory)
    port = free_port()
    serve = ["serve", "--transport", "http", "--port", str(port), "--ui", "--scope", "ops", "--db", db]
    for _ in start(serve, port, prefix="/ui"):
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30) as http:
            opened = http.get("/ui/")
            assert opened.status_code == 200 and "<h1>Scope ops</h1>" in opened.text
            assert (
                'href="/ui/static/ui.css"' in opened.text and 'href="/ui/chain/' in opened.text
            )  # links keep the prefix
            style = http.get("/ui/static/ui.css")
            assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")
            history = http.get("/ui/notes?scope=ops&state=history")
            assert "The payments service listens on port 8080" in history.text and "9090" not in history.text
            mcp = http.post("/mcp", json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"})
            assert mcp.status_code == 200, mcp.text  # the MCP endpoint answers on the same port
            assert http.get("/notes?scope=ops").status_code == 404  # the web view is under /ui only

    refused = run("serve", "--transport", "http", "--ui", "--ui-port", str(free_port()), "--db", db)
    assert refused.returncode == 2 and "--ui-port: with --transport http the web view is served under /ui" in (
        refused.stderr
    )


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}},
}  # fmt: skip


def listener(port: int) -> int:
    """The inode of the socket listening on 127.0.0.1:`port` (Linux's /proc/net/tcp: the browser tier runs on
    Debian)."""
    with open("/proc/net/tcp") as table:
        for row in table.readlines()[1:]:
            local, state, inode = row.split()[1], row.split()[3], row.split()[9]
            if local == f"0100007F:{port:04X}" and state == "0A":  # 0A: LISTEN
                return int(inode)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def sockets_of(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(int(target[len("socket:[") : -1]))
    return inodes


MODEL_LOADS = 300.0  # seconds a first tool call may wait for the model on a busy machine


def stdio_env(**variables: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **variables}


def test_a_stdio_server_serves_the_web_view_from_its_own_process(db: str) -> None:
    port = free_port()
    session = RawSession(db, "--scope", "ops", env=stdio_env(CORRIGENDA_UI="1", CORRIGENDA_UI_PORT=str(port)))
    try:
        session.initialize()
        remembered = session.request(
            2,
            "tools/call",
            {"name": "remember", "arguments": {"text": "The payments service listens on port 9090"}},
            MODEL_LOADS,
        )
        note = remembered["result"]["structuredContent"]["note"]
        for _ in range(600):  # until the web view's thread listens
            try:
                page = httpx2.get(f"http://127.0.0.1:{port}/notes?scope=ops", trust_env=False, timeout=30)
                break
            except httpx2.TransportError:
                assert session.proc.poll() is None
                time.sleep(0.2)
        assert page.status_code == 200 and note["id"] in page.text and "port 9090" in page.text
        assert httpx2.get(f"http://127.0.0.1:{port}/", trust_env=False, timeout=30).status_code == 200
        assert listener(port) in sockets_of(session.proc.pid)  # the stdio server's own process answers
        with open(f"/proc/{session.proc.pid}/task/{session.proc.pid}/children") as children:
            assert children.read().strip() == ""  # and it started no other
        tools = session.request(3, "tools/list")
        assert "remember" in {t["name"] for t in tools["result"]["tools"]}
    finally:
        stderr = session.close()
    assert f"web view on http://127.0.0.1:{port}/" in stderr


def test_a_port_in_use_leaves_the_stdio_server_serving_without_its_web_view(db: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        session = RawSession(db, "--ui", "--ui-port", str(port), "--scope", "ops", env=stdio_env())
        try:
            session.initialize()
            remembered = session.request(
                2,
                "tools/call",
                {"name": "remember", "arguments": {"text": "The backup runs at 02:30 UTC"}},
                MODEL_LOADS,
            )
            assert "note" in remembered["result"]["structuredContent"], remembered
            recalled = session.request(
                3, "tools/call", {"name": "recall_chains", "arguments": {"query": "when does the backup run?"}}
            )
            assert recalled["result"]["structuredContent"]["chains"], recalled
        finally:
            stderr = session.close()
    line = f"corrigenda: no web view: cannot listen on 127.0.0.1:{port}"
    assert stderr.count(line) == 1 and "--ui-port (CORRIGENDA_UI_PORT)" in stderr and "MCP server runs on" in stderr


def test_a_stdio_servers_web_view_off_loopback_needs_a_token(db: str) -> None:
    exposed = run("serve", "--ui", "--host", "0.0.0.0", "--db", db)
    assert exposed.returncode == 2 and "the web view" in exposed.stderr and "CORRIGENDA_TOKEN" in exposed.stderr


TOKEN = "s3cret-token-for-tests-0123456789"
NOTES = "/notes?scope=ops&state=all"


def ui_with_token(db: str, how: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The web view with CORRIGENDA_TOKEN set: `corrigenda ui` alone, off loopback, under /ui on the HTTP
    server's port, or beside a stdio server."""
    port = free_port()
    env = {"CORRIGENDA_TOKEN": TOKEN}
    if how == "alone":
        yield from start(["ui", "--db", db, "--scope", "ops", "--port", str(port)], port, env=env)
    elif how == "off loopback":
        yield from start(["ui", "--db", db, "--scope", "ops", "--host", "0.0.0.0", "--port", str(port)], port, env=env)
    elif how == "under /ui on the http server":
        serve = ["serve", "--transport", "http", "--port", str(port), "--ui"]
        yield from start([*serve, "--scope", "ops", "--db", db], port, env=env, prefix="/ui")
    else:
        yield from start(["serve", "--ui", "--ui-port", str(port), "--scope", "ops", "--db", db], port, env=env)


@pytest.mark.parametrize("how", ["alone", "off loopback", "under /ui on the http server", "beside the stdio server"])
def test_with_a_token_set_the_web_view_asks_for_it(db: str, memory: Memory, how: str) -> None:
    seed(memory)
    for base, process in ui_with_token(db, how):
        prefix = urlsplit(base).path
        with httpx2.Client(base_url=base, trust_env=False, timeout=30) as browser:
            for refused in (
                browser.get(NOTES),
                browser.get(NOTES, headers={"Authorization": f"Bearer {TOKEN}x"}),
                browser.get(NOTES, headers={"Authorization": f"Basic {TOKEN}"}),
                browser.get(NOTES + "&token=not-the-token-but-long-enough-00"),
                browser.get(NOTES, headers={"Cookie": f"corrigenda_ui={TOKEN}"}),  # the cookie holds no token
                browser.get("/static/ui.css"),
            ):
                assert refused.status_code == 401, refused.request.url
                assert "payments" not in refused.text and "nginx" not in refused.text
            assert "?token=" in refused.text and "Authorization: Bearer" in refused.text

            by_header = browser.get(NOTES, headers={"Authorization": f"Bearer {TOKEN}"})
            assert by_header.status_code == 200 and "The payments service listens on port 9090" in by_header.text

            # a person opens the address with ?token= once: a cookie, and the same page without the token
            opened = browser.get(NOTES + f"&token={TOKEN}")
            assert opened.status_code == 303 and opened.headers["location"] == prefix + NOTES
            cookie = opened.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie and TOKEN.lower() not in cookie
            # the client keeps the cookie, as a browser does
            after = browser.get(urljoin(base, opened.headers["location"]))
            assert after.status_code == 200 and "The payments service listens on port 9090" in after.text
            assert browser.get("/?scope=ops&q=port").status_code == 200
        process.terminate()
        _, stderr = process.communicate(timeout=30)
        assert f":{urlsplit(base).port}{prefix}/?token=<CORRIGENDA_TOKEN> once" in stderr, stderr
        assert TOKEN not in stderr


@pytest.mark.parametrize("command", ["ui", "serve"])
def test_the_web_view_answers_over_ipv6_loopback(db: str, memory: Memory, command: str) -> None:
    seed(memory)
    port = free_port("::1")
    if command == "ui":
        arguments, prefix = ["ui", "--host", "::1", "--port", str(port)], ""
    else:
        arguments, prefix = ["serve", "--transport", "http", "--host", "::1", "--port", str(port), "--ui"], "/ui"
    for base, _ in start([*arguments, "--scope", "ops", "--db", db], port, host="::1", prefix=prefix):
        assert base == f"http://[::1]:{port}{prefix}"
        page = httpx2.get(base + NOTES, trust_env=False, timeout=30)  # Host: [::1]:port, as a browser sends it
        assert page.status_code == 200, page.text
        assert "The payments service listens on port 9090" in page.text
        foreign = httpx2.get(base + NOTES, headers={"Host": "evil.example"}, trust_env=False, timeout=30)
        assert foreign.status_code == 421


def test_the_readmes_pictures_are_made_by_the_script_in_docs(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "make_screenshots.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    pictures = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pictures and pictures == sorted(Path(line).name for line in made.stdout.splitlines())
    for picture in tmp_path.glob("*.png"):
        data = picture.read_bytes()
        width = 672 if picture.name.startswith("mcp-app") else 1000  # a host's conversation column, a browser window
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and int.from_bytes(data[16:20], "big") == width
        assert (ROOT / "docs" / picture.name).exists(), f"docs/{picture.name} is not in the repository"
    readme = (ROOT / "README.md").read_text() + (ROOT / "docs" / "reference.md").read_text()
    assert all(name in readme for name in pictures)
