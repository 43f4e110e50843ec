"""`corrigenda install CLIENT`: write corrigenda's entry into an MCP client's own configuration file.

The entry runs this very executable by its absolute path (a client started from a dock or menu does
not see the shell's PATH), and wires the project (project.py) the way each client can:
- VS Code sends its folders as MCP roots: the entry names no folder, the first root is the project,
  and a window with no folder is scope 'default'. (`${workspaceFolder}` in the user-level file makes
  VS Code refuse to start the server in a window with no folder or with several: vscode#243526.)
- Cursor names its window's folders in WORKSPACE_FOLDER_PATHS, set for the servers it starts, and
  declares roots but answers roots/list with an error (as its users report): the entry names no folder
  either, the first of those folders is the project, and a window with no folder is scope 'default'
  (Cursor starts servers in "/" or the home folder, which are no project). An entry an older install
  wrote with `--project ${workspaceFolder}` gets the new args like any other change of the entry;
- Claude Code starts a server in the folder it was started in: the working directory's work tree;
- Claude Desktop has no workspace: the scope is 'default' unless --project or --scope is given.

Nothing a person had in the file is lost. The file is read as JSON with comments (VS Code's JSONC) and
edited as text (install_jsonc.py): only the entry's own values change, so comments, trailing commas,
numbers, key order and layout stay as written. An entry already there is updated, keeping its env and
other keys. The file keeps its mode and owner, a symlink is written through to its target, every run
that changes the file leaves a backup of its own (`.bak`, `.bak.2`, ...), and a change another program
makes while the install runs is read again and kept. A file that cannot be updated safely is left as it
was.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir

from .install_jsonc import Node, Reader, Unreadable, json_text, put

NAME = "corrigenda"
CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")


@dataclass(frozen=True)
class Entry:
    client: str
    file: Path  # the client's configuration file
    key: str  # the object in it that holds servers by name
    value: dict[str, Any]  # corrigenda's entry

    def snippet(self) -> str:
        return json_text({self.key: {NAME: self.value}})


class InstallError(Exception):
    """The configuration file cannot be updated safely; nothing was written."""


def executable() -> str:
    """The absolute path of the running `corrigenda` (the script beside this Python when run as
    `python -m`, which is how the tests run it)."""
    here = Path(sys.argv[0])
    if here.name.startswith(NAME) and here.exists():
        return str(here.resolve())
    beside = Path(sys.executable).with_name(NAME + (".exe" if os.name == "nt" else ""))
    return str(beside)


def _home() -> Path:
    return Path.home()


def config_file(client: str) -> Path:
    """Where each client keeps its user-wide MCP servers on this platform."""
    if client == "claude-desktop":
        if sys.platform == "darwin":
            return _home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if os.name == "nt":
            return (
                Path(os.environ.get("APPDATA", _home() / "AppData" / "Roaming"))
                / "Claude"
                / "claude_desktop_config.json"
            )
        return Path(user_config_dir("Claude", appauthor=False)) / "claude_desktop_config.json"
    if client == "claude-code":
        return _home() / ".claude.json"  # user scope: `claude mcp add --scope user` writes here
    if client == "cursor":
        return _home() / ".cursor" / "mcp.json"
    if client == "vscode":
        if sys.platform == "darwin":
            return _home() / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
        if os.name == "nt":
            return Path(os.environ.get("APPDATA", _home() / "AppData" / "Roaming")) / "Code" / "User" / "mcp.json"
        return Path(user_config_dir("Code", appauthor=False)) / "User" / "mcp.json"
    raise InstallError(f"client: {client!r} is not one of {', '.join(CLIENTS)}")


def entry(client: str, command: str, project: str | None = None, env: Mapping[str, str] | None = None) -> Entry:
    """corrigenda's entry for `client`: `command serve`, the project wiring (module docstring), `env`."""
    args = ["serve"]
    if project is not None:
        args += ["--project", project]
    value: dict[str, Any] = {"command": command, "args": args}
    if client in ("vscode", "claude-code"):
        value = {"type": "stdio", **value}
    if env:
        value["env"] = dict(env)
    try:
        json_text(value).encode("utf-8")
    except UnicodeEncodeError:  # an argument holding bytes that are not UTF-8 (surrogate-escaped by Python)
        raise InstallError(
            "the entry would hold text that is not valid Unicode (a --db or --project path with bytes that are "
            "not UTF-8?): give a path in UTF-8"
        ) from None
    key = "servers" if client == "vscode" else "mcpServers"
    return Entry(client, config_file(client), key, value)


# Merging: the file's text read (install_jsonc.py), corrigenda's entry put into it, the result checked.


