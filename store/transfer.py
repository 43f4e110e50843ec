"""Export and import: a store's notes and lifecycle events as JSON Lines and back, without loss;
and the official knowledge-graph memory server's `memory.jsonl` (docs/reference.md, "Export and import").

An export is a header line, then scope by scope its notes and its events, each oldest first, with
every field as stored: ids, scope, times, actors, reasons, and the vectors if asked for; and last a
trailer with the counts of notes and events and the SHA-256 of every line before it, so that a file
cut short (a killed `export > file`) is never restored as a smaller memory by accident. Importing
a file is:
- checked in full before anything is written: the trailer (a file without one, or whose counts or
  digest differ, is refused unless a partial restore is asked for, which then says what is
  missing); the header's model and dimension against the store's; each line parsed and checked as a
  write checks a note (store/model.py), with a tool call's types (a number is a JSON number, a time
  an ISO 8601 string: server/arguments.py); each vector's every element a finite number within
  float32's range, as many as the header's dimension; each record's recorded_at no later than the
  store's clock and a day (CLOCK_ALLOWANCE); every edge's notes, and every tombstone's note, found in
  the file or the store, in the edge's scope; a bad line is named by its number and field, and nothing
  is stored;
- embedded in full before anything is written, so that the model cannot fail half-way;
- idempotent: a record whose id is stored already is left alone (one stored with other content
  is refused), so importing a file twice changes nothing;
- faithful to `forget`: a note that a `forgets` tombstone names, in the store or in the file, is
  never written, nor any event naming it; a tombstone from the file erases its note here too;
- written the way every write is (tables.py): the edges that name a note of the file first, then the
  notes in batches, each batch's rows the commit point of their edges; then, in one append, the
  events that act on notes stored already (a revokes, a forgets, a reinstates, an edge between two
  stored notes); the tombstones' erasures last. A write that fails (the disk, the bucket) before that
  append has changed no stored note, only added some of the file's; the same import run again
  completes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ValidationError

from . import subjects
from .checks import CLOCK_ALLOWANCE
from .embedder import Embedder
from .errors import InvalidArgument
from .fold import CHECK_DAYS
from .ids import EVENT_PREFIX, NOTE_PREFIX, check_id, derived_id, is_note_id
from .model import MAX_ACTOR, Event, EventKind, Note, check_event, check_fields, check_text, check_time
from .tables import Tables
from .views import Imported
from .where import check_scope

# Events of a scope as a whole, whose dst is no note or event (subjects.py, confirms.py), and the events
# of one note that have no src.
SCOPE_WIDE = (*subjects.DECLARING, EventKind.CHECK_EVERY)
NO_SOURCE = (EventKind.REVOKES, EventKind.REINSTATES, EventKind.FORGETS, EventKind.CONFIRMS)
FORMAT = "corrigenda-export"
VERSION = 2  # 2: the trailer; a version 1 file (no trailer) is read as a partial restore only
TRAILER = "end"
BATCH = 256  # notes embedded and written at once: one model call, one append
LOOKUP = 1000  # ids per query when looking for stored notes
FLOAT32_MAX = float(np.finfo(np.float32).max)  # a vector's elements are stored as float32
# A record's recorded_at is when it was recorded: not later than the importing store's clock, give or take
# a day for clocks that differ. One dated later (year 9000, say) would be stored, counted and exported, yet
# every read is of what was recorded until now: no recall, list or history would show it, nor could it
# be corrected, and an event so dated would act only then.

Progress = Callable[[int, int], None]  # (notes written, notes to write)
Format = Literal["corrigenda", "knowledge-graph"]


def _json(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# -- export --------------------------------------------------------------------------------


def export_lines(
    tables: Tables, scopes: Sequence[str], model: str, now: datetime, vectors: bool = False
) -> Iterator[str]:
    """The export of `scopes`, line by line. A note under a tombstone (its erasure under way) and an
    edge whose note never landed (a write cut short) are left out: nothing reads them."""
    stored = tables.handles.stored_model()
    header = {
        "type": FORMAT, "version": VERSION, "exported_at": now.isoformat(), "model": stored[0] if stored else model,
        "dimension": stored[1] if stored else None, "vectors": vectors, "scopes": list(scopes),
    }  # fmt: skip
    digest, counts = hashlib.sha256(), {"note": 0, "event": 0}

    def line(record: Mapping[str, Any]) -> str:
        text = _json(record)
        digest.update(text.encode() + b"\n")
        counts[record["type"]] += 1
        return text

    yield _json(header)
    for scope in scopes:
        notes = tables.search.scope_notes(scope, with_vectors=vectors)
        _, events = tables.events.scope_events(scope)  # read after the notes: a note read has its edges stored
        by_id: dict[str, Event] = {}
        for e in events:
            by_id.setdefault(e.id, e)
        forgotten = {e.dst for e in by_id.values() if e.kind is EventKind.FORGETS}
        kept = {n.id for n, _ in notes if n.id not in forgotten}
        for note, vector in sorted(notes, key=lambda nv: (nv[0].recorded_at, nv[0].id)):
            if note.id in kept:
                record = {"type": "note", **note.model_dump(mode="json")}
                yield line(record | {"vector": vector} if vectors else record)
        for event in sorted(by_id.values(), key=lambda e: (e.recorded_at, e.id)):
            if _readable_edge(event, kept, by_id):
                yield line({"type": "event", **event.model_dump(mode="json")})
    yield _json({"type": TRAILER, "notes": counts["note"], "events": counts["event"], "sha256": digest.hexdigest()})


def _readable_edge(event: Event, notes: set[str], events: Mapping[str, Event]) -> bool:
    """Whether the fold would read this event: a tombstone always; an edge whose notes exist."""
    if event.kind is EventKind.FORGETS or event.kind in SCOPE_WIDE:
        return True
    if event.src is not None and event.src not in notes:
        return False
    if is_note_id(event.dst):
        return event.dst in notes
    target = events.get(event.dst)
    return event.kind is EventKind.REINSTATES and target is not None and _readable_edge(target, notes, events)


# -- reading a file ------------------------------------------------------------------------


@dataclass
class Parsed:
    """A file's records, checked one by one; `line` maps each id to the line it came from."""

    format: Format
    notes: dict[str, Note] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    vectors: dict[str, list[float]] = field(default_factory=dict)
    line: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    dimension: int | None = None
    partial: str | None = None  # a partial restore: what the file does not show to be whole, or None
    # edges to notes that may not exist, dropped rather than refused (a relation to an entity the
    # knowledge graph never created: that server does not check them either)
    optional_edges: set[str] = field(default_factory=set)
    # the knowledge graph's repeats (an entity or observation given twice), stored once and listed
    merged: list[str] = field(default_factory=list)


