"""Scale: recall_chains and the writes at 1k / 10k / 100k notes in one scope and 1M notes over 1,000 scopes.

Issue 8. For each size the script builds a fresh store in a temporary directory (or, with `--db
s3://bucket/prefix`, under `prefix/<size>-<unix time>` in that bucket: issue 12) and measures, in one
process and one run:

- build: bulk import through `Memory.import_notes` (batches of `--batch` notes) with the real model,
  into a store opened first as the server opens its own (`Memory.warm`), as notes/s and the share
  of that time spent in the model; and the model's bare `embed` rate on
  the same texts (one call on up to `--rate-sample` of them, before and after the import: on a
  shared machine the load changes in between, so the mean is compared);
- edges: 10 % of the notes sit in correction chains (2-3 versions of one claim) and 5 % depend on
  another note. These `supersedes` / `depends_on` edges are written straight into the events table
  with `Tables.add_events` (store `Event`s, batches of 10,000), not through `correct`/`link`: at
  100k and 1M one call per edge would take longer than the rest of the run. The writes measured
  below go through the store's own calls;
- upkeep: `memory.upkeep.compact()` (the store's public upkeep), then the indexes `list_indices()`
  reports on the notes and events tables;
- recall: 60 questions paraphrasing the corpus's subjects, each timed through `Memory.recall` (the
  default budget) with the query's vector embedded beforehand (the model excluded: every query is
  embedded once with the real model and the vector reused), then again with the model in the call;
- plain LanceDB, query by query in the same loop (alternating which goes first): a separate table
  (same directory, or same bucket prefix) with the same ids, texts, vectors and scopes, an FTS index
  (ICU, as the store's), a bitmap index on scope, and an ANN index (cosine) from 10,000 rows:
  IVF_HNSW_SQ, or IVF_PQ from 500,000 rows (under 10,000 LanceDB has too few rows to train one, and
  searches exactly). Queried with `search(query_type="hybrid")`: vector + text, `where(scope)`
  prefilter, limit 20, the same precomputed vector. Ratio = corrigenda p50 / plain p50;
- ANN recall@20: the store's `Tables.vector_search` (whatever index the store built) against the
  exact search (`bypass_vector_index()`) on the same table, scope and vector; the same for the plain
  table's ANN index;
- writes: `remember`, `correct` and `link` (depends_on) through `Memory`, `--writes` of each after 3
  warm-up calls, each with the model in the call (`remember`/`correct` embed their text);
- the per-scope graph cache (store/graph.py, `Graphs`): recall p50/p99 again, query by query, as it
  is (the scope's graph kept and refreshed from what was appended, its notes kept as one scan, and
  the notes and vectors read by id kept) and with the cache defeated (`memory.graphs.drop_all()` before
  the call, outside its time, so that each recall reads the scope's events and scans its notes
  again, as a process's first call of a scope does), alternating
  which goes first; and
  `graphs.get(scope)` alone both ways. The saving is the ratio of the p50s. Then recall right after
  a second `Memory` on the store (another server process) wrote an edge: its graph one version behind;
- RSS (VmRSS now, and ru_maxrss: the peak of the whole process so far) and bytes stored (on disk, or
  the objects under the store's prefix in an s3:// bucket; "n/a" for gs:// and az://).

Object storage (issue 12): `--db s3://bucket/prefix` (or gs://, az://) builds every size's store and
its plain LanceDB table under `prefix/<size>-<unix time>/` in the bucket, through the same code (the
store and `lancedb.connect` read the bucket's AWS_* / GOOGLE_* / AZURE_* environment variables); they
are left there. `--local-s3` starts a local S3 API for the run (bench/local_s3.py, through
bench/harness.py's `local_s3`) and, without `--db`, uses s3://corrigenda-bench/scale in it.

1M notes over 1,000 scopes: scope s0000 holds exactly the 1k store's corpus with real-model vectors
(so the same 60 queries ask the same notes); the other 999 scopes (999,000 notes) get vectors from a
stand-in embedder (the normalised sum of the real model's vectors of the text's words, each word
embedded once), which the output says, and are written with the store's `Tables.add_notes` in writes
of `--bulk-rows` notes across scopes (`import_notes` takes one scope per call). Recall in s0000 is
compared with the same queries on the 1k store; when `--sizes` has 1M but not 1k, the 1k store is
built too, as the reference.

The corpus is synthetic and deterministic from `--seed`: English sentences stating attributes of
services, people, offices, projects, plants, recipes and cars (thousands of entities, several
phrasings per attribute, optional trailing clauses and context sentences), so texts differ and full
text has real work.

Run from the repository root:

    .venv/bin/python bench/scale.py [--sizes 1k,10k,100k,1M | --quick] [--seed N] [--json PATH]
        [--keep DIR | --db s3://bucket/prefix] [--local-s3] [--torch-threads N] [--profile N]

It prints one markdown table (a column per size), the indexes found, and the targets of issue 8
with the measured figure beside each; --json also writes every figure and per-query record.
--profile N prints the top N functions of one cProfiled recall and one remember per size.
--torch-threads 1 keeps torch to one thread: on a loaded 2-core machine its default pool made the
model 5-25 times slower here (docs/scale.md, "The model's threads"; the store now gives it half the cores
itself). The header says which was used, the commit the store ran at, and whether store/ or
server/ had uncommitted changes. Linux only (/proc).

The parts, each a module beside this one (imported as this script imports them, bench/ first on the
path): bench/scale_corpus.py the synthetic corpus; bench/scale_build.py the embedders, the import, the
edges and the model's bare rate; bench/scale_recall.py the plain LanceDB table, recall against it, ANN
recall@20 and the graph cache; bench/scale_writes.py the timed writes; bench/scale_burst.py `--burst`;
bench/scale_measure.py what a size records, RSS, bytes stored and cProfile; bench/scale_size.py one
size, start to end; bench/scale_results.py the printed tables, the targets, `TABLES` (bench/report.py)
and the results file. This file is the command line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from corrigenda.store import SentenceTransformerEmbedder
from harness import LOCAL_BUCKET, commit, local_s3, ms_summary
from scale_build import MeteredEmbedder, import_corpus
from scale_corpus import NOW, Corpus, make_corpus, scope_seed
from scale_measure import SizeResult, is_remote
from scale_recall import PLAIN_TOP, nearest_ids
from scale_results import TABLES, report, write_json
from scale_size import SIZES, run_size

# what other benches import from here (bench/ann_upkeep.py, bench/overlap.py) and bench/report.py reads
__all__ = [
    "NOW",
    "PLAIN_TOP",
    "TABLES",
    "Corpus",
    "MeteredEmbedder",
    "import_corpus",
    "main",
    "make_corpus",
    "ms_summary",
    "nearest_ids",
    "scope_seed",
]


def _burst(text: str) -> tuple[int, int]:
    try:
        corrections, links = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give corrections,links, e.g. 1000,500") from None
    if corrections < 1 or links < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one correction, and no negative count of links")
    return corrections, links


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", default="1k,10k,100k,1M", help="comma-separated of 1k,10k,30k,100k,1M (default 1k,10k,100k,1M)"
    )
    parser.add_argument("--quick", action="store_true", help="1k and 10k only")
    parser.add_argument("--seed", type=int, default=8, help="corpus seed (default 8)")
    parser.add_argument("--batch", type=int, default=2000, help="notes per import_notes call (default 2000)")
    parser.add_argument(
        "--bulk-rows", type=int, default=25_000, help="notes per write for the 1M stand-in scopes (default 25000)"
    )
    parser.add_argument("--writes", type=int, default=30, help="timed calls of each write (default 30)")
    parser.add_argument("--rate-sample", type=int, default=2000, help="texts for the bare model rate (default 2000)")
    parser.add_argument(
        "--torch-threads", type=int, metavar="N", help="torch.set_num_threads(N) first (default: torch's own)"
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the top N of a cProfiled recall and remember"
    )
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them (default: a temp dir)")
    parser.add_argument(
        "--db", metavar="URI",
        help="build each size's store under URI/<size>-<unix time> in an object store (s3://bucket/prefix, gs://, "
        "az://; read with the usual AWS_* etc. variables) instead of a temp directory; left there",
    )  # fmt: skip
    parser.add_argument(
        "--local-s3", action="store_true",
        help="start a local S3 API for the run (bench/local_s3.py); without --db, use s3://corrigenda-bench/scale",
    )  # fmt: skip
    parser.add_argument(
        "--burst", type=_burst, metavar="C,L",
        help="after each size's other figures: C corrections and L links back to back, then the queries at "
        "once, then again once upkeep has settled (issue 36; e.g. 1000,500)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write every figure and per-query record here")
    args = parser.parse_args(argv)
    labels = ["1k", "10k"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in labels if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; use {', '.join(SIZES)}")
    if "1M" in labels and "1k" not in labels:
        labels.insert(0, "1k")  # the reference of the 1M comparison
        print("1M compares with the 1k store: building 1k too", file=sys.stderr)
    labels = sorted(dict.fromkeys(labels), key=lambda s: SIZES[s])
    if args.db is not None and not is_remote(args.db):
        parser.error("--db takes an object store's URI (s3://bucket/prefix); for a directory use --keep DIR")
    if args.db is not None and args.keep is not None:
        parser.error("--db and --keep are exclusive")

    started = time.perf_counter()
    args.engine = f"engine at {commit()}"
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    real = SentenceTransformerEmbedder()
    real.embed(["warm up"])
    args.threads = _torch_threads()
    results: list[SizeResult] = []
    with ExitStack() as stack:
        root: Path | str
        if args.local_s3:
            env = stack.enter_context(local_s3(True))
            print(f"local S3 API at {env.get('AWS_ENDPOINT_URL')}", file=sys.stderr)
            root = args.db or f"s3://{LOCAL_BUCKET}/scale"
            args.store_label = f"{root}/<size>-<unix time> in a local S3 API started for the run (bench/local_s3.py)"
        elif args.db:
            root = args.db
            args.store_label = f"{root}/<size>-<unix time>"
        else:
            root = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="corrigenda-scale-")))
            root.mkdir(parents=True, exist_ok=True)
            args.store_label = f"{root}/<size> ({'kept' if args.keep else 'a temp directory, removed after'})"
        for label in labels:
            print(f"size {label}: building", file=sys.stderr)
            result = run_size(label, args, real, root)
            results.append(result)
            print(f"size {label}: done in {result.seconds:.0f} s", file=sys.stderr)
    one_k = next((r for r in results if r.size == "1k"), None)
    for r in results:
        if r.size == "1M" and one_k is not None:
            r.vs_1k_p50 = r.recall["p50_ms"] / one_k.recall["p50_ms"]
    seconds = time.perf_counter() - started
    print(report(results, args, seconds))
    if args.json:
        write_json(args.json, results, args, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
