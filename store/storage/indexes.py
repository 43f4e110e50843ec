"""The indexes of a store's tables: which each table wants (SCALAR_INDEXES, the notes' full-text
index as FULL_TEXT says and their vector index), making those missing, making again those of another
type or settings, and the vector index's shape as the notes grow (built at VECTOR_INDEX_AT rows, its
segments merged, trained again)."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from . import limits
from .schema import NOTES

if TYPE_CHECKING:
    from lance.dataset import LanceDataset
    from lance.lance.indices import IndexDescription
    from lancedb.table import Table

log = logging.getLogger(__name__)


class Indexes:
    """The indexes of the tables of one store. Handed nothing: each call is given the table; what it keeps
    is what this process has learnt of them."""

    def __init__(self) -> None:
        self.notes_indexed = False  # whether this process has made sure the notes table's indexes exist
        # The vector index's partitions when this process last read them (`reshape_vector_index`)
        self._partitions_seen: int | None = None

    def ensure_indexes(self, table: Table, retype: bool = False) -> None:
        """Make the indexes a table is missing: at creation, and whenever a process opens the store,
        so a crash between creating a table and indexing it cannot leave it unindexed; with `retype`
        (upkeep, one process at a time), also make again an index that is not as wanted
        (`unwanted_indexes`). One of other settings is made again in place (searches use the old one
        until the new one is committed); one of another type is dropped first (Lance would add the new
        one beside it). The notes table's full-text index is how Chinese is found (the default model
        reads it as unknown tokens); the scalar indexes make a call's cost depend on its own scope, not
        on others."""
        wanted = wanted_indexes(table.name)
        if retype:
            for index in unwanted_indexes(table.name, table.to_lance()):
                (column,) = index.field_names
                log.info("indexing %s.%s again: its %s index is not as wanted", table.name, column, index.index_type)
                if column in limits.SCALAR_INDEXES[table.name]:  # of another type: made again below
                    table.drop_index(index.name)
                else:  # the full-text index, of other settings
                    table.create_index(column, config=wanted[column], replace=True)
        have = indexed_columns(table)
        for column, config in wanted.items():
            for attempt in range(limits.CREATE_ATTEMPTS):
                if column in have:
                    break
                try:
                    table.create_index(column, config=config, replace=False)
                    break
                except Exception as exc:
                    # Another process made it first, or made the table again under it: look again.
                    table.checkout_latest()
                    have = indexed_columns(table)
                    if column not in have and attempt == limits.CREATE_ATTEMPTS - 1:
                        raise
                    log.info("indexing %s.%s met another process (%s); looking again", table.name, column, exc)
        if table.name == NOTES:
            self.notes_indexed = True

    def rebuild_stale(self, table: Table) -> None:
        """Build again every index that still covers a fragment the table no longer has. A delete that
        takes every row of a fragment drops the fragment without rewriting it, so no compaction remaps
        the indexes over it: they keep the deleted rows' terms, vectors and values (an erasure must
        reach them). Rebuilt from the rows there are; on an empty table, dropped (made again by
        `ensure_indexes` at the next open)."""
        table.checkout_latest()
        view = table.to_lance()
        present = {fragment.fragment_id for fragment in view.get_fragments()}
        stale = {
            index.name
            for index in view.describe_indices()
            if any(f not in present for segment in index.segments for f in segment.fragment_ids)
        }
        if not stale:
            return
        wanted = wanted_indexes(table.name)
        empty = table.count_rows() == 0
        for index in table.list_indices():
            if index.name not in stale:
                continue
            column = index.columns[0]
            log.info(
                "rebuilding the %s index of %s.%s, which covered erased rows", index.index_type, table.name, column
            )
            if empty:
                table.drop_index(index.name)
            elif column == "vector":
                self.ensure_vector_index(table, again=True)
            else:
                table.create_index(column, config=wanted[column], replace=True)

    @staticmethod
    def _vector_index_due(table: Table) -> bool:
        return table.count_rows() >= limits.VECTOR_INDEX_AT and not has_vector_index(table)

    def ensure_vector_index(self, table: Table, again: bool = False) -> None:
        """Index the vectors once the table is big enough for an index to pay (below, search is exact;
        rows added after the index are searched exactly until the next compaction indexes them), with
        about √rows partitions of √rows rows each; `again`: train it anew."""
        if not again and not self._vector_index_due(table):
            return
        from lancedb.index import IvfSq

        size = max(1, math.isqrt(table.count_rows()))
        table.create_index("vector", config=IvfSq(distance_type="cosine", target_partition_size=size), replace=True)
        self._partitions_seen = None  # trained anew: read them again

    @staticmethod
    def vector_index_shape(table: Table) -> tuple[int, int] | None:
        """The vector index's (partitions, segments); None while there is none."""
        if not has_vector_index(table):
            return None
        stats = table.to_lance().stats.index_stats(limits.VECTOR_INDEX)
        return min(s["num_partitions"] for s in stats["segments"]), len(stats["segments"])

    def reshape_vector_index(self, table: Table) -> None:
        """After compaction (which adds a segment): train the index anew once the table has outgrown its
        partitions (VECTOR_RETRAIN_GROWTH), or else merge its segments past VECTOR_SEGMENTS.

        The partitions are read (Lance's index statistics, which bring every centroid along as JSON: 0.7 s
        of this process's time at 100k notes, half a compaction, while its calls wait: issue 36) only
        while the table may have outgrown those last read: Lance splits partitions as rows come, so until
        a retraining they grow (were Lance to join some, the retraining would only come later)."""
        table.checkout_latest()
        segments = _vector_segments(table.to_lance())
        if not segments:
            return
        rows = table.count_rows()
        partitions = self._partitions_seen
        if partitions is None or rows >= limits.VECTOR_RETRAIN_GROWTH * partitions**2:
            shape = self.vector_index_shape(table)
            if shape is None:
                return
            partitions, segments = shape
            self._partitions_seen = partitions
        if rows >= limits.VECTOR_RETRAIN_GROWTH * partitions**2:
            self.ensure_vector_index(table, again=True)
        elif segments > limits.VECTOR_SEGMENTS:
            latest_dataset(table).optimize.optimize_indices(
                index_names=[limits.VECTOR_INDEX], num_indices_to_merge=segments
            )


