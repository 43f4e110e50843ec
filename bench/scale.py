"""Scale: recall_chains and the writes at 1k / 10k / 100k notes in one scope and 1M notes over 1,000 scopes.

Issue 8. For each size the script builds a fresh store in a temporary directory (or, with `--db
s3://bucket/prefix`, under `prefix/<size>-<unix time>` in that bucket: issue 12) and measures, in one
process and one run:

- build: bulk import through `Memory.import_notes` (batches of `--batch` notes) with the real model,
  into a store opened first as the server opens its own (`Memory.warm`), as notes/s and the share
  of that time spent in the model; and the model's bare `embed` rate on
  the same texts (one call on up to `--rate-sample` of them, before and after the import: on a
  shared machine the load changes in between, so the mean is compared);
- edges: 10 % of the notes sit in correction chains (2-3 versions of one claim) and 5 % depend on
  another note. These `supersedes` / `depends_on` edges are written straight into the events table
  with `Tables.add_events` (store `Event`s, batches of 10,000), not through `correct`/`link`: at
  100k and 1M one call per edge would take longer than the rest of the run. The writes measured
  below go through the store's own calls;
- upkeep: `memory.tables.upkeep.compact()` (the store's public upkeep), then the indexes `list_indices()`
  reports on the notes and events tables;
- recall: 60 questions paraphrasing the corpus's subjects, each timed through `Memory.recall` (the
  default budget) with the query's vector embedded beforehand (the model excluded: every query is
  embedded once with the real model and the vector reused), then again with the model in the call;
- plain LanceDB, query by query in the same loop (alternating which goes first): a separate table
  (same directory, or same bucket prefix) with the same ids, texts, vectors and scopes, an FTS index
  (ICU, as the store's), a bitmap index on scope, and an ANN index (cosine) from 10,000 rows:
  IVF_HNSW_SQ, or IVF_PQ from 500,000 rows (under 10,000 LanceDB has too few rows to train one, and
  searches exactly). Queried with `search(query_type="hybrid")`: vector + text, `where(scope)`
  prefilter, limit 20, the same precomputed vector. Ratio = corrigenda p50 / plain p50;
- ANN recall@20: the store's `Tables.vector_search` (whatever index the store built) against the
  exact search (`bypass_vector_index()`) on the same table, scope and vector; the same for the plain
  table's ANN index;
- writes: `remember`, `correct` and `link` (depends_on) through `Memory`, `--writes` of each after 3
  warm-up calls, each with the model in the call (`remember`/`correct` embed their text);
- the per-scope graph cache (store/graph.py, `Graphs`): recall p50/p99 again, query by query, as it
  is (the scope's graph kept and refreshed from what was appended, its notes kept as one scan, and
  the notes and vectors read by id kept) and with the cache defeated (`memory.graphs.drop_all()` before
  the call, outside its time, so that each recall reads the scope's events and scans its notes
  again, as a process's first call of a scope does), alternating
  which goes first; and
  `graphs.get(scope)` alone both ways. The saving is the ratio of the p50s. Then recall right after
  a second `Memory` on the store (another server process) wrote an edge: its graph one version behind;
- RSS (VmRSS now, and ru_maxrss: the peak of the whole process so far) and bytes stored (on disk, or
  the objects under the store's prefix in an s3:// bucket; "n/a" for gs:// and az://).

Object storage (issue 12): `--db s3://bucket/prefix` (or gs://, az://) builds every size's store and
its plain LanceDB table under `prefix/<size>-<unix time>/` in the bucket, through the same code (the
store and `lancedb.connect` read the bucket's AWS_* / GOOGLE_* / AZURE_* environment variables); they
are left there. `--local-s3` starts a local S3 API for the run (bench/local_s3.py, through
bench/faults.py's `local_s3`) and, without `--db`, uses s3://corrigenda-bench/scale in it.

1M notes over 1,000 scopes: scope s0000 holds exactly the 1k store's corpus with real-model vectors
(so the same 60 queries ask the same notes); the other 999 scopes (999,000 notes) get vectors from a
stand-in embedder (the normalised sum of the real model's vectors of the text's words, each word
embedded once), which the output says, and are written with the store's `Tables.add_notes` in writes
of `--bulk-rows` notes across scopes (`import_notes` takes one scope per call). Recall in s0000 is
compared with the same queries on the 1k store; when `--sizes` has 1M but not 1k, the 1k store is
built too, as the reference.

The corpus is synthetic and deterministic from `--seed`: English sentences stating attributes of
services, people, offices, projects, plants, recipes and cars (thousands of entities, several
phrasings per attribute, optional trailing clauses and context sentences), so texts differ and full
text has real work.

Run from the repository root:

    .venv/bin/python bench/scale.py [--sizes 1k,10k,100k,1M | --quick] [--seed N] [--json PATH]
        [--keep DIR | --db s3://bucket/prefix] [--local-s3] [--torch-threads N] [--profile N]

It prints one markdown table (a column per size), the indexes found, and the targets of issue 8
with the measured figure beside each; --json also writes every figure and per-query record.
--profile N prints the top N functions of one cProfiled recall and one remember per size.
--torch-threads 1 keeps torch to one thread: on a loaded 2-core machine its default pool made the
model 5-25 times slower here (docs/scale.md, "The model's threads"; the store now gives it half the cores
itself). The header says which was used, the commit the store ran at, and whether store/ or
server/ had uncommitted changes. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import random
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
from corrigenda.store import Draft, Event, EventKind, Memory, Note, SentenceTransformerEmbedder
from corrigenda.store.ids import new_event_id, new_note_id
from corrigenda.store.storage import limits
from harness import commit, markdown_table, percentile, write_results

SIZES = {"1k": 1_000, "10k": 10_000, "30k": 30_000, "100k": 100_000, "1M": 1_000_000}
SCOPES_AT_1M = 1_000
QUERIES = 60
CHAIN_SHARE = 0.10  # share of notes that are versions in a correction chain
DEPENDS_SHARE = 0.05  # share of notes with a depends_on edge
PLAIN_ANN_FROM = 10_000  # rows; under this LanceDB cannot train an ANN index and searches exactly
PLAIN_PQ_FROM = 500_000  # rows; IVF_PQ from here, as an HNSW graph over 1M vectors takes too long on 2 cores
PLAIN_TOP = 20
EVENTS_PER_WRITE = 10_000
UPKEEP_WAIT_S = 600.0  # a compaction set off by the timed writes, waited for before the store is removed
BASE = datetime(2026, 1, 1, tzinfo=UTC)
NOW = BASE + timedelta(days=400)  # the store's clock: after every corpus note
ACTOR = "bench-scale"


# -- the synthetic corpus -----------------------------------------------------------------------


def _words(text: str, sep: str | None = None) -> list[str]:
    return text.split(sep)


ADJECTIVES = _words("""amber arctic azure bold brisk cedar cobalt coral crimson dusty ember fern frost golden granite
hazel indigo ivory jade lunar maple marble misty northern oaken onyx pearl quiet rapid rustic sable scarlet
silent silver solar stormy swift tidal velvet violet willow winter zephyr copper iron linen bright hollow
eastern western southern""")
SERVICE_NOUNS = _words("""billing search checkout login payments invoice shipping catalog inventory pricing reporting
analytics notification email upload thumbnail session profile recommendation ledger audit export import
scheduler gateway proxy cache queue webhook geocoding translation chat feed comments ratings refunds coupons
loyalty onboarding tracking metrics backup sync indexing transcoding""")
FIRST = _words("""Alice Bruno Chloe Diego Elena Farid Grace Hiro Ines Jonas Kira Liam Maya Noah Olga Pablo Quinn Rosa Sami
Tara Umar Vera Wen Ximena Yusuf Zoe Aiko Ben Carmen Dmitri Emma Felix Gita Hugo Ivy Jamal Karin Leo Mina Nils
Oscar Priya Rafael Sofia Theo Ulla Victor Wanda Yara Zane Amara Bjorn Celia Dario Esme Finn Greta Hamid Isla
Joel Lena Marco Nadia Omar Petra Rhea Stefan Tomas Uma Valentin Willa Xavier Yann Zelda Anouk Basil""")
LAST = _words("""Garcia Novak Schmidt Tanaka Okafor Rossi Dubois Larsen Kowalski Silva Haddad Nguyen Petrov Moreau Jensen
Costa Fischer Ito Mendes Bianchi Sato Lindqvist Horvat Keller Moretti Nakamura Olsen Pereira Quist Rahman
Suzuki Varga Weber Yilmaz Zhou Abbott Brennan Castillo Duarte Eriksen Fontaine Gallo Hartmann Ibrahim Jovanovic
Kaur Lopez Meyer Nilsen Ortiz Park Ramos Sandoval Torres Ueda Vogel Walsh Young Ziegler Ahmed Bauer Chen Diaz
Evans Ford Gomez Hansen Ivanova Jung Kim Lund Mills Nash Owens Price""")
CITIES = _words("""Lisbon Porto Madrid Seville Lyon Nantes Berlin Hamburg Munich Vienna Prague Krakow Warsaw Oslo Bergen
Stockholm Malmo Helsinki Tallinn Riga Vilnius Dublin Cork Leeds Bristol Glasgow Edinburgh Rotterdam Utrecht
Antwerp Ghent Zurich Basel Geneva Turin Milan Bologna Naples Athens Sofia Bucharest Istanbul Cairo Nairobi
Lagos Accra Casablanca Tunis Toronto Montreal Vancouver Chicago Denver Austin Boston Seattle Portland Atlanta
Lima Bogota Quito Santiago Montevideo Osaka Kyoto Seoul Busan Taipei Hanoi Manila Jakarta Bangkok Chennai
Pune Dhaka Perth Adelaide Auckland Wellington Hobart Reykjavik Tbilisi Yerevan Almaty Tashkent""")
ANIMALS = _words("""heron falcon otter badger lynx marten osprey raven wren finch puffin walrus bison moose elk ibex
gecko iguana python cobra viper salmon trout pike sturgeon orca narwhal seal dolphin beaver hedgehog mole
weasel ferret stoat vole shrew tapir okapi zebra jackal hyena cheetah ocelot puma jaguar condor kestrel
plover curlew""")
PLANTS = _words("""fern basil monstera cactus orchid ficus begonia lavender rosemary thyme mint aloe bonsai ivy
geranium jasmine hibiscus peace-lily pothos calathea succulent tomato chili strawberry lemon-tree olive-tree
bamboo palm snake-plant rubber-plant""")
ROOMS = _words("""kitchen bedroom hallway study balcony attic bathroom lounge office porch greenhouse garage
nursery library conservatory""")
DISHES = _words("""lasagne risotto paella curry ramen dumplings pancakes brownies cheesecake focaccia sourdough
chili stew gumbo falafel hummus tagine pho biryani gnocchi quiche moussaka goulash borscht empanadas tacos
enchiladas shakshuka carbonara pesto tiramisu baklava scones muffins granola lemonade""")
INGREDIENTS = _words("""flour butter sugar rice lentils chickpeas oats cheese tomatoes onions garlic ginger spinach
potatoes carrots mushrooms almonds walnuts honey yoghurt cream chocolate basil coriander cumin paprika""")
CAR_MAKES = _words("""Volvo Skoda Fiat Renault Toyota Honda Mazda Subaru Kia Hyundai Peugeot Citroen Seat Opel Tesla
Nissan Dacia Saab Lancia Mini""")
COLOURS = _words("red blue green black white grey silver yellow orange purple brown teal")
TEAMS = _words("""platform payments growth search infra data security mobile web identity billing sre
reliability compliance research design support""")
DATABASES = _words("PostgreSQL MySQL SQLite Redis Cassandra MongoDB ClickHouse DuckDB MariaDB CockroachDB")
REGIONS = _words("eu-west-1 eu-central-1 us-east-1 us-east-2 us-west-2 ap-south-1 ap-northeast-1 sa-east-1")
WEEKDAYS = _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
MONTHS = _words("January February March April May June July August September October November December")
FOODS = _words("""sushi pizza dumplings tacos falafel ramen curry paella pasta salad pho burritos kimchi
croissants""")
LANGUAGES = _words("""Portuguese Spanish French German Italian Polish Dutch Swedish Finnish Greek Turkish Arabic
Hindi Japanese Korean Mandarin Swahili""")
PROG_LANGUAGES = _words("Python Rust Go TypeScript Kotlin Java Elixir Haskell Scala Swift Ruby C++")
THEMES = _words("dark mode|light mode|solarized|high contrast|a sepia theme|large fonts", "|")
ALLERGIES = _words("peanuts|shellfish|pollen|cats|dust|gluten|penicillin|bee stings", "|")
PHONES = _words("an old Pixel|an iPhone|a Fairphone|a Nokia|a Galaxy|a OnePlus", "|")
STAGES = _words("planning|design review|beta|general availability|maintenance|on hold|cancelled", "|")
LOG_LEVELS = _words("debug info warning error")
SUFFIXES = (
    "according to {person}",
    "as of {month}",
    "confirmed in the {weekday} standup",
    "per the {noun} runbook",
    "after the {month} migration",
    "as {person} mentioned in chat",
    "noted during the {city} offsite",
    "until further notice",
    "for the {adjective} rollout",
)
CONTEXT = (
    "This matters for the {noun} dashboards.",
    "{person} asked everyone to keep this in mind.",
    "See the notes from the {month} planning meeting.",
    "It was discussed again on {weekday}.",
    "The {city} team relies on this.",
    "Double-check before the next {adjective} release.",
)
REASONS = (
    "the value changed",
    "the earlier note was wrong",
    "moved during the migration",
    "{person} updated it",
    "fixed after the incident review",
)


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _number(low: int, high: int) -> Callable[[random.Random], str]:
    return lambda rng: str(rng.randint(low, high))


def _pick(words: Sequence[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(words)


def _port(rng: random.Random) -> str:
    common = (80, 443, 3000, 5000, 5432, 6379, 8000, 8080, 8443, 8888, 9000, 9090, 9200, 9443)
    return str(rng.choice(common) if rng.random() < 0.4 else rng.randint(1024, 65535))


def _time_of_day(rng: random.Random) -> str:
    return f"{rng.randint(6, 10)}:{rng.choice(('00', '15', '30', '45'))}"


ENTITIES: dict[str, Callable[[random.Random], str]] = {
    "service": lambda rng: f"the {rng.choice(ADJECTIVES)} {rng.choice(SERVICE_NOUNS)} service",
    "person": _person,
    "office": lambda rng: f"the {rng.choice(CITIES)} office",
    "project": lambda rng: f"Project {rng.choice(ADJECTIVES).title()} {rng.choice(ANIMALS).title()}",
    "plant": lambda rng: f"{rng.choice(FIRST)}'s {rng.choice(PLANTS)} in the {rng.choice(ROOMS)}",
    "recipe": lambda rng: f"{rng.choice(FIRST)}'s {rng.choice(DISHES)}",
    "car": lambda rng: f"{rng.choice(FIRST)}'s {rng.choice(COLOURS)} {rng.choice(CAR_MAKES)}",
}
ENTITY_WEIGHTS = {"service": 30, "person": 25, "office": 5, "project": 12, "plant": 10, "recipe": 8, "car": 10}


@dataclass(frozen=True)
class Attribute:
    """A kind of claim: whose it is, how its value is drawn, how notes state it and how questions ask it."""

    name: str
    entity: str
    value: Callable[[random.Random], str]
    statements: tuple[str, ...]  # {e}: the entity, {v}: the value
    questions: tuple[str, ...]


ATTRIBUTES = (
    Attribute("port", "service", _port,
              ("{e} listens on port {v}", "{e} now serves traffic on port {v}", "requests to {e} go to port {v}"),
              ("which port does {e} use?", "what port is {e} reachable on?")),
    Attribute("timeout", "service", _number(1, 180),
              ("{e} times out after {v} seconds", "the request timeout of {e} is {v} s"),
              ("how long before {e} gives up on a request?", "what is the timeout for {e}?")),
    Attribute("owner", "service", _pick(TEAMS),
              ("{e} is owned by the {v} team", "the {v} team is responsible for {e}"),
              ("which team owns {e}?", "who maintains {e}?")),
    Attribute("database", "service", _pick(DATABASES),
              ("{e} stores its data in {v}", "{e} keeps its state in a {v} database"),
              ("what database does {e} use?", "where does {e} keep its data?")),
    Attribute("deploy", "service", _pick(WEEKDAYS),
              ("{e} is deployed every {v}", "releases of {e} go out on {v}"),
              ("when is {e} deployed?", "on which day does {e} ship?")),
    Attribute("region", "service", _pick(REGIONS),
              ("{e} runs in {v}", "{e} is hosted in the {v} region"),
              ("which region hosts {e}?", "where does {e} run?")),
    Attribute("retries", "service", _number(1, 10),
              ("{e} retries failed calls {v} times", "the retry limit of {e} is {v}"),
              ("how many retries does {e} make?",)),
    Attribute("replicas", "service", _number(1, 64),
              ("{e} runs {v} replicas", "{e} is scaled to {v} pods"),
              ("how many replicas does {e} have?",)),
    Attribute("log_level", "service", _pick(LOG_LEVELS),
              ("{e} logs at {v} level", "the log level of {e} is set to {v}"),
              ("what log level is {e} using?",)),
    Attribute("home", "person", _pick(CITIES),
              ("{e} lives in {v}", "{e} moved to {v}", "{e} is based in {v}"),
              ("where does {e} live?", "which city is {e} in?")),
    Attribute("food", "person", _pick(FOODS),
              ("{e}'s favourite food is {v}", "{e} loves {v} more than anything"),
              ("what does {e} like to eat?", "what food does {e} prefer?")),
    Attribute("theme", "person", _pick(THEMES),
              ("{e} prefers {v} in the editor", "{e} wants {v} in every tool"),
              ("which editor theme does {e} like?",)),
    Attribute("allergy", "person", _pick(ALLERGIES),
              ("{e} is allergic to {v}", "{e} cannot be near {v}"),
              ("what is {e} allergic to?",)),
    Attribute("speaks", "person", _pick(LANGUAGES),
              ("{e} speaks {v} fluently", "{e}'s second language is {v}"),
              ("which languages does {e} speak?",)),
    Attribute("phone", "person", _pick(PHONES),
              ("{e} uses {v}", "{e}'s phone is {v}"),
              ("what phone does {e} have?",)),
    Attribute("birthday", "person", _pick(MONTHS),
              ("{e}'s birthday is in {v}", "{e} celebrates a birthday every {v}"),
              ("when is {e}'s birthday?",)),
    Attribute("opens", "office", _time_of_day,
              ("{e} opens at {v}", "the doors of {e} open at {v} every morning"),
              ("what time does {e} open?", "when can I get into {e}?")),
    Attribute("manager", "office", _person,
              ("{e} is managed by {v}", "{v} runs {e}"),
              ("who manages {e}?",)),
    Attribute("parking", "office", _number(0, 120),
              ("{e} has {v} parking spaces", "there are {v} parking spots at {e}"),
              ("how much parking does {e} have?",)),
    Attribute("deadline", "project", lambda rng: f"{rng.randint(1, 28)} {rng.choice(MONTHS)}",
              ("{e} is due on {v}", "the deadline for {e} is {v}"),
              ("when is {e} due?", "what is the deadline of {e}?")),
    Attribute("lead", "project", _person,
              ("{e} is led by {v}", "{v} is the lead of {e}"),
              ("who leads {e}?",)),
    Attribute("status", "project", _pick(STAGES),
              ("{e} is in {v}", "the status of {e} is {v}"),
              ("what stage is {e} at?", "how far along is {e}?")),
    Attribute("budget", "project", lambda rng: f"{rng.randint(5, 900)} thousand euros",
              ("{e} has a budget of {v}", "{e} may spend {v}"),
              ("how much money does {e} have?",)),
    Attribute("language", "project", _pick(PROG_LANGUAGES),
              ("{e} is written in {v}", "the code of {e} is {v}"),
              ("what language is {e} written in?",)),
    Attribute("watering", "plant", _number(1, 21),
              ("{e} needs water every {v} days", "water {e} once every {v} days"),
              ("how often should {e} be watered?",)),
    Attribute("light", "plant", _pick(("full sun", "partial shade", "indirect light", "a north window")),
              ("{e} wants {v}", "{e} grows best in {v}"),
              ("how much light does {e} need?",)),
    Attribute("oven", "recipe", lambda rng: str(rng.choice(range(140, 260, 10))),
              ("{e} bakes at {v} degrees", "the oven for {e} goes to {v} degrees"),
              ("what oven temperature does {e} need?",)),
    Attribute("amount", "recipe", lambda rng: f"{rng.randint(1, 20) * 25} grams of {rng.choice(INGREDIENTS)}",
              ("{e} uses {v}", "{e} calls for {v}"),
              ("how much goes into {e}?", "what quantity does {e} need?")),
    Attribute("service_due", "car", _pick(MONTHS),
              ("{e} is due for a service in {v}", "{e} goes to the garage in {v}"),
              ("when does {e} need servicing?",)),
    Attribute("tyres", "car", _number(28, 40),
              ("the tyres of {e} take {v} psi", "{e} runs its tyres at {v} psi"),
              ("what tyre pressure does {e} need?",)),
    Attribute("parked", "car", lambda rng: f"level {rng.randint(-3, 5)} of the {rng.choice(CITIES)} garage",
              ("{e} is parked on {v}", "{e} stays on {v}"),
              ("where is {e} parked?",)),
)  # fmt: skip
BY_ENTITY = {kind: [a for a in ATTRIBUTES if a.entity == kind] for kind in ENTITIES}


@dataclass(frozen=True)
class CorpusNote:
    text: str
    subject: str  # attribute:entity
    attribute: str
    entity: str
    entity_kind: str
    at: datetime


@dataclass(frozen=True)
class Query:
    text: str
    subject: str
    in_chain: bool


@dataclass
class Corpus:
    notes: list[CorpusNote]  # oldest first
    chains: list[list[int]]  # indices into notes, oldest version first
    depends: list[tuple[int, int]]  # (src, dst): src depends on dst, which is older
    queries: list[Query]


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        person=_person(rng), month=rng.choice(MONTHS), weekday=rng.choice(WEEKDAYS),
        noun=rng.choice(SERVICE_NOUNS), city=rng.choice(CITIES), adjective=rng.choice(ADJECTIVES),
    )  # fmt: skip


def _suffix(rng: random.Random) -> str:
    """An optional trailing clause and an optional context sentence, so lengths and words vary."""
    text = ", " + _fill(rng.choice(SUFFIXES), rng) if rng.random() < 0.4 else ""
    return text + ". " + _fill(rng.choice(CONTEXT), rng) if rng.random() < 0.3 else text


def statement(attribute: Attribute, entity: str, value: str, rng: random.Random) -> str:
    text = rng.choice(attribute.statements).format(e=entity, v=value) + _suffix(rng)
    return text[0].upper() + text[1:]


def _claim(rng: random.Random) -> tuple[Attribute, str, str]:
    kind = rng.choices(list(ENTITY_WEIGHTS), weights=list(ENTITY_WEIGHTS.values()))[0]
    return rng.choice(BY_ENTITY[kind]), kind, ENTITIES[kind](rng)


def make_corpus(n: int, seed: str, queries: int = QUERIES) -> Corpus:
    """`n` notes: claims of one version, and chains of 2-3 versions making up CHAIN_SHARE of the notes."""
    rng = random.Random(seed)
    lengths: list[int] = []
    in_chains = round(CHAIN_SHARE * n)
    while sum(lengths) < in_chains:
        left = in_chains - sum(lengths)
        lengths.append(left if left <= 3 else rng.choice((2, 2, 3)))
    if lengths and lengths[-1] == 1:
        lengths[-1] = 2
    lengths += [1] * (n - sum(lengths))
    rng.shuffle(lengths)
    drafted: list[tuple[CorpusNote, int]] = []  # note, claim number
    for claim, versions in enumerate(lengths):
        attribute, kind, entity = _claim(rng)
        at = BASE + timedelta(seconds=rng.uniform(0, 300 * 86400))
        values: list[str] = []
        for _ in range(versions):
            value = attribute.value(rng)
            for _retry in range(20):
                if value not in values:
                    break
                value = attribute.value(rng)
            values.append(value)
            note = CorpusNote(statement(attribute, entity, value, rng), f"{attribute.name}:{entity}".lower(),
                              attribute.name, entity, kind, at)  # fmt: skip
            drafted.append((note, claim))
            at += timedelta(seconds=rng.uniform(3600, 30 * 86400))
    order = sorted(range(len(drafted)), key=lambda i: (drafted[i][0].at, i))
    notes = [drafted[i][0] for i in order]
    members: dict[int, list[int]] = {}
    for position, i in enumerate(order):
        members.setdefault(drafted[i][1], []).append(position)
    chains = [m for m in members.values() if len(m) > 1]

    by_entity: dict[str, list[int]] = {}
    for i, note in enumerate(notes):
        by_entity.setdefault(note.entity, []).append(i)
    depends: set[tuple[int, int]] = set()
    target = round(DEPENDS_SHARE * n)
    for _attempt in range(20 * target):
        if len(depends) >= target:
            break
        src = rng.randrange(1, len(notes))
        older = [j for j in by_entity[notes[src].entity] if j < src and notes[j].subject != notes[src].subject]
        dst = rng.choice(older) if older and rng.random() < 0.8 else rng.randrange(0, src)
        if notes[dst].subject != notes[src].subject:
            depends.add((src, dst))

    chain_subjects = list(dict.fromkeys(notes[c[0]].subject for c in chains))
    in_chain = set(chain_subjects)
    single_subjects = list(dict.fromkeys(n.subject for n in notes if n.subject not in in_chain))
    rng.shuffle(chain_subjects)
    rng.shuffle(single_subjects)
    picked = chain_subjects[: queries // 2]
    picked += single_subjects[: queries - len(picked)]
    first = {n.subject: n for n in reversed(notes)}
    asked = []
    for subject in picked:
        note = first[subject]
        attribute = next(a for a in ATTRIBUTES if a.name == note.attribute)
        question = rng.choice(attribute.questions).format(e=note.entity)
        asked.append(Query(question[0].upper() + question[1:], subject, subject in in_chain))
    return Corpus(notes, sorted(chains), sorted(depends), asked)


def scope_seed(seed: int, scope: int) -> str:
    """Scope 0 of every size has the same corpus seed, so the 1M store's s0000 is the 1k store."""
    return f"scale:{seed}:{scope}"


