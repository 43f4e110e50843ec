"""Starting an engine (forward.py): spawned in the background with its own variables, after a line saying
which settings differ when another serves the same store; and `connect`, a connection to the engine of
a target, its hello answered, started when there is none. Standard library only (forward.py)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

try:  # POSIX only (the test of platforms reads for these): Windows takes another way (spawn)
    from os import WNOHANG, posix_spawn
except ImportError:
    WNOHANG, posix_spawn = 0, None  # type: ignore[assignment,misc]

TYPE_CHECKING = False  # typing itself is ~2 MiB in a forwarder that never needs it
if TYPE_CHECKING:
    import socket
    import subprocess
    from collections.abc import Mapping, Sequence

# As corrigenda.server's module, or by its own name in the lean interpreter (forward.LEAN), whose
# path holds this folder and no package.
if TYPE_CHECKING or __package__:
    from .forward_dial import _first_line, _running, dial, hello
    from .forward_target import FLOOR, IDLE, SETTINGS, START_WAIT, TRANSPORT, NoEngine, Target
else:
    from forward_dial import _first_line, _running, dial, hello
    from forward_target import FLOOR, IDLE, SETTINGS, START_WAIT, TRANSPORT, NoEngine, Target

ENGINE_VARIABLES = {FLOOR, "CORRIGENDA_LOG_LEVEL", "CORRIGENDA_TORCH_THREADS", IDLE, TRANSPORT}


def _client_variable(name: str) -> bool:
    return name.startswith("CORRIGENDA_") or name in ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS")


class Spawned:
    """An engine this forwarder started, as far as it can tell: `poll`, as subprocess.Popen's."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.status: int | None = None

    def poll(self) -> int | None:
        """Its exit status once it has ended; None while it runs."""
        if self.status is None:
            pid, status = os.waitpid(self.pid, WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status


def _inheritable() -> list[int]:
    """This process's descriptors past 0-2 that a child would inherit (a client may leave some open in
    the process it starts): the engine outlives its client and must hold none of them, as subprocess's
    close_fds would have it."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"):
            with contextlib.suppress(OSError, ValueError):
                if int(name) > 2 and os.get_inheritable(int(name)):
                    found.append(int(name))
    return found


def _spawn(target: Target, env: Mapping[str, str]) -> Spawned | subprocess.Popen[bytes]:
    """Start the engine of `target` in the background, in a session of its own (a client that stops does
    not stop it), its output in a log beside its socket. With posix_spawn where there is one: subprocess
    would cost the forwarder that stays ~1 MiB more. `-P`: the folder it was started in is not on its
    path (it leaves that folder as soon as it runs)."""
    # The engine's own: the store and model (its arguments), how it logs, threads and listens. What is a
    # client's (its scope, project, person, CORRIGENDA_DB itself) each client brings, and must not be the engine's.
    engine_env = {k: v for k, v in env.items() if k in ENGINE_VARIABLES or not _client_variable(k)}
    engine_env[TRANSPORT] = target.transport
    command = [sys.executable, "-P", "-m", "corrigenda.server.engine", target.address, target.store, target.model]
    log = os.open(target.stem + ".log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if posix_spawn is not None:
            output = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, log, 1),
                      (os.POSIX_SPAWN_DUP2, log, 2), *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable())]  # fmt: skip
            return Spawned(posix_spawn(sys.executable, command, engine_env, file_actions=output, setsid=True))
        import subprocess

        detached = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=engine_env, creationflags=detached
        )
    finally:
        os.close(log)


def what_differs(target: Target) -> str | None:
    """One line for stderr when another engine already serves this store with other settings (or other
    code): which differ, and that this command starts an engine of its own. None when none does."""
    wanted = target.settings()
    found = []  # (how many settings differ, the engine's pid, its settings)
    with contextlib.suppress(OSError):
        for name in os.listdir(target.folder):
            if not name.endswith(".json") or name == target.key + ".json":
                continue
            try:
                with open(os.path.join(target.folder, name), "rb") as file:
                    about = json.loads(file.read())
                pid = int(about["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            differs = [k for k in wanted if str(about.get(k, "")) != wanted[k]]
            if about.get("store") == target.store and differs and _running(pid):
                found.append((len(differs), pid, {k: about.get(k) for k in differs}))
    if not found:
        return None
    _, pid, theirs = min(found)  # the nearest
    said = " and ".join(f"{SETTINGS[k]} {_shown(v)}" for k, v in theirs.items())
    ours = " and ".join(f"{SETTINGS[k]} {_shown(wanted[k])}" for k in theirs)
    return (
        f"corrigenda: the engine of {target.store} (pid {pid}) runs with {said}; this command's {ours}: "
        "starting an engine of its own for that store\n"
    )


def _shown(value: object) -> str:
    return str(value) if value not in (None, "") else "the default"


def _start(target: Target, env: Mapping[str, str]) -> Spawned | subprocess.Popen[bytes]:
    """A new engine for `target`, after a line saying which settings differ if another serves its store."""
    if differs := what_differs(target):
        sys.stderr.write(differs)
    return _spawn(target, env)


def connect(
    kind: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    target: Target,
    start: bool = True,
    engine: Spawned | subprocess.Popen[bytes] | None = None,
) -> tuple[socket.socket, dict]:
    """A connection to the engine of `target`, its hello answered: started if there is none and `start`
    (`engine`: one this process has started already). NoEngine when it cannot be had."""
    started = None if engine is None else time.monotonic()
    log = target.stem + ".log"
    while (dialed := dial(target.stem)) is None:
        if not start:
            raise NoEngine(f"no engine is running for {target.store}")
        if started is None:
            started = time.monotonic()
            engine = _start(target, env)
        elif engine is not None and engine.poll() == 0:  # another engine held the lock: it may be stopping
            engine = _spawn(target, env) if time.monotonic() - started < START_WAIT else None
            time.sleep(0.2)
        elif engine is not None and engine.poll() is not None:
            raise NoEngine(f"the engine could not start (its log: {log})")
        elif time.monotonic() - started > START_WAIT:
            raise NoEngine(f"the engine did not start within {START_WAIT:.0f} s (its log: {log})")
        time.sleep(0.05)
    sock, proven = dialed
    try:
        sock.settimeout(START_WAIT)
        sock.sendall(hello(kind, argv, env, proven))
        answer = _first_line(sock)
        sock.settimeout(None)
    except (OSError, ValueError) as exc:
        sock.close()
        raise NoEngine(f"the engine did not answer ({exc}; its log: {log})") from None
    if answer is None or not answer.get("ok"):
        sock.close()
        why = answer.get("why") if answer else "it closed the connection"
        raise NoEngine(f"the engine refused: {why} (its log: {log})")
    return sock, answer
