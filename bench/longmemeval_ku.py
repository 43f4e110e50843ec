"""LongMemEval's knowledge-update questions through corrigenda: is the latest value delivered as current?

The data (bench/data/longmemeval-ku/, see SOURCE.md there; LongMemEval, Wu et al., ICLR 2025, MIT):
the 78 knowledge-update questions (72 + 6 abstention), each with a chat history in which the user
states a value and later a newer one, and an index of the evidence turns (`has_answer`) with the kind
of question: current (59), historical (8), current_and_historical (2), direction_of_change (3),
abstention (6).

Notes and dates. Every user turn is one note. The S variant's dates are used in both settings (the
oracle variant dates the same sessions differently): sessions sorted by date, ties by array index;
a note's `valid_from` is its session's date and its `recorded_at` that date + 1 s per earlier session
of the same minute + 1 ms per turn position, so the order is strict. A turn longer than the engine's
20,000-character limit (two S turns, neither evidence) is stored as consecutive notes 1 µs apart.
- oracle setting: the user turns of the evidence sessions only;
- s setting: the user turns of the whole S history (about 240 notes per question).
Each (setting, question) gets a fresh LanceDB store in a temporary directory, so full-text
statistics come from that one user's notes; each mode writes into its own scope there.

Evidence. The evidence notes of a question are its `has_answer` turns in time order; each evidence
turn is its own note, including two in one session (830ce83f, 8fb83627: a session states a value
twice). The *latest evidence note* is the last of them; the *older* ones are all the others. Two
questions have one evidence turn (nothing older); abstention questions have none. By the S dates
618f13b2's two evidence sessions come in the reverse of the index's order: the store's timeline
wins (its "latest" note is the one its S dates make latest), so its gold answer lies in the older
note and it is not eligible for answer hits; the script lists such questions.

The question is asked at `asked_at`: the S question date, moved to one minute after the latest
evidence note where the data dates that note after the question (2133c1b5, in both variants: a
question cannot come before its answer was said). Notes recorded after `asked_at` exist in the store
but `as_of` hides them (the script counts them).

Modes, with one write per run of non-evidence turns (`import_notes`, one embedding batch, no
edges) and the evidence notes written in time order between them:
- edges: the first evidence note through `remember`, each later one through `correct` of the one
  before (reason "the user stated a newer value"), as an agent that records its corrections would.
  Not knowing the old note's id, such an agent first recalls what it is about to record (the newer
  turn's text, recall's default 2,000 tokens, as of the turn's time); the bench makes that call and
  counts whether it shows the previous evidence note as a head, but corrects the right note either way;
- remember: every evidence note through `remember`, no edges (the stale baseline); so is every other
  turn of the sessions that hold evidence, one by one, so that `remember`'s `likely_updates` can be
  measured on notes that are not updates. For each update
  (a pair of consecutive evidence notes) it records whether `remember`'s `similar_active` for the
  newer note lists the older one: what would let an agent decide to call `correct`. (Where three
  evidence notes form two updates, a second column also counts the update as found when the list
  names any earlier evidence note; the target uses the first);
- subject: every evidence note through `remember` with one subject per question, no edges named: the
  first with `one_value=True` (declaring that the subject holds one value in the scope), each later one
  with the subject alone, so the store supersedes the subject's current note by itself. The subject
  is "lme-ku <question id>": all of a question's evidence turns get it and no other turn has one,
  which is what a careful agent filing "the number of sources in my reference manager" under one key
  would do. It comes from the benchmark's index of evidence turns, not from an agent reading the
  chat, so this mode is the UPPER BOUND of what declaring a one-value subject buys, not a measurement
  of agents choosing subjects (an agent that files a value under two spellings that differ in more
  than case, spaces or punctuation, or files an unrelated turn under it, gets less or worse).
Likely updates (remember mode): `remember`'s `likely_updates` for each note written through it. A
proposal is right when an evidence note proposes an older evidence note; it *restates* when a turn
that is not evidence proposes an older evidence note and names the gold answer (it states the newer
value again, e.g. a later turn of the same session; the index marks only one turn); every other
proposal is false. Recall: the updates (consecutive evidence pairs) whose newer note proposes the
older. Precision is given strict (restatements false) and with restatements right.
Then `recall(question, as_of=asked_at)` at budgets of 256, 512 and 1024 tokens, default settings.

Dense baseline, in the same process over the same notes: the notes recorded by `asked_at`, ranked by
cosine to the question (the same all-MiniLM-L6-v2 vectors the store holds), best first, ties by
time; each taken if it still fits the budget, else skipped (as corrigenda's packer does with a
chain). A note costs `corrigenda.store.tokens.estimate_tokens(text)` + 18 (corrigenda's
`NOTE_OVERHEAD`; corrigenda also charges 16 per chain and, for history, 18 + the reason). Every dense
note is shown as current: it is one chain of one head.

Metrics, per question, system (edges, remember, subject, dense) and budget; "first head" is the first
head of the first delivered chain that is not marked `possibly_outdated_by` a newer note (dense: the top
note; recall marks a chain when a delivered newer current note looks like the same fact with a
different value and no edge relates them, and an agent reading the result is told to prefer the
newer, so a marked chain's head is not one it takes as current):
- current@1: the first chain is `current` with exactly one head, the latest evidence note, and every
  older evidence note is in that chain's delivered history. Not applicable to dense (nothing is
  marked as history). Over the questions with evidence.
- latest@1: the first head is the latest evidence note. Over the questions with evidence.
- latest first: the first head of the first delivered chain, marked or not (what an agent reads
  first), is the latest evidence note. Over the questions with evidence.
- latest marked: the latest evidence note is delivered as a head of a chain marked possibly outdated:
  a false mark on the current value (lower is better). Not applicable to dense. Over the questions
  with evidence.
- stale@1: the first head is an older evidence note. Over the questions with older evidence.
- stale head: some older evidence note is delivered as a head of some chain not marked possibly
  outdated (dense: delivered at all, since dense shows every note as current). Lower is better. Over
  the questions with older evidence.
- older marked: every older evidence note delivered as a head is in a chain marked possibly outdated.
  Over the questions that deliver an older evidence note as a head; not applicable to dense.
- history kept: every older evidence note is delivered (in any role; with edges it can only come as
  history). Over the historical kinds (historical, current_and_historical, direction_of_change).
- chain intact: some delivered chain is `current` with the latest evidence note as its only head and
  every older evidence note in its history, none trimmed. Edges and subject modes only (no edges, no
  chain). The subject mode's edges carry the store's reason ("'lme-ku …' holds one value in scope
  '…': the new note replaces its current note"), longer than edges mode's, and a history entry's
  reason counts against the budget.
- answer hit: the gold answer (as a string: trimmed, a final period dropped, case-insensitive, at word
  boundaries) appears in the text of some delivered head (dense: some delivered note). Only for the
  questions whose answer string appears in the latest evidence note and in no other note of that
  setting's history, so that a hit means the current value was delivered as current.
- abstained: for the abstention questions, no delivered head (dense: note) mentions the entity the
  question asks about that the history never mentions (taken from the gold answer, "… but not X.",
  matched like the answer string). No note of this data names any of the six entities (the script
  counts them), so no system can fail this check here: it guards against a future data change only.
Tables split every figure by question kind; `all` pools the kinds.

Tool calls, per update (a pair of consecutive evidence notes): the calls the writer made to record the
newer note, counted as the mode makes them (edges: recall_chains then correct; subject and remember:
remember), whether the previous note was superseded by that write (subject mode: `remember`'s
`replaced` names it), and for edges mode whether the lookup recall showed the previous note as a
head, and in its first chain (where it does not, an agent would need more calls or would not find the
id at all).

Perturbations, on the edges store of each question with older evidence, after its recalls (latest
L at time t_L, previous P, the question at t_Q, d = (t_Q - t_L) / 4), run in this order, each with
an exact expected state; checks 2-5 read it through `history(…, as_of)` and through a `recall` at
1024 tokens at the same `as_of` (the chain holding the note must be delivered, with the same heads
and status); the table lists them in the issue's order:
1. why_excluded(P, question, as_of=t_Q, 1024 tokens), before any perturbation: its state reason says
   "superseded by L at t_L" (to the second) and `replaced_by` is [L].
2. as_of halfway between P and L: P is the only head (current) and L is not delivered.
3. revoke L at t_L + d, checked at t_L + 1.5 d: P is the only head, current.
4. reinstate L at t_L + 2 d, checked at t_L + 2.5 d: L is the only head again, current.
5. reinstate the supersedes event L → P at t_L + 3 d, checked at t_Q: heads [L, P], contested.

Targets (issue 4), S setting: with edges, current@1 >= 0.97 and no stale head at 512 tokens; in
remember-only mode, `similar_active` lists the older note for >= 0.90 of updates. The script prints
each with its failing ids and, for every miss of current@1 or stale head in edges or subject mode at
512 tokens, a diagnosis: its cause
(history trimmed: the first chain is the latest's, but the budget left no room for its history;
another chain first; latest not delivered), the first chain's entry note with its retrieval ranks
and scores, the entry of the latest's chain when that came later, and why_excluded of each older
note left out. For similar_active: the notes it listed instead, and why_excluded of the older note
for the newer note's text as of just before the newer was written (the same candidate search
`similar_active` ran; it lists at most 5 notes).

Embeddings: a caching Embedder wraps the real SentenceTransformerEmbedder (same `name`, same
vectors up to batching noise): each distinct text is embedded once, in one batch up front, and
reused by both modes, both settings and the dense baseline (S histories share few sessions, so the
cache mostly saves the second mode and the oracle setting).

Run from the repository root (about 18,000 distinct texts to embed on a full run):

    OMP_NUM_THREADS=1 .venv/bin/python bench/longmemeval_ku.py [--json PATH] [--settings oracle s]
        [--modes edges remember subject] [--limit N] [--questions ID ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from corrigenda.store import ChainStatus, Draft, EventKind, Memory, SentenceTransformerEmbedder
from corrigenda.store.memory import MAX_TEXT
from corrigenda.store.recall import NOTE_OVERHEAD
from corrigenda.store.tokens import estimate_tokens
from corrigenda.store.views import Corrected, RecallResult, Remembered
from embedding_cache import CachedEmbedder
from harness import write_results

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "longmemeval-ku"
INDEX_FILE = "knowledge_update_evidence_index.json"
ORACLE_FILE = "longmemeval_oracle_knowledge_update.json.gz"
S_FILE = "longmemeval_s_knowledge_update.no_assistant_text.json.gz"

SETTINGS = ("oracle", "s")
MODES = ("edges", "remember", "subject")
LINKED = frozenset({"edges", "subject"})  # the modes whose writer records each update as an edge
SYSTEMS = (*MODES, "dense")
BUDGETS = (256, 512, 1024)
KINDS = ("current", "historical", "current_and_historical", "direction_of_change", "abstention")
HISTORICAL_KINDS = frozenset({"historical", "current_and_historical", "direction_of_change"})
METRICS = (
    "current@1", "latest@1", "latest first", "latest marked", "stale@1", "stale head", "older marked", "history kept",
    "chain intact", "answer hit", "abstained",
)  # fmt: skip
TARGET_BUDGET = 512
PERTURBATION_BUDGET = 1024
ACTOR = "longmemeval-ku"
CORRECTION_REASON = "the user stated a newer value"
LOOKUP_BUDGET = 2000  # recall's default: the recall an agent makes to learn the id of the note it corrects
CHECKS = (
    "revoke latest -> previous is the head",
    "reinstate latest -> latest is the head again",
    "reinstate the supersedes event -> contested",
    "as_of between the sessions -> the old value",
    "why_excluded(previous) -> superseded by latest at its time",
)


class DataError(ValueError):
    """The vendored data does not have the shape the benchmark needs."""


# -- the data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One user turn (or one part of a turn too long for a note), as the note it becomes."""

    key: str  # "session_id#turn_index", plus ".part" for a split turn
    session_id: str
    text: str
    at: datetime
    valid_from: datetime
    evidence: bool


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    question: str
    answer: str
    question_date: datetime  # the S variant's
    asked_at: datetime  # as_of of every recall: question_date, or just after a later-dated latest evidence
    evidence: tuple[Turn, ...]  # time order
    haystacks: dict[str, tuple[Turn, ...]]  # setting → user turns in time order
    index_order: bool  # whether the S dates keep the index's order of the evidence
    missing_entity: str | None  # abstention: what the question asks about that the history never mentions

    @property
    def latest(self) -> Turn | None:
        return self.evidence[-1] if self.evidence else None

    @property
    def older(self) -> tuple[Turn, ...]:
        return self.evidence[:-1]