# -- embedders ----------------------------------------------------------------------------------


class MeteredEmbedder:
    """The real model, timed; vectors of texts embedded beforehand (the queries) are handed back
    without the model."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.known: dict[str, list[float]] = {}
        self.seconds = 0.0  # in the model
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.known and all(t in self.known for t in texts):
            return [self.known[t] for t in texts]
        started = time.perf_counter()
        vectors = self.inner.embed(texts)
        self.seconds += time.perf_counter() - started
        self.texts += len(texts)
        return vectors

    def readable(self, text: str) -> bool:
        return self.inner.readable(text)


_WORD = re.compile(r"[a-z0-9'-]+")


class WordSumEmbedder:
    """Stand-in for the 1M build: the normalised sum of the real model's vectors of a text's words
    (each word embedded once; a word outside the vocabulary gets a fixed random vector). Fast, the
    same dimension, and clustered like the real vectors; it reads everything."""

    def __init__(self, real: SentenceTransformerEmbedder, vocabulary_texts: Sequence[str], seed: int) -> None:
        self.name = real.name
        words = sorted({w for t in vocabulary_texts for w in _WORD.findall(t.lower())})
        self._index = {w: i for i, w in enumerate(words)}
        self._vectors = np.asarray(real.embed(words), dtype=np.float32)
        self._rng = np.random.default_rng(seed)
        self._unknown: dict[str, np.ndarray] = {}

    @property
    def vocabulary(self) -> int:
        return len(self._index)

    def _word(self, word: str) -> np.ndarray:
        i = self._index.get(word)
        if i is not None:
            return self._vectors[i]
        vector = self._unknown.get(word)
        if vector is None:
            vector = self._rng.standard_normal(size=(self._vectors.shape[1],)).astype(np.float32) * 0.05
            self._unknown[word] = vector
        return vector

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = np.zeros((len(texts), self._vectors.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[row] += self._word(word)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        result: list[list[float]] = out.tolist()
        return result

    def readable(self, text: str) -> bool:
        return True


# -- building a store ---------------------------------------------------------------------------


@dataclass
class Import:
    notes: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0


def import_corpus(memory: Memory, embedder: MeteredEmbedder, corpus: Corpus, scope: str, batch: int) -> tuple[list[str], Import]:  # fmt: skip
    """Every note of the corpus through `Memory.import_notes`, `batch` at a time; their ids in order."""
    ids: list[str] = []
    stats = Import()
    for start in range(0, len(corpus.notes), batch):
        drafts = [
            Draft(text=n.text, subject=n.subject, tags=[n.entity_kind], at=n.at)
            for n in corpus.notes[start : start + batch]
        ]
        in_model = embedder.seconds
        started = time.perf_counter()
        views = memory.import_notes(drafts, scope=scope, actor=ACTOR)
        stats.seconds += time.perf_counter() - started
        stats.embed_seconds += embedder.seconds - in_model
        stats.notes += len(views)
        ids.extend(v.id for v in views)
    return ids, stats


def corpus_events(corpus: Corpus, ids: Sequence[str], scope: str, rng: random.Random) -> list[Event]:
    """The chains' `supersedes` edges and the `depends_on` edges, as the store's own events."""
    events = []
    for chain in corpus.chains:
        for older, newer in pairwise(chain):
            reason = _fill(rng.choice(REASONS), rng)
            events.append(Event(id=new_event_id(), kind=EventKind.SUPERSEDES, src=ids[newer], dst=ids[older],
                                scope=scope, reason=reason, actor=ACTOR, recorded_at=corpus.notes[newer].at))  # fmt: skip
    for src, dst in corpus.depends:
        events.append(Event(id=new_event_id(), kind=EventKind.DEPENDS_ON, src=ids[src], dst=ids[dst],
                            scope=scope, actor=ACTOR, recorded_at=corpus.notes[src].at))  # fmt: skip
    return events


def write_stand_in_scopes(
    memory: Memory, stand_in: WordSumEmbedder, args: argparse.Namespace, per_scope: int, scopes: int,
    rng: random.Random, started: float,
) -> tuple[Import, list[Event]]:  # fmt: skip
    """Scopes 1.. of the 1M store: stand-in vectors, written with the store's `Tables.add_notes` in
    writes of `--bulk-rows` notes across scopes (one `import_notes` per scope is one write per
    1,000 notes, and each compaction then rewrites the small fragments: far too slow for this build)."""
    stats = Import()
    events: list[Event] = []
    pending: list[tuple[Note, Sequence[float], bool]] = []

    def flush() -> None:
        t = time.perf_counter()
        memory.tables.add_notes(pending, stand_in.name)
        stats.seconds += time.perf_counter() - t
        pending.clear()

    for s in range(1, scopes):
        scope = f"s{s:04d}"
        corpus = make_corpus(per_scope, scope_seed(args.seed, s), queries=0)
        notes = [
            Note(id=new_note_id(), text=c.text, scope=scope, subject=c.subject, tags=[c.entity_kind], actor=ACTOR,
                 recorded_at=c.at)
            for c in corpus.notes
        ]  # fmt: skip
        t = time.perf_counter()
        vectors = stand_in.embed([note.text for note in notes])
        stats.embed_seconds += time.perf_counter() - t
        stats.seconds += time.perf_counter() - t
        stats.notes += len(notes)
        pending.extend((note, vector, True) for note, vector in zip(notes, vectors, strict=True))
        events += corpus_events(corpus, [note.id for note in notes], scope, rng)
        if len(pending) >= args.bulk_rows:
            flush()
        if s % 100 == 0:
            print(f"  1M build: {s} scopes, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if pending:
        flush()
    return stats, events


def write_events(memory: Memory, events: Sequence[Event]) -> None:
    for start in range(0, len(events), EVENTS_PER_WRITE):
        memory.tables.add_events(events[start : start + EVENTS_PER_WRITE])


def describe_indexes(table: Any) -> list[dict[str, Any]]:
    found = []
    for index in table.list_indices():
        found.append(
            {
                "name": index.name,
                "type": str(index.index_type),
                "columns": list(index.columns),
                "indexed_rows": getattr(index, "num_indexed_rows", None),
                "unindexed_rows": getattr(index, "num_unindexed_rows", None),
                "segments": getattr(index, "num_segments", None),  # each searched apart
            }
        )
    return found


# -- the plain LanceDB baseline -----------------------------------------------------------------


class PlainHybrid:
    """A plain LanceDB table of the store's ids, texts, scopes and vectors, indexed the usual way."""

    COLUMNS = ("id", "text", "scope", "vector")

    def __init__(self, uri: str, source: Any) -> None:
        import lancedb
        from lancedb.index import FTS, Bitmap, IvfHnswSq, IvfPq

        self.uri = uri  # a directory or an object store's URI (s3://…)
        db = lancedb.connect(uri)
        started = time.perf_counter()
        rows = source.search().select(list(self.COLUMNS)).limit(None).to_batches()
        self.table = db.create_table("plain", data=rows)
        self.copy_seconds = time.perf_counter() - started
        self.rows = int(self.table.count_rows())
        self.index_seconds: dict[str, float] = {}
        with _timed(self.index_seconds, "text FTS (icu)"):
            self.table.create_index("text", config=FTS(**limits.FULL_TEXT))  # the store's settings
        with _timed(self.index_seconds, "scope bitmap"):
            self.table.create_index("scope", config=Bitmap())
        self.ann = self.rows >= PLAIN_ANN_FROM
        if self.ann and self.rows < PLAIN_PQ_FROM:
            with _timed(self.index_seconds, "vector IVF_HNSW_SQ (cosine)"):
                self.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        elif self.ann:
            with _timed(self.index_seconds, "vector IVF_PQ (cosine)"):
                self.table.create_index("vector", config=IvfPq(distance_type="cosine"))

    def hybrid(self, text: str, vector: Sequence[float], scope: str) -> list[str]:
        from corrigenda.store.where import scope_is

        query: Any = self.table.search(query_type="hybrid")
        query = query.vector(list(vector)).text(text).where(scope_is(scope), prefilter=True)
        result = query.select(["id", "text"]).limit(PLAIN_TOP).to_arrow()
        ids: list[str] = result["id"].to_pylist()
        return ids

    def nearest(self, vector: Sequence[float], scope: str, exact: bool) -> list[str]:
        return nearest_ids(self.table, vector, scope, exact)


