"""One project, one scope, from every entry point (README, "Scopes").

A project is a folder: the top of the version-control work tree it is in (git, Mercurial or Jujutsu:
the folder holding `.git`, `.hg` or `.jj`), or the folder itself when it is in none. Its scope is the
folder's name and a short hash of its full path, "api#3f2a9c": two folders named "api" in different
places keep different memories, and a person still reads which project a scope is.

Which folder a session or command uses, first that applies:
1. `--scope` / CORRIGENDA_SCOPE: a scope by name, no folder at all;
2. `--project DIR` / CORRIGENDA_PROJECT (what the client snippets pass: VS Code's and Cursor's
   `${workspaceFolder}`);
3. the client's first workspace root (MCP roots: clients of protocol versions before 2026-07-28);
4. CLAUDE_PROJECT_DIR, which Claude Code sets for the servers it starts;
5. for the command line, the working directory, when it is inside a work tree (a person runs it
   inside the project; a server's working directory is wherever its client started it);
6. else the scope "default".

Stores written before projects resolved to their work tree's top have scopes named after the root a
client sent, which may have been a folder inside the project: a project whose own scope holds nothing
yet keeps using that older scope while it holds notes (`ProjectScope.pick`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from corrigenda.store.where import SCOPE_MAX

DEFAULT_SCOPE = "default"
HASH_CHARS = 6
WORK_TREE_MARKERS = (".git", ".hg", ".jj")
CLAUDE_PROJECT_DIR = "CLAUDE_PROJECT_DIR"  # the project Claude Code (2.1.141 on) gives the servers it starts


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
    top = work_tree_top(folder) or folder
    return ProjectScope(str(top), scope_of_path(str(top)), older)


def working_directory_project() -> ProjectScope | None:
    """The project of the working directory, when it is inside a work tree (else None: a command run
    in a home folder is not a project)."""
    here = Path(os.getcwd())
    return project_scope(str(here)) if work_tree_top(here) is not None else None


def resolve(
    project: str | None, root: str | None, stored: Callable[[], Collection[str]], working_directory: bool = False
) -> tuple[str, str]:
    """The scope of a session or command that names none and has no --scope, and where it came from (said
    to the agent and logged): `project` (--project), else the client's first `root`, else
    CLAUDE_PROJECT_DIR, else (a command a person runs: `working_directory`) the working directory's work
    tree, else DEFAULT_SCOPE. `stored` lists the scopes holding notes, asked only when an older scope
    name could apply (ProjectScope.pick)."""
    if project is not None:
        found, source = project_scope(project), f"the project folder {project} (--project)"
    elif root is not None:
        found, source = project_scope(root), f"the client's workspace root {root}"
    elif os.environ.get(CLAUDE_PROJECT_DIR):
        given = os.environ[CLAUDE_PROJECT_DIR]
        found, source = project_scope(given), f"the project folder {given} ({CLAUDE_PROJECT_DIR})"
    else:
        here = working_directory_project() if working_directory else None
        if here is None:
            return DEFAULT_SCOPE, "no project folder: no --project, no workspace root, and no work tree here"
        found, source = here, f"the working directory's project {here.folder}"
    scope = found.scope if found.older == found.scope else found.pick(stored())
    return scope, source if scope == found.scope else f"{source}, by the name its memory had before"
