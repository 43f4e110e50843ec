"""The thin side of the shared engine (engine.py): a command or a client's server that hands its work to
the one engine of its store, starting it when there is none. Standard library only: this runs before
anything heavy is imported, and a CLI command through a warm engine costs what starting Python costs.

Which engine: one per user, store and corrigenda version, behind a Unix socket in a per-user runtime
directory (`runtime_dir`, mode 0700, owned by the user; the socket 0600). Its name is a hash of the
code (`code`: another version, or a change of an editable install), the store's real path and the
model, so a store named through a symlink or with a trailing slash is the same engine, and a
forwarder of other code never meets this one's engine. A store
on a bucket, Windows, `CORRIGENDA_ENGINE=off`, a runtime directory that is not private, or a socket
path the system cannot take: the command runs in its own process, as before, saying why on stderr
unless it was switched off.

What travels: one line of JSON (`hello`) with the command line, the working directory and the
variables a command or session reads for itself (CORRIGENDA_*, the project variables of the clients,
the login name), then the engine's one-line answer. A CLI command then gets its output and exit
status back; a stdio server's messages flow both ways, line by line. Should the engine stop while a
client is connected, the client's next message starts another (its `initialize` replayed) and each
request that was under way is answered with an error saying its outcome is unknown: nothing is sent
twice.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

try:
    from os import getuid
except ImportError:  # Windows: no engine (`usable` says so)
    getuid = None  # type: ignore[assignment]

SWITCH = "CORRIGENDA_ENGINE"  # "off": every command and server runs in its own process
RUNTIME = "CORRIGENDA_RUNTIME_DIR"  # where the engines' sockets live (default: runtime_dir)
IDLE = "CORRIGENDA_ENGINE_IDLE"  # seconds an engine with no client waits before it exits (engine.py)
# What a command or a session reads from its own environment: sent along, applied for it alone.
CLIENT_VARIABLES = ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS", "LOGNAME", "USER", "USERNAME", "HOME")
COMMANDS = {"remember", "correct", "revoke", "reinstate", "link", "recall", "show", "why", "stats", "scopes",
            "list", "changes", "import", "export"}  # fmt: skip
ASKS = {"forget": "--yes"}  # a command that asks on the terminal unless told: through the engine when told
START_WAIT = 180.0  # seconds for a new engine to answer: it imports torch and LanceDB first
SOCKET_PATH_MAX = 100  # bytes: sun_path holds 104 (macOS) or 108 (Linux) with its terminating NUL
DEFAULT_MODEL = "all-MiniLM-L6-v2"


class NoEngine(Exception):
    """This command runs in its own process; the message says why (empty: switched off)."""


@functools.cache  # this process's code: read once (a socket's name and every hello carry it)
def code() -> str:
    """Which code this is: a digest of the name, size and time of every module of corrigenda's two
    packages (~80 stat calls), so that a forwarder and an engine of different code never meet, even
    one version apart in an editable install (and importlib.metadata stays unimported: ~30 ms)."""
    digest = hashlib.sha256()
    top = Path(__file__).resolve().parent.parent  # site-packages/corrigenda, or the clone's root
    for package in ("store", "server"):
        for module in sorted((top / package).rglob("*.py")):
            info = module.stat()
            digest.update(f"{module.relative_to(top)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _flag(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def store_of(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """The store a command names (--db, CORRIGENDA_DB, else the per-user default), by its real path."""
    db = _flag(argv, "--db") or env.get("CORRIGENDA_DB")
    if not db:
        from platformdirs import user_data_dir

        db = user_data_dir("corrigenda", appauthor=False)
    if "://" in db:
        raise NoEngine(f"the store {db} is in a bucket, which every process opens itself")
    return os.path.realpath(os.path.expanduser(db))


def runtime_dir(env: Mapping[str, str]) -> Path:
    """The per-user folder of the engines' sockets, made 0700 if missing; NoEngine if it is anyone
    else's or others may enter it."""
    if getuid is None or not hasattr(socket, "AF_UNIX") or os.name == "nt":
        raise NoEngine("no shared engine on this system (Unix sockets only)")
    base = env.get(RUNTIME) or (
        os.path.join(env["XDG_RUNTIME_DIR"], "corrigenda")
        if env.get("XDG_RUNTIME_DIR")
        else os.path.join(tempfile.gettempdir(), f"corrigenda-{getuid()}")
    )
    folder = Path(base)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    info = folder.lstat()
    if info.st_uid != getuid() or info.st_mode & 0o077 or not folder.is_dir() or folder.is_symlink():
        raise NoEngine(f"{folder} is not a private folder of this user (mode 0700, owned by you)")
    return folder


