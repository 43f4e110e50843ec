"""`corrigenda install CLIENT` writes each client's real configuration file in a home of its own: the
entry beside what was there, a backup of the file as it was, and a command that, launched as the
client launches it, serves the project's scope (tests/server/test_install_config.py: what the file keeps)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from corrigenda.server.project import project_scope
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import METHOD_NOT_FOUND, ErrorData, ListRootsResult, Root

from ..conftest import call
from ..launch import OFFLINE, serve_and_ask
from .test_cli import CORRIGENDA

# Each client's file under a home, with what a person's file holds already (Linux paths).
CLIENTS = {
    "claude-desktop": (".config/Claude/claude_desktop_config.json", {"mcpServers": {"fs": {"command": "npx"}},
                                                                       "globalShortcut": "Ctrl+Space"}),
    "claude-code": (".claude.json", {"numStartups": 12, "projects": {"/home/ana/api": {"allowedTools": []}},
                                     "mcpServers": {"github": {"type": "http", "url": "https://example.invalid"}}}),
    "cursor": (".cursor/mcp.json", {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "fs"]}}}),
    "vscode": (".config/Code/User/mcp.json", {"inputs": [{"id": "key", "type": "promptString"}],
                                             "servers": {"fs": {"type": "stdio", "command": "npx"}}}),
}  # fmt: skip


def install(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA")}
    return subprocess.run(
        [CORRIGENDA, "install", *args], capture_output=True, text=True, timeout=120, env={**env, "HOME": str(home)}
    )


@pytest.mark.anyio
@pytest.mark.parametrize("client", list(CLIENTS))
async def test_install_writes_the_entry_keeps_the_file_and_the_command_serves_the_project(
    client: str, tmp_path: Path
) -> None:
    home, store = tmp_path / "home", tmp_path / "store"
    relative, before = CLIENTS[client]
    config = home / relative
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps(before, indent=4))
    old_text = config.read_text()

    printed = install(home, client, "--print", "--db", str(store))
    assert printed.returncode == 0 and config.read_text() == old_text  # --print writes nothing

    done = install(home, client, "--db", str(store))
    assert done.returncode == 0, done.stderr
    assert f"into {config}; the file as it was is {config}.bak" in done.stderr
    assert Path(f"{config}.bak").read_text() == old_text
    written = json.loads(config.read_text())
    key = "servers" if client == "vscode" else "mcpServers"
    entry = written[key].pop("corrigenda")
    assert written == before  # everything else as it was
    assert json.loads(printed.stdout) == {key: {"corrigenda": entry}}
    assert entry["command"] == CORRIGENDA and Path(entry["command"]).is_absolute()
    assert entry["env"] == {"CORRIGENDA_DB": str(store)}

    # launched as the client launches it, in a project of its own
    project = tmp_path / "code" / "billing"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert "${" not in json.dumps(entry)  # no client variable: the entry starts the same in every window
    env = {**os.environ, **OFFLINE, **entry["env"]}
    env.pop("CLAUDE_PROJECT_DIR", None)
    env.pop("WORKSPACE_FOLDER_PATHS", None)
    if client == "claude-code":
        env["CLAUDE_PROJECT_DIR"] = str(project)  # what Claude Code gives the servers it starts
    if client == "cursor":
        env["WORKSPACE_FOLDER_PATHS"] = json.dumps([str(project)])  # what Cursor gives the servers it starts
    # VS Code's scope comes from the roots it sends (test_the_vscode_entry_starts_in_every_window…): none here
    expected = "default" if client in ("claude-desktop", "vscode") else project_scope(str(project)).scope
    # Claude Desktop and Cursor start their servers in "/", which names no project (nor does the home folder)
    where = str(tmp_path) if client == "claude-code" else "/"
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=where)
    tools = await serve_and_ask(params, scope=expected, story=True)
    assert {"remember", "recall_chains"} <= tools

    again = install(home, client, "--db", str(store))  # idempotent: the same entry, once
    assert again.returncode == 0 and json.loads(config.read_text())[key]["corrigenda"] == entry


def test_install_reads_a_vscode_file_with_comments_and_keeps_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = home / ".config" / "Code" / "User" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  // my servers\n  "servers": {}\n}\n')
    done = install(home, "vscode")
    assert done.returncode == 0, done.stderr
    assert config.read_text().startswith('{\n  // my servers\n  "servers": {\n    "corrigenda": {')
    assert Path(f"{config}.bak").read_text() == '{\n  // my servers\n  "servers": {}\n}\n'


@pytest.mark.anyio
async def test_the_vscode_entry_starts_in_every_window_and_takes_its_scope_from_the_roots(tmp_path: Path) -> None:
    """VS Code refuses to start a user-level server whose entry holds ${workspaceFolder} in a window with
    no folder or with several (microsoft/vscode#243526): the entry names no folder, and the roots VS Code
    sends choose the scope (the first folder's project), or 'default' in a window without a folder."""
    home, store = tmp_path / "home", tmp_path / "store"
    done = install(home, "vscode", "--db", str(store))
    assert done.returncode == 0, done.stderr
    entry = json.loads((home / ".config" / "Code" / "User" / "mcp.json").read_text())["servers"]["corrigenda"]
    assert entry["args"] == ["serve"] and "${" not in json.dumps(entry)

    first, second = tmp_path / "code" / "api", tmp_path / "code" / "web"
    for folder in (first, second):
        folder.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**env, **OFFLINE, **entry["env"], "HOME": str(home)},
        cwd=home,
    )  # VS Code started from a dock: the server starts in the home folder
    windows = {"no folder": ([], "default"), "one folder": ([first], project_scope(str(first)).scope),
               "two folders": ([first, second], project_scope(str(first)).scope)}  # fmt: skip
    for window, (folders, expected) in windows.items():

        async def list_roots(context: object, folders: list[Path] = folders) -> ListRootsResult:
            return ListRootsResult(roots=[Root(uri=f.as_uri()) for f in folders])  # type: ignore[arg-type]

        # VS Code connects with the initialize handshake (a protocol version before roots were deprecated)
        async with Client(params, list_roots_callback=list_roots, mode="legacy") as client:
            await call(client, "remember", text=f"Opened in a window with {window}")  # the store exists after
            assert (await call(client, "scopes"))["default_scope"] == expected, window


