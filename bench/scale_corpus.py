"""bench/scale.py's synthetic corpus: English sentences stating attributes of services, people, offices,
projects, plants, recipes and cars (thousands of entities, several phrasings per attribute, optional
trailing clauses and context sentences), deterministic from a seed; correction chains, depends_on edges
and the questions asked of it. bench/ann_upkeep.py and bench/overlap.py build their stores from it too.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

QUERIES = 60
CHAIN_SHARE = 0.10  # share of notes that are versions in a correction chain
DEPENDS_SHARE = 0.05  # share of notes with a depends_on edge
BASE = datetime(2026, 1, 1, tzinfo=UTC)
NOW = BASE + timedelta(days=400)  # the store's clock: after every corpus note


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
