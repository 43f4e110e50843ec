"""The code stays ruff- and mypy-clean (the house style asks for both)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        out = subprocess.run([BIN / "ruff", *args], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def test_mypy() -> None:
    out = subprocess.run([BIN / "mypy", "store", "server", "bench"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
