"""HAProxy (Debian's package) in front of several corrigenda servers, privately, on loopback: round-robin
in HTTP mode, so every request goes to the next server, even on one keep-alive connection, with no
stickiness of any kind. Each response says which server answered it in `X-Served-By` (HAProxy's name
for it: s1, s2, …), and HAProxy's own log line per request, on its stdout, says so too.

HAProxy passes the client's Host through: the servers' CORRIGENDA_ALLOWED_HOSTS must name the
balancer's host:port, as a client reaches it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SERVED_BY = "X-Served-By"
START_WAIT_S = 30.0
STOP_WAIT_S = 30.0

CONFIG = """\
global
    log stdout format raw local0
    maxconn 512

defaults
    mode http
    log global
    option httplog
    timeout connect 5s
    timeout client 300s
    timeout server 300s

frontend mcp
    bind 127.0.0.1:{port}
    default_backend corrigenda

backend corrigenda
    balance roundrobin
    http-response set-header {served_by} %[srv_name]
{servers}
"""


def executable() -> str:
    """Debian installs it in /usr/sbin, which a user's PATH may leave out."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise RuntimeError("haproxy is not installed: apt-get install -y haproxy (.ci/run does)")
    return found


def config(port: int, backends: Sequence[int]) -> str:
    """The configuration: the balancer on 127.0.0.1:`port`, server s1, s2, … on each of `backends`."""
    servers = "\n".join(f"    server s{i} 127.0.0.1:{p}" for i, p in enumerate(backends, 1))
    return CONFIG.format(port=port, served_by=SERVED_BY, servers=servers)


@dataclass
class Balancer:
    port: int
    log: Path  # one line per request (option httplog): ... corrigenda/s2 ...

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def answered_by(self) -> dict[str, int]:
        """Requests per server, as HAProxy's log counts them."""
        counts: dict[str, int] = {}
        for line in self.log.read_text().splitlines():
            for word in line.split():
                if word.startswith("corrigenda/"):
                    name = word.removeprefix("corrigenda/")
                    counts[name] = counts.get(name, 0) + 1
        return counts


@contextmanager
def balancing(port: int, backends: Sequence[int], folder: Path) -> Iterator[Balancer]:
    """HAProxy on 127.0.0.1:`port` in front of the servers on `backends`, its configuration and log in
    `folder`, until the block ends."""
    cfg = folder / "haproxy.cfg"
    cfg.write_text(config(port, backends))
    log = folder / "haproxy.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([executable(), "-db", "-f", str(cfg)], stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_WAIT_S
        while not listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield Balancer(port, log)
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_WAIT_S)


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