def _read_document(text: str, path: Path, client: str) -> Node | None:
    try:
        return Reader(text).document()
    except Unreadable as exc:
        line = text.count("\n", 0, exc.at) + 1
        column = exc.at - (text.rfind("\n", 0, exc.at) + 1) + 1
        raise InstallError(
            f"{path} is not JSON (line {line}, column {column}: {exc}): fix it, or add the entry by hand from "
            f"`corrigenda install {client} --print`"
        ) from None


@dataclass(frozen=True)
class Installed:
    """What an install did: the file (as named), its backup (None: nothing written, or no file before),
    what changed and what was kept of an entry already there, one line each."""

    file: Path
    backup: Path | None
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    created: bool = False


def _short(value: Any) -> str:
    return json.dumps(value)  # ASCII: a value read from the file may hold a lone surrogate


def _updated(text: str, made: Entry, path: Path) -> tuple[str, list[str], list[str]]:
    """The file's text with corrigenda's entry in it; what changed and what was kept."""
    document = _read_document(text, path, made.client)
    if document is None:  # nothing but blanks and comments: they stay, the object follows
        whole = json_text({made.key: {NAME: made.value}})
        return text + ("\n" if text and not text.endswith("\n") else "") + whole + "\n", ["added the entry"], []
    if document.members is None:
        raise InstallError(
            f"{path} is not a JSON object; add the entry by hand from `corrigenda install {made.client} --print`"
        )
    servers = document.get(made.key)
    if servers is None:
        return put(text, (made.key,), {NAME: made.value}), ["added the entry"], []
    if servers.members is None:
        raise InstallError(
            f"{path}: its {made.key!r} is not a JSON object; add the entry by hand from "
            f"`corrigenda install {made.client} --print`"
        )
    ours = servers.get(NAME)
    if ours is None:
        return put(text, (made.key, NAME), made.value), ["added the entry"], []
    if ours.members is None:
        return put(text, (made.key, NAME), made.value), [f"replaced the entry {_short(ours.plain())}"], []
    changed, kept = [], []
    old = ours.plain()
    for name, value in made.value.items():
        if name == "env" and isinstance(old.get("env"), dict):
            for variable, setting in value.items():
                if old["env"].get(variable) != setting:
                    text = put(text, (made.key, NAME, "env", variable), setting)
                    was = _short(old["env"][variable]) if variable in old["env"] else "(none)"
                    changed.append(f"env {variable}: {was} -> {_short(setting)}")
        elif old.get(name) != value:
            text = put(text, (made.key, NAME, name), value)
            changed.append(f"{name}: {_short(old[name]) if name in old else '(none)'} -> {_short(value)}")
    for variable, setting in (old.get("env") or {}).items() if isinstance(old.get("env"), dict) else ():
        if variable not in made.value.get("env", {}):
            kept.append(f"env {variable}={_short(setting)}")
    kept += [name for name in old if name not in made.value and not (name == "env" and isinstance(old[name], dict))]
    return text, changed, kept


def _keeps_everything(text: str, new_text: str, made: Entry) -> bool:
    """Whether `new_text` holds all that `text` held, and corrigenda's entry as asked (kept keys, merged env):
    the edit is checked, not trusted."""
    before, after = Reader(text).document(), Reader(new_text).document()
    old: dict[str, Any] = before.plain() if before is not None else {}
    new: dict[str, Any] = after.plain() if after is not None else {}
    if not isinstance(new.get(made.key), dict) or NAME not in new[made.key]:
        return False
    entry = new[made.key].pop(NAME)
    servers = old.get(made.key)
    was = servers.pop(NAME, None) if isinstance(servers, dict) else None
    if made.key not in old and new[made.key] == {}:
        del new[made.key]
    expected = dict(was) if isinstance(was, dict) else {}
    for name, value in made.value.items():
        merge = name == "env" and isinstance(expected.get("env"), dict)
        expected[name] = {**expected["env"], **value} if merge else value
    return new == old and entry == expected


# Writing: the file through its symlink, its mode and owner kept, a backup of its own per run, replaced
# atomically only if nobody wrote it since it was read.

ATTEMPTS = 5  # reads of a file another program keeps rewriting before giving up


def _by_hand(made: Entry) -> str:
    return f"or add the entry by hand from `corrigenda install {made.client} --print`"


def _read(target: Path, made: Entry) -> bytes | None:
    """The file's bytes; None when there is none yet."""
    named = made.file
    if target.is_dir():
        raise InstallError(f"{named} is a folder, not a file: move it aside and run again, {_by_hand(made)}")
    try:
        return target.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(
            f"{named} cannot be read ({exc.strerror}): fix that and run again, {_by_hand(made)}"
        ) from None


