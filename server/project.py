"""One project, one scope, from every entry point (README, "Scopes").

A project is a folder: the top of the version-control work tree it is in (git, Mercurial or Jujutsu:
the folder holding `.git`, `.hg` or `.jj`), or the folder itself when it is in none. Its scope is the
folder's name and a short hash of its full path, "api#3f2a9c": two folders named "api" in different
places keep different memories, and a person still reads which project a scope is. The filesystem's
root, the home folder and the temporary folder are no project (`NOT_PROJECTS`): clients start servers
there (Claude Desktop in "/", others in the home folder), and a shell opens there; they use "default".
A folder gets the same scope whichever way it is given, so one folder is one scope from every entry point.

Which folder a session or command uses, first that applies (after a scope the call names, and
`--scope` / CORRIGENDA_SCOPE, a scope by name that needs no folder):
1. the client's first workspace root (MCP roots: clients of protocol versions before 2026-07-28;
   a client that declares roots but answers roots/list with an error, as Cursor's users report of
   it, has none);
2. `--project DIR` / CORRIGENDA_PROJECT (a fixed folder, `corrigenda install --project`); a value still
   holding a client's variable (`${workspaceFolder}` that the client did not fill in) is no folder: it
   is logged and passed over;
3. CLAUDE_PROJECT_DIR, which Claude Code sets for the servers it starts, then WORKSPACE_FOLDER_PATHS,
   which Cursor sets (its window's folders, a JSON array or one path: the first folder; a value naming
   no folder here is logged and passed over);
4. the working directory of the process (`serve`, `ui` and every command: where it was started);
5. else the scope "default".

Stores written before projects resolved to their work tree's top have scopes named after the root a
client sent, which may have been a folder inside the project: a project whose own scope holds nothing
yet keeps using that older scope while it holds notes (`ProjectScope.pick`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from corrigenda.store.where import SCOPE_MAX

DEFAULT_SCOPE = "default"
HASH_CHARS = 6
WORK_TREE_MARKERS = (".git", ".hg", ".jj")
NOT_PROJECTS = "the filesystem's root, the home folder or the temporary folder"
CLAUDE_PROJECT_DIR = "CLAUDE_PROJECT_DIR"  # the project Claude Code (2.1.141 on) gives the servers it starts
WORKSPACE_FOLDER_PATHS = "WORKSPACE_FOLDER_PATHS"  # the folders of the Cursor window that started the server
UNEXPANDED = "${"  # a client's variable (`${workspaceFolder}`) the client left as written

log = logging.getLogger(__name__)


def scope_of_path(path: str) -> str:
    """'/home/me/My Project' -> 'My Project#<6 hex of sha256("/home/me/My Project")>'. A Windows drive
    letter is upper-cased (it is case-insensitive); a trailing separator is the same folder."""
    path = path.rstrip("/\\") or "/"
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # /C:/… from a file:// URI on Windows
        path = path[1:]
    if len(path) >= 2 and path[1] == ":":
        path = path[0].upper() + path[1:]
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or "root"
    digest = hashlib.sha256(path.encode()).hexdigest()[:HASH_CHARS]
    return f"{name[: SCOPE_MAX - HASH_CHARS - 1]}#{digest}"


def scope_from_root(uri: str) -> str:
    """The scope of an MCP root as earlier versions named it: its path as the client sent it (a file
    URI on another machine, over HTTP, names a folder this one does not have)."""
    parts = urlsplit(uri)
    path = unquote(parts.path if parts.scheme else uri).rstrip("/\\") or "/"
    if parts.netloc:  # file://server/share/…: the host is part of where the folder is
        digest = hashlib.sha256(f"{parts.netloc}{path}".encode()).hexdigest()[:HASH_CHARS]
        name = path.rsplit("/", 1)[-1] or parts.netloc
        return f"{name[: SCOPE_MAX - HASH_CHARS - 1]}#{digest}"
    return scope_of_path(path)


def not_a_project(folder: Path) -> bool:
    """Whether `folder` (resolved, in no work tree) is one of the places that hold no project: the
    filesystem's root (or a drive's), the home folder, the temporary folder (NOT_PROJECTS)."""
    shared = [Path(tempfile.gettempdir())]
    with contextlib.suppress(RuntimeError, KeyError):  # no home folder known (a bare container)
        shared.append(Path.home())
    return folder == Path(folder.anchor) or any(folder == place.resolve() for place in shared)


def work_tree_top(folder: Path) -> Path | None:
    """The top of the version-control work tree `folder` is in, or None."""
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in WORK_TREE_MARKERS):
            return candidate
    return None


@dataclass(frozen=True)
class ProjectScope:
    """The scope of a project folder, and the older scope its folder had when named as it was given."""

    folder: str
    scope: str
    older: str  # the scope a root of exactly `given` was named before projects resolved to their top

    def pick(self, stored: Collection[str]) -> str:
        """The project's scope; the older one while only it holds notes (`stored`: scopes with notes)."""
        if self.scope not in stored and self.older in stored:
            return self.older
        return self.scope


