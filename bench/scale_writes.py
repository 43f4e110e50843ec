"""bench/scale.py's writes: `remember`, `correct` and `link` through the store, timed call by call."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from corrigenda.store import Draft, Memory
from harness import ms_summary
from scale_build import ACTOR
from scale_corpus import ATTRIBUTES, Corpus, _claim, statement


def measure_writes(
    memory: Memory, corpus: Corpus, ids: Sequence[str], scope: str, count: int, seed: str
) -> dict[str, dict[str, float]]:
    """`remember`, `correct` and `link` through the store, each with 3 warm-up calls first."""
    rng = random.Random(seed + ":writes")
    calls = count + 3
    current = current_notes(corpus, ids)  # not versions already replaced
    targets = rng.sample(current, min(len(current), calls))
    timings: dict[str, list[float]] = {"remember": [], "correct": [], "link": []}

    for _ in range(calls):
        attribute, _kind, entity = _claim(rng)
        text = statement(attribute, entity, attribute.value(rng), rng)
        started = time.perf_counter()
        memory.remember(Draft(text=text, subject=f"{attribute.name}:{entity}".lower()), scope=scope, actor=ACTOR)
        timings["remember"].append(time.perf_counter() - started)
    timings["correct"] = timed_corrections(memory, corpus, ids, targets, rng)
    timings["link"] = timed_links(memory, ids, new_pairs(corpus, ids, calls, rng))
    return {name: ms_summary(seconds[3:]) for name, seconds in timings.items()}


def current_notes(corpus: Corpus, ids: Sequence[str]) -> list[int]:
    """The corpus notes no correction chain of the corpus has replaced."""
    chained = {i for chain in corpus.chains for i in chain[:-1]}
    return [i for i in range(len(ids)) if i not in chained]


def timed_corrections(
    memory: Memory, corpus: Corpus, ids: Sequence[str], targets: Sequence[int], rng: random.Random
) -> list[float]:
    """`correct` (fork: a note may have been corrected already) of each target with a new value; seconds each."""
    by_name = {a.name: a for a in ATTRIBUTES}
    seconds = []
    for i in targets:
        note = corpus.notes[i]
        attribute = by_name[note.attribute]
        text = statement(attribute, note.entity, attribute.value(rng), rng)
        started = time.perf_counter()
        memory.correct(ids[i], Draft(text=text), reason="a later value (bench)", actor=ACTOR, fork=True)
        seconds.append(time.perf_counter() - started)
    return seconds


def new_pairs(corpus: Corpus, ids: Sequence[str], count: int, rng: random.Random) -> list[tuple[int, int]]:
    """`count` pairs of notes the corpus has no depends_on edge between, either way."""
    linked = set(corpus.depends)
    pairs: list[tuple[int, int]] = []
    while len(pairs) < count:
        src, dst = rng.sample(range(len(ids)), 2)
        if (src, dst) not in linked and (dst, src) not in linked:
            linked.add((src, dst))
            pairs.append((src, dst))
    return pairs


def timed_links(memory: Memory, ids: Sequence[str], pairs: Sequence[tuple[int, int]]) -> list[float]:
    """`link` (depends_on) of each pair; seconds each."""
    seconds = []
    for src, dst in pairs:
        started = time.perf_counter()
        memory.link(ids[src], ids[dst], "depends_on", actor=ACTOR)
        seconds.append(time.perf_counter() - started)
    return seconds
