"""The code stays ruff- and mypy-clean (the house style asks for both)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        out = subprocess.run([BIN / "ruff", *args], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("paths", [["store", "server", "bench"], ["tests"]], ids=["product", "tests"])
def test_mypy(paths: list[str]) -> None:
    # apart: tests import bench's scripts as bench.faults, bench's scripts one another as faults
    out = subprocess.run([BIN / "mypy", *paths], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
