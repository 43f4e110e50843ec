"""Export and import: lossless round trips, idempotence, refusal of bad files, forget honoured, and the
knowledge-graph memory server's memory.jsonl (made by that server's own code: fixtures/make_kg_memory.py)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from corrigenda.server import render
from corrigenda.server.cli_commands import _export
from corrigenda.store import Draft, InvalidArgument, Memory, SentenceTransformerEmbedder, transfer
from corrigenda.store.ids import new_note_id
from corrigenda.store.model import (
    LATEST,
    MAX_ACTOR,
    MAX_KIND,
    MAX_REASON,
    MAX_SOURCE,
    MAX_SUBJECT,
    MAX_TAG,
    MAX_TAGS,
    Event,
    EventKind,
    Note,
    NoteState,
)
from corrigenda.store.storage.handles import Handles
from corrigenda.store.tables import NOTES, Parts
from corrigenda.store.transfer import event_from_record, note_from_record
from hypothesis import given
from hypothesis import strategies as st
from lancedb.table import Table

from ..server.test_cli import run

KG_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kg_memory.jsonl"
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
QUERIES = ["which port does the service listen on?", "who owns billing?", "database version", "backups"]


def hours(n: float) -> datetime:
    return T0 + timedelta(hours=n)


def build(memory: Memory) -> dict[str, str]:
    """A store with every kind of event, actors, tags, validity windows and a forgotten note."""
    ids = {}
    proxy = memory.remember(
        Draft(text="Traffic enters through the nginx proxy", tags=["infra"], at=hours(0)), scope="ops", actor="claude"
    ).note
    port = memory.remember(
        Draft(text="The service listens on 8080", subject="service.port", at=hours(1)), scope="ops", actor="claude"
    ).note
    ids["port"] = port.id
    fix = memory.correct(
        port.id, Draft(text="The service listens on 9090", at=hours(2)), reason="moved behind the proxy", actor="cursor"
    )
    memory.link(fix.note.id, proxy.id, "depends_on", at=hours(2.5))
    owner = memory.remember(Draft(text="Alice owns billing", at=hours(3)), scope="ops").note
    detail = memory.remember(Draft(text="Alice owns billing since the March reorg", at=hours(3.5)), scope="ops").note
    memory.link(detail.id, owner.id, "refines", at=hours(3.6))
    db = memory.remember(
        Draft(text="The database is PostgreSQL 15", confidence=0.7, valid_until=hours(100), at=hours(4)), scope="ops"
    ).note
    revoked = memory.revoke(db.id, reason="it was never upgraded from 14", at=hours(5))
    memory.reinstate(revoked.event.id, reason="it was, on the 3rd", at=hours(6))  # type: ignore[union-attr]
    secret = memory.remember(Draft(text="The backups password is hunter2", at=hours(7)), scope="ops").note
    ids["secret"] = secret.id
    memory.remember(Draft(text="Backups run nightly at 02:00", at=hours(7.5)), scope="home")
    memory.forget(secret.id, reason="a person asked")
    return ids


def recalls(memory: Memory) -> list[dict[str, object]]:
    return [
        memory.recall(q, scope="ops", as_of=as_of).model_dump(mode="json")
        for q in QUERIES
        for as_of in (None, hours(1.5), hours(5.5))
    ]


def test_a_round_trip_keeps_every_record_and_gives_the_same_recall(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    build(memory)
    exported = list(memory.export(vectors=True))
    header = json.loads(exported[0])
    assert header["type"] == "corrigenda-export" and header["scopes"] == ["home", "ops"]
    assert "hunter2" not in "\n".join(exported)  # the forgotten note stays forgotten

    copy = Memory(str(tmp_path / "copy"), embedder)
    done = copy.import_lines(exported)
    assert (done.notes_written, done.events_written) == (7, 6)  # 6 edges and 1 tombstone
    assert list(copy.export(vectors=True))[1:] == exported[1:]  # every field, line for line
    assert recalls(copy) == recalls(memory)  # the same chains, scores, history and as_of replays

    again = copy.import_lines(exported)
    assert (again.notes_written, again.events_written, again.notes_present, again.events_present) == (0, 0, 7, 6)
    assert copy.stats()["notes"] == 7 and copy.stats()["events"] == 6


def test_without_vectors_the_import_embeds_again_and_recalls_the_same_chains(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    build(memory)
    copy = Memory(str(tmp_path / "copy"), embedder)
    progress: list[tuple[int, int]] = []
    copy.import_lines(memory.export(), progress=lambda done, total: progress.append((done, total)))
    assert progress == [(7, 7)]

    def chains(m: Memory) -> list[list[tuple[str, list[str], list[str]]]]:
        return [
            [(c.chain_id, [h.id for h in c.heads], [h.note.id for h in c.history]) for c in m.recall(q, "ops").chains]
            for q in QUERIES
        ]

    assert chains(copy) == chains(memory)


def trailed(lines: Sequence[str]) -> list[str]:
    """An export's header and records with the trailer they would have (a crafted file that is whole)."""
    digest = hashlib.sha256("".join(line + "\n" for line in lines[1:]).encode()).hexdigest()
    kinds = [json.loads(line)["type"] for line in lines[1:]]
    trailer = {"type": "end", "notes": kinds.count("note"), "events": kinds.count("event"), "sha256": digest}
    return [*lines, json.dumps(trailer)]


