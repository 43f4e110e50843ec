"""A store in a bucket, against a real distributed object store, and several processes making a new
store at the same moment, in a directory and in a bucket.

Which store each test uses, and why:
- **SeaweedFS** (the `s3` fixture: bench/seaweed.py, one cluster for the whole session on loopback:
  a master, three volume servers keeping two copies of each object, a filer and the S3 gateway; each
  test writes under a prefix of its own): every test that needs no fault made on purpose. Its
  sockets all on loopback, a store in a bucket through storage options or the AWS variables alone,
  forget's erasure, compaction, the CLI, refused credentials and a missing bucket, servers making a
  new store at once, and three HTTP servers writing at once (the gateway's metrics count the
  commits it refused).
- **A SeaweedFS cluster of the test's own**: the gateway stopped and started again under a server
  (`stop_gateway`), so that no other test meets it half-way. The faults of a cluster under three
  writing servers (a volume server killed, the gateway or the filer stopped) are in
  tests/store/test_seaweed_faults.py.
- **moto** (the `moto` fixture, or a server of the test's own: bench/local_s3.py, moto's S3 server
  behind a gate) where a fault must be made that a real store does not make on demand: the negative
  control (`honour_conditional_writes=False` and `commit_delay`: a store that drops conditional
  writes), lost commit races made certain (`refuse_next`), and the request-by-request record of a
  write (the gate sees each request's path; SeaweedFS's metrics count requests by type only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from corrigenda.server.app import build_memory
from corrigenda.server.config import Settings
from corrigenda.store import StoreBusy
from corrigenda.store.ids import new_note_id
from corrigenda.store.model import Note
from corrigenda.store.storage import indexes, lease, limits
from corrigenda.store.storage import schema as layout
from corrigenda.store.storage.handles import Handles
from corrigenda.store.storage.lease import Lease
from corrigenda.store.storage.limits import SCALAR_INDEXES
from corrigenda.store.tables import Parts, Tables
from filelock import Timeout
from mcp import Client
from pydantic import ValidationError

from bench.faults import PhaseResult, bucket_files, servers_phase
from bench.local_s3 import KEY_ID, LocalS3
from bench.seaweed import SeaweedCluster

from ..conftest import call, call_error
from ..server.test_processes import CORRIGENDA, ENV, _free_port, serve_http

BUCKET = "corrigenda-test"
WRITERS = 4

# One writer: loads the model and opens the store, says "ready", waits for "go" on stdin so that
# every writer makes its first write at the same moment, then prints the id of the note it stored.
FIRST_WRITE = """
import sys
from corrigenda.server.app import build_memory
from corrigenda.server.config import Settings
from corrigenda.store import Draft

