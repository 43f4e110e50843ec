"""No secret in a log line, at any level.

A person opens the web view with the query parameter `token` (ui_gate.py), and uvicorn's access line
names each request's path with its query, at INFO: every token given so, `CORRIGENDA_TOKEN` among
them, would be in the log. So every handler of the process's loggers (the root's, where corrigenda's
and the SDK's records go, and uvicorn's own, which keep theirs) passes its records through `Redact`:
the value of each `token` parameter, its name percent-encoded or not (Starlette decodes names), and
the credential of an `Authorization` header, become REDACTED; so does a search's `q` (a person's words,
which may quote a note: bench/log_secrets.py found one in the access log). The rest of the line
stays, so the access log still says who asked for which page.

sse_starlette logs each chunk of a Server-Sent Events stream at DEBUG (`chunk: b'event: message...'`):
a whole JSON-RPC message of the MCP endpoint, a tool's result or a question to the person, which
quote notes (bench/test_run_logs.py found them under `--log-level DEBUG`, over HTTP, when a call's
answer is streamed). A filter on that logger itself (`StreamBodies`, put there when this module is
imported, so in every process that serves, handlers or not) keeps the line and shows each chunk's
size in its place.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from urllib.parse import unquote_plus

from .ui_gate import QUERY

REDACTED = "[redacted]"
HIDDEN = frozenset({QUERY, "q"})  # the query parameters whose values never reach a log
PARAMETER = re.compile(r"(?<=[?&])([^=&\s\"'#]+)=([^&\s\"'#]*)")
# `Authorization: Bearer x`, `'authorization': 'Bearer x'`, `(b'authorization', b'Bearer x')`
AUTHORIZATION = re.compile(r"(?i)(authorization['\"]?\s*[:=,]\s*b?['\"]?\s*[\w-]+\s+)[^\s'\",)]+")


def redact(text: str) -> str:
    """`text` with the value of each `token` or `q` query parameter and of each Authorization credential
    hidden."""
    text = PARAMETER.sub(lambda m: f"{m[1]}={REDACTED}" if unquote_plus(m[1]).lower() in HIDDEN else m[0], text)
    return AUTHORIZATION.sub(rf"\1{REDACTED}", text)


def _redacted(value: object) -> object:
    """`value` as it was if it shows no secret (numbers always: `%d` formats them), else its text redacted."""
    if value is None or isinstance(value, (int, float)):
        return value
    text = str(value)
    clean = redact(text)
    return value if clean == text else clean


class Redact(logging.Filter):
    """Hides secrets in a record's message and in each of its arguments, in place: uvicorn's access
    formatter reads the arguments one by one, so they keep their places."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: _redacted(v) for k, v in record.args.items()}
        return True


REDACT = Redact()


class StreamBodies(logging.Filter):
    """Shows the size of each text or bytes argument of an sse_starlette record instead of its content
    (`chunk: %s`, `ping: %s`), once: a record it has seen is marked."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "corrigenda_bodies_hidden", False) or not isinstance(record.args, tuple):
            return True
        record.args = tuple(
            f"<{len(a)} {'bytes' if isinstance(a, bytes | bytearray) else 'characters'}>"
            if isinstance(a, str | bytes | bytearray)
            else a
            for a in record.args
        )
        record.corrigenda_bodies_hidden = True
        return True


STREAM_BODIES = StreamBodies()
STREAM_LOGGERS = ("sse_starlette.sse",)  # the module's logger: `logging.getLogger(__name__)`
for _name in STREAM_LOGGERS:
    logging.getLogger(_name).addFilter(STREAM_BODIES)  # no-op if it is there


def redact_every_log() -> None:
    """Put REDACT on every handler the process's loggers hold now. Called once logging is set up, and
    again after each uvicorn.Config, which sets up uvicorn's handlers anew (connections.py)."""
    loggers = [
        logging.getLogger(),
        *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    for logger in loggers:
        for handler in logger.handlers:
            handler.addFilter(REDACT)  # no-op if it is there
