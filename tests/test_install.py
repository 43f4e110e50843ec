"""corrigenda installs as the README says, from its wheel rather than from the source tree: a new
venv, torch==2.13.0 first, then the package under constraints.txt. The installed `corrigenda serve`
answers over stdio: initialize, tools/list, and a note that recall_chains finds.

This takes about two minutes, most of it pip unpacking and byte-compiling torch and the other large
wheels; pip reads them from the machine's wheel directory and package index, and from PyPI."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.stdio import StdioServerParameters

from .launch import OFFLINE, serve_and_ask

ROOT = Path(__file__).resolve().parents[1]


def _build_wheel(dest: Path) -> Path:
    """The wheel, made as the bundle's build makes it (manifests/mcpb/build.py)."""
    spec = importlib.util.spec_from_file_location("mcpb_build", ROOT / "manifests" / "mcpb" / "build.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    wheel: Path = build.build_wheel(dest)
    return wheel


def _run(*command: str | Path) -> None:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"


@pytest.mark.anyio
async def test_the_wheel_installs_into_a_new_venv_and_serves(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    # The README's commands, with the wheel in place of `-e .`.
    _run(shutil.which("python3") or sys.executable, "-m", "venv", venv)
    _run(bin_dir / "pip", "install", "-q", "torch==2.13.0")
    _run(bin_dir / "pip", "install", "-q", "-c", ROOT / "constraints.txt", wheel)

    # Installed, not linked to this tree.
    where = subprocess.run(
        [bin_dir / "python", "-c", "import corrigenda.server.cli as m; print(m.__file__)"],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(venv), where

    params = StdioServerParameters(
        command=str(bin_dir / "corrigenda"), args=["serve", "--db", str(tmp_path / "store")], env=OFFLINE
    )
    tools = await serve_and_ask(params, story=True)
    assert {"remember", "correct", "revoke", "reinstate", "recall_chains", "forget"} <= tools
