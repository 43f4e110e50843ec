"""Compaction of one table: its small fragments merged, its indexes brought up to date, its old
versions and a crash's leftover files deleted. When, and under which lock, is upkeep.py's."""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from . import limits
from .handles import Handles
from .indexes import Indexes, latest_dataset
from .schema import NOTES

if TYPE_CHECKING:
    from lance.dataset import LanceDataset
    from lancedb.table import Table

log = logging.getLogger(__name__)


class Compaction:
    """The compaction of one store's tables, reached through its `handles`, their `indexes` kept up."""

    def __init__(self, handles: Handles, indexes: Indexes) -> None:
        self.handles = handles
        self.indexes = indexes

    def fragments(self) -> dict[str, int]:
        return {name: len(latest_dataset(table).get_fragments()) for name, table in self.handles.tables().items()}

    def tidy(self, name: str, table: Table, keep_versions_for: timedelta, erasing: bool = False) -> None:
        """One table's upkeep, on its latest version: its missing indexes (not while erasing: a `forget`
        does not wait for a vector index to be built), then compaction (erasing: of every file that
        holds a deleted row), the indexes brought up to date (the vector index reshaped), and the
        cleanup."""
        table.checkout_latest()
        if not erasing:
            self.indexes.ensure_indexes(table, retype=True)
            if name == NOTES:
                self.indexes.ensure_vector_index(table)
        dataset = latest_dataset(table)
        dataset.optimize.compact_files(
            target_rows_per_fragment=limits.FRAGMENT_ROWS[name],
            materialize_deletions_threshold=0.0 if erasing else None,  # None: Lance's own (10 % deleted)
        )
        dataset.optimize.optimize_indices()
        if erasing:
            self.indexes.rebuild_stale(table)
        elif name == NOTES:
            self.indexes.reshape_vector_index(table)
        self.clean_versions(latest_dataset(table), keep_versions_for)

    def clean_versions(self, dataset: LanceDataset, keep_versions_for: timedelta) -> None:
        """Delete the versions older than `keep_versions_for` or than the newest KEEP_VERSIONS, then
        every file that no remaining version references and that is older than ORPHAN_AGE (a crash's
        leftovers). On an object store, where each pass of Lance's cleanup reads every manifest there
        is (a request each), one pass: the versions beyond the newest KEEP_VERSIONS_REMOTE, whatever
        their age (all but the latest when `keep_versions_for` is zero: an erasure)."""
        if self.handles.location.cleans_in_one_pass and keep_versions_for > timedelta(0):
            dataset.cleanup_old_versions(
                retain_versions=limits.KEEP_VERSIONS_REMOTE, error_if_tagged_old_versions=False
            )
            return  # object stores: Lance's own cleanup collects a crash's leftovers after seven days
        dataset.cleanup_old_versions(older_than=keep_versions_for, error_if_tagged_old_versions=False)
        if keep_versions_for > timedelta(0):  # else only the latest is left (an erasure): nothing more to list
            dataset.cleanup_old_versions(retain_versions=limits.KEEP_VERSIONS, error_if_tagged_old_versions=False)
        if not self.handles.location.collects_orphans:
            return
        tracked = set(dataset.tracked_files().read_all()["path"].to_pylist())
        present = dataset.all_files().read_all().to_pylist()
        cutoff = datetime.now(UTC) - limits.ORPHAN_AGE
        root = dataset.uri
        for file in present:
            path = file["path"]
            if path in tracked or path.startswith("_versions/") or file["last_modified"] > cutoff:
                continue
            log.info("removing %s, which no version of %s references (left by a crash)", path, root)
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(root, path))


def _tidy_small(table: Table, keep_versions_for: timedelta) -> None:
    """A small table's upkeep: its fragments merged, its versions older than `keep_versions_for` dropped."""
    table.checkout_latest()
    dataset = table.to_lance()
    dataset.optimize.compact_files()
    dataset.cleanup_old_versions(older_than=keep_versions_for, error_if_tagged_old_versions=False)
