"""The Claude Desktop bundle: manifests/mcpb/build.py validates and packs it with the official CLI,
and what Claude Desktop does with it works — uv installs the dependencies from the bundle's
pyproject.toml, and the manifest's mcp_config starts a server that answers.

What differs from a real host, and why:
- uv is the one from PyPI in the project's venv (the `test` extra), not the copy Claude Desktop
  manages; the test runs `uv sync` in the unpacked bundle, which is the install step hosts are
  reported to run (the MCPB spec says only that the host installs the dependencies with uv).
- PyTorch's CPU index cannot be reached from here, so the unpacked bundle's pyproject.toml gets
  one change: that index's URL points to a local index holding the same CPU wheel of torch 2.13.0,
  the one pip installs here (README). Every other package comes from PyPI, as on a user's machine.
- uv uses the Python 3.11 on this machine (downloads of managed Pythons are off); a host without
  one downloads 3.11, as `.python-version` asks.
- The lock is still resolved for every platform the manifest lists (`required-environments`), so
  the test also checks that macOS arm64 and Windows x64 have a wheel of every package.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import anyio
import pytest
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from mcp.client.stdio import StdioServerParameters

from .cpu_index import local_torch_index
from .launch import OFFLINE, serve_and_ask

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "manifests" / "mcpb" / "build.py"
BIN = Path(sys.executable).parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
PYTORCH_CPU = "https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The .mcpb that build.py makes, and what it printed."""
    out = tmp_path_factory.mktemp("dist")
    run = subprocess.run(
        [sys.executable, str(BUILD), "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out / f"corrigenda-{VERSION}.mcpb", run.stdout


@pytest.fixture(scope="module")
def unpacked(built: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bundle")
    with zipfile.ZipFile(built[0]) as bundle:
        bundle.extractall(directory)
    return directory


def test_the_official_cli_validates_and_packs_the_bundle(built: tuple[Path, str]) -> None:
    bundle, printed = built
    assert printed.count("Manifest schema validation passes!") >= 2  # validate, then pack's own check
    assert f"Output: {bundle}" in printed
    assert bundle.is_file()
    with zipfile.ZipFile(bundle) as zipped:
        names = set(zipped.namelist())
        assert names == {
            "manifest.json",
            "pyproject.toml",
            ".python-version",
            "server/main.py",
            f"wheels/corrigenda-{VERSION}-py3-none-any.whl",
        }


def test_the_bundled_wheel_holds_corrigenda(unpacked: Path) -> None:
    with zipfile.ZipFile(unpacked / "wheels" / f"corrigenda-{VERSION}-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
    assert {"corrigenda/store/memory.py", "corrigenda/server/cli.py", "corrigenda/server/app.py"} <= names
    assert f"corrigenda-{VERSION}.dist-info/entry_points.txt" in names


def test_the_built_manifest_lists_every_registered_tool(unpacked: Path, tmp_path: Path) -> None:
    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    registered = {t.name: t for t in anyio.run(build_server(Settings(db=str(tmp_path))).list_tools)}
    listed = [t["name"] for t in manifest["tools"]]
    assert sorted(listed) == sorted(registered)
    for tool in manifest["tools"]:
        assert tool["description"] and "\n" not in tool["description"]
        assert " ".join((registered[tool["name"]].description or "").split()).startswith(tool["description"])


def _host_env() -> dict[str, str]:
    """This environment with the venv's bin (uv) first on PATH and no managed-Python downloads."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "UV_PYTHON_DOWNLOADS": "never"}


def substitute(value: str, variables: dict[str, str]) -> str:
    """${name} replaced as Claude Desktop does in mcp_config; every variable must be known."""
    return re.sub(r"\$\{([^}]+)\}", lambda m: variables[m.group(1)], value)


@pytest.mark.anyio
async def test_uv_installs_the_bundle_and_its_mcp_config_serves(unpacked: Path, tmp_path: Path) -> None:
    project = unpacked / "pyproject.toml"
    text = project.read_text(encoding="utf-8")
    assert text.count(PYTORCH_CPU) == 1
    project.write_text(text.replace(PYTORCH_CPU, local_torch_index(tmp_path)), encoding="utf-8")

    sync = subprocess.run(
        ["uv", "sync"], cwd=unpacked, env=_host_env(), capture_output=True, text=True, timeout=900
    )  # fmt: skip
    assert sync.returncode == 0, sync.stderr[-3000:]
    # The lock was resolved for all three platforms, with a torch wheel for each.
    lock = (unpacked / "uv.lock").read_text(encoding="utf-8")
    for tag in ("macosx_14_0_arm64", "win_amd64", "manylinux_2_28_x86_64"):
        assert re.search(rf"torch-2\.13\.0(\+cpu)?-cp311-cp311-{tag}\.whl", lock), tag

    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    config = manifest["server"]["mcp_config"]
    variables = {"__dirname": str(unpacked), "user_config.db": str(tmp_path / "store"), "user_config.scope": ""}
    params = StdioServerParameters(
        command=substitute(config["command"], variables),
        args=[substitute(a, variables) for a in config["args"]],
        env={
            **{k: substitute(v, variables) for k, v in config["env"].items()},
            **OFFLINE,
            "PATH": _host_env()["PATH"],
            "UV_PYTHON_DOWNLOADS": "never",
        },
    )
    tools = await serve_and_ask(params, story=True)
    assert tools == {t["name"] for t in manifest["tools"]}
    assert (tmp_path / "store").is_dir()  # the store went where the user said
