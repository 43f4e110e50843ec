"""bench/scale.py's one size: its store built, the plain table beside it, every figure measured, in
that order; then the store removed (unless kept, or in a bucket)."""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import time
from functools import partial
from pathlib import Path

from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from scale_build import (
    ACTOR,
    Import,
    MeteredEmbedder,
    WordSumEmbedder,
    bare_rate,
    corpus_events,
    describe_indexes,
    import_corpus,
    note_embed_times,
    write_events,
    write_stand_in_scopes,
)
from scale_burst import measure_burst
from scale_corpus import NOW, make_corpus, scope_seed
from scale_measure import SizeResult, is_remote, profiled, rss_mib, stored_mib
from scale_recall import PlainHybrid, measure_graph_cache, measure_recalls
from scale_writes import measure_writes

SIZES = {"1k": 1_000, "10k": 10_000, "30k": 30_000, "100k": 100_000, "1M": 1_000_000}
SCOPES_AT_1M = 1_000
UPKEEP_WAIT_S = 600.0  # a compaction set off by the timed writes, waited for before the store is removed


def size_location(label: str, root: Path | str) -> str:
    """Where a size's store and plain table go: `root/label` in a directory, or
    `root/<label>-<unix time>` under an object store's URI (a bucket is not emptied between runs)."""
    if isinstance(root, Path):
        return str(root / label)
    return f"{root.rstrip('/')}/{label}-{int(time.time())}"


