"""store/allocator.py: the C allocator's thresholds are set once per process on glibc, and a process whose
environment names its own is left as it asked. Each case is a fresh interpreter: the setting is per process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = (
    "from corrigenda.store.allocator import keep_search_buffers; print(keep_search_buffers(), keep_search_buffers())"
)


def _probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env={**clean, **env}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: elsewhere nothing is set")
def test_the_thresholds_are_set_once_on_glibc() -> None:
    assert _probe() == "True True"


@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_TRIM_THRESHOLD_": "1048576"},
        {"MALLOC_MMAP_THRESHOLD_": "1048576"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"},
    ],
)
def test_a_process_that_sets_its_own_thresholds_is_left_as_it_asked(env: dict[str, str]) -> None:
    assert _probe(**env) == "False False"