def parse_date(text: str) -> datetime:
    """LongMemEval's "2023/05/30 (Tue) 22:16", as UTC."""
    return datetime.strptime(f"{text[:10]} {text[-5:]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def phrase(text: str) -> re.Pattern[str]:
    """A case-insensitive match of `text` at word boundaries (a final period dropped)."""
    text = str(text).strip().removesuffix(".").strip()
    return re.compile(r"(?<!\w)" + re.escape(text) + r"(?!\w)", re.IGNORECASE)


def _parts(text: str) -> list[str]:
    text = text.strip()
    chunks = [text[i : i + MAX_TEXT].strip() for i in range(0, len(text), MAX_TEXT)]
    return [c for c in chunks if c]


def load(data_dir: Path = DATA) -> list[Question]:
    index = json.loads((data_dir / INDEX_FILE).read_text(encoding="utf-8"))
    with gzip.open(data_dir / ORACLE_FILE, "rt", encoding="utf-8") as f:
        oracle = {x["question_id"]: x for x in json.load(f)}
    with gzip.open(data_dir / S_FILE, "rt", encoding="utf-8") as f:
        s_items = {x["question_id"]: x for x in json.load(f)}
    ids = [x["question_id"] for x in index]
    if not (set(ids) == set(oracle) == set(s_items)) or len(ids) != 78:
        raise DataError("the index, the oracle and the S file do not hold the same 78 questions")
    return [_question(entry, s_items[entry["question_id"]], oracle[entry["question_id"]]) for entry in index]


def _question(entry: dict[str, Any], item: dict[str, Any], oracle_item: dict[str, Any]) -> Question:
    qid = entry["question_id"]
    session_ids: list[str] = item["haystack_session_ids"]
    dates = [parse_date(d) for d in item["haystack_dates"]]
    order = sorted(range(len(session_ids)), key=lambda i: (dates[i], i))
    evidence_keys = {f"{e['session_id']}#{e['turn_index']}": e for e in entry["evidence_in_time_order"]}

    turns: list[Turn] = []
    same_minute: dict[datetime, int] = {}
    for i in order:
        tie = same_minute[dates[i]] = same_minute.get(dates[i], -1) + 1
        start = dates[i] + timedelta(seconds=tie)
        for position, turn in enumerate(item["haystack_sessions"][i]):
            if turn["role"] != "user":
                continue
            key = f"{session_ids[i]}#{position}"
            evidence = key in evidence_keys
            if bool(turn.get("has_answer")) != evidence:
                raise DataError(f"{qid}: turn {key} has_answer={turn.get('has_answer')} but the index says {evidence}")
            if evidence and evidence_keys[key]["content"] != turn["content"]:
                raise DataError(f"{qid}: the index's text of {key} differs from the S file's")
            parts = _parts(turn["content"])
            for p, text in enumerate(parts):
                at = start + timedelta(milliseconds=position, microseconds=p)
                turns.append(
                    Turn(key if len(parts) == 1 else f"{key}.{p}", session_ids[i], text, at, dates[i], evidence)
                )

    oracle_sessions = set(oracle_item["haystack_session_ids"])
    for sid, session in zip(oracle_item["haystack_session_ids"], oracle_item["haystack_sessions"], strict=True):
        if sid not in session_ids:
            raise DataError(f"{qid}: oracle session {sid} is not in the S history")
        s_session = item["haystack_sessions"][session_ids.index(sid)]
        if [t["content"] for t in session if t["role"] == "user"] != [
            t["content"] for t in s_session if t["role"] == "user"
        ]:
            raise DataError(f"{qid}: oracle session {sid} differs from the S file's")
    evidence_turns = tuple(t for t in turns if t.evidence)
    if len(evidence_turns) != len(evidence_keys):
        raise DataError(f"{qid}: {len(evidence_keys)} evidence turns in the index, {len(evidence_turns)} found")

    question_date = parse_date(item["question_date"])
    asked_at = question_date
    if evidence_turns and evidence_turns[-1].at >= question_date:
        asked_at = evidence_turns[-1].at + timedelta(minutes=1)
    missing = None
    if entry["question_kind"] == "abstention":
        found = re.search(r"but not (.+?)\.?$", str(entry["answer"]).strip())
        if found is None:
            raise DataError(f"{qid}: no 'but not X' in the abstention answer")
        missing = found.group(1)
    return Question(
        id=qid, kind=entry["question_kind"], question=entry["question"], answer=str(entry["answer"]),
        question_date=question_date, asked_at=asked_at, evidence=evidence_turns,
        haystacks={"oracle": tuple(t for t in turns if t.session_id in oracle_sessions), "s": tuple(turns)},
        index_order=[t.key for t in evidence_turns] == list(evidence_keys),
        missing_entity=missing,
    )  # fmt: skip


def answer_pattern(q: Question, setting: str) -> re.Pattern[str] | None:
    """The gold answer as a pattern, if it appears in the latest evidence note and in no other note."""
    if q.latest is None:
        return None
    pattern = phrase(q.answer)
    if not pattern.search(q.latest.text):
        return None
    if any(pattern.search(t.text) for t in q.haystacks[setting] if t.key != q.latest.key):
        return None
    return pattern


# -- what a system delivered, in one shape for corrigenda and dense ------------------------------


@dataclass
class Shown:
    """A delivered chain (dense: one note), by turn keys."""

    heads: list[str]
    head_texts: list[str]
    history: list[str]
    status: str
    trimmed_history: int = 0
    entry: str | None = None
    entry_similarity: float | None = None
    entry_score: float | None = None
    outdated_by: str | None = None  # the chain is marked possibly outdated by this note (its turn key)


def shown_chains(result: RecallResult, keys: dict[str, str]) -> list[Shown]:
    return [
        Shown(
            heads=[keys[h.id] for h in c.heads],
            head_texts=[h.text for h in c.heads],
            history=[keys[h.note.id] for h in c.history],
            status=c.status.value,
            trimmed_history=c.trimmed_history,
            entry=keys[c.entry.note_id] if c.entry else None,
            entry_similarity=c.entry.similarity if c.entry else None,
            entry_score=c.entry.score if c.entry else None,
            outdated_by=keys.get(c.possibly_outdated_by, c.possibly_outdated_by) if c.possibly_outdated_by else None,
        )
        for c in result.chains
    ]


def score(q: Question, system: str, chains: list[Shown], pattern: re.Pattern[str] | None) -> dict[str, bool | None]:
    """The metrics of the module docstring; None where one does not apply."""
    m: dict[str, bool | None] = dict.fromkeys(METRICS)
    head_texts = [t for c in chains for t in c.head_texts]
    if q.kind == "abstention":
        assert q.missing_entity is not None
        mention = phrase(q.missing_entity)
        m["abstained"] = not any(mention.search(t) for t in head_texts)
        return m
    assert q.latest is not None
    latest, older = q.latest.key, {t.key for t in q.older}
    first = chains[0] if chains else None
    # A chain marked possibly outdated says its head is not to be trusted as current: an agent reads
    # the first head of the first unmarked chain as the answer, and a marked head is not a stale head.
    trusted = [c for c in chains if c.outdated_by is None]
    top = next((c.heads[0] for c in trusted if c.heads), None)
    m["latest@1"] = top == latest
    m["latest first"] = bool(first and first.heads and first.heads[0] == latest)
    if system != "dense":
        # a false mark: the latest value delivered as a head and labelled possibly outdated
        m["latest marked"] = any(c.outdated_by is not None and latest in c.heads for c in chains)
        m["current@1"] = (
            first is not None
            and first.heads == [latest]
            and first.status == ChainStatus.CURRENT.value
            and older <= set(first.history)
        )
    if older:
        heads = {h for c in chains for h in c.heads}
        m["stale@1"] = top in older
        m["stale head"] = bool({h for c in trusted for h in c.heads} & older)
        if heads & older and system != "dense":  # dense marks nothing
            m["older marked"] = not any(c.outdated_by is None and set(c.heads) & older for c in chains)
        if q.kind in HISTORICAL_KINDS:
            m["history kept"] = older <= heads | {h for c in chains for h in c.history}
        if system in LINKED:
            m["chain intact"] = any(
                c.heads == [latest] and c.status == ChainStatus.CURRENT.value and older <= set(c.history)
                and c.trimmed_history == 0
                for c in chains
            )  # fmt: skip
    if pattern is not None:
        m["answer hit"] = any(pattern.search(t) for t in head_texts)
    return m


def place(key: str, chains: list[Shown]) -> str:
    for rank, c in enumerate(chains, 1):
        if key in c.heads:
            return f"head of chain {rank}"
        if key in c.history:
            return f"history of chain {rank}"
    return "not delivered"


# -- the dense baseline --------------------------------------------------------------------------


def dense_ranking(q: Question, turns: Sequence[Turn], embedder: CachedEmbedder) -> list[tuple[Turn, float]]:
    visible = [t for t in turns if t.at <= q.asked_at]
    if not visible:
        return []
    query = np.asarray(embedder.embed([q.question])[0])
    matrix = np.asarray(embedder.embed([t.text for t in visible]))
    similarities = matrix @ query
    ranked = sorted(range(len(visible)), key=lambda i: (-similarities[i], visible[i].at))
    return [(visible[i], float(similarities[i])) for i in ranked]


def dense_pack(ranking: Sequence[tuple[Turn, float]], budget: int) -> tuple[list[Shown], int]:
    chosen, used = [], 0
    for turn, similarity in ranking:
        cost = estimate_tokens(turn.text) + NOTE_OVERHEAD
        if used + cost > budget:
            continue
        used += cost
        chosen.append(Shown([turn.key], [turn.text], [], ChainStatus.CURRENT.value, entry_similarity=similarity))
    return chosen, used


# -- writing a history into a store -------------------------------------------------------------


@dataclass
class Written:
    ids: dict[str, str] = field(default_factory=dict)  # turn key → note id
    keys: dict[str, str] = field(default_factory=dict)  # note id → turn key
    supersedes: list[str] = field(default_factory=list)  # event ids of the corrections, oldest first
    reason: str = CORRECTION_REASON  # the reason the updates' edges carry (subject mode: the store's)
    updates: list[dict[str, Any]] = field(default_factory=list)  # remember mode: similar_active per update
    proposals: list[dict[str, Any]] = field(default_factory=list)  # remember mode: likely_updates per note
    calls: list[dict[str, Any]] = field(default_factory=list)  # per update: the writer's tool calls

    def add(self, turn: Turn, note_id: str) -> None:
        self.ids[turn.key] = note_id
        self.keys[note_id] = turn.key


class Agent:
    """The store as the writer's tool calls for the evidence notes reach it: each call is counted by the
    tool's name, so the calls an update took are what the mode did."""

    def __init__(self, memory: Memory, scope: str) -> None:
        self.memory = memory
        self.scope = scope
        self.calls: list[str] = []

    def recall_chains(self, query: str, as_of: datetime) -> RecallResult:
        self.calls.append("recall_chains")
        return self.memory.recall(query, scope=self.scope, budget_tokens=LOOKUP_BUDGET, as_of=as_of)

    def remember(self, draft: Draft, one_value: bool = False) -> Remembered:
        self.calls.append("remember")
        return self.memory.remember(draft, scope=self.scope, actor=ACTOR, one_value=one_value)

    def correct(self, note_id: str, draft: Draft) -> Corrected:
        self.calls.append("correct")
        return self.memory.correct(note_id, draft, reason=CORRECTION_REASON, actor=ACTOR)

    def take(self) -> list[str]:
        """The calls made since the last take."""
        calls, self.calls = self.calls, []
        return calls


def subject_for(q: Question) -> str:
    """Subject mode's subject for every evidence note of `q`: one key per question, from its id. The
    benchmark knows which turns state the value asked about; an agent would have to see it."""
    return f"lme-ku {q.id}"


def write(
    memory: Memory, scope: str, turns: Sequence[Turn], mode: str, embedder: CachedEmbedder, subject: str
) -> Written:
    """Store the turns in time order: runs of plain turns in one import, evidence notes one by one."""
    written = Written()
    agent = Agent(memory, scope)
    pending: list[Turn] = []
    earlier: list[Turn] = []  # evidence notes written so far
    sessions = {t.session_id for t in turns if t.evidence} if mode == "remember" else set()
    for turn in [*turns, None]:
        if turn is not None and not turn.evidence and turn.session_id not in sessions:
            pending.append(turn)
            continue
        if pending:
            drafts = [Draft(text=t.text, at=t.at, valid_from=t.valid_from) for t in pending]
            for t, view in zip(pending, memory.import_notes(drafts, scope=scope, actor=ACTOR), strict=True):
                written.add(t, view.id)
            pending = []
        if turn is None:
            break
        if not turn.evidence:  # remember mode: a plain turn of a session that holds evidence
            remembered = memory.remember(
                Draft(text=turn.text, valid_from=turn.valid_from, at=turn.at), scope=scope, actor=ACTOR
            )
            written.add(turn, remembered.note.id)
            written.proposals.append(_proposals(turn, remembered, written))
            continue
        draft = Draft(
            text=turn.text, valid_from=turn.valid_from, at=turn.at, subject=subject if mode == "subject" else None
        )
        previous = written.ids[earlier[-1].key] if earlier else None
        replaced: list[str] = []
        found: int | None = None  # edges mode: the rank of the lookup's chain headed by the previous note, 0 if none
        if mode == "edges" and previous is not None:
            # The agent does not know the old note's id: it recalls what it is about to record, then
            # corrects. The bench corrects the right note whether or not that recall showed it.
            looked_up = agent.recall_chains(turn.text, as_of=turn.at)
            ranks = [i for i, c in enumerate(looked_up.chains, 1) if previous in (h.id for h in c.heads)]
            found = ranks[0] if ranks else 0
            corrected = agent.correct(previous, draft)
            written.add(turn, corrected.note.id)
            written.supersedes.append(corrected.event.id)
            replaced = [corrected.event.dst]
        else:
            remembered = agent.remember(draft, one_value=mode == "subject" and not earlier)
            written.add(turn, remembered.note.id)
            if mode == "subject":
                edges = [e for e in remembered.events if e.kind is EventKind.SUPERSEDES]
                written.supersedes += [e.id for e in edges]
                written.reason = (edges[-1].reason or "") if edges else written.reason
                replaced = [n.id for n in remembered.replaced.notes] if remembered.replaced else []
            else:
                written.proposals.append(_proposals(turn, remembered, written))
                if earlier:
                    written.updates.append(_update(memory, scope, earlier, turn, remembered, written, embedder))
        calls = agent.take()
        if earlier:
            written.calls.append({
                "previous": earlier[-1].key, "newer": turn.key, "calls": calls, "recorded": previous in replaced,
                "replaced": [written.keys.get(i, i) for i in replaced], "found_at": found,
            })  # fmt: skip
        earlier.append(turn)
    return written


def _proposals(turn: Turn, remembered: Remembered, written: Written) -> dict[str, Any]:
    return {
        "key": turn.key, "evidence": turn.evidence, "text": turn.text,
        "proposed": [
            {"key": written.keys.get(u.note.id, u.note.id), "reason": u.reason} for u in remembered.likely_updates
        ],
    }  # fmt: skip


def _update(
    memory: Memory, scope: str, earlier: Sequence[Turn], newer: Turn, remembered: Remembered, written: Written,
    embedder: CachedEmbedder,
) -> dict[str, Any]:  # fmt: skip
    older = earlier[-1]
    older_id = written.ids[older.key]
    listed = [s.note.id for s in remembered.similar_active]
    rank = listed.index(older_id) + 1 if older_id in listed else None
    a, b = embedder.embed([older.text, newer.text])
    record: dict[str, Any] = {
        "older": older.key, "newer": newer.key, "listed": rank is not None, "rank": rank,
        "listed_any_older": any(written.ids[t.key] in listed for t in earlier),
        "cosine": round(float(np.dot(a, b)), 4),
        "shown": [
            {"key": written.keys.get(s.note.id, s.note.id), "similarity": s.similarity, "text": s.note.text[:120]}
            for s in remembered.similar_active
        ],
    }  # fmt: skip
    if rank is None:  # the same candidate search similar_active ran, before the newer note existed
        why = memory.why_excluded(older_id, query=newer.text, scope=scope, as_of=newer.at - timedelta(microseconds=1))
        record["why"] = [r.detail for r in why.reasons if r.stage == "retrieval"]
    return record


# -- one question --------------------------------------------------------------------------------


def scope_of(setting: str, mode: str, qid: str) -> str:
    return f"lme-ku.{setting}.{mode}.{qid}"


def run_question(q: Question, setting: str, modes: Sequence[str], embedder: CachedEmbedder) -> dict[str, Any]:
    turns = q.haystacks[setting]
    pattern = answer_pattern(q, setting)
    record: dict[str, Any] = {
        "setting": setting, "id": q.id, "kind": q.kind, "question": q.question, "answer": q.answer,
        "asked_at": q.asked_at.isoformat(), "question_date": q.question_date.isoformat(),
        "notes": len(turns), "hidden_after_question": sum(1 for t in turns if t.at > q.asked_at),
        "evidence": [t.key for t in q.evidence], "answer_eligible": pattern is not None,
        "recalls": [], "updates": [], "proposals": [], "perturbations": [], "diagnoses": [], "tool_calls": [],
    }  # fmt: skip
    ranking = dense_ranking(q, turns, embedder)
    for budget in BUDGETS:
        chains, used = dense_pack(ranking, budget)
        record["recalls"].append(_recall_record("dense", budget, q, chains, used, pattern))

    # the store is closed before its directory goes: a compaction its writes set off may still be running
    with tempfile.TemporaryDirectory(prefix="lme-ku-") as directory, Memory(directory, embedder) as memory:
        for mode in modes:
            scope = scope_of(setting, mode, q.id)
            written = write(memory, scope, turns, mode, embedder, subject_for(q))
            record["updates"] += written.updates
            record["tool_calls"] += [{"mode": mode, **c} for c in written.calls]
            gold = phrase(q.answer)
            for p in written.proposals:  # evidence notes (recall) and any note that proposed (precision)
                if p["evidence"] or p["proposed"]:
                    record["proposals"].append({**p, "text": None, "names_answer": bool(gold.search(p["text"]))})
            for budget in BUDGETS:
                result = memory.recall(q.question, scope=scope, budget_tokens=budget, as_of=q.asked_at)
                chains = shown_chains(result, written.keys)
                entry = _recall_record(mode, budget, q, chains, result.used_tokens, pattern)
                entry["omitted"] = len(result.omitted)
                record["recalls"].append(entry)
                failed = entry["metrics"]["current@1"] is False or entry["metrics"]["stale head"] is True
                if mode in LINKED and budget == TARGET_BUDGET and failed:
                    found = diagnose(memory, scope, q, budget, chains, result.used_tokens, written)
                    record["diagnoses"].append({"mode": mode, **found})
            if mode == "edges" and q.older:
                record["perturbations"] = perturb(memory, scope, q, written)
    return record


def _recall_record(
    system: str, budget: int, q: Question, chains: list[Shown], used: int, pattern: re.Pattern[str] | None
) -> dict[str, Any]:
    first = chains[0] if chains else None
    return {
        "system": system, "budget": budget, "metrics": score(q, system, chains, pattern),
        "used_tokens": used, "chains": len(chains),
        "first": None if first is None else {
            "heads": first.heads, "status": first.status, "history": first.history, "entry": first.entry,
            "entry_similarity": first.entry_similarity, "text": first.head_texts[0][:160] if first.head_texts else "",
        },
        "latest": place(q.latest.key, chains) if q.latest else None,
        "older": {t.key: place(t.key, chains) for t in q.older},
    }  # fmt: skip


def diagnose(
    memory: Memory, scope: str, q: Question, budget: int, chains: list[Shown], used: int, written: Written
) -> dict[str, Any]:
    """What the engine did with a question it missed: the cause, the first chain and where the evidence went."""
    assert q.latest is not None
    latest, older = q.latest.key, [t.key for t in q.older]
    first = chains[0] if chains else None
    rank = next((i for i, c in enumerate(chains) if latest in c.heads), None)
    if first is not None and first.heads == [latest] and first.status == ChainStatus.CURRENT.value:
        cause = "history trimmed"
    elif rank is None:
        cause = "latest not delivered"
    elif rank == 0:
        cause = f"first chain {first.status if first else '?'} with heads {first.heads if first else []}"
    else:
        cause = "another chain first"
    if any(k in c.heads for c in chains for k in older):
        cause += "; stale head"

    def retrieval(key: str) -> str:
        why = memory.why_excluded(
            written.ids[key], query=q.question, scope=scope, budget_tokens=budget, as_of=q.asked_at
        )
        return "; ".join(r.detail for r in why.reasons if r.stage == "retrieval")

    def verdict(key: str) -> str:
        why = memory.why_excluded(
            written.ids[key], query=q.question, scope=scope, budget_tokens=budget, as_of=q.asked_at
        )
        return f"{why.reasons[-1].stage}: {why.reasons[-1].detail}"

    out: dict[str, Any] = {"budget": budget, "cause": cause, "used": used, "chains": len(chains)}
    if first is not None and first.entry is not None:
        out["first"] = {
            "entry": first.entry, "entry_is": _role(q, first.entry), "heads": first.heads, "status": first.status,
            "retrieval": retrieval(first.entry), "text": first.head_texts[0][:160] if first.head_texts else "",
        }  # fmt: skip
    if rank is not None and rank > 0 and chains[rank].entry is not None:
        entry = chains[rank].entry
        assert entry is not None
        out["latest_chain"] = {
            "rank": rank + 1,
            "entry": entry,
            "entry_is": _role(q, entry),
            "retrieval": retrieval(entry),
        }
    if rank is None:
        out["why_latest"] = verdict(latest)
    history_cost = [
        estimate_tokens(t.text) + estimate_tokens(written.reason) + 2 * NOTE_OVERHEAD for t in q.older
    ]  # what the packer charges for a history entry
    out["older"] = {k: verdict(k) for k in older if place(k, chains) == "not delivered"}
    out["history_cost"] = history_cost
    return out


def _role(q: Question, key: str) -> str:
    if q.latest is not None and key == q.latest.key:
        return "latest evidence"
    if key in {t.key for t in q.older}:
        return "older evidence"
    return "not evidence"


# -- perturbations -------------------------------------------------------------------------------


def perturb(memory: Memory, scope: str, q: Question, written: Written) -> list[dict[str, Any]]:
    latest_turn, previous_turn = q.evidence[-1], q.evidence[-2]
    latest, previous = latest_turn.key, previous_turn.key
    t_latest, t_q = latest_turn.at, q.asked_at
    d = (t_q - t_latest) / 4
    results: dict[str, tuple[bool, str]] = {}

    why = memory.why_excluded(
        written.ids[previous], query=q.question, scope=scope, budget_tokens=PERTURBATION_BUDGET, as_of=t_q
    )
    expected = f"superseded by {written.ids[latest]} at {t_latest.isoformat(timespec='seconds')}"
    state = next((r.detail for r in why.reasons if r.stage == "state"), "")
    replaced = [written.keys.get(n.id, n.id) for n in why.replaced_by]
    ok = state.startswith(expected) and replaced == [latest]
    results[CHECKS[4]] = (ok, f"verdict {why.verdict}; state: {state}; replaced_by {replaced}")

    between = previous_turn.at + (t_latest - previous_turn.at) / 2
    results[CHECKS[3]] = _expect(memory, scope, q, written, previous, between, [previous], "current", absent=latest)

    memory.revoke(written.ids[latest], reason="perturbation: the newer value was wrong", actor=ACTOR, at=t_latest + d)
    results[CHECKS[0]] = _expect(memory, scope, q, written, latest, t_latest + 1.5 * d, [previous], "current")
    memory.reinstate(
        written.ids[latest], reason="perturbation: it was right after all", actor=ACTOR, at=t_latest + 2 * d
    )
    results[CHECKS[1]] = _expect(memory, scope, q, written, latest, t_latest + 2.5 * d, [latest], "current")
    memory.reinstate(
        written.supersedes[-1], reason="perturbation: not a correction of that note", actor=ACTOR, at=t_latest + 3 * d
    )
    results[CHECKS[2]] = _expect(memory, scope, q, written, latest, t_q, [latest, previous], "contested")
    return [{"check": name, "pass": results[name][0], "detail": results[name][1]} for name in CHECKS]


def _expect(
    memory: Memory, scope: str, q: Question, written: Written, key: str, as_of: datetime, heads: list[str],
    status: str, absent: str | None = None,
) -> tuple[bool, str]:  # fmt: skip
    """Whether the chain of `key` has exactly these heads and status at `as_of`, in history and in a recall."""
    chain = memory.history(written.ids[key], as_of=as_of).chain
    got = [written.keys[h.id] for h in chain.heads]
    problems = []
    if got != heads or chain.status.value != status:
        problems.append(f"history: heads {got} ({chain.status.value})")
    result = memory.recall(q.question, scope=scope, budget_tokens=PERTURBATION_BUDGET, as_of=as_of)
    delivered = shown_chains(result, written.keys)
    rank = next((i for i, c in enumerate(result.chains) if c.chain_id == chain.chain_id), None)
    if rank is None:
        why = next((o.reason for o in result.omitted if o.chain_id == chain.chain_id), "not reached")
        problems.append(f"recall: the chain is not delivered ({why})")
    elif delivered[rank].heads != heads or delivered[rank].status != status:
        problems.append(f"recall: heads {delivered[rank].heads} ({delivered[rank].status})")
    if absent is not None and place(absent, delivered) != "not delivered":
        problems.append(f"recall: {absent} delivered as {place(absent, delivered)}")
    where = f"chain {rank + 1} of {len(delivered)}" if rank is not None else "no chain"
    return not problems, "; ".join(problems) or f"{where}: heads {heads} ({status})"


# -- tables --------------------------------------------------------------------------------------


def markdown(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def tally(values: Iterable[bool | None]) -> tuple[int, int]:
    present = [v for v in values if v is not None]
    return sum(present), len(present)


def cell(k: int, n: int, rate: bool = True) -> str:
    if n == 0:
        return "—"
    return f"{k / n:.2f} ({k}/{n})" if rate else f"{k}/{n}"


def recall_rows(records: list[dict[str, Any]], setting: str) -> dict[tuple[str, str, int], dict[str, tuple[int, int]]]:
    """(group, system, budget) → metric → (true, applicable), group being `all` or a kind."""
    out: dict[tuple[str, str, int], dict[str, tuple[int, int]]] = {}
    for group in ("all", *KINDS):
        members = [r for r in records if r["setting"] == setting and group in ("all", r["kind"])]
        for system in SYSTEMS:
            for budget in BUDGETS:
                found = [
                    x["metrics"]
                    for r in members
                    for x in r["recalls"]
                    if x["system"] == system and x["budget"] == budget
                ]
                if found:
                    out[group, system, budget] = {m: tally(f[m] for f in found) for m in METRICS}
    return out


def print_recall_tables(records: list[dict[str, Any]], settings: Sequence[str]) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for setting in settings:
        rows = recall_rows(records, setting)
        tables[setting] = {f"{g}|{s}|{b}": v for (g, s, b), v in rows.items()}
        for budget in BUDGETS:
            print(f"\n### {setting} setting, {budget} tokens")
            body = []
            for group in ("all", *KINDS):
                for system in SYSTEMS:
                    if (group, system, budget) not in rows:
                        continue
                    figures = rows[group, system, budget]
                    if all(n == 0 for _, n in figures.values()):
                        continue
                    body.append([group, system, *(cell(*figures[m], rate=group == "all") for m in METRICS)])
            print(markdown(["kind", "system", *METRICS], body))
    return tables


def recall_table(payload: dict[str, Any], setting: str = "s", budget: int = TARGET_BUDGET) -> str:
    """Each metric per kind of question and system, at one setting and budget, from the results file."""
    figures = payload["recall"][setting]
    body = []
    for group in ("all", *KINDS):
        for system in SYSTEMS:
            found = figures.get(f"{group}|{system}|{budget}")
            if found and any(n for _, n in found.values()):
                body.append([group, system, *(cell(found[m][0], found[m][1], rate=group == "all") for m in METRICS)])
    return markdown(["kind", "system", *METRICS], body)


def budget_table(payload: dict[str, Any]) -> str:
    """current@1 and stale heads of the edges mode (all questions) at each budget, per setting."""
    body = []
    for setting in payload["settings"]:
        for budget in payload["budgets"]:
            found = payload["recall"][setting].get(f"all|edges|{budget}")
            if found:
                body.append([setting, budget, cell(*found["current@1"]), cell(*found["stale head"])])
    return markdown(["setting", "budget (tokens)", "current@1", "stale head"], body)


def similar_table(payload: dict[str, Any]) -> str:
    body = [
        [*key.split("|"), cell(v["listed"], v["updates"]), cell(v["listed_any_older"], v["updates"])]
        for key, v in payload["similar_active"].items()
    ]
    return markdown(["setting", "kind", "lists the previous note", "lists any older evidence"], body)


def likely_update_figures(records: list[dict[str, Any]], setting: str) -> dict[str, Any]:
    """`remember`'s likely_updates in one setting: each proposal judged (module docstring), and recall."""
    right = restates = false = updates = found = found_any = 0
    false_examples: list[str] = []
    for r in records:
        if r["setting"] != setting or not r["proposals"]:
            continue
        evidence = r["evidence"]
        position = {k: i for i, k in enumerate(evidence)}
        texts = {u["key"]: u for u in r["proposals"]}
        for p in r["proposals"]:
            for proposed in p["proposed"]:
                older_evidence = proposed["key"] in position
                if p["evidence"] and older_evidence and position[proposed["key"]] < position[p["key"]]:
                    right += 1
                elif not p["evidence"] and older_evidence and p["names_answer"]:
                    restates += 1
                else:
                    false += 1
                    false_examples.append(f"{r['id']}: {p['key']} -> {proposed['key']} ({proposed['reason'][:100]})")
        for i in range(1, len(evidence)):
            newer = texts.get(evidence[i])
            proposed = {x["key"] for x in newer["proposed"]} if newer else set()
            updates += 1
            found += evidence[i - 1] in proposed
            found_any += bool(proposed & set(evidence[:i]))
    made = right + restates + false
    return {
        "updates": updates, "found": found, "found_any_older": found_any, "proposals": made, "right": right,
        "restates": restates, "false": false, "false_examples": false_examples,
    }  # fmt: skip


def likely_updates_table(payload: dict[str, Any]) -> str:
    """remember's likely_updates: recall over the updates, precision over every proposal."""
    body = []
    for setting, v in payload["likely_updates"].items():
        made = v["proposals"]
        body.append([
            setting, cell(v["found"], v["updates"]), cell(v["found_any_older"], v["updates"]), made,
            v["right"], v["restates"], v["false"], cell(v["right"], made), cell(v["right"] + v["restates"], made),
        ])  # fmt: skip
    headers = [
        "setting", "recall: proposes the previous", "proposes any older evidence", "proposals", "right",
        "restate the newer value", "false", "precision (strict)", "precision (restatements right)",
    ]  # fmt: skip
    return markdown(headers, body)


def perturbation_table(payload: dict[str, Any]) -> str:
    body = [
        [*key.split("|"), f"{v['pass']}/{v['total']}", ", ".join(v["failing"]) or "—"]
        for key, v in payload["perturbations"].items()
    ]
    return markdown(["setting", "check", "pass", "failing"], body)


def tool_call_figures(records: list[dict[str, Any]], settings: Sequence[str]) -> dict[str, Any]:
    """Per setting and mode, over the updates (pairs of consecutive evidence notes): the tool calls the
    writer made for the newer note, by tool; how many superseded the previous note; and, where the
    writer looked the previous note up, how many of those recalls showed it as a head."""
    out: dict[str, Any] = {}
    for setting in settings:
        for mode in MODES:
            ups = [c for r in records if r["setting"] == setting for c in r["tool_calls"] if c["mode"] == mode]
            if not ups:
                continue
            by_tool: dict[str, int] = {}
            for c in ups:
                for tool in c["calls"]:
                    by_tool[tool] = by_tool.get(tool, 0) + 1
            counts = [len(c["calls"]) for c in ups]
            looked_up = [c["found_at"] for c in ups if c["found_at"] is not None]
            out[f"{setting}|{mode}"] = {
                "updates": len(ups), "calls": sum(counts), "fewest": min(counts), "most": max(counts),
                "by_tool": by_tool, "recorded": sum(c["recorded"] for c in ups),
                "looked_up": len(looked_up), "found_by_recall": sum(1 for k in looked_up if k),
                "found_first": sum(1 for k in looked_up if k == 1),
                "not_found": [f"{r['id']} ({c['newer']})" for r in records if r["setting"] == setting
                              for c in r["tool_calls"] if c["mode"] == mode and c["found_at"] == 0],
            }  # fmt: skip
    return out


def tool_calls_table(payload: dict[str, Any]) -> str:
    """The tool calls each mode's writer made to record an update whose old note's id it was not handed."""
    body = []
    for key, v in payload["tool_calls"].items():
        spread = "" if v["fewest"] == v["most"] else f" ({v['fewest']}–{v['most']})"
        body.append([
            *key.split("|"), v["updates"], f"{v['calls'] / v['updates']:g}{spread}",
            ", ".join(f"{n} {tool}" for tool, n in v["by_tool"].items()), cell(v["recorded"], v["updates"]),
            cell(v["found_by_recall"], v["looked_up"]), cell(v["found_first"], v["looked_up"]),
        ])  # fmt: skip
    headers = [
        "setting", "mode", "updates", "tool calls per update", "calls", "previous note superseded",
        "lookup recall shows the previous as a head", "in its first chain",
    ]  # fmt: skip
    return markdown(headers, body)


TABLES = {
    "main": recall_table, "budgets": budget_table, "similar": similar_table, "perturbations": perturbation_table,
    "likely_updates": likely_updates_table, "tool_calls": tool_calls_table,
}  # fmt: skip


def print_budget_use(records: list[dict[str, Any]], settings: Sequence[str]) -> None:
    print("\n### What fills the budget (means per question)")
    body = []
    for setting in settings:
        for system in SYSTEMS:
            for budget in BUDGETS:
                found = [x for r in records if r["setting"] == setting for x in r["recalls"]]
                found = [x for x in found if x["system"] == system and x["budget"] == budget]
                if found:
                    chains = statistics.mean(x["chains"] for x in found)
                    used = statistics.mean(x["used_tokens"] for x in found)
                    body.append([setting, system, budget, f"{chains:.1f}", f"{used:.0f}"])
    print(markdown(["setting", "system", "budget", "chains (dense: notes)", "tokens used"], body))


def print_similar(records: list[dict[str, Any]], settings: Sequence[str]) -> dict[str, Any]:
    print("\n### similar_active in remember-only mode: does the newer evidence note's list name the older one?")
    body, out = [], {}
    for setting in settings:
        for group in ("all", *KINDS):
            ups = [u for r in records if r["setting"] == setting and group in ("all", r["kind"]) for u in r["updates"]]
            if not ups:
                continue
            k = sum(u["listed"] for u in ups)
            any_older = sum(u["listed_any_older"] for u in ups)
            first = sum(1 for u in ups if u["rank"] == 1)
            cos = statistics.median(u["cosine"] for u in ups)
            out[f"{setting}|{group}"] = {
                "listed": k, "listed_any_older": any_older, "updates": len(ups), "listed_first": first
            }  # fmt: skip
            row = [cell(k, len(ups)), cell(any_older, len(ups)), f"{first}/{len(ups)}", f"{cos:.3f}"]
            body.append([setting, group, *row])
    headers = ["listed: the previous note", "listed: any older evidence", "previous listed first", "median cosine"]
    print(markdown(["setting", "kind", *headers], body))
    return out


def print_perturbations(records: list[dict[str, Any]], settings: Sequence[str]) -> dict[str, Any]:
    print("\n### Lifecycle perturbations (edges store, each question with an older evidence note)")
    body, out = [], {}
    for setting in settings:
        for name in CHECKS:
            results = [(r["id"], p) for r in records if r["setting"] == setting for p in r["perturbations"]]
            results = [(qid, p) for qid, p in results if p["check"] == name]
            if not results:
                continue
            failing = [qid for qid, p in results if not p["pass"]]
            passed = len(results) - len(failing)
            out[f"{setting}|{name}"] = {"pass": passed, "total": len(results), "failing": failing}
            body.append([setting, name, f"{passed}/{len(results)}", ", ".join(failing) or "—"])
    print(markdown(["setting", "check", "pass", "failing"], body))
    for setting in settings:
        for r in records:
            for p in r["perturbations"]:
                if r["setting"] == setting and not p["pass"]:
                    print(f"  {setting} {r['id']} {p['check']}: {p['detail']}")
    return out


def print_targets(records: list[dict[str, Any]], settings: Sequence[str]) -> dict[str, Any]:
    if "s" not in settings:
        return {}
    s = [r for r in records if r["setting"] == "s"]
    at = [(r, x) for r in s for x in r["recalls"] if x["system"] == "edges" and x["budget"] == TARGET_BUDGET]
    current = [(r["id"], x["metrics"]["current@1"]) for r, x in at if x["metrics"]["current@1"] is not None]
    stale = [(r["id"], x["metrics"]["stale head"]) for r, x in at if x["metrics"]["stale head"] is not None]
    ups = [(r["id"], u) for r in s for u in r["updates"]]
    out: dict[str, Any] = {}
    body = []
    if current:
        k, n = sum(v for _, v in current), len(current)
        failing = [qid for qid, v in current if not v]
        out["current@1"] = {"value": k / n, "met": k / n >= 0.97, "failing": failing}
        body.append(["current@1 >= 0.97 (S, edges, 512)", cell(k, n), _yes(k / n >= 0.97), ", ".join(failing) or "—"])
    if stale:
        k, n = sum(v for _, v in stale), len(stale)
        failing = [qid for qid, v in stale if v]
        out["stale head"] = {"value": k / n, "met": k == 0, "failing": failing}
        body.append(["no stale head (S, edges, 512)", cell(k, n), _yes(k == 0), ", ".join(failing) or "—"])
    if ups:
        k, n = sum(u["listed"] for _, u in ups), len(ups)
        failing = [f"{qid} ({u['newer']})" for qid, u in ups if not u["listed"]]
        out["similar_active"] = {"value": k / n, "met": k / n >= 0.90, "failing": failing}
        body.append(
            ["similar_active lists the older >= 0.90 (S)", cell(k, n), _yes(k / n >= 0.9), ", ".join(failing) or "—"]
        )
    rem = [(r, x) for r in s for x in r["recalls"] if x["system"] == "remember" and x["budget"] == TARGET_BUDGET]
    latest = [(r["id"], x["metrics"]["latest@1"]) for r, x in rem if x["metrics"]["latest@1"] is not None]
    if latest:
        k, n = sum(v for _, v in latest), len(latest)
        failing = [qid for qid, v in latest if not v]
        out["remember latest@1"] = {"value": k / n, "met": k / n >= 0.90, "failing": failing}
        body.append(
            ["latest@1 >= 0.90 (S, remember, 512)", cell(k, n), _yes(k / n >= 0.9), f"{len(failing)} questions"]
        )
    marked = [(r["id"], x["metrics"]["older marked"]) for r, x in rem if x["metrics"]["older marked"] is not None]
    if marked:
        k, n = sum(v for _, v in marked), len(marked)
        out["older marked"] = {"value": k / n, "met": k == n}
        body.append(
            ["every delivered older head marked (S, remember, 512)", cell(k, n), _yes(k == n), f"{n - k} questions"]
        )
    proposals = [(r["id"], p) for r in s for p in r["proposals"]]
    if proposals:
        v = likely_update_figures(records, "s")
        recall_ = v["found"] / v["updates"] if v["updates"] else 0.0
        precision = v["right"] / v["proposals"] if v["proposals"] else 0.0
        met = precision >= 0.9 and recall_ >= 0.8
        out["likely_updates"] = {"precision": precision, "recall": recall_, "met": met}
        body.append([
            "likely_updates precision >= 0.90 at recall >= 0.80 (S, strict)",
            f"precision {precision:.2f}, recall {recall_:.2f}", _yes(met), f"{v['false']} false",
        ])  # fmt: skip
    print("\n### Targets")
    print(markdown(["target", "measured", "met", "failing"], body))
    return out


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def print_diagnoses(records: list[dict[str, Any]], setting: str) -> None:
    found = [(r, d) for r in records if r["setting"] == setting for d in r["diagnoses"]]
    if found:
        causes: dict[tuple[str, str], list[str]] = {}
        for r, d in found:
            causes.setdefault((d["mode"], d["cause"]), []).append(r["id"])
        print(
            f"\n### {setting}: why a linked mode missed current@1 (or delivered a stale head) at {TARGET_BUDGET} tokens"
        )
        rows = [[mode, cause, len(ids), ", ".join(ids)] for (mode, cause), ids in causes.items()]
        print(markdown(["mode", "cause", "questions", "ids"], rows))
    for r, d in found:
        print(
            f"- {d['mode']} {r['id']} ({r['kind']}) [{d['cause']}]: {d['chains']} chains, {d['used']}/{d['budget']} tokens"
        )
        first = d.get("first")
        if first:
            print(
                f"    chain 1 ({first['status']}, heads {first['heads']}) entered via {first['entry']} [{first['entry_is']}]"
            )
            print(f"      {first['retrieval']}")
            if first["entry_is"] == "not evidence":
                print(f"      its head: {first['text']!r}")
        latest_chain = d.get("latest_chain")
        if latest_chain:
            print(
                f"    the latest's chain is chain {latest_chain['rank']}, entered via {latest_chain['entry']} [{latest_chain['entry_is']}]"
            )
            print(f"      {latest_chain['retrieval']}")
        if "why_latest" in d:
            print(f"    why_excluded(latest): {d['why_latest']}")
        for key, line in d["older"].items():
            print(f"    why_excluded(older {key}): {line} (its history entry costs {max(d['history_cost'])} tokens)")
    ups = [(r, u) for r in records if r["setting"] == setting for u in r["updates"] if not u["listed"]]
    if ups:
        print(f"\n### {setting}: updates whose older note similar_active did not list")
    for r, u in ups:
        print(f"- {r['id']} ({r['kind']}): newer {u['newer']}, older {u['older']}, cosine {u['cosine']}")
        for shown in u["shown"]:
            similarity = "n/a" if shown["similarity"] is None else f"{shown['similarity']:.3f}"
            print(f"    listed: {shown['key']} similarity {similarity}: {shown['text'][:90]!r}")
        for line in u.get("why", []):
            print(f"    why_excluded(older): {line}")


def print_data_notes(questions: Sequence[Question], settings: Sequence[str]) -> dict[str, Any]:
    inverted = [q.id for q in questions if not q.index_order]
    moved = [q.id for q in questions if q.asked_at != q.question_date]
    split = sorted({t.key.rsplit(".", 1)[0] for q in questions for t in q.haystacks["s"] if "." in t.key.split("#")[1]})
    notes = {s: [len(q.haystacks[s]) for q in questions] for s in settings}
    hidden = {s: sum(1 for q in questions if any(t.at > q.asked_at for t in q.haystacks[s])) for s in settings}
    eligible = {s: sum(1 for q in questions if answer_pattern(q, s) is not None) for s in settings}
    mentions = {
        s: sum(
            1 for q in questions if q.missing_entity for t in q.haystacks[s] if phrase(q.missing_entity).search(t.text)
        )
        for s in settings
    }  # notes that name what an abstention question asks about: with none, no system can fail it
    print("### Data")
    print(f"- questions: {len(questions)}; dates: the S variant's in both settings")
    for s in settings:
        n = notes[s]
        print(
            f"- {s}: notes per question {min(n)}–{max(n)} (mean {statistics.mean(n):.0f}); questions with notes "
            f"dated after the question (hidden by as_of): {hidden[s]}; answer-hit eligible: {eligible[s]}; "
            f"notes naming an abstention question's missing entity: {mentions[s]}"
        )
    print(f"- S dates reverse the index's evidence order: {', '.join(inverted) or 'none'} (S order used)")
    print(f"- latest evidence dated after the question, as_of moved to 1 min after it: {', '.join(moved) or 'none'}")
    print(f"- turns longer than {MAX_TEXT} characters, stored in parts: {', '.join(split) or 'none'}")
    return {
        "abstention_entity_mentions": mentions,
        "date_inverted": inverted,
        "asked_at_moved": moved,
        "split_turns": split,
        "notes": notes,
        "eligible": eligible,
    }


# -- main ----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write every figure and per-question record here")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--limit", type=int, help="only the first N questions of the index")
    parser.add_argument("--questions", nargs="+", help="only these question ids")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--embedding-cache", type=Path, help="keep the model's vectors here between runs (e.g. /tmp/lme-vectors)"
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    questions = load(args.data)
    if args.questions:
        unknown = set(args.questions) - {q.id for q in questions}
        if unknown:
            parser.error(f"unknown question ids: {', '.join(sorted(unknown))}")
        questions = [q for q in questions if q.id in set(args.questions)]
    if args.limit is not None:
        questions = questions[: args.limit]
    data_notes = print_data_notes(questions, args.settings)

    embedder = CachedEmbedder(SentenceTransformerEmbedder(), args.embedding_cache)
    texts = [q.question for q in questions] + [t.text for q in questions for s in args.settings for t in q.haystacks[s]]
    distinct = embedder.prime(texts)
    embedder.save()
    print(f"- embedded {distinct} distinct texts in {embedder.seconds:.0f} s", file=sys.stderr)

    records: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    for setting in args.settings:
        setting_started = time.perf_counter()
        for number, q in enumerate(questions, 1):
            t0 = time.perf_counter()
            records.append(run_question(q, setting, args.modes, embedder))
            print(f"[{setting} {number}/{len(questions)}] {q.id} {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        seconds[setting] = time.perf_counter() - setting_started

    print(
        "\nMetrics as defined in the module docstring; cells are rate (true/applicable) on `all` rows and "
        "true/applicable per kind; — = not applicable. dense = plain dense top-k packed into the same budget "
        f"(estimate_tokens + {NOTE_OVERHEAD} per note)."
    )
    tables = print_recall_tables(records, args.settings)
    print_budget_use(records, args.settings)
    similar = print_similar(records, args.settings) if "remember" in args.modes else {}
    likely = {s: likely_update_figures(records, s) for s in args.settings} if "remember" in args.modes else {}
    if likely:
        print("\n### likely_updates in remember-only mode")
        print(likely_updates_table({"likely_updates": likely}))
        for setting, v in likely.items():
            for line in v["false_examples"]:
                print(f"  {setting} false: {line}")
    tool_calls = tool_call_figures(records, args.settings)
    print("\n### Tool calls to record an update whose old note's id the writer was not handed")
    print(tool_calls_table({"tool_calls": tool_calls}))
    for key, v in tool_calls.items():
        if v["not_found"]:
            print(f"  {key}: the lookup recall did not show the previous note: {', '.join(v['not_found'])}")
    perturbations = print_perturbations(records, args.settings) if "edges" in args.modes else {}
    targets = print_targets(records, args.settings)
    if "s" in args.settings:
        print_diagnoses(records, "s")  # the target setting; --json holds the oracle's too
    total = time.perf_counter() - started
    print(
        f"\nRuntime: {total:.0f} s in all; embedding {embedder.seconds:.0f} s ({distinct} texts); "
        + ", ".join(f"{s} {v:.0f} s" for s, v in seconds.items())
    )
    if args.json:
        write_results(
            args.json,
            {
                "data": data_notes,
                "settings": args.settings,
                "modes": args.modes,
                "budgets": BUDGETS,
                "recall": tables,
                "similar_active": similar,
                "likely_updates": likely,
                "perturbations": perturbations,
                "tool_calls": tool_calls,
                "targets": targets,
                "runtime_seconds": {"total": total, "embedding": embedder.seconds, **seconds},
                "questions": records,
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