def nearest_ids(table: Any, vector: Sequence[float], scope: str, exact: bool, limit: int = PLAIN_TOP) -> list[str]:
    """Top `limit` ids by cosine in a scope: through the table's vector index, or exactly."""
    from corrigenda.store.where import scope_is

    query: Any = table.search(list(vector), vector_column_name="vector").distance_type("cosine")
    query = query.where(scope_is(scope), prefilter=True).select(["id", "_distance"]).limit(limit)
    if exact:
        query = query.bypass_vector_index()
    ids: list[str] = query.to_arrow()["id"].to_pylist()
    return ids


@contextmanager
def _timed(into: dict[str, float], key: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    into[key] = time.perf_counter() - started


# -- measuring ----------------------------------------------------------------------------------


def ms_summary(seconds: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99), "mean_ms": statistics.fmean(ms), "n": len(ms)}


def rss_mib() -> tuple[float, float]:
    """(VmRSS now, the process's peak RSS so far), in MiB."""
    current = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            current = int(line.split()[1]) / 1024
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def is_remote(uri: str) -> bool:
    return "://" in uri


def stored_bytes(uri: str) -> int | None:
    """Bytes under a store: the files of a directory, or the objects under an s3:// prefix (listed
    with the AWS variables, AWS_ENDPOINT_URL for a local S3); None where not measured (gs://, az://,
    or a listing that failed)."""
    if not is_remote(uri):
        total = 0
        for root, _dirs, files in os.walk(uri):
            for name in files:
                with suppress(OSError):  # removed by a compaction in between
                    total += os.path.getsize(os.path.join(root, name))
        return total
    if not uri.startswith("s3://"):
        return None
    from pyarrow import fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    scheme, _, host = endpoint.partition("://")
    try:
        bucket = fs.S3FileSystem(endpoint_override=host or None, scheme=scheme or "https")
        listing = bucket.get_file_info(fs.FileSelector(uri[len("s3://") :].rstrip("/"), recursive=True))
    except (OSError, ValueError) as exc:
        print(f"  could not list {uri}: {exc}", file=sys.stderr)
        return None
    return sum(info.size or 0 for info in listing if info.type == fs.FileType.File)


