"""Which engine a command names (forward.py's docstring, "Which engine"): its store, the per-user runtime
folder, the transport, and `Target`, whose key names the engine's files; with the names and limits the
forwarder's parts and the engine share. Standard library only, as all of forward.py: the lean
interpreter imports it by its own name (forward.LEAN)."""

from __future__ import annotations

import contextlib
import functools
import os
import socket

try:  # POSIX only (the test of platforms reads for this): Windows takes another runtime folder
    from os import getuid
except ImportError:
    getuid = None  # type: ignore[assignment]

try:  # hashlib's BLAKE2b, without hashlib: it loads OpenSSL, ~3.5 MiB more in every forwarder
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

TYPE_CHECKING = False  # typing itself is ~2 MiB in a forwarder that never needs it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

RUNTIME = "CORRIGENDA_RUNTIME_DIR"  # where the engines' files live (default: runtime_dir)
IDLE = "CORRIGENDA_ENGINE_IDLE"  # seconds an engine with no client waits before it exits (engine.py)
TRANSPORT = "CORRIGENDA_ENGINE_TRANSPORT"  # how a new engine listens: "unix" or "tcp" (forward.py's docstring)
# What a command or a session reads from its own environment: sent along, applied for it alone.
CLIENT_VARIABLES = ("CLAUDE_PROJECT_DIR", "WORKSPACE_FOLDER_PATHS", "LOGNAME", "USER", "USERNAME", "HOME")
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