memory = build_memory(Settings())
memory.embedder.embed(["warm up"])
memory.tables.handles.db
print("ready", flush=True)
sys.stdin.readline()
print(memory.remember(Draft(text=sys.argv[1]), "shared").note.id, flush=True)
"""


Bucket = LocalS3 | SeaweedCluster  # either serves an S3 API on loopback and names its AWS variables (env)


def _options(s3: Bucket) -> dict[str, str]:
    """The AWS variables as storage options."""
    return {k.lower(): v for k, v in s3.env.items()}


@contextmanager
def _local_s3(bucket: str, **gate: Any) -> Iterator[LocalS3]:
    server = LocalS3(_free_port(), [bucket], **gate).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3() -> Iterator[SeaweedCluster]:
    """A SeaweedFS cluster on loopback (bench/seaweed.py) with one empty bucket, for the whole session;
    its gateway takes only its own key."""
    with SeaweedCluster([BUCKET]) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def moto() -> Iterator[LocalS3]:
    """moto's S3 server on a free loopback port, with one empty bucket, that takes only its own key and
    makes each conditional write atomic (bench/local_s3.py): for the faults only it can make."""
    with _local_s3(BUCKET, access_key=KEY_ID) as server:
        yield server


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CORRIGENDA, *args], capture_output=True, text=True, timeout=120, env={**ENV, **env}, cwd=tempfile.gettempdir()
    )


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to list listening sockets")
def test_the_cluster_listens_on_loopback_only(s3: SeaweedCluster) -> None:
    """Every component's sockets, gRPC's too (which listen on every interface unless told not to)."""
    listening = s3.listening()
    assert {line.split()[0] for line in listening} == set(s3.components)
    assert len(listening) == 2 * len(s3.components) + 1  # HTTP and gRPC each, and the gateway's metrics
    assert all(line.split()[1].startswith("127.0.0.1:") for line in listening), listening


def test_storage_options_come_from_one_variable_of_key_value_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRIGENDA_STORAGE_OPTIONS", " AWS_Endpoint=http://127.0.0.1:9000, allow_http=true ,")
    assert Settings(db="s3://b/p").storage_options == {"aws_endpoint": "http://127.0.0.1:9000", "allow_http": "true"}
    monkeypatch.setenv("CORRIGENDA_STORAGE_OPTIONS", "aws_region=us-east-1,aws_secret_access_key")
    with pytest.raises(ValidationError, match="'aws_secret_access_key' is not key=value"):
        Settings(db="s3://b/p")


def test_a_store_in_a_bucket_keeps_notes_through_storage_options(s3: SeaweedCluster, embedder: object) -> None:
    settings = Settings(db=f"s3://{BUCKET}/options", storage_options=_options(s3))
    memory = build_memory(settings)
    memory.embedder = embedder  # type: ignore[assignment]
    from corrigenda.store import Draft

    note = memory.remember(Draft(text="The bucket store keeps this note"), "default").note
    again = Tables(settings.db, _options(s3))  # another connection reads it back from the bucket
    assert again.search.notes([note.id])[note.id].text == "The bucket store keeps this note"
    assert not Path(settings.db).exists()  # nothing was written to a local directory of that name


def test_a_forget_on_a_bucket_answers_at_its_tombstone_and_its_thread_erases_every_object(
    s3: SeaweedCluster, embedder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corrigenda.store import Draft, NotFound

    for name, value in s3.env.items():  # bucket_files reads the bucket with them
        monkeypatch.setenv(name, value)
    settings = Settings(db=f"s3://{BUCKET}/forget", storage_options=_options(s3))
    memory = build_memory(settings)
    memory.embedder = embedder  # type: ignore[assignment]
    secret = memory.remember(Draft(text="The courier's passphrase is lapwing-5520"), "default").note
    done = memory.forget(secret.id, reason="the user asked")
    assert done.changed and done.erasure == "pending"
    with pytest.raises(NotFound):  # gone for a reader at once
        build_memory(settings).history(secret.id)
    assert memory.finish_upkeep(120)
    assert not [path for path, data in bucket_files(settings.db) if b"lapwing" in data]
    assert memory.forget(secret.id, reason="asked again").erasure == "done"


def test_compaction_on_a_bucket_keeps_the_newest_few_versions_and_every_note(
    s3: SeaweedCluster, embedder: object
) -> None:
    """Each operation lists a table's versions to find the latest: on a bucket compaction keeps only
    the newest KEEP_VERSIONS_REMOTE, so that listing stays short."""
    import lance
    from corrigenda.store import Draft

    settings = Settings(db=f"s3://{BUCKET}/versions", storage_options=_options(s3))
    memory = build_memory(settings)
    memory.embedder = embedder  # type: ignore[assignment]
    ids = [
        memory.remember(Draft(text=f"Build machine {i} runs the nightly job {i}"), "default").note.id for i in range(8)
    ]
    notes = lance.dataset(f"{settings.db}/notes.lance", storage_options=_options(s3))
    assert len(notes.versions()) > limits.KEEP_VERSIONS_REMOTE  # a version a write, at least
    assert memory.upkeep.compact()
    kept = lance.dataset(f"{settings.db}/notes.lance", storage_options=_options(s3)).versions()
    assert len(kept) == limits.KEEP_VERSIONS_REMOTE
    assert set(build_memory(settings).tables.search.notes(ids)) == set(ids)  # another server reads every note


def test_the_cli_reads_a_bucket_store_configured_by_storage_options(s3: SeaweedCluster) -> None:
    options = ",".join(f"{k}={v}" for k, v in _options(s3).items())
    out = _cli("stats", "--db", f"s3://{BUCKET}/cli", env={"CORRIGENDA_STORAGE_OPTIONS": options})
    assert out.returncode == 0, out.stderr
    assert "notes: 0" in out.stdout


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("missing bucket", "NoSuchBucket: The specified bucket does not exist"),
        ("closed port", "the endpoint could not be reached"),
    ],
)
def test_an_unreachable_bucket_fails_the_cli_in_one_line_naming_what_to_set(
    s3: SeaweedCluster, where: str, said: str
) -> None:
    env = s3.env if where == "missing bucket" else {**s3.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}
    db = "s3://no-such-bucket/x" if where == "missing bucket" else f"s3://{BUCKET}/x"
    out = _cli("stats", "--db", db, env=env)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"corrigenda: stats: db: cannot open {db} ({said})")
    assert "AWS_ACCESS_KEY_ID" in out.stderr and "CORRIGENDA_STORAGE_OPTIONS" in out.stderr


def _first_writes_at_once(db: str, env: dict[str, str]) -> list[str]:
    """WRITERS processes, each making its first write to a brand-new store at the same moment."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_WRITE, f"writer {i} was here first"],
            env={**ENV, **env, "CORRIGENDA_DB": db},
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(WRITERS)
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline() == "ready\n", writer.communicate()[1][-3000:]
        for writer in writers:
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        results = [writer.communicate(timeout=300) for writer in writers]
    finally:
        for writer in writers:
            writer.kill() if writer.poll() is None else None
    for writer, (_, err) in zip(writers, results, strict=True):
        assert writer.returncode == 0, err[-3000:]
    return [out.strip() for out, _ in results]


