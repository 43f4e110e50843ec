"""Checking a store after a fault (bench/faults.py's docstring, "The checks"), and a part's results: what
was lost, duplicated, corrupt or leaked, and in which trial it was first seen.
"""

from __future__ import annotations

import os
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corrigenda.store import Embedder, Memory, NotFound
from corrigenda.store.fold import fold
from corrigenda.store.model import NoteState
from faults_common import QUERY, SCOPE, Ledger

if TYPE_CHECKING:
    from lancedb.table import Table

SECRET = re.compile(r"secret-([0-9a-f]{32})")
HISTORY_CHECKS = 60  # notes a check reads the history of: those the trial wrote, first
VECTOR_FLOATS = 16  # how much of a forgotten note's vector the leak check looks for


@dataclass(frozen=True)
class Leak:
    note: str
    path: str  # relative to the store
    holds: str  # "text", "vector" or both
    file: str  # data file | orphan data file | index file | other


@dataclass
class Check:
    """What one look at a store found."""

    lost: set[str] = field(default_factory=set)
    raw_duplicates: set[str] = field(default_factory=set)
    visible_duplicates: set[str] = field(default_factory=set)
    corrupt: list[str] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    dangling_edges: int = 0  # raw events naming a note never stored: a write cut before its commit point
    notes: int = 0
    events: int = 0


def raw_ids(table: Table | None) -> Counter[str]:
    if table is None:
        return Counter()
    for attempt in range(3):  # a file removed under the read by cleanup: read the latest version again
        try:
            return Counter(table.search().select(["id"]).limit(None).to_arrow()["id"].to_pylist())
        except Exception:
            if attempt == 2:
                raise
            table.checkout_latest()
    raise AssertionError("unreachable")


def raw_events(table: Table) -> list[dict[str, Any]]:
    return table.search().select(["id", "kind", "src", "dst"]).limit(None).to_arrow().to_pylist()


def check_store(
    uri: str, embedder: Embedder, ledger: Ledger, touched: Sequence[str] = (), forgotten_now: Sequence[str] = ()
) -> Check:
    """Every check of the module docstring on the store as it is on disk, from a fresh `Memory`."""
    found = Check()
    try:
        memory = Memory(uri, embedder)
        counted = memory.tables.search.count()
        found.notes, found.events = counted["notes"], counted["events"]
        notes_table, events_table = memory.tables.handles.notes_table(), memory.tables.handles.events_table()
        note_rows, event_rows = raw_ids(notes_table), raw_ids(events_table)
    except Exception as exc:
        found.corrupt.append(f"the store does not open or count: {exc!r}")
        return found
    found.raw_duplicates = {i for i, n in (note_rows + event_rows).items() if n > 1}

    live = ledger.live_notes()
    stored = {}
    try:
        for start in range(0, len(note_rows), 500):
            stored.update(memory.tables.search.notes(list(note_rows)[start : start + 500]))
        _, events = memory.tables.events.scope_events(SCOPE)
        now = datetime.now(UTC) + timedelta(minutes=1)
        folded = fold(stored.values(), events, now)
    except Exception as exc:
        found.corrupt.append(f"reading and folding the scope failed: {exc!r}")
        return found

    found.lost |= {n for n in live if n not in stored}
    shown = Counter(e.id for e in folded.events)
    found.visible_duplicates |= {i for i, n in shown.items() if n > 1}
    found.lost |= ledger.expected_events() - set(shown)
    found.dangling_edges = sum(
        1
        for row in raw_events(events_table)
        if any(x is not None and x.startswith("n_") and x not in stored for x in (row["src"], row["dst"]))
        and not any(x in ledger.forgotten for x in (row["src"], row["dst"]))
    )
    for note_id in ledger.forgotten:
        if note_id in folded.notes:
            found.corrupt.append(f"{note_id} was forgotten (acknowledged) but the fold still shows it")

    chains_seen: set[str] = set()
    for note_id in folded.notes:
        chain = folded.chain(note_id)
        if chain.id in chains_seen:
            continue
        chains_seen.add(chain.id)
        if not chain.heads and not any(folded.state(m) is NoteState.REVOKED for m in chain.members):
            found.corrupt.append(
                f"chain {chain.id} ({len(chain.members)} notes) has no head and nothing in it is revoked"
            )
    for e in folded.events:
        if folded.in_force(e) and any(
            x is not None and x.startswith("n_") and x not in folded.notes for x in (e.src, e.dst)
        ):
            found.corrupt.append(f"in-force event {e.id} names a note that is not stored")

    try:
        recalled = memory.recall(QUERY, scope=SCOPE) if stored else None  # (an empty store has no scope)
    except Exception as exc:
        found.corrupt.append(f"recall failed: {exc!r}")
    else:
        chains = recalled.chains if recalled is not None else []
        delivered = Counter(n.id for c in chains for n in [*c.heads, *(h.note for h in c.history)])
        found.visible_duplicates |= {i for i, n in delivered.items() if n > 1}
        named = set(delivered) | {p.id for c in chains for p in c.prerequisites}
        for note_id in sorted(named - set(folded.notes)):
            found.corrupt.append(f"recall delivered {note_id}, which is not a stored note")

    for note_id in list(dict.fromkeys(touched))[:HISTORY_CHECKS]:
        if note_id in ledger.forgotten or note_id not in stored:
            continue  # checked above (lost, or forgotten)
        try:
            history = memory.history(note_id)
        except Exception as exc:
            found.corrupt.append(f"history({note_id}) failed: {exc!r}")
            continue
        event_ids = Counter(e.id for e in history.events)
        found.visible_duplicates |= {i for i, n in event_ids.items() if n > 1}
        heads = sorted(h.id for h in history.chain.heads)
        if heads != sorted(folded.chain(note_id).heads):
            found.corrupt.append(
                f"history({note_id}) has heads {heads}, the fold of the scope {folded.chain(note_id).heads}"
            )
        for listed in history.events:
            for x in (listed.src, listed.dst):
                if x is not None and x.startswith("n_") and x not in folded.notes:
                    found.corrupt.append(f"history({note_id}) shows event {listed.id} naming {x}, which is not stored")
    for note_id in forgotten_now:
        try:
            memory.history(note_id)
            found.corrupt.append(f"{note_id} was forgotten but history still reads it")
        except NotFound:
            pass
        except Exception as exc:
            found.corrupt.append(f"history({note_id}) of a forgotten note failed: {exc!r}")

    found.leaks = leaks(uri, ledger.forgotten, embedder)
    return found