def stored_mib(uri: str) -> float | None:
    count = stored_bytes(uri)
    return count / 2**20 if count is not None else None


@dataclass
class QueryRecord:
    query: str
    in_chain: bool
    recall_ms: float
    plain_ms: float
    recall_with_model_ms: float
    embed_ms: float
    chains: int
    notes_delivered: int
    store_ann_recall: float
    plain_ann_recall: float | None


@dataclass
class SizeResult:
    size: str
    notes: int
    scopes: int
    measured_scope: str
    events: int
    stand_in: str | None
    build: dict[str, Any] = field(default_factory=dict)
    indexes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    plain: dict[str, Any] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)
    recall_with_model: dict[str, float] = field(default_factory=dict)
    query_embed: dict[str, float] = field(default_factory=dict)
    plain_hybrid: dict[str, float] = field(default_factory=dict)
    ratio_p50: float = 0.0
    ratio_per_query_median: float = 0.0
    store_ann_recall: float = 0.0
    plain_ann_recall: float | None = None
    writes: dict[str, dict[str, float]] = field(default_factory=dict)
    note_embed: dict[str, float] = field(default_factory=dict)
    graph_events: int = 0
    rss_mib: float = 0.0
    peak_rss_mib: float = 0.0
    disk_store_mib: float | None = None  # None: not measured (a gs:// or az:// store)
    disk_plain_mib: float | None = None
    store: str = ""  # the store's directory or URI
    plain_store: str = ""  # the plain LanceDB table's
    graph_cache: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    load_average: tuple[float, float] = (0.0, 0.0)  # 1-minute load of the machine when the size began and ended
    vs_1k_p50: float | None = None
    profile: dict[str, str] = field(default_factory=dict)
    after_burst: dict[str, Any] = field(default_factory=dict)  # --burst (issue 36): see measure_burst
    queries: list[QueryRecord] = field(default_factory=list)


