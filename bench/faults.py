"""Faults, long form (issue 11): kill -9 at random points, several servers on one store, racing cycles.

tests/test_reliability.py holds the short, deterministic forms (a write cut between its appends, an
interrupted forget, two threads racing a cycle). This bench does the same to real processes, many
times, on real LanceDB stores in a temporary directory, and checks the store after every fault.

1. kill -9, in three phases, each on its own store (--kills in all, split evenly). A trial spawns a
   child Python process (this script with --child) that opens `corrigenda.store.Memory` on the
   phase's store and works, printing one flushed line when it starts a call and one when the call
   returned (acknowledged: the note id, its text, the events written). The parent kills it with
   SIGKILL after a random delay (drawn from --seed, counted from when the child has the store open)
   and then checks the store from a fresh `Memory`, as a new process would:
   - writes: remember (sometimes with supersedes or depends_on), correct, link (supersedes or
     depends_on), revoke and reinstate, on notes of this trial and earlier ones;
   - compaction: the same writes while a second thread calls `tables.upkeep.compact()` in a loop, a third
     of the time with `keep_versions_for=0` (every older version removed), so kills land inside
     compaction;
   - forget: the parent stores a batch of notes with secrets (four inside one multi-row write with
     fillers, the others one by one; one corrected, one depended on, one revoked and reinstated),
     then the child forgets them one after another, so the kill lands inside an erasure. The parent
     first checks that the note in flight is whole (no tombstone, readable) or gone (tombstone,
     unreadable), then calls `forget` on it again: the retry must finish it (changed true or false).
2. Servers: --servers real `corrigenda serve` processes (stdio, each loading the real model itself,
   HF_HUB_OFFLINE=1) on one store, each driven by the MCP SDK's client with --writes mixed writes
   (remember, correct, link, revoke, reinstate, and forget of notes only it knows), all at once in
   one anyio task group; then the same checks, with the real model in the parent.
3. The cycle race: --race-rounds rounds of two long-lived processes, each with a `Memory` on one
   store, told at the same moment to link x supersedes y and y supersedes x, on a fresh pair each
   round. Counts the rounds whose chain ends with no current note (must be 0), those where both
   links were acknowledged (the fold then sets the later one aside), and those where the two
   writers and the parent do not see the same head; then the same checks.

4. Transfer (--parts import,export; issue 35): a source store of --transfer-notes notes stored with
   the CLI's real model, a tenth corrected and a twentieth of those revoked, so its export has events.
   kill -9 of the real CLI at a random moment: every other kill aimed at the command's writes (after
   the run's first data file or first byte appeared, within as long as the unkilled run wrote), the
   rest anywhere in the unkilled run's time. A run that ends before its kill is a trial, not a kill;
   trials go on until the kills wanted have landed (at most twice as many):
   - `corrigenda import FILE` (--import-kills) of the source's `export --vectors` into a new store:
     the store must open with no duplicated or corrupt rows; what the kill left is recorded (nothing,
     some notes, all); then the same import run again must exit 0 and leave every note and event of
     the file, once (lost, duplicated, corrupt as above, with the file's records as acknowledged);
   - `corrigenda export > file` and `corrigenda export --out FILE` (--export-kills each): the file a
     user has (FILE, else the `.partial` a killed --out leaves) is imported, without --partial, into
     a new store: refused (nothing written), complete (every note and event), or silently partial
     (exit 0 with fewer: the bad case). "no file": the kill came before any byte.
   Every import that ran to its end has its exit status counted (issue 35 item 11: SIGABRT at exit).

5. Faults of a real object store (--parts cluster; issue 54): part 2 with --servers HTTP servers,
   five remembers to one correct, on a SeaweedFS cluster on loopback (bench/seaweed.py), a new
   cluster each run, --fault-runs runs of each of --faults: a volume server killed with kill -9, the
   S3 gateway stopped, the filer stopped (`cluster_outage`). The fault begins once a third of the
   writes are acknowledged and ends, the component started again on its ports and data, once every
   server has had a write answered that it began while the fault held (an `Outage`); a server whose
   writes are done before then goes on until it has written once after. Each run records the calls
   that met the fault and failed, whether each error was one line and what it said, any call that
   failed without meeting it, and how soon each server wrote again; a read by another server that
   failed while the store was out is made again at the end. Then the checks below.

The checks, after every kill and at the end of parts 2, 3 and 5:
- lost: acknowledged notes that `tables.search.notes` does not return, and acknowledged events that the
  fold of the whole scope does not show (but those a later acknowledged forget erased with its note);
- duplicated: ids held by more than one raw row of either table, read with Arrow before readers'
  dedupe. store/storage/handles.py says a retried append can leave such a row and readers keep the first; nothing
  here retries an append, so a raw duplicate would come from the storage itself. Reported beside
  it: ids that readers return twice (the fold's events, heads and history across a recall's chains,
  a history's events), which stay 0 even with raw duplicates because readers keep one row per id;
- corrupt: the store fails to open, count, recall or fold; a chain with no head where no member is
  revoked; a recall or history naming a note that is not stored; a history whose heads differ from
  the fold of the whole scope; a forgotten note that is still readable; a note whose cut forget
  left it tombstoned yet readable, or neither; a forget that a retry cannot finish;
- leaked bytes: for every acknowledged forget (the child's, or the parent's retry), the files under
  the store whose bytes hold the note's secret (`secret-` and 32 hex digits, unique to each note;
  the hex digits alone are searched) or the first 16 floats of its vector; each (note, file) pair
  counts once. Each such file is classed as a data file a manifest names, an orphan data file that
  no manifest names (left by a write a kill cut: docs/faults.md, "Known limits"), an index file, or other.
  The full-text index stores its terms compressed, so a byte search cannot see into it: a check
  before each forget batch reports how many secrets the search finds in the files at all.

Kills are random, so a narrow window inside a call is reached only by chance (each trial's record
says what the kill landed in); a window of a few milliseconds can go unhit in a whole run.

Part 2 runs on a store in a bucket with --db s3://… (or --local-s3: a local S3 API started for the
run, bench/local_s3.py; --seaweed: a SeaweedFS cluster started for the run, bench/seaweed.py; both:
one after the other, moto first, and a table of the two side by side) and over HTTP with --transport
http; it then also prints each kind of write's p50 / p99 latency, measured from its client, and with
--local-s3 or --seaweed the commits the bucket refused and its requests during the writes (moto's
gate by kind; SeaweedFS's gateway from its metrics, by type: GET and HEAD are one kind there). After
each write that stored a note, the next server reads it (history): a miss is counted as corrupt. A
forget that failed is called again, as a user would (its delete may have landed).
tests/test_object_store.py runs it short, three HTTP servers on SeaweedFS, and its negative control
on moto; tests/test_seaweed_faults.py runs part 5 short. `servers_phase` takes a `front` that puts
something (a load balancer) between the clients and the servers.

Not covered: power loss or a kernel crash (kill -9 leaves the page cache to be written, so whether
Lance's commits survive an fsync-less crash is not tested); a full disk or I/O errors; kill -9 of a
process writing to a bucket store (part 5 kills a part of the store, not a writer); killing the
server processes of part 2 (their clients end them cleanly); what the full-text index holds after a
forget (compressed, see above).

The embedder of parts 1 and 3 is a stand-in (64 dimensions from SHAKE-256 of each word, no model):
the faults under test are in storage (appends, compaction, erasure), not in embeddings, and loading
the real model would cost each of the 200+ child processes about 5 s. Part 2 runs the real server
with its real model.

Run from the repository root (14 minutes on a busy 2-core machine; --quick, 12 kills, 2 servers x 10
writes and 4 race rounds, under 2 minutes):

    .venv/bin/python bench/faults.py [--kills 210] [--servers 4] [--writes 50] [--race-rounds 20]
                                     [--seed 0] [--quick] [--parts kill,servers,race] [--json PATH] [--dir PATH]
                                     [--transport stdio|http] [--db s3://… | --local-s3 | --local-s3-dispatcher]
                                     [--seaweed] [--faults F,…] [--fault-runs 3]
                                     [--transfer-notes 2000] [--import-kills 20] [--export-kills 15]

The default runs parts kill, servers and race; `--parts import,export` runs the transfer kills (about
40 minutes on a busy 2-core machine: each CLI process loads lancedb, and an import the model);
`--parts cluster` the faults of a SeaweedFS cluster (about 6 minutes with --servers 3 --writes 15).

It prints one row per part (trials, acknowledged calls, lost, duplicated, corrupt, leaked bytes,
calls that failed inside the store, seconds), then what the kills landed in and every problem found;
progress goes to stderr. --json writes the same figures with a record per trial; --dir keeps the
stores and the children's logs there. Exits 1 if a lost, duplicated, corrupt or leaked figure is
not 0, or a race round ended with no head.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import itertools
import json
import math
import os
import queue
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness
from corrigenda.store import CorrigendaError, Draft, Embedder, Memory, NotFound
from corrigenda.store.fold import fold
from corrigenda.store.model import NoteState
from seaweed import SeaweedCluster

if TYPE_CHECKING:
    import anyio
    from lancedb.table import Table
    from mcp import Client

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
SCOPE = "faults"
KILL_PHASES = ("writes", "compaction", "forget")
# The longest wait before a kill, from when the child has the store open. On 2 cores a write
# takes 20-80 ms and a forget about 100 ms, so a child does tens of writes, or a batch of eight
# forgets, in that time: kills spread over the whole of its work.
KILL_WITHIN_S = {"writes": 2.0, "compaction": 2.0, "forget": 1.0}
CHILD_WAIT_S = 120.0  # for a child to open the store, or a race worker to answer
# For a server told to stop: it first waits up to a minute for its forgets' erasures (server/app.py).
STOP_WAIT_S = 90.0
POLL_S = 0.05  # how often a waiting phase looks again (an outage waiting for its moment)
RACE_LEAD_S = 0.05  # the two racing writers are told to start this far ahead, at the same moment
SECRET = re.compile(r"secret-([0-9a-f]{32})")
TOPICS = ("the cache TTL", "the service port", "the deploy branch", "the retry limit", "the log level")
QUERY = "what is the cache TTL, the service port or the retry limit?"
HISTORY_CHECKS = 60  # notes a check reads the history of: those the trial wrote, first
LOCAL_BUCKET = "corrigenda-bench"  # --local-s3's bucket
VECTOR_FLOATS = 16  # how much of a forgotten note's vector the leak check looks for


# -- the stand-in embedder ----------------------------------------------------------------------


class StandInEmbedder:
    """Not a model: each word adds a vector drawn from its SHAKE-256 digest, then the sum is scaled
    to unit length. Deterministic and instant; texts sharing words point the same way, so recall
    still finds entry points. Nothing here measures retrieval quality."""

    name = "faults-stand-in-shake256-64"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            sums = [0.0] * self.dimension
            for word in text.lower().split():
                for i, byte in enumerate(hashlib.shake_256(word.encode()).digest(self.dimension)):
                    sums[i] += byte - 127.5
            norm = math.sqrt(sum(x * x for x in sums)) or 1.0
            vectors.append([x / norm for x in sums])
        return vectors

    def readable(self, text: str) -> bool:
        return True


def note_text(rng: random.Random, label: str) -> str:
    """A note's text with its own secret, which the leak check looks for once the note is forgotten."""
    return f"{label}: {rng.choice(TOPICS)} is {rng.randint(1, 9999)} (secret-{rng.getrandbits(128):032x})"


