"""MCP over stdin and stdout, one JSON-RPC message per line, every request answered.

The SDK's stdio transport reads a line of any length into memory (one 200 MB line took 1.1 GB)
and drops a line it cannot parse without a word, so the client waits out its timeout: a lone
surrogate escape such as "\\ud800", which Python's json accepts and pydantic's parser refuses, was
enough. This transport caps a message at MAX_MESSAGE_BYTES and answers what it cannot read with a
JSON-RPC error that says why, with the request's id whenever it can be found.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .sdk import lowlevel

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
"""4 MiB, the SDK's cap on an HTTP request body: a note is at most 20,000 characters, so no valid
call comes near it, and a client cannot make the server hold more than this per line."""

_DISCARD_CHUNK = 1 << 20

# The id of a request whose line is too long to parse: found only where it is certainly the
# top-level id of a request, at the start of the object and before "method" (the order the SDK's
# clients write), so that an error never answers some other request.
_REQUEST_HEAD = re.compile(
    r'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,\s*"method"\s*:'
)


@dataclass
class _Oversized:
    head: bytes
    size: int


def _read_line(stdin: BinaryIO) -> bytes | _Oversized | None:
    """The next line, or what stood at the start of a line over the cap (the rest is read and
    dropped, never held), or None at the end of input."""
    line = stdin.readline(MAX_MESSAGE_BYTES + 1)
    if not line:
        return None
    if len(line) <= MAX_MESSAGE_BYTES or line.endswith(b"\n"):
        return line
    head, size = line[:4096], len(line)
    while not line.endswith(b"\n"):
        line = stdin.readline(_DISCARD_CHUNK)
        if not line:
            break
        size += len(line)
    return _Oversized(head, size)


def _error(id: types.RequestId | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=id, error=types.ErrorData(code=code, message=message)))


def _leading_id(text: str) -> types.RequestId | None:
    match = _REQUEST_HEAD.match(text)
    if match is None:
        return None
    value = json.loads(match.group(1))
    return value if isinstance(value, int | str) else None


def _lone_surrogate(value: Any, path: str) -> str | None:
    """Where in a parsed message a string holds half a surrogate pair, which is not Unicode text."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, path) or _lone_surrogate(item, f"{path}.{key}" if path else key)
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _lone_surrogate(item, f"{path}[{i}]")
            if found:
                return found
    return None


def refusal(line: bytes) -> SessionMessage | None:
    """The answer to a line the protocol layer cannot read; None where none is due (a notification
    or a response from the client, which are never answered)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        id = _leading_id(line.decode("utf-8", errors="replace"))
        return _error(id, types.PARSE_ERROR, f"Parse error: the message is not UTF-8 (byte {exc.start})")
    try:
        message = json.loads(text)
    except ValueError as exc:
        return _error(_leading_id(text), types.PARSE_ERROR, f"Parse error: not JSON ({exc})")
    if not isinstance(message, dict):
        return _error(None, types.INVALID_REQUEST, "Invalid Request: a message is one JSON object (no batches)")
    id = message.get("id")
    if "method" not in message or not isinstance(id, int | str) or isinstance(id, bool):
        log.warning("dropped an unreadable message that is not a request (keys: %s)", sorted(message)[:10])
        return None
    where = _lone_surrogate(message, "")
    if where is not None:
        code = types.INVALID_PARAMS if where.startswith("params") else types.INVALID_REQUEST
        return _error(
            id, code, f"{where} contains a lone surrogate escape (half of a UTF-16 pair), which is not Unicode "
            "text: send the character itself, or both halves of its pair",
        )  # fmt: skip
    return _error(
        id, types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request (jsonrpc, id, method, params)"
    )


async def _read(
    stdin: BinaryIO,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
) -> None:
    async with messages, answers:
        while True:
            # abandon_on_cancel: a thread blocked on stdin must not keep the server from exiting.
            line = await anyio.to_thread.run_sync(_read_line, stdin, abandon_on_cancel=True)
            if line is None:
                return
            if isinstance(line, _Oversized):
                log.error("refused a message of %d bytes, over the %d-byte limit", line.size, MAX_MESSAGE_BYTES)
                id = _leading_id(line.head.decode("utf-8", errors="replace"))
                await answers.send(_error(id, types.INVALID_REQUEST, (
                    f"Invalid Request: the message is {line.size} bytes, over the limit of {MAX_MESSAGE_BYTES} bytes "
                    f"({MAX_MESSAGE_BYTES // (1 << 20)} MiB); it was not read"
                )))  # fmt: skip
                continue
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValidationError:
                answer = refusal(line.strip())
                if answer is not None:
                    await answers.send(answer)
                continue
            await messages.send(SessionMessage(message))


def _write_line(stdout: BinaryIO, data: bytes) -> None:
    stdout.write(data)
    stdout.flush()


def _encode(item: SessionMessage) -> bytes:
    return item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


async def _write(stdout: BinaryIO, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
    async with outgoing:
        async for item in outgoing:
            try:
                data = _encode(item)
            except ValueError:  # one answer that cannot be encoded must not end the writer, and all after it
                log.exception("could not encode an outgoing message")
                id = getattr(item.message, "id", None)
                if id is None:
                    continue
                data = _encode(_error(id, types.INTERNAL_ERROR, "the answer could not be encoded; see the server log"))
            await anyio.to_thread.run_sync(_write_line, stdout, data)


@asynccontextmanager
async def stdio_streams(
    stdin: BinaryIO, stdout: BinaryIO
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """The server's read and write streams over two byte streams."""
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read, stdin, read_send, write_send.clone())
        tasks.start_soon(_write, stdout, write_receive)
        try:
            yield read_receive, write_send
        finally:
            write_send.close()
            tasks.cancel_scope.cancel()  # the reader may still wait on stdin


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve one client on this process's stdin and stdout until stdin closes."""
    sys.stdout.flush()
    wire = os.dup(1)
    # fd 1 now goes to stderr, so a stray print (ours or a library's) cannot corrupt the protocol.
    os.dup2(2, 1)
    try:
        with os.fdopen(wire, "wb", closefd=False) as stdout:
            await serve_streams(server, sys.stdin.buffer, stdout)
    finally:
        os.dup2(wire, 1)
        os.close(wire)


async def serve_streams(server: MCPServer[Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve one client whose messages come on `stdin` and go to `stdout` (this process's, or a socket's
    from the shared engine, engine.py) until `stdin` ends."""
    async with stdio_streams(stdin, stdout) as (read, write):
        runner = lowlevel(server)  # MCPServer runs stdio only on the SDK's own streams (sdk.py)
        await runner.run(read, write, runner.create_initialization_options())
