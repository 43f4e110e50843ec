"""The thin side of the shared engine (engine.py): a command or a client's server that hands its work to
the one engine of its store, starting it when there is none. Standard library only, and little of it:
this runs before anything heavy is imported, and a CLI command through a warm engine costs what
starting Python costs.

Which engine: one per user, store and corrigenda version, reached through a per-user runtime
directory (`runtime_dir`, mode 0700, owned by the user). Its files there are named by a hash (`Target`)
of the code (`code`: another version, or a change of an editable install), the store's real path and
the engine's settings (model, similarity floor), so a store named through a symlink or with a trailing
slash is the same engine, and a forwarder of other code never meets this one's engine. Two transports
(`CORRIGENDA_ENGINE_TRANSPORT`): `unix`, a socket of mode 0600 in that folder (the default, Windows
aside); `tcp`, a loopback port named by a file in that folder, each connection proving it knows the
user's secret kept there (`prove`; the default on Windows, which has no Unix sockets). A store on a
bucket, `CORRIGENDA_ENGINE=off`, a runtime directory that is not private, or a socket path the system
cannot take: the command runs in its own process, as before, saying why on stderr unless it was
switched off.

What travels: one line of JSON (`hello`) with the command line, the working directory and the
variables a command or session reads for itself (CORRIGENDA_*, the project variables of the clients,
the login name), then the engine's one-line answer. A CLI command then gets its output and exit
status back; a stdio server's messages flow both ways, line by line. Should the engine stop while a
client is connected, the client's next message starts another (its `initialize` replayed) and each
request that was under way is answered with an error saying its outcome is unknown: nothing is sent
twice.

A forwarder that stays (`serve` on stdio, `ui`) first replaces itself with a lean interpreter
(`lean_command`: `python -I -S` importing this module alone, ~11 MiB where the console script's
interpreter held ~18): without site-packages and with nothing imported that it does not use (hashlib
would load OpenSSL, typing and pathlib their own weight).

Its parts, each imported by its own name in that interpreter: forward_target.py (which engine),
forward_dial.py (reaching one), forward_start.py (starting one; `connect`), forward_pump.py (a stdio
server's messages).
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing itself is ~2 MiB in a forwarder that never needs it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import IO

# As corrigenda.server's module, or by its own name in the lean interpreter (LEAN), whose path holds
# this folder and no package. code, hello and proof are named as forward's too (the tests, bench/engine.py).
if TYPE_CHECKING or __package__:
    from .forward_dial import hello as hello
    from .forward_dial import proof as proof
    from .forward_pump import Pump
    from .forward_start import Spawned, _start, connect
    from .forward_target import NoEngine, Target, _flag
    from .forward_target import code as code
else:
    from forward_dial import hello as hello
    from forward_dial import proof as proof
    from forward_pump import Pump
    from forward_start import Spawned, _start, connect
    from forward_target import NoEngine, Target, _flag
    from forward_target import code as code

SWITCH = "CORRIGENDA_ENGINE"  # "off": every command and server runs in its own process
OFF = ("off", "0", "no", "false")
COMMANDS = {"remember", "correct", "revoke", "reinstate", "link", "recall", "show", "why", "stats", "scopes",
            "list", "changes", "import", "export", "subject", "confirm", "check-every"}  # fmt: skip
ASKS = {"forget": "--yes"}  # a command that asks on the terminal unless told: through the engine when told
STAYS = {"serve", "ui"}  # forwarders that stay while their client does: each in a lean interpreter


def _line(stream: IO[bytes]) -> dict | None:
    raw = stream.readline()
    if not raw:
        return None
    said = json.loads(raw)
    return said if isinstance(said, dict) else None


def run_command(target: Target, argv: Sequence[str], env: Mapping[str, str]) -> int:
    """A CLI command run by the engine: its output written here, its exit status returned."""
    sock, _ = connect("cli", argv, env, target)
    with sock, sock.makefile("rb") as answers:
        result = _line(answers)
    if result is None:
        sys.stderr.write(
            "corrigenda: the shared engine stopped before it answered (killed?); a write may or may not have "
            "landed: look with `corrigenda list` before doing it again\n"
        )
        return 1
    sys.stdout.write(result.get("stdout", ""))
    sys.stderr.write(result.get("stderr", ""))
    return int(result.get("status", 1))


def serve(target: Target, argv: Sequence[str], env: Mapping[str, str], engine: Spawned | None = None) -> int:
    sock, _ = connect("mcp", argv, env, target, engine=engine)
    return Pump(target, argv, env, sock).run()


def wait_for_web_view(
    target: Target, argv: Sequence[str], env: Mapping[str, str], engine: Spawned | None = None
) -> int:
    """`corrigenda ui` through the engine: it serves the web view while this process stays (Ctrl-C)."""
    sock, answer = connect("ui", argv, env, target, engine=engine)
    sys.stderr.write(answer.get("said", ""))
    sys.stderr.flush()
    with sock:
        try:
            while sock.recv(1 << 16):
                pass
        except KeyboardInterrupt:
            sys.stderr.write("corrigenda: stopped\n")
            return 130
    return int(answer.get("status", 0))


def engine_command(action: str, argv: Sequence[str], env: Mapping[str, str]) -> int:
    """`corrigenda engine status|stop`: what the store's engine says of itself, or that there is none."""
    try:
        if env.get(SWITCH, "").lower() in OFF:
            raise NoEngine("")
        sock, answer = connect(action, argv, env, Target(argv, env), start=False)
    except NoEngine as exc:
        sys.stdout.write(f"{exc or 'the shared engine is switched off (CORRIGENDA_ENGINE=off)'}\n")
        return 0
    with sock:
        sys.stdout.write(answer.get("said", "") + "\n")
    return 0