def interleaved(
    memory: Memory, plain: PlainHybrid, corpus: Corpus, vectors: Sequence[Sequence[float]], scope: str
) -> tuple[list[float], list[float], list[Any]]:
    """Each query through recall and through the plain hybrid search, query by query, alternating which
    goes first: the seconds of each, and what recall delivered. The embedder must know the vectors."""
    recall_s, plain_s, delivered = [], [], []
    for i, (q, v) in enumerate(zip(corpus.queries, vectors, strict=True)):
        order: list[Callable[[], Any]] = [
            partial(memory.recall, q.text, scope=scope),
            partial(plain.hybrid, q.text, v, scope),
        ]
        times: list[float] = []
        outputs: list[Any] = []
        for call in order if i % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            outputs.append(call())
            times.append(time.perf_counter() - started)
        if i % 2:
            times, outputs = times[::-1], outputs[::-1]
        recall_s.append(times[0])
        plain_s.append(times[1])
        delivered.append(outputs[0])
    return recall_s, plain_s, delivered


def measure_recalls(
    memory: Memory, embedder: MeteredEmbedder, plain: PlainHybrid, corpus: Corpus, scope: str, result: SizeResult
) -> list[list[float]]:
    """The recall and plain figures; the queries' vectors (the real model's), for what follows."""
    real = embedder.inner
    vectors: list[list[float]] = []
    embed_s: list[float] = []
    for q in corpus.queries:  # the model alone, one query at a time
        started = time.perf_counter()
        vectors.append(real.embed([q.text])[0])
        embed_s.append(time.perf_counter() - started)
    embedder.known = {q.text: v for q, v in zip(corpus.queries, vectors, strict=True)}
    for q, v in list(zip(corpus.queries, vectors, strict=True))[:5]:  # warm-up
        memory.recall(q.text, scope=scope)
        plain.hybrid(q.text, v, scope)

    recall_s, plain_s, delivered = interleaved(memory, plain, corpus, vectors, scope)

    embedder.known = {}
    with_model_s = []
    for q in corpus.queries:
        started = time.perf_counter()
        memory.recall(q.text, scope=scope)
        with_model_s.append(time.perf_counter() - started)

    table = memory.tables.handles.notes_table()
    assert table is not None
    table.checkout_latest()  # the exact neighbours of every row: appends go through the store's views, not this table
    for q, v, rec, ps, wm, es, res in zip(
        corpus.queries, vectors, recall_s, plain_s, with_model_s, embed_s, delivered, strict=True
    ):
        store_ids = {h.id for h in memory.tables.search.vector_search(v, scope, None, PLAIN_TOP)}
        exact = set(nearest_ids(table, v, scope, exact=True))
        plain_recall = None
        if plain.ann:
            plain_exact = set(plain.nearest(v, scope, exact=True))
            plain_recall = len(set(plain.nearest(v, scope, exact=False)) & plain_exact) / max(1, len(plain_exact))
        notes = sum(len(c.heads) + len(c.history) + len(c.prerequisites) for c in res.chains)
        result.queries.append(
            QueryRecord(
                query=q.text, in_chain=q.in_chain, recall_ms=rec * 1000, plain_ms=ps * 1000,
                recall_with_model_ms=wm * 1000, embed_ms=es * 1000, chains=len(res.chains), notes_delivered=notes,
                store_ann_recall=len(store_ids & exact) / max(1, len(exact)), plain_ann_recall=plain_recall,
            )
        )  # fmt: skip

    result.recall = ms_summary(recall_s)
    result.recall_with_model = ms_summary(with_model_s)
    result.query_embed = ms_summary(embed_s)
    result.plain_hybrid = ms_summary(plain_s)
    result.ratio_p50 = result.recall["p50_ms"] / result.plain_hybrid["p50_ms"]
    result.ratio_per_query_median = statistics.median(r / p for r, p in zip(recall_s, plain_s, strict=True))
    result.store_ann_recall = statistics.fmean(r.store_ann_recall for r in result.queries)
    if plain.ann:
        result.plain_ann_recall = statistics.fmean(r.plain_ann_recall or 0.0 for r in result.queries)
    return vectors


def measure_graph_cache(
    memory: Memory, embedder: MeteredEmbedder, corpus: Corpus, vectors: Sequence[Sequence[float]], scope: str
) -> dict[str, Any]:
    """What the per-scope graph cache (store/graph.py, with the notes and vectors it keeps) saves: each
    query's recall with the cache as it is and with it defeated (`memory.graphs.drop_all()` just before
    the call, outside its time: the call then reads the scope's events and scans its notes again, as
    a process's first call of a scope does), query by
    query, alternating which goes first; then `graphs.get(scope)` alone, both ways; then each query
    right after a second `Memory` on the same store (another server process, as two clients run) wrote
    a `depends_on` edge between two of the scope's notes, outside the call's time: the call's graph is
    one version behind. Query vectors precomputed, as in the main recall loop."""
    embedder.known = {q.text: list(v) for q, v in zip(corpus.queries, vectors, strict=True)}
    cached_s: list[float] = []
    defeated_s: list[float] = []

    def timed(defeat: bool, text: str) -> float:
        if defeat:
            memory.graphs.drop_all()
        started = time.perf_counter()
        memory.recall(text, scope=scope)
        return time.perf_counter() - started

    memory.recall(corpus.queries[0].text, scope=scope)  # the graph is up to date before the first cached call
    for i, q in enumerate(corpus.queries):
        if i % 2 == 0:
            cached_s.append(timed(False, q.text))
            defeated_s.append(timed(True, q.text))
        else:
            defeated_s.append(timed(True, q.text))
            cached_s.append(timed(False, q.text))

    get_cached_s: list[float] = []
    get_read_s: list[float] = []
    memory.graphs.get(scope)
    for _ in range(len(corpus.queries)):
        started = time.perf_counter()
        memory.graphs.get(scope)
        get_cached_s.append(time.perf_counter() - started)
        memory.graphs.drop_all()
        started = time.perf_counter()
        memory.graphs.get(scope)
        get_read_s.append(time.perf_counter() - started)
    cached, defeated = ms_summary(cached_s), ms_summary(defeated_s)
    get_cached, get_read = ms_summary(get_cached_s), ms_summary(get_read_s)

    peer = Memory(memory.tables.uri, embedder, clock=lambda: NOW, storage_options=None)  # as run_size's
    notes = [note.id for note, _ in peer.tables.search.scope_notes(scope)]
    rng = random.Random(f"{scope}:peer")
    after_peer_s: list[float] = []
    for q in corpus.queries:
        src, dst = rng.sample(notes, 2)
        peer.link(src, dst, "depends_on", actor=ACTOR)
        started = time.perf_counter()
        memory.recall(q.text, scope=scope)
        after_peer_s.append(time.perf_counter() - started)
    embedder.known = {}
    return {
        "recall_cached": cached,
        "recall_cache_defeated": defeated,
        "p50_ratio": defeated["p50_ms"] / cached["p50_ms"],
        "p50_saved_ms": defeated["p50_ms"] - cached["p50_ms"],
        # the same query's two calls, paired (they ran back to back): less exposed to the machine's load
        "per_query_median_saved_ms": 1000 * statistics.median(d - c for d, c in zip(defeated_s, cached_s, strict=True)),
        "per_query_median_ratio": statistics.median(d / c for d, c in zip(defeated_s, cached_s, strict=True)),
        "graph_get_cached": get_cached,
        "graph_get_read": get_read,
        "defeated_by": "memory.graphs.drop_all() before each timed call (outside its time)",
        "recall_after_peer_write": ms_summary(after_peer_s),
    }


def profiled(call: Callable[[], object], top: int) -> str:
    """One call under cProfile: the top `top` functions by cumulative time, then by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


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


def upkeep_state(memory: Memory) -> dict[str, Any]:
    """What upkeep has left to do: each table's fragments, and its rows outside the `id` index; and the
    vector index's shape, (partitions, segments)."""
    state: dict[str, Any] = {"fragments": memory.tables.compaction.fragments()}
    for name, table in (
        ("notes", memory.tables.handles.notes_table()),
        ("events", memory.tables.handles.events_table()),
    ):
        stats = table.index_stats("id_idx") if table is not None else None
        state[f"{name}_unindexed_rows"] = stats.num_unindexed_rows if stats is not None else None
    notes = memory.tables.handles.notes_table()
    state["vector_index_shape"] = memory.tables.indexes.vector_index_shape(notes) if notes is not None else None
    return state