class _Digest:
    """The SHA-256 of the lines read since `restart`: an export's trailer vouches for its notes and
    events lines, not for the header (whose time differs in each export of the same records)."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self._sha = hashlib.sha256()

    def update(self, line: str) -> None:
        self._sha.update(line.rstrip("\r").encode("utf-8", "surrogatepass") + b"\n")

    def hexdigest(self) -> str:
        return self._sha.copy().hexdigest()


def _records(lines: Iterable[str], digest: _Digest | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line's record, with its number; `digest` takes in each line before its record is
    handed out (the trailer's too: `_parse_export` keeps the digest of the lines before it)."""
    for number, line in enumerate(lines, 1):
        if number == 1:
            line = line.removeprefix("\ufeff")  # the byte order mark some editors put before UTF-8
        if not line.strip():
            continue
        if digest is not None:
            digest.update(line)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(
                f"line {number}", f"not JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
            ) from None
        except RecursionError:
            raise InvalidArgument(f"line {number}", "not a record: its JSON is nested too deeply to read") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise InvalidArgument(f"line {number}", 'not a record: each line is a JSON object with a "type"')
        yield number, record


def parse(
    lines: Iterable[str], scope: str, actor: str | None, source: str, now: datetime, partial: bool = False
) -> Parsed:
    """A corrigenda export or a knowledge-graph `memory.jsonl`, told apart by its first record's type
    (the header, or an entity or relation); `scope`, `actor`, `source` and `now` are for the
    knowledge graph, whose lines have none of them. `partial`: restore an export whose trailer is
    missing or does not match (module docstring), saying so in `Parsed.partial`."""
    digest = _Digest()
    records = _records(lines, digest)
    first = next(records, None)
    if first is None:
        raise InvalidArgument("file", "is empty")
    number, record = first
    if record["type"] == FORMAT:
        digest.restart()  # after the header
        return _parse_export(number, record, records, digest, partial, now)
    if record["type"] in ("entity", "relation"):
        return _parse_graph([first, *records], check_scope(scope), actor, source, now)
    raise InvalidArgument(
        f"line {number}",
        f'type {record["type"]!r}: a corrigenda export starts with its "{FORMAT}" header; a knowledge-graph '
        'memory.jsonl has "entity" and "relation" lines',
    )


