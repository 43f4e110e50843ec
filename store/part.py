"""What each part of a store's operations is handed (memory.py composes them): reads.py, writes.py and
imports.py read and write through the same collaborators, made once per store and handed whole."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .embedder import Embedder
from .graph import Graphs
from .lookup import Lookup
from .recall import RetrievalSettings
from .tables import Tables


@dataclass(frozen=True)
class Collaborators:
    """What every part of one store's operations reads and writes through: the tables, the graphs kept of
    them, the lookup every part shares, the embedder, the clock and recall's settings."""

    tables: Tables
    graphs: Graphs
    lookup: Lookup
    embedder: Embedder
    clock: Callable[[], datetime]
    settings: RetrievalSettings


class Part:
    """A part of one store's operations, handed its `Collaborators`, each of which it names as its own."""

    def __init__(self, given: Collaborators) -> None:
        self.given = given
        self.tables = given.tables
        self.graphs = given.graphs
        self.lookup = given.lookup
        self.embedder = given.embedder
        self.clock = given.clock
        self.settings = given.settings
