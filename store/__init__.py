"""corrigenda's memory engine: notes, lifecycle events, the fold, chains and recall. Knows no MCP."""

from .embedder import DEFAULT_MODEL, Embedder, SentenceTransformerEmbedder
from .errors import (
    Conflict,
    CorrigendaError,
    InvalidArgument,
    ModelMismatch,
    ModelUnavailable,
    NotFound,
    StoreBusy,
    StoreUnavailable,
    StoreUnreachable,
    UnknownScope,
)
from .memory import Memory
from .model import ChainStatus, Draft, Event, EventKind, Note, NoteState
from .recall import RetrievalSettings

__all__ = [
    "DEFAULT_MODEL",
    "ChainStatus",
    "Conflict",
    "CorrigendaError",
    "Draft",
    "Embedder",
    "Event",
    "EventKind",
    "InvalidArgument",
    "Memory",
    "ModelMismatch",
    "ModelUnavailable",
    "NotFound",
    "Note",
    "NoteState",
    "RetrievalSettings",
    "SentenceTransformerEmbedder",
    "StoreBusy",
    "StoreUnavailable",
    "StoreUnreachable",
    "UnknownScope",
]  # fmt: skip
