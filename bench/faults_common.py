"""What every part of bench/faults.py shares: the stand-in embedder, the notes' texts, the ledger of what a
store acknowledged, the writes the parts make (as a tool's name and arguments) and their acknowledgements.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corrigenda.store import Draft, Memory

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
SCOPE = "faults"
CHILD_WAIT_S = 120.0  # for a child to open the store, or a race worker to answer
TOPICS = ("the cache TTL", "the service port", "the deploy branch", "the retry limit", "the log level")
QUERY = "what is the cache TTL, the service port or the retry limit?"


class StandInEmbedder:
    """Not a model: each word adds a vector drawn from its SHAKE-256 digest, then the sum is scaled
    to unit length. Deterministic and instant; texts sharing words point the same way, so recall
    still finds entry points. Nothing here measures retrieval quality."""

    name = "faults-stand-in-shake256-64"
    dimension = 64

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            sums = [0.0] * self.dimension
            for word in text.lower().split():
                for i, byte in enumerate(hashlib.shake_256(word.encode()).digest(self.dimension)):
                    sums[i] += byte - 127.5
            norm = math.sqrt(sum(x * x for x in sums)) or 1.0
            vectors.append([x / norm for x in sums])
        return vectors

    def readable(self, text: str) -> bool:
        return True


def note_text(rng: random.Random, label: str) -> str:
    """A note's text with its own secret, which the leak check looks for once the note is forgotten."""
    return f"{label}: {rng.choice(TOPICS)} is {rng.randint(1, 9999)} (secret-{rng.getrandbits(128):032x})"


# -- what was acknowledged ----------------------------------------------------------------------

EventRecord = tuple[str, str | None, str]  # kind, src, dst


@dataclass
class Ledger:
    """What a phase's store acknowledged: every note and event whose call returned, every forget."""

    notes: dict[str, str] = field(default_factory=dict)  # note id → text
    events: dict[str, EventRecord] = field(default_factory=dict)
    forgotten: dict[str, str] = field(default_factory=dict)  # note id → text, for acknowledged forgets
    retractable: list[str] = field(default_factory=list)  # revokes and supersedes events (to reinstate)

    def acknowledge(self, op: str, ack: Mapping[str, Any]) -> None:
        if op == "forget":
            note = ack["note"]
            self.forgotten[note] = self.notes.get(note, "")
            return
        if ack.get("note"):
            self.notes[ack["note"]] = ack["text"]
        for event_id, kind, src, dst in ack.get("events", []):
            self.events[event_id] = (kind, src, dst)
            if kind in ("revokes", "supersedes"):
                self.retractable.append(event_id)

    def live_notes(self) -> list[str]:
        return [n for n in self.notes if n not in self.forgotten]

    def expected_events(self) -> set[str]:
        """Acknowledged events that must still be there: forget erases the events naming its note, and
        those naming such an event (a reinstates of a revokes), but keeps its `forgets` tombstone."""
        gone = set(self.forgotten)
        first = {i for i, (kind, src, dst) in self.events.items() if kind != "forgets" and (src in gone or dst in gone)}
        second = {i for i, (_, _, dst) in self.events.items() if dst in first}
        return set(self.events) - first - second


@dataclass
class Pools:
    """What a writer may name: notes anyone may use, events it may retract, and notes only it knows
    (the only ones it forgets, so no other writer meets a note that vanished under it)."""

    shared: list[str] = field(default_factory=list)
    retractable: list[str] = field(default_factory=list)
    mine: list[str] = field(default_factory=list)

    def take(self, op: str, ack: Mapping[str, Any], private: bool = False) -> None:
        """Add what an acknowledged write made; `private` keeps a remembered note to this writer."""
        if op in ("remember", "correct"):
            (self.mine if private and op == "remember" else self.shared).append(ack["note"])
        self.retractable += [e[0] for e in ack["events"] if e[1] in ("revokes", "supersedes")]


MIXES = ("all", "remember-heavy")  # the servers part's writes: every kind, or five remembers to one correct


def choose_write(rng: random.Random, text: str, pools: Pools, mix: str = "all") -> tuple[str, dict[str, Any]]:
    """A random write as a tool's name and arguments (`call_memory` gives them to the `Memory` method of that name):
    with `mix` "all", every kind of write; "remember-heavy", five remembers to one correct, as agents call them."""
    shared, roll = pools.shared, rng.random()
    if mix == "remember-heavy":
        if roll < 1 / 6 and shared:
            return "correct", {"note_id": rng.choice(shared), "text": text, "reason": "a newer value", "fork": True}
        roll = 1.0  # a remember, drawn as in the full mix
    if roll < 0.12 and pools.mine:
        return "forget", {"note_id": pools.mine.pop(rng.randrange(len(pools.mine))), "reason": "the user asked"}
    if roll < 0.30 and shared:
        # fork: the target may be replaced already; the harness exercises writes, not the guard rail
        return "correct", {"note_id": rng.choice(shared), "text": text, "reason": "a newer value", "fork": True}
    if roll < 0.45 and len(shared) >= 2:
        src, dst = rng.sample(shared, 2)
        kind = rng.choice(["supersedes", "depends_on"])
        return "link", {"src_id": src, "dst_id": dst, "kind": kind, "reason": "linked by the fault harness"}
    if roll < 0.60 and shared:
        return "revoke", {"note_id": rng.choice(shared + pools.mine), "reason": "found wrong"}
    if roll < 0.72 and shared:
        target = rng.choice(pools.retractable) if pools.retractable and rng.random() < 0.5 else rng.choice(shared)
        return "reinstate", {"target_id": target, "reason": "the exclusion was a mistake"}
    args: dict[str, Any] = {"text": text, "scope": SCOPE}
    if shared and rng.random() < 0.15:
        args.update(supersedes=[rng.choice(shared)], reason="a newer value")
    elif shared and rng.random() < 0.2:
        args.update(depends_on=[rng.choice(shared)])
    return "remember", args


def acknowledgement(op: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """What a write's answer (a tool's structured content) acknowledges: its note and its events."""

    def events(*found: Mapping[str, Any] | None) -> list[list[Any]]:
        return [[e["id"], e["kind"], e["src"], e["dst"]] for e in found if e]

    if op == "forget":
        return {"note": answer["note_id"], "changed": answer["changed"], "events": []}
    if op == "remember":
        return {"note": answer["note"]["id"], "text": answer["note"]["text"], "events": events(*answer["events"])}
    if op == "correct":
        return {"note": answer["note"]["id"], "text": answer["note"]["text"], "events": events(answer["event"])}
    return {"note": None, "events": events(answer["event"]) if answer["changed"] else []}


def call_memory(memory: Memory, op: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """A write through the store's API, given a tool's arguments (a note's fields go into its draft, as the
    tool puts them), acknowledged from the answer a tool would give."""
    given = dict(args)
    if op in ("remember", "correct"):
        given["draft"] = Draft(**{f: given.pop(f) for f in list(given) if f in Draft.model_fields})
    return acknowledgement(op, getattr(memory, op)(**given).model_dump(mode="json"))


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