def socket_path(argv: Sequence[str], env: Mapping[str, str]) -> Path:
    """Where the engine of the store and model a command names listens (module docstring)."""
    store = store_of(argv, env)
    model = _flag(argv, "--model") or env.get("CORRIGENDA_MODEL") or DEFAULT_MODEL
    floor = env.get("CORRIGENDA_MIN_SIMILARITY", "")
    key = hashlib.sha256(f"{code()}\n{store}\n{model}\n{floor}".encode()).hexdigest()[:20]
    path = runtime_dir(env) / f"{key}.sock"
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise NoEngine(f"the socket path {path} is too long for this system; set {RUNTIME} to a shorter folder")
    return path


def hello(kind: str, argv: Sequence[str], env: Mapping[str, str]) -> bytes:
    sent = {k: v for k, v in env.items() if k.startswith("CORRIGENDA_") or k in CLIENT_VARIABLES}
    said = {"corrigenda": code(), "kind": kind, "argv": list(argv), "cwd": os.getcwd(), "env": sent,
            "pid": os.getpid()}  # fmt: skip
    return json.dumps(said).encode() + b"\n"


ENGINE_VARIABLES = {"CORRIGENDA_MIN_SIMILARITY", "CORRIGENDA_LOG_LEVEL", "CORRIGENDA_TORCH_THREADS", IDLE}


def _client_variable(name: str) -> bool:
    return name.startswith("CORRIGENDA_") or name in ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS")