def _decode(data: bytes, made: Entry) -> tuple[str, str]:
    """The text, and the byte-order mark it began with (kept on writing)."""
    bom = "\ufeff" if data.startswith(codecs.BOM_UTF8) else ""
    try:
        return data[len(bom.encode()) :].decode("utf-8"), bom
    except UnicodeDecodeError as exc:
        at = exc.start + len(bom.encode())
        raise InstallError(
            f"{made.file} is not UTF-8 text (byte 0x{data[at]:02x} at offset {at}): save it as UTF-8 and run "
            f"again, {_by_hand(made)}"
        ) from None


def _check_writable(target: Path, made: Entry) -> None:
    """Refuse a file or folder its owner made read-only (checked by mode too: root may write anything)."""
    named, folder = made.file, target.parent
    if target.exists():
        mode = stat.S_IMODE(target.stat().st_mode)
        if not mode & stat.S_IWUSR or not os.access(target, os.W_OK):
            raise InstallError(
                f"{named} is read-only (mode {mode:04o}): make it writable (chmod u+w) and run again, {_by_hand(made)}"
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InstallError(f"{named}: its folder {folder} cannot be made ({exc.strerror}); {_by_hand(made)}") from None
    mode = stat.S_IMODE(folder.stat().st_mode)
    if not mode & stat.S_IWUSR or not os.access(folder, os.W_OK):
        raise InstallError(
            f"{named}: its folder {folder} is read-only (mode {mode:04o}), and the file is replaced there: make it "
            f"writable and run again, {_by_hand(made)}"
        )


def _backup(made: Entry, data: bytes, mode: int) -> Path:
    """A copy of the file as it was, beside it under the first free name: never over an older one."""
    named = made.file
    for n in itertools.count(1):
        backup = named.with_name(named.name + (".bak" if n == 1 else f".bak.{n}"))
        try:
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with open(fd, "wb") as out:
            out.write(data)
        os.chmod(backup, mode)
        return backup
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """An advisory lock on the file while it is checked and replaced: two installs take turns."""
    try:
        import fcntl
    except ImportError:  # Windows: the re-read before the replace still guards
        yield
        return
    try:
        fd = os.open(target, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write(made: Entry) -> Installed:
    """Put the entry into its file, keeping everything else (module docstring); InstallError, with the file
    as it was and nothing left beside it, when that cannot be done safely."""
    target = Path(os.path.realpath(made.file))  # a symlink (dotfiles) is written through, not replaced
    for _ in range(ATTEMPTS):
        before = _read(target, made)
        text, bom = _decode(before, made) if before is not None else ("", "")
        new_text, changed, kept = _updated(text, made, made.file)
        if not _keeps_everything(text, new_text, made):
            raise InstallError(
                f"{made.file}: corrigenda could not place its entry without changing something else (please "
                f"report it); the file is as it was: {_by_hand(made)}"
            )
        if before is not None and not changed:
            return Installed(made.file, None, [], kept)
        data = (bom + new_text).encode("utf-8")  # the file's own text is valid UTF-8, the entry's checked
        _check_writable(target, made)
        info = target.stat() if before is not None else None
        mode = stat.S_IMODE(info.st_mode) if info else 0o600
        backup = partial = None
        try:
            fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
            partial = Path(name)
            with open(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(partial, mode)
            owner = os.stat(partial)
            give = getattr(os, "chown", None)  # POSIX only: Windows keeps no owner to give back
            if info and give is not None and (info.st_uid, info.st_gid) != (owner.st_uid, owner.st_gid):
                with contextlib.suppress(OSError):  # only root may give a file away; the mode still holds
                    give(partial, info.st_uid, info.st_gid)
            with _locked(target):
                if before is not None:
                    backup = _backup(made, before, mode)
                if _read(target, made) == before:  # else written since it was read: read again, merge again
                    os.replace(partial, target)
                    partial = None
        except OSError as exc:
            raise InstallError(
                f"{made.file} could not be written ({exc.strerror}); it is as it was: {_by_hand(made)}"
            ) from None
        finally:
            if partial is not None:  # not replaced: nothing of this attempt stays
                partial.unlink(missing_ok=True)
                if backup is not None:
                    backup.unlink(missing_ok=True)
        if partial is None:
            return Installed(made.file, backup, changed, kept, created=before is None)
    raise InstallError(
        f"{made.file} changed each time it was read ({ATTEMPTS} times): another program keeps writing it; close "
        f"the client and run again, {_by_hand(made)}"
    )
