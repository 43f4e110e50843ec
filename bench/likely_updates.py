"""`remember`'s likely_updates on the seed data: what it proposes when an agent records no edge at all.

Each seed's notes go, in time order, into a fresh LanceDB store through `Memory.remember` alone, no
edge, no subject (the data has none), with the real default embedder; every note's `likely_updates`
is then judged against the data's lifecycle, which the engine never reads:
- seed 000 (bench/data/seed000/notes.json, 300 English engineering notes): a correction (its
  timeline writes it with `correct`) should propose the note it corrects, or an earlier version of
  the same topic; every other proposal is false, including any made by the 55 topical
  near-neighbours and the 109 unrelated notes. Revocations are not replayed (they write no note).
- seed 003 (bench/data/seed003/versioned_facts.json, 24 Chinese notes, 12 pairs): a newer value
  should propose the note it supersedes; any other proposal is false. (The detector reads ASCII
  words and digits; it finds no statement overlap in Chinese text, so it proposes little here.)
LongMemEval's update pairs are measured in bench/longmemeval_ku.py ("likely_updates").

Run from the repository root (about a minute on 2 cores):

    .venv/bin/python bench/likely_updates.py [--json PATH]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import seed000_closure as seed000
import seed003_versioned_facts as seed003
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from harness import markdown_table, write_results


def _judge(name: str, notes: list[tuple[str, str, Any]], right: dict[str, set[str]], embedder: Any) -> dict[str, Any]:
    """Write (key, text, at) in order through remember; `right`: key → the keys it may rightly propose."""
    out: dict[str, Any] = {"notes": len(notes), "updates": len(right), "found": 0, "proposals": 0, "right": 0}
    out["false"] = []
    with tempfile.TemporaryDirectory(prefix="likely-updates-") as directory:
        memory = Memory(directory, embedder)
        keys: dict[str, str] = {}
        for key, text, at in notes:
            remembered = memory.remember(Draft(text=text, at=at), scope=name)
            keys[remembered.note.id] = key
            proposed = [keys.get(u.note.id, u.note.id) for u in remembered.likely_updates]
            out["proposals"] += len(proposed)
            good = [p for p in proposed if p in right.get(key, set())]
            out["right"] += len(good)
            out["found"] += bool(good)
            out["false"] += [
                {"note": key, "proposed": p, "reason": u.reason}
                for p, u in zip(proposed, remembered.likely_updates, strict=True)
                if p not in right.get(key, set())
            ]
    return out


def run(embedder: Any) -> dict[str, Any]:
    data0 = seed000.Dataset.load(seed000.DATA)
    written = [op for op in data0.timeline if op["op"] in ("remember", "correct")]
    earlier: dict[str, list[str]] = {}  # topic → the keys of its lifecycle notes so far
    right0: dict[str, set[str]] = {}
    for op in written:
        topic = op.get("topic")
        if op["op"] == "correct":
            right0[op["key"]] = set(earlier.get(str(topic), []))
        if op.get("role") == "lifecycle":
            earlier.setdefault(str(topic), []).append(op["key"])
    notes0 = [(op["key"], op["text"], seed000.parse_time(op["at"])) for op in written]

    data3 = seed003.load(seed003.DATA)
    memories = sorted(data3.memories, key=lambda m: m.recorded_at)
    notes3 = [(m.id, m.text, m.recorded_at) for m in memories]
    right3 = {m.id: {m.supersedes} for m in memories if m.supersedes}
    return {
        "seed000": _judge("seed000", notes0, right0, embedder),
        "seed003": _judge("seed003", notes3, right3, embedder),
    }


def table(payload: dict[str, Any]) -> str:
    rows = []
    for name in ("seed000", "seed003"):
        v = payload["results"][name]
        false = len(v["false"])
        rows.append([name, v["notes"], f"{v['found']}/{v['updates']}", v["proposals"], v["right"], false])
    header = ["data", "notes written", "updates that propose what they replace", "proposals", "right", "false"]
    return markdown_table(header, rows)


TABLES = {"main": table}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write the figures and every false proposal here")
    args = parser.parse_args(argv)
    results = run(SentenceTransformerEmbedder())
    payload = {"results": results}
    print(table(payload))
    for name, v in results.items():
        for f in v["false"]:
            print(f"  {name} false: {f['note']} -> {f['proposed']}: {f['reason']}")
    if args.json:
        write_results(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
