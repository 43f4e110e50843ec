"""A store whose object store ignores conditional writes is refused at start, before it loses commits.

Against moto's S3 server behind bench/local_s3.py's gate: a fault must be injected here, and the gate
is what drops `If-None-Match` (`honour_conditional_writes=False`), as a store without conditional
writes would. moto checks no signature, so a middleware here checks the check's Signature Version 4
with botocore's signer (SeaweedFS, which checks them itself, took the same requests by hand).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from corrigenda.store.errors import ConditionalWritesIgnored, StoreFailing, StoreUnreachable
from corrigenda.store.storage import conditional_writes
from corrigenda.store.storage.location import Location

from bench.local_s3 import KEY_ID, REGION, SECRET, LocalS3

from ..server.test_processes import _free_port, serve_http
from .test_object_store import _cli

# Every test here talks to a moto server, as test_object_store.py's do (conftest.py's tiers).
pytestmark = [pytest.mark.bucket, pytest.mark.xdist_group("test_conditional_writes.py")]

HONEST, LOSSY, RACING = "honest-bucket", "lossy-bucket", "racing-bucket"


@contextmanager
def _local_s3(bucket: str, **gate: Any) -> Iterator[LocalS3]:
    server = LocalS3(_free_port(), [bucket], access_key=KEY_ID, **gate).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def honest() -> Iterator[LocalS3]:
    """A bucket whose store refuses the second of two conditional writes, as S3 does."""
    with _local_s3(HONEST) as server:
        yield server


@pytest.fixture(scope="module")
def lossy() -> Iterator[LocalS3]:
    """A bucket whose store takes every write, `If-None-Match` or not."""
    with _local_s3(LOSSY, honour_conditional_writes=False) as server:
        yield server


def _options(s3: LocalS3) -> dict[str, str]:
    return {k.lower(): v for k, v in s3.env.items()}


def _objects(s3: LocalS3, bucket: str) -> list[str]:
    import boto3

    client = boto3.client(
        "s3", endpoint_url=s3.endpoint, region_name=REGION, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
    )
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


class Middleware:
    """In front of the gate's moto: `answer(environ)` gives (status, body) to answer instead, or None."""

    def __init__(self, app: Any, answer: Any) -> None:
        self.app, self.answer = app, answer

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        answered = self.answer(environ)
        if answered is None:
            return self.app(environ, start_response)
        status, body = answered
        start_response(status, [("Content-Type", "application/xml")])
        return [body]


@contextmanager
def _in_front(s3: LocalS3, answer: Any) -> Iterator[None]:
    app = s3.gate.app
    s3.gate.app = Middleware(app, answer)
    try:
        yield
    finally:
        s3.gate.app = app


def _refusal(db: str) -> str:
    return (
        f"db: the object store at {db} does not honour conditional writes (a second write of one object with "
        "If-None-Match: * was taken, not refused), so servers sharing it would silently lose each other's writes. "
        "Run one server only, with --single-writer (CORRIGENDA_SINGLE_WRITER=1), or keep the commits in DynamoDB: "
        "--db s3+ddb://BUCKET/PREFIX?ddbTableName=TABLE (docs/object-storage.md)"
    )


def _warning(db: str) -> str:
    return (
        f"corrigenda: warning: the object store at {db} does not honour conditional writes (a second write of one "
        "object with If-None-Match: * was taken, not refused); started as the only process that writes it "
        "(--single-writer): a second writer would lose commits\n"
    )


def _probes(s3: LocalS3, bucket: str) -> list[str]:
    """The check's objects still in the bucket."""
    return [key for key in _objects(s3, bucket) if conditional_writes.PROBE in key]


def test_a_server_on_a_store_that_ignores_conditional_writes_refuses_to_start_in_one_line_naming_the_fix(
    lossy: LocalS3,
) -> None:
    db = f"s3://{LOSSY}/refused"
    out = _cli("serve", "--transport", "http", "--port", str(_free_port()), "--db", db, env=lossy.env)
    assert out.returncode == 2 and out.stderr == f"corrigenda: {_refusal(db)}\n", out.stderr
    written = _cli("remember", "The deploy freeze starts Friday", "--db", db, env=lossy.env)
    assert written.returncode == 2 and written.stderr == f"corrigenda: remember: {_refusal(db)}\n", written.stderr
    assert [key for key in _objects(lossy, LOSSY) if key.startswith("refused/")] == []  # nothing left, nothing written