def _assert_each_note_once(tables: Tables, acknowledged: list[str]) -> None:
    notes = tables.handles.notes_table()
    assert notes is not None
    stored = Counter(notes.to_arrow()["id"].to_pylist())
    assert len(set(acknowledged)) == WRITERS and stored == Counter(acknowledged), (acknowledged, stored)
    indexed = {tuple(index.columns) for index in notes.list_indices()}
    assert indexed >= {(column,) for column in (*SCALAR_INDEXES["notes"], "text")}, indexed
    events = tables.handles.events_table()
    assert {tuple(index.columns) for index in events.list_indices()} >= {(c,) for c in SCALAR_INDEXES["events"]}


def test_a_write_that_a_late_second_creation_of_the_table_overwrote_is_written_again(db: str) -> None:
    """What the race above can do at its worst, made certain: another process's creation of the
    table lands as an overwrite just after this process's first append to it."""
    import lancedb

    other = lancedb.connect(db)
    overwrites: list[int] = []

    class ThenOverwritten(Handles):
        def append_rows(self, table: Any, rows: Any) -> int:
            version = super().append_rows(table, rows)
            if table.name == "notes" and not overwrites:
                overwrites.append(other.create_table("notes", schema=table.schema, mode="overwrite").version)
            return version

    tables = Tables(db, parts=Parts(handles=ThenOverwritten))
    note = Note(id=new_note_id(), text="written once, overwritten, written again", scope="default", kind="fact",
                recorded_at=datetime.now(UTC))  # fmt: skip
    tables.add_notes([(note, [0.1] * 8, True)], "a-model")
    assert overwrites, "the overwrite did not happen"
    notes = Tables(db).handles.notes_table()  # opened afresh: what every reader finds
    assert notes is not None and notes.to_arrow()["id"].to_pylist() == [note.id]