def _parse_export(
    number: int,
    header: dict[str, Any],
    records: Iterator[tuple[int, dict[str, Any]]],
    digest: _Digest,
    partial: bool,
    now: datetime,
) -> Parsed:
    version = header.get("version")
    if version not in (1, VERSION):
        raise InvalidArgument(f"line {number}", f"export version {version!r}; this reads 1 and {VERSION}")
    dimension = header.get("dimension")
    if dimension is not None and (not isinstance(dimension, int) or isinstance(dimension, bool) or dimension < 1):
        raise InvalidArgument(f"line {number}", f"dimension: {dimension!r} is not a vector size")
    parsed = Parsed("corrigenda", model=header.get("model"), dimension=dimension)
    trailer: dict[str, Any] | None = None
    before_trailer = digest.hexdigest()
    for number, record in records:
        kind = record.pop("type")
        if trailer is not None:
            raise InvalidArgument(f"line {number}", "comes after the export's trailer, its last line")
        try:
            if kind == TRAILER:
                trailer = record
            elif kind == "note":
                vector = record.pop("vector", None)
                note = note_from_record(record)
                _not_after(note.recorded_at, now)
                if vector is not None:
                    parsed.vectors[note.id] = _vector(vector, dimension)
                _add(parsed, note.id, note, number)
            elif kind == "event":
                event = event_from_record(record)
                _not_after(event.recorded_at, now)
                _add(parsed, event.id, event, number)
            else:
                raise InvalidArgument("type", f"{kind!r} is not a record of an export (note or event)")
        except (InvalidArgument, ValidationError) as exc:
            raise InvalidArgument(f"line {number}", _problem(exc)) from None
        if trailer is None:
            before_trailer = digest.hexdigest()  # every line so far: the trailer's own is left out
    missing = _not_whole(parsed, trailer, before_trailer, version)
    if missing is not None and not partial:
        raise InvalidArgument(
            "file", f"{missing}: it may have been cut short, and would restore a smaller memory. Import it anyway "
            "as a partial restore (--partial), or export again"
        )  # fmt: skip
    parsed.partial = missing
    return parsed


def _not_whole(parsed: Parsed, trailer: Mapping[str, Any] | None, digest: str, version: int) -> str | None:
    """What shows that an export's records are not all there (None: the trailer vouches for them)."""
    if version == 1:
        return "an export of version 1 has no trailer, so nothing shows that it is whole"
    if trailer is None:
        return "the file has no trailer (its last line in a whole export)"
    said = (trailer.get("notes"), trailer.get("events"))
    if said != (len(parsed.notes), len(parsed.events)):
        return (
            f"the trailer counts {said[0]} notes and {said[1]} events, the file holds {len(parsed.notes)} and "
            f"{len(parsed.events)}"
        )
    if trailer.get("sha256") != digest:
        return "the lines differ from the ones the trailer's digest was made of"
    return None


