"""What bench/scale.py records of a size, and the measures beside the timings: memory (RSS), the
bytes stored (on disk or in a bucket), a call under cProfile.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import resource
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def rss_mib() -> tuple[float, float]:
    """(VmRSS now, the process's peak RSS so far), in MiB."""
    current = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            current = int(line.split()[1]) / 1024
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def is_remote(uri: str) -> bool:
    return "://" in uri


def stored_bytes(uri: str) -> int | None:
    """Bytes under a store: the files of a directory, or the objects under an s3:// prefix (listed
    with the AWS variables, AWS_ENDPOINT_URL for a local S3); None where not measured (gs://, az://,
    or a listing that failed)."""
    if not is_remote(uri):
        total = 0
        for root, _dirs, files in os.walk(uri):
            for name in files:
                with suppress(OSError):  # removed by a compaction in between
                    total += os.path.getsize(os.path.join(root, name))
        return total
    if not uri.startswith("s3://"):
        return None
    from pyarrow import fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    scheme, _, host = endpoint.partition("://")
    try:
        bucket = fs.S3FileSystem(endpoint_override=host or None, scheme=scheme or "https")
        listing = bucket.get_file_info(fs.FileSelector(uri[len("s3://") :].rstrip("/"), recursive=True))
    except (OSError, ValueError) as exc:
        print(f"  could not list {uri}: {exc}", file=sys.stderr)
        return None
    return sum(info.size or 0 for info in listing if info.type == fs.FileType.File)


def stored_mib(uri: str) -> float | None:
    count = stored_bytes(uri)
    return count / 2**20 if count is not None else None


@dataclass
class QueryRecord:
    query: str
    in_chain: bool
    recall_ms: float
    plain_ms: float
    recall_with_model_ms: float
    embed_ms: float
    chains: int
    notes_delivered: int
    store_ann_recall: float
    plain_ann_recall: float | None


@dataclass
class SizeResult:
    size: str
    notes: int
    scopes: int
    measured_scope: str
    events: int
    stand_in: str | None
    build: dict[str, Any] = field(default_factory=dict)
    indexes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    plain: dict[str, Any] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)
    recall_with_model: dict[str, float] = field(default_factory=dict)
    query_embed: dict[str, float] = field(default_factory=dict)
    plain_hybrid: dict[str, float] = field(default_factory=dict)
    ratio_p50: float = 0.0
    ratio_per_query_median: float = 0.0
    store_ann_recall: float = 0.0
    plain_ann_recall: float | None = None
    writes: dict[str, dict[str, float]] = field(default_factory=dict)
    note_embed: dict[str, float] = field(default_factory=dict)
    graph_events: int = 0
    rss_mib: float = 0.0
    peak_rss_mib: float = 0.0
    disk_store_mib: float | None = None  # None: not measured (a gs:// or az:// store)
    disk_plain_mib: float | None = None
    store: str = ""  # the store's directory or URI
    plain_store: str = ""  # the plain LanceDB table's
    graph_cache: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    load_average: tuple[float, float] = (0.0, 0.0)  # 1-minute load of the machine when the size began and ended
    vs_1k_p50: float | None = None
    profile: dict[str, str] = field(default_factory=dict)
    after_burst: dict[str, Any] = field(default_factory=dict)  # --burst (issue 36): see measure_burst
    queries: list[QueryRecord] = field(default_factory=list)


def profiled(call: Callable[[], object], top: int) -> str:
    """One call under cProfile: the top `top` functions by cumulative time, then by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()
