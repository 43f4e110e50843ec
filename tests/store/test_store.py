"""The engine on real LanceDB in a temp directory: model guard, compaction, retried writes, CJK."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from corrigenda.store import (
    Draft,
    InvalidArgument,
    Memory,
    ModelMismatch,
    NotFound,
    SentenceTransformerEmbedder,
    graph,
    recall,
    tables,
    where,
)
from corrigenda.store.embedder import default_model_path
from corrigenda.store.ids import new_event_id, new_note_id
from corrigenda.store.model import Event, EventKind, Note
from corrigenda.store.recall import RetrievalSettings
from corrigenda.store.storage import limits
from corrigenda.store.storage import schema as layout
from corrigenda.store.storage.events import EventReads
from corrigenda.store.storage.handles import Handles
from corrigenda.store.storage.indexes import Indexes
from corrigenda.store.storage.limits import COMPACT_AT_FRAGMENTS
from corrigenda.store.storage.location import Bucket, Location
from corrigenda.store.storage.search import Search
from corrigenda.store.storage.upkeep import Upkeep
from corrigenda.store.tables import Parts, ScopeRows, Tables
from corrigenda.store.tokens import estimate_tokens
from filelock import FileLock
from hypothesis import given
from hypothesis import strategies as st
from lancedb.index import BTree
from lancedb.query import LanceVectorQueryBuilder
from lancedb.table import Table


def test_the_store_refuses_another_model(db: str, memory: Memory) -> None:
    memory.remember(Draft(text="The build server is ci-3"))
    other = Memory(db, SentenceTransformerEmbedder(default_model_path()))  # same weights, another name
    with pytest.raises(ModelMismatch, match="all-MiniLM-L6-v2"):
        other.remember(Draft(text="The build server is ci-4"))
    with pytest.raises(ModelMismatch):
        other.recall("build server")
    assert memory.stats()["notes"] == 1


def test_many_single_writes_are_compacted_in_the_background(memory: Memory) -> None:
    total = 2 * COMPACT_AT_FRAGMENTS + 8
    for i in range(total):
        memory.remember(Draft(text=f"Metric number {i} is exported by the gateway"), scope="metrics")
    for thread in threading.enumerate():
        if thread.name == "corrigenda-compact":
            thread.join()
    # without compaction every write would be a fragment of its own
    assert memory.tables.compaction.fragments()["notes"] < COMPACT_AT_FRAGMENTS + 16
    assert memory.upkeep.compact()
    assert memory.tables.compaction.fragments()["notes"] <= 2
    assert memory.stats()["notes"] == total
    found = memory.recall("metric number 7 gateway export", scope="metrics", max_chains=3)
    assert any(c.heads[0].text == "Metric number 7 is exported by the gateway" for c in found.chains)


def test_a_burst_of_writes_starts_one_look_at_upkeep_at_a_time(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes while a look (or its compaction) is under way start none beside it, so none queue up to
    compact again after the burst; that look goes once more when it ends, since writes came meanwhile,
    with no write after the burst to set it off; and the next write looks again."""
    monkeypatch.setattr(limits, "UPKEEP_CHECK_EVERY", 1)
    held, started, running, most = threading.Event(), [], [0], [0]

    class HeldLook(Upkeep):
        def compact_if_due(self) -> bool:
            started.append(threading.current_thread())
            running[0] += 1
            most[0] = max(most[0], running[0])
            held.wait(30)
            running[0] -= 1
            return super().compact_if_due()

    tables = Tables(db, parts=Parts(upkeep=HeldLook))  # reads the limit when made
    src, dst = new_note_id(), new_note_id()

    def write() -> None:
        event = Event(
            id=new_event_id(), kind=EventKind.DEPENDS_ON, src=src, dst=dst, scope="s", recorded_at=datetime.now(UTC)
        )
        tables.add_events([event])

    for _ in range(20):
        write()
    assert len(started) == 1 and most[0] == 1
    held.set()
    started[0].join(30)
    assert len(started) == 2 and started[1] is started[0]  # the burst's writes, looked at by the same thread
    write()
    assert len(started) == 3 and most[0] == 1
    assert tables.upkeep.finish_upkeep(30)
    assert tables.search.count()["events"] == 21


def test_a_look_at_upkeep_that_fails_leaves_the_next_writes_looking_again(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "UPKEEP_CHECK_EVERY", 1)
    looks: list[threading.Thread] = []

    class FailsFirst(Upkeep):
        def compact_if_due(self) -> bool:
            looks.append(threading.current_thread())
            if len(looks) == 1:
                raise RuntimeError("a look that fails (as a bug would)")
            return super().compact_if_due()

    tables = Tables(db, parts=Parts(upkeep=FailsFirst))
    event = Event(id=new_event_id(), kind=EventKind.DEPENDS_ON, src=new_note_id(), dst=new_note_id(), scope="s",
                  recorded_at=datetime.now(UTC))  # fmt: skip
    failed: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failed.append(args.exc_value))
    tables.add_events([event])
    looks[0].join(30)
    assert [str(e) for e in failed] == ["a look that fails (as a bug would)"]
    tables.add_events([event.model_copy(update={"id": new_event_id()})])
    assert len(looks) == 2 and looks[1] is not looks[0]
    assert tables.upkeep.finish_upkeep(30)


