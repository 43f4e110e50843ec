"""`corrigenda install` loses nothing a person had in a client's configuration file: the entry it finds
is updated (its env and other keys kept, and said), every backup is kept, the file keeps its mode and
its symlink, its comments, trailing commas and numbers as written, and a client's write that lands
during the install. A file it cannot update safely is a one-line error naming the file and what to
do, with the file as it was and nothing left beside it."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from corrigenda.server import cli, install


def jsonc(text: str) -> Any:
    """The test files' JSON with comments: `//` after a blank or at a line's start, `/* */`, trailing commas."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"(^|\s)//[^\n]*", r"\1", text)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "APPDATA", "CORRIGENDA_DB", "CORRIGENDA_SCOPE", "CORRIGENDA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return home


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["install", *args])
    return code, capsys.readouterr().err


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


def test_an_existing_entry_keeps_its_env_and_other_keys_and_the_install_says_so(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / ".claude.json"
    mine = {"type": "stdio", "command": "/old/bin/corrigenda", "args": ["serve"], "env": {"CORRIGENDA_DB": "/data/mem"},
            "timeout": 30}  # fmt: skip
    config.write_text(json.dumps({"mcpServers": {"corrigenda": mine, "github": {"url": "https://x.invalid"}}}))

    code, said = run(capsys, "claude-code")
    assert code == 0, said
    entry = json.loads(config.read_text())["mcpServers"]["corrigenda"]
    assert entry["env"] == {"CORRIGENDA_DB": "/data/mem"} and entry["timeout"] == 30
    assert entry["command"] == install.executable()
    assert "kept env CORRIGENDA_DB" in said and "kept timeout" in said
    assert f'command: "/old/bin/corrigenda" -> {json.dumps(install.executable())}' in said

    code, said = run(capsys, "claude-code", "--db", str(home / "other"))  # asked for: changed, and said
    assert code == 0, said
    assert json.loads(config.read_text())["mcpServers"]["corrigenda"]["env"] == {"CORRIGENDA_DB": str(home / "other")}
    assert f'env CORRIGENDA_DB: "/data/mem" -> {json.dumps(str(home / "other"))}' in said

    before = config.read_text()
    code, said = run(capsys, "claude-code", "--db", str(home / "other"))  # the same again: nothing to write
    assert code == 0 and config.read_text() == before and "already" in said and "nothing written" in said


def test_an_older_cursor_entry_passing_workspace_folder_gets_the_entry_that_starts_in_every_window(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cursor's entry names no folder now, as VS Code's (the folder comes from WORKSPACE_FOLDER_PATHS,
    server/project.py): the `--project ${workspaceFolder}` an older install wrote is replaced like any
    other value the install sets, and said; the entry's env and other keys stay. A --project given to
    the install is still a fixed folder."""
    assert install.entry("cursor", "/bin/corrigenda").value == {"command": "/bin/corrigenda", "args": ["serve"]}
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir()
    older = {"command": install.executable(), "args": ["serve", "--project", "${workspaceFolder}"],
             "env": {"CORRIGENDA_DB": "/data/mem"}, "disabled": False}  # fmt: skip
    config.write_text(json.dumps({"mcpServers": {"corrigenda": older}}, indent=2))
    code, said = run(capsys, "cursor")
    assert code == 0, said
    entry = json.loads(config.read_text())["mcpServers"]["corrigenda"]
    assert entry == {**older, "args": ["serve"]}
    assert 'args: ["serve", "--project", "${workspaceFolder}"] -> ["serve"]' in said and "kept disabled" in said
    code, said = run(capsys, "cursor", "--project", str(home / "api"))
    fixed = json.loads(config.read_text())["mcpServers"]["corrigenda"]["args"]
    assert code == 0 and fixed == ["serve", "--project", str(home / "api")], said


def test_every_run_keeps_its_own_backup(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text('{"mcpServers": {"fs": {"command": "npx"}}}')
    texts = [config.read_text()]
    for n in range(3):
        code, said = run(capsys, "cursor", "--db", str(home / f"store{n}"))
        assert code == 0, said
        texts.append(config.read_text())
    backups = [config.with_name("mcp.json.bak"), config.with_name("mcp.json.bak.2"), config.with_name("mcp.json.bak.3")]
    assert [b.read_text() for b in backups] == texts[:3]  # the original first, then each run's
    assert f"the file as it was is {backups[2]}" in said


def test_a_private_file_stays_private_and_a_symlink_stays_a_symlink(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude.json"
    real.write_text(
        '{"mcpServers": {"github": {"url": "https://x.invalid", "headers": {"Authorization": "Bearer s"}}}}'
    )
    real.chmod(0o600)
    config = home / ".claude.json"
    config.symlink_to(real)

    for _ in range(3):  # a second and a third run too
        code, said = run(capsys, "claude-code", "--db", str(home / "store"))
        assert code == 0, said
        assert config.is_symlink() and config.resolve() == real
        assert stat.S_IMODE(real.stat().st_mode) == 0o600
        assert set(json.loads(real.read_text())["mcpServers"]) == {"github", "corrigenda"}
    backup = home / ".claude.json.bak"
    assert not backup.is_symlink() and stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert leftovers(home) == leftovers(dotfiles) == []


VSCODE_WITH_COMMENTS = """\
// my MCP servers
{
  "inputs": [/* none yet */],
  "servers": {
    // the file system, read-only
    "fs": {"type": "stdio", "command": "npx", "args": ["-y", "fs",],}, // trailing commas, as VS Code allows
  },
}
"""


def test_a_vscode_file_with_comments_and_trailing_commas_keeps_them_all(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / ".config" / "Code" / "User" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(VSCODE_WITH_COMMENTS)
    for n in range(3):
        code, said = run(capsys, "vscode", "--db", str(home / f"store{n}"))
        assert code == 0, said
        text = config.read_text()
        lines = iter(text.splitlines())
        assert all(line in lines for line in VSCODE_WITH_COMMENTS.splitlines()), text  # each, in order
        written = jsonc(text)
        assert written["servers"]["fs"] == {"type": "stdio", "command": "npx", "args": ["-y", "fs"]}
        assert written["servers"]["corrigenda"]["env"] == {"CORRIGENDA_DB": str(home / f"store{n}")}


def test_numbers_come_back_as_they_were_written(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".claude.json"
    config.write_text('{"numStartups": 12, "tipsShown": 1e400, "ratio": 1.10, "big": 12345678901234567890123,\n'
                      ' "mcpServers": {}}\n')  # fmt: skip
    code, said = run(capsys, "claude-code")
    assert code == 0, said
    text = config.read_text()
    assert "1e400" in text and "1.10" in text and "12345678901234567890123" in text
    assert "Infinity" not in text and "NaN" not in text


def test_a_file_holding_nan_is_refused_as_its_clients_refuse_it(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".claude.json"
    config.write_text('{"ratio": NaN, "mcpServers": {}}')
    code, said = run(capsys, "claude-code")
    assert code == 2 and said.count("\n") == 1 and str(config) in said and "NaN" in said
    assert config.read_text() == '{"ratio": NaN, "mcpServers": {}}' and not Path(f"{config}.bak").exists()


def test_a_lone_surrogate_escape_is_kept_as_written(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = home / ".claude.json"
    config.write_text('{"mcpServers": {"x": {"command": "x", "env": {"K": "\\ud800"}}}}')
    code, said = run(capsys, "claude-code")
    assert code == 0, said
    assert '"K": "\\ud800"' in config.read_text() and leftovers(home) == []


def test_a_client_writing_its_file_during_the_install_keeps_its_write(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_text('{"mcpServers": {"fs": {"command": "npx"}}}')
    landed: list[bool] = []

    def client_writes_after(read: Any) -> Any:
        def reading(self: Path, *args: Any, **kwargs: Any) -> Any:
            got = read(self, *args, **kwargs)
            if not landed and self.resolve() == config.resolve():  # the client saves just after our read
                landed.append(True)
                config.write_text('{"mcpServers": {"fs": {"command": "npx"}, "new": {"command": "uvx"}}}')
            return got

        return reading

    monkeypatch.setattr(Path, "read_text", client_writes_after(Path.read_text))
    monkeypatch.setattr(Path, "read_bytes", client_writes_after(Path.read_bytes))
    code, said = run(capsys, "cursor")
    assert code == 0, said
    assert landed and set(json.loads(config.read_text())["mcpServers"]) == {"fs", "new", "corrigenda"}


def _deep(depth: int) -> str:
    return '{"mcpServers": {}, "x": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize(
    ("case", "content", "expected"),
    [
        ("read-only file", b'{"mcpServers": {}}', "read-only"),
        ("read-only folder", b'{"mcpServers": {}}', "read-only"),
        ("folder in its place", None, "is a folder"),
        ("latin-1", '{"mcpServers": {"fs": {"command": "café"}}}'.encode("latin-1"), "not UTF-8"),
        ("deep nesting", _deep(100_000).encode(), "deeper than"),
    ],
)
def test_a_file_that_cannot_be_updated_safely_is_a_one_line_error(
    home: Path, capsys: pytest.CaptureFixture[str], case: str, content: bytes | None, expected: str
) -> None:
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir()
    if content is None:
        config.mkdir()
    else:
        config.write_bytes(content)
    if case == "read-only file":
        config.chmod(0o444)
    if case == "read-only folder":
        config.parent.chmod(0o555)
    try:
        code, said = run(capsys, "cursor")
    finally:
        config.parent.chmod(0o755)
    assert code == 2 and said.count("\n") == 1 and said.startswith("corrigenda: install: "), said
    assert str(config) in said and expected in said and "corrigenda install cursor --print" in said, said
    if content is not None:
        assert config.read_bytes() == content
    assert sorted(p.name for p in config.parent.iterdir()) == ["mcp.json"]  # no .bak, no .partial
