"""The walk of one `recall_chains`: which functions of `store/` one recall enters, across how many files,
and how often it climbs back into memory.py from another of them, or from a thread they handed work to
(a callback into Memory).

A store of a few notes (one corrected, one with a prerequisite) is made in a temporary directory and
recalled once untimed; then one `Memory.recall` is traced with a profile hook on every thread (the
searches run on a pool): each call event in a file of `store/` counts once per distinct function.
With `--before REV`, the same is measured on the code of that revision (a temporary worktree, run in a
subprocess), so both walks are in one results file.

    .venv/bin/python bench/walk.py [--before REV] [--json bench/results/walk.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script


def walk() -> dict[str, Any]:
    """The walk of one recall on the `corrigenda.store` this interpreter imports."""
    import corrigenda.store
    from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder

    root = os.path.realpath(os.path.dirname(corrigenda.store.__file__))
    # Every thread is profiled from the start (the search pool's threads are made by the first write),
    # and counts only while `tracing` is set.
    tracing = threading.Event()
    hook: list[Any] = []

    def dispatch(frame: FrameType, event: str, arg: object) -> None:
        if hook:
            hook[0](frame, event, arg)

    threading.setprofile(dispatch)
    sys.setprofile(dispatch)
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(os.path.join(tmp, "store"), SentenceTransformerEmbedder())
        old = memory.remember(Draft(text="The payments service listens on port 8443"), scope="ops").note
        memory.correct(old.id, Draft(text="The payments service listens on port 9443"), reason="moved")
        vpn = memory.remember(Draft(text="The ops VPN must be up to reach payments"), scope="ops").note
        memory.remember(
            Draft(
                text="Payments deploys need the ops VPN",
            ),
            scope="ops",
            depends_on=[vpn.id],
        )
        memory.remember(Draft(text="The wiki lives on host 12"), scope="ops")
        memory.recall("Which port does the payments service listen on?", "ops")  # warm: model, scans, caches

        stops: set[tuple[str, str]] = set()
        climbs = 0
        lock = threading.Lock()

        def profile(frame: FrameType, event: str, _: object) -> None:
            nonlocal climbs
            if event != "call" or not tracing.is_set():
                return
            path = os.path.realpath(frame.f_code.co_filename)
            if not path.startswith(root + os.sep):
                return
            here = os.path.relpath(path, root)
            with lock:
                stops.add((here, frame.f_code.co_qualname))
                if here == "memory.py" and climbed(frame):
                    climbs += 1

        def climbed(frame: FrameType) -> bool:
            """Whether this call into memory.py comes from another file of store/ (the nearest of its
            callers there), or from a pool thread that store/ code handed work to."""
            caller = frame.f_back
            while caller is not None:
                path = os.path.realpath(caller.f_code.co_filename)
                if path.startswith(root + os.sep):
                    return not path.endswith(os.sep + "memory.py")
                caller = caller.f_back
            return threading.current_thread() is not threading.main_thread()  # the main thread's is the call itself

        hook.append(profile)
        tracing.set()
        try:
            memory.recall("Which port does the payments service listen on?", "ops")
        finally:
            tracing.clear()
    files = sorted({f for f, _ in stops})
    return {"functions": len(stops), "files": len(files), "climbs_into_memory": climbs, "file_list": files}


def measure_at(revision: str) -> dict[str, Any]:
    """`walk()` on the code of `revision`, in a temporary worktree, in a subprocess."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), revision], cwd=harness.ROOT, check=True)
        try:
            shim = Path(tmp) / "shim" / "corrigenda"
            shim.mkdir(parents=True)
            (shim / "__init__.py").touch()
            (shim / "store").symlink_to(tree / "store")
            env = {**os.environ, "PYTHONPATH": str(shim.parent), "HF_HUB_OFFLINE": "1"}
            out = subprocess.run(
                [sys.executable, __file__, "--one"], env=env, cwd=tmp, capture_output=True, text=True, check=True
            )
            return json.loads(out.stdout.splitlines()[-1])  # type: ignore[no-any-return]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=harness.ROOT, check=False)


def table(payload: dict[str, Any]) -> str:
    rows = [[w["code"], w["functions"], w["files"], w["climbs_into_memory"]] for w in payload["walks"]]
    return harness.markdown_table(["code", "functions of store/ entered", "files", "climbs back into memory.py"], rows)


TABLES = {"main": table}


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__, results="walk")
    parser.add_argument("--before", help="also measure the code of this revision")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one walk, printed as JSON
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(walk()))
        return 0
    walks = []
    if args.before:
        walks.append({"code": f"before ({args.before})", **measure_at(args.before)})
    walks.append({"code": f"now ({harness.commit()})", **measure_at("HEAD")})
    payload = {"walks": walks}
    harness.write_results(args.json, payload)
    print(table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
