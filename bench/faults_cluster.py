"""bench/faults.py's part 5: the faults of a SeaweedFS cluster (bench/seaweed.py) while HTTP servers write
to it, each a servers phase with an `Outage`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from corrigenda.store import Embedder
from faults_check import PhaseResult
from faults_common import progress
from faults_servers import Outage, servers_phase
from harness import LOCAL_BUCKET
from seaweed import SeaweedCluster

CLUSTER_FAULTS = ("volume server killed", "gateway stopped", "filer stopped")


def cluster_outage(fault: str, cluster: SeaweedCluster, after: int) -> Outage:
    """One of CLUSTER_FAULTS on a SeaweedFS cluster (bench/seaweed.py), as an Outage beginning after
    `after` acknowledged writes. A volume server killed leaves a copy of every object it held on
    another, so the writes go on: the fault lasts two writes of each server, not one."""
    plans: dict[str, tuple[Callable[[], None], Callable[[], None], int]] = {
        "volume server killed": (partial(cluster.kill_volume_server, 1), partial(cluster.start_volume_server, 1), 2),
        "gateway stopped": (cluster.stop_gateway, cluster.start_gateway, 1),
        "filer stopped": (cluster.stop_filer, cluster.start_filer, 1),
    }
    begin, end, writes = plans[fault]
    return Outage(fault, begin, end, after, writes_while_out=writes)


def cluster_fault_run(
    cluster: SeaweedCluster, fault: str, root: Path, servers: int, writes: int, seed: int, embedder: Embedder,
    run: int = 1,
) -> PhaseResult:  # fmt: skip
    """`servers` HTTP servers writing at once (five remembers to one correct) on a new store in the
    cluster's bucket, `fault` (CLUSTER_FAULTS) once a third of their writes are acknowledged, then the
    checks. The cluster's AWS variables must be in this process's environment (the checks read the
    bucket with them)."""
    slug = _slug(fault)
    return servers_phase(
        root / f"{slug}-{run}", servers, writes, seed, db=f"s3://{LOCAL_BUCKET}/{slug}-{run}", transport="http",
        env=cluster.env, embedder=embedder, mix="remember-heavy",
        outage=cluster_outage(fault, cluster, after=servers * writes // 3), name=f"{fault}, run {run}",
    )  # fmt: skip


def _slug(fault: str) -> str:
    return fault.replace(" ", "-")


def cluster_phase(
    root: Path, faults: Sequence[str], runs: int, servers: int, writes: int, seed: int, keep: bool = False
) -> list[PhaseResult]:
    """Each fault `runs` times, each run on a cluster of its own (bench/seaweed.py: it starts in about
    1.5 s), with the real model in the checks; `keep`: each cluster's directory (its logs) stays under
    `root`."""
    from corrigenda.store import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    results = []
    for fault in faults:
        for run in range(1, runs + 1):
            kept = root / f"{_slug(fault)}-{run}-seaweed" if keep else None
            with SeaweedCluster([LOCAL_BUCKET], keep=kept) as cluster:
                os.environ.update(cluster.env)
                result = cluster_fault_run(cluster, fault, root, servers, writes, seed + run, embedder, run)
            progress(f"{result.phase}: {result.acknowledged} acknowledged, lost {len(result.lost)}, "
                     f"{result.extra['outage']['errors_while_out']} errors while out")  # fmt: skip
            results.append(result)
    return results