def _not_after(recorded_at: datetime, now: datetime) -> None:
    """A record's time no later than `now` and CLOCK_ALLOWANCE (the earliest time is model.check_time's)."""
    now = (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).astimezone(UTC)  # a clock without an offset: UTC
    if recorded_at > now + CLOCK_ALLOWANCE:
        raise InvalidArgument(
            "recorded_at", f"{recorded_at.isoformat()} is in the future: later than this store's clock "
            f"({now.isoformat(timespec='seconds')}) by more than a day; a record's time is when it was recorded"
        )  # fmt: skip


def _vector(value: Any, dimension: int | None) -> list[float]:
    """A note's vector from a file: `dimension` numbers, each finite and within float32's range. Before
    this check a null (what a JSON writer makes of NaN) was stored, and every read of its scope that
    brings vectors along failed; a string or a list failed the write half-way; NaN, an infinity or
    1e39 (infinite in float32) was stored as a vector that matches nothing."""
    if dimension is None:
        raise InvalidArgument("vector", "the header gives no dimension for its vectors")
    if not isinstance(value, list):
        raise InvalidArgument("vector", f"must be a list of {dimension} numbers (the header's dimension)")
    if len(value) != dimension:
        raise InvalidArgument("vector", f"has {len(value)} numbers; the header's dimension is {dimension}")
    # one pass in C for the common case, a whole vector of floats; an element by element look to name a bad one
    if set(map(type, value)) <= {float, int}:
        with contextlib.suppress(OverflowError):  # an integer past float64's range: named below
            if np.all(np.abs(np.asarray(value, np.float64)) <= FLOAT32_MAX):
                return value
    for i, x in enumerate(value):
        if type(x) not in (float, int):
            raise InvalidArgument(f"vector[{i}]", f"{_shown(x)} is not a number")
        if isinstance(x, float) and not math.isfinite(x):
            raise InvalidArgument(f"vector[{i}]", f"{_shown(x)} is not a finite number")
        if abs(x) > FLOAT32_MAX:
            raise InvalidArgument(f"vector[{i}]", f"{_shown(x)} is outside float32's range")
    raise AssertionError("a vector refused with no element to blame")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else f"{text[:40]}…"


def _json_types(record: Mapping[str, Any], model: type[BaseModel]) -> None:
    """What pydantic would turn into a field's type but a tool call refuses (server/arguments.py): a
    number given as a string or a bool, a time given as a number or as other than ISO 8601."""
    for name, info in model.model_fields.items():
        value = record.get(name)
        if value is None:
            continue
        types = get_args(info.annotation) or (info.annotation,)
        if float in types and type(value) not in (float, int):
            raise InvalidArgument(name, f"must be a number, not {type(value).__name__}")
        if datetime in types:
            if not isinstance(value, str):
                raise InvalidArgument(
                    name, f"must be an ISO 8601 string such as 2026-11-01T09:00:00Z, not {type(value).__name__}"
                )
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise InvalidArgument(
                    name, f"{value[:64]!r} is not an ISO 8601 time such as 2026-11-01T09:00:00Z"
                ) from None


def note_from_record(record: dict[str, Any]) -> Note:
    """The note an export's record holds, checked as an import checks it: InvalidArgument names the field."""
    _known_fields(record, Note.model_fields)
    _json_types(record, Note)
    note = Note.model_validate(record)
    check_id(note.id, "id", prefix=NOTE_PREFIX)
    if check_scope(note.scope) != note.scope:
        raise InvalidArgument("scope", f"{note.scope!r} is not in Unicode NFC, as every stored scope is")
    check_fields(note)
    check_time("recorded_at", note.recorded_at)
    check_text("actor", note.actor, MAX_ACTOR)
    return note.model_copy(update={k: _aware(getattr(note, k)) for k in ("recorded_at", "valid_from", "valid_until")})


