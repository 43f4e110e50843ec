"""The README stays true: every tool documented, and CI runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
from corrigenda.server import install
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings

from .server.test_tools import TOOLS

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


def _python_api_examples() -> list[str]:
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.+?)\n```", section, re.S)


def test_the_readme_python_examples_run_and_print_what_they_say(capsys: Any) -> None:
    for code in _python_api_examples():
        exec(compile(code, "README.md", "exec"), {})
        printed = capsys.readouterr().out.splitlines()
        said = [line.split("# ", 1)[1] for line in code.splitlines() if "# " in line and "|" in line.split("# ", 1)[1]]
        assert printed == said


def test_the_readme_python_api_shows_the_bulk_load_of_dated_notes() -> None:
    """A conversation history goes in with `import_notes` (one embedding batch, one write per batch),
    not a `remember` per turn; the README shows it with dates, as a person arriving needs it."""
    (example,) = [code for code in _python_api_examples() if "import_notes(" in code]
    assert "at=" in example and ".skipped" in example


def _report() -> Any:
    """bench/report.py, imported as the benches import each other (conftest puts bench/ on the path)."""
    import report

    return report


# The measurement pages, whole or (object storage, whose set-up table is not a measurement) one section.
MEASURED_DOCS = {"benchmarks.md": None, "scale.md": None, "faults.md": None, "object-storage.md": "## Latency"}


def test_the_docs_tables_are_what_the_results_files_say() -> None:
    """Each results block in the README and docs/ holds what bench/report.py renders from the results
    file it names: a figure edited by hand, or a results file re-run without `bench/report.py`, fails."""
    report = _report()
    found = 0
    for path in report.DOCS:
        text = path.read_text(encoding="utf-8")
        found += sum(1 for _ in report.blocks(text))
        assert report.refreshed(text) == text, f"{path.name} is out of date: run .venv/bin/python bench/report.py"
    assert found >= 10


def test_every_table_of_a_measured_page_comes_from_a_results_file() -> None:
    """No table on the measurement pages lies outside a results block (a table typed by hand)."""
    report = _report()
    for name, section in MEASURED_DOCS.items():
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        if section:
            text = section + text.split(section, 1)[1].split("\n## ", 1)[0]
        outside = report.BLOCK.sub("", text)
        rows = [line for line in outside.splitlines() if line.startswith("|")]
        assert not rows, f"docs/{name} has a table outside a results block: {rows[0]}"


def test_a_figure_edited_by_hand_is_caught(tmp_path: Path) -> None:
    report = _report()
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    block = next(report.blocks(text))
    tampered = text.replace(block[4], block[4].replace("| 24 |", "| 23 |", 1))
    assert tampered != text and report.refreshed(tampered) == text
