"""A local S3 API for the object-storage tests and benches: moto's S3 server on loopback, behind a gate
that makes it behave as S3 does where moto does not, and that can be told to misbehave.

- **Atomic conditional writes.** Lance commits a version by writing its manifest with
  `If-None-Match: *`, and relies on the store refusing the second of two writers (412). moto checks
  that header and then writes, with nothing between the two: two requests at once can both pass the
  check. The gate runs every conditional write alone, so the check and the write are one step, as
  on S3.
- **Refused credentials.** moto takes any key. Given `access_key`, the gate answers a request
  signed with another key as S3 does: 403 `InvalidAccessKeyId`.
- **Negative control.** With `honour_conditional_writes=False` the gate drops `If-None-Match`, as a
  store without conditional writes would: two commits of one version both succeed and one of them
  is silently lost. A test of "nothing lost" must fail against it.
- **Contention.** `commit_delay` holds each conditional write that long before it lands (or, with
  the header dropped, before it overwrites), so that commits from several processes overlap, as they
  do on a remote store, whose round trips are slower than loopback's. The negative control needs it:
  a write to a young table reads its rows back and writes again those another commit overwrote
  (store/storage/handles.py), which hides most losses that land before that read.
- **Lost races.** `refuse_next` conditional writes are answered 412 without being written, as S3
  answers a writer whose version another writer took first.
- **Counts.** `GET /_gate` answers the gate's counts as JSON (conditional writes, refused ones,
  requests by `kind`, the CPU seconds its thread spent answering each kind, the keys listings
  answered, and its process id, whose whole CPU time a bench reads), for a bench that runs it in
  another process (no bucket can be named `_gate`). moto lists a prefix by walking every key of the
  bucket and renders each key it answers, so a listing costs it several times a read, and more the
  more versions a table keeps.
- **Outages.** `stop()` closes the port (connections are refused) and `start()` opens it again on
  the same port with the same objects.
- **Only S3.** The gate serves moto's S3 application itself. moto's own server puts a dispatcher in
  front that, for every request and under one lock, finds the service by listing moto's modules on
  disk: in a profile of the three-server bench it was 15 % of the S3 server's samples, in a process
  that is the bench's bottleneck (docs/object-storage.md, *Measured*). `dispatcher=True` keeps it, to compare.

Run on its own for a bench (`bench/scale.py --db s3://…`):

    .venv/bin/python bench/local_s3.py --port 9000 --bucket corrigenda-bench

and point the AWS variables it prints at it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

REGION = "us-east-1"
KEY_ID = "test-key"
SECRET = "test-secret"

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")
_REFUSED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access "
    b"Key Id you provided does not exist in our records.</Message></Error>"
)
_PRECONDITION_FAILED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>PreconditionFailed</Code><Message>At least one of "
    b"the pre-conditions you specified did not hold</Message><Condition>If-None-Match</Condition></Error>"
)

KINDS = ("list", "manifest", "data read", "other read", "put", "delete")


def kind(method: str, path: str, query: str) -> str:
    """What a request to a Lance store is, one of KINDS: a listing, a read of a version's manifest (GET
    or HEAD), of a data file or of anything else (indexes, transactions, the lease), a write, a delete."""
    if method == "DELETE" or (method == "POST" and "delete" in query):
        return "delete"
    if method in ("PUT", "POST"):
        return "put"
    if "list-type" in query:
        return "list"
    if "/_versions/" in path:
        return "manifest"
    return "data read" if "/data/" in path else "other read"


StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class Gate:
    """WSGI middleware in front of moto (module docstring)."""

    def __init__(
        self,
        app: WsgiApp,
        honour_conditional_writes: bool = True,
        access_key: str | None = None,
        commit_delay: float = 0.0,
    ) -> None:
        self.app = app
        self.honour_conditional_writes = honour_conditional_writes
        self.access_key = access_key
        self.commit_delay = commit_delay
        self.conditional_writes = 0  # requests that carried If-None-Match
        self.refused_writes = 0  # of those, the ones answered 412
        self.refuse_next = 0  # refuse this many more, whatever they are (module docstring)
        self.requests: Counter[str] = Counter()  # kind (KINDS) → requests seen
        self.cpu: defaultdict[str, float] = defaultdict(
            float
        )  # kind (KINDS) → the S3 server's CPU seconds answering them
        self.listed = 0  # keys answered to listings
        self._one_at_a_time = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/_gate":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(self.counts()).encode()]
        method, path, query = environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")
        what = kind(method, path, query)
        self.requests[what] += 1
        started = time.thread_time()
        try:
            body = b"".join(self._answer(environ, start_response))
            if what == "list":
                self.listed += body.count(b"<Key>")
            return [body]
        finally:
            self.cpu[what] += time.thread_time() - started

    def _answer(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if self.access_key is not None:
            signed = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
            if signed is None or signed[1] != self.access_key:
                start_response("403 Forbidden", [("Content-Type", "application/xml")])
                return [_REFUSED]
        conditional = environ.get("HTTP_IF_NONE_MATCH") and environ["REQUEST_METHOD"] in ("PUT", "POST")
        if not conditional:
            return self.app(environ, start_response)
        if self.commit_delay:
            time.sleep(self.commit_delay)
        if not self.honour_conditional_writes:
            del environ["HTTP_IF_NONE_MATCH"]
            return self.app(environ, start_response)
        status: list[str] = []

        def record(code: str, headers: list[Any], *rest: Any) -> Any:
            status.append(code)
            return start_response(code, headers, *rest)

        with self._one_at_a_time:
            if self.refuse_next > 0:
                self.refuse_next -= 1
                self.conditional_writes += 1
                self.refused_writes += 1
                start_response("412 Precondition Failed", [("Content-Type", "application/xml")])
                return [_PRECONDITION_FAILED]
            body = b"".join(self.app(environ, record))  # the whole write happens inside the lock
            self.conditional_writes += 1
            self.refused_writes += bool(status and status[0].startswith("412"))
        return [body]

    def counts(self) -> dict[str, Any]:
        return {
            "conditional_writes": self.conditional_writes, "refused_writes": self.refused_writes,
            "requests": dict(self.requests), "cpu_seconds": dict(self.cpu), "listed_keys": self.listed,
            "pid": os.getpid(),  # for a bench that reads this process's CPU time
        }  # fmt: skip


def aws_env(endpoint: str) -> dict[str, str]:
    """The usual AWS variables for a test's own S3 API at `endpoint` (moto's here, SeaweedFS's gateway)."""
    return {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


class LocalS3:
    """moto's S3 server on 127.0.0.1 behind a Gate, with buckets made at the first start."""

    def __init__(self, port: int, buckets: Iterable[str] = (), dispatcher: bool = False, **gate: Any) -> None:
        from moto.server import DomainDispatcherApplication, create_backend_app

        self.port = port
        app = DomainDispatcherApplication(create_backend_app) if dispatcher else create_backend_app("s3")
        self.gate = Gate(app, **gate)
        self._buckets = list(buckets)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """The usual AWS variables, which the object store reads itself."""
        return aws_env(self.endpoint)

    def start(self) -> LocalS3:
        from moto.server import MotoRequestHandler
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # not a line per request

        self._server = make_server("127.0.0.1", self.port, self.gate, threaded=True, request_handler=MotoRequestHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-s3", daemon=True)
        self._thread.start()
        for bucket in self._buckets:
            self._client().create_bucket(Bucket=bucket)
        self._buckets = []
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()

    def _client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--bucket", default="corrigenda-bench")
    parser.add_argument("--commit-delay", type=float, default=0.0, help="seconds each conditional write waits")
    parser.add_argument(
        "--ignore-conditional-writes", action="store_true", help="the negative control: commits can be lost"
    )
    parser.add_argument(
        "--dispatcher", action="store_true", help="moto's dispatcher in front of S3, as its own server has it"
    )
    args = parser.parse_args()
    s3 = LocalS3(
        args.port, [args.bucket], dispatcher=args.dispatcher,
        honour_conditional_writes=not args.ignore_conditional_writes, commit_delay=args.commit_delay,
    ).start()  # fmt: skip
    print(" ".join(f"{k}={v}" for k, v in s3.env.items()), flush=True)
    print(f"serving s3://{args.bucket} on {s3.endpoint}; Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s3.stop()


if __name__ == "__main__":
    main()