def event_from_record(record: dict[str, Any]) -> Event:
    """The event an export's record holds, checked as an import checks it: InvalidArgument names the field."""
    _known_fields(record, Event.model_fields)
    _json_types(record, Event)
    event = Event.model_validate(record)
    check_id(event.id, "id", prefix=EVENT_PREFIX)
    check_scope(event.scope)
    if event.src is not None:
        check_id(event.src, "src", prefix=NOTE_PREFIX)
    _check_dst(event)
    if (event.src is None) != (event.kind in (*NO_SOURCE, *SCOPE_WIDE)):
        raise InvalidArgument("src", f"a {event.kind.value} event {'has no' if event.src else 'needs a'} src")
    check_event(event)
    return event.model_copy(update={"recorded_at": _aware(event.recorded_at)})


def _check_dst(event: Event) -> None:
    """An event's dst as its kind has it: a subject, a number of days, an event id (reinstates) or a note id."""
    if event.kind in subjects.DECLARING:
        if not event.dst.startswith(subjects.PREFIX):
            raise InvalidArgument("dst", f"a {event.kind.value} event names {subjects.PREFIX!r} then the subject")
        subjects.checked_subject(subjects.subject_of(event), "dst")
    elif event.kind is EventKind.CHECK_EVERY:
        if not re.fullmatch(rf"{CHECK_DAYS}\d{{1,5}}", event.dst):
            raise InvalidArgument("dst", f"a check_every event's dst is {CHECK_DAYS!r} then a number of days")
    else:
        check_id(event.dst, "dst", prefix=None if event.kind is EventKind.REINSTATES else NOTE_PREFIX)


def _known_fields(record: Mapping[str, Any], fields: Iterable[str]) -> None:
    unknown = sorted(set(record) - set(fields))
    if unknown:
        raise InvalidArgument(unknown[0], "is not a field of this record")


def _aware(t: datetime | None) -> datetime | None:
    return t.replace(tzinfo=UTC) if t is not None and t.tzinfo is None else t


def _problem(exc: InvalidArgument | ValidationError) -> str:
    if isinstance(exc, InvalidArgument):
        return str(exc)
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors(include_url=False))


def _add(parsed: Parsed, ident: str, record: Note | Event, number: int) -> None:
    if ident in parsed.line:
        raise InvalidArgument("id", f"{ident} is already on line {parsed.line[ident]}")
    parsed.line[ident] = number
    if isinstance(record, Note):
        parsed.notes[ident] = record
    else:
        parsed.events[ident] = record


