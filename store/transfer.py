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

This module writes an import. The rest has a module each, their names importable from here too:
transfer_export.py writes an export (and names the format), transfer_parse.py reads a file into
`Parsed`, transfer_records.py checks one record of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from .embedder import Embedder
from .errors import InvalidArgument
from .ids import is_note_id
from .model import Event, EventKind, Note
from .tables import Tables
from .transfer_export import FORMAT, TRAILER, VERSION, export_lines
from .transfer_parse import Format, Parsed, parse
from .transfer_records import FLOAT32_MAX, NO_SOURCE, SCOPE_WIDE, event_from_record, note_from_record
from .views import Imported

__all__ = [
    "BATCH",
    "FLOAT32_MAX",
    "FORMAT",
    "LOOKUP",
    "NO_SOURCE",
    "SCOPE_WIDE",
    "TRAILER",
    "VERSION",
    "Format",
    "Parsed",
    "Progress",
    "embed_all",
    "event_from_record",
    "export_lines",
    "import_parsed",
    "note_from_record",
    "parse",
    "write_notes",
]

BATCH = 256  # notes embedded and written at once: one model call, one append
LOOKUP = 1000  # ids per query when looking for stored notes

Progress = Callable[[int, int], None]  # (notes written, notes to write)


def import_parsed(tables: Tables, embedder: Embedder, parsed: Parsed, progress: Progress | None = None) -> Imported:
    """Check the parsed records against the store (module docstring), then write what is new."""
    tables.handles.check_model(embedder.name)
    _check_header_model(parsed, embedder)
    checked = _check_against_store(tables, parsed)
    erased = _write(tables, embedder, parsed, checked, progress)
    return Imported(
        partial=parsed.partial, repeats_merged=parsed.merged,
        format=parsed.format, scopes=checked.scopes, notes_written=len(checked.notes),
        events_written=len(checked.events), notes_present=checked.present_notes,
        events_present=checked.present_events, forgotten_skipped=checked.skipped, notes_erased=erased,
    )  # fmt: skip


@dataclass
class _Checked:
    """The file's records checked against the store: what an import writes (`notes`, `events`), what the
    store holds already (counted), and the file's notes a tombstone names (`skipped`)."""

    scopes: list[str]
    stored_notes: dict[str, Note]  # the file's notes, and the notes its events name, found stored
    all_events: dict[str, Event]  # the store's events of the file's scopes, and the file's
    notes: list[Note] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    present_notes: int = 0
    present_events: int = 0
    skipped: int = 0


def _check_against_store(tables: Tables, parsed: Parsed) -> _Checked:
    """Each record of the file left alone (stored already, the same), kept out (a tombstone names it, or
    it is an optional edge whose note does not exist) or to be written; a record that contradicts the
    store is refused, naming its line (module docstring)."""
    scopes = sorted({n.scope for n in parsed.notes.values()} | {e.scope for e in parsed.events.values()})
    stored_events: dict[str, Event] = {}
    for scope in scopes:
        for e in tables.events.scope_events(scope)[1]:
            stored_events.setdefault(e.id, e)
    forgotten = {e.dst for e in [*stored_events.values(), *parsed.events.values()] if e.kind is EventKind.FORGETS}
    wanted = [*parsed.notes, *(e.dst for e in parsed.events.values() if is_note_id(e.dst))]
    stored_notes = _stored_notes(tables, wanted)
    known = {i: n for i, n in {**stored_notes, **parsed.notes}.items() if i not in forgotten}
    checked = _Checked(scopes, stored_notes, {**stored_events, **parsed.events})

    for ident, note in parsed.notes.items():
        if ident in forgotten:
            checked.skipped += 1
        elif ident in stored_notes:
            _same(parsed, ident, stored_notes[ident], note)
            checked.present_notes += 1
        else:
            checked.notes.append(note)
    for ident, event in parsed.events.items():
        if _names_any(event, forgotten, checked.all_events):
            continue
        if event.kind is EventKind.FORGETS:
            _tombstone_in_scope(parsed, event, {**stored_notes, **parsed.notes})
        elif event.kind not in SCOPE_WIDE and not _ends_exist(parsed, event, known, checked.all_events):
            continue  # an optional edge whose note does not exist
        if ident in stored_events:
            _same(parsed, ident, stored_events[ident], event)
            checked.present_events += 1
        else:
            checked.events.append(event)
    return checked


def _write(
    tables: Tables, embedder: Embedder, parsed: Parsed, checked: _Checked, progress: Progress | None
) -> list[str]:
    """Write what the check found new (module docstring); the ids of the stored notes the file's
    tombstones erased."""
    notes, events, all_events = checked.notes, checked.events, checked.all_events
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
    erased = [e.dst for e in events if e.kind is EventKind.FORGETS and e.dst in checked.stored_notes]
    if erased:
        tables.erasure.erase_forgotten()  # one pass for them all, before the call answers
    return erased


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
