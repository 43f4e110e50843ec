"""Whether a bucket's object store honours conditional writes, checked once at start.

Lance commits a version by writing its manifest with `If-None-Match: *`, and relies on the store
refusing the second of two writers with 412 (retry.py tries the loser again). An S3-compatible store
that ignores the header takes both: one commit silently replaces the other, and every write it held
is lost (on a gate that drops the header, 7-14 of about 39 acknowledged writes from three servers;
docs/object-storage.md). So before a process writes such a store, `check` writes a probe object under
the store's prefix twice with the header: the second write must be refused with 412. The object's
name is new for each check (two servers starting at once each write their own), and it is removed
whatever the answers were.

Only `s3://` is checked (`Location.may_ignore_conditional_writes`). The request is made here, with
the standard library and a Signature Version 4 of its own: neither LanceDB, Lance nor pyarrow's S3
filesystem can send `If-None-Match`, and an AWS SDK is no dependency of corrigenda. The credentials,
region and endpoint are read as Lance reads them: `storage_options` first, then the `AWS_*`
variables. Credentials that Lance finds elsewhere (an instance role, a profile) are not read here:
the check is then skipped, with a warning.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from ..errors import ConditionalWritesIgnored, StoreFailing, StoreUnreachable
from .location import Location

log = logging.getLogger(__name__)

# Seconds for each of the check's requests, connecting included. An object store answers a write of a
# few bytes in milliseconds; a gateway that has not answered by then is hung (Lance would wait 30 s a
# request and retry for minutes).
TIMEOUT = 10.0
PROBE = ".corrigenda-probe-"  # the probe object's name, under the store's prefix, before its random part
_BODY = b"corrigenda checks that this object store honours If-None-Match; it removes this object at once\n"

# object_store's names for each setting, as Lance takes them (storage options, lowercase; and AWS_*)
_KEY_ID = ("aws_access_key_id", "access_key_id")
_SECRET = ("aws_secret_access_key", "secret_access_key")
_TOKEN = ("aws_session_token", "aws_token", "session_token", "token")
_REGION = ("aws_region", "region", "aws_default_region", "default_region")
_ENDPOINT = ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
_VIRTUAL_HOSTED = ("aws_virtual_hosted_style_request", "virtual_hosted_style_request")


@dataclass(frozen=True)
class _Bucket:
    """Where and as whom the check writes: what Lance would use for the same store."""

    name: str
    prefix: str
    given_endpoint: str | None  # scheme://host[:port]; None: AWS's, in the region
    region: str
    key_id: str
    secret: str
    token: str | None
    virtual_hosted: bool

    @classmethod
    def of(cls, uri: str, storage_options: Mapping[str, str] | None, env: Mapping[str, str]) -> _Bucket | None:
        """None when no credentials are given in the options or the variables."""
        given = [{k.lower(): v for k, v in (storage_options or {}).items()}]
        given.append({k.lower(): v for k, v in env.items() if k.startswith("AWS_")})

        def setting(names: tuple[str, ...]) -> str | None:
            return next((found[name] for found in given for name in names if found.get(name)), None)

        key_id, secret = setting(_KEY_ID), setting(_SECRET)
        if not key_id or not secret:
            return None
        parts = urlsplit(uri)
        return cls(
            name=parts.netloc, prefix=parts.path.strip("/"), given_endpoint=setting(_ENDPOINT),
            region=setting(_REGION) or "us-east-1", key_id=key_id, secret=secret, token=setting(_TOKEN),
            virtual_hosted=(setting(_VIRTUAL_HOSTED) or "").lower() == "true",
        )  # fmt: skip

    @property
    def endpoint(self) -> str:
        return (self.given_endpoint or f"https://s3.{self.region}.amazonaws.com").rstrip("/")

    def probe_key(self) -> str:
        name = PROBE + uuid.uuid4().hex
        return f"{self.prefix}/{name}" if self.prefix else name


@dataclass(frozen=True)
class _Answer:
    status: int
    said: str  # the store's error code and message, or the HTTP status
    region: str | None  # the bucket's region, if the store named another one


def check(uri: str, storage_options: Mapping[str, str] | None = None, timeout: float = TIMEOUT) -> None:
    """Return if the store at `uri` honours conditional writes (or need not be checked: module
    docstring). Raise ConditionalWritesIgnored if it does not; StoreUnreachable if it refuses the
    request (no bucket, wrong credentials) or cannot be reached; StoreFailing if it answers with an
    error of its own (5xx) or not at all within `timeout` seconds."""
    if not Location.of(uri).may_ignore_conditional_writes:
        return
    bucket = _Bucket.of(uri, storage_options, os.environ)
    if bucket is None:
        log.warning(
            "could not check that the object store of %s honours conditional writes: no credentials in "
            "CORRIGENDA_STORAGE_OPTIONS or the AWS_* variables (an instance role or a profile is not read "
            "by this check). If it does not honour them, servers sharing it lose commits",
            uri,
        )
        return
    key = bucket.probe_key()
    first = _put(uri, bucket, key, timeout)
    if first.region and first.region != bucket.region:  # AWS names the bucket's region: sign for it
        bucket = replace(bucket, region=first.region)
        first = _put(uri, bucket, key, timeout)
    if first.status == 501 or first.said.startswith("NotImplemented"):
        raise ConditionalWritesIgnored(uri, f"it answered {first.said} to a write with If-None-Match: *")
    _refused_unless(first, 200, uri)
    try:  # the object is there: it goes, whatever the second write meets
        second = _put(uri, bucket, key, timeout)
        if 200 <= second.status < 300:
            raise ConditionalWritesIgnored(
                uri, "a second write of one object with If-None-Match: * was taken, not refused"
            )
        _refused_unless(second, 412, uri)
    finally:
        _remove(uri, bucket, key, timeout)


def _put(uri: str, bucket: _Bucket, key: str, timeout: float) -> _Answer:
    return _request(uri, bucket, "PUT", key, _BODY, {"If-None-Match": "*"}, timeout)


def _remove(uri: str, bucket: _Bucket, key: str, timeout: float) -> None:
    """Remove the probe object; a failure leaves it behind, which harms nothing: say so and go on."""
    try:
        answer = _request(uri, bucket, "DELETE", key, b"", {}, timeout)
    except (StoreUnreachable, StoreFailing) as exc:
        log.warning("could not remove the probe object %s: %s", key, exc)
        return
    if answer.status >= 300:
        log.warning("could not remove the probe object %s (%s)", key, answer.said)


def _refused_unless(answer: _Answer, expected: int, uri: str) -> None:
    if answer.status == expected:
        return
    if answer.status >= 500:
        raise StoreFailing(uri, f"it answered a test write with {answer.said}")
    raise StoreUnreachable(uri, answer.said)


def _request(
    uri: str, bucket: _Bucket, method: str, key: str, body: bytes, headers: dict[str, str], timeout: float
) -> _Answer:
    scheme, netloc = bucket.endpoint.split("://", 1) if "://" in bucket.endpoint else ("https", bucket.endpoint)
    netloc = netloc.split("/", 1)[0]
    host, path = (f"{bucket.name}.{netloc}", "/") if bucket.virtual_hosted else (netloc, f"/{bucket.name}/")
    path += quote(key, safe="/-_.~")
    signed = _signed(method, host, path, body, bucket, datetime.now(UTC))
    connection = (http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection)(
        host, timeout=timeout
    )
    try:
        connection.request(method, path, body=body, headers={**headers, **signed})
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
    except TimeoutError:
        raise StoreFailing(uri, f"no answer from {bucket.endpoint} within {timeout:g} s") from None
    except http.client.HTTPException as exc:  # an answer that is no HTTP
        raise StoreFailing(uri, f"no valid answer from {bucket.endpoint}: {type(exc).__name__}") from None
    except OSError as exc:  # refused, no such host, TLS
        raise StoreUnreachable(uri, f"the endpoint could not be reached: {bucket.endpoint}, {exc}") from None
    finally:
        connection.close()
    region = response.getheader("x-amz-bucket-region") or _element("Region", text)
    return _Answer(response.status, _said(response.status, response.reason, text), region)


def _element(name: str, body: str) -> str | None:
    found = re.search(f"<{name}>([^<]*)</{name}>", body)
    return found[1] if found else None


def _said(status: int, reason: str, body: str) -> str:
    """What the store said: its error code and message (S3's XML error), else the HTTP status."""
    code, message = _element("Code", body), _element("Message", body)
    if code:
        return f"{code}: {message}" if message else code
    return f"HTTP {status} {reason}".strip()


def _signed(method: str, host: str, path: str, body: bytes, bucket: _Bucket, now: datetime) -> dict[str, str]:
    """The headers of an AWS Signature Version 4 for the request. `If-None-Match` is left unsigned: a
    proxy that drops it then makes the store take the write, as the store would, rather than refuse
    the signature."""
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    if bucket.token:
        headers["x-amz-security-token"] = bucket.token
    names = ";".join(sorted(headers))
    canonical = "\n".join(
        [method, path, "", *(f"{name}:{headers[name]}" for name in sorted(headers)), "", names, payload]
    )
    scope = f"{day}/{bucket.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signing = f"AWS4{bucket.secret}".encode()
    for part in (day, bucket.region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={bucket.key_id}/{scope}, SignedHeaders={names}, Signature={signature}"
    )
    return headers
