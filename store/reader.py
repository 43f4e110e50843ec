"""What one call reads of one scope, in one place: its searches, the notes they found with those their
chains and prerequisites reach, the fold around them, and stored vectors. A reader goes through the
process's graph cache (graph.py) and the tables; recall (recall.py) and the writes' checks
(memory.py) read through one, made per call, and never climb back into Memory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

import numpy as np

from .fold import Fold, fold
from .graph import Graphs
from .model import Note
from .tables import Hit, Tables


class ScopeReader:
    """The reads of one call in `scope`. `also`: notes the call holds already (a note being explained),
    folded with whatever it loads. `version`: the events table's version its last fold read, which a
    write compares with its own commit (Memory's race check)."""

    def __init__(self, tables: Tables, graphs: Graphs, scope: str, also: Sequence[Note] = ()) -> None:
        self.tables = tables
        self.graphs = graphs
        self.scope = scope
        self.also = list(also)
        self.version: int | None = None

    def check_model(self, name: str) -> None:
        """StoreError unless the store's vectors were made by the model `name` (Tables.check_model)."""
        self.tables.handles.check_model(name)

    def text_search(self, query: str, as_of: datetime | None, limit: int) -> list[Hit]:
        return self.tables.search.text_search(query, self.scope, as_of, limit)

    def vector_search(self, vector: Sequence[float], as_of: datetime | None, limit: int) -> list[Hit]:
        return self.tables.search.vector_search(vector, self.scope, as_of, limit)

    def found(self, ids: Sequence[str]) -> dict[str, Note]:
        """The notes searches found, read in one go with the notes their chains and prerequisites reach
        (kept for the fold that follows), all but those kept already. The graph is asked after the
        searches, so it holds the edges of every note they found (graph.py)."""
        wanted = self.graphs.get(self.scope).reachable(ids)
        notes = self.graphs.notes_of(self.scope, wanted, self._notes_and_their_vectors)
        return {i: notes[i] for i in ids if i in notes}

    def linked_from(self, note_ids: Iterable[str]) -> set[str]:
        """The notes with an edge to one of these notes, whatever its kind: a dependant, a note said to
        state another fact, a correction (graph.py keeps every edge naming a note)."""
        graph = self.graphs.get(self.scope)
        return {
            e.src
            for note_id in note_ids
            for event_id in graph.naming.get(note_id, ())
            if (e := graph.events[event_id]).src is not None and e.dst == note_id
        }

    def fold(self, around: Sequence[Note], at: datetime) -> Fold:
        """The fold at `at` of the chains and prerequisites of `around` (notes already read) and of
        `also`, from the scope's graph, refreshed after those reads (graph.py says why), with the notes
        it reaches."""
        graph, self.version = self.graphs.get_with_version(self.scope)
        known = {n.id: n for n in [*around, *self.also]}
        reached = graph.reachable(known)
        notes = self.graphs.notes_of(self.scope, reached - known.keys(), self._notes_and_their_vectors)
        return fold([*notes.values(), *known.values()], [*graph.around(reached), *graph.scope_wide], at)

    def vectors(self, ids: Iterable[str]) -> Mapping[str, np.ndarray]:
        """Stored embeddings of notes of the scope by id: those kept, the others read."""
        return self.graphs.vectors_of(self.scope, ids, self.tables.search.vectors)

    def _notes_and_their_vectors(self, ids: Iterable[str]) -> dict[str, Note]:
        """Notes by id; their vectors, where read along, kept for the near-duplicate pass."""
        notes, vectors = self.tables.search.notes_with_vectors(ids)
        self.graphs.vectors.put(vectors)
        return notes