def run_size(label: str, args: argparse.Namespace, real: SentenceTransformerEmbedder, root: Path | str) -> SizeResult:
    """One size; `root` is a local directory (a Path) or an object store's URI (s3://…)."""
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    n = SIZES[label]
    many_scopes = label == "1M"
    scopes = SCOPES_AT_1M if many_scopes else 1
    per_scope = n // scopes
    location = size_location(label, root)
    store_uri, plain_uri = f"{location}/store", f"{location}/plain"
    embedder = MeteredEmbedder(real)
    memory = Memory(store_uri, embedder, clock=lambda: NOW, storage_options=None)  # a bucket: the AWS_* variables
    # opened as the server opens its store once a client is connected: otherwise the first size's
    # import would pay the process's one-time `import lancedb` (about 2.4 s here, a quarter of a 1k import)
    memory.warm(then=gc.freeze).join()  # as the server does (server/app.py)
    scope = "s0000"
    rng = random.Random(f"{args.seed}:{label}:events")

    t = time.perf_counter()
    corpus = make_corpus(per_scope, scope_seed(args.seed, 0))
    corpus_seconds = time.perf_counter() - t
    # The bench's own corpus (about 100,000 objects at 100k) is not what a server holds: out of the
    # collector's full passes, or a recall that meets one pays for collecting it (130 ms in a probe).
    # What the store makes from here on (the scope's graph, the notes it keeps) is collected as in a server.
    gc.freeze()

    # the model's bare rate on (a sample of) the same texts, before and after the import with the
    # real model (the machine's load can change in between: the mean of the two is compared)
    sample = [note.text for note in corpus.notes[: args.rate_sample]]
    bare_before = bare_rate(real, sample)
    ids, imported = import_corpus(memory, embedder, corpus, scope, args.batch)
    bare_after = bare_rate(real, sample)
    bare = (bare_before + bare_after) / 2
    events = corpus_events(corpus, ids, scope, rng)

    stand_in_note = None
    stand_in_import = Import()
    if many_scopes:
        t = time.perf_counter()
        vocabulary = [
            note.text for s in range(1, 21) for note in make_corpus(per_scope, scope_seed(args.seed, s)).notes
        ]
        stand_in = WordSumEmbedder(real, vocabulary, args.seed)
        stand_in_setup = time.perf_counter() - t
        stand_in_note = (
            f"scopes s0001-s{scopes - 1:04d} ({n - per_scope:,} notes): vectors from a stand-in embedder, the "
            f"normalised sum of the real model's vectors of the text's words ({stand_in.vocabulary:,} words, "
            f"embedded in {stand_in_setup:.1f} s), written with Tables.add_notes, {args.bulk_rows:,} notes of "
            f"several scopes per write; s0000 (the 1k corpus) through import_notes, and every query: the real model"
        )
        stand_in_import, more = write_stand_in_scopes(memory, stand_in, args, per_scope, scopes, rng, started)
        events += more

    t = time.perf_counter()
    write_events(memory, events)
    events_seconds = time.perf_counter() - t
    t = time.perf_counter()
    compacted = memory.upkeep.compact()
    compact_seconds = time.perf_counter() - t
    notes_table = memory.tables.handles.notes_table()
    assert notes_table is not None

    result = SizeResult(
        size=label, notes=int(notes_table.count_rows()), scopes=scopes, measured_scope=scope,
        events=int(memory.tables.handles.events_table().count_rows()), stand_in=stand_in_note, store=store_uri,
        plain_store=plain_uri,
    )  # fmt: skip
    result.build = {
        "corpus_seconds": corpus_seconds,
        "bare_embed_rate": bare,
        "bare_embed_rate_before_after": [bare_before, bare_after],
        "bare_embed_sample": len(sample),
        "import_notes": imported.notes,
        "import_seconds": imported.seconds,
        "import_rate": imported.notes / imported.seconds,
        "import_embed_share": imported.embed_seconds / imported.seconds,
        "model_rate_in_import": imported.notes / imported.embed_seconds,
        "import_vs_bare": (imported.notes / imported.seconds) / bare,
        "batch": args.batch,
        "edges": {"supersedes": sum(len(c) - 1 for c in corpus.chains), "depends_on": len(corpus.depends)},
        "events_written": len(events),
        "events_seconds": events_seconds,
        "edges_written_by": "Tables.add_events (direct, batches of 10,000)",
        "compact_seconds": compact_seconds,
        "compact_ran": compacted,
    }
    if many_scopes:
        result.build["stand_in_import_notes"] = stand_in_import.notes
        result.build["stand_in_import_seconds"] = stand_in_import.seconds
        result.build["stand_in_import_rate"] = stand_in_import.notes / stand_in_import.seconds
        result.build["stand_in_embed_share"] = stand_in_import.embed_seconds / stand_in_import.seconds
    result.indexes = {
        "notes": describe_indexes(notes_table),
        "events": describe_indexes(memory.tables.handles.events_table()),
    }
    del events
    gc.collect()

    print(f"  {label}: built in {time.perf_counter() - started:.0f} s; plain LanceDB table next", file=sys.stderr)
    plain = PlainHybrid(plain_uri, notes_table)
    result.plain = {
        "rows": plain.rows, "copy_seconds": plain.copy_seconds, "index_seconds": plain.index_seconds,
        "ann": plain.ann, "indexes": describe_indexes(plain.table),
    }  # fmt: skip

    print(f"  {label}: measuring", file=sys.stderr)
    vectors = measure_recalls(memory, embedder, plain, corpus, scope, result)
    result.graph_events = len(memory.graphs.get(scope).events)
    print(f"  {label}: the graph cache, kept and defeated", file=sys.stderr)
    result.graph_cache = measure_graph_cache(memory, embedder, corpus, vectors, scope)
    query = corpus.queries[0].text
    if args.profile:
        embedder.known = {query: real.embed([query])[0]}
        result.profile["recall (query vector precomputed)"] = profiled(
            partial(memory.recall, query, scope=scope), args.profile
        )
        embedder.known = {}
    result.note_embed = note_embed_times(real, corpus, args.writes)
    result.writes = measure_writes(memory, corpus, ids, scope, args.writes, scope_seed(args.seed, 0))
    if args.profile:
        draft = Draft(text=f"{corpus.notes[-1].text} (profiled)", subject=corpus.notes[-1].subject)
        result.profile["remember (model in the call)"] = profiled(
            partial(memory.remember, draft, scope=scope, actor=ACTOR), args.profile
        )

    if args.burst:
        print(f"  {label}: a burst of writes, then the queries", file=sys.stderr)
        result.after_burst = measure_burst(memory, embedder, plain, corpus, ids, vectors, scope, args)

    result.load_average = (load_at_start, os.getloadavg()[0])
    result.rss_mib, result.peak_rss_mib = rss_mib()
    result.disk_store_mib = stored_mib(store_uri)
    result.disk_plain_mib = stored_mib(plain_uri)
    result.seconds = time.perf_counter() - started
    memory.finish_upkeep(UPKEEP_WAIT_S)  # a compaction the timed writes set off, before its files go
    del memory, plain, notes_table
    gc.collect()
    if not args.keep and not is_remote(location):
        shutil.rmtree(location, ignore_errors=True)
    return result
