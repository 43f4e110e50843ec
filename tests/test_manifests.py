"""The client configurations under manifests/ stay valid and in step with the server and the package."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from corrigenda.server.app import build_server
from corrigenda.server.cli import _parser
from corrigenda.server.config import Settings

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
JSON_FILES = sorted(MANIFESTS.rglob("*.json"))
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def load(relative: str) -> Any:
    return json.loads((MANIFESTS / relative).read_text(encoding="utf-8"))


def check_launch(command: str, args: list[str]) -> None:
    """`command args` runs `corrigenda serve`, and the real CLI parser accepts the arguments."""
    assert command == "corrigenda"
    assert args[:1] == ["serve"]
    assert _parser().parse_args(args).command == "serve"


def check_env(env: dict[str, str]) -> None:
    """Each variable is one that Settings reads (CORRIGENDA_<field>)."""
    for name in env:
        assert name.startswith("CORRIGENDA_"), name
        assert name.removeprefix("CORRIGENDA_").lower() in Settings.model_fields, name


def test_manifests_exist() -> None:
    names = {p.relative_to(MANIFESTS).as_posix() for p in JSON_FILES}
    assert {
        "claude_desktop_config.json",
        "cursor/mcp.json",
        "vscode/mcp.json",
        "mcpb/manifest.json",
        "server.json",
    } <= names


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.relative_to(MANIFESTS).as_posix())
def test_json_parses(path: Path) -> None:
    assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict)


@pytest.mark.parametrize("relative", ["claude_desktop_config.json", "cursor/mcp.json"])
def test_mcp_servers_configs_launch_serve(relative: str) -> None:
    entry = load(relative)["mcpServers"]["corrigenda"]
    check_launch(entry["command"], entry["args"])
    check_env(entry.get("env", {}))


def test_vscode_config_launches_serve() -> None:
    entry = load("vscode/mcp.json")["servers"]["corrigenda"]
    assert entry["type"] == "stdio"
    check_launch(entry["command"], entry["args"])
    check_env(entry.get("env", {}))


def test_mcpb_manifest_launches_serve() -> None:
    manifest = load("mcpb/manifest.json")
    assert manifest["manifest_version"] in {"0.2", "0.3", "0.4"}
    assert manifest["version"] == VERSION
    for field in ("name", "description", "author", "server"):
        assert manifest[field], field
    server = manifest["server"]
    assert server["type"] in {"python", "binary"}
    # `mcpb pack` refuses a bundle whose entry point is missing.
    assert (MANIFESTS / "mcpb" / server["entry_point"]).is_file()
    config = server["mcp_config"]
    check_launch(config["command"], config["args"])
    check_env(config["env"])
    # Every ${user_config.x} names a declared option, and every option is used.
    used = set(re.findall(r"\$\{user_config\.(\w+)\}", json.dumps(config)))
    assert used == set(manifest["user_config"])
    for option in manifest["user_config"].values():
        assert {"type", "title", "description"} <= option.keys()


def test_mcpb_manifest_lists_the_registered_tools(tmp_path: Path) -> None:
    server = build_server(Settings(db=str(tmp_path)))
    registered = {t.name for t in anyio.run(server.list_tools)}
    listed = [t["name"] for t in load("mcpb/manifest.json")["tools"]]
    assert len(listed) == len(set(listed))
    assert set(listed) == registered
    assert all(t.get("description") for t in load("mcpb/manifest.json")["tools"])


def test_server_json_matches_the_package() -> None:
    data = load("server.json")
    schema = r"https://static\.modelcontextprotocol\.io/schemas/\d{4}-\d{2}-\d{2}/server\.schema\.json"
    assert re.fullmatch(schema, data["$schema"])
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", data["name"])
    assert 1 <= len(data["description"]) <= 100
    assert data["version"] == VERSION
    (package,) = data["packages"]
    assert package["registryType"] == "pypi"
    assert package["identifier"] == "corrigenda"
    assert package["version"] == VERSION
    assert package["transport"] == {"type": "stdio"}
    args = [a["value"] for a in package["packageArguments"] if a["type"] == "positional"]
    check_launch(package["identifier"], args)
    env = {v["name"]: v for v in package["environmentVariables"]}
    assert {"CORRIGENDA_DB", "CORRIGENDA_SCOPE", "CORRIGENDA_MODEL"} <= env.keys()
    check_env(env)
    assert all(v.get("description") for v in env.values())


# `claude mcp add` options (Claude Code's commander definition): which take one value, which
# take several (a variadic option keeps consuming arguments until the next one starting with -).
_ONE_VALUE = {"-s", "--scope", "-t", "--transport", "--client-id", "--callback-port"}
_VARIADIC = {"-e", "--env", "-H", "--header"}


def _claude_mcp_add_commands(script: str) -> list[list[str]]:
    """The `claude mcp add` command lines of a shell script, comments dropped, continuations joined."""
    joined = re.sub(r"\\\n", " ", script)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words[:3] == ["claude", "mcp", "add"]:
            commands.append(words[3:])
    return commands


def _parse_claude_mcp_add(words: list[str]) -> dict[str, Any]:
    """What `claude mcp add` makes of its arguments, option by option as commander reads them."""
    options: dict[str, list[str]] = {}
    positional: list[str] = []
    option_after_name = False
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            positional += words[i + 1 :]
            break
        if word.startswith("-"):
            option_after_name = option_after_name or bool(positional)
            key, _, inline = word.partition("=")
            assert key in _ONE_VALUE | _VARIADIC, f"unknown option {key}"
            values = options.setdefault(key.lstrip("-")[:1], [])
            if inline:
                values.append(inline)
            elif key in _ONE_VALUE:
                i += 1
                values.append(words[i])
            else:
                while i + 1 < len(words) and not words[i + 1].startswith("-"):
                    i += 1
                    values.append(words[i])
            i += 1
            continue
        positional.append(word)
        i += 1
    return {"options": options, "positional": positional, "option_after_name": option_after_name}


def test_claude_code_command_runs_serve() -> None:
    commands = _claude_mcp_add_commands((MANIFESTS / "claude-code.sh").read_text(encoding="utf-8"))
    assert len(commands) == 1
    parsed = _parse_claude_mcp_add(commands[0])
    name, command, *args = parsed["positional"]
    assert name == "corrigenda"
    check_launch(command, args)
    # The docs: all options before the server name.
    assert not parsed["option_after_name"]
    assert parsed["options"].get("t", ["stdio"]) == ["stdio"]
    # A variadic --env right before the name would swallow it as a second variable.
    env = dict(kv.split("=", 1) for kv in parsed["options"].get("e", []))
    assert all(re.fullmatch(r"[A-Z_][A-Z0-9_]*", k) for k in env)
    check_env(env)


def test_claude_code_parser_catches_a_swallowed_name() -> None:
    """The check above would fail on the form that breaks `claude mcp add`."""
    parsed = _parse_claude_mcp_add(shlex.split("-e CORRIGENDA_SCOPE=default corrigenda -- corrigenda serve"))
    assert parsed["options"]["e"] == ["CORRIGENDA_SCOPE=default", "corrigenda"]
    _name, command, *args = parsed["positional"]
    with pytest.raises(AssertionError):
        check_launch(command, args)