# -- what was acknowledged ----------------------------------------------------------------------

EventRecord = tuple[str, str | None, str]  # kind, src, dst


@dataclass
class Ledger:
    """What a phase's store acknowledged: every note and event whose call returned, every forget."""

    notes: dict[str, str] = field(default_factory=dict)  # note id → text
    events: dict[str, EventRecord] = field(default_factory=dict)
    forgotten: dict[str, str] = field(default_factory=dict)  # note id → text, for acknowledged forgets
    retractable: list[str] = field(default_factory=list)  # revokes and supersedes events (to reinstate)

    def acknowledge(self, op: str, ack: Mapping[str, Any]) -> None:
        if op == "forget":
            note = ack["note"]
            self.forgotten[note] = self.notes.get(note, "")
            return
        if ack.get("note"):
            self.notes[ack["note"]] = ack["text"]
        for event_id, kind, src, dst in ack.get("events", []):
            self.events[event_id] = (kind, src, dst)
            if kind in ("revokes", "supersedes"):
                self.retractable.append(event_id)

    def live_notes(self) -> list[str]:
        return [n for n in self.notes if n not in self.forgotten]

    def expected_events(self) -> set[str]:
        """Acknowledged events that must still be there: forget erases the events naming its note, and
        those naming such an event (a reinstates of a revokes), but keeps its `forgets` tombstone."""
        gone = set(self.forgotten)
        first = {i for i, (kind, src, dst) in self.events.items() if kind != "forgets" and (src in gone or dst in gone)}
        second = {i for i, (_, _, dst) in self.events.items() if dst in first}
        return set(self.events) - first - second


@dataclass
class Pools:
    """What a writer may name: notes anyone may use, events it may retract, and notes only it knows
    (the only ones it forgets, so no other writer meets a note that vanished under it)."""

    shared: list[str] = field(default_factory=list)
    retractable: list[str] = field(default_factory=list)
    mine: list[str] = field(default_factory=list)

    def take(self, op: str, ack: Mapping[str, Any], private: bool = False) -> None:
        """Add what an acknowledged write made; `private` keeps a remembered note to this writer."""
        if op in ("remember", "correct"):
            (self.mine if private and op == "remember" else self.shared).append(ack["note"])
        self.retractable += [e[0] for e in ack["events"] if e[1] in ("revokes", "supersedes")]


MIXES = ("all", "remember-heavy")  # the servers part's writes: every kind, or five remembers to one correct


def choose_write(rng: random.Random, text: str, pools: Pools, mix: str = "all") -> tuple[str, dict[str, Any]]:
    """A random write as a tool's name and arguments (`call_memory` gives them to the `Memory` method of that name):
    with `mix` "all", every kind of write; "remember-heavy", five remembers to one correct, as agents call them."""
    shared, roll = pools.shared, rng.random()
    if mix == "remember-heavy":
        if roll < 1 / 6 and shared:
            return "correct", {"note_id": rng.choice(shared), "text": text, "reason": "a newer value", "fork": True}
        roll = 1.0  # a remember, drawn as in the full mix
    if roll < 0.12 and pools.mine:
        return "forget", {"note_id": pools.mine.pop(rng.randrange(len(pools.mine))), "reason": "the user asked"}
    if roll < 0.30 and shared:
        # fork: the target may be replaced already; the harness exercises writes, not the guard rail
        return "correct", {"note_id": rng.choice(shared), "text": text, "reason": "a newer value", "fork": True}
    if roll < 0.45 and len(shared) >= 2:
        src, dst = rng.sample(shared, 2)
        kind = rng.choice(["supersedes", "depends_on"])
        return "link", {"src_id": src, "dst_id": dst, "kind": kind, "reason": "linked by the fault harness"}
    if roll < 0.60 and shared:
        return "revoke", {"note_id": rng.choice(shared + pools.mine), "reason": "found wrong"}
    if roll < 0.72 and shared:
        target = rng.choice(pools.retractable) if pools.retractable and rng.random() < 0.5 else rng.choice(shared)
        return "reinstate", {"target_id": target, "reason": "the exclusion was a mistake"}
    args: dict[str, Any] = {"text": text, "scope": SCOPE}
    if shared and rng.random() < 0.15:
        args.update(supersedes=[rng.choice(shared)], reason="a newer value")
    elif shared and rng.random() < 0.2:
        args.update(depends_on=[rng.choice(shared)])
    return "remember", args


