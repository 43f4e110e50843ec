"""bench/faults.py's part 3: the cycle race, two long-lived processes told at the same moment to link
x supersedes y and y supersedes x.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from pathlib import Path

from corrigenda.store import Memory
from faults_check import PhaseResult, check_store, standing
from faults_child import Child
from faults_common import SCOPE, Ledger, StandInEmbedder, call_memory, note_text

RACE_LEAD_S = 0.05  # the two racing writers are told to start this far ahead, at the same moment


def race_phase(root: Path, rounds: int, seed: int) -> PhaseResult:
    started = time.perf_counter()
    rng = random.Random(f"{seed}/race")
    db = str(root / "race" / "store")
    embedder = StandInEmbedder()
    memory = Memory(db, embedder)
    ledger = Ledger()
    result = PhaseResult("cycle race")
    gaps: list[float] = []  # between the two writers' starts, per round
    counts = Counter({"both linked": 0, "one refused as a cycle": 0, "no head": 0, "readers disagree": 0})
    workers = [Child("race", db, rng.getrandbits(32), root / "race" / f"worker-{i}.log") for i in range(2)]
    try:
        for w in workers:
            w.start({})
        for r in range(rounds):
            x, y = (
                call_memory(memory, "remember", {"text": note_text(rng, f"race {r}"), "scope": SCOPE}) for _ in "xy"
            )
            for made in (x, y):
                ledger.acknowledge("remember", made)
            pairs = ((x["note"], y["note"]), (y["note"], x["note"]))
            for w, (src, dst) in zip(workers, pairs, strict=True):
                w.send(cmd="arm", src=src, dst=dst)
            for w in workers:
                w.expect({"armed"})
            at = time.time() + RACE_LEAD_S
            for w in workers:
                w.send(cmd="go", at=at)
            answers = [w.expect({"ack", "refused", "failed"}) for w in workers]
            result.count(answers, ledger)
            linked = sum(a["kind"] == "ack" for a in answers)
            counts["both linked"] += linked == 2
            counts["one refused as a cycle"] += linked == 1 and any("cycle" in a.get("error", "") for a in answers)
            views = []
            for w in workers:
                w.send(cmd="heads", note=x["note"])
                seen = w.expect({"heads"})
                if seen["heads"] is None:
                    result.corrupt.setdefault(f"a racing writer could not read the chain: {seen['error']}", r + 1)
                views.append(tuple(seen["heads"] or ()))
            views.append(tuple(h.id for h in memory.history(x["note"]).chain.heads))
            counts["no head"] += any(not v for v in views)
            counts["readers disagree"] += len(set(views)) > 1
            began = [next(m["t"] for m in reversed(w.messages) if m["kind"] == "begin") for w in workers]
            gaps.append(abs(began[0] - began[1]) * 1000)
            result.records.append(
                {"round": r, "outcomes": [a["kind"] for a in answers], "heads": [list(v) for v in views],
                 "start_gap_ms": round(gaps[-1], 2)}
            )  # fmt: skip
    finally:
        for w in workers:
            w.stop()
    check = check_store(db, embedder, ledger, ledger.live_notes())
    result.absorb(check, rounds)
    result.trials = rounds
    standing(result, ledger)
    result.extra["rounds"] = dict(counts)
    if gaps:
        result.extra["writers_start_gap_ms"] = {"median": round(statistics.median(gaps), 2), "max": round(max(gaps), 2)}
    if counts["no head"]:
        result.corrupt.setdefault(f"{counts['no head']} race round(s) ended with no current note", rounds)
    result.seconds = time.perf_counter() - started
    return result