def _parse_graph(
    records: Iterable[tuple[int, dict[str, Any]]], scope: str, actor: str | None, source: str, now: datetime
) -> Parsed:
    """The knowledge graph's shapes as notes and edges (docs/reference.md, "Export and import"):
    - an entity is a note "<name> is a <entityType>" (kind `entity`, subject the name, tagged
      with the type);
    - each observation is a note "<name>: <observation>" (kind `observation`) that `depends_on`
      its entity's note, so recall brings the entity along;
    - a relation is a note "<from> <relationType> <to>" (kind `relation`) that `depends_on` both
      entities' notes: in corrigenda a relation is a claim, which can be corrected or revoked.
    The graph has no ids or times: ids are derived from the scope and the words, so the same
    file imported again finds everything stored; every note is recorded at the import. As the ids
    join the names with U+001F (ids.derived_id), a name or type holding a control character is
    refused: it could give two relations one id. A name is an entity's identity, with one type (the
    graph's server never writes a name twice): a repeat with the same type is merged and listed, one
    with another type, a contradiction only the person can settle, is refused naming both lines."""
    parsed = Parsed("knowledge-graph")
    entities: dict[str, str] = {}  # entity name → its note's id
    types: dict[str, tuple[str, int]] = {}  # entity name → its type, and the line that gave it

    def note(number: int, text: str, kind: str, subject: str, tags: list[str], *key: str) -> str:
        ident = derived_id(NOTE_PREFIX, scope, kind, *key)
        if ident in parsed.notes:
            parsed.merged.append(f"line {number}: {text[:80]!r} (as on line {parsed.line[ident]})")
        else:
            fields = {"text": text, "kind": kind, "subject": subject, "tags": tags, "source": source}
            made = Note(**fields, id=ident, scope=scope, actor=actor, recorded_at=now)
            check_fields(made)
            parsed.notes[ident] = made
            parsed.line[ident] = number
        return ident

    def needs(number: int, src: str, dst: str, optional: bool = False) -> None:
        ident = derived_id(EVENT_PREFIX, scope, "depends_on", src, dst)
        parsed.events[ident] = Event(
            id=ident, kind=EventKind.DEPENDS_ON, src=src, dst=dst, scope=scope, actor=actor, recorded_at=now
        )
        parsed.line.setdefault(ident, number)
        if optional:
            parsed.optional_edges.add(ident)

    relations = []
    for number, record in records:
        try:
            if record["type"] == "entity":
                name, entity_type = _name(record, "name"), _name(record, "entityType")
                known, line = types.setdefault(name, (entity_type, number))
                if known != entity_type:
                    raise InvalidArgument(
                        "entityType",
                        f"{entity_type!r}, but line {line} gives entity {name!r} the type {known!r}: an entity has "
                        "one type in a knowledge graph; keep one of the two, or rename one of the entities",
                    )
                observations = record.get("observations", [])
                if not isinstance(observations, list):
                    raise InvalidArgument("observations", "must be a list of strings")
                article = "an" if entity_type[:1].lower() in "aeiou" else "a"
                entity = note(number, f"{name} is {article} {entity_type}", "entity", name, [entity_type], name)
                entities[name] = entity
                for i, observation in enumerate(observations):
                    if not isinstance(observation, str) or not observation.strip():
                        raise InvalidArgument(f"observations[{i}]", "must be a non-empty string")
                    said = note(number, f"{name}: {observation}", "observation", name, [entity_type], name, observation)
                    needs(number, said, entity)
            elif record["type"] == "relation":
                relations.append((number, _name(record, "from"), _name(record, "to"), _name(record, "relationType")))
            else:
                raise InvalidArgument(
                    "type", f"{record['type']!r}: a knowledge-graph file has entity and relation lines"
                )
        except InvalidArgument as exc:
            raise InvalidArgument(f"line {number}", str(exc)) from None
    for number, src, dst, relation in relations:
        claim = note(number, f"{src} {relation} {dst}", "relation", src, [relation], src, relation, dst)
        for name in dict.fromkeys((src, dst)):
            # an entity of an earlier import has the same derived id; one that never existed is dropped
            entity = entities.get(name, derived_id(NOTE_PREFIX, scope, "entity", name))
            needs(number, claim, entity, optional=name not in entities)
    return parsed


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(key, "must be a non-empty string")
    return value


def _name(record: Mapping[str, Any], key: str) -> str:
    """A name or type of the graph: text, with no control character (the ids join names with U+001F)."""
    value = _text(record, key)
    control = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise InvalidArgument(
            key, f"{value[:80]!r} holds the control character U+{ord(control):04X}: a name holds none"
        )
    return value


# -- writing -------------------------------------------------------------------------------