def latest_dataset(table: Table) -> LanceDataset:
    """The latest version of a table as a Lance dataset: upkeep needs what LanceDB does not offer
    (compaction that leaves big fragments alone, cleanup that lists every file)."""
    table.checkout_latest()  # and the LanceDB table with it, for upkeep's reads through it
    return table.to_lance()


def wanted_indexes(name: str) -> dict[str, Any]:
    """Each indexed column of a table, with the index it gets (`Indexes.ensure_indexes`)."""
    from lancedb.index import FTS, Bitmap, BTree

    configs = {"BTree": BTree, "Bitmap": Bitmap}
    wanted: dict[str, Any] = {column: configs[kind]() for column, kind in limits.SCALAR_INDEXES[name].items()}
    if name == NOTES:
        wanted["text"] = FTS(**limits.FULL_TEXT)
    return wanted


def indexed_columns(table: Table) -> set[str]:
    """The columns of a table that have an index of their own: once it is made, those of `wanted_indexes`."""
    return {index.columns[0] for index in table.list_indices() if len(index.columns) == 1}


def unwanted_indexes(name: str, view: LanceDataset) -> list[IndexDescription]:
    """The indexes of a table, at `view`'s version, that are not as `wanted_indexes` makes them (a
    store made before it said so): a scalar index of another type than SCALAR_INDEXES says, a full-text
    index with other settings than FULL_TEXT. Read from the version's manifest alone, which holds each
    index's type and settings: no index file is read."""
    scalar = limits.SCALAR_INDEXES[name]
    unwanted = []
    for index in view.describe_indices():
        if len(index.field_names) != 1:
            continue
        column = index.field_names[0]
        if column in scalar:
            if scalar[column] != index.type_url.rsplit(".", 1)[-1].removesuffix("IndexDetails"):
                unwanted.append(index)
        elif (
            name == NOTES
            and column == "text"
            and any(index.details.get(setting) != value for setting, value in limits.FULL_TEXT.items())
        ):
            unwanted.append(index)
    return unwanted


def wholly_indexed(view: LanceDataset) -> bool:
    """Whether the vector index covers every fragment of this version. Then a search through it returns
    the index's 8-bit estimates of 2 - 2·cos (the normalized vectors' squared distance), not 1 - cos:
    Lance re-scores the hits exactly, from their vectors, only when it also searches fragments the
    index has not taken in (any, whatever the filter). Both come from the version's metadata: no request."""
    indexed = {
        fragment
        for index in view.describe_indices()
        if index.name == limits.VECTOR_INDEX
        for segment in index.segments
        for fragment in segment.fragment_ids
    }
    return all(fragment.fragment_id in indexed for fragment in view.get_fragments())


def _vector_segments(view: LanceDataset) -> int:
    """How many segments the vector index has (0: none), from the version's metadata."""
    return sum(len(index.segments) for index in view.describe_indices() if index.name == limits.VECTOR_INDEX)


def has_vector_index(table: Table) -> bool:
    return any(index.columns == ["vector"] for index in table.list_indices())
