"""The human commands print what an agent would receive."""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from corrigenda.store import Draft, InvalidArgument, Memory
from corrigenda.store.embedder import SentenceTransformerEmbedder

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))


def run(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CORRIGENDA_PERSON": "Ada", **variables}
    # run outside any work tree, as from a home folder: the scope is "default" unless a flag says otherwise
    return subprocess.run(
        [CORRIGENDA, *args], capture_output=True, text=True, timeout=120, env=env, cwd=tempfile.gettempdir()
    )


def test_recall_and_show_print_chains(db: str, memory: Memory) -> None:
    old = memory.remember(Draft(text="the service listens on 8080")).note
    new = memory.correct(old.id, Draft(text="the service listens on 9090"), reason="moved").note

    recalled = run("recall", "which port?", "--db", db)
    assert recalled.returncode == 0, recalled.stderr
    lines = recalled.stdout.splitlines()
    assert any(line.strip().startswith("NOW") and "9090" in line for line in lines)
    assert any(line.strip().startswith("HISTORY") and "8080" in line for line in lines)

    shown = run("show", old.id, "--db", db, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["note"]["state"] == "superseded" and data["chain"]["heads"][0]["id"] == new.id

    missing = run("show", "n_00000000000000000000000000", "--db", db)
    assert missing.returncode == 2 and "n_00000000000000000000000000" in missing.stderr


def test_cli_commands_do_not_import_the_mcp_sdk_nor_sentence_transformers(db: str, memory: Memory) -> None:
    """A command a person types pays only for what it uses: no server (the MCP SDK), and the model on
    torch alone (store/encoder.py)."""
    memory.remember(Draft(text="the service listens on 9090"))
    script = (
        "import sys\n"
        "from corrigenda.server.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "loaded = [m for m in ('mcp', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "print('loaded:', *loaded, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    for args in (
        ["scopes", "--db", db],
        ["recall", "which port?", "--db", db],
        ["remember", "deploys run on Tuesdays", "--db", db],
    ):
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tempfile.gettempdir(),
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == "loaded:", (args, done.stderr)


def test_a_read_command_on_a_missing_store_is_an_error_and_makes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-store"
    for command in (["recall", "anything"], ["stats"], ["list"], ["scopes"], ["changes", "--since", "1d"]):
        done = run(*command, "--db", str(missing))
        assert done.returncode == 2, command
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"corrigenda: {command[0]}: there is no store at {missing} (from --db): mistyped?"), line
        assert not missing.exists()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store")
    done = run("stats", "--db", str(a_file))
    assert done.returncode == 2 and "is a file, not a store directory" in done.stderr
    assert a_file.read_text() == "not a store"


def test_lancedb_s_in_memory_storage_is_refused_as_a_store_at_once(embedder: SentenceTransformerEmbedder) -> None:
    """memory:// gives each Lance dataset the engine opens an empty memory of its own: a store there would
    fail at its first read with Lance's "not found" for a manifest. Refused up front, naming --db."""
    for command in (["scopes"], ["remember", "a note"], ["serve"]):
        done = run(*command, "--db", "memory://notes")
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith("corrigenda: --db: 'memory://notes' is LanceDB's in-memory storage"), done.stderr
        assert "Traceback" not in done.stderr
    with pytest.raises(InvalidArgument) as refused:
        Memory("memory://", embedder)
    assert refused.value.field == "db"


def test_a_person_remembers_corrects_revokes_reinstates_links_and_forgets(tmp_path: Path) -> None:
    db = str(tmp_path / "store")
    made = run("remember", "The service listens on 8080", "--db", db, "--scope", "ops", "--subject", "port", "--json")
    assert made.returncode == 0, made.stderr
    assert made.stderr.splitlines() == [f"corrigenda: made a new store at {db}"]  # once, on the write that made it
    old = json.loads(made.stdout)["note"]
    assert old["actor"] == "person:Ada" and old["subject"] == "port"
    again = run("remember", "Deploys are on Fridays", "--db", db, "--scope", "ops", "--json")
    assert again.stderr == "" and json.loads(again.stdout)["scope_created"] is False

    fixed = run("correct", old["id"], "The service listens on 9090", "--reason", "moved", "--db", db, "--json")
    assert fixed.returncode == 0, fixed.stderr
    new = json.loads(fixed.stdout)["note"]
    assert new["subject"] == "port"  # kept from the note it corrects
    revoked = run("revoke", new["id"], "--reason", "it never moved", "--db", db, "--json")
    assert json.loads(revoked.stdout)["chain"]["heads"][0]["id"] == old["id"]  # revoking a correction brings back
    assert run("reinstate", new["id"], "--reason", "it did move", "--db", db).returncode == 0
    deploys = json.loads(again.stdout)["note"]["id"]
    linked = run("link", deploys, "depends_on", new["id"], "--db", db, "--json")
    assert json.loads(linked.stdout)["event"]["kind"] == "depends_on"

    history = json.loads(run("show", old["id"], "--db", db, "--json").stdout)
    assert history["chain"]["heads"][0]["id"] == new["id"]
    assert {e["actor"] for e in history["events"]} == {"person:Ada"}

    unconfirmed = run("forget", deploys, "--reason", "asked", "--db", db)  # no terminal to ask on
    assert unconfirmed.returncode == 2 and "not confirmed, nothing erased" in unconfirmed.stderr
    assert run("show", deploys, "--db", db).returncode == 0
    erased = run("forget", deploys, "--reason", "asked", "--yes", "--db", db, "--json")
    assert erased.returncode == 0 and json.loads(erased.stdout)["changed"] is True
    assert run("show", deploys, "--db", db).returncode == 2


def test_usage_errors_are_one_line_and_version_is_printed() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("corrigenda ")
    for args, says in (
        (["recall"], "the following arguments are required: query"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["list", "--limit", "many"], "argument --limit: invalid int value: 'many'"),
        (["correct", "n_x", "text"], "the following arguments are required: --reason"),
    ):
        done = run(*args)
        assert done.returncode == 2, args
        (line,) = done.stderr.splitlines()
        assert line.startswith("corrigenda: ") and says in line and "--help" in line, line


def test_times_take_iso_dates_and_spans_ago(db: str, memory: Memory) -> None:
    memory.remember(Draft(text="Backups run at two"))
    note = memory.remember(Draft(text="Backups run at three")).note
    memory.revoke(note.id, reason="a test")
    for since in ("2d", "90m", "2026-01-01", "2026-01-01T00:00:00Z"):
        done = run("changes", "--since", since, "--db", db, "--scope", "default", "--json")
        assert done.returncode == 0, (since, done.stderr)
        assert [c["event"]["kind"] for c in json.loads(done.stdout)["changes"]] == ["revokes"], since
    bad = run("changes", "--since", "last week", "--db", db)
    assert bad.returncode == 2 and "a span ago (30m, 12h, 2d, 1w)" in bad.stderr


def test_every_read_command_prints_json(db: str, memory: Memory) -> None:
    note = memory.remember(Draft(text="The cache is Redis")).note
    for command in (
        ["recall", "cache"], ["show", note.id], ["why", note.id], ["stats"], ["scopes"], ["list"],
        ["changes", "--since", "1d"],
    ):  # fmt: skip
        done = run(*command, "--db", db, "--scope", "default", "--json")
        assert done.returncode == 0, (command, done.stderr)
        assert isinstance(json.loads(done.stdout), dict), command


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("serve", "--transport", "http", "--port", str(port), "--db", str(tmp_path))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"corrigenda: cannot listen on 127.0.0.1:{port} (") and "choose another --port" in line


def test_serve_in_a_terminal_says_what_it_waits_for(tmp_path: Path) -> None:
    """On a terminal (a pty here) stdio `serve` says on stderr that it waits for a client; the words
    never go to stdout, which belongs to the protocol."""
    leader, follower = pty.openpty()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [CORRIGENDA, "serve", "--db", str(tmp_path / "store")],
        stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        first = process.stderr.readline()  # type: ignore[union-attr]
        second = process.stderr.readline()  # type: ignore[union-attr]
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=30)
        os.close(leader)
        os.close(follower)
    assert first == (
        f"corrigenda: there is no store at {tmp_path / 'store'} (from --db) yet; an agent's first write makes it "
        "(until then a read says there is none)\n"
    )
    assert second.startswith("corrigenda: an MCP server on stdio, waiting for a client's messages on stdin")
    assert "corrigenda install CLIENT" in second and stdout == ""


def test_scopes_prints_a_page_and_finds_a_scope_by_part_of_its_name(db: str, memory: Memory) -> None:
    for name in ("web-app", "Web API", "cli"):
        memory.remember(Draft(text=f"A note about {name}"), scope=name)
    first = run("scopes", "--db", db, "--limit", "2", "--json")
    assert first.returncode == 0, first.stderr
    page = json.loads(first.stdout)
    assert [s["scope"] for s in page["scopes"]] == ["cli", "Web API"] and page["next_offset"] == 2
    assert page == memory.scope_page(limit=2, default_scope="default").model_dump(mode="json")
    rest = run("scopes", "--db", db, "--limit", "2", "--offset", "2")
    assert "showing 3–3 of 3" in rest.stdout and "'web-app'" in rest.stdout and "More" not in rest.stdout
    found = json.loads(run("scopes", "--db", db, "--contains", "WEB", "--json").stdout)
    assert {s["scope"] for s in found["scopes"]} == {"web-app", "Web API"} and found["total"] == 2
    for flag, value in (("--limit", "0"), ("--limit", "501"), ("--offset", "-1")):
        refused = run("scopes", "--db", db, flag, value)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.startswith(f"corrigenda: scopes: {flag[2:]}: "), refused.stderr


def test_a_read_of_no_store_says_where_the_path_came_from_and_what_to_type(tmp_path: Path) -> None:
    home = tmp_path / "home"  # a new user's: nothing stored yet at the per-user default
    first = run("recall", "which port?", HOME=str(home), XDG_DATA_HOME="", CORRIGENDA_DB="")
    assert first.returncode == 2, first.stderr
    (line,) = first.stderr.splitlines()
    assert "(the default: the per-user data directory)" in line and '`corrigenda remember "…"` makes it' in line
    assert "--db:" not in line and "`corrigenda serve` and the write commands make one" not in line, line
    typo = tmp_path / "stroe"
    flag = run("list", "--db", str(typo))
    assert f"there is no store at {typo} (from --db): mistyped?" in flag.stderr and "leave out --db" in flag.stderr
    variable = run("list", CORRIGENDA_DB=str(typo))
    assert f"there is no store at {typo} (from CORRIGENDA_DB)" in variable.stderr, variable.stderr
    assert "unset CORRIGENDA_DB" in variable.stderr and not typo.exists()


def test_an_empty_db_is_refused_at_start(tmp_path: Path) -> None:
    for done in (run("serve", "--db", ""), run("serve", CORRIGENDA_DB=" ")):
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.splitlines()
        assert "--db (or CORRIGENDA_DB) is empty" in line and "Traceback" not in line, line


def test_the_cli_speaks_commands_not_tool_calls(db: str, memory: Memory, tmp_path: Path) -> None:
    old = memory.remember(Draft(text="the service listens on 8080", subject="service.port")).note
    memory.correct(old.id, Draft(text="the service listens on 9090"), reason="moved")
    refused = run("correct", old.id, "the service listens on 7070", "--reason", "r", "--db", db)
    assert refused.returncode == 2 and "pass --fork" in refused.stderr and "fork=true" not in refused.stderr
    forked = run("correct", old.id, "the service listens on 7070", "--reason", "kept apart", "--fork", "--db", db)
    assert forked.returncode == 0, forked.stderr

    hinted = run(
        "remember", "the service listens on 6060", "--subject", "service.port", "--db", db, "--scope", "default"
    )
    assert hinted.returncode == 0, hinted.stderr
    assert "corrigenda link n_" in hinted.stdout and "link(src_id" not in hinted.stdout, hinted.stdout

    bad = run("show", "12", "--db", db)
    assert "not a corrigenda id" in bad.stderr and "this server issued" not in bad.stderr, bad.stderr

    out = tmp_path / "backup.jsonl"
    exported = run("export", "--db", db, "--scope", "default", "--out", str(out))
    assert exported.returncode == 0 and exported.stderr.strip() == (
        f"corrigenda: wrote 4 notes and 2 events (scopes: default) to {out}"
    ), exported.stderr
    alone = tmp_path / "one"
    Memory(str(alone), memory.embedder).remember(Draft(text="a single note"), scope="solo")
    single = run("export", "--db", str(alone), "--out", str(out))
    assert "wrote 1 note and 0 events" in single.stderr, single.stderr
    imported = run("import", str(out), "--db", str(tmp_path / "restored"))
    assert "1 note and 0 events written" in imported.stdout, imported.stdout

    missing = run("import", str(tmp_path / "nofile.jsonl"), "--db", db)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Error" not in missing.stderr

    piped = subprocess.run(
        f"{CORRIGENDA} export --db {db} | head -1", shell=True, capture_output=True, text=True, timeout=120,
        cwd=tempfile.gettempdir(), env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert piped.stdout.startswith('{"type": "corrigenda-export"') or '"corrigenda-export"' in piped.stdout
    assert piped.stderr == "", piped.stderr

    for command in ("serve", "ui"):
        flagged = run(command, "--json", "--db", db)
        assert flagged.returncode == 2 and "unrecognized arguments: --json" in flagged.stderr, flagged.stderr
