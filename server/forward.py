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
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import sys
import threading
import time

try:  # POSIX only (the test of platforms reads for these): Windows takes other ways (runtime folder, spawn)
    from os import WNOHANG, getuid, posix_spawn
except ImportError:
    WNOHANG, getuid, posix_spawn = 0, None, None  # type: ignore[assignment,misc]

try:  # hashlib's BLAKE2b, without hashlib: it loads OpenSSL, ~3.5 MiB more in every forwarder
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

TYPE_CHECKING = False  # typing itself is ~2 MiB in a forwarder that never needs it
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence
    from typing import IO, Any

SWITCH = "CORRIGENDA_ENGINE"  # "off": every command and server runs in its own process
RUNTIME = "CORRIGENDA_RUNTIME_DIR"  # where the engines' files live (default: runtime_dir)
IDLE = "CORRIGENDA_ENGINE_IDLE"  # seconds an engine with no client waits before it exits (engine.py)
TRANSPORT = "CORRIGENDA_ENGINE_TRANSPORT"  # how a new engine listens: "unix" or "tcp" (module docstring)
OFF = ("off", "0", "no", "false")
# What a command or a session reads from its own environment: sent along, applied for it alone.
CLIENT_VARIABLES = ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS", "LOGNAME", "USER", "USERNAME", "HOME")
COMMANDS = {"remember", "correct", "revoke", "reinstate", "link", "recall", "show", "why", "stats", "scopes",
            "list", "changes", "import", "export", "subject", "confirm", "check-every"}  # fmt: skip
ASKS = {"forget": "--yes"}  # a command that asks on the terminal unless told: through the engine when told
STAYS = {"serve", "ui"}  # forwarders that stay while their client does: each in a lean interpreter
START_WAIT = 180.0  # seconds for a new engine to answer: it imports torch and LanceDB first
SOCKET_PATH_MAX = 100  # bytes: sun_path holds 104 (macOS) or 108 (Linux) with its terminating NUL
DEFAULT_MODEL = "all-MiniLM-L6-v2"
FLOOR = "CORRIGENDA_MIN_SIMILARITY"  # the engine's similarity floor: one of its settings, like the model
LOOPBACK = "127.0.0.1"
SECRET = "secret"  # the user's secret, in the runtime folder (tcp only)
# An engine's own settings (Target.settings), as a forwarder names them when another engine's differ.
SETTINGS = {"code": "corrigenda code", "model": "model", "min_similarity": f"similarity floor ({FLOOR})"}


class NoEngine(Exception):
    """This command runs in its own process; the message says why (empty: switched off)."""


def digest(text: str, size: int = 32, key: bytes = b"") -> str:
    """BLAKE2b of `text` in hex (`size` bytes); keyed, a MAC, when `key` is given."""
    return blake2b(text.encode(), digest_size=size, key=key).hexdigest()


