"""What every Python process of a test run logged, at DEBUG, and which tokens and note texts it saw
(bench/test_run_logs.py puts this folder first on PYTHONPATH; each process imports it at start).

Nothing happens unless CORRIGENDA_LOG_CAPTURE names a folder. Then this process writes there, under
a stem of its own (its pid; `<pid>.<n>` when an earlier process had the same pid):
- `<stem>.proc`: its command line, its parent, and whether its environment was given by its parent
  without the capture (env= of a Popen) and had it added back (see below); `<stem>.children`: the
  pid and command line of each child it started with subprocess.Popen.
- `<stem>.log`: every record of every logger at every level, its message rendered, one physical line
  per line of the message (and of its traceback), each line headed by the time, the logger's name,
  the level, and `+` when the process's own levels let the record through (`-`: only the capture's
  DEBUG did). Every logger is enabled at DEBUG (`Logger.isEnabledFor` says yes), the record is
  written before the logger's level is checked (`Logger.handle`, wrapped on the class, so
  dictConfig, basicConfig(force=True) and loggers that do not propagate, as uvicorn's, change
  nothing), and the process's own handlers get only what its own levels let through, as before.
  What the process itself would do to the record at DEBUG is done first: the filters of the logger
  it comes from (a record one of them drops is written at no level, so not here either), then those
  on the handlers it would reach (corrigenda's Redact and StreamBodies, server/redaction.py).
- `<stem>.stderr`: everything written to fd 2, passed on unchanged to where fd 2 went (`tee`, in a
  session of its own, started by a double fork so that it is no child of this process). stdout is
  not captured: on stdio it is the protocol, which carries note texts by design.
- `<stem>.used`: JSON lines, one per token or credential presented to a server (grants.digest, the
  web view's gate: `?token=`, `Authorization`, session cookies) and per note text or reason written
  to a store (Writes.remember, correct, revoke, reinstate, link, forget; Imports.import_notes;
  transfer.import_parsed), plus CORRIGENDA_TOKEN and AWS secrets from the environment.

A child started with an explicit `env=` (subprocess.Popen, which asyncio and anyio use, so the MCP
SDK's stdio client too) that lacks CORRIGENDA_LOG_CAPTURE gets it, with this folder first on its
PYTHONPATH: the variables of the capture only, the rest of the given environment as it was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

VARIABLE = "CORRIGENDA_LOG_CAPTURE"
ADDED = "CORRIGENDA_LOG_CAPTURE_ADDED"  # set in a child's env= when the capture was added to it
HERE = os.path.dirname(os.path.abspath(__file__))
ENV_SECRETS = ("CORRIGENDA_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class Capture:
    """This process's files in the capture folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.local = threading.local()
        self.seen: set[tuple[str, str]] = set()
        self.fds: dict[str, int] = {}
        self.stem: str | None = self._stem()

    def _stem(self) -> str:
        pid, n = os.getpid(), 0
        stem = str(pid)
        while True:
            try:  # the .proc file claims the stem: no two live processes share a pid
                fd = os.open(os.path.join(self.folder, stem + ".proc"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileExistsError:
                n += 1
                stem = f"{pid}.{n}"
        record = {"pid": pid, "ppid": os.getppid(), "argv": sys.argv if hasattr(sys, "argv") else None,
                  "orig_argv": getattr(sys, "orig_argv", None), "executable": sys.executable,
                  "env_added": os.environ.get(ADDED) == "1", "started": time.time()}  # fmt: skip
        os.write(fd, json.dumps(record).encode())
        os.close(fd)
        return stem

    def after_fork(self) -> None:
        """A forked child writes files of its own, under a stem claimed when it first writes (a fork
        that execs at once claims none); its stderr stays its parent's."""
        self.lock = threading.Lock()
        self.local = threading.local()
        self.seen = set()
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}
        self.stem = None

    def write(self, suffix: str, text: str) -> None:
        data = text.encode("utf-8", "backslashreplace")
        with self.lock:
            if self.stem is None:
                self.stem = self._stem()
            fd = self.fds.get(suffix)
            if fd is None:
                path = os.path.join(self.folder, self.stem + suffix)
                fd = self.fds[suffix] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            os.write(fd, data)

    def used(self, kind: str, where: str, value: object) -> None:
        if not isinstance(value, str) or not value.strip():
            return
        if (kind, value) in self.seen:
            return
        self.seen.add((kind, value))
        self.write(".used", json.dumps({"kind": kind, "where": where, "value": value}) + "\n")

    def note_error(self, where: str) -> None:
        import traceback

        self.write(".errors", f"{where}\n{traceback.format_exc()}\n")


CAPTURE: Capture | None = None


# -- logging -----------------------------------------------------------------------------------

_handle = logging.Logger.handle
_enabled = logging.Logger.isEnabledFor
_formatter = logging.Formatter()


def _always(self: logging.Logger, level: int) -> bool:
    return True


def _filters_on_the_way(logger: logging.Logger) -> list[Any]:
    """The filters on the handlers a record of `logger` reaches (as Logger.callHandlers walks)."""
    found: list[Any] = []
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            for f in handler.filters:
                if all(f is not g for g in found):
                    found.append(f)
        if not current.propagate:
            break
        current = current.parent
    return found


def _render(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception as exc:  # a record whose arguments do not fit its message: both, as they are
        text = f"<unrenderable: {exc!r}> msg={record.msg!r} args={record.args!r}"
    if record.exc_info:
        text += "\n" + _formatter.formatException(record.exc_info)
    elif record.exc_text:
        text += "\n" + record.exc_text
    if record.stack_info:
        text += "\n" + record.stack_info
    return text


def _capture(logger: logging.Logger, record: logging.LogRecord, shown: bool) -> None:
    capture = CAPTURE
    if capture is None or getattr(record, "_log_capture_done", False):
        return
    if getattr(capture.local, "busy", False):  # a __repr__ that logs, while we render: not again
        return
    capture.local.busy = True
    try:
        setattr(record, "_log_capture_done", True)  # noqa: B010
        if not logger.filter(record):  # the logger's own filters drop it: written at no level
            return
        for f in _filters_on_the_way(logger):
            with contextlib.suppress(Exception):
                f.filter(record) if hasattr(f, "filter") else f(record)
        when = time.strftime("%H:%M:%S", time.localtime(record.created)) + f".{int(record.msecs):03d}"
        head = f"{when} {record.name} {record.levelname} {'+' if shown else '-'} "
        capture.write(".log", "".join(head + line + "\n" for line in _render(record).split("\n")))
    except Exception:
        capture.note_error("logging")
    finally:
        capture.local.busy = False


def _handle_and_capture(self: logging.Logger, record: logging.LogRecord) -> None:
    shown = not self.disabled and _enabled(self, record.levelno)
    _capture(self, record, shown)
    if shown:
        _handle(self, record)


# -- stderr ------------------------------------------------------------------------------------


def _tee_stderr(path: str) -> None:
    """fd 2 becomes a pipe into `tee -a path`, whose stdout is what fd 2 was."""
    try:
        os.fstat(2)
    except OSError:
        return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - a child that only forks again
        try:
            os.setsid()
            if os.fork() == 0:
                os.dup2(r, 0)
                os.dup2(2, 1)
                os.closerange(3, 65536)  # hold nothing else of the process open (pipes whose EOF others await)
                os.execvp("tee", ["tee", "-a", "-i", "-p", path])
        finally:
            os._exit(0)
    os.close(r)
    os.waitpid(pid, 0)
    os.dup2(w, 2)
    os.close(w)


# -- what was used: tokens and note texts ----------------------------------------------------------


def _wrap(
    owner: Any, name: str, before: Callable[..., None] | None = None, after: Callable[..., None] | None = None
) -> None:
    import functools
    import inspect

    original = getattr(owner, name)
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before is not None and CAPTURE is not None:
            try:
                bound = signature.bind_partial(*args, **kwargs)
                before(CAPTURE, bound.arguments)
            except Exception:
                CAPTURE.note_error(f"before {name}")
        result = original(*args, **kwargs)
        if after is not None and CAPTURE is not None:
            try:
                after(CAPTURE, result)
            except Exception:
                CAPTURE.note_error(f"after {name}")
        return result

    setattr(owner, name, wrapper)


def _texts_of(where: str, *text_args: str) -> Callable[[Capture, dict[str, Any]], None]:
    def record(capture: Capture, arguments: dict[str, Any]) -> None:
        for key in text_args:
            value = arguments.get(key)
            if key == "draft" and value is not None:
                capture.used("text", where, getattr(value, "text", None))
            elif key == "drafts" and value is not None:
                for draft in value:
                    capture.used("text", where, getattr(draft, "text", None))
            elif key == "parsed" and value is not None:
                for note in getattr(value, "notes", {}).values():
                    capture.used("text", where, getattr(note, "text", None))
                for event in getattr(value, "events", {}).values():
                    capture.used("reason", where, getattr(event, "reason", None))
            else:
                capture.used("reason", where, value)

    return record


def _patch_grants(module: Any) -> None:
    _wrap(module, "digest", before=lambda c, a: c.used("token", "grants.digest", a.get("token")))


def _patch_ui_gate(module: Any) -> None:
    def offered(capture: Capture, arguments: dict[str, Any]) -> None:
        request = arguments["request"]
        capture.used("token", "ui_gate ?token=", request.query_params.get(module.QUERY))
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        capture.used("token", f"ui_gate Authorization {scheme}", credential.strip())
        capture.used("token", "ui_gate cookie", request.cookies.get(module.COOKIE))

    _wrap(module.Gate, "_check_credential", before=offered)
    _wrap(module.Sessions, "open", after=lambda c, cookie: c.used("token", "ui_gate session cookie", cookie))


def _patch_writes(module: Any) -> None:
    _wrap(module.Writes, "remember", before=_texts_of("Writes.remember", "draft", "reason"))
    _wrap(module.Writes, "correct", before=_texts_of("Writes.correct", "draft", "reason"))
    for name in ("revoke", "reinstate", "link", "forget"):
        _wrap(module.Writes, name, before=_texts_of(f"Writes.{name}", "reason"))


def _patch_imports(module: Any) -> None:
    _wrap(module.Imports, "import_notes", before=_texts_of("Imports.import_notes", "drafts"))


def _patch_transfer(module: Any) -> None:
    _wrap(module, "import_parsed", before=_texts_of("transfer.import_parsed", "parsed"))


def _patch_subprocess(module: Any) -> None:
    """A child given an env= without the capture gets the capture's variables added."""
    original = module.Popen.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if CAPTURE is not None:
            positional = len(args) > 10  # (args, bufsize, executable, stdin, stdout, stderr, preexec_fn,
            env = args[10] if positional else kwargs.get("env")  # close_fds, shell, cwd, env, ...)
            if env is not None and VARIABLE not in env:
                env = {**env, VARIABLE: CAPTURE.folder, ADDED: "1"}
                env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
                if positional:
                    args = (*args[:10], env, *args[11:])
                else:
                    kwargs["env"] = env
        original(self, *args, **kwargs)
        if CAPTURE is not None:  # which children were started: the bench finds the Python ones left out
            try:
                argv = [self.args] if isinstance(self.args, (str, bytes)) else list(self.args)
                line = {"pid": self.pid, "argv": [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in argv]}
                CAPTURE.write(".children", json.dumps(line) + "\n")
            except Exception:
                CAPTURE.note_error("recording a child")

    module.Popen.__init__ = __init__


PATCHES: dict[str, Callable[[Any], None]] = {
    "corrigenda.server.grants": _patch_grants,
    "corrigenda.server.ui_gate": _patch_ui_gate,
    "corrigenda.store.writes": _patch_writes,
    "corrigenda.store.imports": _patch_imports,
    "corrigenda.store.transfer": _patch_transfer,
    "subprocess": _patch_subprocess,
}


class PatchOnImport:
    """A meta path finder that finds nothing itself: it has the other finders find the modules of
    PATCHES, and patches each once its code has run (before anyone imports a name from it)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            try:
                patch(module)
            except Exception:
                if CAPTURE is not None:
                    CAPTURE.note_error(f"patching {fullname}")

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def start(folder: str) -> None:
    global CAPTURE
    os.makedirs(folder, exist_ok=True)
    CAPTURE = Capture(folder)
    for name in ENV_SECRETS:
        CAPTURE.used("token", f"env {name}", os.environ.get(name))
    _tee_stderr(os.path.join(folder, f"{CAPTURE.stem}.stderr"))
    os.register_at_fork(after_in_child=CAPTURE.after_fork)
    logging.Logger.isEnabledFor = _always  # type: ignore[method-assign]
    logging.Logger.handle = _handle_and_capture  # type: ignore[method-assign]
    for name, patch in PATCHES.items():
        if name in sys.modules:  # imported before this file ran (subprocess, at times): patch it now
            patch(sys.modules[name])
    sys.meta_path.insert(0, PatchOnImport())


if os.environ.get(VARIABLE):
    try:
        start(os.environ[VARIABLE])
    except Exception as exc:  # never stop a process from starting
        print(f"log capture: not started: {exc!r}", file=sys.stderr)
