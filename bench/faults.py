"""Faults, long form (issue 11): kill -9 at random points, several servers on one store, racing cycles.

tests/store/test_reliability.py holds the short, deterministic forms (a write cut between its appends, an
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
gate by kind; SeaweedFS's gateway from its metrics, by type: GET and HEAD are one kind there), and
the CPU the writes cost, by group of processes (the servers, the store's processes by role, HAProxy, the
bench's own process: the clients), read from /proc just before and just after them, with the floor it
sets on a write's latency: CPU ms a write x clients / CPUs, beside the p50 measured. After
each write that stored a note, the next server reads it (history): a miss is counted as corrupt. A
forget that failed is called again, as a user would (its delete may have landed).
tests/store/test_object_store.py runs it short, three HTTP servers on SeaweedFS, and its negative control
on moto; tests/store/test_seaweed_faults.py runs part 5 short. `servers_phase` takes a `front` that puts
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
The parts live beside this script, each in its own module, and this one parses the options, runs the
parts chosen and writes the results: faults_kill.py (part 1), faults_servers.py (part 2, and the
`Outage` of part 5), faults_race.py (part 3), faults_transfer.py (part 4), faults_cluster.py (part 5).
What they share: faults_common.py (the stand-in embedder, the ledger, the writes), faults_check.py (the
checks, a part's results), faults_child.py (the child processes of parts 1 and 3), faults_serving.py
(the server processes of parts 2 and 5), faults_report.py (what is printed, and the docs' `TABLES`),
and harness.py (the results file, a free port, the local S3 API).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# Other benches and the tests import from here names that were defined here before the parts moved out
# (bench/balancer.py: SERVER_ENV, http_server; the tests:
# PhaseResult, bucket_files, servers_phase, cluster_fault_run, STOP_WAIT_S): noqa F401 keeps them.
import harness
from faults_check import PhaseResult, bucket_files  # noqa: F401
from faults_child import child_main
from faults_cluster import CLUSTER_FAULTS, cluster_fault_run, cluster_phase  # noqa: F401
from faults_common import MIXES, SERVER_ENV, StandInEmbedder  # noqa: F401
from faults_kill import KILL_PHASES, KILL_WITHIN_S, kill_phase
from faults_race import race_phase
from faults_report import STORES, TABLES, report, transfer_report
from faults_servers import bucket, servers_phase
from faults_serving import BEHIND_A_FRONT, STOP_WAIT_S, haproxy_front, http_server  # noqa: F401
from faults_transfer import TRANSFER_FORMS, TransferResult, transfer_phase
from harness import LOCAL_BUCKET


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
                with bucket(store, args.local_s3_dispatcher) as (env, counter, store_processes):
                    db = args.db or (f"s3://{LOCAL_BUCKET}/faults-{int(time.time())}" if env else None)
                    name = f"{args.servers} servers x {args.writes} writes ({args.transport})"
                    front = haproxy_front if args.balancer else None
                    result = servers_phase(
                        root, args.servers, args.writes, args.seed, db, args.transport,
                        {**(env or {}), **(BEHIND_A_FRONT if front else {})}, counter=counter, mix=args.mix,
                        name=f"{name} on {STORES[store]}" if store and len(stores) > 1 else name, front=front,
                        store_processes=store_processes,
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
    shown["cpu"] = shown["servers"]
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