def edit(lines: Sequence[str], index: int, **fields: object) -> list[str]:
    """`lines` with the record at `index` given these fields."""
    return [json.dumps({**json.loads(line), **fields}) if i == index else line for i, line in enumerate(lines)]


def test_a_bad_line_is_named_and_nothing_is_stored(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    build(memory)
    good = list(memory.export())
    target = Memory(str(tmp_path / "target"), embedder)
    target.remember(Draft(text="A note that was there before"), scope="ops")
    before = target.stats()

    broken_json = [*good[:3], "{not json", *good[3:]]
    empty_text = [json.dumps({**json.loads(line), "text": " "}) if i == 2 else line for i, line in enumerate(good)]
    edge = next(line for line in good if json.loads(line).get("kind") == "supersedes")
    dangling = trailed([*good[:-1], json.dumps({**json.loads(edge), "id": "e_" + "1" * 26, "src": "n_" + "0" * 26})])
    for lines, number, problem in (
        (broken_json, 4, "not JSON"),
        (empty_text, 3, "text: must not be empty"),
        (dangling, len(dangling) - 1, "neither in the file nor in the store"),
        ([good[0], good[1], good[1]], 3, "already on line 2"),
        ([good[1]], 1, "header"),
        # the tools' own rules, through the one check every note and event passes (model.check_fields):
        # a time that an offset pushes past 9999 could be written but never read back
        (edit(good, 2, valid_until="9999-12-31T23:59:59-01:00"), 3, "valid_until: .* outside the supported range"),
        (edit(good, 2, recorded_at="0001-01-01T00:00:00+01:00"), 3, "recorded_at: .* outside the supported range"),
        (edit(good, 2, kind="k" * 65), 3, "kind: is 65 characters; the limit is 64"),
        (edit(good, 2, subject="s" * 1_000_000), 3, "subject: is 1000000 characters; the limit is 256"),
        (edit(good, 2, tags=["t"] * 33), 3, "tags: has 33 tags; the limit is 32"),
        (edit(good, 2, text="a lone \ud800 surrogate"), 3, "text: holds .* at character 7, a lone surrogate"),
        (edit(good, len(good) - 2, reason="r" * 2001), len(good) - 1, "reason: is 2001 characters; the limit is 2000"),
    ):
        with pytest.raises(InvalidArgument, match=rf"^line {number}: .*{problem}"):
            target.import_lines(lines)
        assert target.stats() == before


def test_an_old_export_does_not_bring_back_a_forgotten_note(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    kept = memory.remember(Draft(text="The VPN gateway is vpn-2"), scope="ops").note
    secret = memory.remember(Draft(text="The alarm code is 4711"), scope="ops").note
    old_export = list(memory.export())
    elsewhere = Memory(str(tmp_path / "elsewhere"), embedder)
    elsewhere.import_lines(old_export)  # a copy made before the forget

    memory.forget(secret.id, reason="a person asked")
    back = memory.import_lines(old_export)
    assert back.forgotten_skipped == 1 and back.notes_written == 0 and back.notes_present == 1
    assert secret.id not in memory.tables.search.notes([secret.id, kept.id])

    # the new export carries the tombstone, which erases the note from the older copy too
    erased = elsewhere.import_lines(memory.export())
    assert erased.notes_erased == [secret.id]
    assert elsewhere.tables.search.notes([secret.id]) == {}
    assert all("4711" not in c.heads[0].text for c in elsewhere.recall("alarm code", "ops").chains)


def test_a_knowledge_graph_memory_file_becomes_notes_that_depend_on_their_entities(memory: Memory) -> None:
    lines = KG_FIXTURE.read_text().splitlines()
    assert {json.loads(line)["type"] for line in lines} == {"entity", "relation"}
    done = memory.import_lines(lines, scope="kg", actor="corrigenda import", source="memory.jsonl")
    # 3 entities, 7 observations, 2 relations; each observation needs its entity, each relation both
    assert (done.format, done.notes_written, done.events_written) == ("knowledge-graph", 12, 11)

    recalled = memory.recall("which port does the payments service listen on?", "kg", max_chains=1)
    (chain,) = recalled.chains
    assert [h.text for h in chain.heads] == ["Payments_Service: Listens on port 9090"]
    assert [p.text for p in chain.prerequisites] == ["Payments_Service is a service"]
    assert chain.heads[0].kind == "observation" and chain.heads[0].tags == ["service"]
    assert chain.heads[0].actor == "corrigenda import" and chain.heads[0].source == "memory.jsonl"

    on_call = memory.recall("who is on call for the payments service?", "kg", max_chains=1).chains[0]
    assert on_call.heads[0].text == "Maria_Lopez is on call for Payments_Service"
    assert {p.text for p in on_call.prerequisites} == {"Maria_Lopez is a person", "Payments_Service is a service"}

    again = memory.import_lines(lines, scope="kg")
    assert (again.notes_written, again.events_written, again.notes_present) == (0, 0, 12)

    # a correction of an imported observation works like any other
    fixed = memory.correct(chain.heads[0].id, Draft(text="Payments_Service: Listens on port 9443"), reason="TLS")
    assert [p.id for p in fixed.chain.prerequisites] == [chain.prerequisites[0].id]

    bad = [*lines[:2], json.dumps({"type": "entity", "name": "X", "entityType": "thing", "observations": [""]})]
    with pytest.raises(InvalidArgument, match=r"^line 3: observations\[0\]"):
        memory.import_lines(bad, scope="kg2")
    with pytest.raises(InvalidArgument, match=r"^line 2: .*entity and relation lines"):
        memory.import_lines([lines[0], json.dumps({"type": "note", "text": "x"})], scope="kg2")
    assert "kg2" not in memory.tables.search.scopes()


@pytest.mark.processes
def test_the_export_and_import_commands(tmp_path: Path, db: str, memory: Memory) -> None:
    build(memory)
    out = tmp_path / "ops.jsonl"
    exported = run("export", "--db", db, "--scope", "ops", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert json.loads(out.read_text().splitlines()[0])["scopes"] == ["ops"]

    copy = str(tmp_path / "copy")
    imported = run("import", str(out), "--db", copy)
    assert imported.returncode == 0, imported.stderr
    assert "6 notes" in imported.stdout and "6/6" in imported.stderr  # the summary; the progress bar
    kg = run("import", str(KG_FIXTURE), "--db", copy, "--scope", "kg", "--json")
    assert json.loads(kg.stdout)["notes_written"] == 12
    scoped = run("import", str(out), "--db", copy, "--scope", "elsewhere")  # an export keeps its own scopes
    assert scoped.returncode == 2 and "--scope: a corrigenda export goes back into the scopes it names" in scoped.stderr

    (tmp_path / "bad.jsonl").write_text(out.read_text().replace('"kind":"fact"', '"kind":""', 1))
    refused = run("import", str(tmp_path / "bad.jsonl"), "--db", str(tmp_path / "fresh"))
    assert refused.returncode == 2 and "line 2: kind: must not be empty" in refused.stderr
    assert not (tmp_path / "fresh" / "notes.lance").exists()


times = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))
ids = st.text("0123456789abcdefghjkmnpqrstvwxyz", min_size=25, max_size=25).map(lambda s: "0" + s)
texts = st.text(min_size=1, max_size=200).filter(lambda t: t.strip())


# every field anywhere within the limits a stored record keeps (store/model.py)
notes = st.builds(
    Note, id=ids.map(lambda i: "n_" + i), scope=st.sampled_from(["ops", "My Project", "项目"]), text=texts,
    kind=texts.filter(lambda t: len(t) <= MAX_KIND), subject=st.none() | st.text(max_size=MAX_SUBJECT),
    tags=st.lists(st.text(max_size=MAX_TAG), max_size=MAX_TAGS), source=st.none() | st.text(max_size=MAX_SOURCE),
    actor=st.none() | st.text(max_size=MAX_ACTOR), confidence=st.floats(0, 1), recorded_at=times,
    valid_from=st.none() | times, valid_until=st.none(),
)  # fmt: skip
events = st.builds(
    Event, id=ids.map(lambda i: "e_" + i), kind=st.just(EventKind.SUPERSEDES), src=ids.map(lambda i: "n_" + i),
    dst=ids.map(lambda i: "n_" + i), scope=st.just("ops"), reason=st.none() | st.text(max_size=MAX_REASON),
    actor=st.none() | st.text(max_size=MAX_ACTOR), confidence=st.floats(0, 1), recorded_at=times,
)  # fmt: skip


@given(notes, events)
def test_a_record_reads_back_from_its_export_line_unchanged(note: Note, event: Event) -> None:
    for record, read in ((note, note_from_record), (event, event_from_record)):
        line = json.dumps(record.model_dump(mode="json"), ensure_ascii=False)
        assert read(json.loads(line)) == record


class _CountingEmbedder:
    """The real model, counting its calls, so that a write can wait to see the next batch embedded."""

    def __init__(self, model: SentenceTransformerEmbedder) -> None:
        self.name = model.name
        self.model = model
        self.calls = 0
        self.changed = threading.Condition()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self.model.embed(texts)
        with self.changed:
            self.calls += 1
            self.changed.notify_all()
        return vectors

    def readable(self, text: str) -> bool:
        return self.model.readable(text)


def before_each_write_of_notes(hook: Callable[[], None]) -> Parts:
    """Parts whose every append to the notes table calls `hook` first: if it raises, the write fails there."""

    class Hooked(Handles):
        def append_rows(self, table: Table, rows: pa.Table) -> int:
            if table.name == NOTES:
                hook()
            return super().append_rows(table, rows)

    return Parts(handles=Hooked)


def test_an_import_embeds_the_next_batch_while_one_is_written_and_stops_at_a_failed_write(
    db: str, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "BATCH", 2)
    counting = _CountingEmbedder(embedder)
    importing = threading.Event()
    writes: list[bool] = []  # per write: whether the next batch was embedded while it was under way

    def write() -> None:
        if not importing.is_set():
            return
        with counting.changed:
            overlapped = counting.changed.wait_for(lambda: counting.calls >= len(writes) + 2, timeout=10)
        writes.append(overlapped)
        if len(writes) == 3:
            raise OSError("the disk is full")

    memory = Memory(db, counting, parts=before_each_write_of_notes(write))
    memory.remember(Draft(text="The store existed before the import"), scope="ops")
    counting.calls = 0  # from here, one call per batch
    importing.set()
    drafts = [Draft(text=f"Service {n} listens on port {8000 + n}") for n in range(7)]  # 4 batches: 2, 2, 2, 1
    with pytest.raises(OSError, match="the disk is full"):
        memory.import_notes(drafts, scope="ops")

    assert writes == [True, True, True]  # batches 2, 3 and 4 each embedded during the write before
    stored = sorted(n.text for n in memory.list_notes("ops").notes)
    assert stored == sorted(["The store existed before the import", *(d.text for d in drafts[:4])])
    assert counting.calls == 4  # every batch, though the fourth was never written


def test_a_store_holding_a_time_past_9999_stays_readable_and_its_note_can_be_forgotten(
    memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """A store that took such a time before imports checked them (issue 35, item 1) is not locked: the
    time reads as the end of the range, and the note can be exported and forgotten."""
    memory.remember(Draft(text="A note beside it"), scope="s")
    past_9999 = datetime.fromisoformat("9999-12-31T23:59:59-01:00")  # 10000-01-01T00:59:59Z
    bad = Note(id=new_note_id(), text="Written with a time past 9999", scope="s", recorded_at=T0, valid_until=past_9999)
    memory.tables.add_notes([(bad, embedder.embed([bad.text])[0], True)], embedder.name)

    listed = {n.id: n for n in memory.list_notes("s").notes}
    assert listed[bad.id].valid_until == LATEST
    assert memory.recall("a note", scope="s").chains
    assert any(bad.id in line for line in memory.export("s"))
    assert memory.forget(bad.id, reason="unreadable time").changed
    assert [n.text for n in memory.list_notes("s").notes] == ["A note beside it"]


def test_an_export_that_fails_leaves_no_partial_file(tmp_path: Path, memory: Memory) -> None:
    memory.remember(Draft(text="A note to export"), scope="s")
    header = next(memory.export())

    def failing(scope: str | None = None, vectors: bool = False) -> Iterator[str]:
        yield header
        raise OSError("disk full")

    memory.export = failing  # type: ignore[method-assign]
    out = tmp_path / "backup.jsonl"
    with pytest.raises(OSError, match="disk full"):
        _export(memory, None, str(out), vectors=False)
    assert not out.exists() and not Path(f"{out}.partial").exists()


@pytest.mark.processes
def test_a_note_with_unicode_line_separators_survives_the_export_and_import_commands(
    tmp_path: Path, db: str, memory: Memory
) -> None:
    """U+2028, U+2029 and U+0085 are line breaks to str.splitlines, but JSON keeps them unescaped inside
    strings: the import splits a file on newlines alone."""
    text = "Line one\u2028line two\u2029para\x85end"
    memory.remember(Draft(text=text), scope="ops")
    out = tmp_path / "ops.jsonl"
    assert run("export", "--db", db, "--out", str(out)).returncode == 0
    copy = tmp_path / "copy"
    imported = run("import", str(out), "--db", str(copy))
    assert imported.returncode == 0, imported.stderr
    assert [n.text for n in Memory(str(copy), memory.embedder).list_notes("ops").notes] == [text]


def test_a_cut_short_export_is_refused_unless_a_partial_restore_is_asked_for(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """An export ends with a trailer (counts and digest): a file cut short, by lines or mid-line, or of
    version 1 (before trailers), is refused with nothing stored; asked for, a partial restore says
    what does not show it whole."""
    build(memory)
    good = list(memory.export())
    assert json.loads(good[-1])["type"] == "end" and json.loads(good[-1])["notes"] == 7
    target = Memory(str(tmp_path / "target"), embedder)
    version_1 = [json.dumps({**json.loads(good[0]), "version": 1}), *good[1:-1]]
    altered = [*good[:2], json.dumps({**json.loads(good[2]), "confidence": 0.5}), *good[3:]]
    for lines, says in (
        (good[:-1], "the file has no trailer"),
        (good[:-4], "the file has no trailer"),
        ([*good[:-3], good[-1]], "the trailer counts 7 notes and 6 events, the file holds 7 and 4"),
        (altered, "the lines differ from the ones the trailer's digest was made of"),
        (version_1, "an export of version 1 has no trailer"),
    ):
        with pytest.raises(InvalidArgument, match=f"^file: {says}.*: it may have been cut short"):
            target.import_lines(lines)
        assert target.stats()["notes"] == 0
    with pytest.raises(InvalidArgument, match=r"^line 7: not JSON"):  # cut inside a line
        target.import_lines([*good[:6], good[6][:40]])
    done = target.import_lines(good[:-4], partial=True)
    assert done.partial == "the file has no trailer (its last line in a whole export)"
    assert done.notes_written == 7 and done.events_written == 3


@pytest.mark.processes
def test_the_import_command_refuses_a_cut_file_and_restores_it_with_partial(tmp_path: Path, memory: Memory) -> None:
    build(memory)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(list(memory.export())[:-2]) + "\n")
    refused = run("import", str(cut), "--db", str(tmp_path / "copy"))
    assert (
        refused.returncode == 2 and "file: the file has no trailer" in refused.stderr and "--partial" in refused.stderr
    )
    restored = run("import", str(cut), "--db", str(tmp_path / "copy"), "--partial")
    assert restored.returncode == 0 and "A partial restore, as asked: the file has no trailer" in restored.stdout


def test_a_header_naming_the_model_with_another_dimension_is_refused(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    memory.remember(Draft(text="The cache is Redis"), scope="ops")
    lines = list(memory.export())
    crafted = [json.dumps({**json.loads(lines[0]), "dimension": 3}), *lines[1:]]
    fresh = Memory(str(tmp_path / "fresh"), embedder)
    with pytest.raises(InvalidArgument, match=f"^line 1: dimension: the header says {embedder.name} with 3 dimensions"):
        fresh.import_lines(crafted)
    assert fresh.stats()["notes"] == 0
    fresh.remember(Draft(text="The queue is RabbitMQ"), scope="ops")  # the store still takes 384-wide vectors
    assert fresh.recall("which queue?", scope="ops").chains


def test_a_tombstone_for_a_note_of_another_scope_is_refused(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    victim = memory.remember(Draft(text="Payroll runs on the 25th"), scope="hr").note
    memory.remember(Draft(text="Standups are at ten"), scope="eng")
    lines = list(memory.export("eng"))
    tombstone = {"type": "event", "id": "e_" + "2" * 26, "kind": "forgets", "src": None, "dst": victim.id,
                 "scope": "eng", "reason": "crafted", "actor": None, "confidence": 1.0,
                 "recorded_at": "2026-12-01T00:00:00Z"}  # fmt: skip
    crafted = trailed([*lines[:-1], json.dumps(tombstone)])
    with pytest.raises(
        InvalidArgument, match=f"^line {len(crafted) - 1}: dst: {victim.id} is in scope 'hr', not 'eng'"
    ):
        memory.import_lines(crafted)
    assert memory.history(victim.id).note.text == "Payroll runs on the 25th"


def test_an_import_whose_model_fails_half_way_writes_nothing(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every note is embedded before anything is written: a model that fails on the second batch
    leaves the store as it was, the note a tombstone of the file names included."""
    stored = memory.remember(Draft(text="The old VPN host is vpn-1"), scope="ops").note
    source = Memory(str(tmp_path / "source"), embedder)
    source.import_notes([Draft(text=f"Runbook step {i}: check the queue depth") for i in range(transfer.BATCH + 10)])
    lines = list(source.export("default"))
    tombstone = {"type": "event", "id": "e_" + "3" * 26, "kind": "forgets", "src": None, "dst": stored.id,
                 "scope": "ops", "reason": "moved", "actor": None, "confidence": 1.0,
                 "recorded_at": "2026-12-01T00:00:00Z"}  # fmt: skip
    crafted = trailed([*lines[:-1], json.dumps(tombstone)])
    before = memory.stats()
    calls = []

    def failing(texts: Sequence[str]) -> list[list[float]]:
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("the tokenizer choked")
        return real(texts)

    real = memory.embedder.embed
    monkeypatch.setattr(memory.embedder, "embed", failing)
    with pytest.raises(RuntimeError, match="the tokenizer choked"):
        memory.import_lines(crafted)
    assert memory.stats() == before
    assert memory.history(stored.id).note.text == "The old VPN host is vpn-1"


def test_a_knowledge_graph_files_repeats_are_stored_once_and_listed(memory: Memory) -> None:
    entity = {"type": "entity", "name": "Billing", "entityType": "service", "observations": ["Runs on Fridays"]}
    again = {**entity, "observations": ["Runs on Fridays", "Owned by Ana"]}
    done = memory.import_lines([json.dumps(entity), json.dumps(again)], scope="kg")
    assert done.notes_written == 3  # the entity, and two observations
    assert done.repeats_merged == [
        "line 2: 'Billing is a service' (as on line 1)",
        "line 2: 'Billing: Runs on Fridays' (as on line 1)",
    ]
    assert "2 repeated entit(ies) or observation(s) stored once" in render.imported(done)


def test_a_knowledge_graph_entity_given_a_second_type_is_refused_naming_both_lines(memory: Memory) -> None:
    """A name is an entity's identity in the graph, with one type (its server never writes a name twice):
    a second type is a hand edit or two graphs merged, a contradiction or two things under one name,
    which only the person can settle. Nothing is stored."""
    entity = {"type": "entity", "name": "Billing", "entityType": "service", "observations": ["Runs on Fridays"]}
    other = {**entity, "entityType": "team", "observations": ["Owned by Ana"]}
    with pytest.raises(
        InvalidArgument, match=r"^line 2: entityType: 'team', but line 1 gives entity 'Billing' the type 'service'"
    ):
        memory.import_lines([json.dumps(entity), json.dumps(other)], scope="kg")
    assert "kg" not in memory.tables.search.scopes()


# Two relations whose names joined with U+001F are the same: "A knows B␟x␟C" and "A␟knows␟B x C".
CROSSED = [
    {"type": "relation", "from": "A", "to": "B\x1fx\x1fC", "relationType": "knows"},
    {"type": "relation", "from": "A\x1fknows\x1fB", "to": "C", "relationType": "x"},
]


@pytest.mark.parametrize(
    ("records", "problem"),
    [
        (CROSSED, "line 1: to: 'B\\x1fx\\x1fC' holds the control character U+001F"),
        (CROSSED[1:], "line 1: from: 'A\\x1fknows\\x1fB' holds the control character U+001F"),
        ([{"type": "entity", "name": "Billing", "entityType": "service"},
          {"type": "entity", "name": "Bil\nling", "entityType": "service"}], "line 2: name: 'Bil\\nling' holds the control character U+000A"),
    ],
)  # fmt: skip
def test_a_knowledge_graph_name_holding_a_control_character_is_refused_naming_the_line(
    memory: Memory, records: list[dict[str, str]], problem: str
) -> None:
    """Ids are derived from the names joined with U+001F: a name holding one could give two relations
    one id (CROSSED), and the second would be dropped as a repeat of the first. Nothing is stored."""
    with pytest.raises(InvalidArgument, match=f"^{re.escape(problem)}"):
        memory.import_lines([json.dumps(r) for r in records], scope="kg")
    assert "kg" not in memory.tables.search.scopes()


def with_vector(lines: Sequence[str], index: int, raw: str) -> list[str]:
    """`lines` (an export with vectors, less its trailer) with the vector of the note at `index` written
    as `raw` JSON text, and the trailer the result would have."""
    record = json.loads(lines[index])
    record["vector"] = "@"
    return trailed([*lines[:index], json.dumps(record).replace('"@"', raw), *lines[index + 1 :]])


def lifecycle(kind: str, ident: str, dst: str, at: datetime) -> str:
    """An event line that revokes or forgets `dst`, a stored note of scope ops."""
    return json.dumps({"type": "event", "id": ident, "kind": kind, "src": None, "dst": dst, "scope": "ops",
                       "reason": "crafted", "actor": None, "confidence": 1.0, "recorded_at": at.isoformat()})  # fmt: skip


def test_a_vector_that_is_not_the_headers_dimension_of_finite_float32s_is_refused_and_nothing_is_stored(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """A JSON writer turns NaN into null: 384 nulls stored as a note's vector broke every read of its
    scope that brought vectors along. Every element of every vector is checked before anything is written."""
    memory.remember(Draft(text="The service listens on 8080"), scope="ops")
    memory.remember(Draft(text="Alice owns billing"), scope="ops")
    good = list(memory.export(vectors=True))[:-1]
    target = Memory(str(tmp_path / "target"), embedder)
    target.remember(Draft(text="A note that was there before"), scope="ops")
    before = list(target.export(vectors=True))[1:]

    def vector(*elements: str, size: int = 384) -> str:
        return "[" + ",".join([*elements, *["0.25"] * (size - len(elements))]) + "]"

    for raw, problem in (
        ("[" + ",".join(["null"] * 384) + "]", r"vector\[0\]: null is not a number"),
        (vector(*["0.5"] * 383, "null"), r"vector\[383\]: null is not a number"),
        (vector("NaN"), r"vector\[0\]: NaN is not a finite number"),
        (vector("0.5", "-Infinity"), r"vector\[1\]: -Infinity is not a finite number"),
        (vector("1e400"), r"vector\[0\]: Infinity is not a finite number"),  # json reads it as inf
        (vector("0.5", "0.5", "-1e39"), r"vector\[2\]: -1e\+39 is outside float32's range"),
        (vector("1" + "0" * 400), r"vector\[0\]: 1000000000.*… is outside float32's range"),
        (vector('"0.1"'), r'vector\[0\]: "0.1" is not a number'),
        (vector("[0.1]"), r"vector\[0\]: \[0.1\] is not a number"),
        (vector('{"a":1}'), r'vector\[0\]: \{"a": 1\} is not a number'),
        (vector("true"), r"vector\[0\]: true is not a number"),
        (vector(size=383), r"vector: has 383 numbers; the header's dimension is 384"),
        (vector(size=385), r"vector: has 385 numbers; the header's dimension is 384"),
        ('{"0":0.1}', r"vector: must be a list of 384 numbers"),
    ):
        with pytest.raises(InvalidArgument, match=rf"^line 2: {problem}"):
            target.import_lines(with_vector(good, 1, raw))
        assert list(target.export(vectors=True))[1:] == before, raw[:40]


def test_a_file_refused_for_a_bad_vector_revokes_and_forgets_nothing(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """A vector of strings, lists or objects failed only at the write, after the file's revokes and
    forgets were applied: a note revoked, or erased, by an import that reported nothing stored."""
    kept = memory.remember(Draft(text="The VPN host is vpn-1"), scope="ops").note
    secret = memory.remember(Draft(text="The alarm code is 4711"), scope="ops").note
    source = Memory(str(tmp_path / "source"), embedder)
    source.remember(Draft(text="The VPN host moves to vpn-2 in March"), scope="ops")
    lines = list(source.export("ops", vectors=True))[:-1]
    later = datetime.now(UTC)  # after the notes, before the import reads the clock
    events = [
        lifecycle("revokes", "e_" + "4" * 26, kept.id, later),
        lifecycle("forgets", "e_" + "5" * 26, secret.id, later),
    ]
    before = list(memory.export("ops", vectors=True))[1:]
    for raw in ('["0.1"' + ',"0.1"' * 383 + "]", "[[0.1]" + ",[0.1]" * 383 + "]", "[{}" + ",{}" * 383 + "]"):
        crafted = with_vector([*lines, *events], 1, raw)
        with pytest.raises(Exception) as refused:  # which exception is checked after the store is
            memory.import_lines(crafted)
        assert list(memory.export("ops", vectors=True))[1:] == before, refused.value
        assert isinstance(refused.value, InvalidArgument) and str(refused.value).startswith("line 2: vector[0]: ")
    assert memory.history(kept.id).note.state is NoteState.ACTIVE
    assert memory.history(secret.id).note.text == "The alarm code is 4711"


def test_an_import_whose_notes_fail_to_be_written_changes_no_stored_note_and_completes_when_run_again(
    tmp_path: Path, db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """The file's events that change stored notes (a revokes, a forgets, an edge between stored notes)
    are written after its notes, in one append: a write that fails before that leaves every stored
    note as it was."""
    full = threading.Event()

    def failing() -> None:
        if full.is_set():
            raise OSError("the disk is full")

    memory = Memory(db, embedder, parts=before_each_write_of_notes(failing))
    kept = memory.remember(Draft(text="The VPN host is vpn-1"), scope="ops").note
    secret = memory.remember(Draft(text="The alarm code is 4711"), scope="ops").note
    source = Memory(str(tmp_path / "source"), embedder)
    source.remember(Draft(text="The VPN host moves to vpn-2 in March"), scope="ops")
    later = datetime.now(UTC)  # after the notes, before the import reads the clock
    events = [
        lifecycle("revokes", "e_" + "4" * 26, kept.id, later),
        lifecycle("forgets", "e_" + "5" * 26, secret.id, later),
    ]
    crafted = trailed([*list(source.export("ops"))[:-1], *events])
    before = list(memory.export("ops", vectors=True))[1:]
    full.set()
    with pytest.raises(OSError, match="the disk is full"):
        memory.import_lines(crafted)
    assert list(memory.export("ops", vectors=True))[1:] == before
    assert memory.history(kept.id).note.state is NoteState.ACTIVE
    assert memory.history(secret.id).note.text == "The alarm code is 4711"

    full.clear()
    done = memory.import_lines(crafted)
    assert (done.notes_written, done.events_written, done.notes_erased) == (1, 2, [secret.id])
    assert memory.history(kept.id).note.state is NoteState.REVOKED
    assert memory.tables.search.notes([secret.id]) == {}


def test_an_import_takes_a_byte_order_mark_and_refuses_deep_nesting_numbers_as_text_and_numbers_as_times(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """What a tool call refuses (server/arguments.py: a time is an ISO 8601 string) an import refuses too,
    naming the line and the field; a BOM before the header, as some editors save UTF-8, is no problem."""
    dropped = memory.remember(Draft(text="The cache is Redis"), scope="ops").note
    memory.revoke(dropped.id, reason="it is Valkey now")
    good = list(memory.export())
    event = len(good) - 2
    target = Memory(str(tmp_path / "target"), embedder)
    deep = "[" * 10_000 + "]" * 10_000
    for lines, number, problem in (
        ([*good[:2], deep, *good[2:]], 3, "not a record: its JSON is nested too deeply"),
        (edit(good, 1, confidence="0.5"), 2, "confidence: must be a number, not str"),
        (edit(good, 1, confidence=True), 2, "confidence: must be a number, not bool"),
        (edit(good, 1, recorded_at=1), 2, "recorded_at: must be an ISO 8601 string such as .*, not int"),
        (edit(good, 1, recorded_at="1700000000"), 2, "recorded_at: '1700000000' is not an ISO 8601 time"),
        (edit(good, 1, valid_until=1.5e9), 2, "valid_until: must be an ISO 8601 string .*, not float"),
        (edit(good, event, confidence="1"), event + 1, "confidence: must be a number, not str"),
        (edit(good, event, recorded_at=0), event + 1, "recorded_at: must be an ISO 8601 string"),
    ):
        with pytest.raises(InvalidArgument, match=rf"^line {number}: {problem}"):
            target.import_lines(lines)
        assert target.stats()["notes"] == 0
    done = target.import_lines(["\ufeff" + good[0], *good[1:]])
    assert (done.notes_written, done.events_written) == (1, 1)


def test_an_import_refuses_a_record_dated_later_than_the_stores_clock_and_a_day(
    tmp_path: Path, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """A note dated year 9000 was imported, counted and exported, yet no read showed it (each reads what
    was recorded until now) and its history failed; an event so dated would act only then. A day later
    than the store's clock is let in (clocks differ), and the earliest time stays year 1 (check_time)."""
    now = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    dropped = memory.remember(Draft(text="The cache is Redis", at=now - timedelta(hours=2)), scope="ops").note
    memory.revoke(dropped.id, reason="it is Valkey now", at=now - timedelta(hours=1))
    good = list(memory.export())
    event = len(good) - 2
    target = Memory(str(tmp_path / "target"), embedder, clock=lambda: now)
    for lines, number, shown in (
        (edit(good, 1, recorded_at="9000-01-01T00:00:00Z"), 2, "9000-01-01T00:00:00+00:00"),
        (edit(good, 1, recorded_at="2026-11-02T09:00:01Z"), 2, "2026-11-02T09:00:01+00:00"),
        (edit(good, 1, recorded_at="2026-11-02T09:00:00-00:01"), 2, "2026-11-02T09:00:00-00:01"),
        (edit(good, event, recorded_at="9999-12-31T23:59:59Z"), event + 1, "9999-12-31T23:59:59+00:00"),
    ):
        problem = f"recorded_at: {re.escape(shown)} is in the future: later than this store's clock"
        with pytest.raises(InvalidArgument, match=rf"^line {number}: {problem} \(2026-11-01T09:00:00\+00:00\) by more"):
            target.import_lines(trailed(lines[:-1]))
        assert target.stats()["notes"] == 0
    within_a_day = edit(edit(good, 1, recorded_at="2026-11-02T08:59:59Z"), event, recorded_at="2026-11-02T09:00:00Z")
    done = target.import_lines(trailed(within_a_day[:-1]))
    assert (done.notes_written, done.events_written) == (1, 1)
    with pytest.raises(InvalidArgument, match=r"^line 2: recorded_at: .* outside the supported range"):
        target.import_lines(trailed(edit(good, 1, recorded_at="0001-01-01T00:00:00+01:00")[:-1]))


def test_a_write_dated_later_than_the_stores_clock_and_a_day_is_refused_by_the_python_api_too(
    memory: Memory,
) -> None:
    """`Draft(at=…)` back-dates a note (a history loaded with its dates); a date of year 9000 was stored,
    and no read showed the note until then. Refused, naming the field, and nothing is stored."""
    far = datetime(9000, 1, 1, tzinfo=UTC)
    soon = datetime.now(UTC) + timedelta(hours=12)  # within a day: another machine's clock
    with pytest.raises(InvalidArgument, match=r"^at: 9000-01-01T00:00:00\+00:00 is in the future"):
        memory.remember(Draft(text="The cache is Redis", at=far), scope="ops")
    drafts = [Draft(text="The cache is Redis"), Draft(text="The queue is Kafka", at=far)]
    with pytest.raises(InvalidArgument, match=r"^drafts\[1\]\.at: 9000"):
        memory.import_notes(drafts, scope="ops")
    assert memory.stats()["notes"] == 0
    note = memory.remember(Draft(text="The cache is Valkey", at=soon), scope="ops").note
    with pytest.raises(InvalidArgument, match=r"^at: 9000"):
        memory.revoke(note.id, reason="it moved", at=far)
    assert memory.history(note.id, as_of=soon).note.state == "active"
