"""All configuration in one place: command-line flags, each mirrored by a CORRIGENDA_* variable."""

from __future__ import annotations

import os
from typing import Literal

from corrigenda.store.where import SCOPE_PATTERN
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_db() -> str:
    """A per-user data directory: $XDG_DATA_HOME/corrigenda, else ~/.local/share/corrigenda."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "corrigenda")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CORRIGENDA_", extra="ignore")

    db: str = Field(default_factory=default_db, description="Store directory, or s3://bucket/path.")
    model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers model name or path.")
    scope: str = Field("default", description="Scope used when a tool call names none.", pattern=SCOPE_PATTERN)
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    min_similarity: float = Field(0.25, ge=-1.0, le=1.0, description="Cosine floor for a dense entry point.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