def import_parsed(tables: Tables, embedder: Embedder, parsed: Parsed, progress: Progress | None = None) -> Imported:
    """Check the parsed records against the store (module docstring), then write what is new."""
    tables.handles.check_model(embedder.name)
    _check_header_model(parsed, embedder)
    scopes = sorted({n.scope for n in parsed.notes.values()} | {e.scope for e in parsed.events.values()})
    stored_events: dict[str, Event] = {}
    for scope in scopes:
        for e in tables.events.scope_events(scope)[1]:
            stored_events.setdefault(e.id, e)
    forgotten = {e.dst for e in [*stored_events.values(), *parsed.events.values()] if e.kind is EventKind.FORGETS}
    wanted = [*parsed.notes, *(e.dst for e in parsed.events.values() if is_note_id(e.dst))]
    stored_notes = _stored_notes(tables, wanted)
    known = {i: n for i, n in {**stored_notes, **parsed.notes}.items() if i not in forgotten}
    all_events = {**stored_events, **parsed.events}

    notes, present_notes, skipped = [], 0, 0
    for ident, note in parsed.notes.items():
        if ident in forgotten:
            skipped += 1
        elif ident in stored_notes:
            _same(parsed, ident, stored_notes[ident], note)
            present_notes += 1
        else:
            notes.append(note)
    events, present_events = [], 0
    for ident, event in parsed.events.items():
        if _names_any(event, forgotten, all_events):
            continue
        if event.kind is EventKind.FORGETS:
            _tombstone_in_scope(parsed, event, {**stored_notes, **parsed.notes})
        elif event.kind not in SCOPE_WIDE and not _ends_exist(parsed, event, known, all_events):
            continue  # an optional edge whose note does not exist
        if ident in stored_events:
            _same(parsed, ident, stored_events[ident], event)
            present_events += 1
        else:
            events.append(event)

    # Checked: now embed everything, then write (module docstring): the edges that ride on a note of
    # the file (invisible until it lands), the notes, then in one append the events that act on stored
    # notes, so that a write failing before them leaves every stored note as it was; then erase what the
    # file's tombstones name.
    notes.sort(key=lambda n: (n.recorded_at, n.id))
    vectors = embed_all(embedder, notes, parsed.vectors if parsed.model == embedder.name else {})
    events.sort(key=lambda e: (e.recorded_at, e.id))
    new = {n.id for n in notes}
    riding = [e for e in events if _names_any(e, new, all_events)]  # unseen until their note lands
    if riding:
        tables.add_events(riding)
    write_notes(tables, embedder, notes, vectors, progress)
    acting = [e for e in events if not _names_any(e, new, all_events)]
    if acting:
        tables.add_events(acting)
    erased = [e.dst for e in events if e.kind is EventKind.FORGETS and e.dst in stored_notes]
    if erased:
        tables.erasure.erase_forgotten()  # one pass for them all, before the call answers
    return Imported(
        partial=parsed.partial, repeats_merged=parsed.merged,
        format=parsed.format, scopes=scopes, notes_written=len(notes), events_written=len(events),
        notes_present=present_notes, events_present=present_events, forgotten_skipped=skipped, notes_erased=erased,
    )  # fmt: skip


def _names_any(event: Event, ids: Collection[str], events: Mapping[str, Event]) -> bool:
    """Whether `event`, or the event it reinstates (and so on), has one of `ids` as its src or dst: an edge
    the fold reads only while those notes exist. A tombstone names none here: it is read always. A
    crafted cycle of reinstates ends where it comes back."""
    seen: set[str] = set()
    while event.kind is not EventKind.FORGETS and event.id not in seen:
        if event.src in ids or event.dst in ids:
            return True
        seen.add(event.id)
        target = events.get(event.dst)
        if target is None:
            return False
        event = target
    return False


def _check_header_model(parsed: Parsed, embedder: Embedder) -> None:
    """A file's vectors are used only when its header names this store's model; that model's vectors
    have its dimension, so a header that names it with another dimension is refused."""
    if parsed.format != "corrigenda" or parsed.model != embedder.name or parsed.dimension is None:
        return
    dimension = len(embedder.embed(["dimension"])[0])
    if parsed.dimension != dimension:
        raise InvalidArgument(
            "line 1", f"dimension: the header says {parsed.model} with {parsed.dimension} dimensions; its vectors "
            f"have {dimension}"
        )  # fmt: skip


def _tombstone_in_scope(parsed: Parsed, event: Event, notes: Mapping[str, Note]) -> None:
    """A file's `forgets` tombstone erases a note of its own scope only (a note neither stored nor in
    the file: the tombstone keeps it from ever being written)."""
    note = notes.get(event.dst)
    if note is not None and note.scope != event.scope:
        raise InvalidArgument(
            f"line {parsed.line[event.id]}", f"dst: {event.dst} is in scope {note.scope!r}, not {event.scope!r}"
        )