def _serving(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether `serve` is a stdio server with no web view beside it: the one the engine carries."""
    transport = _flag(argv, "--transport") or env.get("CORRIGENDA_TRANSPORT") or "stdio"
    web_view = "--ui" in argv or env.get("CORRIGENDA_UI", "").lower() in ("1", "true", "yes", "on")
    return transport == "stdio" and not web_view


# This module by its own name from its own folder, put last on the path: after the standard library, which
# its neighbours must not hide (server/http.py). Imported, not run as a script, so that its cached bytecode
# is read: compiling it took the process ~1.5 MiB more.
LEAN = (
    "import sys; sys.path.append(sys.argv.pop(1)); import forward; sys.exit(forward.lean(*sys.argv[1:3], sys.argv[3:]))"
)


def lean_command(target: Target, argv: Sequence[str], engine: Spawned | None) -> list[str]:
    """The command line of this forwarder in a lean interpreter: no site-packages (-S), nothing from the
    environment (-I), the store already found (finding the default one takes platformdirs, in
    site-packages), and the pid of the engine it started, if it did (0: none)."""
    here = os.path.dirname(os.path.realpath(__file__))
    return [sys.executable, "-I", "-S", "-c", LEAN, here, target.store, str(engine.pid if engine else 0), *argv]


def dispatch(
    argv: Sequence[str], env: Mapping[str, str] | None = None, store: str | None = None, engine: Spawned | None = None
) -> int | None:
    """Run `argv` through the store's engine, or None: the caller runs it in this process. A forwarder
    that stays first becomes a lean interpreter (`lean_command`), which calls this again with `store`
    (and `engine`, the one it started: a new engine starts before the lean interpreter does, not after)."""
    env = os.environ if env is None else env
    if not argv or {"-h", "--help", "--version"} & set(argv):
        return None
    command = argv[0]
    if command == "engine" and len(argv) >= 2 and argv[1] in ("status", "stop"):
        return engine_command(argv[1], argv[2:], env)
    if command in ASKS and ASKS[command] not in argv:
        return None
    if command not in COMMANDS | ASKS.keys() | STAYS or (command == "serve" and not _serving(argv, env)):
        return None
    try:
        if env.get(SWITCH, "").lower() in OFF:
            raise NoEngine("")
        target = Target(argv, env, store)
        if command in STAYS and store is None and os.name != "nt":  # Windows has no exec: it stays as it is
            started = None if target.has_address() else _start(target, env)
            sys.stderr.flush()
            os.execv(sys.executable, lean_command(target, argv, started if isinstance(started, Spawned) else None))
        if command == "serve":
            return serve(target, argv, env, engine)
        if command == "ui":
            return wait_for_web_view(target, argv, env, engine)
        return run_command(target, argv, env)
    except NoEngine as exc:
        if str(exc):
            sys.stderr.write(f"corrigenda: {exc}; running in this process\n")
        return None


def lean(store: str, engine: str, argv: Sequence[str]) -> int:
    """The lean forwarder (`lean_command`); when it finds no engine, the command in its own process: the
    console script's interpreter again, the engine switched off (dispatch has said why)."""
    try:
        done = dispatch(argv, store=store, engine=Spawned(int(engine)) if int(engine) else None)
    except KeyboardInterrupt:
        sys.stderr.write("corrigenda: stopped\n")
        return 130
    if done is not None:
        return done
    sys.stderr.flush()
    in_process = [sys.executable, "-m", "corrigenda.server.entry", *argv]
    os.execve(sys.executable, in_process, {**os.environ, SWITCH: "off"})
    return 1  # not reached: execve does not return
