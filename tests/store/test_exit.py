"""A process's exit waits for the threads Python did not start to leave its code (store/storage/upkeep.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# A thread started by C, as LanceDB's workers are, that is in Python code, and between two of its
# steps lets go of the interpreter, when the program ends: as a worker handing LanceDB's last result
# to its event loop does.
NATIVE_THREAD_AT_EXIT = """
import ctypes, sys, time
if sys.argv[2] == "store":
    import corrigenda.store  # noqa: F401
RUN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

def run(_):
    time.sleep(0.3)
    with open(sys.argv[1], "w") as done:
        done.write("finished")

started = RUN(run)
thread = ctypes.c_ulong()
assert ctypes.CDLL(None).pthread_create(ctypes.byref(thread), None, started, None) == 0
time.sleep(0.05)  # the thread is in its sleep
"""


def _exit_with_a_native_thread_in_python(tmp_path: Path, imports: str) -> bool:
    done = tmp_path / f"{imports}.done"
    finished = subprocess.run(
        [sys.executable, "-c", NATIVE_THREAD_AT_EXIT, str(done), imports], capture_output=True, timeout=60
    )
    assert finished.returncode == 0, finished.stderr.decode(errors="replace")
    return done.exists()


def test_a_program_using_the_store_lets_a_native_thread_in_python_finish_before_it_exits(tmp_path: Path) -> None:
    assert _exit_with_a_native_thread_in_python(tmp_path, "store")
    # without the store's exit hook the interpreter stops the thread at its next step: the case shown
    assert not _exit_with_a_native_thread_in_python(tmp_path, "nothing")