def test_the_check_refuses_a_store_that_ignores_conditional_writes_and_still_removes_its_object(
    lossy: LocalS3,
) -> None:
    db = f"s3://{LOSSY}/direct"
    with pytest.raises(ConditionalWritesIgnored) as refused:
        conditional_writes.check(db, _options(lossy))
    assert str(refused.value) == _refusal(db)
    assert _probes(lossy, LOSSY) == []


def test_the_check_passes_on_a_store_that_honours_conditional_writes_and_leaves_no_object_behind(
    honest: LocalS3,
) -> None:
    writes, refused = honest.gate.conditional_writes, honest.gate.refused_writes
    conditional_writes.check(f"s3://{HONEST}/team/store", _options(honest))
    assert honest.gate.conditional_writes - writes == 2 and honest.gate.refused_writes - refused == 1
    assert _probes(honest, HONEST) == []
    # and a write through the command line goes on to store its note
    out = _cli("remember", "The staging cluster lives in eu-west-1", "--db", f"s3://{HONEST}/cli", env=honest.env)
    assert out.returncode == 0 and "Remembered" in out.stdout, out.stderr
    assert out.stderr == "", out.stderr
    assert _probes(honest, HONEST) == []


def test_single_writer_starts_a_server_and_a_command_on_that_store_with_a_warning(lossy: LocalS3) -> None:
    db = f"s3://{LOSSY}/single"
    env = {**lossy.env, "CORRIGENDA_SINGLE_WRITER": "1"}
    for running in serve_http(db, env=env):  # it listens: serve_http fails if it exits first
        proc = running.proc
    assert proc.stderr is not None
    assert proc.stderr.read().decode().startswith(_warning(db))
    out = _cli("remember", "Only this process writes here", "--single-writer", "--db", db, env=lossy.env)
    assert out.returncode == 0 and "Remembered" in out.stdout, out.stderr
    assert out.stderr == _warning(db), out.stderr
    assert _probes(lossy, LOSSY) == []


def test_two_checks_at_once_each_write_their_own_object_and_neither_refuses_the_other() -> None:
    """Two servers starting together: each check's conditional writes are held 0.3 s (the gate's
    commit_delay), so the four overlap. A name shared by both would make one's first write the other's
    second: refused, and the check would fail."""
    with _local_s3(RACING, commit_delay=0.3) as s3:
        paths: list[str] = []

        def record(environ: dict[str, Any]) -> None:
            if environ["REQUEST_METHOD"] == "PUT":
                paths.append(environ["PATH_INFO"])
            return None

        start, failures = threading.Barrier(2), []

        def one() -> None:
            start.wait()
            try:
                conditional_writes.check(f"s3://{RACING}/shared", _options(s3))
            except Exception as exc:
                failures.append(exc)

        with _in_front(s3, record):
            threads = [threading.Thread(target=one) for _ in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert failures == []
        assert len(paths) == 4 and len(set(paths)) == 2, paths
        assert all(path.startswith(f"/{RACING}/shared/{conditional_writes.PROBE}") for path in paths), paths
        assert s3.gate.refused_writes == 2
        assert _objects(s3, RACING) == []  # (moto's buckets are one per process: a bucket of this test's own)


def test_wrong_credentials_fail_the_check_and_the_command_in_one_line_naming_what_to_set(honest: LocalS3) -> None:
    said = "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records."
    with pytest.raises(StoreUnreachable, match=f"cannot open s3://{HONEST}/x \\({said}\\)"):
        conditional_writes.check(f"s3://{HONEST}/x", {**_options(honest), "aws_access_key_id": "not-the-key"})
    wrong = {**honest.env, "AWS_ACCESS_KEY_ID": "not-the-key"}
    out = _cli("remember", "Never stored", "--db", f"s3://{HONEST}/wrong", env=wrong)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"corrigenda: remember: db: cannot open s3://{HONEST}/wrong ({said})"), out.stderr
    assert "AWS_ACCESS_KEY_ID" in out.stderr and "CORRIGENDA_STORAGE_OPTIONS" in out.stderr


