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
edited as text: only the entry's own values change, so comments, trailing commas, numbers, key order
and layout stay as written. An entry already there is updated, keeping its env and other keys. The file
keeps its mode and owner, a symlink is written through to its target, every run that changes the file
leaves a backup of its own (`.bak`, `.bak.2`, ...), and a change another program makes while the
install runs is read again and kept. A file that cannot be updated safely is left as it was.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir

NAME = "corrigenda"
CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")


@dataclass(frozen=True)
class Entry:
    client: str
    file: Path  # the client's configuration file
    key: str  # the object in it that holds servers by name
    value: dict[str, Any]  # corrigenda's entry

    def snippet(self) -> str:
        return _json({self.key: {NAME: self.value}})


def _json(value: Any, pad: str = "", unit: str = "  ") -> str:
    """JSON indented by `unit` from `pad`, a list of plain values on one line, as people write these files."""
    if isinstance(value, dict) and value:
        items = [
            f"{pad}{unit}{json.dumps(k, ensure_ascii=False)}: {_json(v, pad + unit, unit)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return "[\n" + ",\n".join(f"{pad}{unit}{_json(v, pad + unit, unit)}" for v in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


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
        _json(value).encode("utf-8")
    except UnicodeEncodeError:  # an argument holding bytes that are not UTF-8 (surrogate-escaped by Python)
        raise InstallError(
            "the entry would hold text that is not valid Unicode (a --db or --project path with bytes that are "
            "not UTF-8?): give a path in UTF-8"
        ) from None
    key = "servers" if client == "vscode" else "mcpServers"
    return Entry(client, config_file(client), key, value)


# Reading: JSON with comments (VS Code's JSONC: `//` and `/* */` comments, trailing commas), parsed to
# where each value sits in the text, so that an edit replaces or inserts text and touches nothing else.

MAX_DEPTH = 256  # nesting a configuration never reaches; deeper is refused rather than a RecursionError
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_LITERALS = {"true": True, "false": False, "null": None}
_NOT_JSON = ("NaN", "Infinity", "-Infinity")  # Python's json writes them; clients refuse the whole file


@dataclass
class _Node:
    """A value and where it sits in the text: [start, end). An object's members in order (key, node)."""

    start: int
    end: int
    value: Any = None  # strings, true/false/null; a number's literal text
    members: list[tuple[str, _Node]] | None = None  # an object
    items: list[_Node] | None = None  # an array

    def get(self, key: str) -> _Node | None:
        """The member named `key` (the last one, as JSON.parse reads duplicates)."""
        found = [node for name, node in self.members or [] if name == key]
        return found[-1] if found else None

    def plain(self) -> Any:
        if self.members is not None:
            return {name: node.plain() for name, node in self.members}
        if self.items is not None:
            return [node.plain() for node in self.items]
        return self.value


class _Unreadable(Exception):
    def __init__(self, message: str, at: int) -> None:
        super().__init__(message)
        self.at = at


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def blank(self) -> None:
        """Past whitespace and comments."""
        text = self.text
        while self.at < len(text):
            if text[self.at] in " \t\r\n":
                self.at += 1
            elif text.startswith("//", self.at):
                end = text.find("\n", self.at)
                self.at = len(text) if end < 0 else end
            elif text.startswith("/*", self.at):
                end = text.find("*/", self.at + 2)
                if end < 0:
                    raise _Unreadable("a /* comment that is never closed", self.at)
                self.at = end + 2
            else:
                return

    def document(self) -> _Node | None:
        """The file's value; None for a file with nothing but blanks and comments."""
        self.blank()
        if self.at == len(self.text):
            return None
        node = self.value(0)
        self.blank()
        if self.at < len(self.text):
            raise _Unreadable(f"{self.text[self.at]!r} after the end of the JSON value", self.at)
        return node

    def value(self, depth: int) -> _Node:
        if depth > MAX_DEPTH:
            raise _Unreadable(f"values nested deeper than {MAX_DEPTH} levels", self.at)
        text, start = self.text, self.at
        if start >= len(text):
            raise _Unreadable("the file ends inside a value", start)
        if text[start] in "{[":
            return self.container(depth)
        if text[start] == '"':
            return self.string()
        found = _NUMBER.match(text, start)
        if found:
            self.at = found.end()
            return _Node(start, self.at, found.group())
        for word, value in _LITERALS.items():
            if text.startswith(word, start):
                self.at = start + len(word)
                return _Node(start, self.at, value)
        for word in _NOT_JSON:
            if text.startswith(word, start):
                raise _Unreadable(
                    f"{word} is not a JSON value (clients refuse the file); write a number or null", start
                )
        raise _Unreadable(f"unexpected {text[start]!r}", start)

    def string(self) -> _Node:
        found = _STRING.match(self.text, self.at)
        if not found:
            raise _Unreadable("a string that is not closed, or holds a control character or a bad escape", self.at)
        self.at = found.end()
        return _Node(found.start(), self.at, json.loads(found.group()))

    def container(self, depth: int) -> _Node:
        text, start = self.text, self.at
        is_object, close = text[start] == "{", "}" if text[start] == "{" else "]"
        node = _Node(start, start, members=[] if is_object else None, items=None if is_object else [])
        self.at += 1
        while True:
            self.blank()
            if self.at < len(text) and text[self.at] == close:
                break
            if is_object:
                if self.at >= len(text) or text[self.at] != '"':
                    raise _Unreadable("expected a member name in double quotes", self.at)
                key = self.string().value
                self.blank()
                if self.at >= len(text) or text[self.at] != ":":
                    raise _Unreadable("expected ':' after a member name", self.at)
                self.at += 1
                self.blank()
                assert node.members is not None
                node.members.append((key, self.value(depth + 1)))
            else:
                assert node.items is not None
                node.items.append(self.value(depth + 1))
            self.blank()
            if self.at < len(text) and text[self.at] == ",":
                self.at += 1  # a trailing comma before the close is JSONC
            elif self.at >= len(text) or text[self.at] != close:
                raise _Unreadable(f"expected ',' or {close!r}", self.at)
        self.at += 1
        node.end = self.at
        return node


def _read_document(text: str, path: Path, client: str) -> _Node | None:
    try:
        return _Reader(text).document()
    except _Unreadable as exc:
        line = text.count("\n", 0, exc.at) + 1
        column = exc.at - (text.rfind("\n", 0, exc.at) + 1) + 1
        raise InstallError(
            f"{path} is not JSON (line {line}, column {column}: {exc}): fix it, or add the entry by hand from "
            f"`corrigenda install {client} --print`"
        ) from None


# Editing: put one value at a path of object keys, as text.


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _line_indent(text: str, at: int) -> str:
    """The blanks that begin the line `at` is on."""
    start = _line_start(text, at)
    line = text[start:at]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_unit(text: str) -> str:
    found = re.search(r"\n([ \t]+)\S", text)
    return found.group(1) if found else "  "


def _put(text: str, keys: tuple[str, ...], value: Any) -> str:
    """`text` with `value` at `keys` (each an object member; all but the last there already): the value
    replaced in place, or a member added after the last one, indented as the file is."""
    node = _Reader(text).document()
    for key in keys[:-1]:
        assert node is not None
        node = node.get(key)
    assert node is not None and node.members is not None
    unit, newline = _indent_unit(text), "\r\n" if "\r\n" in text else "\n"
    old = node.get(keys[-1])
    if old is not None and "\n" in text[node.start : node.end]:
        rendered = _json(value, _line_indent(text, old.start), unit).replace("\n", newline)
        return text[: old.start] + rendered + text[old.end :]
    # An object written on one line stays on one line, spaced as it is; an empty one opens up, unless
    # the whole file is one line.
    one_line = "\n" not in text[node.start : node.end] and (bool(node.members) or "\n" not in text.strip())
    spaced = '": ' in text[node.start : node.end] or not node.members
    separators = (", ", ": ") if spaced else (",", ":")
    if old is not None:
        return text[: old.start] + json.dumps(value, ensure_ascii=False, separators=separators) + text[old.end :]
    outer = _line_indent(text, node.start)
    pad = outer + unit
    close = node.end - 1
    if node.members:
        last = node.members[-1][1]
        if _line_start(text, last.start) > node.start:  # members on lines of their own: indented as the last
            pad = _line_indent(text, last.start)
        after = _Reader(text)
        after.at = last.end
        after.blank()
        if text[after.at] != ",":  # a comma after the last value, unless it has one already (trailing)
            text, close = text[: last.end] + "," + text[last.end :], close + 1
    if one_line:
        member = json.dumps({keys[-1]: value}, ensure_ascii=False, separators=separators)[1:-1]
        space = " " if spaced and node.members and text[close - 1] != " " else ""
        return text[:close] + space + member + text[close:]
    member = f"{pad}{json.dumps(keys[-1], ensure_ascii=False)}: {_json(value, pad, unit)}".replace("\n", newline)
    if not text[_line_start(text, close) : close].strip(" \t"):  # the close on a line of its own
        at = _line_start(text, close)
        return text[:at] + member + newline + text[at:]
    return text[:close] + newline + member + newline + outer + text[close:]


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
        whole = _json({made.key: {NAME: made.value}})
        return text + ("\n" if text and not text.endswith("\n") else "") + whole + "\n", ["added the entry"], []
    if document.members is None:
        raise InstallError(
            f"{path} is not a JSON object; add the entry by hand from `corrigenda install {made.client} --print`"
        )
    servers = document.get(made.key)
    if servers is None:
        return _put(text, (made.key,), {NAME: made.value}), ["added the entry"], []
    if servers.members is None:
        raise InstallError(
            f"{path}: its {made.key!r} is not a JSON object; add the entry by hand from "
            f"`corrigenda install {made.client} --print`"
        )
    ours = servers.get(NAME)
    if ours is None:
        return _put(text, (made.key, NAME), made.value), ["added the entry"], []
    if ours.members is None:
        return _put(text, (made.key, NAME), made.value), [f"replaced the entry {_short(ours.plain())}"], []
    changed, kept = [], []
    old = ours.plain()
    for name, value in made.value.items():
        if name == "env" and isinstance(old.get("env"), dict):
            for variable, setting in value.items():
                if old["env"].get(variable) != setting:
                    text = _put(text, (made.key, NAME, "env", variable), setting)
                    was = _short(old["env"][variable]) if variable in old["env"] else "(none)"
                    changed.append(f"env {variable}: {was} -> {_short(setting)}")
        elif old.get(name) != value:
            text = _put(text, (made.key, NAME, name), value)
            changed.append(f"{name}: {_short(old[name]) if name in old else '(none)'} -> {_short(value)}")
    for variable, setting in (old.get("env") or {}).items() if isinstance(old.get("env"), dict) else ():
        if variable not in made.value.get("env", {}):
            kept.append(f"env {variable}={_short(setting)}")
    kept += [name for name in old if name not in made.value and not (name == "env" and isinstance(old[name], dict))]
    return text, changed, kept


def _keeps_everything(text: str, new_text: str, made: Entry) -> bool:
    """Whether `new_text` holds all that `text` held, and corrigenda's entry as asked (kept keys, merged env):
    the edit is checked, not trusted."""
    before, after = _Reader(text).document(), _Reader(new_text).document()
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