def acknowledgement(op: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """What a write's answer (a tool's structured content) acknowledges: its note and its events."""

    def events(*found: Mapping[str, Any] | None) -> list[list[Any]]:
        return [[e["id"], e["kind"], e["src"], e["dst"]] for e in found if e]

    if op == "forget":
        return {"note": answer["note_id"], "changed": answer["changed"], "events": []}
    if op == "remember":
        return {"note": answer["note"]["id"], "text": answer["note"]["text"], "events": events(*answer["events"])}
    if op == "correct":
        return {"note": answer["note"]["id"], "text": answer["note"]["text"], "events": events(answer["event"])}
    return {"note": None, "events": events(answer["event"]) if answer["changed"] else []}


def call_memory(memory: Memory, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A write through the store's API, given a tool's arguments (a note's fields go into its draft, as the
    tool puts them), acknowledged from the answer a tool would give."""
    given = dict(args)
    if op in ("remember", "correct"):
        given["draft"] = Draft(**{f: given.pop(f) for f in list(given) if f in Draft.model_fields})
    return acknowledgement(op, getattr(memory, op)(**given).model_dump(mode="json"))


# -- checking a store ---------------------------------------------------------------------------


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


# -- child processes ----------------------------------------------------------------------------


class Say:
    """One flushed JSON line per message on stdout; a lock keeps two threads' lines whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0

    def __call__(self, **message: Any) -> None:
        line = json.dumps(message) + "\n"
        with self._lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def perform(self, op: str, work: Callable[[], dict[str, Any]], **detail: Any) -> dict[str, Any] | None:
        """Announce a call, make it, and acknowledge it only once it returned."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        self(kind="begin", seq=seq, op=op, t=time.time(), **detail)
        try:
            ack = work()
        except CorrigendaError as exc:
            self(kind="refused", seq=seq, op=op, error=str(exc))
            return None
        except Exception as exc:
            self(kind="failed", seq=seq, op=op, error=repr(exc))
            return None
        self(kind="ack", seq=seq, op=op, **ack)
        return ack


def write_forever(memory: Memory, rng: random.Random, known: Mapping[str, Any], say: Say, label: str) -> None:
    pools = Pools(shared=list(known.get("notes", [])), retractable=list(known.get("retractable", [])))
    for i in range(1, 1_000_000):
        op, args = choose_write(rng, note_text(rng, f"{label} note {i}"), pools)
        ack = say.perform(op, partial(call_memory, memory, op, args))
        if ack is not None:
            pools.take(op, ack)


def compact_forever(memory: Memory, rng: random.Random, say: Say) -> None:
    while True:
        keep = timedelta(0) if rng.random() < 1 / 3 else None

        def work(keep: timedelta | None = keep) -> dict[str, Any]:
            ran = (
                memory.tables.upkeep.compact() if keep is None else memory.tables.upkeep.compact(keep_versions_for=keep)
            )
            return {"ran": ran}

        say.perform("compact", work, keep_versions_for="0" if keep is not None else "default")
        time.sleep(rng.uniform(0.0, 0.05))


def forget_each(memory: Memory, targets: Sequence[str], say: Say) -> None:
    for note_id in targets:
        args = {"note_id": note_id, "reason": "the user asked"}
        say.perform("forget", partial(call_memory, memory, "forget", args), note=note_id)


def race_worker(memory: Memory, say: Say) -> None:
    """Commands on stdin: arm (read the scope, as a running server has), go (link), heads (read a chain)."""
    armed: tuple[str, str] | None = None
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "arm":
            armed = (command["src"], command["dst"])
            memory.history(armed[0])
            say(kind="armed")
        elif command["cmd"] == "go" and armed is not None:
            time.sleep(max(0.0, command["at"] - time.time()))  # both writers start at the same moment
            args = {"src_id": armed[0], "dst_id": armed[1], "kind": "supersedes", "reason": "the newer value"}
            say.perform("link", partial(call_memory, memory, "link", args))
        elif command["cmd"] == "heads":
            try:
                heads = [h.id for h in memory.history(command["note"]).chain.heads]
            except Exception as exc:
                say(kind="heads", heads=None, error=repr(exc))
            else:
                say(kind="heads", heads=heads)


def child_main(args: argparse.Namespace) -> int:
    importlib.import_module("lancedb")  # before "loaded": a kill's delay counts from an open store, not imports
    say = Say()
    say(kind="loaded")
    known = json.loads(sys.stdin.readline())["known"]
    memory = Memory(args.db, StandInEmbedder())
    memory.stats()  # the store is open
    rng = random.Random(args.child_seed)
    say(kind="ready")
    if args.child == "race":
        race_worker(memory, say)
    elif args.child == "forget":
        forget_each(memory, known["targets"], say)
        say(kind="idle")
        time.sleep(3600)  # the kill still comes; it then landed after the work
    else:
        if args.child == "compaction":
            compactor = random.Random(rng.random())
            threading.Thread(target=compact_forever, args=(memory, compactor, say), daemon=True).start()
        write_forever(memory, rng, known, say, f"{args.child} {args.child_seed:08x}")
    return 0


class Child:
    """A child process of this script speaking JSON lines; every whole line it flushed is kept."""

    def __init__(self, role: str, db: str, seed: int, log: Path) -> None:
        """Spawn it; it imports what it needs and waits for `start`, so that can overlap other work."""
        script = str(Path(__file__).resolve())
        command = [sys.executable, script, "--child", role, "--db", db, "--child-seed", str(seed)]
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=SERVER_ENV
        )
        self.messages: list[dict[str, Any]] = []  # in the order they arrived
        self.torn = 0  # a line cut by the kill, or not JSON
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line) if line.endswith("\n") else None
            except json.JSONDecodeError:
                message = None
            if message is None:
                self.torn += 1
            else:
                self._queue.put(message)
        self._queue.put(None)

    def expect(self, kinds: set[str], timeout: float = CHILD_WAIT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"child {self.proc.pid} sent no {kinds} within {timeout:.0f} s") from None
            if message is None:
                raise RuntimeError(f"child {self.proc.pid} exited (code {self.proc.poll()}) before sending {kinds}")
            self.messages.append(message)
            if message["kind"] in kinds:
                return message

    def start(self, known: Mapping[str, Any]) -> None:
        """Let it open the store and begin; returns once it has the store open."""
        self.expect({"loaded"})
        self.send(cmd="start", known=known)
        self.expect({"ready"})

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> list[dict[str, Any]]:
        """SIGKILL, then every line the child flushed before it died."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join()
        while (message := self._queue.get()) is not None:
            self.messages.append(message)
        self._close()
        return self.messages

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()


# -- results ------------------------------------------------------------------------------------


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


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- part 1: kill -9 ----------------------------------------------------------------------------


def seed_forget_batch(memory: Memory, rng: random.Random, ledger: Ledger, label: str) -> list[str]:
    """Notes to forget, shaped like real ones: four share one data file with notes that stay, one
    was corrected (and its correction is forgotten too), one is depended on, one was revoked and
    reinstated. Fewer than 16 appends, so this process starts no compaction of its own (store/storage/upkeep.py)."""
    drafts = [(note_text(rng, f"{label} filler {i}"), False) for i in range(6)]
    drafts += [(note_text(rng, f"{label} batch secret {i}"), True) for i in range(4)]
    rng.shuffle(drafts)
    imported = memory.import_notes([Draft(text=text) for text, _ in drafts], scope=SCOPE)
    targets = []
    for view, (_, secret) in zip(imported, drafts, strict=True):
        ledger.acknowledge("import", {"note": view.id, "text": view.text, "events": []})
        if secret:
            targets.append(view.id)

    def write(op: str, **args: Any) -> dict[str, Any]:
        ack = call_memory(memory, op, args)
        ledger.acknowledge(op, ack)
        return ack

    for i in range(3):
        targets.append(write("remember", text=note_text(rng, f"{label} single secret {i}"), scope=SCOPE)["note"])
    targets.append(write("correct", note_id=targets[0], text=note_text(rng, f"{label} fix"), reason="newer")["note"])
    write("remember", text=note_text(rng, f"{label} dependant"), scope=SCOPE, depends_on=[targets[1]])
    revoked = write("revoke", note_id=targets[2], reason="found wrong")["events"][0][0]
    write("reinstate", target_id=revoked, reason="it was right after all")
    rng.shuffle(targets)
    return targets


def run_child(
    phase: str, db: str, child: Child, child_seed: int, delay: float, ledger: Ledger
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Give the child its notes, let it work, kill it after `delay`; what it printed, and a record."""
    embedder = StandInEmbedder()
    rng = random.Random(child_seed)
    live, standing = ledger.live_notes(), ledger.expected_events()
    known: dict[str, Any] = {"notes": rng.sample(live, min(40, len(live)))}
    known["retractable"] = [e for e in ledger.retractable if e in standing][-20:]
    record: dict[str, Any] = {"child_seed": child_seed, "delay_s": round(delay, 3)}
    if phase == "forget":
        known["targets"] = seed_forget_batch(Memory(db, embedder), rng, ledger, f"forget {child_seed:08x}")
        record["detector"] = sensitivity(db, [ledger.notes[t] for t in known["targets"]], embedder)
    started = time.perf_counter()
    child.start(known)
    record["start_s"] = round(time.perf_counter() - started, 2)
    time.sleep(delay)
    messages = child.kill()
    record["torn_lines"] = child.torn
    return messages, record


def settle(
    phase: str, db: str, trial: int, messages: list[dict[str, Any]], record: dict[str, Any], ledger: Ledger,
    result: PhaseResult,
) -> None:  # fmt: skip
    """Take in what the killed child acknowledged, finish a forget it cut, and check the store."""
    embedder = StandInEmbedder()
    finished = {m["seq"] for m in messages if m["kind"] in ("ack", "refused", "failed")}
    cut = [m for m in messages if m["kind"] == "begin" and m["seq"] not in finished]
    landed = [m["op"] for m in cut] or ["idle" if any(m["kind"] == "idle" for m in messages) else "between calls"]
    result.in_flight.update(landed)
    touched = result.count(messages, ledger)
    record.update(trial=trial, acknowledged=sum(m["kind"] == "ack" for m in messages), killed_in=landed)

    forgotten_now = [m["note"] for m in messages if m["kind"] == "ack" and m["op"] == "forget"]
    for m in cut:
        if m["op"] == "forget":
            forgotten_now.append(m["note"])
            outcome = finish_forget(db, embedder, m["note"], ledger, result, trial)
            record["cut_forget"] = {"note": m["note"], "outcome": outcome}

    started = time.perf_counter()
    check = check_store(db, embedder, ledger, touched, forgotten_now)
    result.absorb(check, trial)
    record.update(
        check_s=round(time.perf_counter() - started, 2), notes=check.notes, events=check.events,
        dangling_edges=check.dangling_edges, lost=len(check.lost), duplicated=len(check.raw_duplicates),
        corrupt=len(check.corrupt), leaks=len(check.leaks),
    )  # fmt: skip
    result.records.append(record)
    result.trials += 1
    problems = len(check.lost) + len(check.raw_duplicates) + len(check.corrupt) + len(check.leaks)
    progress(
        f"{phase} {trial}: killed after {record['delay_s']:.2f} s in {', '.join(landed)}; "
        f"{record['acknowledged']} acknowledged; {check.notes} notes, {check.events} events; "
        f"{'ok' if problems == 0 else f'{problems} problem(s)'}"
    )


def finish_forget(db: str, embedder: Embedder, note_id: str, ledger: Ledger, result: PhaseResult, trial: int) -> str:
    """A forget the kill cut: whole or gone, never half; then a retry must finish it."""
    reader = Memory(db, embedder)
    tombstoned = reader.tables.events.tombstone(note_id) is not None
    try:
        reader.history(note_id)
        readable = True
    except NotFound:
        readable = False
    if tombstoned == readable:
        state = "tombstoned and still readable" if readable else "neither tombstoned nor readable"
        result.corrupt.setdefault(f"forget({note_id}) cut by the kill left it {state}", trial)
    try:
        retry = reader.forget(note_id, reason="the user asked; the first call was cut by kill -9")
    except Exception as exc:
        result.corrupt.setdefault(f"retrying forget({note_id}) after the kill failed: {exc!r}", trial)
        return "retry failed"
    ledger.acknowledge("forget", {"note": note_id})
    cut = "after the tombstone" if tombstoned else "before the tombstone"
    outcome = f"cut {cut}; retry answered changed={str(retry.changed).lower()}"
    result.extra.setdefault("cut_forgets", Counter())[outcome] += 1
    return outcome


def kill_phase(phase: str, root: Path, kills: int, seed: int) -> PhaseResult:
    started = time.perf_counter()
    rng = random.Random(f"{seed}/{phase}")
    schedule = [(rng.getrandbits(32), rng.uniform(0.0, KILL_WITHIN_S[phase])) for _ in range(kills)]
    db = str(root / phase / "store")
    ledger = Ledger()
    result = PhaseResult(f"kill -9: {phase}")
    if phase != "forget":  # a few notes to work on from the first trial
        seed_memory = Memory(db, StandInEmbedder())
        for i in range(4):
            args = {"text": note_text(rng, f"{phase} starting note {i}"), "scope": SCOPE}
            ledger.acknowledge("remember", call_memory(seed_memory, "remember", args))

    def spawn(trial: int) -> Child | None:  # trials count from 1
        if trial > len(schedule):
            return None
        return Child(phase, db, schedule[trial - 1][0], root / phase / "logs" / f"{phase}-{trial:03d}.log")

    child = spawn(1)
    for trial, (child_seed, delay) in enumerate(schedule, 1):
        assert child is not None
        upcoming = spawn(trial + 1)  # it imports while this trial runs and is checked
        try:
            messages, record = run_child(phase, db, child, child_seed, delay, ledger)
        except RuntimeError as exc:  # it died before opening the store: a fault, but not one of the kills
            child.stop()
            result.corrupt.setdefault(f"a child could not open the store: {exc}", trial)
        else:
            settle(phase, db, trial, messages, record, ledger, result)
        child = upcoming
    standing(result, ledger)
    if "cut_forgets" in result.extra:
        result.extra["cut_forgets"] = dict(result.extra["cut_forgets"])
    detectors = [r["detector"] for r in result.records if "detector" in r]
    if detectors:
        result.extra["detector"] = {k: sum(d[k] for d in detectors) for k in detectors[0]}
    result.seconds = time.perf_counter() - started
    return result


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


# -- part 2: several servers --------------------------------------------------------------------


@dataclass
class Server:
    """One server process and the client that writes to it."""

    k: int
    client: Client
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)  # op → each acknowledged call's time
    calls: list[tuple[str, float, float]] = field(default_factory=list)  # (op, started s, ms) of each of those
    outcomes: list[Outcome] = field(default_factory=list)  # every write and read-back, answered or not


@dataclass(frozen=True)
class Outcome:
    """One call a client made and what came of it (`call_tool`'s kind: ack, refused or failed)."""

    op: str
    started: float  # time.perf_counter()
    finished: float
    kind: str
    error: str = ""


@dataclass
class Outage:
    """A fault of the store in the middle of a servers phase: `begin` once `after` writes are acknowledged,
    `end` once every server has had `writes_while_out` writes answered that it began after the fault
    took hold, so that each met it. A call that overlapped [began, restored] may fail (with a one-line
    error that says what is wrong); every call after `restored` must succeed, with no server
    restarted. A read-back that failed while the store was out is made again at the end."""

    name: str
    begin: Callable[[], None]
    end: Callable[[], None]
    after: int
    writes_while_out: int = 1  # each server's, begun once the fault holds, before `end`
    began: float | None = None  # as `begin` was called
    held: float | None = None  # `begin` returned: the fault holds
    restored: float | None = None  # `end` returned: the store answers again
    unread: list[tuple[Server, str, int]] = field(default_factory=list)  # (server asked, note, server that wrote it)

    def written_after(self, server: Server) -> bool:
        """Whether `server` has had a write acknowledged that it began once the store was back."""
        return self.restored is not None and any(
            o.kind == "ack" and o.op != "history" and o.started >= self.restored for o in server.outcomes
        )

    def met(self, outcome: Outcome) -> bool:
        """Whether a call overlapped the fault."""
        return (
            self.began is not None
            and outcome.finished >= self.began
            and (self.restored is None or outcome.started < self.restored)
        )


# What the clients of an HTTP servers phase reach the servers through: given the servers' URLs, a context
# that yields the URLs the clients connect to, client k to the k-th (modulo). A load balancer goes here:
# it starts in front of the servers and yields its own URL. None: each client talks to its own server.
Front = Callable[[Sequence[str]], AbstractContextManager[Sequence[str]]]
# The servers' allowed Host values behind a front: its port is chosen after they start.
BEHIND_A_FRONT = {"CORRIGENDA_ALLOWED_HOSTS": "127.0.0.1:*"}


@contextmanager
def haproxy_front(urls: Sequence[str]) -> Iterator[Sequence[str]]:
    """Debian's HAProxy on a free loopback port, round-robin over the servers at `urls` (bench/haproxy.py):
    every client reaches every server, one request here, the next there."""
    from urllib.parse import urlsplit

    from haproxy import balancing

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        tempfile.TemporaryDirectory() as folder,
        balancing(port, [urlsplit(u).port or 0 for u in urls], Path(folder)) as b,
    ):
        yield [b.url]


@asynccontextmanager
async def started_servers(
    db: str, count: int, transport: str, env: Mapping[str, str], logs: Path, closing_errors: list[str],
    front: Front | None = None,
) -> AsyncIterator[list[Server]]:  # fmt: skip
    """`count` real server processes on one store, each with its own connected client (HTTP servers log
    to `logs`; `front`: see Front). A client that fails as it closes (its server broke under it: a
    store without conditional writes can leave a server unable to open a table) is added to
    `closing_errors`, not raised: the phase's checks still run."""
    from mcp.client.stdio import StdioServerParameters

    async with AsyncExitStack() as stack:
        args = ["serve", "--db", db, "--scope", SCOPE]
        if transport == "stdio":
            if front is not None:
                raise ValueError("a front (a load balancer) stands before HTTP servers only")
            targets: Sequence[Any] = [
                StdioServerParameters(command=CORRIGENDA, args=args, env={**SERVER_ENV, **env}) for _ in range(count)
            ]
        else:
            targets = [stack.enter_context(http_server(args, {**SERVER_ENV, **env}, logs)) for _ in range(count)]
            if front is not None:
                targets = stack.enter_context(front(targets))
        servers = []
        for k in range(count):
            client = await stack.enter_async_context(connected(targets[k % len(targets)], k, closing_errors))
            servers.append(Server(k, client))
        yield servers


@asynccontextmanager
async def connected(target: Any, k: int, closing_errors: list[str]) -> AsyncIterator[Client]:
    from mcp import Client

    client = Client(target)
    await client.__aenter__()
    try:
        yield client
    finally:
        try:
            await client.__aexit__(None, None, None)
        except Exception as exc:
            closing_errors.append(f"server {k}'s client failed as it closed: {exc!r}"[:300])


@contextmanager
def http_server(args: Sequence[str], env: Mapping[str, str], logs: Path) -> Iterator[str]:
    """`corrigenda serve --transport http` on a free loopback port, its log in `logs`; yields its URL
    once it listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [CORRIGENDA, *args, "--transport", "http", "--port", str(port)]
    log = (logs / f"server-{port}.log").open("w")
    proc = subprocess.Popen(cmd, env=dict(env), stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + CHILD_WAIT_S
        while not listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{' '.join(cmd)} did not start: {(logs / f'server-{port}.log').read_text()[-2000:]}"
                )
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_WAIT_S)
        log.close()


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def drive_server(
    server: Server, others: Sequence[Server], writes: int, rng: random.Random, pools: Pools, ledger: Ledger,
    result: PhaseResult, mix: str = "all", outage: Outage | None = None,
) -> None:  # fmt: skip
    """Write to one server through its client (`pools` shares notes between servers; `mix`: see
    `choose_write`); after each write that stored a note, ask the next server for it: it must see it at
    once, or, if the store was out (`outage`), once it is back. With an outage, a server that made its
    `writes` before the store was back goes on until it has written once more after (up to three
    times as many writes in all): whether it recovers by itself is the point."""
    mine = Pools(shared=pools.shared, retractable=pools.retractable)  # its own notes to forget
    for i in itertools.count():
        if i >= writes and (outage is None or outage.written_after(server) or i >= 3 * writes):
            break
        op, args = choose_write(rng, note_text(rng, f"server {server.k} write {i}"), mine, mix)
        started = time.perf_counter()
        message = await call_tool(server.client, op, args)
        if op == "forget" and message["kind"] == "failed":  # as a user would: its delete may have landed
            result.count([message], ledger)
            result.extra["forgets_retried"] = result.extra.get("forgets_retried", 0) + 1
            message = await call_tool(server.client, op, args)
        result.count([message], ledger)
        server.outcomes.append(Outcome(op, started, time.perf_counter(), message["kind"], message.get("error", "")))
        if message["kind"] != "ack":
            continue
        server.latencies_ms.setdefault(op, []).append((time.perf_counter() - started) * 1000)
        server.calls.append((op, started, server.latencies_ms[op][-1]))
        mine.take(op, message, private=rng.random() < 0.5)
        if message.get("note") and op != "forget" and others:
            other = others[i % len(others)]
            asked = time.perf_counter()
            seen = await call_tool(other.client, "history", {"note_id": message["note"]})
            read = Outcome("history", asked, time.perf_counter(), seen["kind"], seen.get("error", ""))
            other.outcomes.append(read)
            result.extra["seen_by_another_server"] = result.extra.get("seen_by_another_server", 0) + 1
            if seen["kind"] != "ack" and outage is not None and outage.met(read):
                outage.unread.append((other, message["note"], server.k))
            elif seen["kind"] != "ack":
                result.corrupt.setdefault(
                    f"server {other.k} did not see {message['note']}, acknowledged by server {server.k}: "
                    f"{seen['error'][:200]}",
                    0,
                )


async def call_tool(client: Client, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool call, as the message a child would have printed for it."""
    answer = await client.call_tool(op, args)
    if answer.is_error:
        text = " ".join(getattr(c, "text", "") for c in answer.content)
        # the server maps a store refusal to its message, anything else to "... failed inside the store"
        kind = "failed" if "failed inside the store" in text else "refused"
        return {"kind": kind, "op": op, "error": text}
    assert answer.structured_content is not None
    if op in ("history", "recall_chains"):  # reads: nothing to acknowledge
        return {"kind": "ack", "op": op}
    return {"kind": "ack", "op": op, **acknowledgement(op, answer.structured_content)}


async def inject(outage: Outage, servers: Sequence[Server], result: PhaseResult, written: anyio.Event) -> None:
    """Run `outage` (its docstring) while `servers` write; give up waiting once the writes are done
    (`written` is set), but never leave the store out."""
    import anyio

    while result.acknowledged < outage.after and not written.is_set():
        await anyio.sleep(POLL_S)
    if written.is_set():
        return
    outage.began = time.perf_counter()
    progress(f"servers: {outage.name} after {result.acknowledged} acknowledged writes")
    await anyio.to_thread.run_sync(outage.begin)
    outage.held = time.perf_counter()
    try:
        while not written.is_set() and not all(
            sum(o.started >= (outage.held or 0) and o.op != "history" for o in s.outcomes) >= outage.writes_while_out
            for s in servers
        ):
            await anyio.sleep(POLL_S)
    finally:
        await anyio.to_thread.run_sync(outage.end)
        outage.restored = time.perf_counter()
        progress(f"servers: the store is back after {outage.restored - outage.began:.1f} s")


async def read_again(outage: Outage, result: PhaseResult) -> None:
    """Each read-back that failed while the store was out, made again: the note must be there now."""
    for server, note, writer in outage.unread:
        seen = await call_tool(server.client, "history", {"note_id": note})
        if seen["kind"] != "ack":
            result.corrupt.setdefault(
                f"server {server.k} did not see {note}, acknowledged by server {writer}, once the store was back: "
                f"{seen['error'][:200]}",
                0,
            )


def outage_summary(outage: Outage, servers: Sequence[Server]) -> dict[str, Any]:
    """What the servers answered while the store was out, and how soon each wrote again once it was back."""
    calls = [o for s in servers for o in s.outcomes]
    errors = [o for o in calls if o.kind != "ack"]
    during = [o for o in errors if outage.met(o)]
    first_back = [
        min((o.finished for o in s.outcomes if o.kind == "ack" and o.op != "history" and o.started >= (outage.restored or 0)),
            default=None)
        for s in servers
    ]  # fmt: skip
    return {
        "fault": outage.name,
        "happened": outage.began is not None,
        "took_hold_s": round((outage.held or 0) - (outage.began or 0), 2),
        "lasted_s": round((outage.restored or 0) - (outage.began or 0), 1),
        "calls_that_met_it": sum(outage.met(o) for o in calls),
        "errors_while_out": len(during),
        "errors_of_more_than_one_line": sum("\n" in o.error.strip() for o in during),
        "errors_said": dict(Counter(_said(o.error) for o in during)),
        "errors_outside_it": [f"{o.op}: {o.error[:300]}" for o in errors if not outage.met(o)],
        "read_backs_made_again": len(outage.unread),
        # from the store's return to each server's first write acknowledged after it; None: it wrote no more
        "wrote_again_after_s": [None if t is None else round(t - (outage.restored or 0), 2) for t in first_back],
    }


def _said(error: str) -> str:
    """An error's text without what changes from one call to the next (ids, URLs, durations), to count kinds."""
    error = re.sub(
        r"s3://\S+|https?://\S+|\b[ne]_[0-9a-z]{26}\b", "…", error.strip().splitlines()[0] if error.strip() else ""
    )
    return re.sub(r"\d+(\.\d+)?(ms|s)\b", "…", error)[:300]


CLUSTER_FAULTS = ("volume server killed", "gateway stopped", "filer stopped")


def cluster_outage(fault: str, cluster: SeaweedCluster, after: int) -> Outage:
    """One of CLUSTER_FAULTS on a SeaweedFS cluster (bench/seaweed.py), as an Outage beginning after
    `after` acknowledged writes. A volume server killed leaves a copy of every object it held on
    another, so the writes go on: the fault lasts two writes of each server, not one."""
    plans: dict[str, tuple[Callable[[], None], Callable[[], None], int]] = {
        "volume server killed": (partial(cluster.kill_volume_server, 1), partial(cluster.start_volume_server, 1), 2),
        "gateway stopped": (cluster.stop_gateway, cluster.start_gateway, 1),
        "filer stopped": (cluster.stop_filer, cluster.start_filer, 1),
    }
    begin, end, writes = plans[fault]
    return Outage(fault, begin, end, after, writes_while_out=writes)


def cluster_fault_run(
    cluster: SeaweedCluster, fault: str, root: Path, servers: int, writes: int, seed: int, embedder: Embedder,
    run: int = 1,
) -> PhaseResult:  # fmt: skip
    """`servers` HTTP servers writing at once (five remembers to one correct) on a new store in the
    cluster's bucket, `fault` (CLUSTER_FAULTS) once a third of their writes are acknowledged, then the
    checks. The cluster's AWS variables must be in this process's environment (the checks read the
    bucket with them)."""
    slug = _slug(fault)
    return servers_phase(
        root / f"{slug}-{run}", servers, writes, seed, db=f"s3://{LOCAL_BUCKET}/{slug}-{run}", transport="http",
        env=cluster.env, embedder=embedder, mix="remember-heavy",
        outage=cluster_outage(fault, cluster, after=servers * writes // 3), name=f"{fault}, run {run}",
    )  # fmt: skip


def _slug(fault: str) -> str:
    return fault.replace(" ", "-")


def cluster_phase(
    root: Path, faults: Sequence[str], runs: int, servers: int, writes: int, seed: int, keep: bool = False
) -> list[PhaseResult]:
    """Each fault `runs` times, each run on a cluster of its own (bench/seaweed.py: it starts in about
    1.5 s), with the real model in the checks; `keep`: each cluster's directory (its logs) stays under
    `root`."""
    from corrigenda.store import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    results = []
    for fault in faults:
        for run in range(1, runs + 1):
            kept = root / f"{_slug(fault)}-{run}-seaweed" if keep else None
            with SeaweedCluster([LOCAL_BUCKET], keep=kept) as cluster:
                os.environ.update(cluster.env)
                result = cluster_fault_run(cluster, fault, root, servers, writes, seed + run, embedder, run)
            progress(f"{result.phase}: {result.acknowledged} acknowledged, lost {len(result.lost)}, "
                     f"{result.extra['outage']['errors_while_out']} errors while out")  # fmt: skip
            results.append(result)
    return results


def servers_phase(
    root: Path, servers: int, writes: int, seed: int, db: str | None = None, transport: str = "stdio",
    env: Mapping[str, str] | None = None, embedder: Embedder | None = None,
    counter: Callable[[], dict[str, Any]] | None = None, mix: str = "all", outage: Outage | None = None,
    front: Front | None = None, name: str | None = None,
) -> PhaseResult:  # fmt: skip
    """`servers` real servers on one store (`db`, default a directory under `root`; `env` reaches them
    and must already be in this process's environment for an object store), all writing at once, their
    writes drawn from `mix` (`choose_write`). With `counter`, the bucket's counts in the shape of
    `gate_counts` (a local S3 API's gate, or `SeaweedCluster.counts`): how many commits it refused and the
    requests it served during the writes, by kind. With `outage`, a fault of the store in the middle
    of the writes (`Outage`). With `front` (HTTP only), the clients reach the servers through what it
    puts in front of them, a load balancer say (`Front`). `name` names the phase."""
    import anyio
    from corrigenda.store import SentenceTransformerEmbedder

    started = time.perf_counter()
    db = db or str(root / "servers" / "store")
    ledger = Ledger()
    pools = Pools()
    result = PhaseResult(name or f"{servers} servers x {writes} writes ({transport})")
    per_server: list[Server] = []
    closing_errors: list[str] = []

    async def run() -> None:
        logs = root / "servers"
        logs.mkdir(parents=True, exist_ok=True)
        async with started_servers(db, servers, transport, env or {}, logs, closing_errors, front) as running:
            per_server.extend(running)
            for server in running:  # each loads its model before the first timed write
                await call_tool(server.client, "recall_chains", {"query": QUERY})
            result.extra["servers_started_s"] = round(time.perf_counter() - started, 1)
            before = counter() if counter else {}
            async with anyio.create_task_group() as group:
                written = anyio.Event()
                if outage is not None:
                    group.start_soon(inject, outage, running, result, written)
                async with anyio.create_task_group() as writing:
                    for server in running:
                        rng = random.Random(f"{seed}/server/{server.k}")
                        others = [s for s in running if s is not server]
                        writing.start_soon(
                            drive_server, server, others, writes, rng, pools, ledger, result, mix, outage
                        )
                written.set()
            if outage is not None:
                await read_again(outage, result)
            if counter:
                after = counter()
                refused = after["refused_writes"] - before["refused_writes"]
                tried = (
                    f"{after['conditional_writes'] - before['conditional_writes']} conditional writes during the "
                    "writes (commits and lease takes), "
                    if "conditional_writes" in after
                    else ""
                )
                result.extra["bucket_commits"] = (
                    f"{tried}{refused} refused because another writer took the version first"
                )
                result.extra["refused_commits"] = refused
                requests = Counter(after["requests"])
                requests.subtract(before["requests"])
                result.extra["bucket_requests"] = {
                    "during the writes": requests.total(), "per write": round(requests.total() / (servers * writes), 1),
                    **{kind: n for kind, n in requests.most_common() if n},  # by kind (local_s3.kind)
                }  # fmt: skip
                if "cpu_seconds" in after:  # moto's gate: the one process's CPU, and what its listings answered
                    cpu = Counter(after["cpu_seconds"])
                    cpu.subtract(before["cpu_seconds"])
                    result.extra["keys_per_listing"] = round(
                        (after["listed_keys"] - before["listed_keys"]) / max(1, requests["list"]), 1
                    )
                    result.extra["bucket_server_cpu_ms_per_request"] = {
                        kind: round(1000 * cpu[kind] / requests[kind], 2) for kind in requests if requests[kind]
                    }
                if "answer_seconds" in after:  # SeaweedFS's gateway: its time from request to answer
                    answering = Counter(after["answer_seconds"])
                    answering.subtract(before["answer_seconds"])
                    result.extra["gateway_ms_per_request"] = {
                        kind: round(1000 * answering[kind] / requests[kind], 2) for kind in requests if requests[kind]
                    }

    anyio.run(run)
    result.extra["client_closing_errors"] = closing_errors
    result.extra["writes_seconds"] = round(time.perf_counter() - started, 1)
    result.extra["write_latency_ms"] = latency_summary(per_server)
    result.extra["slowest_writes"] = slowest(per_server)
    if outage is not None:
        result.extra["outage"] = outage_summary(outage, per_server)
    progress(f"servers: {result.acknowledged} writes acknowledged in {result.extra['writes_seconds']} s; checking")
    check = check_store(
        db, embedder or SentenceTransformerEmbedder(), ledger, ledger.live_notes(), list(ledger.forgotten)
    )
    result.absorb(check, 1)
    result.trials = servers
    standing(result, ledger)
    result.seconds = time.perf_counter() - started
    return result


def latency_summary(servers: Sequence[Server]) -> dict[str, dict[str, float]]:
    """p50 / p99 / max of each kind of acknowledged write, over every server, of all writes together, and
    of all but forget."""
    by_op: dict[str, list[float]] = {}
    for server in servers:
        for op, times in server.latencies_ms.items():
            by_op.setdefault(op, []).extend(times)
            by_op.setdefault("all writes", []).extend(times)
            if op != "forget":  # an erasure rewrites files: the others are appends
                by_op.setdefault("all but forget", []).extend(times)
    return {op: percentiles(times) for op, times in sorted(by_op.items())}


def slowest(servers: Sequence[Server], count: int = 5) -> list[str]:
    """The slowest acknowledged writes, each with what was under way as it started: the seconds since
    the last forget any server acknowledged (its server's erasure pass runs for seconds after it),
    beside how long after one every write started; and whether it was its server's first write (on a
    new store, the one that waits for the tables and their indexes to be made)."""
    calls = sorted((at, ms, op, server.k) for server in servers for op, at, ms in server.calls)
    firsts = {(server.k, server.calls[0][1]) for server in servers if server.calls}  # on a new store: its tables made
    forgets = [at + ms / 1000 for at, ms, op, _ in calls if op == "forget"]
    first = calls[0][0] if calls else 0.0

    def since(at: float) -> float | None:
        before = [at - done for done in forgets if done <= at]
        return min(before) if before else None

    gaps = sorted(g for g in (since(at) for at, *_ in calls) if g is not None)
    lines = (
        [f"{len(gaps)} of {len(calls)} started after a forget, at a median {gaps[len(gaps) // 2]:.1f} s"]
        if gaps
        else []
    )
    for at, ms, op, k in sorted(calls, key=lambda c: -c[1])[:count]:
        gap = since(at)
        after = f"{gap:.1f} s after a forget was acknowledged" if gap is not None else "before any forget"
        its_first = ", its server's first write" if (k, at) in firsts else ""
        lines.append(f"{op} on server {k} at {at - first:.1f} s: {ms:.0f} ms{its_first}, {after}")
    return lines


def percentiles(times: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)], 1)

    return {
        "calls": len(ordered), "p50": at(0.50), "p99": at(0.99), "max": round(ordered[-1], 1),
        "mean": round(sum(ordered) / len(ordered), 1),
    }  # fmt: skip


# -- part 3: the cycle race ---------------------------------------------------------------------


def race_phase(root: Path, rounds: int, seed: int) -> PhaseResult:
    started = time.perf_counter()
    rng = random.Random(f"{seed}/race")
    db = str(root / "race" / "store")
    embedder = StandInEmbedder()
    memory = Memory(db, embedder)
    ledger = Ledger()
    result = PhaseResult("cycle race")
    gaps: list[float] = []  # between the two writers' starts, per round
    counts = Counter({"both linked": 0, "one refused as a cycle": 0, "no head": 0, "readers disagree": 0})
    workers = [Child("race", db, rng.getrandbits(32), root / "race" / f"worker-{i}.log") for i in range(2)]
    try:
        for w in workers:
            w.start({})
        for r in range(rounds):
            x, y = (
                call_memory(memory, "remember", {"text": note_text(rng, f"race {r}"), "scope": SCOPE}) for _ in "xy"
            )
            for made in (x, y):
                ledger.acknowledge("remember", made)
            pairs = ((x["note"], y["note"]), (y["note"], x["note"]))
            for w, (src, dst) in zip(workers, pairs, strict=True):
                w.send(cmd="arm", src=src, dst=dst)
            for w in workers:
                w.expect({"armed"})
            at = time.time() + RACE_LEAD_S
            for w in workers:
                w.send(cmd="go", at=at)
            answers = [w.expect({"ack", "refused", "failed"}) for w in workers]
            result.count(answers, ledger)
            linked = sum(a["kind"] == "ack" for a in answers)
            counts["both linked"] += linked == 2
            counts["one refused as a cycle"] += linked == 1 and any("cycle" in a.get("error", "") for a in answers)
            views = []
            for w in workers:
                w.send(cmd="heads", note=x["note"])
                seen = w.expect({"heads"})
                if seen["heads"] is None:
                    result.corrupt.setdefault(f"a racing writer could not read the chain: {seen['error']}", r + 1)
                views.append(tuple(seen["heads"] or ()))
            views.append(tuple(h.id for h in memory.history(x["note"]).chain.heads))
            counts["no head"] += any(not v for v in views)
            counts["readers disagree"] += len(set(views)) > 1
            began = [next(m["t"] for m in reversed(w.messages) if m["kind"] == "begin") for w in workers]
            gaps.append(abs(began[0] - began[1]) * 1000)
            result.records.append(
                {"round": r, "outcomes": [a["kind"] for a in answers], "heads": [list(v) for v in views],
                 "start_gap_ms": round(gaps[-1], 2)}
            )  # fmt: skip
    finally:
        for w in workers:
            w.stop()
    check = check_store(db, embedder, ledger, ledger.live_notes())
    result.absorb(check, rounds)
    result.trials = rounds
    standing(result, ledger)
    result.extra["rounds"] = dict(counts)
    if gaps:
        result.extra["writers_start_gap_ms"] = {"median": round(statistics.median(gaps), 2), "max": round(max(gaps), 2)}
    if counts["no head"]:
        result.corrupt.setdefault(f"{counts['no head']} race round(s) ended with no current note", rounds)
    result.seconds = time.perf_counter() - started
    return result


# -- part 4: kill -9 during import and export ---------------------------------------------------

TRANSFER_FORMS = {"import": "import FILE", "stdout": "export > file", "out": "export --out FILE"}
TRANSFER_TOPICS = ("the cache TTL", "the deploy branch", "the on-call rota", "the build host", "the log level")


@dataclass
class TransferResult:
    """One row of the transfer table: kills of one command, and what the store or the file was left as."""

    form: str
    trials: int = 0
    kills: int = 0  # trials whose kill landed (in the others the command ended first)
    outcomes: Counter[str] = field(default_factory=Counter)
    lost: dict[str, int] = field(default_factory=dict)  # id → first trial
    duplicated: dict[str, int] = field(default_factory=dict)
    corrupt: dict[str, int] = field(default_factory=dict)
    silently_partial: int = 0
    left_by_kill: list[dict[str, Any]] = field(default_factory=list)  # import: what each kill left stored
    records: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def absorb(self, check: Check, trial: int) -> None:
        for ident in check.lost:
            self.lost.setdefault(ident, trial)
        for ident in check.raw_duplicates:
            self.duplicated.setdefault(ident, trial)
        for problem in check.corrupt:
            self.corrupt.setdefault(problem, trial)

    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.corrupt or self.silently_partial)

    def summary(self) -> dict[str, Any]:
        return {
            "form": TRANSFER_FORMS[self.form], "trials": self.trials, "kills": self.kills, "lost": len(self.lost),
            "duplicated": len(self.duplicated), "corrupt": len(self.corrupt),
            "silently_partial": self.silently_partial, "outcomes": dict(self.outcomes),
            "seconds": round(self.seconds, 1),
            "problems": {"lost": self.lost, "duplicated": self.duplicated, "corrupt": self.corrupt},
            "trials_detail": self.records,
        }  # fmt: skip


@dataclass
class Source:
    """The store the transfer part exports, and what its whole export holds."""

    db: str
    whole: Path  # `export --out`, unkilled
    with_vectors: Path  # `export --vectors --out`, unkilled: the file the import kills import
    ledger: Ledger  # every note and event of the whole export
    corrected: list[str]  # notes a correction replaced: their histories are read by the checks
    seconds: dict[str, float]  # how long each command took unkilled
    exits: Counter[str] = field(default_factory=Counter)  # exit status of every import that ran to its end
    writes_from: dict[str, float] = field(default_factory=dict)  # command → seconds until it began writing


def corrigenda(args: Sequence[str], stdout: Any = subprocess.DEVNULL, stderr: Any = subprocess.PIPE) -> Any:
    return subprocess.Popen([CORRIGENDA, *args], stdout=stdout, stderr=stderr, env=SERVER_ENV, text=True)


def ran(
    args: Sequence[str], source: Source | None = None, writing: Callable[[], bool] | None = None
) -> tuple[int, str, float]:
    """Run the CLI to its end: exit status, stderr's last line, seconds. An import's status is counted.
    `writing`: looked at every 20 ms; the seconds until it first held go to `source.writes_from`."""
    started = time.perf_counter()
    proc = corrigenda(args)
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    while writing is not None and proc.poll() is None and not writing():
        time.sleep(0.02)
    if writing is not None and source is not None:
        source.writes_from[args[0]] = time.perf_counter() - started
    proc.wait()
    reader.join()
    if source is not None and args[0] == "import":
        source.exits[str(proc.returncode)] += 1
    last = next((line for line in reversed("".join(err).replace("\r", "\n").splitlines()) if line.strip()), "")
    return proc.returncode, last, time.perf_counter() - started


def has_data(folder: Path) -> Callable[[], bool]:
    """Whether a store under `folder` has a data file yet (its first append landed)."""
    return lambda: any(folder.glob("*/data/*.lance"))


def has_bytes(path: Path) -> Callable[[], bool]:
    """Whether `path` or its `.partial` has bytes yet."""
    partial = path.with_name(path.name + ".partial")
    return lambda: any(p.exists() and p.stat().st_size > 0 for p in (path, partial))


def build_source(root: Path, notes: int, embedder: Embedder, seed: int) -> Source:
    """`notes` notes stored at once with the CLI's model, a tenth corrected and a twentieth of those
    revoked, one call each (as bench/transfer.py builds its store), so that events matter; then both
    whole exports, timed."""
    rng = random.Random(f"{seed}/transfer")
    db = str(root / "source")
    memory = Memory(db, embedder)
    drafts = [
        Draft(text=f"For service {i}, {rng.choice(TRANSFER_TOPICS)} is {rng.randint(1, 999)}") for i in range(notes)
    ]
    stored = memory.import_notes(drafts, scope=SCOPE)
    corrected = [
        memory.correct(n.id, Draft(text=n.text.rsplit(" ", 1)[0] + " 1000"), reason="changed").note.id
        for n in rng.sample(stored, notes // 10)
    ]
    for note_id in corrected[: len(corrected) // 20]:
        memory.revoke(note_id, reason="the change was rolled back")
    memory.close()
    source = Source(db, root / "whole.jsonl", root / "whole-vectors.jsonl", Ledger(), corrected, {})
    for path, extra in ((source.whole, []), (source.with_vectors, ["--vectors"])):
        status, last, seconds = ran(
            ["export", "--db", db, "--out", str(path), *extra], source, None if extra else has_bytes(path)
        )
        if status != 0:
            raise RuntimeError(f"the unkilled export failed ({status}): {last}")
        source.seconds["stdout" if not extra else "vectors"] = seconds
    source.seconds["out"] = source.seconds["stdout"]
    for line in source.whole.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["type"] == "note":
            source.ledger.notes[record["id"]] = record["text"]
        elif record["type"] == "event":
            source.ledger.events[record["id"]] = (record["kind"], record["src"], record["dst"])
    target = str(root / "reference-import")
    status, last, seconds = ran(["import", "--db", target, str(source.with_vectors)], source, has_data(Path(target)))
    if status != 0:
        raise RuntimeError(f"the unkilled import failed ({status}): {last}")
    source.seconds["import"] = seconds
    return source


def kill_after(proc: Any, delay: float, writing: Callable[[], bool] | None = None) -> bool:
    """SIGKILL `delay` seconds after it started, or after `writing` first held, unless it ended first;
    whether the kill landed."""
    while writing is not None and proc.poll() is None and not writing():
        time.sleep(0.02)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        return True
    return False


def export_trial(
    source: Source, form: str, folder: Path, delay: float, aimed: bool, embedder: Embedder, result: TransferResult
) -> dict[str, Any]:
    """Kill an export after `delay`, then restore the file a user would have into a new store."""
    out = folder / "export.jsonl"
    trial = result.trials + 1
    if form == "stdout":
        with out.open("w") as file:
            killed = kill_after(
                corrigenda(["export", "--db", source.db], stdout=file, stderr=subprocess.DEVNULL),
                delay,
                has_bytes(out) if aimed else None,
            )
    else:
        killed = kill_after(
            corrigenda(["export", "--db", source.db, "--out", str(out)], stderr=subprocess.DEVNULL),
            delay,
            has_bytes(out) if aimed else None,
        )
    record: dict[str, Any] = {"trial": trial, "delay_s": round(delay, 2), "killed": killed}
    partial = out.with_name(out.name + ".partial")
    given = out if out.exists() else partial if partial.exists() else None  # a .partial, as a careless user might
    if given is None:
        record["outcome"] = "no file"
        return record
    record.update(file=given.name, bytes=given.stat().st_size)
    target = str(folder / "restored")
    status, last, _ = ran(["import", "--db", target, str(given)], source)
    record.update(status=status, said=last[:300])
    check = check_store(target, embedder, source.ledger if status == 0 else Ledger(), source.corrected[:HISTORY_CHECKS])
    record.update(notes=check.notes, events=check.events)
    if status != 0:
        record["outcome"] = "refused" if check.notes == check.events == 0 else "refused, yet wrote some"
        check.corrupt += [f"a refused restore wrote {check.notes} notes"] if check.notes or check.events else []
    elif check.lost or check.notes < len(source.ledger.notes) or check.events < len(source.ledger.events):
        record["outcome"] = "silently partial"
        result.silently_partial += 1
        check.lost = set()  # the missing records are the silent partial restore, counted once as that
    else:
        record["outcome"] = "complete"
    result.absorb(check, trial)
    record.update(duplicated=len(check.raw_duplicates), corrupt=len(check.corrupt))
    return record


def import_trial(
    source: Source, folder: Path, delay: float, aimed: bool, embedder: Embedder, result: TransferResult
) -> dict[str, Any]:
    """Kill an import into a new store after `delay`; check what it left, run it again, check the store."""
    target = str(folder / "store")
    trial = result.trials + 1
    args = ["import", "--db", target, str(source.with_vectors)]
    killed = kill_after(corrigenda(args, stderr=subprocess.DEVNULL), delay, has_data(Path(target)) if aimed else None)
    record: dict[str, Any] = {"trial": trial, "delay_s": round(delay, 2), "killed": killed}
    left = check_store(target, embedder, Ledger())  # nothing was acknowledged: no loss yet, but no damage
    record.update(left_notes=left.notes, left_events=left.events)
    result.absorb(left, trial)
    whole = (len(source.ledger.notes), len(source.ledger.events))
    record["left"] = (
        "nothing" if left.notes == left.events == 0 else "all" if (left.notes, left.events) == whole else "some"
    )
    status, last, _ = ran(args, source)
    record.update(rerun_status=status, rerun_said=last[:300])
    if status != 0:
        result.corrupt.setdefault(f"the import run again after the kill failed ({status}): {last[:200]}", trial)
    check = check_store(target, embedder, source.ledger, source.corrected[:HISTORY_CHECKS])
    if (check.notes, check.events) != whole:
        check.corrupt.append(
            f"after the re-run the store holds {check.notes} notes and {check.events} events, not {whole}"
        )
    result.absorb(check, trial)
    record.update(
        notes=check.notes,
        events=check.events,
        lost=len(check.lost),
        duplicated=len(check.raw_duplicates),
        corrupt=len(check.corrupt),
    )
    record["outcome"] = f"left {record['left']}; re-run {'completed' if status == 0 else 'failed'}"
    return record


def transfer_phase(
    root: Path, forms: Sequence[str], kills: Mapping[str, int], notes: int, seed: int
) -> tuple[list[TransferResult], dict[str, Any]]:
    from corrigenda.store import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()  # the CLI's model: the checks recall on the stores it made
    started = time.perf_counter()
    source = build_source(root, notes, embedder, seed)
    built = time.perf_counter() - started
    progress(
        f"transfer: source of {len(source.ledger.notes)} notes, {len(source.ledger.events)} events in {built:.0f} s; "
        f"unkilled: {', '.join(f'{k} {v:.1f} s' for k, v in source.seconds.items())}"
    )
    rng = random.Random(f"{seed}/transfer-kills")
    results = []
    for form in forms:
        started = time.perf_counter()
        result = TransferResult(form)
        whole = source.seconds[form]
        writing = whole - source.writes_from["import" if form == "import" else "export"]
        # until the kills wanted have landed (a run can end before its kill), at most twice as many trials
        while result.kills < kills[form] and result.trials < 2 * kills[form]:
            trial = result.trials + 1
            folder = root / form / f"{trial:03d}"
            folder.mkdir(parents=True)
            # every other kill is aimed at the writes: from when this run's first data file or first byte
            # appeared, within as long as the unkilled run wrote; the rest land anywhere in the unkilled
            # run's time, mostly in the seconds a process takes to start (and an import to load the model)
            aimed = trial % 2 == 0
            delay = rng.uniform(0.0, writing) if aimed else rng.uniform(0.0, whole)
            if form == "import":
                record = import_trial(source, folder, delay, aimed, embedder, result)
            else:
                record = export_trial(source, form, folder, delay, aimed, embedder, result)
            result.trials += 1
            result.kills += record["killed"]
            record["aimed_at_writes"] = aimed
            result.outcomes[record["outcome"]] += 1
            result.records.append(record)
            progress(
                f"{TRANSFER_FORMS[form]} {trial}: {'killed' if record['killed'] else 'ended before'} "
                f"{delay:.1f} s {'after it began writing' if aimed else 'after its start'}; {record['outcome']}"
            )
        result.seconds = time.perf_counter() - started
        results.append(result)
    about = {
        "notes": len(source.ledger.notes), "events": len(source.ledger.events), "built_s": round(built, 1),
        "unkilled_s": {k: round(v, 1) for k, v in source.seconds.items()},
        "writes_from_s": {k: round(v, 1) for k, v in source.writes_from.items()},
        "bytes": {"export": source.whole.stat().st_size, "export --vectors": source.with_vectors.stat().st_size},
        "import_exit_statuses": dict(source.exits),
    }  # fmt: skip
    return results, about


# -- reporting ----------------------------------------------------------------------------------

# what a phase adds to its summary, printed under the table in this order
EXTRAS = (
    "cut_forgets", "detector", "rounds", "writers_start_gap_ms", "forgotten", "at_end", "servers_started_s",
    "seen_by_another_server", "forgets_retried", "write_latency_ms", "slowest_writes", "bucket_commits",
    "bucket_requests", "gateway_ms_per_request", "outage",
)  # fmt: skip
COLUMNS = ("phase", "trials", "acknowledged", "lost", "duplicated", "corrupt", "leaked bytes", "failed", "seconds")


def table(results: Sequence[PhaseResult]) -> str:
    rows = [
        (
            r.phase, str(r.trials), str(r.acknowledged), str(len(r.lost)), str(len(r.raw_duplicates)),
            str(len(r.corrupt)), str(len(r.leaks)), str(len(r.failed)), f"{r.seconds:.0f}",
        )
        for r in results
    ]  # fmt: skip
    widths = [max([len(c), *(len(row[i]) for row in rows)]) for i, c in enumerate(COLUMNS)]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(COLUMNS, widths, strict=True)))
    ]
    for row in rows:
        lines.append(
            "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True)))
        )
    return "\n".join(lines)


