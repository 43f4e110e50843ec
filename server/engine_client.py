"""A client of the shared engine (engine.py) as the engine keeps it: its record, the process's variables
and folder lent to it while it runs, the memory its work freed given back, and how `status` says how
long and how much."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .forward_target import CLIENT_VARIABLES


@dataclass
class Client:
    kind: str
    pid: int
    cwd: str
    since: float = field(default_factory=time.time)


@contextlib.contextmanager
def client_environment(env: Mapping[str, str], cwd: str) -> Iterator[None]:
    """The process's variables and folder as a client's (the caller holds Engine.context)."""
    saved, here = dict(os.environ), os.getcwd()
    for name in [n for n in os.environ if n.startswith("CORRIGENDA_") or n in CLIENT_VARIABLES]:
        del os.environ[name]
    os.environ.update(env)
    try:
        os.chdir(cwd)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(here)


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _rss_mib() -> float | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None
