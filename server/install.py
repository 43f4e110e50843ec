"""`corrigenda install CLIENT`: write corrigenda's entry into an MCP client's own configuration file.

The entry runs this very executable by its absolute path (a client started from a dock or menu does
not see the shell's PATH), and wires the project (project.py) the way each client can:
- VS Code and Cursor put the open folder in `${workspaceFolder}`: the entry passes it as --project;
- Claude Code starts a server in the folder it was started in: the working directory's work tree;
- Claude Desktop has no workspace: the scope is 'default' unless --project or --scope is given.
The rest of the file is kept as it was, and the file as it was before is kept beside it (`.bak`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir

NAME = "corrigenda"
CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")


@dataclass(frozen=True)
class Entry:
    client: str
    file: Path  # the client's configuration file
    key: str  # the object in it that holds servers by name
    value: dict[str, Any]  # corrigenda's entry

    def snippet(self) -> str:
        return _json({self.key: {NAME: self.value}})


def _json(value: Any, depth: int = 0) -> str:
    """JSON indented by two spaces, a list of plain values on one line, as people write these files."""
    pad = "  " * depth
    if isinstance(value, dict) and value:
        items = [f"{pad}  {json.dumps(k, ensure_ascii=False)}: {_json(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return "[\n" + ",\n".join(f"{pad}  {_json(v, depth + 1)}" for v in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


class InstallError(Exception):
    """The configuration file cannot be updated safely; nothing was written."""


def executable() -> str:
    """The absolute path of the running `corrigenda` (the script beside this Python when run as
    `python -m`, which is how the tests run it)."""
    here = Path(sys.argv[0])
    if here.name.startswith(NAME) and here.exists():
        return str(here.resolve())
    beside = Path(sys.executable).with_name(NAME + (".exe" if os.name == "nt" else ""))
    return str(beside)


def _home() -> Path:
    return Path.home()


def config_file(client: str) -> Path:
    """Where each client keeps its user-wide MCP servers on this platform."""
    if client == "claude-desktop":
        if sys.platform == "darwin":
            return _home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if os.name == "nt":
            return (
                Path(os.environ.get("APPDATA", _home() / "AppData" / "Roaming"))
                / "Claude"
                / "claude_desktop_config.json"
            )
        return Path(user_config_dir("Claude", appauthor=False)) / "claude_desktop_config.json"
    if client == "claude-code":
        return _home() / ".claude.json"  # user scope: `claude mcp add --scope user` writes here
    if client == "cursor":
        return _home() / ".cursor" / "mcp.json"
    if client == "vscode":
        if sys.platform == "darwin":
            return _home() / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
        if os.name == "nt":
            return Path(os.environ.get("APPDATA", _home() / "AppData" / "Roaming")) / "Code" / "User" / "mcp.json"
        return Path(user_config_dir("Code", appauthor=False)) / "User" / "mcp.json"
    raise InstallError(f"client: {client!r} is not one of {', '.join(CLIENTS)}")


def entry(client: str, command: str, project: str | None = None, env: Mapping[str, str] | None = None) -> Entry:
    """corrigenda's entry for `client`: `command serve`, the project wiring (module docstring), `env`."""
    args = ["serve"]
    if project is not None:
        args += ["--project", project]
    elif client in ("vscode", "cursor"):
        args += ["--project", "${workspaceFolder}"]
    value: dict[str, Any] = {"command": command, "args": args}
    if client in ("vscode", "claude-code"):
        value = {"type": "stdio", **value}
    if env:
        value["env"] = dict(env)
    key = "servers" if client == "vscode" else "mcpServers"
    return Entry(client, config_file(client), key, value)


def write(made: Entry) -> Path | None:
    """Put the entry into its file, keeping everything else; returns the backup of the file as it was
    (None: there was no file). A file that is not a JSON object is left alone (InstallError)."""
    path = made.file
    config: dict[str, Any] = {}
    backup = None
    if path.exists():
        text = path.read_text(encoding="utf-8")
        try:
            config = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise InstallError(
                f"{path} is not plain JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}; comments are not "
                f"read here): add the entry by hand, from `corrigenda install {made.client} --print`"
            ) from None
        if not isinstance(config, dict) or not isinstance(config.get(made.key, {}), dict):
            raise InstallError(f"{path}: its {made.key!r} is not a JSON object; add the entry by hand")
        backup = path.with_name(path.name + ".bak")
        shutil.copy2(path, backup)
    servers = config.setdefault(made.key, {})
    servers[NAME] = made.value
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(_json(config) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return backup