def report(results: Sequence[PhaseResult], settings: Mapping[str, Any], seconds: float) -> str:
    parts = settings["parts"].split(",")
    planned = {
        "kill": f"{settings['kills']} kills ({settings['kills_per_phase']} per phase)",
        "servers": f"{settings['servers']} servers x {settings['writes']} writes",
        "race": f"{settings['race_rounds']} race rounds",
    }
    out = [
        f"faults: seed {settings['seed']}; {', '.join(planned[p] for p in planned if p in parts)}; "
        f"whole run {seconds:.0f} s",
        f"kill phases and race: stand-in embedder {StandInEmbedder.name} (the faults are in storage, and the real "
        "model costs each child process ~5 s); servers: the real server and model",
        "",
        table(results),
        "",
        "acknowledged: calls that returned (compactions included); lost: acknowledged notes/events not visible; "
        "duplicated: ids in more than one raw row; corrupt: distinct problems; leaked bytes: (forgotten note, file) "
        "pairs whose bytes hold its secret or vector; failed: calls that raised something other than a refusal",
    ]
    for r in results:
        out.append("")
        out.append(f"{r.phase}: acknowledged {dict(r.acknowledged_by_op)}; refused {r.refused}")
        if r.in_flight:
            out.append(f"  kills landed in: {dict(r.in_flight.most_common())}")
        for key in EXTRAS:
            if key in r.extra:
                out.append(f"  {key.replace('_', ' ')}: {r.extra[key]}")
        if len(r.visible_duplicates) != len(r.raw_duplicates):
            out.append(
                f"  duplicated as readers see them: {len(r.visible_duplicates)} (raw rows {len(r.raw_duplicates)}; "
                "readers keep the first row of each id)"
            )
        for title, found in (("lost", r.lost), ("duplicated", r.raw_duplicates), ("corrupt", r.corrupt)):
            for what, trial in list(found.items())[:10]:
                out.append(f"  {title} (first in trial {trial}): {what}")
            if len(found) > 10:
                out.append(f"  … {len(found) - 10} more {title}")
        cut = {rec["cut_forget"]["note"]: rec["cut_forget"]["outcome"] for rec in r.records if "cut_forget" in rec}
        for leak, trial in list(r.leaks.values())[:10]:
            how = f"its forget was {cut[leak.note]}" if leak.note in cut else "its forget was acknowledged"
            out.append(
                f"  leaked (first in trial {trial}): {leak.note} {leak.holds} in {leak.path} ({leak.file}); {how}"
            )
        if r.leaks:
            kinds = Counter(leak.file for leak, _ in r.leaks.values())
            cut_notes = len({leak.note for leak, _ in r.leaks.values() if leak.note in cut})
            out.append(
                f"  leaks by file: {dict(kinds)}; notes: {len({k[0] for k in r.leaks})}, "
                f"of which the kill cut their forget: {cut_notes}"
            )
        for failure in r.failed[:5]:
            out.append(f"  failed: {failure[:300]}")
    return "\n".join(out)


