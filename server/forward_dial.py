"""Reaching an engine (forward.py): dialing its socket or port, proving over TCP that each side knows the
user's secret (`prove`), and the hello that opens each connection. Standard library only (forward.py)."""

from __future__ import annotations

import contextlib
import json
import os
import socket

TYPE_CHECKING = False  # typing itself is ~2 MiB in a forwarder that never needs it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# As corrigenda.server's module, or by its own name in the lean interpreter (forward.LEAN), whose
# path holds this folder and no package.
if TYPE_CHECKING or __package__:
    from .forward_target import CLIENT_VARIABLES, LOOPBACK, SECRET, SOCKET_PATH_MAX, START_WAIT, NoEngine, code, digest
else:
    from forward_target import CLIENT_VARIABLES, LOOPBACK, SECRET, SOCKET_PATH_MAX, START_WAIT, NoEngine, code, digest


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