class Requests:
    """WSGI middleware in front of the local S3 API's moto: each request while `on`, named by what it
    does to which table: "PUT notes data", "LIST notes", "GET events _versions", ..."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.on = False
        self.seen: list[str] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if self.on:
            method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
            if "list-type" in environ.get("QUERY_STRING", ""):
                prefix = urllib.parse.parse_qs(environ["QUERY_STRING"]).get("prefix", [""])[0]
                method, path = "LIST", prefix
            table, _, rest = path.partition(".lance/")
            self.seen.append(f"{method} {table.rsplit('/', 1)[-1]} {rest.split('/')[0]}".strip())
        return self.app(environ, start_response)


def test_a_write_on_a_bucket_is_its_commit_and_no_more_and_a_moved_table_is_read_once(
    moto: LocalS3, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write goes through the table's view: the data, a listing, the transaction and the manifest,
    with no look at the latest version before and no read of the new manifest after (docs/object-storage.md,
    *Measured*). The refresh reads the latest version of a table another server moved from its
    listing, without asking for the manifest's size first (a HEAD)."""
    from corrigenda.store import Draft, Memory

    monkeypatch.setattr(limits, "YOUNG_TABLE_VERSIONS", 0)  # past the young table's check
    db = f"s3://{BUCKET}/requests"
    mine, theirs = (
        Memory(db, embedder, storage_options=_options(moto)),
        Memory(db, embedder, storage_options=_options(moto)),
    )
    mine.remember(Draft(text="The staging cluster lives in eu-west-1"))
    mine.remember(Draft(text="The on-call rotation changes on Mondays"))  # its first search looks for a vector index
    theirs.remember(Draft(text="The release train leaves on Tuesdays"))  # another server moves the table
    requests = Requests(moto.gate.app)
    monkeypatch.setattr(moto.gate, "app", requests)
    requests.on = True
    note = mine.remember(Draft(text="The freeze starts on the 14th")).note
    seen, requests.seen = requests.seen, []
    assert mine.tables.search.notes([note.id])[note.id].text == "The freeze starts on the 14th"  # no catch-up needed
    read_back, requests.on = requests.seen, False
    assert theirs.history(note.id).note.text == "The freeze starts on the 14th"

    assert not [r for r in seen if r.startswith("HEAD") and r.endswith("_versions")], seen
    assert seen.count("GET notes _versions") == 1, seen  # the table the other server moved; events did not move
    assert "GET events _versions" not in seen, seen
    commit = seen[seen.index("PUT notes data") :]
    assert commit == ["PUT notes data", "LIST notes _versions", "PUT notes _transactions", "PUT notes _versions"], seen
    assert not [r for r in read_back if r.endswith("_versions")], read_back


