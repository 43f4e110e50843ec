"""Likely updates: does a note look like a newer value of a fact another note states?

A pure detector over texts (no store, no model). Two notes look like one fact with different values
when
- they share a subject (`subject_key`: case, spaces and punctuation aside) and their values differ: "same subject
  'service.port'; 8080 → 9090"; or
- a statement (a sentence) of one and a statement of the other say the same thing around a value
  and differ in that value: content words in common, the same words on either side of the value,
  and a value in each that the other statement lacks ("I've already bought three tops from H&M" →
  "I've already got five tops from H&M").
Values are numbers, written as digits or as words ("five", "fifth", "twice"; "5th" reads as 5), with
what is glued to them ("$400", "6:00", "70-200mm"). A text without values (or with the same values)
is never proposed: two notes that merely say similar things are not an update of one another.

`likely_updates` ranks the candidates a write already found (the similar active notes) and says of
each that qualifies why; `conflict` asks the same of two notes. Recall marks the older of two current
notes filed under one subject with different values and no edge between them (`unlinked_conflicts`:
the subject rule only, and a mark never moves a chain). Nothing here stores anything.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .model import ChainStatus, Note
from .views import Chain, NoteView

MAX_PROPOSALS = 3  # a write proposes at most this many notes it may replace, best first
# Two statements state one fact when they share MIN_SHARED content words, at least MIN_OVERLAP of
# the shorter one's, and a changed value sits in the same words: the FRAME tokens on each side of it
# in both match for at least MIN_FRAME ("bought three tops from" / "got five tops from": 3.4). Chosen
# on LongMemEval's knowledge updates and seed 000's near-neighbours for precision first
# (bench/longmemeval_ku.py, "Likely updates"; docs/benchmarks.md).
MIN_SHARED = 2
MIN_OVERLAP = 0.3
FRAME = 3
COUNTED = 2
MIN_FRAME = 2.8
END = "</s>"  # what follows a value that ends its statement (`_frames`)
_NOT_WORD = re.compile(r"[\W_]+")

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+|\s[-–—]+\s|:\s")
_TOKEN = re.compile(r"\$?\d[\d,]*(?:[.:/-]\d+)*[a-z%]*|[a-z][a-z'’]*")
_NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
    "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14", "fifteen": "15",
    "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30",
    "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90",
    "hundred": "100", "thousand": "1000", "dozen": "12", "twice": "2", "thrice": "3", "once": "1",
    "third": "3", "fourth": "4", "fifth": "5", "sixth": "6", "seventh": "7", "eighth": "8", "ninth": "9",
    "tenth": "10",
}  # fmt: skip
# Every text a value token can come from holds a digit or a number word standing alone (a superset:
# what _TOKEN reads as a number word is never inside a longer word).
_MAY_HOLD_VALUE = re.compile(r"\d|(?<![a-z])(?:" + "|".join(_NUMBER_WORDS) + r")(?![a-z'’])")
# "one" and "first"/"second" are left out: "a new one", "my first time", "a second" rarely count anything.
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_STOP_WORDS = """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't could did didn't do does doesn't doing don't down during each few for
    from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him
    himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's me more most
    mustn't my myself no nor not now of off on only or other ought our ours ourselves out over own same shan't
    she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
    whom why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    actually already really way by anyway also still just lately recently now currently been got get getting
    think thinking know like well thanks thank great good yes oh speaking much many lot lots one ones"""
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Change:
    """Why a newer note looks like an update of an older one."""

    older: set[str] | frozenset[str]
    newer: set[str] | frozenset[str]
    subject: str | None = None
    older_statement: str | None = None  # where the values were found: the statement, or (same subject) the text
    newer_statement: str | None = None

    @functools.cached_property  # recall finds the same changes again (`_conflict` keeps them)
    def reason(self) -> str:
        """What changed: each old value with the new one of the same unit, where the units say which
        ("8 cores, 16 GB" → "32 GB, 4 cores": 8 → 4, 16 → 32); else each side's values in the order its
        text says them."""
        pairs = _paired(self.older, self.older_statement, self.newer, self.newer_statement)
        if pairs is not None:
            values = ", ".join(f"{a} → {b}" for a, b in pairs)
        else:
            older, newer = _in_order(self.older, self.older_statement), _in_order(self.newer, self.newer_statement)
            values = f"{', '.join(older) or '(none)'} → {', '.join(newer) or '(none)'}"
        if self.subject is not None:
            return f"same subject {self.subject!r}; {values}"
        return f"{values} in the same statement: {_quote(self.older_statement)} → {_quote(self.newer_statement)}"


@dataclass(frozen=True)
class Proposal:
    note: Note
    similarity: float | None
    change: Change


def likely_updates(new: Note, candidates: Sequence[tuple[Note, float | None]]) -> list[Proposal]:
    """The candidates (older active notes, with their similarity to `new`) that `new` likely replaces, best first.

    At most MAX_PROPOSALS; a candidate recorded after `new`, or `new` itself, is never proposed."""
    found = []
    for note, similarity in candidates:
        if note.id == new.id or note.recorded_at > new.recorded_at:
            continue
        change = conflict(note, new)
        if change is not None:
            found.append(Proposal(note, similarity, change))
    found.sort(key=lambda p: (p.change.subject is None, -(p.similarity or 0.0), p.note.id))
    return found[:MAX_PROPOSALS]


def conflict(older: Note, newer: Note) -> Change | None:
    """How `newer` looks like a new value of the fact `older` states, or None when it does not."""
    return _conflict(older.text, older.subject, newer.text, newer.subject)


@functools.lru_cache(maxsize=16384)  # recall asks again of the notes a query keeps finding
def _conflict(older: str, older_subject: str | None, newer: str, newer_subject: str | None) -> Change | None:
    if older.strip() == newer.strip():
        return None
    if subject_key(older_subject) and subject_key(older_subject) == subject_key(newer_subject):
        old_values, new_values = _all_values(older), _all_values(newer)
        if old_values != new_values:
            return Change(old_values - new_values, new_values - old_values, newer_subject, older, newer)
        return None
    return statement_change(older, newer)


def subject_key(subject: str | None) -> str:
    """What makes two subjects one: their letters and digits, case-folded ("Payments.Port", "payments
    port" and "payments_port" are one); "" for none."""
    return _NOT_WORD.sub("", (subject or "").casefold())


Frame = tuple[frozenset[str], frozenset[str], frozenset[str]]  # words before, words after, what it counts


@dataclass(frozen=True)
class _Statement:
    text: str
    values: frozenset[str]  # lower-cased, normalised
    words: frozenset[str]  # content words, crudely stemmed
    frames: tuple[tuple[str, Frame], ...]  # each occurrence of a value with its surroundings


@functools.lru_cache(maxsize=4096)
def _statements(text: str) -> tuple[_Statement, ...]:
    """A text's statements that hold a value and a content word, each analysed once (recall compares
    every pair of the current heads it found: the work per pair is set arithmetic)."""
    out = []
    if not _MAY_HOLD_VALUE.search(text.lower()):
        return ()
    for part in _SENTENCE.split(text):
        tokens = _tokens(part)
        values = frozenset(t for t in tokens if _is_value(t))
        if not values:
            continue
        words = frozenset(_stem(t) for t in tokens if not _is_value(t) and len(t) > 2 and t not in _STOP)
        if words:
            out.append(_Statement(part.strip(), values, words, _frames(tokens)))
    return tuple(out)


def statement_change(older: str, newer: str) -> Change | None:
    """The statement rule alone: a statement of each says the same words around a different value
    (what `likely_updates` proposes between notes without one subject; bench/false_marks.py measures it)."""
    best: tuple[float, Change] | None = None
    for new in _statements(newer):
        for old in _statements(older):
            gone, came = old.values - new.values, new.values - old.values
            if not gone or not came:
                continue  # the same values, or one added beside them: not a new value of them
            shared = new.words & old.words
            if len(shared) < MIN_SHARED or len(shared) < MIN_OVERLAP * min(len(new.words), len(old.words)):
                continue
            frame = max(
                _frame_match(a, b)
                for value_a, a in old.frames
                if value_a in gone
                for value_b, b in new.frames
                if value_b in came
            )
            if frame >= MIN_FRAME and (best is None or frame > best[0]):
                best = (frame, Change(gone, came, older_statement=old.text, newer_statement=new.text))
    return best[1] if best else None


def _frames(tokens: Sequence[str]) -> tuple[tuple[str, Frame], ...]:
    """Each value among `tokens` with the words just before and just after it (FRAME tokens each side;
    a value that ends its statement has END after it, which counts as a word in common with another
    that ends its own: "listens on port 8080." / "listens on port 9090."), and the content words among
    the COUNTED tokens after it (what the value counts)."""
    out = []
    for i, token in enumerate(tokens):
        if _is_value(token):
            before = frozenset(t for t in tokens[max(0, i - FRAME) : i] if not _is_value(t))
            after = frozenset(t for t in tokens[i + 1 : i + 1 + FRAME] if not _is_value(t)) or frozenset({END})
            counted = frozenset(_stem(t) for t in tokens[i + 1 : i + 1 + COUNTED] if _content(t))
            out.append((token, (before, after, counted)))
    return tuple(out)


def _frame_match(a: Frame, b: Frame) -> float:
    """How alike two values' surroundings are: each word in common on the same side counts 1, a stop word 0.4;
    0 when what the values count differs (each has a content word right after it that the other lacks:
    "17 new postcards" and "17 new stamps")."""
    if (a[2] - b[2]) and (b[2] - a[2]):
        return 0.0
    return sum(_frame_weight(w) for side in (0, 1) for w in a[side] & b[side])


def _frame_weight(word: str) -> float:
    """What a word in common beside two values counts: a stop word less than a content word."""
    return 0.4 if word in _STOP else 1.0


@functools.lru_cache(maxsize=4096)
def _all_values(text: str) -> frozenset[str]:
    return frozenset(t for t in _tokens(text) if _is_value(t))


def _tokens(text: str) -> list[str]:
    """A text's words and values, lower-cased and normalised (`_normal`), in order."""
    return [_normal(t) for t in _TOKEN.findall(text.lower())]


def _normal(token: str) -> str:
    token = _NUMBER_WORDS.get(token, token)
    ordinal = _ORDINAL.match(token)
    return ordinal.group(1) if ordinal else token.rstrip(".,")


def _content(token: str) -> bool:
    return not _is_value(token) and len(token) > 2 and token not in _STOP


def _is_value(token: str) -> bool:
    """A token of _TOKEN (normalised) is a value when it starts with a digit or "$": its words hold no digit."""
    return token[:1].isdigit() or token[:1] == "$"


def _stem(word: str) -> str:
    word = word.replace("’", "'").removesuffix("'s")
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _paired(
    older: set[str] | frozenset[str], older_text: str | None, newer: set[str] | frozenset[str], newer_text: str | None
) -> list[tuple[str, str]] | None:
    """Each of several old values with the new value of the same unit (the word right after it: "8
    cores" and "4 cores"), in the older text's order; None unless each unit names one value a side."""
    if len(older) != len(newer) or len(older) < 2 or older_text is None or newer_text is None:
        return None
    old_units, new_units = _units(older, older_text), _units(newer, newer_text)
    if len(set(old_units.values())) < len(older) or set(old_units.values()) != set(new_units.values()):
        return None
    by_unit = {unit: value for value, unit in new_units.items()}
    return [(value, by_unit[old_units[value]]) for value in _in_order(older, older_text)]


def _units(values: set[str] | frozenset[str], text: str) -> dict[str, str]:
    """Each of `values` with the token right after where `text` first says it (END at its end)."""
    tokens = _tokens(text)
    units: dict[str, str] = {}
    for i, token in enumerate(tokens):
        if token in values and token not in units:
            units[token] = tokens[i + 1] if i + 1 < len(tokens) else END
    return units


def _in_order(values: set[str] | frozenset[str], text: str | None) -> list[str]:
    """`values` in the order `text` first says them (any it does not say last, sorted)."""
    first: dict[str, float] = {}
    for position, token in enumerate(_tokens(text or "")):
        first.setdefault(token, position)
    return sorted(values, key=lambda v: (first.get(v, math.inf), v))


def _quote(text: str | None, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# -- recall: current notes of different chains that look like one fact ------------------------------


@dataclass(frozen=True)
class Outdated:
    """A chain whose head looks replaced by a newer current note of another chain, with no edge between them."""

    chain_id: str
    by: str  # the newer note
    by_chain: str
    change: Change

    @property
    def reason(self) -> str:  # worked out for the chains marked, not for every pair found
        return self.change.reason


def unlinked_conflicts(
    chains: Sequence[Chain], distinct: Callable[[str], set[str]] = lambda _: set()
) -> dict[str, Outdated]:
    """Chain id → the newest current note of another chain filed under the same subject with another value.

    Only the subject rule marks what recall delivers: the writer said these notes hold one fact. The
    statement rule (the same words around a different value) marked 21.9 % of the current notes recall
    delivered on a day of ordinary notes, every mark false ("Staging runs 3 replicas" / "Production
    runs 6 replicas"; bench/false_marks.py), so it only proposes updates to the writer
    (`likely_updates`), who decides. A mark annotates; it never moves a chain (recall's order is
    relevance and the recorded lifecycle). Only chains with current heads take part; two notes an edge
    relates (one refines or needs the other, or `distinct` says they state different facts) are not
    compared: the writer said how they relate. Each chain's newer candidates are looked at newest first."""
    current = [c for c in chains if c.status is ChainStatus.CURRENT and c.heads]
    heads = [(n, h) for n, c in enumerate(current) for h in c.heads]
    named = [_named(c) | {d for h in c.heads for d in distinct(h.id)} for c in current]
    ids = [{h.id for h in c.heads} for c in current]
    # older chain → its candidates: (newer note, the pair's place chain by chain as listed, older note, newer chain)
    newer_of: dict[int, list[tuple[NoteView, tuple[int, int, int, int], NoteView, int]]] = {}
    for a, b in _same_subject_pairs([h.subject for _, h in heads]):
        (first, a_note), (second, b_note) = heads[a], heads[b]
        if a_note.recorded_at < b_note.recorded_at:
            newer_of.setdefault(first, []).append((b_note, (first, second, a, b), a_note, second))
        elif b_note.recorded_at < a_note.recorded_at:
            newer_of.setdefault(second, []).append((a_note, (first, second, a, b), b_note, first))
    outdated: dict[str, Outdated] = {}
    for chain, candidates in newer_of.items():
        candidates.sort(key=lambda c: c[1])
        candidates.sort(key=lambda c: c[0].recorded_at, reverse=True)  # newest first; a tie as listed
        for newer, _, older, newer_chain in candidates:
            if newer_chain == chain or named[chain] & ids[newer_chain] or named[newer_chain] & ids[chain]:
                continue  # one chain, or related: the writer said how
            change = conflict(older, newer)
            if change is not None:
                chain_id = current[chain].chain_id
                outdated[chain_id] = Outdated(chain_id, newer.id, current[newer_chain].chain_id, change)
                break
    return outdated


def _same_subject_pairs(subjects: Sequence[str | None]) -> list[tuple[int, int]]:
    """The pairs (i < j, in order) of notes filed under one subject (`subject_key`)."""
    by_subject: dict[str, list[int]] = {}
    for i, subject in enumerate(subjects):
        if key := subject_key(subject):
            by_subject.setdefault(key, []).append(i)
    return sorted((i, j) for group in by_subject.values() for x, i in enumerate(group) for j in group[x + 1 :])


def _named(chain: Chain) -> set[str]:
    """A chain's heads, its prerequisites and the notes its heads refine: a chain whose head is among
    them is related to it (the writer said how)."""
    return (
        {h.id for h in chain.heads} | {p.id for p in chain.prerequisites} | {r for h in chain.heads for r in h.refines}
    )


def mark_outdated(delivered: Sequence[Chain], outdated: dict[str, Outdated]) -> list[Chain]:
    """Each delivered chain that a delivered newer note looks to outdate, marked; both stay."""
    shown = {h.id for c in delivered for h in c.heads}
    out = []
    for chain in delivered:
        o = outdated.get(chain.chain_id)
        if o is not None and o.by in shown:
            chain = chain.model_copy(update={"possibly_outdated_by": o.by, "outdated_reason": o.reason})
        out.append(chain)
    return out