def test_only_one_process_compacts_at_a_time(db: str, memory: Memory) -> None:
    memory.remember(Draft(text="A note so the tables exist"))
    with FileLock(os.path.join(db, ".compact.lock")):  # as another process would hold it
        assert memory.upkeep.compact() is False
    assert memory.upkeep.compact() is True


def test_a_reader_sees_each_write_at_its_next_call_and_writes_on_the_latest_version(
    db: str, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """Another `Memory` on the store stands for another process. A call moves the tables' views (what
    reads and appends go to) to the latest version, so a reader's calls make no LanceDB call, and its
    first write lands on top of every version since."""
    writer = memory
    first = writer.remember(Draft(text="The build server is ci-3")).note
    reader = Memory(db, embedder)
    assert [h.id for c in reader.recall("build server").chains for h in c.heads] == [first.id]
    notes = reader.tables.handles.notes_table()
    assert notes is not None
    opened_at = notes.version
    later = [writer.remember(Draft(text=f"Runner {i} builds the docs on Tuesdays")).note.id for i in range(4)]
    assert reader.stats()["notes"] == 5  # its next call sees them
    assert reader.history(later[-1]).note.id == later[-1]
    own = reader.remember(Draft(text="The deploy server is cd-1")).note
    assert notes.version == opened_at  # the LanceDB table was never asked
    assert (
        reader.tables.handles.view(notes).version > writer.tables.handles.view(notes).version
    )  # on top of the writer's
    ids = Tables(db).handles.notes_table().to_arrow()["id"].to_pylist()  # type: ignore[union-attr]
    assert sorted(ids) == sorted([first.id, *later, own.id])
    assert writer.history(own.id).note.text == "The deploy server is cd-1"


def test_a_recall_after_another_servers_correction_reads_what_its_older_scan_does_not_hold(
    db: str, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """Another `Memory` on the store stands for another server behind a load balancer: this one's scan
    of the scope, kept from its first recall, holds none of the notes the other wrote since (issue 54:
    `take([])` failed the recall with ArrowNotImplementedError)."""
    old = memory.remember(Draft(text="The payments timeout is 30 seconds")).note
    other = Memory(db, embedder)
    assert [h.id for c in memory.recall("payments timeout").chains for h in c.heads] == [old.id]
    rows = memory.tables.search.scope_rows("default")
    assert rows is not None and rows.addresses(["n_not_in_this_scan"]) == {}
    new = other.correct(old.id, Draft(text="The payments timeout is 45 seconds"), reason="raised").note
    chains = memory.recall("payments timeout").chains
    assert [h.id for h in chains[0].heads] == [new.id]


def test_vectors_are_read_where_the_scopes_scan_found_them_until_compaction_moves_them(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    lookups: list[str | None] = []

    class CountedScans(Handles):
        def scan(self, table: Table, columns: list[str] | None, clause: str | None = None, **search: Any) -> pa.Table:
            lookups.append(clause)
            return super().scan(table, columns, clause, **search)

    memory = Memory(db, embedder, parts=Parts(handles=CountedScans))
    ids = [memory.remember(Draft(text=f"Host {i} runs the {t}")).note.id for i, t in enumerate(["VPN", "wiki", "CI"])]
    rows = memory.tables.search.scope_rows("default")
    assert rows is not None
    addresses = rows.addresses(ids)
    assert set(addresses) == set(ids) and len(set(addresses.values())) == 3  # three writes, three fragments
    by_id = memory.tables.search.vectors(ids)
    assert set(by_id) == set(ids)

    def read(located: dict[str, int]) -> dict[str, np.ndarray]:
        lookups.clear()
        found = memory.tables.search.vectors(ids, located)
        assert set(found) == set(ids) and all(np.array_equal(found[i], by_id[i]) for i in ids)
        return found

    read(addresses)
    assert lookups == []  # every one taken where it was
    read({**addresses, ids[0]: addresses[ids[1]]})  # an address that holds another note
    assert lookups == [where.all_of(where.id_in([ids[0]]), where.model_could_read())]  # that one read by id
    assert memory.upkeep.compact()  # rewrites the three fragments as one: the addresses point nowhere
    read(addresses)
    assert lookups == [where.all_of(where.id_in(ids), where.model_could_read())]


def test_a_retried_write_is_read_once(memory: Memory, embedder: SentenceTransformerEmbedder) -> None:
    note = memory.remember(Draft(text="The VPN gateway is vpn-2")).note
    stored = memory.tables.search.notes([note.id])[note.id]
    vector = embedder.embed([stored.text])[0]
    memory.tables.add_notes([(stored, vector, True)], embedder.name)  # the same id written again
    assert Tables(memory.uri).handles.notes_table().count_rows() == 2  # type: ignore[union-attr]
    recalled = memory.recall("which VPN gateway?")
    assert [h.id for c in recalled.chains for h in c.heads] == [note.id]


def test_chinese_is_found_through_full_text(memory: Memory, embedder: SentenceTransformerEmbedder) -> None:
    assert not embedder.readable("模型请求超时为三十秒")  # MiniLM reads Chinese as [UNK]
    model = memory.remember(Draft(text="模型请求超时为三十秒"), scope="zh").note
    tool = memory.remember(Draft(text="工具执行超时为六十秒"), scope="zh").note
    memory.remember(Draft(text="团队每周五下午发布新版本"), scope="zh")
    result = memory.recall("模型请求超时是多少？", scope="zh")
    ids = [c.heads[0].id for c in result.chains]
    assert ids[0] == model.id and tool.id in ids
    assert all("发布" not in c.heads[0].text for c in result.chains)


# Words that are stop words in some language Lance knows ("war" in German, "sale" in Italian, "任务"
# in its Chinese list): an ICU index with Lance's default stop words dropped them all.
WORDS_OF_NOTES = {
    "dog": "my dog chased the cat",
    "cat": "my dog chased the cat",
    "war": "the war ended in 1945",
    "sale": "a sale at the shop",
    "任务": "摘要任务默认用小模型",
}


def found_by_each_word(memory: Memory, scope: str) -> dict[str, set[str]]:
    """Each word's notes, by full-text search and by recall (the default model reads "任务" as unknown)."""
    return {
        word: {h.id for h in memory.tables.search.text_search(word, scope, None, 20)}
        & {h.id for c in memory.recall(word, scope=scope).chains for h in c.heads}
        for word in WORDS_OF_NOTES
    }


def test_a_single_word_finds_the_notes_that_hold_it(memory: Memory) -> None:
    ids = {text: memory.remember(Draft(text=text), scope="words").note.id for text in set(WORDS_OF_NOTES.values())}
    service = memory.remember(Draft(text="the service desk answers in an hour"), scope="words").note.id
    wanted = {word: {ids[text]} for word, text in WORDS_OF_NOTES.items()}
    assert found_by_each_word(memory, "words") == wanted  # searched before the index holds them
    memory.upkeep.compact()
    assert found_by_each_word(memory, "words") == wanted  # and through the index
    with_the = {service} | {i for text, i in ids.items() if "the" in text.split()}
    assert {h.id for h in memory.tables.search.text_search("the", "words", None, 20)} == with_the  # stop words alone
    war = memory.tables.search.text_search("what was the war?", "words", None, 20)  # else searched for its other words
    assert [h.id for h in war] == [ids[WORDS_OF_NOTES["war"]]]


def test_a_store_indexed_with_every_languages_stop_words_is_indexed_again_when_opened(
    db: str, memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    from lancedb.index import FTS

    ids = {text: memory.remember(Draft(text=text), scope="words").note.id for text in set(WORDS_OF_NOTES.values())}
    notes = memory.tables.handles.notes_table()
    assert notes is not None
    notes.checkout_latest()
    notes.create_index("text", config=FTS(base_tokenizer="icu"), replace=True)  # as a store made before
    assert memory.upkeep.upkeep_due()

    opened = Memory(db, embedder)  # the next server on the store: warming up looks whether upkeep is due
    opened.warm().join()
    assert not opened.upkeep.upkeep_due()
    (index,) = [i for i in opened.tables.handles.notes_table().list_indices() if i.columns == ["text"]]  # type: ignore[union-attr]
    assert index.index_details is not None
    assert index.index_details["remove_stop_words"] is limits.FULL_TEXT.get("remove_stop_words", True)
    assert found_by_each_word(opened, "words") == {word: {ids[text]} for word, text in WORDS_OF_NOTES.items()}


def test_import_stores_many_notes_in_one_write_or_none(memory: Memory) -> None:
    memory.remember(Draft(text="The staging cluster runs in eu-west-1"))
    notes = memory.tables.handles.notes_table()
    assert notes is not None
    before = memory.tables.handles.view(notes).version
    at = datetime(2026, 3, 1, tzinfo=UTC)
    drafts = [Draft(text=f"Session note {i}: the user moved to team {i}", at=at + timedelta(days=i)) for i in range(5)]
    stored = memory.import_notes(drafts, actor="importer")
    assert memory.tables.handles.view(notes).version == before + 1
    assert [n.recorded_at for n in stored] == [d.at for d in drafts]
    assert {n.actor for n in stored} == {"importer"} and memory.stats()["notes"] == 6
    found = memory.recall("which team did the user move to?", as_of=at + timedelta(days=1, hours=1))
    assert {h.id for c in found.chains for h in c.heads} == {stored[0].id, stored[1].id}

    with pytest.raises(InvalidArgument) as refused:
        memory.import_notes([Draft(text="fine"), Draft(text="  ")])
    assert refused.value.field == "text" and memory.stats()["notes"] == 6


def test_import_stores_a_text_already_current_once_and_answers_with_the_note_that_holds_it(memory: Memory) -> None:
    """As `remember` would: a draft whose text a current note of the scope has (or an earlier draft of the
    same call) is not stored again; its place in the answer is that note, and `skipped` says which."""
    kept = memory.remember(Draft(text="The staging cluster runs in eu-west-1"), scope="ops").note
    gone = memory.remember(Draft(text="The build runs on Jenkins"), scope="ops").note
    memory.revoke(gone.id, reason="moved to CI")
    memory.remember(Draft(text="Deploys need two approvals"), scope="other")
    at = datetime(2026, 3, 1, tzinfo=UTC)
    texts = [
        "The staging cluster runs in eu-west-1",  # current in the scope: not stored again
        "The build runs on Jenkins",  # revoked: stored anew, as remember would
        "Deploys need two approvals",  # current in another scope only
        "The user moved to team 4",
        "The user moved to team 4",  # repeats the draft before it
    ]
    stored = memory.import_notes([Draft(text=t, at=at + timedelta(days=i)) for i, t in enumerate(texts)], scope="ops")
    assert [n.text for n in stored] == texts and len(stored) == 5
    assert stored[0].id == kept.id and stored[0].recorded_at == kept.recorded_at
    assert stored[1].id != gone.id and stored[4].id == stored[3].id
    assert stored.skipped == [0, 4] and stored.written == 3
    assert memory.stats()["notes"] == 3 + 3
    assert len(memory.list_notes(scope="ops").notes) == 2 + 3


class _WaitingEmbedder:
    """The real model, whose embedding of a note waits (10 s at most) for a read to begin: it says
    whether the write read while its note was being embedded."""

    def __init__(self, model: SentenceTransformerEmbedder) -> None:
        self.name = model.name
        self.model = model
        self.read = threading.Event()
        self.overlapped: list[bool] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.overlapped.append(self.read.wait(timeout=10))
        return self.model.embed(texts)

    def readable(self, text: str) -> bool:
        return self.model.readable(text)


def test_a_write_reads_while_its_note_is_embedded(db: str, embedder: SentenceTransformerEmbedder) -> None:
    waiting = _WaitingEmbedder(embedder)
    # a remember's full-text search for similar notes, a correct's read of the scope's graph: each tells the
    # embedder a read began, once the test names it
    searches, graph_reads = threading.Event(), threading.Event()

    class WatchedSearch(Search):
        def text_search(self, query: str, scope: str, at: datetime | None, limit: int) -> list[tables.Hit]:
            if searches.is_set():
                waiting.read.set()
            return super().text_search(query, scope, at, limit)

    class WatchedGraphs(graph.Graphs):
        def get_with_version(self, scope: str) -> tuple[graph.ScopeGraph, int]:
            if graph_reads.is_set():
                waiting.read.set()
            return super().get_with_version(scope)

    memory = Memory(db, waiting, parts=Parts(search=WatchedSearch, graphs=WatchedGraphs))
    waiting.read.set()
    port = memory.remember(Draft(text="The gateway listens on 8080"), scope="ops").note
    waiting.read.clear()
    waiting.overlapped.clear()

    searches.set()
    memory.remember(Draft(text="The gateway's health check is /healthz"), scope="ops")
    waiting.read.clear()
    graph_reads.set()
    fixed = memory.correct(port.id, Draft(text="The gateway listens on 9090"), reason="moved")

    assert waiting.overlapped == [True, True]
    stored = memory.tables.search.vectors([fixed.note.id])[fixed.note.id]  # the correction's own text, embedded
    assert np.allclose(stored, embedder.embed(["The gateway listens on 9090"])[0], atol=1e-6)
    assert memory.history(port.id).chain.heads[0].id == fixed.note.id


def test_token_estimate_is_fair_to_cjk() -> None:
    assert estimate_tokens("服务监听端口") == 6
    assert estimate_tokens("the service listens on 8080") == 7
    assert estimate_tokens("端口 8080") == 2 + 2


def test_compaction_merges_small_fragments_and_leaves_big_ones_alone(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(limits.FRAGMENT_ROWS, tables.NOTES, 64)
    memory.import_notes([Draft(text=f"Imported note {i} about the release train") for i in range(100)])
    memory.upkeep.compact()
    big = data_files(memory)
    for i in range(10):
        memory.remember(Draft(text=f"Single note {i} about the staging cluster"))
    assert memory.upkeep.compact()
    after = data_files(memory)
    assert big <= after  # the 100-row fragment was not rewritten
    assert memory.tables.compaction.fragments()["notes"] == 2  # the ten single rows are one fragment now
    assert memory.stats()["notes"] == 110


def data_files(memory: Memory) -> set[str]:
    table = memory.tables.handles.notes_table()
    assert table is not None
    dataset = table.to_lance()
    dataset.checkout_latest()
    return {file.path for fragment in dataset.get_fragments() for file in fragment.data_files()}


def test_every_column_a_filter_uses_is_indexed_and_searches_use_the_index(memory: Memory) -> None:
    memory.remember(Draft(text="The deploy key rotates monthly"), scope="ops")
    memory.upkeep.compact()  # rows written after an index are covered from the next compaction
    notes, events = memory.tables.handles.notes_table(), memory.tables.handles.events_table()
    assert notes is not None
    assert _index_types(notes) == {"id": "BTree", "scope": "Bitmap", "recorded_at_us": "BTree", "text": "FTS"}
    assert _index_types(events) == {"id": "BTree", "scope": "Bitmap", "src": "BTree", "dst": "BTree"}
    plan = notes.search([0.0] * 384, vector_column_name="vector").where(where.in_scope("ops"), prefilter=True)
    assert "ScalarIndexQuery: query=[scope = ops]@scope_idx" in plan.explain_plan(verbose=True)


def _index_types(table: Table) -> dict[str, str]:
    return {index.columns[0]: index.index_type for index in table.list_indices()}


def test_a_store_made_with_a_btree_on_scope_gets_the_bitmap_at_its_next_upkeep(memory: Memory) -> None:
    memory.import_notes([Draft(text=f"Host {i} runs the build") for i in range(5)], scope="ops")
    note_id = memory.remember(Draft(text="The deploy key rotates monthly"), scope="ops").note.id
    memory.upkeep.compact()
    assert not memory.upkeep.upkeep_due()
    notes, events = memory.tables.handles.notes_table(), memory.tables.handles.events_table()
    assert notes is not None
    for table in (notes, events):  # as a store made before the bitmap was chosen has them
        table.drop_index("scope_idx")
        table.create_index("scope", config=BTree())
    assert _index_types(notes)["scope"] == _index_types(events)["scope"] == "BTree"

    assert memory.upkeep.upkeep_due()
    assert memory.upkeep.compact()
    assert _index_types(notes)["scope"] == _index_types(events)["scope"] == "Bitmap"
    assert not memory.upkeep.upkeep_due()
    assert [c.heads[0].id for c in memory.recall("deploy key", scope="ops").chains][:1] == [note_id]
    memory.remember(Draft(text="Lunch is at noon"), scope="elsewhere")  # (an empty scope is an error to read)
    assert note_id not in {h.id for c in memory.recall("deploy key", scope="elsewhere").chains for h in c.heads}


def test_upkeep_builds_a_vector_index_and_a_small_scope_is_still_searched_exactly(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "VECTOR_INDEX_AT", 300)
    topics = ["the release train", "the staging cluster", "the billing export", "the VPN gateway", "the docs site"]
    memory.import_notes([Draft(text=f"Note {i}: {topics[i % 5]} runs on host {i}") for i in range(400)], scope="big")
    memory.import_notes([Draft(text=f"Small note {i} about {topics[i % 5]}") for i in range(20)], scope="small")
    assert memory.upkeep.upkeep_due()  # 420 rows, no vector index yet
    assert memory.upkeep.compact()
    notes = memory.tables.handles.notes_table()
    assert notes is not None
    assert [i.index_type for i in notes.list_indices() if i.columns == ["vector"]] == ["IvfSq"]
    assert not memory.upkeep.upkeep_due()

    vector = memory.embedder.embed(["which host runs the billing export?"])[0]
    approximate = memory.tables.search.vector_search(vector, "big", None, 20)
    by_vector = notes.search(vector, vector_column_name="vector")
    assert isinstance(by_vector, LanceVectorQueryBuilder)
    exact = (
        by_vector.distance_type("cosine")
        .where(where.scope_is("big"), prefilter=True)
        .bypass_vector_index()
        .limit(20)
        .to_arrow()
    )
    assert len({h.id for h in approximate} & set(exact["id"].to_pylist())) >= 19
    exact_similarity = {i: 1 - d for i, d in zip(exact["id"].to_pylist(), exact["_distance"].to_pylist(), strict=True)}
    # the index's own distances are 8-bit estimates of 2 - 2·cos, not 1 - cos (Lance re-scores them only
    # while some fragment is not indexed yet): a hit's similarity is exact all the same, from the stored
    # vectors read along, or on an object store (where they are not) the estimate on the cosine's scale
    by_vector = notes.search(vector, vector_column_name="vector")
    assert isinstance(by_vector, LanceVectorQueryBuilder)
    indexed = (
        by_vector.distance_type("cosine")
        .where(where.scope_is("big"), prefilter=True)
        .nprobes(limits.VECTOR_PROBES)
        .limit(20)
        .to_arrow()
    )
    estimates = dict(zip(indexed["id"].to_pylist(), indexed["_distance"].to_pylist(), strict=True))
    off = [
        (1 - d - exact_similarity[i], 1 - d / 2 - exact_similarity[i])
        for i, d in estimates.items()
        if i in exact_similarity
    ]
    assert max(abs(raw) for raw, _ in off) > 0.05 and max(abs(halved) for _, halved in off) < 0.02
    assert all(
        h.score == pytest.approx(exact_similarity[h.id], abs=1e-5) for h in approximate if h.id in exact_similarity
    )

    class AsOnABucket(Handles):  # the store's directory, read as a bucket is: what a bucket would do
        def __init__(self, uri: str, _: Location, indexes: Indexes, options: dict[str, str] | None = None) -> None:
            super().__init__(uri, Bucket(uri), indexes, options)

    def on_a_bucket() -> list[tables.Hit]:  # another connection to the store, at its latest version
        return Tables(memory.uri, parts=Parts(handles=AsOnABucket)).search.vector_search(vector, "big", None, 20)

    remote = on_a_bucket()
    assert all(h.vector is None for h in remote) and len({h.id for h in remote} & exact_similarity.keys()) >= 19
    assert all(h.score == pytest.approx(exact_similarity[h.id], abs=0.02) for h in remote if h.id in exact_similarity)
    assert any(abs(h.score - exact_similarity[h.id]) > 1e-6 for h in remote if h.id in exact_similarity)  # estimates
    memory.remember(Draft(text="The wiki runs on host 900"), scope="elsewhere")  # a fragment not indexed yet
    remote = on_a_bucket()  # re-scored by Lance: exact
    assert all(h.score == pytest.approx(exact_similarity[h.id], abs=1e-5) for h in remote if h.id in exact_similarity)
    candidates, _ = recall.find_candidates(
        memory.reader("big"), memory.embedder, "which host runs the billing export?", None,
        RetrievalSettings(per_retriever=20),
    )  # fmt: skip
    dense = sorted((c for c in candidates.values() if c.dense_rank is not None), key=lambda c: c.dense_rank or 0)
    assert len(dense) == 20 and len({c.note.id for c in dense} & exact_similarity.keys()) >= 19
    for cand in dense:
        if cand.note.id in exact_similarity:
            assert cand.similarity == pytest.approx(exact_similarity[cand.note.id], abs=1e-5)
    assert memory.tables.search.searched_exactly(notes, "small") and not memory.tables.search.searched_exactly(
        notes, "big"
    )
    small = memory.tables.search.vector_search(vector, "small", None, 20)
    assert {n.scope for n in memory.tables.search.notes(h.id for h in small).values()} == {"small"}


def test_a_scope_alone_in_its_store_never_finds_another_scopes_notes_written_since(
    memory: Memory, embedder: SentenceTransformerEmbedder
) -> None:
    """A scope that held every note when counted is searched without its filter (search.py): notes of
    another scope that another process writes since, and that match better, are never among its hits,
    and the scope's own best still are, for the searches, recall and a recall as of a past time."""
    ours = [
        memory.remember(Draft(text=text), scope="ops").note.id
        for text in ("The billing export runs nightly on host 3", "Backups of the billing database go to tape")
    ]
    query = "where does the billing export run"
    vector = embedder.embed([query])[0]
    assert {h.id for h in memory.tables.search.vector_search(vector, "ops", None, 20)} == set(ours)  # counted: alone
    before = datetime.now(UTC)

    other = Memory(memory.uri, embedder)  # another process: this one's count does not see its notes
    theirs = {
        other.remember(Draft(text=f"The billing export runs nightly on host {i}"), scope="finance").note.id
        for i in range(4, 30)
    }
    memory.tables.handles.refresh()

    for at in (None, before):
        dense = memory.tables.search.vector_search(vector, "ops", at, 20)
        words = memory.tables.search.text_search(query, "ops", at, 20)
        assert {h.id for h in dense} == set(ours) and {h.id for h in words} <= set(ours)
        assert ours[0] in {h.id for h in words}
    found = {h.id for c in memory.recall(query, scope="ops").chains for h in c.heads}
    assert found == set(ours) and not found & theirs
    assert {h.id for c in memory.recall(query, scope="finance").chains for h in c.heads} <= theirs


def test_the_vector_index_keeps_about_root_rows_partitions_in_one_segment_as_the_table_grows(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "VECTOR_INDEX_AT", 100)
    topics = ["the release train", "the staging cluster", "the billing export", "the VPN gateway", "the docs site"]

    def grow(start: int, count: int) -> tuple[int, int]:
        drafts = [Draft(text=f"Note {i}: host {i} serves {topics[i % 5]}") for i in range(start, start + count)]
        memory.import_notes(drafts, scope="s")
        assert memory.upkeep.compact()
        notes = memory.tables.handles.notes_table()
        assert notes is not None
        shape = memory.tables.indexes.vector_index_shape(notes)
        assert shape is not None
        return shape

    shapes = [grow(0, 100)]
    assert 8 <= shapes[0][0] <= 12 and shapes[0][1] == 1  # about √100 (Lance's own default would make 1)
    for step in range(6):  # each compaction indexes its new rows as a segment of their own, then merged
        shapes.append(grow(100 + 20 * step, 20))
    assert all(segments == 1 for _, segments in shapes) and min(partitions for partitions, _ in shapes) >= 8
    grown, segments = grow(220, 200)  # 420 rows: four times what it was trained on; trained again, or split
    # by Lance past its partition size: about √420 (20), within three times: Lance's k-means samples at
    # random and splits partitions past its size, and a CI run got 43 partitions (the failure this
    # guards against is Lance's own shape, a handful of partitions for the whole table, or one a row)
    assert 16 <= grown <= 61 and segments == 1
    vector = memory.embedder.embed(["which host serves the billing export?"])[0]
    found = memory.tables.search.vector_search(vector, "s", None, 20)
    assert len(found) == 20 and {n.scope for n in memory.tables.search.notes(h.id for h in found).values()} == {"s"}


TIMES = st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC))
TEXTS = st.text(max_size=20)


@given(
    note=st.builds(
        Note, id=TEXTS, text=TEXTS, scope=TEXTS, kind=TEXTS, subject=st.none() | TEXTS, tags=st.lists(TEXTS),
        source=st.none() | TEXTS, actor=st.none() | TEXTS, confidence=st.floats(0, 1), recorded_at=TIMES,
        valid_from=st.none() | TIMES, valid_until=st.none() | TIMES,
    ),
    event=st.builds(
        Event, id=TEXTS, kind=st.sampled_from(EventKind), src=st.none() | TEXTS, dst=TEXTS, scope=TEXTS,
        reason=st.none() | TEXTS, actor=st.none() | TEXTS, confidence=st.floats(0, 1), recorded_at=TIMES,
    ),
)  # fmt: skip
def test_a_note_and_an_event_read_back_from_their_rows_as_written(note: Note, event: Event) -> None:
    note_row = layout.row_of(note, layout.NOTE_STORED) | {"dense_ok": True, "vector": [0.0, 1.0]}
    event_row = layout.row_of(event, layout.EVENT_STORED)
    for row, schema in ((note_row, layout.note_schema("model", 2)), (event_row, layout.EVENT_SCHEMA)):
        assert pa.Table.from_pylist([row], schema=schema).to_pylist() == [row]  # every value fits its column
    assert layout.note_from_row(note_row) == note and layout.event_from_row(event_row) == event


def test_warming_calls_back_once_the_model_is_loaded_and_even_when_warming_failed(
    db: str, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    unopenable = threading.Event()

    class Unopenable(Handles):
        def check_model(self, model: str, dimension: int | None = None) -> None:
            if unopenable.is_set():
                raise RuntimeError("the store could not be opened")
            super().check_model(model, dimension)

    memory = Memory(db, embedder, parts=Parts(handles=Unopenable))
    steps: list[str] = []
    embed = memory.embedder.embed

    def embedding(texts: Sequence[str]) -> list[list[float]]:
        steps.append("embed")
        return embed(texts)

    monkeypatch.setattr(memory.embedder, "embed", embedding)
    memory.warm(then=lambda: steps.append("then")).join(timeout=120)
    assert steps == ["embed", "then"]  # the server freezes what it holds here (server/app.py)

    steps.clear()
    unopenable.set()
    memory.warm(then=lambda: steps.append("then")).join(timeout=120)
    assert steps == ["then"]


def reads_counted(scans: list[str], by_id: list[str]) -> Parts:
    """Parts whose search names in `scans` each scope it scans whole (for a graph to keep: graph.py) and in
    `by_id` each note it reads by id."""

    class CountedReads(Search):
        def scope_rows(self, scope: str, leave_out: Collection[str] = ()) -> ScopeRows | None:
            scans.append(scope)
            return super().scope_rows(scope, leave_out)

        def notes_with_vectors(
            self, ids: Iterable[str], vectors: bool = True
        ) -> tuple[dict[str, Note], dict[str, np.ndarray]]:
            ids = list(ids)
            by_id.extend(ids)
            return super().notes_with_vectors(ids, vectors)

    return Parts(search=CountedReads)


def test_scans_kept_stay_within_rows_kept_and_a_scope_too_big_is_read_by_id(
    db: str, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph, "ROWS_KEPT", 4)
    scans: list[str] = []
    by_id: list[str] = []
    memory = Memory(db, embedder, parts=reads_counted(scans, by_id))
    small = {
        s: memory.import_notes([Draft(text=f"{s} host {i} runs the build") for i in range(3)], scope=s) for s in "ab"
    }
    big = memory.import_notes([Draft(text=f"Big host {i} runs the build") for i in range(5)], scope="big")
    scans.clear()  # counted from here
    by_id.clear()

    def recall_without_kept_notes(scope: str) -> set[str]:
        memory.graphs.notes.clear()  # so every note comes from a scan, or by id
        return {h.id for c in memory.recall("which host runs the build?", scope=scope).chains for h in c.heads}

    assert recall_without_kept_notes("a") == {n.id for n in small["a"]} and scans == ["a"] and by_id == []
    assert recall_without_kept_notes("a") == {n.id for n in small["a"]} and scans == ["a"]  # kept
    assert recall_without_kept_notes("b") == {n.id for n in small["b"]} and scans == ["a", "b"]
    recall_without_kept_notes("a")  # 3 + 3 > 4: a's scan was let go for b's
    assert scans == ["a", "b", "a"] and by_id == []
    # 5 > 4: scanned once, then read by id (and kept)
    assert recall_without_kept_notes("big") == {n.id for n in big} and scans[-1] == "big" and by_id == []
    assert recall_without_kept_notes("big") == {n.id for n in big} and scans.count("big") == 1
    assert sorted(by_id) == sorted(n.id for n in big)


def test_an_import_lets_a_kept_scan_go_so_its_notes_are_not_read_around_by_id(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """graph.py `scope_grew`: after a bulk import the scope is scanned again whole, rather than every later
    recall reading the imported notes by id around a scan kept from before (issue 51's speed gap)."""
    scans: list[str] = []
    by_id: list[str] = []
    memory = Memory(db, embedder, parts=reads_counted(scans, by_id))
    first = memory.import_notes([Draft(text=f"Host {i} runs the build") for i in range(3)])
    scans.clear()  # counted from here
    by_id.clear()

    def recalled() -> set[str]:
        memory.graphs.notes.clear()  # so every note comes from a scan, or by id
        return {h.id for c in memory.recall("which host runs the build?", scope="default").chains for h in c.heads}

    assert recalled() == {n.id for n in first} and scans == ["default"]
    second = memory.import_notes([Draft(text=f"Runner {i} runs the build") for i in range(3)])
    assert recalled() >= {n.id for n in second}
    assert scans == ["default", "default"] and by_id == []  # scanned again, none read by id


def test_another_process_s_writes_are_read_as_what_they_appended_and_a_compaction_adds_nothing_to_read(
    db: str, embedder: SentenceTransformerEmbedder
) -> None:
    """graph.py: a graph behind the events table reads only what the versions since appended to its
    scope; a compaction and its index upkeep add nothing to read; a forget has the scope read whole."""
    whole: list[str] = []  # the scopes whose events the reader's graphs read whole
    since: list[list[str] | None] = []  # the events each catch-up read (None: it could not tell)

    class CountedEvents(EventReads):
        def scope_events(self, scope: str) -> tuple[int, list[Event]]:
            whole.append(scope)
            return super().scope_events(scope)

        def events_since(self, version: int, scope: str) -> tuple[int, list[Event]] | None:
            found = super().events_since(version, scope)
            since.append(None if found is None else [e.id for e in found[1]])
            return found

    reader = Memory(db, embedder, parts=Parts(events=CountedEvents))
    writer = Memory(db, embedder)  # as two server processes
    old = writer.remember(Draft(text="The deploy window is Tuesday 10:00")).note
    other = writer.remember(Draft(text="Builds run on the arm64 pool")).note
    writer.link(other.id, old.id, "depends_on")
    assert reader.recall("when is the deploy window?").chains[0].heads[0].id == old.id
    whole.clear()  # counted from here
    since.clear()

    corrected = writer.correct(old.id, Draft(text="The deploy window is Thursday 14:00"), reason="moved")
    first = reader.recall("when is the deploy window?").chains[0]
    assert [h.id for h in first.heads] == [corrected.note.id] and [e.note.id for e in first.history] == [old.id]
    assert since == [[corrected.event.id]] and whole == []

    assert writer.upkeep.compact()
    assert writer.tables.compaction.fragments()["events"] == 1
    assert reader.history(corrected.note.id).chain.heads[0].id == corrected.note.id
    assert since[1:] == [[]] and whole == []  # the graph moved to the compacted version as it was

    writer.forget(other.id, reason="erase")
    assert other.id not in {h.id for c in reader.recall("which pool do builds run on?").chains for h in c.heads}
    assert since[-1] is None and whole == ["default"]  # a forget deletes: the scope is read again


@pytest.mark.parametrize(
    ("said", "outage"),
    [
        ("Error performing GET http://127.0.0.1:9/b after 3 retries: 500 Internal Server Error: "
         "<Error><Code>InternalError</Code><Message>We encountered an internal error</Message></Error>", True),
        ("<Error><Code>SlowDown</Code><Message>Reduce your request rate</Message></Error>", True),
        ("error sending request for url (http://127.0.0.1:9/b): tcp connect error", True),
        ("<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>", False),
        ("Retryable commit conflict for version 7", False),
    ],
)  # fmt: skip
def test_a_bucket_that_answers_only_with_its_own_failure_is_an_outage_a_disk_never_is(said: str, outage: bool) -> None:
    """A gateway whose back end is gone (SeaweedFS without its filer) answers every request 500: the call
    then fails saying what the store answered (StoreUnavailable), not "failed inside the store"."""
    assert Location.of("s3://bucket/store").unreachable(OSError(said)) is outage
    assert Location.of("/var/lib/corrigenda").unreachable(OSError(said)) is False


def test_a_store_removed_while_open_is_opened_anew_as_a_new_process_would_find_it(memory: Memory) -> None:
    """Someone deletes the store's directory to start over while a process (a shared engine) has it open:
    the next write makes a new store, instead of every call failing on tables that are gone."""
    old = memory.remember(Draft(text="The staging database runs on port 5433")).note
    memory.recall("which port does the staging database use?")  # the tables and the scope's graph kept
    shutil.rmtree(memory.uri)
    new = memory.remember(Draft(text="The staging database runs on port 6543")).note
    heads = [h.id for c in memory.recall("which port does the staging database use?").chains for h in c.heads]
    assert heads == [new.id]
    with pytest.raises(NotFound):
        memory.history(old.id)
    assert Memory(memory.uri, memory.embedder).stats()["notes"] == 1  # what another process finds
