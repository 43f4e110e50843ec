"""Export: a store's notes and lifecycle events as JSON Lines, a header, the records scope by scope and a
trailer that vouches for them (transfer.py's module docstring); the format's names are here."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from .ids import is_note_id
from .model import Event, EventKind
from .tables import Tables
from .transfer_records import SCOPE_WIDE

FORMAT = "corrigenda-export"
VERSION = 2  # 2: the trailer; a version 1 file (no trailer) is read as a partial restore only
TRAILER = "end"


def _json(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def export_lines(
    tables: Tables, scopes: Sequence[str], model: str, now: datetime, vectors: bool = False
) -> Iterator[str]:
    """The export of `scopes`, line by line. A note under a tombstone (its erasure under way) and an
    edge whose note never landed (a write cut short) are left out: nothing reads them."""
    stored = tables.handles.stored_model()
    header = {
        "type": FORMAT, "version": VERSION, "exported_at": now.isoformat(), "model": stored[0] if stored else model,
        "dimension": stored[1] if stored else None, "vectors": vectors, "scopes": list(scopes),
    }  # fmt: skip
    digest, counts = hashlib.sha256(), {"note": 0, "event": 0}

    def line(record: Mapping[str, Any]) -> str:
        text = _json(record)
        digest.update(text.encode() + b"\n")
        counts[record["type"]] += 1
        return text

    yield _json(header)
    for scope in scopes:
        notes = tables.search.scope_notes(scope, with_vectors=vectors)
        _, events = tables.events.scope_events(scope)  # read after the notes: a note read has its edges stored
        by_id: dict[str, Event] = {}
        for e in events:
            by_id.setdefault(e.id, e)
        forgotten = {e.dst for e in by_id.values() if e.kind is EventKind.FORGETS}
        kept = {n.id for n, _ in notes if n.id not in forgotten}
        for note, vector in sorted(notes, key=lambda nv: (nv[0].recorded_at, nv[0].id)):
            if note.id in kept:
                record = {"type": "note", **note.model_dump(mode="json")}
                yield line(record | {"vector": vector} if vectors else record)
        for event in sorted(by_id.values(), key=lambda e: (e.recorded_at, e.id)):
            if _readable_edge(event, kept, by_id):
                yield line({"type": "event", **event.model_dump(mode="json")})
    yield _json({"type": TRAILER, "notes": counts["note"], "events": counts["event"], "sha256": digest.hexdigest()})


def _readable_edge(event: Event, notes: set[str], events: Mapping[str, Event]) -> bool:
    """Whether the fold would read this event: a tombstone always; an edge whose notes exist."""
    if event.kind is EventKind.FORGETS or event.kind in SCOPE_WIDE:
        return True
    if event.src is not None and event.src not in notes:
        return False
    if is_note_id(event.dst):
        return event.dst in notes
    target = events.get(event.dst)
    return event.kind is EventKind.REINSTATES and target is not None and _readable_edge(target, notes, events)