def store_files(uri: str) -> Iterator[tuple[str, bytes]]:
    if "://" in uri:
        yield from bucket_files(uri)
        return
    for folder, _, names in os.walk(uri):
        for name in names:
            path = os.path.join(folder, name)
            try:
                data = Path(path).read_bytes()
            except FileNotFoundError:  # removed by a cleanup since the walk listed it
                continue
            yield os.path.relpath(path, uri), data


def bucket_files(uri: str) -> Iterator[tuple[str, bytes]]:
    """Every object under an s3:// store, read with the AWS variables (AWS_ENDPOINT_URL for a local S3)."""
    from pyarrow import fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    scheme, _, host = endpoint.partition("://")
    bucket = fs.S3FileSystem(endpoint_override=host or None, scheme=scheme or "https")
    root = uri.split("://", 1)[1].rstrip("/")
    for info in bucket.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type != fs.FileType.File:
            continue
        try:
            with bucket.open_input_stream(info.path) as stream:
                data = stream.read()
        except FileNotFoundError:  # removed by a cleanup since the listing
            continue
        yield info.path[len(root) + 1 :], data


def secret_of(text: str) -> bytes | None:
    match = SECRET.search(text)
    return match.group(1).encode() if match else None


def leaks(uri: str, forgotten: Mapping[str, str], embedder: Embedder) -> list[Leak]:
    """Files whose bytes hold a forgotten note's secret or the start of its vector."""
    needles: dict[str, list[tuple[str, bytes]]] = {}
    for note_id, text in forgotten.items():
        secret = secret_of(text)
        if secret is None:
            continue
        vector = array("f", embedder.embed([text])[0][:VECTOR_FLOATS]).tobytes()
        needles[note_id] = [("text", secret), ("vector", vector)]
    if not needles:
        return []
    files = list(store_files(uri))
    manifests = b"".join(data for path, data in files if path.endswith(".manifest"))
    found = []
    for path, data in files:
        for note_id, pairs in needles.items():
            holds = [what for what, needle in pairs if needle in data]
            if holds:
                found.append(Leak(note_id, path, "+".join(holds), file_class(path, manifests)))
    return found