def measure_burst(
    memory: Memory,
    embedder: MeteredEmbedder,
    plain: PlainHybrid,
    corpus: Corpus,
    ids: Sequence[str],
    vectors: Sequence[Sequence[float]],
    scope: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Issue 36: `--burst C,L` corrections then links, back to back (their seconds are the writes
    counted), then at once the queries, recall and plain interleaved as in `measure_recalls` (no
    warm-up: the first queries after the writes are the case); then, once `tables.upkeep.compact()` has
    settled upkeep (waiting for one under way), the same queries again. The plain table is the
    settled one throughout: the burst's writes are the store's alone."""
    corrections, links = args.burst
    rng = random.Random(scope_seed(args.seed, 0) + ":burst")
    targets = rng.sample(current_notes(corpus, ids), min(len(ids), corrections))
    pairs = new_pairs(corpus, ids, links, rng)
    load = os.getloadavg()[0]
    gc.collect()
    correct_s = timed_corrections(memory, corpus, ids, targets, rng)
    link_s = timed_links(memory, ids, pairs)
    embedder.known = {q.text: list(v) for q, v in zip(corpus.queries, vectors, strict=True)}
    recall_s, plain_s, _ = interleaved(memory, plain, corpus, vectors, scope)
    after: dict[str, Any] = {"upkeep_state": upkeep_state(memory)}
    if args.profile:
        after["profile"] = profiled(partial(memory.recall, corpus.queries[0].text, scope=scope), args.profile)
    started = time.perf_counter()
    memory.tables.upkeep.compact()
    settle_s = time.perf_counter() - started
    settled_state = upkeep_state(memory)
    settled_recall_s, settled_plain_s, _ = interleaved(memory, plain, corpus, vectors, scope)
    embedder.known = {}

    def recalls(recall: Sequence[float], plain_: Sequence[float]) -> dict[str, Any]:
        summary, plain_summary = ms_summary(recall), ms_summary(plain_)
        return {
            "recall": summary,
            "plain_hybrid": plain_summary,
            "ratio_p50": summary["p50_ms"] / plain_summary["p50_ms"],
            "ratio_per_query_median": statistics.median(r / p for r, p in zip(recall, plain_, strict=True)),
            "recall_ms": [round(1000 * r, 2) for r in recall],  # in order: when the first queries paid
        }

    return {
        "corrections": corrections,
        "links": links,
        "writes": ms_summary([*correct_s, *link_s]),
        "correct": ms_summary(correct_s),
        "link": ms_summary(link_s),
        "writes_seconds": sum(correct_s) + sum(link_s),
        "after": recalls(recall_s, plain_s) | after,
        "settle_seconds": settle_s,
        "settled": recalls(settled_recall_s, settled_plain_s) | {"upkeep_state": settled_state},
        "load_average": [load, os.getloadavg()[0]],
    }


def bare_rate(real: SentenceTransformerEmbedder, texts: Sequence[str]) -> float:
    """Texts per second of the model's own `embed`, in one call (as one import batch is)."""
    started = time.perf_counter()
    real.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def note_embed_times(real: SentenceTransformerEmbedder, corpus: Corpus, count: int) -> dict[str, float]:
    """The model alone on one note's text: what `remember` and `correct` pay for it."""
    seconds = []
    for note in corpus.notes[:count]:
        started = time.perf_counter()
        real.embed([note.text])
        seconds.append(time.perf_counter() - started)
    return ms_summary(seconds)


# -- one size -----------------------------------------------------------------------------------


def size_location(label: str, root: Path | str) -> str:
    """Where a size's store and plain table go: `root/label` in a directory, or
    `root/<label>-<unix time>` under an object store's URI (a bucket is not emptied between runs)."""
    if isinstance(root, Path):
        return str(root / label)
    return f"{root.rstrip('/')}/{label}-{int(time.time())}"


def run_size(label: str, args: argparse.Namespace, real: SentenceTransformerEmbedder, root: Path | str) -> SizeResult:
    """One size; `root` is a local directory (a Path) or an object store's URI (s3://…)."""
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    n = SIZES[label]
    many_scopes = label == "1M"
    scopes = SCOPES_AT_1M if many_scopes else 1
    per_scope = n // scopes
    location = size_location(label, root)
    store_uri, plain_uri = f"{location}/store", f"{location}/plain"
    embedder = MeteredEmbedder(real)
    memory = Memory(store_uri, embedder, clock=lambda: NOW, storage_options=None)  # a bucket: the AWS_* variables
    # opened as the server opens its store once a client is connected: otherwise the first size's
    # import would pay the process's one-time `import lancedb` (about 2.4 s here, a quarter of a 1k import)
    memory.warm(then=gc.freeze).join()  # as the server does (server/app.py)
    scope = "s0000"
    rng = random.Random(f"{args.seed}:{label}:events")

    t = time.perf_counter()
    corpus = make_corpus(per_scope, scope_seed(args.seed, 0))
    corpus_seconds = time.perf_counter() - t
    # The bench's own corpus (about 100,000 objects at 100k) is not what a server holds: out of the
    # collector's full passes, or a recall that meets one pays for collecting it (130 ms in a probe).
    # What the store makes from here on (the scope's graph, the notes it keeps) is collected as in a server.
    gc.freeze()

    # the model's bare rate on (a sample of) the same texts, before and after the import with the
    # real model (the machine's load can change in between: the mean of the two is compared)
    sample = [note.text for note in corpus.notes[: args.rate_sample]]
    bare_before = bare_rate(real, sample)
    ids, imported = import_corpus(memory, embedder, corpus, scope, args.batch)
    bare_after = bare_rate(real, sample)
    bare = (bare_before + bare_after) / 2
    events = corpus_events(corpus, ids, scope, rng)

    stand_in_note = None
    stand_in_import = Import()
    if many_scopes:
        t = time.perf_counter()
        vocabulary = [
            note.text for s in range(1, 21) for note in make_corpus(per_scope, scope_seed(args.seed, s)).notes
        ]
        stand_in = WordSumEmbedder(real, vocabulary, args.seed)
        stand_in_setup = time.perf_counter() - t
        stand_in_note = (
            f"scopes s0001-s{scopes - 1:04d} ({n - per_scope:,} notes): vectors from a stand-in embedder, the "
            f"normalised sum of the real model's vectors of the text's words ({stand_in.vocabulary:,} words, "
            f"embedded in {stand_in_setup:.1f} s), written with Tables.add_notes, {args.bulk_rows:,} notes of "
            f"several scopes per write; s0000 (the 1k corpus) through import_notes, and every query: the real model"
        )
        stand_in_import, more = write_stand_in_scopes(memory, stand_in, args, per_scope, scopes, rng, started)
        events += more

    t = time.perf_counter()
    write_events(memory, events)
    events_seconds = time.perf_counter() - t
    t = time.perf_counter()
    compacted = memory.tables.upkeep.compact()
    compact_seconds = time.perf_counter() - t
    notes_table = memory.tables.handles.notes_table()
    assert notes_table is not None

    result = SizeResult(
        size=label, notes=int(notes_table.count_rows()), scopes=scopes, measured_scope=scope,
        events=int(memory.tables.handles.events_table().count_rows()), stand_in=stand_in_note, store=store_uri,
        plain_store=plain_uri,
    )  # fmt: skip
    result.build = {
        "corpus_seconds": corpus_seconds,
        "bare_embed_rate": bare,
        "bare_embed_rate_before_after": [bare_before, bare_after],
        "bare_embed_sample": len(sample),
        "import_notes": imported.notes,
        "import_seconds": imported.seconds,
        "import_rate": imported.notes / imported.seconds,
        "import_embed_share": imported.embed_seconds / imported.seconds,
        "model_rate_in_import": imported.notes / imported.embed_seconds,
        "import_vs_bare": (imported.notes / imported.seconds) / bare,
        "batch": args.batch,
        "edges": {"supersedes": sum(len(c) - 1 for c in corpus.chains), "depends_on": len(corpus.depends)},
        "events_written": len(events),
        "events_seconds": events_seconds,
        "edges_written_by": "Tables.add_events (direct, batches of 10,000)",
        "compact_seconds": compact_seconds,
        "compact_ran": compacted,
    }
    if many_scopes:
        result.build["stand_in_import_notes"] = stand_in_import.notes
        result.build["stand_in_import_seconds"] = stand_in_import.seconds
        result.build["stand_in_import_rate"] = stand_in_import.notes / stand_in_import.seconds
        result.build["stand_in_embed_share"] = stand_in_import.embed_seconds / stand_in_import.seconds
    result.indexes = {
        "notes": describe_indexes(notes_table),
        "events": describe_indexes(memory.tables.handles.events_table()),
    }
    del events
    gc.collect()

    print(f"  {label}: built in {time.perf_counter() - started:.0f} s; plain LanceDB table next", file=sys.stderr)
    plain = PlainHybrid(plain_uri, notes_table)
    result.plain = {
        "rows": plain.rows, "copy_seconds": plain.copy_seconds, "index_seconds": plain.index_seconds,
        "ann": plain.ann, "indexes": describe_indexes(plain.table),
    }  # fmt: skip

    print(f"  {label}: measuring", file=sys.stderr)
    vectors = measure_recalls(memory, embedder, plain, corpus, scope, result)
    result.graph_events = len(memory.graphs.get(scope).events)
    print(f"  {label}: the graph cache, kept and defeated", file=sys.stderr)
    result.graph_cache = measure_graph_cache(memory, embedder, corpus, vectors, scope)
    query = corpus.queries[0].text
    if args.profile:
        embedder.known = {query: real.embed([query])[0]}
        result.profile["recall (query vector precomputed)"] = profiled(
            partial(memory.recall, query, scope=scope), args.profile
        )
        embedder.known = {}
    result.note_embed = note_embed_times(real, corpus, args.writes)
    result.writes = measure_writes(memory, corpus, ids, scope, args.writes, scope_seed(args.seed, 0))
    if args.profile:
        draft = Draft(text=f"{corpus.notes[-1].text} (profiled)", subject=corpus.notes[-1].subject)
        result.profile["remember (model in the call)"] = profiled(
            partial(memory.remember, draft, scope=scope, actor=ACTOR), args.profile
        )

    if args.burst:
        print(f"  {label}: a burst of writes, then the queries", file=sys.stderr)
        result.after_burst = measure_burst(memory, embedder, plain, corpus, ids, vectors, scope, args)

    result.load_average = (load_at_start, os.getloadavg()[0])
    result.rss_mib, result.peak_rss_mib = rss_mib()
    result.disk_store_mib = stored_mib(store_uri)
    result.disk_plain_mib = stored_mib(plain_uri)
    result.seconds = time.perf_counter() - started
    memory.finish_upkeep(UPKEEP_WAIT_S)  # a compaction the timed writes set off, before its files go
    del memory, plain, notes_table
    gc.collect()
    if not args.keep and not is_remote(location):
        shutil.rmtree(location, ignore_errors=True)
    return result


# -- reporting ----------------------------------------------------------------------------------


def _ms(summary: dict[str, float]) -> str:
    return f"{summary['p50_ms']:.1f} / {summary['p99_ms']:.1f}" if summary else "-"


def _mib(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "n/a"


def _indexes(found: list[dict[str, Any]]) -> str:
    return ", ".join(f"{'+'.join(i['columns'])}:{i['type']}" for i in found) or "none"


def table(results: Sequence[SizeResult]) -> str:
    def row(label: str, cell: Callable[[SizeResult], str]) -> str:
        return f"| {label} | " + " | ".join(cell(r) for r in results) + " |"

    def size_label(r: SizeResult) -> str:
        return f"{r.size} ({r.scopes:,} scopes)" if r.scopes > 1 else f"{r.size} (1 scope)"

    def cache(r: SizeResult, key: str) -> str:
        return _ms(r.graph_cache[key]) if r.graph_cache else "-"

    remote = any(is_remote(r.store) for r in results)

    lines = [
        "| metric | " + " | ".join(size_label(r) for r in results) + " |",
        "|---|" + "---|" * len(results),
        row("store", lambda r: f"`{r.store}`"),
        row("notes / events in the store", lambda r: f"{r.notes:,} / {r.events:,}"),
        row("notes in the measured scope", lambda r: f"{r.notes // r.scopes:,}"),
        row("recall_chains p50 / p99 ms (query vector precomputed)", lambda r: _ms(r.recall)),
        row("plain LanceDB hybrid top-20 p50 / p99 ms", lambda r: _ms(r.plain_hybrid)),
        row("ratio recall / plain, p50s (median per query)",
            lambda r: f"{r.ratio_p50:.2f} ({r.ratio_per_query_median:.2f})"),
        row("recall_chains with the model in the call p50 / p99 ms", lambda r: _ms(r.recall_with_model)),
        row("model alone, one query p50 / p99 ms", lambda r: _ms(r.query_embed)),
        row("graph cache: recall p50 / p99 ms, cache kept", lambda r: cache(r, "recall_cached")),
        row("graph cache: recall p50 / p99 ms, cache defeated (forget() before each)",
            lambda r: cache(r, "recall_cache_defeated")),
        row("graph cache: defeated / kept, ratio of p50s (ms saved); per query, median ratio (ms saved)",
            lambda r: f"{r.graph_cache['p50_ratio']:.2f} ({r.graph_cache['p50_saved_ms']:.1f}); "
            f"{r.graph_cache['per_query_median_ratio']:.2f} ({r.graph_cache['per_query_median_saved_ms']:.1f})"
            if r.graph_cache else "-"),
        row("graph cache: graphs.get(scope) alone p50 / p99 ms: kept; read again",
            lambda r: f"{cache(r, 'graph_get_cached')}; {cache(r, 'graph_get_read')}"),
        row("graph cache: recall p50 / p99 ms right after another process wrote an edge",
            lambda r: cache(r, "recall_after_peer_write") if "recall_after_peer_write" in r.graph_cache else "-"),
        row("1M: recall p50 / the 1k store's p50, same queries",
            lambda r: f"{r.vs_1k_p50:.2f}" if r.vs_1k_p50 is not None else "-"),
        row("chains / notes delivered per recall (mean)",
            lambda r: f"{statistics.fmean(q.chains for q in r.queries):.1f} / "
            f"{statistics.fmean(q.notes_delivered for q in r.queries):.1f}"),
        row("ANN recall@20, store vector search vs exact", lambda r: f"{r.store_ann_recall:.3f}"),
        row("ANN recall@20, plain table's index vs exact",
            lambda r: f"{r.plain_ann_recall:.3f}" if r.plain_ann_recall is not None else "exact (no ANN)"),
        row("remember p50 / p99 ms", lambda r: _ms(r.writes["remember"])),
        row("correct p50 / p99 ms", lambda r: _ms(r.writes["correct"])),
        row("link (depends_on) p50 / p99 ms", lambda r: _ms(r.writes["link"])),
        row("model alone, one note p50 ms", lambda r: f"{r.note_embed['p50_ms']:.1f}"),
        row("bulk import, real model, notes/s",
            lambda r: f"{r.build['import_rate']:.0f} ({r.build['import_notes']:,} notes)"),
        row("  of which in the model", lambda r: f"{100 * r.build['import_embed_share']:.0f} %"),
        row("  model's bare embed rate, texts/s: mean (before, after; sample)",
            lambda r: f"{r.build['bare_embed_rate']:.0f} ({r.build['bare_embed_rate_before_after'][0]:.0f}, "
            f"{r.build['bare_embed_rate_before_after'][1]:.0f}; {r.build['bare_embed_sample']:,})"),
        row("  the model's rate inside the import, texts/s", lambda r: f"{r.build['model_rate_in_import']:.0f}"),
        row("  import / bare model rate", lambda r: f"{100 * r.build['import_vs_bare']:.0f} %"),
        row("1M: stand-in scopes written (add_notes), notes/s",
            lambda r: f"{r.build['stand_in_import_rate']:.0f} ({r.build['stand_in_import_notes']:,} notes, "
            f"{100 * r.build['stand_in_embed_share']:.0f} % in the stand-in)" if "stand_in_import_rate" in r.build else "-"),
        row("edges written (direct add_events) s", lambda r: f"{r.build['events_seconds']:.1f}"),
        row("upkeep: tables.upkeep.compact() s", lambda r: f"{r.build['compact_seconds']:.1f}"),
        row("events in the scope's in-memory graph", lambda r: f"{r.graph_events:,}"),
        row("RSS after the size / peak so far MiB", lambda r: f"{r.rss_mib:.0f} / {r.peak_rss_mib:.0f}"),
        row("stored: store / plain table MiB" + (" (objects in the bucket)" if remote else " (on disk)"),
            lambda r: f"{_mib(r.disk_store_mib)} / {_mib(r.disk_plain_mib)}"),
        row("plain: copy + index build s",
            lambda r: f"{r.plain['copy_seconds']:.0f} + {sum(r.plain['index_seconds'].values()):.0f}"),
        row("wall time of the size s", lambda r: f"{r.seconds:.0f}"),
        row("machine load average (1 min) at start / end",
            lambda r: f"{r.load_average[0]:.1f} / {r.load_average[1]:.1f}"),
    ]  # fmt: skip
    return "\n".join(lines)


def burst_table(results: Sequence[SizeResult]) -> str:
    """Issue 36's case (`--burst`): the writes, and the queries right after them and once upkeep settled."""
    burst = [r for r in results if r.after_burst]
    if not burst:
        return "(no --burst in this run)"

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> str:
        return f"| {label} | " + " | ".join(cell(r.after_burst) for r in burst) + " |"

    def state(b: dict[str, Any]) -> str:
        return (f"{b['fragments']['notes']} / {b['fragments']['events']} fragments; "
                f"{b['notes_unindexed_rows']:,} / {b['events_unindexed_rows']:,} rows")  # fmt: skip

    lines = [
        "| after a burst of writes | " + " | ".join(f"{r.size} (1 scope)" for r in burst) + " |",
        "|---|" + "---|" * len(burst),
        row("writes: corrections, then links (depends_on)", lambda b: f"{b['corrections']:,}, {b['links']:,}"),
        row("writes p50 / p99 ms (all)", lambda b: _ms(b["writes"])),
        row("  correct; link p50 / p99 ms", lambda b: f"{_ms(b['correct'])}; {_ms(b['link'])}"),
        row("right after: recall p50 / p99 ms", lambda b: _ms(b["after"]["recall"])),
        row("right after: plain hybrid p50 / p99 ms", lambda b: _ms(b["after"]["plain_hybrid"])),
        row("right after: ratio of p50s (median per query)",
            lambda b: f"{b['after']['ratio_p50']:.2f} ({b['after']['ratio_per_query_median']:.2f})"),
        row("right after: notes / events table, fragments; rows outside the id index",
            lambda b: state(b["after"]["upkeep_state"])),
        row("upkeep settled (tables.upkeep.compact()) s", lambda b: f"{b['settle_seconds']:.1f}"),
        row("settled: recall / plain p50 ms", lambda b: f"{b['settled']['recall']['p50_ms']:.1f} / "
            f"{b['settled']['plain_hybrid']['p50_ms']:.1f}"),
        row("settled: ratio of p50s (median per query)",
            lambda b: f"{b['settled']['ratio_p50']:.2f} ({b['settled']['ratio_per_query_median']:.2f})"),
        row("machine load average (1 min) at the burst's start / end",
            lambda b: f"{b['load_average'][0]:.1f} / {b['load_average'][1]:.1f}"),
    ]  # fmt: skip
    return "\n".join(lines)


@dataclass(frozen=True)
class Target:
    label: str
    size: str
    value: Callable[[SizeResult], float | None]
    limit: float
    at_least: bool = False
    unit: str = ""


def _write_p50(kind: str) -> Callable[[SizeResult], float | None]:
    return lambda r: r.writes[kind]["p50_ms"]


TARGETS = (
    Target("recall_chains p50 <= 25 ms at 100k", "100k", lambda r: r.recall["p50_ms"], 25, unit=" ms"),
    Target("recall_chains p99 <= 80 ms at 100k", "100k", lambda r: r.recall["p99_ms"], 80, unit=" ms"),
    *(Target(f"recall p50 <= 1.3x plain hybrid p50 at {s}", s, lambda r: r.ratio_p50, 1.3, unit="x") for s in SIZES),
    Target("1M/1,000 scopes: recall p50 <= 1.5x the 1k store's", "1M", lambda r: r.vs_1k_p50, 1.5, unit="x"),
    *(Target(f"{w} p50 <= 40 ms at 100k", "100k", _write_p50(w), 40, unit=" ms") for w in ("remember", "correct", "link")),
    *(Target(f"ANN recall@20 >= 0.95 at {s}", s, lambda r: r.store_ann_recall, 0.95, at_least=True) for s in SIZES),
    Target("recall p50 <= 1.3x plain right after a burst of writes at 100k", "100k",
           lambda r: r.after_burst["after"]["ratio_p50"] if r.after_burst else None, 1.3, unit="x"),
    Target("burst writes (correct, link) p50 <= 40 ms at 100k", "100k",
           lambda r: r.after_burst["writes"]["p50_ms"] if r.after_burst else None, 40, unit=" ms"),
)  # fmt: skip


def targets(results: Sequence[SizeResult]) -> list[list[object]]:
    """Each target met or missed: its label, the figure measured, and the verdict."""
    by_size = {r.size: r for r in results}
    rows: list[list[object]] = []
    for t in TARGETS:
        r = by_size.get(t.size)
        if r is None:
            continue
        value = t.value(r)
        if value is None:
            continue
        met = value >= t.limit if t.at_least else value <= t.limit
        rows.append([t.label, f"{value:.3g}{t.unit}", "met" if met else "MISSED"])
    for r in results:
        if r.size not in by_size or r.stand_in is not None:
            continue
        rate, share = r.build["import_rate"], r.build["import_vs_bare"]
        met = rate >= 500 or share >= 0.9
        rows.append(
            [
                f"bulk import >= 500 notes/s or >= 90 % of the model's rate at {r.size}",
                f"{rate:.0f} notes/s, {100 * share:.0f} % of the bare {r.build['bare_embed_rate']:.0f} texts/s",
                "met" if met else "MISSED",
            ]
        )
    return rows


def targets_table(results: Sequence[SizeResult]) -> str:
    return markdown_table(["target", "measured", "verdict"], targets(results))


def sizes(payload: dict[str, Any]) -> list[SizeResult]:
    """The results file's sizes as the run held them."""
    return [
        SizeResult(
            **{
                **d,
                "queries": [QueryRecord(**q) for q in d["queries"]],
                "load_average": tuple(d["load_average"]),
            }
        )
        for d in payload["sizes"]
    ]


TABLES = {
    "main": lambda payload: table(sizes(payload)),
    "targets": lambda payload: targets_table(sizes(payload)),
    "burst": lambda payload: burst_table(sizes(payload)),
}


def report(results: Sequence[SizeResult], args: argparse.Namespace, seconds: float) -> str:
    out = [
        f"corrigenda at scale: seed {args.seed}, {QUERIES} queries per size, {args.writes} timed calls of each write, "
        f"import batches of {args.batch}; torch threads {args.threads} "
        f"({'set by --torch-threads' if args.torch_threads else 'torch default'}), {os.cpu_count()} CPUs; "
        f"whole run {seconds:.0f} s; {args.engine}",
        f"store: {args.store_label}",
        "Recall and the plain hybrid search get the same precomputed query vector (model excluded from both); "
        "the writes include the model. Edges of the corpus written with Tables.add_events; measured writes "
        "through Memory.",
        "",
        table(results),
        "",
    ]
    for r in results:
        out.append(
            f"{r.size}: notes indexes {_indexes(r.indexes['notes'])}; events indexes {_indexes(r.indexes['events'])}; "
            f"plain indexes {_indexes(r.plain['indexes'])}"
        )
        if r.stand_in:
            out.append(f"{r.size}: {r.stand_in}")
    if any(r.after_burst for r in results):
        out += ["", "A burst of writes (--burst), then the same queries:", "", burst_table(results)]
    out += ["", "Targets:", targets_table(results)]
    for r in results:
        for call, text in r.profile.items():
            out += ["", f"cProfile of one {call} at {r.size}:", text]
        burst_profile = r.after_burst.get("after", {}).get("profile")
        if burst_profile:
            out += ["", f"cProfile of one recall right after the burst at {r.size}:", burst_profile]
    return "\n".join(out)


def write_json(path: Path, results: Sequence[SizeResult], args: argparse.Namespace, seconds: float) -> None:
    payload = {
        "seed": args.seed,
        "queries_per_size": QUERIES,
        "writes_per_kind": args.writes,
        "batch": args.batch,
        "torch_threads": args.threads,
        "torch_threads_set": bool(args.torch_threads),
        "cpus": os.cpu_count(),
        "model": SentenceTransformerEmbedder().name,
        "runtime_s": round(seconds, 1),
        "db": args.store_label,
        "targets": targets(results),
        "sizes": [asdict(r) for r in results],
    }
    write_results(path, payload)


def _burst(text: str) -> tuple[int, int]:
    try:
        corrections, links = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give corrections,links, e.g. 1000,500") from None
    if corrections < 1 or links < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one correction, and no negative count of links")
    return corrections, links


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--sizes", default="1k,10k,100k,1M", help="comma-separated of 1k,10k,30k,100k,1M (default 1k,10k,100k,1M)"
    )
    parser.add_argument("--quick", action="store_true", help="1k and 10k only")
    parser.add_argument("--seed", type=int, default=8, help="corpus seed (default 8)")
    parser.add_argument("--batch", type=int, default=2000, help="notes per import_notes call (default 2000)")
    parser.add_argument(
        "--bulk-rows", type=int, default=25_000, help="notes per write for the 1M stand-in scopes (default 25000)"
    )
    parser.add_argument("--writes", type=int, default=30, help="timed calls of each write (default 30)")
    parser.add_argument("--rate-sample", type=int, default=2000, help="texts for the bare model rate (default 2000)")
    parser.add_argument(
        "--torch-threads", type=int, metavar="N", help="torch.set_num_threads(N) first (default: torch's own)"
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the top N of a cProfiled recall and remember"
    )
    parser.add_argument("--keep", type=Path, help="build the stores here and keep them (default: a temp dir)")
    parser.add_argument(
        "--db", metavar="URI",
        help="build each size's store under URI/<size>-<unix time> in an object store (s3://bucket/prefix, gs://, "
        "az://; read with the usual AWS_* etc. variables) instead of a temp directory; left there",
    )  # fmt: skip
    parser.add_argument(
        "--local-s3", action="store_true",
        help="start a local S3 API for the run (bench/local_s3.py); without --db, use s3://corrigenda-bench/scale",
    )  # fmt: skip
    parser.add_argument(
        "--burst", type=_burst, metavar="C,L",
        help="after each size's other figures: C corrections and L links back to back, then the queries at "
        "once, then again once upkeep has settled (issue 36; e.g. 1000,500)",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write every figure and per-query record here")
    args = parser.parse_args(argv)
    labels = ["1k", "10k"] if args.quick else [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in labels if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; use {', '.join(SIZES)}")
    if "1M" in labels and "1k" not in labels:
        labels.insert(0, "1k")  # the reference of the 1M comparison
        print("1M compares with the 1k store: building 1k too", file=sys.stderr)
    labels = sorted(dict.fromkeys(labels), key=lambda s: SIZES[s])
    if args.db is not None and not is_remote(args.db):
        parser.error("--db takes an object store's URI (s3://bucket/prefix); for a directory use --keep DIR")
    if args.db is not None and args.keep is not None:
        parser.error("--db and --keep are exclusive")

    started = time.perf_counter()
    args.engine = f"engine at {commit()}"
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    real = SentenceTransformerEmbedder()
    real.embed(["warm up"])
    args.threads = _torch_threads()
    results: list[SizeResult] = []
    with ExitStack() as stack:
        root: Path | str
        if args.local_s3:
            from faults import LOCAL_BUCKET, local_s3  # bench/faults.py: sys.path[0] is bench/ when run as a script

            env = stack.enter_context(local_s3(True))
            print(f"local S3 API at {env.get('AWS_ENDPOINT_URL')}", file=sys.stderr)
            root = args.db or f"s3://{LOCAL_BUCKET}/scale"
            args.store_label = f"{root}/<size>-<unix time> in a local S3 API started for the run (bench/local_s3.py)"
        elif args.db:
            root = args.db
            args.store_label = f"{root}/<size>-<unix time>"
        else:
            root = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="corrigenda-scale-")))
            root.mkdir(parents=True, exist_ok=True)
            args.store_label = f"{root}/<size> ({'kept' if args.keep else 'a temp directory, removed after'})"
        for label in labels:
            print(f"size {label}: building", file=sys.stderr)
            result = run_size(label, args, real, root)
            results.append(result)
            print(f"size {label}: done in {result.seconds:.0f} s", file=sys.stderr)
    one_k = next((r for r in results if r.size == "1k"), None)
    for r in results:
        if r.size == "1M" and one_k is not None:
            r.vs_1k_p50 = r.recall["p50_ms"] / one_k.recall["p50_ms"]
    seconds = time.perf_counter() - started
    print(report(results, args, seconds))
    if args.json:
        write_json(args.json, results, args, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
