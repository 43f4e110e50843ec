"""Export and import at size: how long a store of N notes takes to export, and to import into a new
store with and without the vectors, and to import again (nothing to write).

N notes are stored with `import_notes` (real model) in one scope; a tenth of them are then
corrected and a twentieth of the corrections revoked, one call each, so the export carries
supersedes and revokes events. Every import is checked: its re-export is the export, line for line.

    .venv/bin/python bench/transfer.py --notes 5000 --json bench/results/transfer.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness  # bench/harness.py: sys.path[0] is bench/ when run as a script
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder

TOPICS = ("the cache TTL", "the deploy branch", "the on-call rota", "the build host", "the log level", "the API quota")


def timed(work: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def run(notes: int) -> dict[str, Any]:
    rng = random.Random(7)
    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    figures: dict[str, Any] = {"notes": notes}
    with tempfile.TemporaryDirectory() as tmp:
        source = Memory(os.path.join(tmp, "source"), embedder)
        drafts = [
            Draft(text=f"For service {i}, {rng.choice(TOPICS)} is set to {rng.randint(1, 999)}") for i in range(notes)
        ]
        stored = source.import_notes(drafts, scope="bench")
        corrected = []
        for note in rng.sample(stored, notes // 10):
            fix = source.correct(note.id, Draft(text=note.text.rsplit(" ", 1)[0] + " 1000"), reason="changed")
            corrected.append(fix.note.id)
        for note_id in corrected[: len(corrected) // 20]:
            source.revoke(note_id, reason="the change was rolled back")

        for vectors in (False, True):
            lines, seconds = timed(lambda v=vectors: list(source.export(vectors=v)))
            size = sum(len(line.encode()) + 1 for line in lines)
            key = "with vectors" if vectors else "without vectors"
            target = Memory(os.path.join(tmp, f"copy-{vectors}"), embedder)
            first, first_s = timed(lambda t=target, ls=lines: t.import_lines(ls))
            again, again_s = timed(lambda t=target, ls=lines: t.import_lines(ls))
            assert list(target.export(vectors=vectors))[1:] == lines[1:], "the copy differs from the source"
            assert again.notes_written == 0 and again.events_written == 0
            figures[key] = {
                "lines": len(lines), "notes": first.notes_written, "events": first.events_written,
                "MiB": round(size / 2**20, 2), "export s": round(seconds, 2),
                "import s": round(first_s, 2), "notes/s": round(first.notes_written / first_s),
                "import again s": round(again_s, 2),
            }  # fmt: skip
            print(key, json.dumps(figures[key]), file=sys.stderr)
    return figures


COLUMNS = ("lines", "notes", "events", "MiB", "export s", "import s", "notes/s", "import again s")


def table(figures: dict[str, Any]) -> str:
    """The export without and with the vectors: its size, and the time to export, import and import again."""
    rows = [
        [key, *(figures[key].get(column, "–") for column in COLUMNS)] for key in ("without vectors", "with vectors")
    ]
    return harness.markdown_table(["export", *COLUMNS], rows)


TABLES = {"main": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=5000)
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    figures = run(args.notes)
    if args.json:
        harness.write_results(args.json, figures)
    print(table(figures))


if __name__ == "__main__":
    main()