def embed_all(
    embedder: Embedder, notes: Sequence[Note], given: Mapping[str, Sequence[float]]
) -> dict[str, Sequence[float]]:
    """Every note's vector: `given` (a file's, made by this model), the rest embedded BATCH at a time."""
    vectors: dict[str, Sequence[float]] = {n.id: given[n.id] for n in notes if n.id in given}
    missing = [n for n in notes if n.id not in given]
    for start in range(0, len(missing), BATCH):
        batch = missing[start : start + BATCH]
        vectors.update(zip((n.id for n in batch), embedder.embed([n.text for n in batch]), strict=True))
    return vectors


def _stored_notes(tables: Tables, ids: Iterable[str]) -> dict[str, Note]:
    wanted = list(dict.fromkeys(ids))
    found: dict[str, Note] = {}
    for start in range(0, len(wanted), LOOKUP):
        found.update(tables.search.notes(wanted[start : start + LOOKUP]))
    return found


def _ends_exist(parsed: Parsed, event: Event, notes: Mapping[str, Note], events: Mapping[str, Event]) -> bool:
    """Whether an edge's notes (or, for a reinstates, the event it retracts) exist, in the event's
    scope; refuses the line if not, unless the edge is optional."""
    ends = [("src", event.src)] if event.src else []
    ends.append(("dst", event.dst))
    for end, ident in ends:
        assert ident is not None
        target: Note | Event | None = notes.get(ident) if is_note_id(ident) else events.get(ident)
        if target is not None and target.scope == event.scope:
            continue
        if event.id in parsed.optional_edges:
            return False
        where = f"in scope {target.scope!r}, not {event.scope!r}" if target else "neither in the file nor in the store"
        raise InvalidArgument(f"line {parsed.line[event.id]}", f"{end}: {ident} is {where}")
    return True


def _same(parsed: Parsed, ident: str, stored: Note | Event, given: Note | Event) -> None:
    """A record stored under the file's id must be the file's record; a derived id (the knowledge
    graph's) already says the words are the same, and its time is the earlier import's."""
    if parsed.format == "corrigenda" and stored != given:
        differ = [k for k in type(given).model_fields if getattr(stored, k) != getattr(given, k)]
        raise InvalidArgument(
            f"line {parsed.line[ident]}", f"{ident} is already stored with another {', '.join(differ)}"
        )


def write_notes(
    tables: Tables,
    embedder: Embedder,
    notes: Sequence[Note],
    vectors: Mapping[str, Sequence[float]] | None = None,
    progress: Progress | None = None,
) -> None:
    """Store checked notes in batches of BATCH: each batch embedded at once (but for the notes whose
    vector is given), then appended in one write.

    A batch is written by one writer thread while the next is embedded: the model keeps to half
    the cores (embedder.torch_threads), so the write runs beside it instead of after it (docs/scale.md,
    "Scale": the import's rate against the model's own). The writes stay one at a time and in
    order; a failed write ends the import before another is written, with the batches before it
    stored, as a write that fails in turn would.
    """
    vectors = vectors or {}

    def landed(write: Future[int | None] | None, notes_written: int) -> None:
        if write is not None:
            write.result()  # a failed write raises here, before the next one is started
            if progress is not None:
                progress(notes_written, len(notes))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="corrigenda-import") as writer:
        written: Future[int | None] | None = None
        for start in range(0, len(notes), BATCH):
            batch = notes[start : start + BATCH]
            missing = [n for n in batch if n.id not in vectors]
            texts = [n.text for n in missing]
            embedded = dict(zip((n.id for n in missing), embedder.embed(texts) if texts else [], strict=True))
            rows = [(n, vectors.get(n.id) or embedded[n.id], embedder.readable(n.text)) for n in batch]
            landed(written, start)
            written = writer.submit(tables.add_notes, rows, embedder.name)
        landed(written, len(notes))