def file_class(path: str, manifests: bytes) -> str:
    parts = Path(path).parts
    if "data" in parts and path.endswith(".lance"):
        return "data file" if Path(path).name.encode() in manifests else "orphan data file"
    return "index file" if "_indices" in parts else "other"


def sensitivity(uri: str, texts: Sequence[str], embedder: Embedder) -> dict[str, int]:
    """How many of these stored notes' secrets and vectors a byte search finds in the store's files."""
    blob = b"\n".join(data for _, data in store_files(uri))
    found = {"notes": len(texts), "text found": 0, "vector found": 0}
    for text in texts:
        secret = secret_of(text)
        found["text found"] += secret is not None and secret in blob
        vector = array("f", embedder.embed([text])[0][:VECTOR_FLOATS]).tobytes()
        found["vector found"] += vector in blob
    return found


@dataclass
class PhaseResult:
    phase: str
    trials: int = 0
    acknowledged: int = 0
    acknowledged_by_op: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    failed: list[str] = field(default_factory=list)  # calls that raised something other than a refusal
    lost: dict[str, int] = field(default_factory=dict)  # id → first trial that missed it
    raw_duplicates: dict[str, int] = field(default_factory=dict)
    visible_duplicates: dict[str, int] = field(default_factory=dict)
    corrupt: dict[str, int] = field(default_factory=dict)  # problem → first trial that found it
    leaks: dict[tuple[str, str], tuple[Leak, int]] = field(default_factory=dict)  # → leak, first trial
    in_flight: Counter[str] = field(default_factory=Counter)  # what each kill landed in
    extra: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    last_check: Check | None = None

    def absorb(self, check: Check, trial: int) -> None:
        self.last_check = check
        for ident in check.lost:
            self.lost.setdefault(ident, trial)
        for ident in check.raw_duplicates:
            self.raw_duplicates.setdefault(ident, trial)
        for ident in check.visible_duplicates:
            self.visible_duplicates.setdefault(ident, trial)
        for problem in check.corrupt:
            self.corrupt.setdefault(problem, trial)
        for leak in check.leaks:
            self.leaks.setdefault((leak.note, leak.path), (leak, trial))

    def count(self, messages: Sequence[Mapping[str, Any]], ledger: Ledger) -> list[str]:
        """Take the acknowledgements into the ledger; return the notes they stored or forgot."""
        touched = []
        for m in messages:
            if m["kind"] == "ack":
                self.acknowledged += 1
                self.acknowledged_by_op[m["op"]] += 1
                if m["op"] != "compact":
                    ledger.acknowledge(m["op"], m)
                if m.get("note"):
                    touched.append(m["note"])
            elif m["kind"] == "refused":
                self.refused += 1
            elif m["kind"] == "failed":
                self.failed.append(f"{m['op']}: {m['error']}")
        return touched

    def clean(self) -> bool:
        return not (self.lost or self.raw_duplicates or self.corrupt or self.leaks)

    def summary(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "trials": self.trials,
            "acknowledged": self.acknowledged,
            "acknowledged_by_op": dict(self.acknowledged_by_op),
            "lost": len(self.lost),
            "duplicated": len(self.raw_duplicates),
            "duplicated_as_readers_see": len(self.visible_duplicates),
            "corrupt": len(self.corrupt),
            "leaked_bytes": len(self.leaks),
            "refused": self.refused,
            "failed_calls": len(self.failed),
            "seconds": round(self.seconds, 1),
            "kills_landed_in": dict(self.in_flight),
            "problems": {
                "lost": self.lost,
                "duplicated": self.raw_duplicates,
                "duplicated_as_readers_see": self.visible_duplicates,
                "corrupt": self.corrupt,
                "leaks": [{**asdict(leak), "first_trial": trial} for leak, trial in self.leaks.values()],
                "failed_calls": self.failed,
            },
            **self.extra,
            "trials_detail": self.records,
        }


def standing(result: PhaseResult, ledger: Ledger) -> None:
    """What the phase ends with: rows stored (from the last check) against what was acknowledged and
    not forgotten; stored can be more, since a call cut after its commit point lands unacknowledged."""
    last = result.last_check or Check()
    result.extra["forgotten"] = len(ledger.forgotten)
    result.extra["at_end"] = {
        "notes stored": last.notes, "acknowledged and standing": len(ledger.live_notes()),
        "events stored": last.events, "acknowledged events standing": len(ledger.expected_events()),
        "dangling edges": last.dangling_edges,
    }  # fmt: skip
