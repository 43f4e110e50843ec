"""Faults, short and deterministic: a write cut between its two appends, writers racing a cycle,
`forget` as a real erasure (every file's bytes searched), beside readers and after a crash.
The long forms (kill -9 at random points, several server processes) are bench/faults.py."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import ducer
import numpy as np
import pyarrow as pa
import pytest
from corrigenda.store import Conflict, Draft, Memory, NotFound, SentenceTransformerEmbedder
from corrigenda.store.ids import new_event_id, new_note_id
from corrigenda.store.model import Event, EventKind, Note, NoteState
from corrigenda.store.storage import limits
from corrigenda.store.storage.compaction import Compaction
from corrigenda.store.storage.erasure import Erasure
from corrigenda.store.storage.handles import Handles
from corrigenda.store.storage.indexes import Indexes
from corrigenda.store.storage.search import Search
from corrigenda.store.storage.upkeep import Upkeep
from corrigenda.store.tables import EVENTS, NOTES, Parts, ScopeRows, Tables
from lance import LanceDataset
from lance.file import LanceFileReader
from lancedb.table import LanceTable, Table

from .test_transfer import trailed


class Cut(Exception):
    """The injected failure: the process died here."""


def second_append_cut(appended: list[str], cutting: threading.Event) -> Parts:
    """Parts whose second table append while `cutting` is set fails, whichever table it goes to; `appended`
    names the table of each append tried meanwhile."""

    class CutAtTheSecond(Handles):
        def append_rows(self, table: Table, rows: pa.Table) -> int:
            if cutting.is_set():
                appended.append(table.name)
                if len(appended) == 2:
                    raise Cut(f"killed before appending to {table.name}")
            return super().append_rows(table, rows)

    return Parts(handles=CutAtTheSecond)


def test_a_correction_cut_between_its_appends_leaves_no_trace(db: str, embedder: SentenceTransformerEmbedder) -> None:
    appended: list[str] = []
    cutting = threading.Event()
    memory = Memory(db, embedder, parts=second_append_cut(appended, cutting))
    old = memory.remember(Draft(text="The service listens on port 8080")).note
    cutting.set()
    with pytest.raises(Cut):
        memory.correct(old.id, Draft(text="The service listens on port 9090"), reason="moved")
    cutting.clear()
    assert appended == [EVENTS, NOTES]  # the edge first; the note, its commit point, never landed
    for reader in (memory, Memory(memory.uri, memory.embedder)):  # this process and a fresh one
        chains = reader.recall("which port does the service listen on?").chains
        assert [[h.text for h in c.heads] for c in chains] == [["The service listens on port 8080"]]
        assert chains[0].status.value == "current" and chains[0].history == []
        assert reader.history(old.id).events == []  # the dangling edge names no stored note: not shown


def test_a_remember_with_edges_cut_between_its_appends_leaves_no_trace(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    cutting = threading.Event()
    memory = Memory(db, embedder, parts=second_append_cut([], cutting))
    base = memory.remember(Draft(text="Deploys need approval from the release manager")).note
    cutting.set()
    with pytest.raises(Cut):
        memory.remember(Draft(text="Deploys on Fridays need two approvals"), depends_on=[base.id])
    cutting.clear()
    assert memory.stats()["notes"] == 1
    assert memory.history(base.id).chain.heads[0].id == base.id


def test_writers_racing_a_cycle_leave_one_edge_in_force_and_show_the_other_as_a_conflict(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    first, second = Memory(db, embedder), Memory(db, embedder)  # as two server processes
    both_landed = 0
    for round_ in range(20):
        x = first.remember(Draft(text=f"Round {round_}: the cache TTL is 30 seconds")).note
        y = first.remember(Draft(text=f"Round {round_}: the cache TTL is 60 seconds")).note
        second.history(x.id)  # the second writer has read the scope, as a running server would have
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def link(
            memory: Memory, src: str, dst: str, barrier: threading.Barrier = barrier, outcomes: list[str] = outcomes
        ) -> None:
            barrier.wait()
            try:
                memory.link(src, dst, "supersedes", reason="newer")
                outcomes.append("linked")
            except Exception as exc:
                outcomes.append(type(exc).__name__)

        threads = [
            threading.Thread(target=link, args=(first, x.id, y.id)),
            threading.Thread(target=link, args=(second, y.id, x.id)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) in (["linked", "linked"], ["Conflict", "linked"]), outcomes
        for reader in (first, second):
            h = reader.history(x.id)
            assert len(h.chain.heads) == 1 and h.chain.status.value == "current"
            set_aside = [e for e in h.events if not e.in_force]
            if outcomes == ["linked", "linked"]:
                assert len(set_aside) == 1 and set_aside[0].conflict_with
                loser = set_aside[0]
                why = reader.why_excluded(loser.src or "")
                assert any(r.stage == "conflict" for r in why.reasons)
            else:
                assert set_aside == []
        both_landed += outcomes == ["linked", "linked"]
    # the race is real: without a lock, both writers' checks pass in at least some rounds
    print(f"both edges landed in {both_landed} of 20 rounds; a chain without a head in 0")


def file_bytes(root: str) -> bytes:
    chunks = []
    for folder, _, files in os.walk(root):
        for name in files:
            chunks.append(Path(folder, name).read_bytes())
    return b"\n".join(chunks)


@pytest.mark.parametrize("indexed", [False, True], ids=["exact", "vector-index"])
def test_forget_erases_the_text_and_vector_from_every_file(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, indexed: bool
) -> None:
    monkeypatch.setattr(limits, "VECTOR_INDEX_AT", 100 if indexed else 10**9)
    memory.import_notes([Draft(text=f"Filler note {i} about the weather in town {i}") for i in range(199)])
    secret = memory.remember(Draft(text="The locker code is zebra-4471-quartz"), depends_on=[]).note
    memory.upkeep.compact()
    index_files = set(Path(memory.uri, "notes.lance", "_indices").rglob("*"))
    dependant = memory.remember(Draft(text="The spare key is in the locker"), depends_on=[secret.id]).note
    memory.revoke(secret.id, reason="a test event that names it")
    memory.reinstate(secret.id, reason="and one that names that event's note")
    vector = np.asarray(memory.embedder.embed([secret.text])[0])
    assert b"zebra-4471-quartz" in file_bytes(memory.uri)

    caplog.set_level(logging.INFO, logger="corrigenda.store.storage")
    done = memory.forget(secret.id, reason="the user asked")
    assert done.changed and len(done.events_removed) == 3  # depends_on, revokes, reinstates
    passes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("erased ")]  # docs/reference.md
    assert len(passes) == 1 and passes[0].startswith("erased 1 forgotten note from the files in ")
    stored = file_bytes(memory.uri)
    # no fragment of the text either (the tombstone keeps the id, not the text); its words, not its
    # number: four digits turn up by chance in the hex ids of Lance's manifests
    for fragment in (b"zebra-4471-quartz", b"zebra", b"quartz"):
        assert fragment not in stored, fragment
    assert vector.astype(np.float32).tobytes()[:64] not in stored
    assert not index_files & set(Path(memory.uri, "notes.lance", "_indices").rglob("*"))  # every index rewritten
    assert memory.stats()["notes"] == 200  # the 199 fillers and the dependant, untouched
    assert memory.history(dependant.id).chain.prerequisites == []  # nothing names the forgotten note

    again = memory.forget(secret.id, reason="asked twice")
    assert not again.changed and again.events_removed == []
    with pytest.raises(NotFound):
        memory.history(secret.id)


def test_an_interrupted_forget_hides_the_note_at_once_and_a_retry_finishes_it(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    killing = threading.Event()

    class Killed(Erasure):
        def erase_forgotten(self, wait: float = limits.ERASE_WAIT, events: Collection[str] = ()) -> list[str]:
            if killing.is_set():
                raise Cut("killed after the tombstone, before the erasure")
            return super().erase_forgotten(wait, events)

    memory = Memory(db, embedder, parts=Parts(erasure=Killed))
    old = memory.remember(Draft(text="The on-call phone is 555-0199")).note
    new = memory.correct(old.id, Draft(text="The on-call phone is 555-0142"), reason="new rota").note
    killing.set()
    with pytest.raises(Cut):
        memory.forget(new.id, reason="the user asked")
    killing.clear()
    fresh = Memory(memory.uri, memory.embedder)  # another process, reading the store as it is
    for reader in (memory, fresh):
        chains = reader.recall("on-call phone number").chains
        assert [h.id for c in chains for h in c.heads] == [old.id]  # the correction is gone; no phantom
        with pytest.raises(NotFound):
            reader.correct(
                new.id, Draft(text="The on-call phone is 555-0100"), reason="a write naming a forgotten note"
            )
    assert b"555-0142" in file_bytes(memory.uri)  # not erased yet: the call never answered

    retry = fresh.forget(new.id, reason="the user asked, again")
    assert not retry.changed and len(retry.events_removed) == 1  # the supersedes edge
    assert b"555-0142" not in file_bytes(memory.uri)
    assert memory.history(old.id).note.state is NoteState.ACTIVE


def test_a_forget_cut_after_its_delete_is_finished_by_the_retry(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.import_notes([Draft(text=f"Filler note {i} about the harbour tides") for i in range(30)])
    secret = memory.remember(Draft(text="The safe combination is 31-07-88-kestrel")).note
    real = LanceTable.delete

    def delete_then_die(self: LanceTable, where: str) -> Any:
        real(self, where)
        raise Cut("killed after the delete landed, before any file was rewritten")

    monkeypatch.setattr(LanceTable, "delete", delete_then_die)
    with pytest.raises(Cut):
        memory.forget(secret.id, reason="the user asked")
    monkeypatch.undo()
    assert b"kestrel" in file_bytes(memory.uri)  # deleted is only marked deleted (1 row of 31)

    retry = Memory(memory.uri, memory.embedder).forget(secret.id, reason="the user asked, again")
    assert not retry.changed
    assert b"kestrel" not in file_bytes(memory.uri)
    assert memory.stats()["notes"] == 30


def test_a_forget_that_erases_later_answers_once_the_note_is_gone_and_erases_on_a_thread(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """On object storage (here a directory set to behave so) `forget` answers at its tombstone: the
    note is gone for every reader then, and the text is off every file once the thread's pass ends."""
    started = threading.Event()
    release = threading.Event()

    class HeldBack(Erasure):  # the thread's pass waits until the checks below are done
        def erasure_pass(self, tables: Mapping[str, Table], events: Collection[str] = ()) -> list[str]:
            started.set()
            release.wait(30)
            return super().erasure_pass(tables, events)

    memory = Memory(db, embedder, parts=Parts(erasure=HeldBack))
    memory.tables.erasure.erase_later = True
    old = memory.remember(Draft(text="The vault's night code is 4471")).note
    secret = memory.correct(old.id, Draft(text="The vault's night code is osprey-9023"), reason="rotated").note
    done = memory.forget(secret.id, reason="the user asked")
    assert done.changed and done.erasure == "pending" and len(done.events_removed) == 1  # the supersedes edge
    assert started.wait(30)
    for reader in (memory, Memory(memory.uri, memory.embedder)):
        with pytest.raises(NotFound):
            reader.history(secret.id)
        assert [h.id for c in reader.recall("vault night code").chains for h in c.heads] == [old.id]
    assert b"osprey-9023" in file_bytes(memory.uri)  # not erased yet: the pass is held back
    assert memory.forget(secret.id, reason="asked again").erasure == "pending"
    release.set()
    assert memory.finish_upkeep(60)
    assert b"osprey-9023" not in file_bytes(memory.uri)
    again = memory.forget(secret.id, reason="asked a third time")
    assert not again.changed and again.erasure == "done" and again.events_removed == []