def _signature_checked(environ: dict[str, Any], secret: str) -> tuple[str, bytes] | None:
    """403 SignatureDoesNotMatch unless the request's Signature Version 4 is the one botocore computes
    with `secret` over the headers it names, at its own time stamp (as S3 checks it)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    authorization = environ.get("HTTP_AUTHORIZATION", "")
    names = authorization.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
    headers = {name: environ["HTTP_" + name.upper().replace("-", "_")] for name in names}
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(body)
    request = AWSRequest(method=environ["REQUEST_METHOD"], url=f"http://{headers['host']}{environ['RAW_URI']}",
                         headers=headers, data=body)  # fmt: skip
    request.context["timestamp"] = headers["x-amz-date"]
    signer = S3SigV4Auth(Credentials(KEY_ID, secret), "s3", REGION)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if authorization.endswith(f"Signature={expected}"):
        return None
    return "403 Forbidden", b"<Error><Code>SignatureDoesNotMatch</Code><Message>The signature differs</Message></Error>"


def test_the_checks_requests_carry_the_signature_botocore_computes_and_a_wrong_secret_is_refused(
    honest: LocalS3,
) -> None:
    with _in_front(honest, lambda environ: _signature_checked(environ, SECRET)):
        conditional_writes.check(f"s3://{HONEST}/signed/store", {**_options(honest), "aws_session_token": "a-session"})
        with pytest.raises(StoreUnreachable, match="SignatureDoesNotMatch"):
            conditional_writes.check(f"s3://{HONEST}/signed", {**_options(honest), "aws_secret_access_key": "wrong"})
    assert _probes(honest, HONEST) == []


def test_a_store_answering_500_or_not_at_all_fails_the_check_in_one_line_naming_what_to_do(honest: LocalS3) -> None:
    internal = (
        "500 Internal Server Error",
        b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>",
    )
    with _in_front(honest, lambda environ: internal), pytest.raises(StoreFailing) as failing:
        conditional_writes.check(f"s3://{HONEST}/failing", _options(honest))
    assert str(failing.value) == (
        f"db: the object store at s3://{HONEST}/failing is failing (it answered a test write with InternalError: We "
        "encountered an internal error.). Check that it is up and healthy (its own logs) and that AWS_ENDPOINT_URL or "
        "CORRIGENDA_STORAGE_OPTIONS names it; then start again"
    )
    released = threading.Event()

    def hang(environ: dict[str, Any]) -> None:
        released.wait(10)
        return None

    started = time.monotonic()
    with _in_front(honest, hang), pytest.raises(StoreFailing) as hung:
        try:
            conditional_writes.check(f"s3://{HONEST}/hung", _options(honest), timeout=0.5)
        finally:
            released.set()
    assert time.monotonic() - started < 5
    assert f"is failing (no answer from {honest.endpoint} within 0.5 s)" in str(hung.value)
    assert "\n" not in str(hung.value)


def test_a_closed_endpoint_fails_the_check_as_unreachable(honest: LocalS3) -> None:
    closed = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(StoreUnreachable, match=f"\\(the endpoint could not be reached: {closed}, "):
        conditional_writes.check(f"s3://{HONEST}/x", {**_options(honest), "aws_endpoint_url": closed})


def test_without_credentials_to_sign_with_the_check_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    with caplog.at_level(logging.WARNING):
        conditional_writes.check("s3://some-bucket/store", {"aws_endpoint": "http://127.0.0.1:1"})
    assert "could not check that the object store of s3://some-bucket/store honours conditional writes" in caplog.text


@pytest.mark.parametrize(
    ("uri", "checked"),
    [
        ("s3://bucket/store", True),
        ("S3://bucket/store", True),
        ("s3+ddb://bucket/store?ddbTableName=commits", False),
        ("gs://bucket/store", False),
        ("az://container/store", False),
        ("/home/someone/.local/share/corrigenda", False),
    ],
)
def test_only_an_s3_store_is_checked(uri: str, checked: bool) -> None:
    assert Location.of(uri).may_ignore_conditional_writes is checked
    if not checked:  # no request at all: there is nothing to answer it
        conditional_writes.check(
            uri, {"aws_access_key_id": "k", "aws_secret_access_key": "s", "aws_endpoint": "http://127.0.0.1:1"}
        )