def test_a_write_that_loses_its_commit_race_is_committed_again_at_once_and_fails_clearly_past_its_attempts(
    moto: LocalS3, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bucket refuses a commit's manifest as it does when another server took the version first:
    the store tries again itself, after a wait of a few milliseconds (Lance's own retry waits whole
    attempts), and the note is stored once. Refused every time, the write fails and stores nothing."""
    from corrigenda.store import Draft, Memory

    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)  # the module retry.py sleeps with
    memory = Memory(f"s3://{BUCKET}/races", embedder, storage_options=_options(moto))
    memory.remember(Draft(text="The store and its tables are made"))
    waits.clear()
    refused, conditional = moto.gate.refused_writes, moto.gate.conditional_writes
    moto.gate.refuse_next = 2
    note = memory.remember(Draft(text="The deploy window opens at 09:00")).note
    assert moto.gate.refused_writes - refused == 2
    assert moto.gate.conditional_writes - conditional == 3  # two refused, the third landed
    assert len(waits) == 2 and all(0 <= w <= 2 * limits.COMMIT_BACKOFF for w in waits), waits
    stored = Tables(f"s3://{BUCKET}/races", storage_options=_options(moto)).handles.notes_table()
    assert stored is not None and stored.to_arrow()["id"].to_pylist().count(note.id) == 1

    monkeypatch.setattr(limits, "COMMIT_ATTEMPTS", 3)
    moto.gate.refuse_next = 3
    with pytest.raises(StoreBusy, match="committed to the notes table first, 3 times in a row"):
        memory.remember(Draft(text="The deploy window closes at 17:00"))
    assert moto.gate.refuse_next == 0
    heads = [c.heads[0].text for c in memory.recall("deploy window").chains]
    assert "The deploy window opens at 09:00" in heads and "The deploy window closes at 17:00" not in heads


def _locks_taken(taken: list[float]) -> Parts:
    """Parts whose handles name in `taken` the wait of every take of the lock of upkeep (`Handles.upkeep_lock`)."""

    class Recorded(Handles):
        def upkeep_lock(self, wait: float) -> Any:
            taken.append(wait)
            return super().upkeep_lock(wait)

    return Parts(handles=Recorded)


def test_a_new_store_gets_both_tables_and_every_index_in_one_hold_of_the_lock(db: str) -> None:
    """The first write makes the events and notes tables and their indexes while it holds the lock
    of upkeep, so servers starting together wait for one another instead of racing to index."""
    taken: list[float] = []
    tables = Tables(db, parts=_locks_taken(taken))
    note = Note(id=new_note_id(), text="the first note of a new store", scope="default", kind="fact",
                recorded_at=datetime.now(UTC))  # fmt: skip
    tables.add_notes([(note, [0.1] * 8, True)], "a-model")
    assert taken == [limits.CREATE_WAIT]
    opened = Tables(db, parts=_locks_taken(taken))
    for name, table in ((layout.NOTES, opened.handles.notes_table()), (layout.EVENTS, opened.handles.events_table())):
        assert table is not None and indexes.indexed_columns(table) == set(indexes.wanted_indexes(name))
    assert taken == [limits.CREATE_WAIT]  # all there: opening them took no lock


def test_a_table_found_without_its_indexes_gets_them_under_the_lock(db: str) -> None:
    """Another process made the table and has not indexed it yet (or crashed first): the indexes are
    made under the lock, where that process makes them, not beside it."""
    import lancedb

    lancedb.connect(db).create_table(layout.EVENTS, schema=layout.EVENT_SCHEMA)
    taken: list[float] = []
    events = Tables(db, parts=_locks_taken(taken)).handles.events_table()
    assert taken == [limits.CREATE_WAIT]
    assert indexes.indexed_columns(events) == set(indexes.wanted_indexes(layout.EVENTS))


def test_servers_making_a_new_store_at_once_in_a_directory_all_write_once(db: str) -> None:
    acknowledged = _first_writes_at_once(db, {})
    _assert_each_note_once(Tables(db), acknowledged)


def test_servers_making_a_new_store_at_once_in_a_bucket_all_write_once(s3: SeaweedCluster) -> None:
    db = f"s3://{BUCKET}/race"
    acknowledged = _first_writes_at_once(db, s3.env)  # the AWS_* variables alone: no storage options
    _assert_each_note_once(Tables(db, _options(s3)), acknowledged)


def test_the_bucket_is_read_from_the_aws_variables_alone(s3: SeaweedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    assert os.environ["AWS_ENDPOINT_URL"] == s3.endpoint
    assert Tables(f"s3://{BUCKET}/env-only").search.count() == {"notes": 0, "events": 0}


def test_refused_credentials_fail_the_cli_and_an_http_server_at_start_naming_what_to_set(s3: SeaweedCluster) -> None:
    wrong = {**s3.env, "AWS_ACCESS_KEY_ID": "not-the-key"}
    said = "(InvalidAccessKeyId: The access key ID you provided does not exist in our records.)"  # SeaweedFS's words
    for command in (["stats"], ["serve", "--transport", "http", "--port", str(_free_port())]):
        out = _cli(*command, "--db", f"s3://{BUCKET}/refused", env=wrong)
        assert out.returncode == 2, out.stderr
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
        assert said in out.stderr and "AWS_ACCESS_KEY_ID" in out.stderr, out.stderr


# -- several servers on one bucket -----------------------------------------------------------------

SERVER_WRITES = 12  # per server: remember, correct, revoke, reinstate, link and forget, chosen at random


def _three_servers(
    s3: Bucket, db: str, tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch, **server_env: str
) -> PhaseResult:
    """bench/faults.py's servers part, short: three `corrigenda serve --transport http` processes on one
    store, each written to by its own client at once, on notes the others wrote too (a server forgets
    only notes it wrote, so no other meets a note gone under it). After each write that stored a note
    another server reads it at its next call. Then, from a fresh connection: every acknowledged note
    and event there exactly once (but what an acknowledged forget erased), every chain with a head,
    history agreeing with the fold, and no byte of a forgotten note's text or vector in any object.
    `server_env`: more variables for the servers."""
    for name, value in s3.env.items():  # the checks read the bucket from this process
        monkeypatch.setenv(name, value)
    env = {**s3.env, **server_env}
    return servers_phase(tmp_path, 3, SERVER_WRITES, seed=0, db=db, transport="http", env=env, embedder=embedder)


def test_three_http_servers_on_one_bucket_lose_nothing(
    s3: SeaweedCluster, tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused_before = s3.requests()["PUT", "412"]
    result = _three_servers(s3, f"s3://{BUCKET}/three", tmp_path, embedder, monkeypatch)
    problems = result.summary()["problems"]
    assert result.clean() and not result.failed and not result.extra["client_closing_errors"], (
        problems,
        result.extra["client_closing_errors"],
    )
    ops = result.acknowledged_by_op
    assert set(ops) >= {"remember", "correct", "revoke", "link", "forget"}, ops
    assert result.acknowledged + result.refused == 3 * SERVER_WRITES
    # every note a write stored was read by another server at its next call (a miss is a problem above)
    assert result.extra["seen_by_another_server"] == ops["remember"] + ops["correct"]
    # the commits really raced: the bucket refused the second of two at once (412), and the store tried again
    assert s3.requests()["PUT", "412"] > refused_before


def test_the_negative_control_three_servers_lose_writes_on_a_bucket_that_ignores_conditional_writes(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above could catch a lost write: the same run, on a bucket that drops If-None-Match (as
    a store without conditional writes would), damages the store, and its checks say so. Mostly the
    damage is acknowledged writes lost; in one CI run (2026-12-02) it was a duplicated row and reads
    failing on an index file an overwritten commit had dropped, with nothing counted as lost (the
    failing reads hid it): the test above fails on either, so either proves it."""
    # commits held 1 s (local_s3.py; 0.3 s before), so that more commits overlap and an overwrite can
    # land after the writer's read-back of its rows
    # A server refuses such a store at start (store/storage/conditional_writes.py). Told that it writes
    # alone (--single-writer) it warns and runs: three started so, wrongly, lose each other's commits.
    with _local_s3("corrigenda-lossy", honour_conditional_writes=False, commit_delay=1.0) as lossy:
        result = _three_servers(
            lossy, "s3://corrigenda-lossy/three", tmp_path, embedder, monkeypatch, CORRIGENDA_SINGLE_WRITER="1"
        )
    assert lossy.gate.conditional_writes == 0  # nothing was guarded
    assert not result.clean(), f"nothing damaged on a bucket without conditional writes: {result.summary()}"
    assert result.lost or result.raw_duplicates or result.corrupt


@pytest.mark.anyio
async def test_a_bucket_that_stops_answering_fails_the_call_clearly_and_the_next_call_works_once_it_is_back() -> None:
    """The S3 gateway of a cluster of the test's own stopped and started again under a server."""
    with SeaweedCluster(["corrigenda-outage"]) as s3:
        for running in serve_http("s3://corrigenda-outage/store", env=s3.env):
            async with Client(running.url) as client:
                before = (await call(client, "remember", text="Written before the outage"))["note"]
                s3.stop_gateway()
                error = await call_error(client, "remember", text="Written while the bucket is down")
                assert "is not answering (the endpoint could not be reached)" in error, error
                assert "nothing acknowledged before is lost" in error and "Traceback" not in error
                assert "\n" not in error, error
                s3.start_gateway()  # the same port, the same objects
                after = (await call(client, "remember", text="Written once the bucket is back"))["note"]
                recalled = await call(client, "recall_chains", query="written before the outage")
                assert recalled["chains"][0]["heads"][0]["id"] == before["id"]
                assert (await call(client, "history", note_id=after["id"]))["note"]["text"].endswith("is back")


def test_the_upkeep_lease_is_held_by_one_process_at_a_time_and_a_stale_one_is_taken_over(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes' leases on one store (the lease is a Lance table, so a directory shows it as well
    as a bucket; lease.py)."""
    first, second = Lease(Tables(db).handles.open_or_create), Lease(Tables(db).handles.open_or_create)
    with first.held(wait=0), pytest.raises(Timeout), second.held(wait=0.5):
        raise AssertionError("two holders at once")
    with second.held(wait=0):  # given back: the other takes it at once
        monkeypatch.setattr(lease, "LEASE_FOR", timedelta(0))  # a holder that died: stale at once
        with first.held(wait=0):
            holders = Tables(db).handles.open_or_create(lease.LEASE, lease.SCHEMA).to_arrow()["holder"].to_pylist()
            assert set(holders) == {first.holder}


def test_the_lease_is_taken_when_another_process_made_its_table_again_under_it(db: str) -> None:
    """A second creation of the lease table by another process, at a new store's first moment, is an
    overwrite (CI once failed here: the first process's seeding append was refused as incompatible
    with it, and its write failed): the take looks again and holds the lease."""
    import lancedb

    tables = Tables(db)

    def opened_then_made_again(name: str, schema: Any) -> Any:
        table = tables.handles.open_or_create(name, schema)
        lancedb.connect(db).create_table(name, schema=schema, mode="overwrite")  # the other process
        return table

    taker = Lease(opened_then_made_again)
    with taker.held(wait=1):
        holders = Tables(db).handles.open_or_create(lease.LEASE, lease.SCHEMA).to_arrow()["holder"].to_pylist()
        assert holders == [taker.holder]
    assert Tables(db).handles.open_or_create(lease.LEASE, lease.SCHEMA).to_arrow()["holder"].to_pylist() == [""]