def _spawn(path: Path, argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start the engine of `path` in the background, in a session of its own (a client that stops does
    not stop it), its output in a log beside the socket."""
    # The engine's own: the store and model (its arguments), how it logs and threads. What is a client's
    # (its scope, project, person, CORRIGENDA_DB itself) each client brings, and must not be the engine's.
    engine_env = {k: v for k, v in env.items() if k in ENGINE_VARIABLES or not _client_variable(k)}
    model = _flag(argv, "--model") or env.get("CORRIGENDA_MODEL") or DEFAULT_MODEL
    log = os.fdopen(os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
    with log:
        return subprocess.Popen(
            [sys.executable, "-m", "corrigenda.server.engine", str(path), store_of(argv, env), model],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", env=engine_env, start_new_session=True,
        )  # fmt: skip


def connect(kind: str, argv: Sequence[str], env: Mapping[str, str], start: bool = True) -> tuple[socket.socket, dict]:
    """A connection to the engine of the store `argv` and `env` name, its hello answered: started if
    there is none and `start`. NoEngine when it cannot be had."""
    if env.get(SWITCH, "").lower() in ("off", "0", "no", "false"):
        raise NoEngine("")
    path = socket_path(argv, env)
    started = None
    engine: subprocess.Popen[bytes] | None = None
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if not start:
                raise NoEngine(f"no engine is running for {store_of(argv, env)}") from None
            if started is None:
                started = time.monotonic()
                engine = _spawn(path, argv, env)
            elif engine is not None and engine.poll() == 0:  # another engine held the lock: it may be stopping
                engine = _spawn(path, argv, env) if time.monotonic() - started < START_WAIT else None
                time.sleep(0.2)
            elif engine is not None and engine.poll() is not None:
                raise NoEngine(f"the engine could not start (its log: {path.with_suffix('.log')})") from None
            elif time.monotonic() - started > START_WAIT:
                raise NoEngine(
                    f"the engine did not start within {START_WAIT:.0f} s (its log: {path.with_suffix('.log')})"
                ) from None
            time.sleep(0.05)
    try:
        sock.settimeout(START_WAIT)
        sock.sendall(hello(kind, argv, env))
        answer = _first_line(sock)
        sock.settimeout(None)
    except OSError as exc:
        sock.close()
        raise NoEngine(f"the engine did not answer ({exc}; its log: {path.with_suffix('.log')})") from None
    if answer is None or not answer.get("ok"):
        sock.close()
        why = answer.get("why") if answer else "it closed the connection"
        raise NoEngine(f"the engine refused: {why} (its log: {path.with_suffix('.log')})")
    return sock, answer


def _first_line(sock: socket.socket) -> dict | None:
    """The engine's answer to a hello, read a byte at a time: a buffered reader would take what follows
    it too (a quick command's whole result) and keep it from the reader that comes next."""
    raw = bytearray()
    while not raw.endswith(b"\n"):
        byte = sock.recv(1)
        if not byte:
            return None
        raw += byte
    said = json.loads(raw)
    return said if isinstance(said, dict) else None


def _line(stream: IO[bytes]) -> dict | None:
    raw = stream.readline()
    if not raw:
        return None
    said = json.loads(raw)
    return said if isinstance(said, dict) else None


def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """A CLI command run by the engine: its output written here, its exit status returned."""
    sock, _ = connect("cli", argv, env)
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


class Pump:
    """A stdio server's messages, carried between this process's stdin and stdout and the engine's socket
    (module docstring: a stopped engine is started again at the client's next message)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], sock: socket.socket) -> None:
        self.argv, self.env = argv, env
        self.sock: socket.socket | None = sock
        self.lock = threading.Lock()  # the socket, and the requests under way
        self.pending: dict[Any, str] = {}  # id -> method of each request sent and not yet answered
        self.initialize: bytes | None = None
        self.initialized: bytes | None = None
        self.out = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)  # a stray print must not corrupt the protocol

    def run(self) -> int:
        threading.Thread(target=self._answers, args=(self.sock,), daemon=True).start()
        for line in iter(sys.stdin.buffer.readline, b""):
            self._send(line)
        with self.lock:  # the client is done: the engine ends the session and closes
            if self.sock is not None:
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_WR)
                    while self.sock.recv(1 << 16):
                        pass
        return 0

    def _send(self, line: bytes) -> None:
        message = _parsed(line)
        with self.lock:
            if message.get("method") == "initialize":
                self.initialize = line
            elif message.get("method") == "notifications/initialized":
                self.initialized = line
            if "method" in message and "id" in message:
                self.pending[_key(message["id"])] = message["method"]
            if self.sock is None:
                try:
                    self.sock = self._again()
                except NoEngine as exc:
                    self._answer_lost(message, f"corrigenda's shared engine could not be started again: {exc}")
                    return
            try:
                self.sock.sendall(line if line.endswith(b"\n") else line + b"\n")
            except OSError:
                self._lost(self.sock)

    def _again(self) -> socket.socket:
        """A new engine's connection, brought to where the last one was: initialized."""
        sock, _ = connect("mcp", self.argv, self.env)
        replies = sock.makefile("rb")
        if self.initialize is not None:
            sock.sendall(self.initialize)
            replies.readline()  # its answer went to the client the first time
            if self.initialized is not None:
                sock.sendall(self.initialized)
        threading.Thread(target=self._answers, args=(sock, replies), daemon=True).start()
        return sock

    def _answers(self, sock: socket.socket, replies: IO[bytes] | None = None) -> None:
        replies = replies or sock.makefile("rb")
        with contextlib.suppress(OSError):  # a reset (an engine killed with unread bytes) ends it as an end does
            for line in iter(replies.readline, b""):
                message = _parsed(line)
                if "method" not in message and "id" in message:
                    with self.lock:
                        self.pending.pop(_key(message["id"]), None)
                self.out.write(line)
                self.out.flush()
        with self.lock:
            self._lost(sock)

    def _answer_lost(self, message: dict, why: str) -> None:
        if "method" in message and "id" in message:
            self.pending.pop(_key(message["id"]), None)
            self._error(message["id"], why)
            self.out.flush()

    def _error(self, request_id: Any, why: str) -> None:
        """A JSON-RPC error for the client's request `request_id`, written (not flushed)."""
        error = {"code": -32603, "message": why}
        self.out.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n")

    def _lost(self, sock: socket.socket) -> None:
        """The engine's connection ended (the lock held): each request under way is answered as unknown."""
        if self.sock is not sock:
            return
        self.sock = None
        with contextlib.suppress(OSError):
            sock.close()
        for key, method in self.pending.items():
            self._error(json.loads(key), (
                f"corrigenda's shared engine stopped during this {method} call; whether it took effect is "
                "unknown: read (recall_chains, history) before doing it again. The next call starts another engine."
            ))  # fmt: skip
        self.out.flush()
        self.pending.clear()


def _parsed(line: bytes) -> dict:
    with contextlib.suppress(ValueError):
        message = json.loads(line)
        if isinstance(message, dict):
            return message
    return {}


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def serve(argv: Sequence[str], env: Mapping[str, str]) -> int:
    sock, _ = connect("mcp", argv, env)
    return Pump(argv, env, sock).run()


def wait_for_web_view(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """`corrigenda ui` through the engine: it serves the web view while this process stays (Ctrl-C)."""
    sock, answer = connect("ui", argv, env)
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
        sock, answer = connect(action, argv, env, start=False)
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


def dispatch(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int | None:
    """Run `argv` through the store's engine, or None: the caller runs it in this process."""
    env = os.environ if env is None else env
    if not argv or {"-h", "--help", "--version"} & set(argv):
        return None
    command = argv[0]
    if command == "engine" and len(argv) >= 2 and argv[1] in ("status", "stop"):
        return engine_command(argv[1], argv[2:], env)
    if command in ASKS and ASKS[command] not in argv:
        return None
    if command not in COMMANDS | ASKS.keys() | {"serve", "ui"} or (command == "serve" and not _serving(argv, env)):
        return None
    try:
        if command == "serve":
            return serve(argv, env)
        if command == "ui":
            return wait_for_web_view(argv, env)
        return run_command(argv, env)
    except NoEngine as exc:
        if str(exc):
            sys.stderr.write(f"corrigenda: {exc}; running in this process\n")
        return None
