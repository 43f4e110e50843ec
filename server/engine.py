"""The shared engine: one process per user, store and corrigenda version that holds the model and the
store once and serves every local client of that store, each as its own client: stdio servers (their
messages forwarded), CLI commands and the web view (forward.py is the other side; it starts this).

Each connection brings its command line, working directory and client variables (forward_dial.hello),
and the engine serves it with those: a session's scope, actor, person and ask-on-update setting are its
client's, never another's. Only the store and the model are the engine's (they name its socket).
A CLI command runs the CLI's own code with the client's variables and folder in place, one command at
a time, its output sent back; every write of every local client goes through this one process, so
they no longer race as separate writers of one store.

It listens before it loads anything heavy (a forwarder that connects waits in the backlog), exits
after CORRIGENDA_ENGINE_IDLE seconds with no client (default IDLE_DEFAULT), and holds a lock beside
its socket, so that two forwarders starting engines at once make one: the second finds the lock
taken and leaves. A socket left by an engine that was killed is replaced by the next one. Beside it
too, what it serves (`about`: its pid, store and settings), so that a forwarder that needs other
settings for the same store can say which differ.

It listens on a Unix socket (ADDRESS ending in .sock), or on a loopback port it writes into ADDRESS
(ending in .port; Windows, or CORRIGENDA_ENGINE_TRANSPORT=tcp): anyone on the machine can connect to
that, so each connection first proves it knows the user's secret (forward_dial.prove) and one that does
not is refused, and logged, before anything it sent is read.

Run by forward.py as `python -m corrigenda.server.engine ADDRESS STORE MODEL`.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .engine_client import Client, _rss_mib, _span, client_environment
from .engine_listen import _answer, _listen, _lock, _peer, _private, _same
from .forward_dial import dial, proof, user_secret
from .forward_target import FLOOR, IDLE, LOOPBACK, NoEngine, code

if TYPE_CHECKING:
    from corrigenda.store import Memory

    from .config import Settings

log = logging.getLogger(__name__)

IDLE_DEFAULT = 300.0  # seconds: a few minutes without a client, then the memory is given back
HELLO_MAX = 1 << 20
STOP_WAIT = 120.0  # seconds to finish this process's erasures and compaction before it exits


class Engine:
    def __init__(self, path: Path, listener: socket.socket, lock: int, store: str, model: str) -> None:
        from .config import Settings, build_memory

        self.code = code()  # what this process runs: a forwarder of other code is refused
        self.path, self.listener, self.lock_fd = path, listener, lock  # path: its address, .sock or .port
        self.key = path.stem  # forward_target.Target.key: what a connection's proofs are bound to
        self.tcp = path.suffix == ".port"
        self.settings = Settings(db=store, model=model)
        self.store = os.path.realpath(self.settings.db)
        # The model loads at a stdio client's `initialized` (app.SessionHooks) or a command's first
        # embedding, after the first answer: loading it here held up the first client's handshake.
        self.memory = build_memory(self.settings)
        self.idle = float(os.environ.get(IDLE) or IDLE_DEFAULT)
        self.started = time.time()
        self.context = threading.Lock()  # the process's variables and folder, lent to one client at a time
        self.clients: dict[int, Client] = {}
        self.lock = threading.Lock()
        self.quiet_since = time.monotonic()
        self.stopping = threading.Event()

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        from .config import package_version

        about = {"pid": os.getpid(), "store": self.store, "code": self.code, "model": self.settings.model,
                 "min_similarity": os.environ.get(FLOOR, ""), "address": self.address()}  # fmt: skip
        _private(self.path.with_suffix(".json"), json.dumps(about))
        threading.Thread(target=self.retire_others, name="corrigenda-retire", daemon=True).start()
        log.warning(
            "engine %s for %s (pid %d) listening on %s", package_version(), self.store, os.getpid(), self.address()
        )
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                with self.lock:
                    quiet = not self.clients and time.monotonic() - self.quiet_since > self.idle
                if quiet:
                    log.warning("no client for %.0f s: stopping", self.idle)
                    break
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        for mine in (self.path, self.path.with_suffix(".json")):
            with contextlib.suppress(FileNotFoundError):
                mine.unlink()
        os.close(self.lock_fd)  # the next engine may start while this one finishes its upkeep
        if not self.memory.finish_upkeep(STOP_WAIT):
            log.warning("stopping with upkeep under way; the next upkeep finishes it")
        logging.shutdown()
        os._exit(0)

    def address(self) -> str:
        """Where it listens, as a person reads it."""
        if self.tcp:
            return f"{LOOPBACK}:{self.listener.getsockname()[1]} (its port in {self.path})"
        return str(self.path)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            reader: BinaryIO = conn.makefile("rb")
            try:
                checked = self._challenged(conn, reader) if self.tcp else None
                said = json.loads(reader.readline(HELLO_MAX))
                kind = said["kind"]
            except (ValueError, KeyError, TypeError, OSError):
                if self.tcp:
                    log.warning("refused a connection from %s: it did not follow the protocol", _peer(conn))
                return
            if checked is not None and not _same(str(said.get("proof", "")), checked):
                log.warning("refused a connection from %s: its hello did not prove the user's secret", _peer(conn))
                _answer(conn, {"ok": False, "why": "refused: the hello did not prove this user's secret"})
                return
            if kind == "retire":  # from a newer engine of this store, whatever its code (`retire_others`)
                self._retire(conn, said)
                return
            if said.get("corrigenda") != self.code:
                _answer(
                    conn,
                    {
                        "ok": False,
                        "why": f"the engine runs other code ({self.code}, not {said.get('corrigenda')}): another version",
                    },
                )
                return
            key = id(conn)
            with self.lock:
                self.clients[key] = Client(kind, int(said.get("pid", 0)), str(said.get("cwd", "")))
            try:
                getattr(self, f"_{kind}", self._unknown)(conn, reader, said)
            except Exception:
                log.exception("serving a %s client failed", kind)
            finally:
                with self.lock:
                    del self.clients[key]
                    self.quiet_since = time.monotonic()
                from corrigenda.store.allocator import give_back  # loaded with the store by then

                give_back()  # what the client's threads freed (glibc keeps it in their arenas)

    def _challenged(self, conn: socket.socket, reader: BinaryIO) -> str:
        """Over TCP, before the hello: the client's challenge answered with this engine's proof of the
        user's secret; the proof the client's hello must carry."""
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        theirs = str(json.loads(reader.readline(HELLO_MAX))["challenge"])
        ours = os.urandom(16).hex()
        secret = user_secret(str(self.path.parent))
        _answer(conn, {"challenge": ours, "proof": proof(secret, "engine", self.key, theirs, ours)})
        return proof(secret, "client", self.key, theirs, ours)

    # -- what each kind of client gets -------------------------------------------------------------

    def _unknown(self, conn: socket.socket, reader: BinaryIO, said: dict[str, Any]) -> None:
        _answer(conn, {"ok": False, "why": f"unknown kind {said['kind']!r}"})

    def _retire(self, conn: socket.socket, said: Mapping[str, Any]) -> None:
        """Another engine of this store, of other code, has started: stop once the last client leaves. One of
        this code serves this store with other settings (a model, a floor): both serve their own clients."""
        if said.get("store") == self.store and said.get("corrigenda") != self.code:
            log.warning(
                "an engine of other code (%s) serves %s now: stopping when idle", said.get("corrigenda"), self.store
            )
            self.idle = 0.0
            _answer(conn, {"ok": True, "said": f"pid {os.getpid()} stops when its last client leaves"})
        else:
            _answer(conn, {"ok": False, "why": "another store, or the same code"})

    def retire_others(self) -> None:
        """An engine of this store left by other code (before an upgrade, or an edit of an editable
        install) is asked to stop when idle: one engine, one writer, once its clients are gone."""
        said = {"corrigenda": self.code, "kind": "retire", "store": self.store, "pid": os.getpid()}
        folder = self.path.parent
        for stem in sorted({p.with_suffix("") for p in (*folder.glob("*.sock"), *folder.glob("*.port"))}):
            if stem.name == self.key:
                continue
            with contextlib.suppress(OSError, ValueError, NoEngine):
                dialed = dial(str(stem))
                if dialed is None:
                    continue
                sock, proven = dialed
                with sock:
                    sock.settimeout(2.0)
                    sock.sendall(json.dumps({"proof": proven, **said} if proven else said).encode() + b"\n")
                    sock.recv(1 << 12)

    def _status(self, conn: socket.socket, reader: BinaryIO, said: dict[str, Any]) -> None:
        _answer(conn, {"ok": True, "said": self.status()})

    def _stop(self, conn: socket.socket, reader: BinaryIO, said: dict[str, Any]) -> None:
        _answer(conn, {"ok": True, "said": f"stopping the engine (pid {os.getpid()}) of {self.store}"})
        self.stopping.set()

    def _cli(self, conn: socket.socket, reader: BinaryIO, said: dict[str, Any]) -> None:
        from . import cli

        _answer(conn, {"ok": True})
        out, err = io.StringIO(), io.StringIO()
        with self.lent(said), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli._run(said["argv"], memory_of=self.memory_for)
            except SystemExit as exc:  # argparse's usage errors and --help
                status = exc.code if isinstance(exc.code, int) else 2
            except Exception as exc:
                log.exception("a command failed: %s", said["argv"][:1])
                err.write(
                    f"corrigenda: {type(exc).__name__}: {exc} (the engine's log: {self.path.with_suffix('.log')})\n"
                )
                status = 1
        _answer(conn, {"stdout": out.getvalue(), "stderr": err.getvalue(), "status": status})
        gc.freeze()  # what the command loaded (torch, the model) stays out of the collector's full passes

    def _mcp(self, conn: socket.socket, reader: BinaryIO, said: dict[str, Any]) -> None:
        import anyio

        from .app import build_server
        from .stdio import serve_streams

        with self.lent(said):
            settings = self.client_settings(said)
        server = build_server(settings, self.memory_for, said["cwd"], environment=said["env"], owns_store=False)
        _answer(conn, {"ok": True})
        writer: BinaryIO = conn.makefile("wb")
        with writer:
            anyio.run(serve_streams, server, reader, writer)

    def _ui(self, conn: socket.socket, reader: BinaryIO, said: dict[str, Any]) -> None:
        from . import cli
        from .connections import bounded_server
        from .http import RefusedToListen, check_port, netloc, refuse_exposure_without_token
        from .ui import announcement, build_ui

        with self.lent(said):
            settings = self.client_settings(said)
            scope = cli._resolve_scope(settings, self.memory)
        where = netloc(settings.host, settings.ui_port)
        try:
            refuse_exposure_without_token(settings, where, "the web view")
            check_port(settings.host, settings.ui_port, "--port (CORRIGENDA_UI_PORT)")
        except RefusedToListen as exc:
            _answer(conn, {"ok": True, "said": f"corrigenda: {exc}\n", "status": 2})
            return
        server = bounded_server(build_ui(self.memory, scope, settings), settings.host, settings.ui_port)
        said_back = f"corrigenda: {announcement(f'http://{where}/', settings)} (served by the shared engine)\n"
        _answer(conn, {"ok": True, "said": said_back})

        def until_the_client_leaves() -> None:
            with contextlib.suppress(OSError):
                while conn.recv(1 << 16):
                    pass
            server.should_exit = True

        threading.Thread(target=until_the_client_leaves, daemon=True).start()
        server.run()

    # -- a client's context ------------------------------------------------------------------

    @contextlib.contextmanager
    def lent(self, said: Mapping[str, Any]) -> Iterator[None]:
        with self.context, client_environment(said["env"], said["cwd"]):
            yield

    def client_settings(self, said: Mapping[str, Any]) -> Settings:
        """The settings a client's command line and variables make (in `lent`)."""
        from . import cli
        from .cli_parser import parser

        return cli._settings(parser().parse_args(said["argv"]))

    def memory_for(self, settings: Settings) -> Memory:
        """The engine's memory, for a client whose settings name its store and model."""
        if os.path.realpath(settings.db) != self.store or settings.model != self.settings.model:
            raise RuntimeError(f"this engine serves {self.store} with {self.settings.model}, not {settings.db}")
        return self.memory

    def status(self) -> str:
        from .config import package_version

        with self.lock:
            clients = sorted(self.clients.values(), key=lambda c: c.since)
        rss = _rss_mib()
        lines = [
            f"engine: pid {os.getpid()}, corrigenda {package_version()} ({self.code}), up {_span(time.time() - self.started)}"
            + (f", {rss:.0f} MiB resident" if rss else ""),
            f"store: {self.store} (model {self.settings.model})",
            f"socket: {self.address()}; log: {self.path.with_suffix('.log')}",
            f"stops after {self.idle:.0f} s with no client ({IDLE}); `corrigenda engine stop` stops it now",
            f"clients: {len(clients) - 1} besides this one",
        ]
        lines += [f"  {c.kind} (pid {c.pid}) in {c.cwd}, for {_span(time.time() - c.since)}" for c in clients
                  if c.kind != "status"]  # fmt: skip
        return "\n".join(lines)


def main(argv: list[str]) -> int:
    os.chdir(os.path.abspath(os.sep))  # the folder it was started in is a client's: never held, never read
    path = Path(argv[0])
    lock = _lock(path)
    if lock is None:
        return 0  # another engine of this store is starting or running: the forwarders reach it
    try:
        listener = _listen(path)
    except OSError as exc:  # a full disk, a folder gone: the forwarder runs its command itself
        sys.stderr.write(f"corrigenda engine: cannot listen on {path}: {exc}\n")
        return 3
    from .config import Settings

    logging.basicConfig(
        level=Settings().log_level, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    engine = Engine(path, listener, lock, argv[1], argv[2])
    signal.signal(signal.SIGTERM, lambda *_: engine.stopping.set())  # `kill`: stop as `engine stop` does
    engine.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
