"""How much one answer weighs on a store of many scopes: the `scopes` tool, the CLI and the web view's
pages, paged, beside every scope in one answer (as before paging).

A store of `--scopes` scopes of one note each is made in a temporary directory as a restore makes it
(one real note, its vector copied: nothing is embedded again). Sizes are the bytes a client receives:
the tool's result as JSON (text and structured content), the CLI's output, each page's HTML.

    .venv/bin/python bench/scopes_paging.py [--scopes 10000] [--json bench/results/scopes_paging.json]
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
from corrigenda.server import render
from corrigenda.server.access import tool_result
from corrigenda.server.config import Settings
from corrigenda.server.ui import build_ui
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from corrigenda.store.ids import new_note_id
from corrigenda.store.views import ScopeList
from starlette.testclient import TestClient

LIMIT = 100_000  # bytes: the bound on one call or page


def store_of_scopes(memory: Memory, n: int) -> None:
    """`n` scopes of one note each, imported whole from one exported note copied under new ids."""
    memory.remember(Draft(text="The build runs with make"), scope="p00000")
    header, note = (json.loads(line) for line in list(memory.export(vectors=True))[:2])
    header["scopes"] = [f"p{i:05d}" for i in range(n)]
    notes = [json.dumps(note | ({"id": new_note_id(), "scope": f"p{i:05d}"} if i else {})) for i in range(n)]
    digest = hashlib.sha256("".join(line + "\n" for line in notes).encode()).hexdigest()
    memory.import_lines(
        [json.dumps(header), *notes, json.dumps({"type": "end", "notes": n, "events": 0, "sha256": digest})]
    )


def tool_bytes(r: ScopeList) -> int:
    return len(tool_result(r, render.scopes(r)).model_dump_json(by_alias=True, exclude_none=True).encode())


def measure(n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "store")
        memory = Memory(db, SentenceTransformerEmbedder())
        store_of_scopes(memory, n)
        every = memory.scopes()
        whole = ScopeList(scopes=every, total=len(every), offset=0, next_offset=None, default_scope="default")
        rows.append({"what": "scopes tool, every scope in one answer (before paging)", "bytes": tool_bytes(whole)})
        rows.append({"what": "scopes tool, first page (100)", "bytes": tool_bytes(memory.scope_page(0, 100))})
        rows.append({"what": "scopes tool, largest page (500)", "bytes": tool_bytes(memory.scope_page(0, 500))})
        for flags in ([], ["--json"]):
            cli = [sys.executable, "-m", "corrigenda.server.cli", "scopes", "--db", db, *flags]
            out = subprocess.run(cli, capture_output=True, check=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
            rows.append({"what": f"corrigenda scopes {' '.join(flags)}".strip(), "bytes": len(out.stdout)})
        with TestClient(build_ui(memory, "default", Settings(db=db)), base_url="http://127.0.0.1:8766") as web:
            for path in ("/", "/scopes", f"/scopes?offset={n - 100}", "/scopes?contains=p0999"):
                answer = web.get(path)
                assert answer.status_code == 200, (path, answer.status_code)
                rows.append({"what": f"web view {path}", "bytes": len(answer.content)})
    for row in rows:
        row["under_limit"] = row["bytes"] < LIMIT
    return rows


def table(payload: dict[str, Any]) -> str:
    rows = [[r["what"], r["bytes"], "yes" if r["under_limit"] else "no"] for r in payload["answers"]]
    return harness.markdown_table([f"answer, {payload['scopes']:,} scopes", "bytes", "under 100 KB"], rows)


TABLES = {"main": table}


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__, results="scopes_paging")
    parser.add_argument("--scopes", type=int, default=10_000)
    args = parser.parse_args(argv)
    payload = {"scopes": args.scopes, "answers": measure(args.scopes)}
    harness.write_results(args.json, payload)
    print(table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