def transfer_report(results: Sequence[TransferResult], settings: Mapping[str, Any]) -> str:
    about = settings["transfer_source"]
    out = [
        "",
        f"transfer: a source of {about['notes']} notes and {about['events']} events (the CLI's model); unkilled "
        f"{about['unkilled_s']} s; kills: every other one within the writes, the rest anywhere",
        f"  the unkilled runs began writing after {about['writes_from_s']} s",
        f"  exit statuses of the imports that ran to their end (restores, re-runs): {about['import_exit_statuses']}",
    ]
    for r in results:
        out.append(f"{TRANSFER_FORMS[r.form]}: {dict(r.outcomes.most_common())}")
        if r.form == "import":
            left = Counter(rec["left"] for rec in r.records)
            some = sorted(rec["left_notes"] for rec in r.records if rec["left"] == "some")
            out.append(f"  what a kill left stored: {dict(left)}; notes left by a kill mid-write: {some}")
        for title, found in (("lost", r.lost), ("duplicated", r.duplicated), ("corrupt", r.corrupt)):
            for what, trial in list(found.items())[:10]:
                out.append(f"  {title} (first in trial {trial}): {what}")
    return "\n".join(out)


def main_table(payload: Mapping[str, Any]) -> str:
    """The kill phases, the servers and the race: one row each."""
    rows = [
        (p["phase"], p["trials"], p["acknowledged"], p["lost"], p["duplicated"], p["corrupt"], p["leaked_bytes"],
         p["failed_calls"], round(p["seconds"]))
        for p in payload["phases"]
    ]  # fmt: skip
    return harness.markdown_table(COLUMNS, rows)