@functools.cache  # this process's code: read once (an engine's name and every hello carry it)
def code() -> str:
    """Which code this is: a digest of the name, size and time of every module of corrigenda's two
    packages (~80 stat calls), so that a forwarder and an engine of different code never meet, even
    one version apart in an editable install (and importlib.metadata stays unimported: ~30 ms)."""
    top = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # site-packages/corrigenda, or the clone
    lines = []
    for package in ("store", "server"):
        for folder, _, files in os.walk(os.path.join(top, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    info = os.stat(path)
                    lines.append(f"{os.path.relpath(path, top)}\0{info.st_size}\0{info.st_mtime_ns}\n")
    return digest("".join(sorted(lines)), size=8)


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


def runtime_dir(env: Mapping[str, str]) -> str:
    """The per-user folder of the engines' files, made 0700 if missing; NoEngine if it is anyone else's
    or others may enter it. On Windows, a folder in the user's profile, which only the user may open."""
    if os.name == "nt":
        local = env.get("LOCALAPPDATA") or os.path.expanduser("~")
        folder = os.path.abspath(env.get(RUNTIME) or os.path.join(local, "corrigenda", "engines"))
        os.makedirs(folder, exist_ok=True)
        return folder
    if env.get(RUNTIME):
        folder = os.path.abspath(env[RUNTIME])
    elif env.get("XDG_RUNTIME_DIR"):
        folder = os.path.join(env["XDG_RUNTIME_DIR"], "corrigenda")
    else:
        import tempfile

        folder = os.path.join(tempfile.gettempdir(), f"corrigenda-{getuid() if getuid is not None else os.getlogin()}")
    with contextlib.suppress(FileExistsError):
        os.makedirs(folder, mode=0o700)
    info = os.lstat(folder)
    if (
        (getuid is not None and info.st_uid != getuid())
        or info.st_mode & 0o077
        or not os.path.isdir(folder)
        or os.path.islink(folder)
    ):
        raise NoEngine(f"{folder} is not a private folder of this user (mode 0700, owned by you)")
    return folder


def transport(env: Mapping[str, str]) -> str:
    """How a new engine listens: the variable's word, else a Unix socket where there are Unix sockets."""
    said = env.get(TRANSPORT, "").lower()
    if said in ("unix", "tcp"):
        return said if hasattr(socket, "AF_UNIX") or said == "tcp" else "tcp"
    if said:
        raise NoEngine(f"{TRANSPORT}={said} is neither unix nor tcp")
    return "unix" if hasattr(socket, "AF_UNIX") and os.name != "nt" else "tcp"


class Target:
    """The engine a command names: the store (its real path) and the engine's settings, the model and the
    similarity floor, which with the code make its key; and its files in the runtime folder, each
    `stem` + a suffix: .sock (a Unix socket) or .port (a loopback port's number), .json (what it
    serves, `about`), .lock, .log."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], store: str | None = None) -> None:
        self.store = store or store_of(argv, env)
        self.model = _flag(argv, "--model") or env.get("CORRIGENDA_MODEL") or DEFAULT_MODEL
        self.floor = env.get(FLOOR, "")
        self.key = digest(f"{code()}\n{self.store}\n{self.model}\n{self.floor}", size=10)
        self.folder = runtime_dir(env)
        self.stem = os.path.join(self.folder, self.key)
        self.transport = transport(env)
        if self.transport == "unix" and len(os.fsencode(self.stem + ".sock")) > SOCKET_PATH_MAX:
            raise NoEngine(
                f"the socket path {self.stem}.sock is too long for this system; set {RUNTIME} to a shorter folder"
            )

    def has_address(self) -> bool:
        """Whether an engine's socket or port file is there (a killed engine's too: dialing tells)."""
        return os.path.exists(self.stem + ".sock") or os.path.exists(self.stem + ".port")

    @property
    def address(self) -> str:
        """Where a new engine listens: its socket, or the file that will name its port."""
        return self.stem + (".sock" if self.transport == "unix" else ".port")

    def settings(self) -> dict[str, str]:
        """The engine's settings as its `about` file records them."""
        return {"code": code(), "model": self.model, "min_similarity": self.floor}


# -- reaching an engine ------------------------------------------------------------------------------


def user_secret(folder: str) -> bytes:
    """The user's secret in the runtime folder (0600), made the first time: 32 random bytes. Made beside,
    then linked into place, so that two processes making it at once both end with the one that won."""
    path = os.path.join(folder, SECRET)
    with contextlib.suppress(FileNotFoundError), open(path, encoding="ascii") as said:
        return bytes.fromhex(said.read().strip())
    draft = f"{path}.{os.getpid()}"
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", encoding="ascii") as made:
        made.write(os.urandom(32).hex())
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(draft)
    with open(path, encoding="ascii") as said:
        return bytes.fromhex(said.read().strip())


def proof(secret: bytes, side: str, key: str, client: str, engine: str) -> str:
    """What `side` ("engine" or "client") sends to show it knows the secret: a MAC of the engine's key
    and both sides' fresh challenges, so that it proves nothing on another connection or to another
    engine."""
    return digest(f"{side}\0{key}\0{client}\0{engine}", key=secret)


def prove(sock: socket.socket, stem: str, port: int) -> str:
    """Over TCP, before the hello: this side's challenge, the engine's proof of the secret checked, and
    this side's proof returned (for the hello). The secret itself never travels: a port named by a file
    left by a killed engine may be anyone's by now. NoEngine when what answers proves nothing."""
    key = os.path.basename(stem)
    ours = os.urandom(16).hex()
    sock.settimeout(START_WAIT)
    sock.sendall(json.dumps({"challenge": ours}).encode() + b"\n")
    try:
        said = _first_line(sock) or {}
    except (OSError, ValueError):
        said = {}
    theirs = str(said.get("challenge", ""))
    try:
        secret = user_secret(os.path.dirname(stem))
    except (OSError, ValueError) as exc:
        sock.close()
        raise NoEngine(f"the user's secret in {os.path.dirname(stem)} cannot be read or made ({exc})") from None
    if said.get("proof") != proof(secret, "engine", key, ours, theirs):  # fresh challenges: no timing to learn
        sock.close()
        raise NoEngine(
            f"what listens on {LOOPBACK}:{port} (named by {stem}.port) did not prove it is your engine; "
            "nothing was sent to it"
        )
    return proof(secret, "client", key, ours, theirs)


def _port(stem: str) -> int | None:
    """The port the engine of `stem` listens on, from its file; None when there is none, or when the
    engine that wrote it has gone (killed: its file stays, and its port may be anyone's by now)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError), open(stem + ".port", "rb") as said:
        named = json.loads(said.read())
        return int(named["port"]) if "pid" not in named or _running(int(named["pid"])) else None
    return None


def dial(stem: str) -> tuple[socket.socket, str | None] | None:
    """A connection to the engine whose files are `stem`.*, whichever way it listens (its socket, else the
    port its .port file names), and the proof its hello must carry (TCP; None on a Unix socket). None
    when no engine listens there."""
    if hasattr(socket, "AF_UNIX") and len(os.fsencode(stem + ".sock")) <= SOCKET_PATH_MAX:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(stem + ".sock")
            return sock, None
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
    port = _port(stem)
    if port is None:
        return None
    try:
        sock = socket.create_connection((LOOPBACK, port))
    except ConnectionRefusedError:
        return None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a line at a time: never wait for more
    return sock, prove(sock, stem, port)


def hello(kind: str, argv: Sequence[str], env: Mapping[str, str], proven: str | None = None) -> bytes:
    sent = {k: v for k, v in env.items() if k.startswith("CORRIGENDA_") or k in CLIENT_VARIABLES}
    said = {"corrigenda": code(), "kind": kind, "argv": list(argv), "cwd": os.getcwd(), "env": sent,
            "pid": os.getpid()}  # fmt: skip
    if proven is not None:
        said = {"proof": proven, **said}
    return json.dumps(said).encode() + b"\n"


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


def _running(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would end it there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        pass
    return True


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


class Pump:
    """A stdio server's messages, carried between this process's stdin and stdout and the engine's socket
    (module docstring: a stopped engine is started again at the client's next message)."""

    def __init__(self, target: Target, argv: Sequence[str], env: Mapping[str, str], sock: socket.socket) -> None:
        self.target, self.argv, self.env = target, argv, env
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
        sock, _ = connect("mcp", self.argv, self.env, self.target)
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
