"""The memory engine's public face: every operation the MCP tools and the CLI offer.

A facade: the writes are writes.py's (each checked in full before anything is stored, so a refused call
changes nothing), the reads reads.py's; every operation catches up with what any process wrote first.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, TypeVar

from .allocator import keep_search_buffers
from .confirms import Confirms
from .embedder import Embedder, SentenceTransformerEmbedder
from .errors import CorrigendaError
from .forgets import Forgets
from .imports import Imports
from .lookup import Lookup
from .model import MAX_TEXT as MAX_TEXT  # bench/longmemeval_ku.py reads the limit here
from .model import Note
from .part import Collaborators
from .reader import ScopeReader
from .reads import Reads
from .recall import RetrievalSettings
from .subjects import Subjects
from .tables import REAL_PARTS, Parts, Tables
from .writes import Writes

log = logging.getLogger(__name__)

CLOSE_WAIT = 120.0  # seconds `close` waits for this process's erasures and compaction


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _operation(method: Callable[Concatenate[Memory, P], R]) -> Callable[Concatenate[Memory, P], R]:
    """A public operation: it starts by catching up with every write made so far, by any process, and
    reads that state without checking again (Tables.refresh). An object store that stops answering
    fails it with StoreUnavailable, which says so, rather than with the storage layer's error."""

    def operation(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            self._reopen_if_removed()
            self.tables.handles.refresh()
            return method(self, *args, **kwargs)
        except CorrigendaError:
            raise
        except Exception as exc:
            outage = self.tables.handles.outage(exc)
            if outage is None:
                raise
            raise outage from exc

    functools.update_wrapper(operation, method)  # its name, docstring and signature
    return operation


def _offered(
    part: Callable[[Memory], T], method: Callable[Concatenate[T, P], R]
) -> Callable[Concatenate[Memory, P], R]:
    """`method` of one of Memory's parts (`part` finds it), offered as an operation of Memory (`_operation`)."""

    def call(self: Memory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(part(self), *args, **kwargs)

    functools.update_wrapper(call, method)
    return _operation(call)


def _write(method: Callable[Concatenate[Writes, P], R]) -> Callable[Concatenate[Memory, P], R]:
    return _offered(lambda memory: memory.writes, method)


def _import(method: Callable[Concatenate[Imports, P], R]) -> Callable[Concatenate[Memory, P], R]:
    return _offered(lambda memory: memory.imports, method)


def _read(method: Callable[Concatenate[Reads, P], R]) -> Callable[Concatenate[Memory, P], R]:
    return _offered(lambda memory: memory.reads, method)


class Memory:
    """A store of notes and lifecycle events in one LanceDB database (a directory or `s3://…`)."""

    def __init__(
        self,
        uri: str,
        embedder: Embedder | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        settings: RetrievalSettings | None = None,
        storage_options: dict[str, str] | None = None,
        parts: Parts = REAL_PARTS,
    ) -> None:
        self.uri = uri
        keep_search_buffers()  # a search's buffers kept between calls, not faulted in again (allocator.py)
        self.embedder = embedder or SentenceTransformerEmbedder()
        self.clock = clock
        self.settings = settings or RetrievalSettings()
        self._made_of = (storage_options, parts)
        self._opening = threading.Lock()
        self._open()

    def _open(self) -> None:
        """Compose the store's parts: at the start, and again when its directory was removed (`_reopen_if_removed`)."""
        storage_options, parts = self._made_of
        self.tables = Tables(self.uri, storage_options, parts)
        events = self.tables.events
        self.graphs = parts.graphs(
            events.events_version,
            events.scope_events,
            self.tables.search.scope_rows,
            events.events_since,
            catch_up_from=events.catch_up_from,
        )
        # What benches drive and tests wait for (compact, upkeep_due, finish_upkeep): the seam to upkeep
        self.upkeep = self.tables.upkeep
        self.lookup = Lookup(self.tables, self.graphs)
        given = Collaborators(self.tables, self.graphs, self.lookup, self.embedder, self.clock, self.settings)
        self.writes = Writes(given)
        self.imports = Imports(given)
        self.reads = Reads(given)

    def _reopen_if_removed(self) -> None:
        """A store on this machine's disk whose directory was removed while this process had it open (deleted
        to start over) is opened anew, as a new process would find it: no store, made by the next write.
        Without this each call would fail on tables that are gone for as long as the process runs, and a
        shared engine runs as long as any client does."""
        if not self.tables.handles.removed():
            return
        with self._opening:
            if self.tables.handles.removed():
                log.warning("the store at %s was removed while this process had it open: opened anew", self.uri)
                self._open()

    def warm(self, then: Callable[[], None] | None = None) -> threading.Thread:
        """Open the database and load the model in the background, then call `then` (on that thread,
        whatever came of it); calls that come first wait."""

        def load() -> None:
            try:
                self.tables.handles.check_model(self.embedder.name)
                self.embedder.embed(["warm up"])
                self.tables.erasure.erase_soon()  # what a process that forgot and then stopped left, if anything
                self.upkeep.compact_if_due()
            except CorrigendaError as exc:  # each call will meet (and report) the same problem
                log.error("%s", exc)
            except Exception:
                log.exception("warming the store failed")
            if then is not None:
                then()

        thread = threading.Thread(target=load, name="corrigenda-warm", daemon=True)
        thread.start()
        return thread

    # -- writing: writes.py and imports.py ----------------------------------------------------

    remember = _write(Writes.remember)
    likely_updates = _write(Writes.likely_updates)
    import_notes = _import(Imports.import_notes)
    import_lines = _import(Imports.import_lines)
    correct = _write(Writes.correct)
    revoke = _write(Writes.revoke)
    reinstate = _write(Writes.reinstate)
    link = _write(Writes.link)
    forget = _offered(lambda memory: memory.writes.forgets, Forgets.forget)
    confirm = _offered(lambda memory: memory.writes.confirms, Confirms.confirm)
    check_every = _offered(lambda memory: memory.writes.confirms, Confirms.check_every)
    declare_subject = _offered(lambda memory: memory.writes.subjects, Subjects.declare)
    one_value_subjects = _offered(lambda memory: memory.writes.subjects, Subjects.one_value_subjects)

    def close(self, timeout: float = CLOSE_WAIT) -> bool:
        """Finish the background work this process started (erasures, a compaction) and start no more:
        before the program ends. Whether all of it finished within `timeout` seconds."""
        return self.finish_upkeep(timeout)

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def finish_upkeep(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the erasures this process's forgets left under way (object
        storage) and for a compaction it is running: before a server stops. Whether none is left."""
        return self.upkeep.finish_upkeep(timeout)

    # -- reading: reads.py --------------------------------------------------------------------

    tombstone = _read(Reads.tombstone)
    history = _read(Reads.history)
    recall = _read(Reads.recall)
    recall_chains = recall  # the tool's name
    trace = _read(Reads.trace)
    why_excluded = _read(Reads.why_excluded)
    scopes = _read(Reads.scopes)
    scope_page = _read(Reads.scope_page)
    scope_of = _read(Reads.scope_of)
    stats = _read(Reads.stats)
    list_notes = _read(Reads.list_notes)
    changes = _read(Reads.changes)
    export = _read(Reads.export)

    def reader(self, scope: str, also: Sequence[Note] = ()) -> ScopeReader:
        """A reader of `scope` for one call (lookup.py)."""
        return self.lookup.reader(scope, also)
