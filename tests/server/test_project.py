"""One project, one scope, from every entry point (server/project.py): the same folder of a work tree
resolves to the same scope through --project, a client's root (the top or a folder inside), Claude
Code's CLAUDE_PROJECT_DIR, Cursor's WORKSPACE_FOLDER_PATHS, a real stdio server process, and the CLI
run inside the folder; a store whose scope came from a root inside the project keeps being read; a
typo is an error, not silence; a client variable left unexpanded and a failing roots/list are passed
over for the next rule."""

from __future__ import annotations

import html
import json
import logging
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import httpx2
import pytest
from corrigenda.server import install
from corrigenda.server import roots as server_roots
from corrigenda.server.config import Settings
from corrigenda.server.project import project_scope, resolve, scope_from_root
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import METHOD_NOT_FOUND, ErrorData, ListRootsResult, Root

from ..conftest import call, call_error
from ..launch import OFFLINE, serve_and_ask
from .test_cli import CORRIGENDA
from .test_processes import serve_http
from .test_scopes import roots, session
from .test_ui import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree with a folder inside it, as a person's project is."""
    top = tmp_path / "code" / "My API"
    (top / "src" / "handlers").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    return top


def cli(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CORRIGENDA, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, **OFFLINE, **env}
    )


@pytest.mark.processes
async def test_the_same_folder_is_the_same_scope_from_every_entry_point(
    repo: Path, db: str, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = repo / "src" / "handlers"
    expected = project_scope(str(repo)).scope
    assert expected.startswith("My API#") and project_scope(str(inside)).scope == expected
    seen: dict[str, str] = {}

    async with session(db, embedder, project=str(inside)) as client:  # --project / CORRIGENDA_PROJECT
        seen["--project (a folder inside)"] = (await call(client, "remember", text="The API listens on 8080"))["note"][
            "scope"
        ]
    for label, uri in (("root: the top", repo.as_uri()), ("root: a folder inside", inside.as_uri())):
        async with session(db, embedder, list_roots_callback=roots(uri)) as client:
            seen[label] = (await call(client, "scopes"))["default_scope"]
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(repo))
    async with session(db, embedder) as client:
        seen["CLAUDE_PROJECT_DIR"] = (await call(client, "scopes"))["default_scope"]
    monkeypatch.delenv("CLAUDE_PROJECT_DIR")
    monkeypatch.setenv("WORKSPACE_FOLDER_PATHS", json.dumps([str(inside)]))  # Cursor's window, a folder inside
    async with session(db, embedder) as client:
        seen["WORKSPACE_FOLDER_PATHS (a folder inside)"] = (await call(client, "scopes"))["default_scope"]
    monkeypatch.delenv("WORKSPACE_FOLDER_PATHS")
    # a stdio process started as VS Code starts `corrigenda install vscode`'s entry, the folder substituted
    vscode = install.entry("vscode", CORRIGENDA).value
    args = [a.replace("${workspaceFolder}", str(repo)) for a in vscode["args"]]
    params = StdioServerParameters(
        command=vscode["command"], args=[*args, "--db", db], env={**os.environ, **OFFLINE}, cwd=repo
    )  # in the workspace folder, as VS Code starts it
    await serve_and_ask(params, scope=expected)
    seen["stdio process, VS Code's entry"] = expected
    # the client's root comes before --project: a session whose client sends one is that folder's
    async with session(db, embedder, project=str(repo.parent), list_roots_callback=roots(repo.as_uri())) as client:
        seen["root, with --project elsewhere"] = (await call(client, "scopes"))["default_scope"]
    for running in serve_http(db, "--project", str(inside)):  # streamable HTTP
        async with (
            httpx2.AsyncClient(trust_env=False, timeout=30) as http,
            Client(streamable_http_client(running.url, http_client=http)) as client,
        ):
            seen["HTTP, --project (a folder inside)"] = (await call(client, "scopes"))["default_scope"]
    # started in the folder, with no --project: the MCP endpoint and the web view of one process agree
    plain = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    for running in serve_http(db, "--ui", cwd=inside):
        async with (
            httpx2.AsyncClient(trust_env=False, timeout=30) as http,
            Client(streamable_http_client(running.url, http_client=http)) as client,
        ):
            seen["HTTP started in a folder inside"] = (await call(client, "scopes"))["default_scope"]
            page = (await http.get(f"http://127.0.0.1:{running.port}/ui/")).text
            seen["its web view"] = expected if html.escape(expected) in page else page[:200]
    started = StdioServerParameters(
        command=CORRIGENDA, args=["serve", "--db", db], env={**plain, **OFFLINE}, cwd=inside
    )
    async with Client(started) as client:
        seen["stdio process started in a folder inside"] = (await call(client, "scopes"))["default_scope"]
    port = free_port()
    web = subprocess.Popen([CORRIGENDA, "ui", "--db", db, "--port", str(port)], cwd=inside, env={**os.environ, **OFFLINE},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        page = ""
        for _ in range(600):  # until it answers (it imports LanceDB first)
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert web.poll() is None, web.stderr.read()  # type: ignore[union-attr]
                time.sleep(0.2)
        seen["web view run in a folder inside"] = expected if html.escape(expected) in page else page[:200]
    finally:
        web.terminate()
        web.wait(timeout=30)
    listed = cli(inside, "scopes", "--db", db, "--json")  # the CLI run inside the folder
    assert listed.returncode == 0, listed.stderr
    seen["CLI in a folder inside"] = json.loads(listed.stdout)["default_scope"]
    assert f"* '{expected}'" in cli(inside, "scopes", "--db", db).stdout  # marked as this folder's

    print("\n".join(f"{where:48} {scope}" for where, scope in seen.items()))
    assert set(seen.values()) == {expected}, seen


@pytest.mark.processes
async def test_a_folder_in_no_repository_is_one_scope_too_and_the_home_folder_is_none(
    tmp_path: Path, db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """A folder outside any work tree is its own project, named as a root of it is, from the CLI run in
    it and a server started in it as from a client's root or --project; the home, temporary and root
    folders, where clients and shells start, are no project: "default"."""
    folder = tmp_path / "notes"
    folder.mkdir()
    expected = project_scope(str(folder)).scope
    assert expected.startswith("notes#")
    seen: dict[str, str] = {}
    async with session(db, embedder, list_roots_callback=roots(folder.as_uri())) as client:
        seen["root"] = (await call(client, "remember", text="The notes folder holds meeting notes"))["note"]["scope"]
    async with session(db, embedder, project=str(folder)) as client:
        seen["--project"] = (await call(client, "scopes"))["default_scope"]
    listed = cli(folder, "scopes", "--db", db, "--json", CLAUDE_PROJECT_DIR="")
    assert listed.returncode == 0, listed.stderr
    seen["CLI run in it"] = json.loads(listed.stdout)["default_scope"]
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    started = StdioServerParameters(command=CORRIGENDA, args=["serve", "--db", db], env={**env, **OFFLINE}, cwd=folder)
    async with Client(started) as client:
        seen["stdio process started in it"] = (await call(client, "scopes"))["default_scope"]
    assert set(seen.values()) == {expected}, seen
    for shared in (Path.home(), Path(tempfile.gettempdir()), Path("/")):
        assert project_scope(str(shared)).scope == "default", shared
    assert resolve(None, None, list, here=tempfile.gettempdir())[0] == "default"


@pytest.mark.processes
def test_the_cli_in_a_new_project_reads_its_empty_scope_and_a_named_typo_is_still_refused(
    repo: Path, db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """The folder's own scope holds nothing yet while another project's holds notes: recall, list and
    changes answer empty, saying so, naming no other scope; a --scope that holds nothing is a typo."""
    Memory(db, embedder).remember(Draft(text="The payroll job runs at 02:00"), scope="payroll")
    expected = project_scope(str(repo)).scope
    for args in (["recall", "when does the job run?"], ["list"], ["changes", "--since", "2026-01-01"]):
        done = cli(repo, *args, "--db", db)
        assert done.returncode == 0, (args, done.stderr)
        assert "payroll" not in done.stdout + done.stderr and expected in done.stdout, args
    assert f"Nothing is stored in scope {expected} yet" in cli(repo, "recall", "when?", "--db", db).stdout
    typo = cli(repo, "recall", "when does the job run?", "--db", db, "--scope", "payrol")
    assert typo.returncode == 2 and "'payroll' (1 note)" in typo.stderr


async def test_a_store_whose_scope_came_from_a_root_inside_the_project_keeps_being_read(
    repo: Path, db: str, embedder: SentenceTransformerEmbedder
) -> None:
    inside = repo / "src"
    older = scope_from_root(inside.as_uri())  # how a root of this folder was named before
    assert older != project_scope(str(repo)).scope
    Memory(db, embedder).remember(Draft(text="Handlers live in src/handlers"), scope=older)
    async with session(db, embedder, list_roots_callback=roots(inside.as_uri())) as client:
        assert (await call(client, "scopes"))["default_scope"] == older
        chains = (await call(client, "recall_chains", query="where do handlers live?"))["chains"]
        assert chains and chains[0]["heads"][0]["text"] == "Handlers live in src/handlers"
    # once the project's own scope holds notes, it is the project's
    Memory(db, embedder).remember(Draft(text="The API is Flask"), scope=project_scope(str(repo)).scope)
    assert (
        resolve(None, inside.as_uri(), lambda: [older, project_scope(str(repo)).scope])[0]
        == project_scope(str(repo)).scope
    )


async def test_reading_a_mistyped_scope_names_the_nearest_and_writing_a_new_one_says_so(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    async with session(db, embedder) as client:
        no_store = await call_error(client, "recall_chains", query="anything", scope="api")  # no store yet
        assert f"there is no store at {db}" in no_store and "`remember` makes it" in no_store, no_store
        made = await call(client, "remember", text="The billing service runs on Fridays", scope="billing")
        assert made["scope_created"] is True
        again = await call(client, "remember", text="Billing invoices go out monthly", scope="billing")
        assert again["scope_created"] is False
        await call(client, "remember", text="Search uses OpenSearch", scope="search")
        for tool, arguments in (
            ("recall_chains", {"query": "when does billing run?", "scope": "biling"}),
            ("list_notes", {"scope": "biling"}),
            ("changes", {"scope": "biling", "since": "2026-01-01T00:00:00Z"}),
        ):
            error = await call_error(client, tool, **arguments)
            assert "nothing was ever stored in scope 'biling'" in error, tool
            assert error.index("'billing' (2 notes)") < error.index("'search' (1 note)"), error  # nearest first
        text = (await client.call_tool("remember", {"text": "Docs live in the wiki", "scope": "docs"})).content[0]
        assert "Scope 'docs' held nothing before: this note made it." in text.text  # type: ignore[union-attr]


def test_cursors_workspace_folder_paths_names_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Cursor names its window's folders in WORKSPACE_FOLDER_PATHS (as its users report; it starts servers
    in "/" and does not answer roots/list): a JSON array, whose first folder is the project, or one path.
    A value naming no folder here is passed over for the working directory, logged and said. It comes
    after a root, --project and CLAUDE_PROJECT_DIR, and before the working directory."""
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    caplog.set_level(logging.WARNING, logger="corrigenda.server.project")
    repo = tmp_path / "code" / "api"  # a work tree (its marker: no `git init`, a unit test starts no process)
    (repo / "src").mkdir(parents=True)
    (repo / ".git").mkdir()
    expected, notes = project_scope(str(repo)).scope, tmp_path / "notes"
    notes.mkdir()
    arrays = (json.dumps([str(repo / "src"), str(notes)]), json.dumps([str(repo)]))  # the first folder's project
    for value in (*arrays, str(repo), json.dumps(str(repo))):
        monkeypatch.setenv("WORKSPACE_FOLDER_PATHS", value)
        scope, source = resolve(None, None, list, "/")  # Cursor starts its servers in "/"
        assert (scope, "(WORKSPACE_FOLDER_PATHS)" in source) == (expected, True), (value, source)
    assert not caplog.records
    gone = str(tmp_path / "gone")
    for value in (gone, json.dumps([gone, str(repo)]), "[]", json.dumps({"folders": [str(repo)]})):
        monkeypatch.setenv("WORKSPACE_FOLDER_PATHS", value)
        caplog.clear()
        scope, source = resolve(None, None, list, str(notes))
        assert scope == project_scope(str(notes)).scope and source.startswith(f"the working directory {notes}")
        assert source.endswith(f"; WORKSPACE_FOLDER_PATHS {value} names no folder here"), source
        assert [r.levelname for r in caplog.records] == ["WARNING"] and repr(value) in caplog.text, caplog.text
        assert resolve(None, None, list, "/")[0] == "default"  # a Cursor window with a folder that is gone
    monkeypatch.setenv("WORKSPACE_FOLDER_PATHS", "")  # set but empty: not set
    assert resolve(None, None, list, str(notes)) == (project_scope(str(notes)).scope, f"the working directory {notes}")
    monkeypatch.setenv("WORKSPACE_FOLDER_PATHS", json.dumps([str(notes)]))
    assert resolve(None, repo.as_uri(), list, "/")[0] == expected  # the client's root first
    assert resolve(str(repo), None, list, "/")[0] == expected  # then --project
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(repo))
    assert resolve(None, None, list, "/")[0] == expected  # then CLAUDE_PROJECT_DIR


async def test_a_project_still_holding_a_client_variable_is_passed_over(
    repo: Path,
    db: str,
    embedder: SentenceTransformerEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A --project / CORRIGENDA_PROJECT of `${workspaceFolder}`, written as the client was to fill it in
    and did not, is no folder: it is passed over for the next rule with a warning naming it, where it
    once made a scope named after a folder called "${workspaceFolder}"."""
    for name in ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS"):
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.WARNING, logger="corrigenda.server.project")
    expected = project_scope(str(repo)).scope
    for given in ("${workspaceFolder}", f"{repo.parent}/${{workspaceFolder}}"):  # `install --project` made it absolute
        caplog.clear()
        scope, source = resolve(given, None, list, str(repo / "src"))
        assert scope == expected and source.startswith(f"the working directory {repo / 'src'}"), source
        assert source.endswith(f"; --project {given} is a variable the client did not fill in"), source
        assert [r.levelname for r in caplog.records] == ["WARNING"] and repr(given) in caplog.text, caplog.text
    monkeypatch.setenv("CORRIGENDA_PROJECT", "${workspaceFolder}")
    project = Settings(db=db).project
    assert project == "${workspaceFolder}"
    async with session(db, embedder, project=project) as client:  # no root, no folder: 'default'
        note = (await call(client, "remember", text="Written from a window with no folder"))["note"]
        assert note["scope"] == "default"
        assert [s["scope"] for s in (await call(client, "scopes"))["scopes"]] == ["default"]
    monkeypatch.setenv("WORKSPACE_FOLDER_PATHS", json.dumps([str(repo)]))
    async with session(db, embedder, project=project) as client:  # the next rule that applies: Cursor's folder
        assert (await call(client, "scopes"))["default_scope"] == expected


@pytest.mark.parametrize("answer", ["Method not found", "an exception", "no answer"])
async def test_a_client_whose_roots_list_fails_is_served_by_the_next_rule(
    repo: Path,
    db: str,
    embedder: SentenceTransformerEmbedder,
    answer: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A client that declares roots and then answers roots/list with an error (Cursor's -32601, as its
    users report), fails inside its handler, or never answers: the call goes on, its scope from the next
    rule (here --project), and the log says roots/list failed."""
    for name in ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(server_roots, "ROOTS_TIMEOUT", 0.5)
    caplog.set_level(logging.WARNING, logger="corrigenda.server.roots")

    async def list_roots(context: object) -> ListRootsResult | ErrorData:
        if answer == "Method not found":
            return ErrorData(code=METHOD_NOT_FOUND, message="Method not found")
        if answer == "no answer":
            await anyio.sleep(30)
        raise RuntimeError("the host's roots handler broke")

    async with session(db, embedder, project=str(repo), list_roots_callback=list_roots) as client:
        note = (await call(client, "remember", text="The API listens on 8080"))["note"]
        assert note["scope"] == project_scope(str(repo)).scope
        assert (await call(client, "scopes"))["default_scope"] == note["scope"]
    assert "roots/list failed" in caplog.text, caplog.text


async def test_a_connection_asks_for_its_roots_once_and_again_after_they_change(
    repo: Path, db: str, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scope a session derives is kept for its connection: roots/list once for many calls (not once a
    call, which for a client that never answers would cost the timeout every call), and once more after
    the client says its roots changed, which then decide."""
    for name in ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS"):
        monkeypatch.delenv(name, raising=False)
    other = repo.parent / "other"
    other.mkdir()
    asked: list[str] = []

    async def list_roots(context: object) -> ListRootsResult:
        uri = (repo if len(asked) == 0 else other).as_uri()
        asked.append(uri)
        return ListRootsResult(roots=[Root(uri=uri)])  # type: ignore[arg-type]

    async with session(db, embedder, list_roots_callback=list_roots) as client:
        note = (await call(client, "remember", text="The API listens on 8080"))["note"]
        assert note["scope"] == project_scope(str(repo)).scope
        for _ in range(2):
            assert (await call(client, "scopes"))["default_scope"] == note["scope"]
        assert len(asked) == 1
        await client.send_roots_list_changed()
        await anyio.sleep(0.2)  # a notification has no answer to wait for
        assert (await call(client, "scopes"))["default_scope"] == project_scope(str(other)).scope
        assert len(asked) == 2
