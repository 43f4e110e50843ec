"""bench/faults.py's part 4: kill -9 of the real CLI during `corrigenda import` and `corrigenda export`,
then what the store or the file a user has was left as.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrigenda.store import Draft, Embedder, Memory
from faults_check import HISTORY_CHECKS, Check, check_store
from faults_common import CORRIGENDA, SCOPE, SERVER_ENV, Ledger, progress

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
