"""The numbers the storage engine runs by: when it compacts, retries, indexes and gives up.

Every module reads them here, at the moment it uses them (`limits.NAME`), so a test or a bench that
sets one on this module changes what the engine does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .schema import EVENTS, NOTES

# Compact once a table has this many fragments: each append is one, and a search reads them all. In a
# directory each costs a search about 0.25 ms: at 100k notes, right after 300 corrections and 150
# links, recall p50 was 32 ms with 55 fragments (compacting at 48) and 21 ms with 15 (at 16), the
# settled store's 20 (docs/scale.md, "A burst of writes"). On an object store each fragment a search
# reads is a request, but so is each file a compaction reads, writes and deletes (about 350 requests a
# compaction): at 16 rather than 8, one writer's writes and reads made 19 % fewer requests in all with
# forgets, 37 % without (docs/object-storage.md, "Measured").
COMPACT_AT_FRAGMENTS = 16
COMPACT_AT_FRAGMENTS_REMOTE = 16
# A process looks whether upkeep is due after this many of its writes (a look reads the manifests its
# views hold, no request; a compaction looks again on the latest versions under the lease: upkeep.py).
UPKEEP_CHECK_EVERY = 16
UPKEEP_CHECK_EVERY_REMOTE = 4
# A process whose graph of a scope (graph.py) is this many versions of the events table behind, or
# fewer, reads only the events those versions appended (`Search.events_since`: each version's
# transaction is a read, a request on an object store); further behind, it reads the scope again.
EVENTS_SINCE_MAX = 32
# On an object store that costs two or three requests a version, more than reading a small scope
# again: there a graph of fewer events than this is read whole (at about 17 µs an event decoded on
# this machine, 1,000 are 17 ms, what a few requests to the local S3 API cost).
CATCH_UP_FROM_REMOTE = 1000
# Compaction merges fragments smaller than this many rows and leaves bigger ones alone, so one
# compaction rewrites at most this much. (LanceDB's own `optimize` merges every fragment under a
# million rows: at 100k notes it rewrote the whole table every 48 writes.)
FRAGMENT_ROWS = {NOTES: 4096, EVENTS: 65536}
# Versions older than this are deleted by compaction. Every read checks for the latest version
# first and retries once a file of an older one is gone, so this only has to outlast one call;
# Younger versions beyond the newest KEEP_VERSIONS go too, which bounds the disk a burst of writes
# leaves behind (docs/scale.md, "Disk after a burst of single writes"): a compaction rewrites small
# tables whole, and each version kept keeps its copy.
KEEP_VERSIONS_FOR = timedelta(seconds=10)
KEEP_VERSIONS = 20
# On an object store, compaction keeps this many versions, whatever their age. Finding the latest
# version is a listing of every version kept there, which each operation makes (a table each) and
# each commit makes again: the fewer kept, the shorter each listing, and on the three-server bench
# the local S3 API's listings are what the writes wait for (bench/faults.py --parts servers
# --local-s3: keys a listing answered). A read that meets a version removed under it reads the
# latest one (READ_RETRIES).
KEEP_VERSIONS_REMOTE = 4
# A file that no version references and is older than this was left by a crash (an append takes
# milliseconds, an index build minutes): compaction deletes it. Lance on its own waits a week.
ORPHAN_AGE = timedelta(hours=1)
# How long `forget` waits for another process's compaction: an erasure is never skipped. Upkeep, which
# the next writes try again, gives up sooner.
ERASE_WAIT = 120.0
# How long a process's exit waits for threads Python did not start to leave its code (upkeep.py).
NATIVE_EXIT_WAIT = 2.0
ERASE_POLL = 0.5  # seconds between two looks while another process holds that lock
UPKEEP_WAIT = 20.0
# A read that meets a file removed by another process's cleanup checks out the latest version
# and tries again, this many times.
READ_RETRIES = 3
# The notes table gets a vector index (IVF_SQ, square-root-of-rows partitions) once it holds this
# many rows; a scope smaller than this is searched exactly even then. A search probes this many
# partitions; its similarities are the index's 8-bit ones, which recall replaces with exact ones from
# the stored vectors it reads along with the notes (not on an object store, where reading them back
# costs ~20 requests and 120 ms a search). Chosen by measurement (docs/scale.md, "Scale": recall@20
# against exact search, and latency).
VECTOR_INDEX_AT = 10_000
VECTOR_INDEX = "vector_idx"  # LanceDB's name for it
VECTOR_PROBES = 50
# Lance's index upkeep adds each compaction's new rows as a segment of their own (searched apart) and
# keeps the partitions it was trained with; a default merge re-derives them from 8,192 rows a partition
# (a 100k-note store had 17 segments of 5 partitions: every search scanned all of it). So the index is
# made with a partition size, its segments are merged past VECTOR_SEGMENTS, and it is trained again
# once the table has grown to VECTOR_RETRAIN_GROWTH times the rows it was trained on. A search probes
# each segment apart, as many partitions in each, however few rows it holds: so every compaction
# leaves one segment (a merge keeps the partitions).
VECTOR_SEGMENTS = 1
VECTOR_RETRAIN_GROWTH = 4
# How long a count of a scope's notes (or the absence of a vector index) is trusted.
SCOPE_SIZE_TTL = 30.0
# Compact once this many rows of a table are outside its indexes (searched without them).
REINDEX_AT = 1024
# How long making a table waits for another process that holds the lock of upkeep (lease.py).
CREATE_WAIT = 60.0
# Several processes can open a new store at once (servers started together) and make its tables and
# indexes at the same moment. Lance then fails one side with a commit conflict, or finds a table whose
# first version is not written yet: each creation is tried again, this many times.
CREATE_ATTEMPTS = 6
# A second creation of a table lands as an overwrite, which Lance lets through even after another
# process's first writes to it: a write to a table younger than this many versions checks that its
# rows are there, and writes again those that are not (ids are the writer's: a copy is harmless).
YOUNG_TABLE_VERSIONS = 32
# An append whose version another process committed first is committed again on the next one
# (`_committed`), up to this many times, after a random wait of up to COMMIT_BACKOFF seconds, doubling.
COMMIT_ATTEMPTS = 20
COMMIT_BACKOFF = 0.02
# The notes' full-text index (LanceDB's FTS): ICU word segmentation, which splits Chinese and Japanese
# into words as well as English (stemmed, lower-cased, accents folded: Lance's defaults). Lance reads a
# query with the settings of the index it searches (search.py first leaves out a query's English
# function words, QUERY_STOP_WORDS, when it has other words). Stop words stay in the index:
# with ICU, Lance's own removal takes out every language's stop words it knows, ordinary words among
# them ("war", "cat", "sale", "city", "dog"; "任务", "问题", "结果"); 157 of the 2,000 commonest words
# of the benches' English texts and 74 of 186 common Chinese words were never found. A store indexed
# otherwise is indexed again at its next upkeep (`upkeep_due`, which compares these settings with the
# index's own).
FULL_TEXT: dict[str, Any] = {"base_tokenizer": "icu", "remove_stop_words": False}  # lancedb.index.FTS
# Scalar indexes: every filter names one of these columns (see where.py), and the index type of each.
# A scope is a value shared by many rows: as a search's prefilter, a bitmap of a 100k-note scope cost
# 4-5 ms less a vector search and 3 ms less a full-text search than a B-tree, and as much as one with
# 1,000 or 20,000 scopes (docs/scale.md, "Scale"). A store made with a B-tree there gets the bitmap at its
# next upkeep (`upkeep_due`).
SCALAR_INDEXES = {
    NOTES: {"id": "BTree", "scope": "Bitmap", "recorded_at_us": "BTree"},
    EVENTS: {"id": "BTree", "scope": "Bitmap", "src": "BTree", "dst": "BTree"},
}
