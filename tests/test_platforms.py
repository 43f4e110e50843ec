"""corrigenda runs wherever its manifests say it does: no POSIX-only module or call in our code,
and the default store is the platform's per-user data directory.

CI runs on Linux, so Windows is approached two ways: a subprocess runs the store with the POSIX-only
modules gone (as on Windows), and every source file is read for POSIX-only names, including those
on paths that no test happens to run."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corrigenda.server.config import default_db

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "store").rglob("*.py"), *(ROOT / "server").rglob("*.py")])

# Standard-library modules that do not exist on Windows.
POSIX_MODULES = {
    "fcntl", "pwd", "grp", "termios", "tty", "pty", "resource", "syslog", "crypt", "spwd", "nis",
    "posix", "readline", "curses", "_posixsubprocess", "_posixshmem",
}  # fmt: skip
# Names that Windows' os, signal and select modules lack, and an asyncio method it does not implement.
POSIX_ATTRIBUTES = {
    "os": {
        "getuid", "geteuid", "getgid", "getegid", "getgroups", "setuid", "setgid", "setsid", "getpgid",
        "setpgid", "killpg", "fork", "forkpty", "openpty", "wait3", "wait4", "WNOHANG", "getloadavg",
        "sysconf", "uname", "chown", "fchown", "lchown", "mkfifo", "mknod", "nice", "pipe2",
        "sched_getaffinity", "sched_setaffinity", "posix_spawn", "statvfs", "fstatvfs", "sync",
        "getpriority", "setpriority",
    },
    "signal": {
        "SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGCHLD", "SIGPIPE", "SIGTSTP",
        "SIGCONT", "SIGWINCH", "alarm", "pause", "setitimer", "getitimer", "siginterrupt", "pthread_kill",
        "pthread_sigmask", "sigwait",
    },
    "select": {"poll", "epoll", "kqueue"},
}  # fmt: skip
ANY_OBJECT = {"add_signal_handler", "remove_signal_handler"}


def _guarded_imports(tree: ast.AST) -> set[ast.AST]:
    """Imports in the body of a `try` that handles ImportError: their absence is provided for."""
    guarded: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers
        ):
            guarded |= {n for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)}
    return guarded


def posix_only_uses(path: Path) -> list[tuple[int, str]]:
    """Each POSIX-only import or attribute in a source file: (line, name). An import inside a `try`
    that handles ImportError is allowed (the code provides for the module's absence)."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    guarded = _guarded_imports(tree)
    for node in ast.walk(tree):
        names: list[str] = []
        if node in guarded:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] in POSIX_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in POSIX_MODULES:
                names = [node.module]
            names += [f"{node.module}.{a.name}" for a in node.names if a.name in POSIX_ATTRIBUTES.get(node.module, ())]
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.attr in POSIX_ATTRIBUTES.get(node.value.id, ()):
                names = [f"{node.value.id}.{node.attr}"]
            elif node.attr in ANY_OBJECT:
                names = [node.attr]
        found += [(getattr(node, "lineno", 0), name) for name in names]
    return found


def test_no_source_file_uses_a_posix_only_module_or_call() -> None:
    assert len(SOURCES) > 10
    uses = [f"{path.relative_to(ROOT)}:{line} {name}" for path in SOURCES for line, name in posix_only_uses(path)]
    assert uses == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "import os, fcntl\nfrom signal import SIGKILL\nos.getuid()\nloop.add_signal_handler(2, f)\nos.getpid()\n"
        "try:\n    import resource\nexcept ImportError:\n    resource = None\n"  # provided for: allowed
        "try:\n    import termios\nexcept OSError:\n    pass\n",  # not an ImportError: still found
        encoding="utf-8",
    )
    assert {name for _line, name in posix_only_uses(source)} == {
        "fcntl",
        "signal.SIGKILL",
        "os.getuid",
        "add_signal_handler",
        "termios",
    }


# Run in a fresh interpreter: the POSIX-only modules are made unimportable before anything of
# corrigenda loads (a None entry in sys.modules makes `import fcntl` raise ImportError, as on
# Windows). The libraries under the store import those modules inside a try or a platform test;
# our own modules may not import them at all, a rule the import hook enforces while the server
# loads too (the SDK's stdio module imports fcntl on POSIX, so the server is loaded with the
# modules back, the hook still on).
SCRIPT = """
import builtins, sys, tempfile
BLOCKED = {blocked!r}
for name in BLOCKED:
    sys.modules[name] = None

_import = builtins.__import__
def guarded(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get("__name__") or ""
    if importer.startswith("corrigenda.") and level == 0 and name.split(".")[0] in {posix!r}:
        raise ImportError(f"{{importer}} imports {{name}}, which Windows does not have")
    return _import(name, globals, locals, fromlist, level)
builtins.__import__ = guarded

from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
memory = Memory(tempfile.mkdtemp(), SentenceTransformerEmbedder())
note = memory.remember(Draft(text="The staging database runs on port 5433")).note
chains = memory.recall("which port does the staging database use?").chains
assert chains and chains[0].heads[0].id == note.id, chains
assert all(sys.modules.get(name) is None for name in BLOCKED)

for name in BLOCKED:
    del sys.modules[name]
import corrigenda.server.app, corrigenda.server.cli, corrigenda.server.http, corrigenda.server.stdio
print("ok")
"""

# What the libraries under the store tolerate missing (each imports it guarded); _posixsubprocess
# and _posixshmem are imported by the standard library itself on POSIX, so they stay.
BLOCKED = sorted(POSIX_MODULES - {"posix", "_posixsubprocess", "_posixshmem"})


def _run(script: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )


def test_the_store_writes_and_recalls_without_posix_only_modules() -> None:
    out = _run(SCRIPT.format(blocked=BLOCKED, posix=sorted(POSIX_MODULES)))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_the_import_hook_stops_our_module_importing_fcntl() -> None:
    """The run above would fail if a module of ours imported fcntl, even unconditionally loaded."""
    script = SCRIPT.format(blocked=[], posix=sorted(POSIX_MODULES)).split("from corrigenda.store")[0]
    script += "import corrigenda.store\nimport types\n"
    script += "m = types.ModuleType('corrigenda.store.sneaky')\nexec('import fcntl', m.__dict__)\n"
    out = _run(script)
    assert out.returncode != 0 and "corrigenda.store.sneaky imports fcntl" in out.stderr


def test_the_default_store_is_the_per_user_data_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_db() == str(tmp_path / "corrigenda")
    monkeypatch.delenv("XDG_DATA_HOME")
    expected = {
        "linux": Path.home() / ".local" / "share" / "corrigenda",
        "darwin": Path.home() / "Library" / "Application Support" / "corrigenda",
    }.get(sys.platform)
    if expected is None:  # Windows: %LOCALAPPDATA%\corrigenda
        expected = Path(os.environ["LOCALAPPDATA"]) / "corrigenda"
    assert Path(default_db()) == expected
