"""Faults of a real distributed object store under three servers writing at once: a SeaweedFS cluster
on loopback (bench/seaweed.py), one of the test's own, and bench/faults.py's cluster part, short.

Three `corrigenda serve --transport http` share one store on the cluster, each written to by its own
client (five remembers to one correct); once a third of the writes are acknowledged, one component
of the cluster fails, and comes back once every server has met the fault. Then, from a fresh
connection: every acknowledged note and event is there exactly once, every chain has a head and no
read fails; while the store was out each error the servers gave was one line; and once it was back
every server wrote again, none of them restarted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.faults import PhaseResult, cluster_fault_run
from bench.seaweed import SeaweedCluster

# The cluster is a bucket store, like tests/store/test_object_store.py's (tests/conftest.py makes it slow too).
pytestmark = pytest.mark.bucket

WRITES = 15  # per server: a third of them before the fault, at least one (two for a volume server) during it


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[SeaweedCluster]:
    """A cluster of this test's own, which it may break; its AWS variables set here, where the checks read the bucket."""
    with SeaweedCluster(["corrigenda-bench"]) as started:
        for name, value in started.env.items():
            monkeypatch.setenv(name, value)
        yield started


def _run(cluster: SeaweedCluster, fault: str, tmp_path: Path, embedder: Any) -> tuple[PhaseResult, dict[str, Any]]:
    result = cluster_fault_run(cluster, fault, tmp_path, servers=3, writes=WRITES, seed=0, embedder=embedder)
    return result, result.extra["outage"]


def _nothing_lost_and_back(result: PhaseResult, outage: dict[str, Any]) -> None:
    assert outage["happened"], "the writes ended before the fault began"
    assert not result.lost and not result.raw_duplicates and not result.corrupt, result.summary()["problems"]
    assert not outage["errors_outside_it"], outage  # no call failed that did not meet the fault
    assert outage["errors_of_more_than_one_line"] == 0, outage["errors_said"]
    # every server wrote again once the store was back, the servers left as they were
    assert all(t is not None for t in outage["wrote_again_after_s"]), outage


def _each_error_says(outage: dict[str, Any], words: str) -> None:
    """Every error given while the store was out says `words`; those that do not are shown whole (pytest
    would cut a long dict of them short, and hide the one that differs)."""
    other = [f"{n} x {said}" for said, n in outage["errors_said"].items() if words not in said]
    assert not other, "\n".join(other)


def test_a_volume_server_killed_while_three_servers_write_loses_and_doubles_nothing(
    cluster: SeaweedCluster, tmp_path: Path, embedder: Any
) -> None:
    """Every object has a copy on a second volume server: the writes go on while one is gone."""
    result, outage = _run(cluster, "volume server killed", tmp_path, embedder)
    _nothing_lost_and_back(result, outage)
    assert outage["calls_that_met_it"] >= 3 * 2


def test_the_gateway_stopped_while_three_servers_write_fails_their_calls_in_one_line_until_it_is_back(
    cluster: SeaweedCluster, tmp_path: Path, embedder: Any
) -> None:
    result, outage = _run(cluster, "gateway stopped", tmp_path, embedder)
    _nothing_lost_and_back(result, outage)
    assert outage["errors_while_out"] >= 3, outage  # each server met it
    _each_error_says(outage, "is not answering (the endpoint could not be reached)")


def test_the_filer_stopped_while_three_servers_write_fails_their_calls_in_one_line_naming_the_store(
    cluster: SeaweedCluster, tmp_path: Path, embedder: Any
) -> None:
    """With its filer gone the gateway still answers, 500 InternalError to every request: nothing is
    lost, each call fails in one line, and that line should say what the store answered."""
    result, outage = _run(cluster, "filer stopped", tmp_path, embedder)
    _nothing_lost_and_back(result, outage)
    assert outage["errors_while_out"] >= 3, outage
    assert all("is not answering (InternalError:" in said for said in outage["errors_said"]), outage["errors_said"]