def transfer_table(payload: Mapping[str, Any]) -> str:
    """kill -9 during import and export: one row per command."""
    header = (
        "command killed",
        "trials",
        "kills",
        "lost",
        "duplicated",
        "corrupt",
        "silently partial restores",
        "outcomes",
    )
    rows = [
        (f"`corrigenda {t['form']}`", t["trials"], t["kills"], t["lost"], t["duplicated"], t["corrupt"], t["silently_partial"],
         "; ".join(f"{k} {v}" for k, v in t["outcomes"].items()))
        for t in payload["transfer"]
    ]  # fmt: skip
    return harness.markdown_table(header, rows)


def servers_table(payload: Mapping[str, Any]) -> str:
    """Each servers phase: each kind of write's latency from its client, and the bucket's requests."""
    phases = [p for p in payload["phases"] if "write_latency_ms" in p and "outage" not in p]
    if len(phases) == 1:
        return _servers_phase_table(phases[0], payload["settings"])
    return "\n\n".join(f"{p['phase']}: {_servers_phase_table(p, payload['settings'])}" for p in phases)


def _servers_phase_table(phase: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    rows: list[tuple[object, ...]] = [
        (op, t["calls"], t["p50"], t["p99"], t["max"]) for op, t in phase["write_latency_ms"].items()
    ]
    table = harness.markdown_table(("write", "calls", "p50 ms", "p99 ms", "max ms"), rows)
    bucket = phase.get("bucket_requests")
    said = (
        f"{settings['servers']} servers × {settings['writes']} writes over {settings['transport']}"
        f"{' (' + settings['mix'] + ' mix)' if settings.get('mix', 'all') != 'all' else ''}; "
        f"lost {phase['lost']}, duplicated {phase['duplicated']}, corrupt {phase['corrupt']}, "
        f"leaked {phase['leaked_bytes']}, failed calls {phase['failed_calls']}"
    )
    if bucket:
        said += f"; bucket requests during the writes {bucket['during the writes']:,}, {bucket['per write']} a write"
        writes = bucket["during the writes"] / bucket["per write"] if bucket["per write"] else 0
        kinds = [(k, n) for k, n in bucket.items() if k not in ("during the writes", "per write")]
        if writes and kinds:
            said += " (" + ", ".join(f"{k} {n / writes:.1f}" for k, n in kinds) + ")"
    cpu = phase.get("bucket_server_cpu_ms_per_request")
    if cpu:  # the local S3 API is one Python process: what each kind of request costs it says where its time goes
        said += "; the S3 server's CPU a request, ms: " + ", ".join(f"{k} {v}" for k, v in cpu.items())
        said += f"; keys a listing answered: {phase['keys_per_listing']}"
    return f"{said}\n\n{table}"


STORES = {"moto": "moto's S3 (one process)", "seaweed": "SeaweedFS (6 processes)"}
READ_KINDS = ("manifest", "data read", "other read")  # the gate's reads (local_s3.KINDS), which SeaweedFS counts as one


def stores_table(payload: Mapping[str, Any]) -> str:
    """The servers part run on each store in one sitting (--local-s3 --seaweed): each kind of write's latency,
    store beside store, then the requests a write made of each store, by kind."""
    phases = [p for p in payload["phases"] if "write_latency_ms" in p and p.get("store")]
    ops = sorted({op for p in phases for op in p["write_latency_ms"]})
    if "forget" not in ops:  # then "all but forget" is "all writes" again
        ops.remove("all but forget")
    rows: list[tuple[object, ...]] = [
        (op, STORES[p["store"]], t["calls"], t["p50"], t["p99"], t["max"])
        for op in ops
        for p in phases
        if (t := p["write_latency_ms"].get(op))
    ]
    latency = harness.markdown_table(("write", "store", "calls", "p50 ms", "p99 ms", "max ms"), rows)
    counted = []
    for p in phases:
        bucket = p.get("bucket_requests") or {}
        if not bucket.get("per write"):
            continue
        writes = bucket["during the writes"] / bucket["per write"]

        def per_write(*kinds: str, bucket: Mapping[str, Any] = bucket, writes: float = writes) -> float:
            return round(sum(bucket.get(k, 0) for k in kinds) / writes, 1)

        counted.append(
            (STORES[p["store"]], bucket["per write"], per_write(*READ_KINDS, "read"), per_write("list"),
             per_write("put"), per_write("delete"), p.get("refused_commits", "–"), p["lost"], p["duplicated"],
             p["failed_calls"])
        )  # fmt: skip
    header = ("store", "requests a write", "reads", "listings", "puts", "deletes", "commits refused (412)",
              "lost", "duplicated", "failed calls")  # fmt: skip
    requests = harness.markdown_table(header, counted) if counted else ""
    return f"{latency}\n\n{requests}".rstrip()


def cluster_table(payload: Mapping[str, Any]) -> str:
    """The faults of a SeaweedFS cluster (--parts cluster): one row per fault, over its runs."""
    by_fault: dict[str, list[Mapping[str, Any]]] = {}
    for p in payload["phases"]:
        if "outage" in p:
            by_fault.setdefault(p["outage"]["fault"], []).append(p)
    rows: list[tuple[object, ...]] = []
    for fault, phases in by_fault.items():
        outages = [p["outage"] for p in phases]
        said: Counter[str] = Counter()  # the SDK's "Error executing tool X: " left out, the rest cut short
        for o in outages:
            for text, n in o["errors_said"].items():
                text = re.sub(r"^Error executing tool \w+: ", "", text)
                said[text if len(text) <= 110 else text[:110] + "…"] += n
        back = [t for o in outages for t in o["wrote_again_after_s"] if t is not None]
        silent = sum(t is None for o in outages for t in o["wrote_again_after_s"])
        rows.append(
            (fault, len(phases), f"{payload['settings']['servers']} × {payload['settings']['writes']}",
             sum(p["acknowledged"] for p in phases), sum(p["lost"] for p in phases),
             sum(p["duplicated"] for p in phases), sum(p["corrupt"] for p in phases),
             sum(o["errors_while_out"] for o in outages), sum(o["errors_of_more_than_one_line"] for o in outages),
             sum(len(o["errors_outside_it"]) for o in outages),
             f"{max(back):.2f}" + (f" ({silent} wrote no more)" if silent else "") if back else "–",
             "; ".join(f"{n}× {text}" for text, n in said.most_common(2)) or "–")
        )  # fmt: skip
    header = ("fault", "runs", "servers × writes", "acknowledged", "lost", "duplicated", "corrupt",
              "errors while out", "of more than one line", "errors outside it", "wrote again after, s (max)",
              "what the servers said while out")  # fmt: skip
    return harness.markdown_table(header, rows)


TABLES = {
    "main": main_table, "transfer": transfer_table, "servers": servers_table, "stores": stores_table,
    "cluster": cluster_table,
}  # fmt: skip


@contextmanager
def local_s3(wanted: bool, dispatcher: bool = False) -> Iterator[dict[str, str]]:
    """A local S3 API in its own process (bench/local_s3.py) with its AWS variables set in this one; {} if not wanted."""
    if not wanted:
        yield {}
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = Path(__file__).with_name("local_s3.py")
    cmd = [sys.executable, str(script), "--port", str(port), "--bucket", LOCAL_BUCKET, *(["--dispatcher"] * dispatcher)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        env = dict(pair.split("=", 1) for pair in proc.stdout.readline().split())
        os.environ.update(env)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def bucket(
    store: str | None, dispatcher: bool = False
) -> Iterator[tuple[dict[str, str], Callable[[], dict[str, Any]] | None]]:
    """The servers part's bucket: its AWS variables (set in this process too) and what counts its
    requests, for moto behind its gate (`local_s3`) or a SeaweedFS cluster (bench/seaweed.py); for no
    store, ({}, None): a directory."""
    if store == "seaweed":
        with SeaweedCluster([LOCAL_BUCKET]) as cluster:
            os.environ.update(cluster.env)
            yield cluster.env, cluster.counts
        return
    with local_s3(store == "moto", dispatcher) as env:
        yield env, (partial(gate_counts, env["AWS_ENDPOINT_URL"]) if env else None)


def gate_counts(endpoint: str) -> dict[str, Any]:
    """The counts of the local S3 API's gate serving `endpoint` (bench/local_s3.py, `GET /_gate`)."""
    import urllib.request

    with urllib.request.urlopen(f"{endpoint}/_gate", timeout=10) as answer:
        return dict(json.load(answer))


@contextmanager
def workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="corrigenda-faults-") as tmp:
        yield Path(tmp)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kills", type=int, default=210, help="kill -9 trials in all, split over the three phases")
    parser.add_argument("--servers", type=int, default=4, help="server processes on one store")
    parser.add_argument("--writes", type=int, default=50, help="writes per server")
    parser.add_argument("--race-rounds", type=int, default=20, help="rounds of the cycle race")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="12 kills, 2 servers x 10 writes, 4 race rounds")
    parser.add_argument("--json", type=Path, help="also write every figure and per-trial record here")
    parser.add_argument("--dir", type=Path, help="keep the stores and child logs here (default: a temp dir)")
    parser.add_argument(
        "--parts", default="kill,servers,race", help="which parts to run, comma-separated (default: all three)"
    )
    parser.add_argument(
        "--db", help="the servers part's store: a directory or s3://bucket/prefix (default: a new temp directory)"
    )
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="how the servers are reached")
    parser.add_argument(
        "--local-s3", action="store_true",
        help="run the servers part on a new store in a local S3 API (bench/local_s3.py, started for the run)",
    )  # fmt: skip
    parser.add_argument(
        "--local-s3-dispatcher", action="store_true",
        help="--local-s3 with moto's dispatcher in front of S3, as its own server has it (the rig before 2026-12-03)",
    )  # fmt: skip
    parser.add_argument(
        "--balancer", action="store_true",
        help="the servers part over HTTP through Debian's HAProxy, round-robin, no stickiness (bench/haproxy.py)",
    )  # fmt: skip
    parser.add_argument(
        "--seaweed", action="store_true",
        help="run the servers part on a new store in a SeaweedFS cluster (bench/seaweed.py, started for the run); "
        "with --local-s3 too, on each in turn, moto first",
    )  # fmt: skip
    parser.add_argument(
        "--faults", default=",".join(CLUSTER_FAULTS),
        help=f"the cluster part's faults, comma-separated (default: {','.join(CLUSTER_FAULTS)})",
    )  # fmt: skip
    parser.add_argument("--fault-runs", type=int, default=3, help="runs of each of the cluster part's faults")
    parser.add_argument(
        "--mix", choices=MIXES, default="all",
        help="the servers part's writes: every kind (all), or five remembers to one correct (remember-heavy)",
    )  # fmt: skip
    parser.add_argument("--transfer-notes", type=int, default=2000, help="notes of the store the transfer kills export")
    parser.add_argument("--import-kills", type=int, default=20, help="kill -9 trials of `corrigenda import`")
    parser.add_argument(
        "--export-kills",
        type=int,
        default=15,
        help="kill -9 trials of each form of `corrigenda export` (> file, --out)",
    )
    parser.add_argument("--child", choices=[*KILL_PHASES, "race"], help=argparse.SUPPRESS)
    parser.add_argument("--child-seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args)
    args.local_s3 = args.local_s3 or args.local_s3_dispatcher
    if args.quick:
        args.kills, args.servers, args.writes, args.race_rounds = 12, 2, 10, 4
        args.transfer_notes, args.import_kills, args.export_kills = 300, 4, 3
    per_phase = max(1, args.kills // len(KILL_PHASES))
    settings = {
        "seed": args.seed, "kills": per_phase * len(KILL_PHASES), "kills_per_phase": per_phase,
        "servers": args.servers, "writes": args.writes, "race_rounds": args.race_rounds,
        "kill_within_s": KILL_WITHIN_S, "embedder": StandInEmbedder.name, "parts": args.parts,
        "transport": args.transport, "mix": args.mix,
        "db": args.db or " and ".join(
            [*(["local S3"] if args.local_s3 else []), *(["SeaweedFS"] if args.seaweed else [])]
        ) or "a temp directory",
        "local_s3_dispatcher": args.local_s3_dispatcher, "seaweed": args.seaweed, "faults": args.faults,
        "balancer": args.balancer,
        "fault_runs": args.fault_runs, "transfer_notes": args.transfer_notes,
        "import_kills": args.import_kills, "export_kills_per_form": args.export_kills,
    }  # fmt: skip
    parts = set(args.parts.split(","))
    if not parts <= {"kill", "servers", "race", "import", "export", "cluster"}:
        parser.error(f"--parts takes kill, servers, race, import, export and cluster, not {args.parts!r}")
    faults = args.faults.split(",")
    if not set(faults) <= set(CLUSTER_FAULTS):
        parser.error(f"--faults takes {', '.join(CLUSTER_FAULTS)}, not {args.faults!r}")

    started = time.perf_counter()
    results = []
    with workdir(args.dir) as root:
        for phase in KILL_PHASES if "kill" in parts else ():
            (root / phase / "logs").mkdir(parents=True, exist_ok=True)
            results.append(kill_phase(phase, root, per_phase, args.seed))
        if "servers" in parts:
            (root / "servers").mkdir(parents=True, exist_ok=True)
            stores: list[str | None] = [
                n for n, wanted in (("moto", args.local_s3), ("seaweed", args.seaweed)) if wanted
            ]
            for store in stores or [None]:
                with bucket(store, args.local_s3_dispatcher) as (env, counter):
                    db = args.db or (f"s3://{LOCAL_BUCKET}/faults-{int(time.time())}" if env else None)
                    name = f"{args.servers} servers x {args.writes} writes ({args.transport})"
                    front = haproxy_front if args.balancer else None
                    result = servers_phase(
                        root, args.servers, args.writes, args.seed, db, args.transport,
                        {**(env or {}), **(BEHIND_A_FRONT if front else {})}, counter=counter, mix=args.mix,
                        name=f"{name} on {STORES[store]}" if store and len(stores) > 1 else name, front=front,
                    )  # fmt: skip
                    result.extra["store"] = store
                    results.append(result)
        if "cluster" in parts:
            results += cluster_phase(
                root / "cluster",
                faults,
                args.fault_runs,
                args.servers,
                args.writes,
                args.seed,
                keep=args.dir is not None,
            )
        if "race" in parts:
            (root / "race").mkdir(parents=True, exist_ok=True)
            results.append(race_phase(root, args.race_rounds, args.seed))
        forms = [
            f for f in TRANSFER_FORMS if (f == "import" and "import" in parts) or (f != "import" and "export" in parts)
        ]
        transfers: list[TransferResult] = []
        if forms:
            kills = {"import": args.import_kills, "stdout": args.export_kills, "out": args.export_kills}
            transfers, about = transfer_phase(root / "transfer", forms, kills, args.transfer_notes, args.seed)
            settings["transfer_source"] = about
    seconds = time.perf_counter() - started

    payload = {
        "settings": settings, "runtime_s": round(seconds, 1), "phases": [r.summary() for r in results],
        "transfer": [t.summary() for t in transfers],
    }  # fmt: skip
    payload = json.loads(json.dumps(payload, default=_jsonable))  # as a reader of the results file sees it
    if results:
        print(report(results, settings, seconds))
    if transfers:
        print(transfer_report(transfers, settings))
    shown = {"main": bool(payload["phases"]), "transfer": bool(payload["transfer"])}
    shown["servers"] = any("write_latency_ms" in p and "outage" not in p for p in payload["phases"])
    shown["stores"] = sum(bool(p.get("store")) for p in payload["phases"]) > 1
    shown["cluster"] = any("outage" in p for p in payload["phases"])
    for name, render in TABLES.items():
        if shown[name]:
            print(f"\n{name}:\n{render(payload)}")
    if args.json:
        harness.write_results(args.json, payload, None if argv is None else [__file__, *argv])
    return 0 if all(r.clean() for r in results) and all(t.clean() for t in transfers) else 1


def _jsonable(value: object) -> object:
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


if __name__ == "__main__":
    sys.exit(main())
