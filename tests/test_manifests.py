"""The client configurations under manifests/ stay valid and in step with the server and the package,
and each one, started exactly as written, runs a server that answers."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from corrigenda.server.cli_parser import parser as _parser
from corrigenda.server.config import Settings
from corrigenda.server.project import project_scope
from mcp.client.stdio import StdioServerParameters

from .launch import OFFLINE, serve_and_ask

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
JSON_FILES = sorted(MANIFESTS.rglob("*.json"))
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
VERSION = PROJECT["version"]


def load(relative: str) -> Any:
    return json.loads((MANIFESTS / relative).read_text(encoding="utf-8"))


def _pypi_package(server: dict[str, Any]) -> dict[str, Any]:
    (package,) = [p for p in server["packages"] if p["registryType"] == "pypi"]
    return package


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


def test_mcpb_manifest_runs_the_entry_point_with_uv() -> None:
    manifest = load("mcpb/manifest.json")
    assert manifest["manifest_version"] == "0.4"  # the first with the uv server type
    assert manifest["version"] == VERSION
    for field in ("name", "description", "long_description", "author", "server"):
        assert manifest[field], field
    assert "tools" not in manifest  # build.py writes them from the registered tools
    assert "pip install" not in manifest["long_description"]  # corrigenda is not on PyPI
    server = manifest["server"]
    assert server["type"] == "uv"
    assert (MANIFESTS / "mcpb" / server["entry_point"]).is_file()
    config = server["mcp_config"]
    assert config["command"] == "uv"
    assert config["args"] == ["run", "--directory", "${__dirname}", server["entry_point"]]
    check_env(config["env"])
    # Every ${user_config.x} names a declared option, and every option is used.
    used = set(re.findall(r"\$\{user_config\.(\w+)\}", json.dumps(config)))
    assert used == set(manifest["user_config"])
    for option in manifest["user_config"].values():
        assert {"type", "title", "description"} <= option.keys()
    assert set(manifest["compatibility"]["platforms"]) <= {"darwin", "win32", "linux"}


def test_mcpb_project_installs_this_version_with_cpu_torch() -> None:
    project = tomllib.loads((MANIFESTS / "mcpb" / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["version"] == VERSION
    assert f"corrigenda=={VERSION}" in project["project"]["dependencies"]
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    constraints = [line.split("#")[0].strip() for line in lines]
    assert [d for d in project["project"]["dependencies"] if d.startswith("torch")] == [
        c for c in constraints if c.startswith("torch")
    ]
    uv = project["tool"]["uv"]
    assert uv["package"] is False
    assert uv["sources"]["corrigenda"] == {"path": f"wheels/corrigenda-{VERSION}-py3-none-any.whl"}
    (index,) = uv["index"]
    assert uv["sources"]["torch"] == [{"index": index["name"], "marker": "sys_platform == 'linux'"}]
    assert index["url"].endswith("/cpu") and index["explicit"] is True
    # One platform in compatibility.platforms for each environment the lock must cover.
    platforms = {re.search(r"sys_platform == '(\w+)'", e).group(1) for e in uv["required-environments"]}  # type: ignore[union-attr]
    assert platforms == set(load("mcpb/manifest.json")["compatibility"]["platforms"])
    assert uv["environments"] == uv["required-environments"]
    python = (MANIFESTS / "mcpb" / ".python-version").read_text(encoding="utf-8").strip()
    assert project["project"]["requires-python"] == f">={python}"


def test_server_json_matches_the_package() -> None:
    data = load("server.json")
    schema = r"https://static\.modelcontextprotocol\.io/schemas/\d{4}-\d{2}-\d{2}/server\.schema\.json"
    assert re.fullmatch(schema, data["$schema"])
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", data["name"])
    assert 1 <= len(data["description"]) <= 100
    assert data["version"] == VERSION
    assert [p["registryType"] for p in data["packages"]] == ["pypi", "mcpb"]
    package = _pypi_package(data)
    assert package["identifier"] == PROJECT["name"]
    assert package["version"] == VERSION
    assert package["transport"] == {"type": "stdio"}
    # A registry client runs `uvx --torch-backend cpu corrigenda serve`: the published wheel cannot
    # name PyTorch's CPU index, and PyPI's Linux torch is a CUDA build.
    assert package["runtimeHint"] == "uvx"
    (backend,) = package["runtimeArguments"]
    assert (backend["type"], backend["name"], backend["value"]) == ("named", "--torch-backend", "cpu")
    args = [a["value"] for a in package["packageArguments"] if a["type"] == "positional"]
    check_launch(package["identifier"], args)
    env = {v["name"]: v for v in package["environmentVariables"]}
    assert {"CORRIGENDA_DB", "CORRIGENDA_SCOPE", "CORRIGENDA_MODEL"} <= env.keys()
    check_env(env)
    assert all(v.get("description") for v in env.values())


def test_server_json_names_the_release_bundle() -> None:
    """The mcpb package is the .mcpb that the release workflow attaches to the GitHub release of
    this version; its hash is a placeholder that the workflow fills in (manifests/server_json.py)."""
    data = load("server.json")
    (bundle,) = [p for p in data["packages"] if p["registryType"] == "mcpb"]
    repository = data["repository"]["url"]
    assert data["repository"]["source"] == "github"
    assert repository in PROJECT["urls"].values()
    name = f"{load('mcpb/manifest.json')['name']}-{VERSION}.mcpb"  # what manifests/mcpb/build.py writes
    assert bundle["identifier"] == f"{repository}/releases/download/v{VERSION}/{name}"
    assert "mcp" in bundle["identifier"]  # the registry asks for it in an mcpb URL
    assert bundle["version"] == VERSION
    assert re.fullmatch(r"[a-f0-9]{64}", bundle["fileSha256"])  # the schema's pattern
    assert bundle["fileSha256"] == "0" * 64
    assert bundle["transport"] == {"type": "stdio"}


def test_the_published_readme_proves_the_server_name() -> None:
    """The MCP registry checks a PyPI package's ownership by an `mcp-name:` line in its long
    description, which is the README."""
    assert PROJECT["readme"]["file"] == "README.md"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(rf"mcp-name: {re.escape(load('server.json')['name'])}(\s|-->)", readme)


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


# -- launched exactly as written ------------------------------------------------------------------
# Each client's snippet runs as a real process with its own command, arguments and environment; the
# only additions are the venv's bin directory first on PATH (where `corrigenda` is installed) and,
# where the snippet names no store, CORRIGENDA_DB in a temp directory. The bundle's mcp_config
# needs its uv environment first: tests/test_mcpb.py launches it.

VENV_BIN = Path(sys.executable).parent
FOLDERS = ["myproject", "My Project", "café"]  # a VS Code workspace folder's name


def client_launches() -> dict[str, tuple[str, list[str], dict[str, str]]]:
    """Each snippet's command, arguments and environment, as its client starts the server."""
    launches = {}
    claude_desktop = load("claude_desktop_config.json")["mcpServers"]["corrigenda"]
    launches["claude_desktop"] = (claude_desktop["command"], claude_desktop["args"], claude_desktop.get("env", {}))
    for client, entry in (
        ("vscode", load("vscode/mcp.json")["servers"]["corrigenda"]),
        ("cursor", load("cursor/mcp.json")["mcpServers"]["corrigenda"]),
    ):
        for folder in FOLDERS:  # the client substitutes the open folder, here one that does not exist
            args = [a.replace("${workspaceFolder}", f"/home/ana/{folder}") for a in entry["args"]]
            launches[f"{client}[{folder}]"] = (entry["command"], args, entry.get("env", {}))
    (words,) = _claude_mcp_add_commands((MANIFESTS / "claude-code.sh").read_text(encoding="utf-8"))
    parsed = _parse_claude_mcp_add(words)
    _name, command, *args = parsed["positional"]
    launches["claude_code"] = (command, args, dict(kv.split("=", 1) for kv in parsed["options"].get("e", [])))
    # A registry client runs the package's command (its runtimeHint, uvx, would fetch the package
    # from PyPI first) with the positional arguments and each variable that has a default.
    package = _pypi_package(load("server.json"))
    args = [a["value"] for a in package["packageArguments"] if a["type"] == "positional"]
    env = {v["name"]: v["default"] for v in package["environmentVariables"] if "default" in v}
    launches["server.json"] = (package["identifier"], args, env)
    return launches


LAUNCHES = client_launches()


@pytest.mark.anyio
@pytest.mark.parametrize("client", list(LAUNCHES))
async def test_each_client_snippet_starts_a_server_that_answers(client: str, tmp_path: Path) -> None:
    command, args, env = LAUNCHES[client]
    full_env = {
        "CORRIGENDA_DB": str(tmp_path / "store"),
        **env,
        **OFFLINE,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
    }
    # started in "/", as Claude Desktop starts servers (no project), by a client that offers no roots: a
    # snippet that sets no project (or scope) serves "default"
    params = StdioServerParameters(command=command, args=args, env=full_env, cwd="/")
    project = args[args.index("--project") + 1] if "--project" in args else None
    scope = env.get("CORRIGENDA_SCOPE") or (project_scope(project).scope if project else "default")
    tools = await serve_and_ask(params, scope=scope)
    assert {"remember", "correct", "recall_chains"} <= tools


def test_every_workspace_folder_name_is_launched() -> None:
    for relative in ("vscode/mcp.json", "cursor/mcp.json"):
        assert '"--project", "${workspaceFolder}"' in json.dumps(load(relative))
    assert {f"{client}[{f}]" for client in ("vscode", "cursor") for f in FOLDERS} <= LAUNCHES.keys()
