"""What each part of a store's operations is handed (memory.py composes them): reads.py, writes.py and
imports.py read and write through the same collaborators, made once per store."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from .embedder import Embedder
from .graph import Graphs
from .lookup import Lookup
from .recall import RetrievalSettings
from .tables import Tables


class Part:
    """A part of one store's operations, handed what it reads and writes through: the tables, the graphs
    kept of them, the lookup every part shares, the embedder, the clock and recall's settings."""

    def __init__(
        self,
        tables: Tables,
        graphs: Graphs,
        lookup: Lookup,
        embedder: Embedder,
        clock: Callable[[], datetime],
        settings: RetrievalSettings,
    ) -> None:
        self.tables = tables
        self.graphs = graphs
        self.lookup = lookup
        self.embedder = embedder
        self.clock = clock
        self.settings = settings