class StopsBeforeErasing(Erasure):
    """The erasure of a process that stops before its thread erases what it forgot."""

    def erase_soon(self) -> None:
        pass


def test_one_erasure_pass_erases_every_note_a_stopped_process_forgot(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """Forgets whose process stopped before its thread erased them are erased by the next upkeep of any
    process, all three in one pass: one rewrite of each table, and one erasure mark each."""
    memory = Memory(db, embedder, parts=Parts(erasure=StopsBeforeErasing))
    memory.tables.erasure.erase_later = True
    secrets = [
        memory.remember(Draft(text=f"Badge {word} opens the archive")).note for word in ("heron", "marten", "vole")
    ]
    kept = memory.remember(Draft(text="The archive opens at nine")).note
    for note in secrets:
        assert memory.forget(note.id, reason="the user asked").erasure == "pending"
    assert memory.tables.erasure.unerased() == sorted(n.id for n in secrets)
    tidied: list[tuple[str, bool]] = []

    class Counted(Compaction):
        def tidy(self, name: str, table: Table, keep_versions_for: timedelta, erasing: bool = False) -> None:
            tidied.append((name, erasing))
            super().tidy(name, table, keep_versions_for, erasing)

    other = Memory(memory.uri, memory.embedder, parts=Parts(compaction=Counted))  # another process's upkeep
    assert other.upkeep.compact()
    assert sorted(t for t in tidied if t[1]) == [(EVENTS, True), (NOTES, True)]  # one pass for the three
    stored = file_bytes(memory.uri)
    for word in (b"heron", b"marten", b"vole"):
        assert word not in stored, word
    assert other.tables.erasure.unerased() == [] and other.tables.erasure.erased() == {n.id for n in secrets}
    assert other.history(kept.id).note.text == "The archive opens at nine"
    assert memory.forget(secrets[0].id, reason="asked again").erasure == "done"


@pytest.mark.parametrize("landed", [False, True])
def test_a_write_whose_base_version_another_process_removed_is_written_once(
    db: str, embedder: SentenceTransformerEmbedder, landed: bool
) -> None:
    """An erasure pass elsewhere keeps only the latest version, so a write made on an older one can
    fail as Lance reads that version's manifest: it is written again on the latest, once (and not
    again if, against expectation, the first try landed)."""
    tries: list[str] = []
    removed = threading.Event()  # from when it is set, the first append meets a removed version

    class VersionRemoved(Handles):
        def append_rows(self, table: Table, rows: pa.Table) -> int:
            if removed.is_set():
                tries.append(table.name)
                if len(tries) == 1:
                    if landed:
                        super().append_rows(table, rows)
                    raise RuntimeError(
                        f"lance error: Not found: {table.name}.lance/_versions/18446744073709551595.manifest"
                    )
            return super().append_rows(table, rows)

    memory = Memory(db, embedder, parts=Parts(handles=VersionRemoved))
    old = memory.remember(Draft(text="The release train leaves on Tuesdays")).note
    removed.set()
    new = memory.correct(old.id, Draft(text="The release train leaves on Wednesdays"), reason="moved").note
    removed.clear()
    assert tries == [EVENTS, NOTES] if landed else [EVENTS, EVENTS, NOTES]
    events = memory.tables.handles.scan(memory.tables.handles.events_table(), ["id", "src"])
    assert events["src"].to_pylist().count(new.id) == 1  # the supersedes edge, once
    chains = Memory(memory.uri, memory.embedder).recall("when does the release train leave?").chains
    assert [h.text for h in chains[0].heads] == ["The release train leaves on Wednesdays"]
    assert [(h.note.text, h.by) for h in chains[0].history] == [("The release train leaves on Tuesdays", new.id)]


def test_a_catch_up_that_ends_late_on_another_thread_never_moves_a_view_back(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure pass or a compaction catches the views up on its own thread, and on a bucket reading
    the version it found latest is a request: a call that writes meanwhile moves the view further.
    The late catch-up must not put the older version back, or the call's next read (the check a young
    table makes after a write, the call's answer) misses what the call just wrote."""
    memory.remember(Draft(text="The release train leaves on Tuesdays"))
    notes = memory.tables.handles.notes_table()
    assert notes is not None
    Memory(memory.uri, memory.embedder).remember(Draft(text="The freeze starts on the 14th"))  # elsewhere
    reading, go = threading.Event(), threading.Event()
    real = LanceDataset.checkout_version

    def checkout_version(self: LanceDataset, version: Any) -> LanceDataset:
        moved = real(self, version)
        if threading.current_thread().name == "late":
            reading.set()
            go.wait(30)
        return moved

    monkeypatch.setattr(LanceDataset, "checkout_version", checkout_version)
    late = threading.Thread(target=memory.tables.handles.refresh, name="late")
    late.start()
    assert reading.wait(30)  # it has read the version the other process wrote, and not put it in place yet
    written = memory.remember(Draft(text="The release train leaves on Wednesdays")).note
    go.set()
    late.join(30)
    notes.checkout_latest()  # the LanceDB table, which appends (through the view) leave behind
    assert memory.tables.handles.view(notes).version == notes.version  # the latest: where this process's write left it
    assert written.id in memory.tables.search.notes([written.id])  # read with no refresh, as within the call


def test_a_stopping_process_waits_for_its_compaction_and_starts_none_after(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """A process that stopped mid-compaction would leave the upkeep lease of a bucket taken (for
    lease.LEASE_FOR), and every other process's erasures would wait that long: finish_upkeep, which a
    server calls as it stops, waits for the compaction and lets no other start."""
    holding, started, release = threading.Event(), threading.Event(), threading.Event()

    class HeldBack(Compaction):
        def tidy(self, name: str, table: Table, keep_versions_for: timedelta, erasing: bool = False) -> None:
            if holding.is_set():
                started.set()
                release.wait(30)
            super().tidy(name, table, keep_versions_for, erasing)

    memory = Memory(db, embedder, parts=Parts(compaction=HeldBack))
    memory.remember(Draft(text="The staging cluster lives in eu-west-1"))
    holding.set()
    compaction = threading.Thread(target=memory.upkeep.compact)
    compaction.start()
    assert started.wait(30)
    assert memory.upkeep.finish_upkeep(0.2) is False  # still compacting
    other = Tables(memory.uri)  # another process: the store's upkeep lock is taken
    assert other.upkeep.compact() is False
    release.set()
    assert memory.upkeep.finish_upkeep(30)
    compaction.join(30)
    assert other.upkeep.compact() is True  # given back
    assert memory.upkeep.compact() is False  # this process is stopping: no compaction starts


HOLD_LOCK = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(1.5)
"""


def test_forget_waits_for_another_process_compaction_instead_of_skipping_the_erasure(memory: Memory) -> None:
    note = memory.remember(Draft(text="The backup passphrase is harbor-lantern-88")).note
    held = subprocess.Popen(  # another process is compacting, for a second
        [sys.executable, "-c", HOLD_LOCK, os.path.join(memory.uri, ".compact.lock")], stdout=subprocess.PIPE
    )
    assert held.stdout is not None and held.stdout.readline() == b"held\n"
    assert memory.upkeep.compact() is False  # upkeep skips
    assert memory.forget(note.id, reason="the user asked").changed
    assert b"harbor-lantern-88" not in file_bytes(memory.uri)


def test_readers_in_other_connections_do_not_fail_while_notes_are_forgotten(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    writer = Memory(db, embedder)
    notes = [writer.remember(Draft(text=f"Team {i} owns the {i}th microservice")).note for i in range(12)]
    readers = [Memory(db, embedder) for _ in range(2)]
    failures: list[str] = []
    calls = 0
    stop = threading.Event()

    def read(memory: Memory) -> None:
        nonlocal calls
        while not stop.is_set():
            try:
                memory.recall("which team owns the microservice?")
                memory.history(notes[0].id)
                calls += 1
            except Exception as exc:
                failures.append(repr(exc))

    threads = [threading.Thread(target=read, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    for note in notes[1:]:
        writer.forget(note.id, reason="erase")
    stop.set()
    for t in threads:
        t.join()
    assert failures == [] and calls > 0
    assert [h.id for c in readers[0].recall("which team owns the microservice?").chains for h in c.heads] == [
        notes[0].id
    ]


def test_a_store_left_without_its_full_text_index_gets_it_back(db: str, embedder: SentenceTransformerEmbedder) -> None:
    class DiesBeforeIndexing(Indexes):
        def ensure_indexes(self, table: Table, retype: bool = False) -> None:
            pass

    crashed = Memory(db, embedder, parts=Parts(indexes=DiesBeforeIndexing))
    crashed.remember(Draft(text="模型请求超时为三十秒"), scope="zh")
    assert crashed.tables.handles.notes_table().list_indices() == []  # type: ignore[union-attr]

    reopened = Memory(db, embedder)  # the next process to open the store
    found = reopened.recall("模型请求超时是多少？", scope="zh")
    assert [c.heads[0].text for c in found.chains] == ["模型请求超时为三十秒"]


def test_compaction_collects_the_files_a_crash_left_and_nothing_a_version_needs(memory: Memory) -> None:
    for i in range(3):
        memory.remember(Draft(text=f"Runbook step {i}: drain the node first"))
    assert memory.upkeep.compact()
    data = Path(memory.uri, "notes.lance", "data")
    live = sorted(data.iterdir())
    old_orphan, new_orphan = data / "0000crashed-an-hour-ago.lance", data / "0000crashed-just-now.lance"
    for orphan in (old_orphan, new_orphan):  # what an append killed before its commit leaves
        orphan.write_bytes(live[0].read_bytes())
    hour_ago = time.time() - 3600 - 60
    os.utime(old_orphan, (hour_ago, hour_ago))
    for file in live:  # old files that a version still references stay, however old
        os.utime(file, (hour_ago, hour_ago))

    assert memory.upkeep.compact()
    assert not old_orphan.exists()
    assert new_orphan.exists()  # it could be an append in flight in another process
    assert all(file.exists() for file in live)
    assert memory.stats()["notes"] == 3
    assert len(memory.recall("how do I drain the node?").chains) == 3


def test_a_scope_is_scanned_once_later_notes_are_read_by_id_and_a_forget_elsewhere_lets_go_of_the_scan(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    writer = Memory(db, embedder)
    base = writer.remember(Draft(text="The billing service runs on the shared Postgres cluster")).note
    needs = writer.remember(
        Draft(text="Invoices are retried nightly by the billing cron job"), depends_on=[base.id]
    ).note
    scans: list[ScopeRows | None] = []
    by_id: list[list[str]] = []
    vectors_read: list[str] = []

    class CountedReads(Search):
        def scope_rows(self, scope: str, leave_out: Collection[str] = ()) -> ScopeRows | None:
            scans.append(super().scope_rows(scope, leave_out))
            return scans[-1]

        def notes_with_vectors(
            self, ids: Iterable[str], vectors: bool = True
        ) -> tuple[dict[str, Note], dict[str, np.ndarray]]:
            by_id.append(sorted(ids))
            return super().notes_with_vectors(by_id[-1], vectors)

        def vectors(self, ids: Iterable[str], addresses: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
            ids = list(ids)
            vectors_read.extend(ids)
            return super().vectors(ids, addresses)

    reader = Memory(db, embedder, parts=Parts(search=CountedReads))
    query = "when are invoices retried?"
    first = reader.recall(query).chains
    assert [h.id for h in first[0].heads] == [needs.id] and [p.id for p in first[0].prerequisites] == [base.id]
    # the scope's notes in one scan, nothing read by id; the searches brought the vectors along
    assert len(scans) == 1 and by_id == [] and vectors_read == []
    assert reader.recall(query).chains == first and len(scans) == 1 and by_id == []

    later = writer.remember(Draft(text="Failed invoices are retried three times"), depends_on=[base.id]).note
    delivered = {h.id for c in reader.recall(query).chains for h in c.heads}
    assert later.id in delivered and len(scans) == 1 and by_id == [[later.id]]  # written after the scan: by id
    reader.recall(query)
    assert by_id == [[later.id]] and later.id in reader.graphs.notes  # kept

    writer.forget(base.id, reason="wrong cluster, and it names an internal host")
    after = reader.recall(query).chains
    assert {h.id for c in after for h in c.heads} == {needs.id, later.id}
    assert all(c.prerequisites == [] for c in after)
    assert base.id not in reader.graphs.notes and later.id in reader.graphs.notes  # only the forgotten note let go
    # and the scan that held it, with its text: with nothing kept, the scope is scanned again
    reader.graphs.notes.clear()
    assert {h.id for c in reader.recall(query).chains for h in c.heads} == {needs.id, later.id}
    assert len(scans) == 2 and scans[1] is not None and base.id not in scans[1] and later.id in scans[1]
    assert vectors_read == []


def test_a_correction_read_between_its_two_appends_shows_once_its_note_lands(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    writer, reader = Memory(db, embedder), Memory(db, embedder)
    old = writer.remember(Draft(text="The service listens on port 8080")).note
    new = Note(id=new_note_id(), text="The service listens on port 9090", scope=old.scope, kind=old.kind,
               recorded_at=writer.clock())  # fmt: skip
    edge = Event(id=new_event_id(), kind=EventKind.SUPERSEDES, src=new.id, dst=old.id, scope=old.scope, reason="moved",
                 recorded_at=new.recorded_at)  # fmt: skip
    writer.tables.add_events([edge])  # the correction's first append: its edge
    assert reader.history(old.id).chain.heads[0].id == old.id  # the edge names no stored note yet
    writer.tables.add_notes([(new, embedder.embed([new.text])[0], True)], embedder.name)  # its commit point
    chain = reader.history(old.id).chain  # the reader asked for the new note by id before: it asks again
    assert [h.id for h in chain.heads] == [new.id] and [h.note.id for h in chain.history] == [old.id]


def index_terms(uri: str) -> set[bytes]:
    """Every term in every full-text index file of the notes table on disk, read from the index's own
    term dictionary (an FST, compressed: a byte search of the files cannot find a term in it)."""
    terms: set[bytes] = set()
    for path in Path(uri, "notes.lance", "_indices").rglob("part_*_tokens.lance"):
        for fst in LanceFileReader(str(path)).read_all().to_table()["_token_fst_bytes"].to_pylist():
            terms.update(term for term, _ in ducer.Map(fst).items())
    return terms


def vector_index_rows(uri: str) -> set[int]:
    """The row addresses held in every vector index file of the notes table on disk, each beside its
    quantized vector."""
    rows: set[int] = set()
    for path in Path(uri, "notes.lance", "_indices").rglob("auxiliary.idx"):
        rows.update(LanceFileReader(str(path)).read_all().to_table()["_rowid"].to_pylist())
    return rows


def notes_with_random_vectors(count: int, dimension: int, model: str) -> list[str]:
    """An export of `count` notes whose vectors are given (random), so importing them embeds nothing."""
    rng = np.random.default_rng(7)
    header = {"type": "corrigenda-export", "version": 2, "exported_at": "2026-12-01T00:00:00Z", "model": model,
              "dimension": dimension, "vectors": True, "scopes": ["default"]}  # fmt: skip
    lines = [json.dumps(header)]
    for i in range(count):
        note = Note(id=new_note_id(), text=f"Filler note {i} about the weather in town {i}", scope="default",
                    recorded_at=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=i))  # fmt: skip
        vector = rng.standard_normal(dimension).astype(np.float32).tolist()
        lines.append(json.dumps({"type": "note", **note.model_dump(mode="json"), "vector": vector}))
    return trailed(lines)


@pytest.mark.parametrize(
    "fillers",
    [
        pytest.param(256, id="small"),
        pytest.param(3 * limits.FRAGMENT_ROWS[NOTES], id="over-10k", marks=pytest.mark.slow),
    ],
)
def test_forget_erases_the_note_from_the_full_text_and_vector_indexes(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, fillers: int
) -> None:
    """A note written alone after its store's big fragments is indexed in a fragment of its own; a
    forget then deletes that whole fragment, which Lance drops without rewriting, so no compaction
    remaps the indexes over it. The indexes' own terms and rows are read after the forget and after
    each upkeep step that follows. Small: 256 fillers, with fragments of 64 rows and a vector index
    from 100 notes; over 10k: the store's own limits, three full fragments of fillers."""
    if fillers == 256:
        monkeypatch.setattr(limits, "FRAGMENT_ROWS", {NOTES: 64, EVENTS: 64})
        monkeypatch.setattr(limits, "VECTOR_INDEX_AT", 100)
    assert fillers >= limits.VECTOR_INDEX_AT
    memory.import_lines(notes_with_random_vectors(fillers, 384, memory.embedder.name))
    memory.upkeep.compact()
    secret = memory.remember(Draft(text="The locker code is zebra-4471-quartz")).note
    memory.upkeep.compact()  # the secret's fragment, alone after the big ones, is indexed on its own
    address = memory.tables.search.scope_rows("default").addresses([secret.id])[secret.id]  # type: ignore[union-attr]
    assert {b"zebra", b"quartz"} <= index_terms(memory.uri)
    assert address in vector_index_rows(memory.uri)

    memory.forget(secret.id, reason="the user asked")
    for step in ("forget", "compaction", "a write, then compaction", "a compaction 11 s later"):
        if step.startswith("a write"):
            memory.remember(Draft(text="Another note about the harbour"))
        if step.endswith("later"):
            time.sleep(11)  # past KEEP_VERSIONS_FOR: the versions kept since are dropped
        if step != "forget":
            memory.upkeep.compact()
        assert not {b"zebra", b"quartz"} & index_terms(memory.uri), step
        assert address not in vector_index_rows(memory.uri), step
    recalled = memory.recall("zebra quartz locker code").chains
    assert not any("zebra" in note.text for chain in recalled for note in chain.heads)


def test_indexing_a_store_again_brings_back_no_forgotten_note(db: str, embedder: SentenceTransformerEmbedder) -> None:
    """A store whose full-text index has other settings than FULL_TEXT (made before they changed) is
    indexed again from the rows it has, a forgotten note's among them while its erasure waits (another
    process's, or on a bucket): the pass that erases it reaches the new index too. (An erasure pass
    that rebuilds the index makes it with the new settings.)"""
    from lancedb.index import FTS

    memory = Memory(db, embedder, parts=Parts(erasure=StopsBeforeErasing))  # its erasure waits for upkeep
    memory.remember(Draft(text="my dog chased the cat"))
    waiting = memory.remember(Draft(text="The safe code is walrus-9210-onyx")).note
    notes = memory.tables.handles.notes_table()
    assert notes is not None
    notes.checkout_latest()
    notes.create_index("text", config=FTS(base_tokenizer="icu"), replace=True)  # the settings before
    assert b"walrus" in index_terms(memory.uri) and b"dog" not in index_terms(memory.uri)

    memory.tables.erasure.erase_later = True
    assert memory.forget(waiting.id, reason="the user asked").erasure == "pending"
    assert memory.upkeep.upkeep_due()
    memory.tables.indexes.ensure_indexes(notes, retype=True)  # what upkeep does first, here before the erasure
    assert {b"dog", b"walrus"} <= index_terms(memory.uri)

    memory.upkeep.compact()  # its erasure pass, then the rest of upkeep
    assert b"walrus" not in index_terms(memory.uri) and b"dog" in index_terms(memory.uri)
    assert not memory.upkeep.upkeep_due()
    assert not memory.recall("walrus onyx safe code").chains


def race_corrections(first: Memory, second: Memory, rounds: int) -> list[tuple[str, str]]:
    """`rounds` times, two writers correct one note at the same moment; each round's (outcome, error)."""
    results = []
    for round_ in range(rounds):
        old = first.remember(Draft(text=f"Round {round_}: the deploy window is Tuesday")).note
        second.history(old.id)  # the second writer has read the scope, as a running server would have
        barrier = threading.Barrier(2)
        outcomes: list[tuple[str, str]] = []

        def correct(
            memory: Memory, day: str, barrier: threading.Barrier = barrier, old_id: str = old.id,
            outcomes: list[tuple[str, str]] = outcomes,
        ) -> None:  # fmt: skip
            barrier.wait()
            try:
                done = memory.correct(old_id, Draft(text=f"The deploy window is {day}"), reason="moved")
                outcomes.append(("corrected", done.note.id))
            except Conflict as exc:
                outcomes.append(("refused", str(exc)))

        threads = [threading.Thread(target=correct, args=args) for args in ((first, "Wednesday"), (second, "Friday"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        chain = first.history(old.id).chain
        assert chain.status.value == "current" and len(chain.heads) == 1, (round_, outcomes)
        assert sorted(kind for kind, _ in outcomes) == ["corrected", "refused"], outcomes
        (winner,) = [detail for kind, detail in outcomes if kind == "corrected"]
        (error,) = [detail for kind, detail in outcomes if kind == "refused"]
        assert chain.heads[0].id == winner and winner in error, (winner, error)  # the error names the new head
        results.extend(outcomes)
    return results


def test_two_writers_correcting_one_note_at_once_leave_one_current_and_tell_the_other(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """Each writer's guard rail passes before either writes; the later commit withdraws its own note
    (a revokes naming the winner) and refuses, naming the new head: 0 contested in 20 rounds."""
    race_corrections(Memory(db, embedder), Memory(db, embedder), rounds=20)  # as two server processes


@pytest.mark.parametrize("held", ["first", "second"])
def test_of_two_corrections_the_one_whose_note_lands_first_wins_whatever_order_their_edges_landed(
    db: str, embedder: SentenceTransformerEmbedder, held: str
) -> None:
    """A correction's note is its commit point; its edge lands first. One writer is held between its two
    appends while the other corrects the same note from start to end: the other's check reads the held
    edge without its note (`first`: the fold ignores it) or checks before it lands and then commits its
    edge after it (`second`), and its note lands first either way. It wins; the held one, whose note lands
    last, is withdrawn and told, naming the winner. (Before corrections were ordered by their notes, both
    were told they succeeded and the chain had two current notes: bench/correction_race.py, `fresh`.)"""
    edge_landed, other_done = threading.Event(), threading.Event()
    before_others_edge: list[Callable[[], None]] = []  # what the other writer's next edge waits for, if anything

    class HeldAfterItsEdge(Handles):
        def append_rows(self, table: Table, rows: pa.Table) -> int:
            version = super().append_rows(table, rows)
            if table.name == EVENTS and not edge_landed.is_set():
                edge_landed.set()
                assert other_done.wait(timeout=60)
            return version

    class AfterTheHeldEdge(Handles):
        def append_rows(self, table: Table, rows: pa.Table) -> int:
            if table.name == EVENTS and before_others_edge:
                before_others_edge.pop()()
            return super().append_rows(table, rows)

    held_writer = Memory(db, embedder, parts=Parts(handles=HeldAfterItsEdge))
    other = Memory(db, embedder, parts=Parts(handles=AfterTheHeldEdge))
    for round_ in range(3):
        old = other.remember(Draft(text=f"Round {round_}: the deploy window is Tuesday")).note
        held_writer.history(old.id)  # both have read it, as running servers would have
        other.history(old.id)
        edge_landed.clear()
        other_done.clear()
        outcomes: dict[str, Any] = {}

        def held_correct(old_id: str = old.id, outcomes: dict[str, Any] = outcomes) -> None:
            try:
                outcomes["held"] = held_writer.correct(old_id, Draft(text="The window is Wednesday"), reason="moved")
            except Conflict as exc:
                outcomes["held"] = exc

        thread = threading.Thread(target=held_correct)
        if held == "first":  # the other writer starts once the held edge is in the events table
            thread.start()
            assert edge_landed.wait(timeout=60)
            outcomes["other"] = other.correct(old.id, Draft(text="The window is Friday"), reason="moved")
        else:  # the other writer checks first, and its edge lands after the held one

            def start_the_held_one(thread: threading.Thread = thread) -> None:
                thread.start()
                assert edge_landed.wait(timeout=60)

            before_others_edge.append(start_the_held_one)
            outcomes["other"] = other.correct(old.id, Draft(text="The window is Friday"), reason="moved")
            assert not before_others_edge  # its edge waited
        other_done.set()
        thread.join(timeout=60)
        winner = outcomes["other"].note.id
        assert isinstance(outcomes["held"], Conflict), (round_, outcomes)
        assert f"correct the current note ({winner})" in str(outcomes["held"])
        chain = other.history(old.id).chain
        assert [h.id for h in chain.heads] == [winner], (round_, outcomes)


def test_a_graph_catching_up_on_one_thread_never_fails_another_thread_reading_the_events(memory: Memory) -> None:
    """Catching a graph up reads the transactions of the versions since (events_since), which pylance
    does with a mutable borrow of the dataset: on the view every thread reads, another thread's look
    at its version failed meanwhile ("Already mutably borrowed"), and with it a correction, once after
    its note had landed (bench/correction_race.py, `threads`)."""
    first = memory.remember(Draft(text="The deploy window is Tuesday")).note
    start = memory.tables.events.events_version()
    for day in ("Wednesday", "Thursday", "Friday"):  # three versions that appended events since `start`
        memory.link(memory.remember(Draft(text=f"Deploys on {day} need a green build")).note.id, first.id, "depends_on")
    stop, failures = threading.Event(), []

    def look() -> None:
        while not stop.is_set():
            try:
                memory.tables.events.events_version()
            except RuntimeError as exc:
                failures.append(str(exc))

    looking = threading.Thread(target=look)
    looking.start()
    try:
        for _ in range(300):
            assert memory.tables.events.events_since(start, "default") is not None
    finally:
        stop.set()
        looking.join()
    assert not failures, f"{len(failures)} looks failed: {failures[0]}"


def test_a_write_nothing_raced_reads_no_earlier_version_of_the_events(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """A write whose commit is the events table's version right after the one its check read has nothing
    to look for in between (the race tests show the look when something landed there)."""
    looks: list[tuple[Any, ...]] = []

    class Looks(Handles):
        def committed_before(
            self, table: Table, version: int, clause: str, columns: list[str] | None = None
        ) -> pa.Table | None:
            looks.append((table, version, clause, columns))
            return super().committed_before(table, version, clause, columns)

    memory = Memory(db, embedder, parts=Parts(handles=Looks))
    first = memory.remember(Draft(text="The deploy window is Tuesday")).note
    other = memory.remember(Draft(text="Deploys need a green build")).note
    looks.clear()  # counted from here
    second = memory.correct(first.id, Draft(text="The deploy window is Wednesday"), reason="moved").note
    memory.correct(second.id, Draft(text="The deploy window is Friday"), reason="moved again", fork=True)
    memory.link(second.id, other.id, "depends_on")
    memory.revoke(other.id, reason="wrong")
    memory.reinstate(other.id, reason="right after all")
    memory.remember(Draft(text="Deploys need two reviews"), supersedes=[other.id])
    assert looks == []


def _correct_in_a_process(db: str, ids: list[str], day: str, barrier: Any, results: Any) -> None:
    """A writer process: after each round's barrier, correct that round's note; report each outcome."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    memory = Memory(db)
    memory.embedder.embed(["load"])
    for round_, old_id in enumerate(ids):
        memory.history(old_id)  # read the scope first, as a running server would have
        barrier.wait(timeout=120)
        try:
            done = memory.correct(old_id, Draft(text=f"Round {round_}: the deploy window is {day}"), reason="moved")
            results.put((round_, "corrected", done.note.id))
        except Conflict as exc:
            results.put((round_, "refused", str(exc)))
    memory.close()


@pytest.mark.processes
def test_two_processes_correcting_one_note_at_once_leave_one_current_and_tell_the_other(memory: Memory) -> None:
    rounds = 20
    ids = [memory.remember(Draft(text=f"Round {r}: the deploy window is Tuesday")).note.id for r in range(rounds)]
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(2), spawn.Queue()
    writers = [
        spawn.Process(target=_correct_in_a_process, args=(memory.uri, ids, day, barrier, results))
        for day in ("Wednesday", "Friday")
    ]
    for writer in writers:
        writer.start()
    outcomes: dict[int, list[tuple[str, str]]] = {}
    for _ in range(2 * rounds):
        round_, kind, detail = results.get(timeout=600)
        outcomes.setdefault(round_, []).append((kind, detail))
    for writer in writers:
        writer.join(timeout=120)
    contested = 0
    for round_, old_id in enumerate(ids):
        chain = memory.history(old_id).chain
        contested += chain.status.value == "contested"
        assert sorted(kind for kind, _ in outcomes[round_]) == ["corrected", "refused"], outcomes[round_]
        (winner,) = [detail for kind, detail in outcomes[round_] if kind == "corrected"]
        assert [h.id for h in chain.heads] == [winner]
    assert contested == 0


def rows_naming(uri: str, note_id: str) -> dict[str, list[dict[str, Any]]]:
    """The rows of the notes and events tables that name a note, its `forgets` tombstone left out, read
    from the tables' latest versions (the events a forget must erase, and its row)."""
    events = LanceDataset(str(Path(uri, f"{EVENTS}.lance"))).to_table().to_pylist()
    notes = LanceDataset(str(Path(uri, f"{NOTES}.lance"))).to_table(columns=["id", "text"]).to_pylist()
    return {
        EVENTS: [e for e in events if note_id in (e["src"], e["dst"]) and e["kind"] != EventKind.FORGETS.value],
        NOTES: [n for n in notes if n["id"] == note_id],
    }


@pytest.mark.parametrize("write", ["correct", "reinstate"])
def test_a_write_racing_a_forget_of_its_note_leaves_no_event_naming_it(
    db: str, embedder: SentenceTransformerEmbedder, write: str
) -> None:
    """A forget and a write naming the same note, at once, from two connections (as two server processes):
    whichever commits first, no row names the forgotten note once both answered. The write either
    committed first (its event erased by the forget) or lost: refused as for any note that is gone, with
    nothing of it left. In every other round the write waits, between its check and its append, until the
    forget has answered: the race the check cannot see, every time."""
    rounds, refused = 20, 0
    forgotten = threading.Event()
    widen = threading.Event()

    class Widened(Handles):
        def append_rows(self, table: Table, rows: pa.Table) -> int:
            if widen.is_set() and table.name == EVENTS:
                widen.clear()
                forgotten.wait(timeout=60)
            return super().append_rows(table, rows)

    forgetter, writer = Memory(db, embedder), Memory(db, embedder, parts=Parts(handles=Widened))
    for round_ in range(rounds):
        note = forgetter.remember(Draft(text=f"Round {round_}: the office door code is 4{round_:03d}")).note
        if write == "reinstate":
            forgetter.revoke(note.id, reason="wrong code")
        writer.history(note.id)  # the writer has read the scope, as a running server would have
        forgotten.clear()
        if round_ % 2:
            widen.set()
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def forget(note_id: str = note.id, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                forgetter.forget(note_id, reason="the user asked")
            finally:
                forgotten.set()

        def racing_write(
            note_id: str = note.id, round_: int = round_, barrier: threading.Barrier = barrier,
            outcomes: list[str] = outcomes,
        ) -> None:  # fmt: skip
            barrier.wait()
            try:
                if write == "correct":
                    writer.correct(note_id, Draft(text=f"Round {round_}: the door code is 5{round_:03d}"), reason="new")
                else:
                    writer.reinstate(note_id, reason="it was right")
                outcomes.append("written")
            except NotFound as exc:
                assert exc.ident == note_id, exc
                outcomes.append("refused")

        threads = [threading.Thread(target=forget), threading.Thread(target=racing_write)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        widen.clear()
        assert rows_naming(db, note.id) == {EVENTS: [], NOTES: []}, (round_, outcomes)
        refused += outcomes == ["refused"]
        if write == "correct":  # a refused correction left no note; one that answered stands, alone
            current = [n.text for n in writer.list_notes(state="current").notes if f"Round {round_}:" in n.text]
            assert current == ([] if outcomes == ["refused"] else [f"Round {round_}: the door code is 5{round_:03d}"])
    assert refused >= rounds // 2  # at least every widened round lost the race
    print(
        f"{write} racing a forget: refused in {refused} of {rounds} rounds ({rounds // 2} widened); no row left in any"
    )


def test_close_waits_for_a_thread_still_looking_whether_upkeep_is_due(memory: Memory, monkeypatch: Any) -> None:
    """Issue 35 item 11's suspected cause: the thread a write starts to look whether upkeep is due runs
    outside the compaction lock (in Lance's native code), so `close` returned while it ran, and a CLI
    import could exit under it. Now `close` waits for it and says whether it finished."""
    looking, release = threading.Event(), threading.Event()

    class SlowLook(Upkeep):
        def upkeep_due(self, latest: bool = True) -> bool:
            looking.set()
            release.wait(10)
            return False

    monkeypatch.setattr(limits, "UPKEEP_CHECK_EVERY", 1)  # read when a store is opened: the one below
    memory = Memory(memory.uri, memory.embedder, parts=Parts(upkeep=SlowLook))
    memory.remember(Draft(text="the build cache lives in /var/cache/ci"), scope="ops")
    assert looking.wait(10)
    assert memory.close(timeout=0.5) is False  # still looking: not finished, and it says so
    threading.Timer(0.5, release.set).start()
    assert memory.close(timeout=10) is True
    assert not [t for t in threading.enumerate() if t.name == "corrigenda-compact"]
