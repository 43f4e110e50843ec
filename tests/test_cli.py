"""The human commands print what an agent would receive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from corrigenda.store import Draft, Memory

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([CORRIGENDA, *args], capture_output=True, text=True, timeout=120, env=env)


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
