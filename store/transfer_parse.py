"""Reading an import file (transfer.py's module docstring): a corrigenda export, its trailer checked and each
record checked (transfer_records.py), or the knowledge-graph memory server's `memory.jsonl`, its entities,
observations and relations made notes and edges; either as `Parsed`, nothing stored yet."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from .errors import InvalidArgument
from .ids import EVENT_PREFIX, NOTE_PREFIX, derived_id
from .model import Event, EventKind, Note, check_fields
from .transfer_export import FORMAT, TRAILER, VERSION
from .transfer_records import checked_vector, event_from_record, not_after, note_from_record
from .where import check_scope

Format = Literal["corrigenda", "knowledge-graph"]


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
                not_after(note.recorded_at, now)
                if vector is not None:
                    parsed.vectors[note.id] = checked_vector(vector, dimension)
                _add(parsed, note.id, note, number)
            elif kind == "event":
                event = event_from_record(record)
                not_after(event.recorded_at, now)
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
    graph = _Graph(scope, actor, source, now)
    relations = []
    for number, record in records:
        try:
            if record["type"] == "entity":
                graph.entity(number, record)
            elif record["type"] == "relation":
                relations.append((number, _name(record, "from"), _name(record, "to"), _name(record, "relationType")))
            else:
                raise InvalidArgument(
                    "type", f"{record['type']!r}: a knowledge-graph file has entity and relation lines"
                )
        except InvalidArgument as exc:
            raise InvalidArgument(f"line {number}", str(exc)) from None
    for number, src, dst, relation in relations:
        graph.relation(number, src, dst, relation)
    return graph.parsed


class _Graph:
    """The notes and edges a knowledge graph's lines make, as `_parse_graph` reads them, into `parsed`."""

    def __init__(self, scope: str, actor: str | None, source: str, now: datetime) -> None:
        self.scope, self.actor, self.source, self.now = scope, actor, source, now
        self.parsed = Parsed("knowledge-graph")
        self.entities: dict[str, str] = {}  # entity name → its note's id
        self.types: dict[str, tuple[str, int]] = {}  # entity name → its type, and the line that gave it

    def entity(self, number: int, record: Mapping[str, Any]) -> None:
        """An entity's line: its note, and a note for each of its observations that needs it."""
        name, entity_type = _name(record, "name"), _name(record, "entityType")
        known, line = self.types.setdefault(name, (entity_type, number))
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
        entity = self.note(number, f"{name} is {article} {entity_type}", "entity", name, [entity_type], name)
        self.entities[name] = entity
        for i, observation in enumerate(observations):
            if not isinstance(observation, str) or not observation.strip():
                raise InvalidArgument(f"observations[{i}]", "must be a non-empty string")
            said = self.note(number, f"{name}: {observation}", "observation", name, [entity_type], name, observation)
            self.needs(number, said, entity)

    def relation(self, number: int, src: str, dst: str, relation: str) -> None:
        """A relation's note, which needs both its entities' notes."""
        claim = self.note(number, f"{src} {relation} {dst}", "relation", src, [relation], src, relation, dst)
        for name in dict.fromkeys((src, dst)):
            # an entity of an earlier import has the same derived id; one that never existed is dropped
            entity = self.entities.get(name, derived_id(NOTE_PREFIX, self.scope, "entity", name))
            self.needs(number, claim, entity, optional=name not in self.entities)

    def note(self, number: int, text: str, kind: str, subject: str, tags: list[str], *key: str) -> str:
        parsed, scope = self.parsed, self.scope
        ident = derived_id(NOTE_PREFIX, scope, kind, *key)
        if ident in parsed.notes:
            parsed.merged.append(f"line {number}: {text[:80]!r} (as on line {parsed.line[ident]})")
        else:
            fields = {"text": text, "kind": kind, "subject": subject, "tags": tags, "source": self.source}
            made = Note(**fields, id=ident, scope=scope, actor=self.actor, recorded_at=self.now)
            check_fields(made)
            parsed.notes[ident] = made
            parsed.line[ident] = number
        return ident

    def needs(self, number: int, src: str, dst: str, optional: bool = False) -> None:
        parsed, scope = self.parsed, self.scope
        ident = derived_id(EVENT_PREFIX, scope, "depends_on", src, dst)
        parsed.events[ident] = Event(
            id=ident, kind=EventKind.DEPENDS_ON, src=src, dst=dst, scope=scope, actor=self.actor, recorded_at=self.now
        )
        parsed.line.setdefault(ident, number)
        if optional:
            parsed.optional_edges.add(ident)


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