@pytest.mark.anyio
async def test_the_cursor_entry_starts_in_every_window_and_takes_its_scope_from_workspace_folder_paths(
    tmp_path: Path,
) -> None:
    """Cursor declares roots but answers roots/list with "Method not found", starts its servers in "/", and
    names the window's folders in WORKSPACE_FOLDER_PATHS (as its users report): the entry names no folder
    (`${workspaceFolder}` on a user-level entry names whichever window started the server), a window's
    first folder is the project, and a window with no folder is 'default'. The failing roots/list fails
    no call. An entry an older install wrote with `--project ${workspaceFolder}` is rewritten, and said."""
    home, store = tmp_path / "home", tmp_path / "store"
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    older = {"command": "/old/bin/corrigenda", "args": ["serve", "--project", "${workspaceFolder}"], "timeout": 30}
    config.write_text(json.dumps({"mcpServers": {"corrigenda": older}}, indent=2))
    done = install(home, "cursor", "--db", str(store))
    assert done.returncode == 0, done.stderr
    assert 'args: ["serve", "--project", "${workspaceFolder}"] -> ["serve"]' in done.stderr, done.stderr
    entry = json.loads(config.read_text())["mcpServers"]["corrigenda"]
    assert entry["args"] == ["serve"] and "${" not in json.dumps(entry) and entry["timeout"] == 30

    first, second = tmp_path / "code" / "api", tmp_path / "code" / "web"
    for folder in (first, second):
        folder.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS")}

    async def method_not_found(context: object) -> ErrorData:  # Cursor's answer to roots/list
        return ErrorData(code=METHOD_NOT_FOUND, message="Method not found")

    windows = {"no folder": (None, "default"), "one folder": ([first], project_scope(str(first)).scope),
               "two folders": ([first, second], project_scope(str(first)).scope)}  # fmt: skip
    for window, (folders, expected) in windows.items():
        given = {} if folders is None else {"WORKSPACE_FOLDER_PATHS": json.dumps([str(f) for f in folders])}
        params = StdioServerParameters(
            command=entry["command"],
            args=entry["args"],
            env={**env, **OFFLINE, **entry["env"], "HOME": str(home), **given},
            cwd="/",
        )
        async with Client(params, list_roots_callback=method_not_found, mode="legacy") as client:
            await call(client, "remember", text=f"Opened in a window with {window}")  # the store exists after
            assert (await call(client, "scopes"))["default_scope"] == expected, window


def test_install_into_a_home_without_the_client_file_makes_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = install(home, "cursor", "--project", str(tmp_path / "repo"))
    assert done.returncode == 0, done.stderr
    written = json.loads((home / ".cursor" / "mcp.json").read_text())
    assert written["mcpServers"]["corrigenda"]["args"] == ["serve", "--project", str(tmp_path / "repo")]
    assert "the file as it was" not in done.stderr  # nothing to back up
