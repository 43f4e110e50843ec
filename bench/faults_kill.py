"""bench/faults.py's part 1: kill -9 of a child process in three phases (writes, compaction, forget), each
on its own store, and the checks after every kill.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from corrigenda.store import Draft, Embedder, Memory, NotFound
from faults_check import PhaseResult, check_store, sensitivity, standing
from faults_child import Child
from faults_common import SCOPE, Ledger, StandInEmbedder, call_memory, note_text, progress

KILL_PHASES = ("writes", "compaction", "forget")
# The longest wait before a kill, from when the child has the store open. On 2 cores a write
# takes 20-80 ms and a forget about 100 ms, so a child does tens of writes, or a batch of eight
# forgets, in that time: kills spread over the whole of its work.
KILL_WITHIN_S = {"writes": 2.0, "compaction": 2.0, "forget": 1.0}


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