def project_scope(given: str) -> ProjectScope:
    """The project of a folder path or file:// URI (see the module docstring). A folder this machine
    does not have (a root sent over HTTP) is the project as it is named."""
    parts = urlsplit(given)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            scope = scope_from_root(given)
            return ProjectScope(given, scope, scope)
        given = unquote(parts.path)
        if len(given) > 2 and given[0] == "/" and given[2] == ":":
            given = given[1:]
    older = scope_of_path(given)
    folder = Path(given).expanduser()
    if not folder.is_dir():
        return ProjectScope(given, older, older)
    folder = folder.resolve()
    top = work_tree_top(folder)
    if top is None and not_a_project(folder):
        return ProjectScope(str(folder), DEFAULT_SCOPE, older)
    top = top or folder
    return ProjectScope(str(top), scope_of_path(str(top)), older)


def workspace_folder(value: str) -> str | None:
    """The folder Cursor's WORKSPACE_FOLDER_PATHS names: the first of a JSON array of paths, or the value
    as one path when it is not JSON; None when that is no folder on this machine."""
    try:
        given = json.loads(value)
    except ValueError:
        given = value
    if isinstance(given, list):
        given = given[0] if given else None
    elif not isinstance(given, str):  # JSON, but no path: a folder named "2026", say
        given = value
    if not isinstance(given, str) or not given or not Path(given).expanduser().is_dir():
        return None
    return given


def resolve(
    project: str | None,
    root: str | None,
    stored: Callable[[], Collection[str]],
    here: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """The scope of a session or command that names none and has no --scope, and where it came from (said
    to the agent and logged): the client's first `root`, else `project` (--project), else
    CLAUDE_PROJECT_DIR, else WORKSPACE_FOLDER_PATHS, else `here` (the working directory of the process,
    None for a server object built without one), else DEFAULT_SCOPE. A `project` holding an unexpanded
    `${...}` and a WORKSPACE_FOLDER_PATHS naming no folder are passed over, logged and said. `stored`
    lists the scopes holding notes, asked only when an older scope name could apply (ProjectScope.pick)."""
    passed: list[str] = []  # sources given but passed over, said after the one used
    if root is None and project is not None and UNEXPANDED in project:
        log.warning(
            "--project / CORRIGENDA_PROJECT is %r, a variable the client did not fill in: passed over, as if "
            "not given (an entry with no --project lets the client's roots, its environment or the working "
            "directory name the folder)",
            project,
        )
        passed.append(f"--project {project} is a variable the client did not fill in")
        project = None
    env = os.environ if env is None else env  # a client of the shared engine brings its own (engine.py)
    cursor = env.get(WORKSPACE_FOLDER_PATHS) or ""
    if root is not None:
        found, source = project_scope(root), f"the client's workspace root {root}"
    elif project is not None:
        found, source = project_scope(project), f"the project folder {project} (--project)"
    elif env.get(CLAUDE_PROJECT_DIR):
        given = env[CLAUDE_PROJECT_DIR]
        found, source = project_scope(given), f"the project folder {given} ({CLAUDE_PROJECT_DIR})"
    elif cursor and (folder := workspace_folder(cursor)) is not None:
        found, source = project_scope(folder), f"the workspace folder {folder} ({WORKSPACE_FOLDER_PATHS})"
    else:
        if cursor:
            log.warning("%s is %r, which names no folder here: passed over", WORKSPACE_FOLDER_PATHS, cursor)
            passed.append(f"{WORKSPACE_FOLDER_PATHS} {cursor} names no folder here")
        if here is None:
            said = "no project folder: no workspace root, no --project and no working directory"
            return DEFAULT_SCOPE, "; ".join([said, *passed])
        found, source = project_scope(here), f"the working directory {here}"
    scope = found.scope if found.older == found.scope else found.pick(stored())
    if scope == DEFAULT_SCOPE:
        source = f"{source}, which is no project ({NOT_PROJECTS})"
    elif scope != found.scope:
        source = f"{source}, by the name its memory had before"
    return scope, "; ".join([source, *passed])
