"""The README stays true: every tool documented, and CI runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
from corrigenda.server import install
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings

from .test_tools import TOOLS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands_after(heading: str) -> list[str]:
    section = README.split(heading, 1)[1]
    return [re.search(r"```sh\n(.+?)\n```", section, re.S).group(1).strip()]  # type: ignore[union-attr]


def test_every_tool_has_a_readme_row_and_a_description(tmp_path: Path) -> None:
    tools = anyio.run(build_server(Settings(db=str(tmp_path))).list_tools)
    assert {tool.name for tool in tools} == TOOLS
    for tool in tools:
        assert re.search(rf"^\| `{tool.name}` \|", README, re.M), f"README has no row for {tool.name}"
        assert tool.description and "\n    " not in tool.description


def test_ci_runs_the_readme_test_command() -> None:
    (command,) = _commands_after("## Test it (fresh machine)")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci.splitlines()


def test_the_readme_serve_command_starts_the_server() -> None:
    (command,) = _commands_after("## Run it (fresh machine)")
    assert command.endswith(".venv/bin/corrigenda serve") and "torch==2.13.0" in command


def test_every_setting_has_its_environment_variable_in_the_readme() -> None:
    for name in Settings.model_fields:
        assert f"CORRIGENDA_{name.upper()}" in README, name


def test_the_readme_client_entries_are_what_corrigenda_install_prints() -> None:
    """Each JSON entry under *Plug it into a client* is `corrigenda install CLIENT --print`'s output, for
    a corrigenda installed where the README says."""
    section = README.split("## Plug it into a client", 1)[1].split("\n## ", 1)[0]
    shown = re.findall(r"```json\n(.+?)\n```", section, re.S)
    printed = {install.entry(c, "/home/you/.venvs/corrigenda/bin/corrigenda").snippet() for c in install.CLIENTS}
    assert len(shown) >= 2 and set(shown) <= printed


def test_the_readme_python_example_runs_and_prints_what_it_says(capsys: Any) -> None:
    section = README.split("## Python API", 1)[1]
    (code,) = re.findall(r"```python\n(.+?)\n```", section.split("\n## ", 1)[0], re.S)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    said = [line.split("# ", 1)[1] for line in code.splitlines() if "# " in line and "|" in line.split("# ", 1)[1]]
    assert printed == said
