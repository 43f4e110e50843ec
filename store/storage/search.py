"""Reading the notes table: notes by id, whole scopes, and the two searches recall runs (by vector and
by full text), all through the views of handles.py. The events table's reads are in events.py."""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .. import where
from ..model import Note
from . import limits
from .handles import Handles
from .indexes import has_vector_index, wholly_indexed
from .schema import _NOTE_COLUMNS, NOTES, Hit, ScopeRows, _from_us, note_from_row

if TYPE_CHECKING:
    from lance.dataset import LanceDataset
    from lancedb.table import Table

log = logging.getLogger(__name__)


class Search:
    """The reads of one store's notes table, through its `handles`."""

    def __init__(self, handles: Handles) -> None:
        self.handles = handles
        self._vector_indexed = False
        self._vector_index_checked = -limits.SCOPE_SIZE_TTL  # time.monotonic() of the last look
        self._counted: dict[str, tuple[float, int, int]] = {}  # scope -> (when counted, its notes, the table's)
        self._unreadable: set[str] = set()  # notes whose stored vector was found unreadable, named once each

    def _search(
        self, table: Table, columns: list[str], scope: str, at: datetime | None, **search: Any
    ) -> tuple[list[tuple[dict[str, Any], np.ndarray | None]], LanceDataset]:
        """A search's hits in `scope` recorded by `at` (the first row of each id), each with its stored
        embedding where the store reads them along (`reads_vectors_along`); and the version searched.

        A scope that held every note of the table when last counted (`_alone`: a store of one scope) is
        searched without its filter, a prefilter each search would otherwise build over every row. Its
        hits are then checked: if the table's best are all of the scope, they are the scope's best; if
        one is not (another scope's notes came since the count), the scope is searched again with its
        filter, and counted again at its next search."""
        if self._alone(table, scope):
            rows, view = self._search_where(
                table, [*columns, "scope"], None if at is None else where.recorded_by(at), **search
            )
            if all(row["scope"] == scope for row, _ in rows):
                return rows, view
            self._counted.pop(scope, None)
        return self._search_where(table, columns, where.in_scope(scope, at), **search)

    def _search_where(
        self, table: Table, columns: list[str], clause: str | None, **search: Any
    ) -> tuple[list[tuple[dict[str, Any], np.ndarray | None]], LanceDataset]:
        def read() -> tuple[pa.Table, LanceDataset]:
            view = self.handles.view(table)
            columns_read = [*columns, *self._vector_column]
            return view.to_table(columns=columns_read, filter=clause, prefilter=clause is not None, **search), view

        found, view = self.handles.read(read)
        return self._rows_with_vectors(found), view

    def notes(self, ids: Iterable[str]) -> dict[str, Note]:
        return self.notes_with_vectors(ids, vectors=False)[0]

    def notes_with_vectors(
        self, ids: Iterable[str], vectors: bool = True
    ) -> tuple[dict[str, Note], dict[str, np.ndarray]]:
        """Notes by id and, where reading them along costs little (`reads_vectors_along`), the stored
        embeddings of those the model could read."""
        ids = list(dict.fromkeys(ids))
        table = self.handles.notes_table()
        if not ids or table is None:
            return {}, {}
        columns = [*_NOTE_COLUMNS, "dense_ok", *self._vector_column] if vectors else _NOTE_COLUMNS
        rows = self._rows_with_vectors(self.handles.scan(table, columns, where.id_in(ids)))
        notes = {row["id"]: note_from_row(row) for row, _ in rows}
        return notes, {row["id"]: v for row, vector in rows if (v := _readable(row, vector)) is not None}

    def vectors(self, ids: Iterable[str], addresses: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
        """Stored embeddings of these notes (float32 arrays), for those the model could read.

        `addresses` (from a scope's scan, `ScopeRows.addresses`): where some of them were. Those still in
        a fragment of the table are read there (0.5 ms for a few, where the id index's lookup costs
        2 to 4 ms: docs/scale.md, "Scale"); a fragment compaction rewrote is gone, and its notes are read by id."""
        ids = list(dict.fromkeys(ids))
        table = self.handles.notes_table()
        if not ids or table is None:
            return {}
        found: dict[str, np.ndarray] = {}
        located = {i: addresses[i] for i in ids if i in addresses} if addresses and self.reads_vectors_along else {}
        if located:
            taken = self.handles.read(lambda: self._taken(table, located))
            found = {i: vector for i, vector in taken.items() if vector is not None}
            ids = [i for i in ids if i not in taken]
        if ids:
            clause = where.all_of(where.id_in(ids), where.model_could_read())
            rows = self._rows_with_vectors(self.handles.scan(table, ["id", "dense_ok", "vector"], clause))
            found |= {row["id"]: vector for row, vector in rows if vector is not None}
        return found

    def _taken(self, table: Table, addresses: Mapping[str, int]) -> dict[str, np.ndarray | None]:
        """The embeddings at `addresses` that are still there (None: the model could not read that note),
        by id; a note whose fragment is gone is left out."""
        view = self.handles.view(table)
        fragments = {f.fragment_id for f in view.get_fragments()}
        here = {i: a for i, a in addresses.items() if a >> 32 in fragments}  # the fragment's id, above the offset
        if not here:
            return {}
        # an unstable Lance API: pyproject.toml holds pylance to 13.x, and a test reads through it
        rows = self._rows_with_vectors(view._take_rows(list(here.values()), columns=["id", "dense_ok", "vector"]))
        return {row["id"]: _readable(row, vector) for row, vector in rows if row["id"] in here}

    def _rows_with_vectors(self, found: pa.Table) -> list[tuple[dict[str, Any], np.ndarray | None]]:
        """The first row of each id, with its stored embedding if the read selected it (as a float32 array,
        not 384 Python floats; see `_readable` for whether it means anything).

        A stored vector with a null or a number that is not finite (a row an import wrote before it checked
        vectors: a JSON writer turns NaN into null) is given as None, as no vector was read: one such note
        must not fail every read of its scope. The note is still found by its words, and is named in a
        warning, once in this process, so that it can be corrected or forgotten."""
        vectors: list[np.ndarray | None] = [None] * found.num_rows
        unreadable = []
        if "vector" in found.column_names:
            if found.num_rows:
                column = found["vector"].combine_chunks()
                size = column.type.list_size
                # `values` ignores the offset, but keeps the slots of null vectors, which flatten() drops
                values = column.values.slice(column.offset * size, found.num_rows * size)
                matrix = values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(found.num_rows, size)
                usable = np.isfinite(matrix).all(axis=1) & ~column.is_null().to_numpy(zero_copy_only=False)
                vectors = [vector if ok else None for vector, ok in zip(matrix, usable.tolist(), strict=True)]
                if not usable.all():
                    ids = found["id"].to_pylist()
                    unreadable = [ids[i] for i in np.flatnonzero(~usable)]
            found = found.drop_columns(["vector"])
        self._name_unreadable(unreadable)
        seen: dict[str, tuple[dict[str, Any], np.ndarray | None]] = {}
        for row, vector in zip(found.to_pylist(), vectors, strict=True):
            seen.setdefault(row["id"], (row, vector))
        return list(seen.values())

    @property
    def unreadable(self) -> frozenset[str]:
        """The notes whose stored vector this process has found unreadable (`_rows_with_vectors`): a call
        that met one of them says so in its result."""
        return frozenset(self._unreadable)

    def _name_unreadable(self, ids: Iterable[str]) -> None:
        for note_id in dict.fromkeys(ids):
            if note_id not in self._unreadable:
                self._unreadable.add(note_id)
                log.warning(
                    "note %s has a stored vector with a null or a number that is not finite (an import before "
                    "vectors were checked): it is found by its words alone; correct it, or forget it and remember "
                    "it again, to embed it anew",
                    note_id,
                )

    def scope_rows(self, scope: str, leave_out: Collection[str] = ()) -> ScopeRows | None:
        """Every note of a scope but those `leave_out` names, in one scan without the vectors (None while
        the store has no notes table)."""
        table = self.handles.notes_table()
        if table is None:
            return None
        return ScopeRows(self.handles.scan(table, _NOTE_COLUMNS, where.scope_is(scope), with_row_id=True), leave_out)

    def vector_search(self, vector: Sequence[float], scope: str, at: datetime | None, limit: int) -> list[Hit]:
        """The `limit` notes of a scope nearest `vector` by cosine, best first (see `Hit`)."""
        table = self.handles.notes_table()
        if table is None:
            return []
        query = np.asarray(vector, np.float32)
        nearest: dict[str, Any] = {"column": "vector", "q": query, "k": limit, "metric": "cosine"}
        exact = self.searched_exactly(table, scope)
        if exact:
            nearest["use_index"] = False
        else:
            nearest["nprobes"] = limits.VECTOR_PROBES
        rows, view = self._search(table, ["id", "dense_ok", "_distance"], scope, at, nearest=nearest)
        if self.reads_vectors_along:  # a row whose vector is unreadable (`_rows_with_vectors`) has no similarity
            rows = [(row, stored) for row, stored in rows if stored is not None]
        if rows and rows[0][1] is not None:  # exact, from the stored vectors read along
            similarities = _cosines(query, [stored for _, stored in rows])
        elif not exact and wholly_indexed(view):  # on a bucket: reading the hits' vectors is a request each
            similarities = [1.0 - row["_distance"] / 2 for row, _ in rows]
        else:
            similarities = [1.0 - row["_distance"] for row, _ in rows]
        return [
            Hit(row["id"], similarity, row["dense_ok"], _readable(row, stored))
            for (row, stored), similarity in zip(rows, similarities, strict=True)
        ]

    @property
    def reads_vectors_along(self) -> bool:
        """Whether reads by id bring the rows' vectors along (for recall's exact similarities and its
        near-duplicate pass): in a directory that costs about nothing; on an object store it is about a
        request a row, so there they are read apart, for the heads alone (`vectors`)."""
        return self.handles.location.reads_vectors_along

    @property
    def _vector_column(self) -> list[str]:
        return ["vector"] if self.reads_vectors_along else []

    def searched_exactly(self, table: Table, scope: str) -> bool:
        """Whether a scope's vectors are searched without the index: while there is none, and for a
        scope too small to have earned one, whose rows are scattered over the index's partitions."""
        now = time.monotonic()
        if not self._vector_indexed:
            if now - self._vector_index_checked < limits.SCOPE_SIZE_TTL:
                return True
            self._vector_index_checked = now
            table.checkout_latest()  # another process may have made it since this one looked
            self._vector_indexed = has_vector_index(table)
            if not self._vector_indexed:
                return True
        return self._count(table, scope)[0] < limits.VECTOR_INDEX_AT

    def _alone(self, table: Table, scope: str) -> bool:
        """Whether `scope` held every note of the table when last counted: no other scope has notes. Not
        asked on an object store, where counting costs requests and a filter none."""
        if not self.handles.location.counts_scopes:
            return False
        ours, all_notes = self._count(table, scope)
        return ours == all_notes

    def _count(self, table: Table, scope: str) -> tuple[int, int]:
        """The notes of `scope` and of the whole table, counted at most once each SCOPE_SIZE_TTL."""
        now = time.monotonic()
        checked, ours, all_notes = self._counted.get(scope, (-limits.SCOPE_SIZE_TTL, 0, -1))
        if now - checked >= limits.SCOPE_SIZE_TTL:

            def count() -> tuple[int, int]:
                view = self.handles.view(table)
                return view.count_rows(where.scope_is(scope)), view.count_rows()

            ours, all_notes = self.handles.read(count)
            self._counted[scope] = (now, ours, all_notes)
        return ours, all_notes

    def text_search(self, query: str, scope: str, at: datetime | None, limit: int) -> list[Hit]:
        """The `limit` notes of a scope that match `query`'s words best, by full-text score (see `Hit`),
        searched for its `searched_words`. Lance reads them as its index reads the notes (FULL_TEXT)."""
        from lance.query import MatchQuery

        table = self.handles.notes_table()
        if table is None or not query.strip():
            return []
        match = MatchQuery(searched_words(query), "text")
        found, _ = self._search(table, ["id", "_score", "dense_ok"], scope, at, full_text_query=match, limit=limit)
        return [Hit(row["id"], float(row["_score"]), row["dense_ok"], _readable(row, stored)) for row, stored in found]

    def count(self) -> dict[str, int]:
        table = self.handles.notes_table()
        notes = self.handles.view(table).count_rows() if table is not None else 0
        return {"notes": notes, "events": self.handles.view(self.handles.events_table()).count_rows()}

    # -- reading whole scopes: browsing and export (browse.py, transfer.py), not recall ----------

    def scope_notes(self, scope: str, with_vectors: bool = False) -> list[tuple[Note, list[float] | None]]:
        """Every note of a scope, once each, with its stored embedding if asked for (None for one that is
        unreadable, `_rows_with_vectors`: an export then leaves the import to embed that note anew)."""
        table = self.handles.notes_table()
        if table is None:
            return []
        columns = [*_NOTE_COLUMNS, "vector"] if with_vectors else _NOTE_COLUMNS
        rows = _first_of_each_id(self.handles.scan(table, columns, where.scope_is(scope)).to_pylist())
        unreadable = {row["id"] for row in rows if not _finite(row.get("vector"))}
        self._name_unreadable(unreadable)
        return [(note_from_row(row), None if row["id"] in unreadable else row.get("vector")) for row in rows]

    def subject_notes(self, scope: str) -> list[Note]:
        """Every note of a scope that has a subject, once each, without its vector (subjects.py finds a
        subject's notes among them, however each spelled it)."""
        table = self.handles.notes_table()
        if table is None:
            return []
        found = self.handles.scan(table, _NOTE_COLUMNS, where.all_of(where.scope_is(scope), where.has_subject()))
        return [note_from_row(row) for row in _first_of_each_id(found.to_pylist())]

    def scopes(self) -> dict[str, dict[str, Any]]:
        """Each scope with its stored notes and events, the time of its latest note, and the time of its
        latest change (its newest note or event), read from the scope and time columns alone: one
        group-by per table, never a query per scope."""
        found: dict[str, dict[str, Any]] = {}
        for name, table in self.handles.tables().items():
            rows = self.handles.scan(table, ["scope", "recorded_at_us"])
            grouped = rows.group_by("scope").aggregate([("scope", "count"), ("recorded_at_us", "max")])
            for row in grouped.to_pylist():
                entry = found.setdefault(
                    row["scope"], {"notes": 0, "events": 0, "latest_note_at": None, "latest_change_us": None}
                )
                entry[name] = row["scope_count"]
                latest = row["recorded_at_us_max"]
                if name == NOTES:
                    entry["latest_note_at"] = _from_us(latest)
                entry["latest_change_us"] = max(latest, entry["latest_change_us"] or latest)
        for entry in found.values():
            entry["latest_change_at"] = _from_us(entry.pop("latest_change_us"))
        return found


# English function words, left out of a full-text query that has other words. The index keeps every
# word (FULL_TEXT), so a query of these alone still finds the notes that hold them; but every full-text
# match is an entry of recall, and "when is the deploy window?" would otherwise reach each note holding
# "the" or "is", and lift one that depends on the deploy window's note above it.
QUERY_STOP_WORDS = frozenset([
    "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because",
    "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or",
    "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves"
])  # fmt: skip
_WORD = re.compile(r"[\w'’]+")


def searched_words(query: str) -> str:
    """A full-text query without its QUERY_STOP_WORDS, unless they are all it has. (Chinese is left
    whole: without ICU's segmentation here, its function words cannot be told apart.)"""
    kept = _WORD.sub(lambda word: " " if word[0].lower() in QUERY_STOP_WORDS else word[0], query)
    return kept if _WORD.search(kept) else query


def _first_of_each_id(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["id"], row)
    return list(seen.values())


def _finite(vector: list[float | None] | None) -> bool:
    return vector is None or all(x is not None and math.isfinite(x) for x in vector)


def _readable(row: dict[str, Any], vector: np.ndarray | None) -> np.ndarray | None:
    """A stored embedding, if the model could read its note's text (`dense_ok`): else it is the
    embedding of unknown tokens, near everything such alike."""
    return vector if vector is not None and row["dense_ok"] else None


def _cosines(query: np.ndarray, vectors: Sequence[np.ndarray | None]) -> list[float]:
    """The exact cosine of `query` with each of `vectors`, in one product, in float64 (0 for a zero vector)."""
    rows = np.stack([np.asarray(v, np.float64) for v in vectors])
    query = np.asarray(query, np.float64)
    norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(query)
    dots = rows @ query
    cosines: list[float] = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0).tolist()
    return cosines
