"""Bulk writes: many notes at once (`import_notes`: a conversation history, with dates), and an export or a
knowledge-graph memory.jsonl (`import_lines`, parsed and checked in full by transfer.py). Like every write,
each is checked in full before anything is stored; the notes are then embedded and appended in batches.
`Memory` (memory.py) offers these as its operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import overload

import pyarrow as pa
import pyarrow.compute as pc

from . import transfer, where
from .chains import note_view
from .checks import new_note, recorded_time
from .fold import Fold, fold
from .model import Draft, Note, NoteState
from .part import Part
from .views import Imported, NoteView
from .where import check_scope


class ImportedNotes(Sequence[NoteView]):
    """What `import_notes` answers: one note per draft, in order (a sequence of them), each the note that
    holds the draft's text, written by this call or already current; and `skipped`, the positions of
    the drafts that were not written because of that."""

    def __init__(self, notes: list[NoteView], skipped: list[int]) -> None:
        self.notes = notes
        self.skipped = skipped

    @property
    def written(self) -> int:
        """How many notes this call stored."""
        return len(self.notes) - len(self.skipped)

    @overload
    def __getitem__(self, index: int) -> NoteView: ...
    @overload
    def __getitem__(self, index: slice) -> list[NoteView]: ...
    def __getitem__(self, index: int | slice) -> NoteView | list[NoteView]:
        return self.notes[index]

    def __len__(self) -> int:
        return len(self.notes)

    def __repr__(self) -> str:
        return f"ImportedNotes({len(self.notes)} notes: {self.written} written, {len(self.skipped)} skipped)"


class Imports(Part):
    """The bulk writes of one store (part.py: what they are handed)."""

    def import_notes(self, drafts: Sequence[Draft], scope: str = "default", actor: str | None = None) -> ImportedNotes:
        """Store many notes (a conversation history, an export): no edges, no similar-notes check. Each
        draft's `at` dates its note, as `remember`'s does.

        A draft whose text is exactly that of a current note of the scope, or of an earlier draft of the
        call, is not stored again, as `remember` would not store it: the answer still has one note per
        draft, in order, and in that draft's place is the note that holds the text; `skipped` lists those
        drafts' positions. Every draft is checked before anything is stored; then each batch of
        `transfer.BATCH` notes is embedded at once and appended in one write (transfer.write_notes), so a
        long import is several writes, not one.
        """
        now = self.clock()
        scope = check_scope(scope)
        for position, draft in enumerate(drafts):
            recorded_time(draft.at, lambda: now, f"drafts[{position}].at")
        notes = [new_note(d, scope, actor, now) for d in drafts]
        holding, before = self._current_by_text(scope, {n.text for n in notes}, now)
        held_by: list[Note] = []  # for each draft, the note that holds its text
        skipped: list[int] = []
        written: list[Note] = []
        for position, note in enumerate(notes):
            held = holding.get(note.text)
            if held is None:
                holding[note.text] = note
                written.append(note)
            else:
                skipped.append(position)
            held_by.append(held or note)
        transfer.write_notes(self.tables, self.embedder, written)
        if written:
            self.graphs.scope_grew(scope)  # a scan kept before these notes would be read around by id
        after = fold(written, [], max([now, *(n.recorded_at for n in written)]))  # new notes have no edges yet
        return ImportedNotes([note_view(n, after if n.id in after.notes else before) for n in held_by], skipped)

    def _current_by_text(self, scope: str, texts: set[str], at: datetime) -> tuple[dict[str, Note], Fold]:
        """The current notes of `scope` (at `at`) whose text is one of `texts`, by text (the earliest
        recorded, where two are), and the fold that says they are current. One scan of the scope's ids
        and texts, the vectors left out; the notes found are then read and folded by id."""
        table = self.tables.handles.notes_table()
        if table is None or not texts:
            return {}, fold([], [], at)
        rows = self.tables.handles.scan(table, ["id", "text"], where.scope_is(scope))
        same = rows.filter(pc.is_in(rows["text"], value_set=pa.array(sorted(texts))))
        ids = list(dict.fromkeys(same["id"].to_pylist()))
        if not ids:
            return {}, fold([], [], at)
        found = self.lookup.reader(scope).found(ids)
        before = self.lookup.load(scope, at, list(found.values()))
        current = sorted(
            (n for n in found.values() if n.id in before.notes and before.state(n.id) is NoteState.ACTIVE),
            key=lambda n: (n.recorded_at, n.id),
        )
        holding: dict[str, Note] = {}
        for note in current:
            holding.setdefault(note.text, note)
        return holding, before

    def import_lines(
        self,
        lines: Iterable[str],
        scope: str = "default",
        actor: str | None = None,
        source: str = "import",
        progress: transfer.Progress | None = None,
        partial: bool = False,
    ) -> Imported:
        """Import a corrigenda export (into the scopes it names) or a knowledge-graph memory.jsonl (into
        `scope`), checked in full first; records already stored are left as they are. An export without
        its trailer, or not matching it, is refused unless `partial` (transfer.py)."""
        parsed = transfer.parse(lines, scope, actor, source, self.clock(), partial)
        imported = transfer.import_parsed(self.tables, self.embedder, parsed, progress)
        self.graphs.drop_all()  # its events were appended outside the graphs' bookkeeping
        return imported
