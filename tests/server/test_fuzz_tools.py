"""Every tool's input schema, fuzzed through the real protocol (in memory): arguments valid per the
schema and arguments that are not. The session never breaks, every refusal is one line that names
a field or an id, and a refused call leaves the store exactly as it was."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anyio.from_thread
import pytest
from corrigenda.server.app import build_server
from corrigenda.server.config import Settings
from corrigenda.store import Memory, SentenceTransformerEmbedder
from corrigenda.store.tables import Tables
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator
from mcp import Client
from mcp_types import Tool

ID = re.compile(r"\b[ne]_[0-9a-z]{26}\b")
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)
SEEDS = [
    "The service listens on port 8080",
    "Deploys happen on Tuesdays and Thursdays",
    "The staging database runs PostgreSQL 16",
]


def arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects valid per a tool's input schema: hypothesis-jsonschema draws each field; the object is
    assembled here because hypothesis-jsonschema 0.23.1's own object strategy calls `many.more()`, a
    hypothesis internal that current hypothesis no longer has (AttributeError on the first draw)."""
    required = set(schema.get("required", []))
    fields = {name: from_schema(field) for name, field in schema["properties"].items()}
    return st.fixed_dictionaries(
        {k: v for k, v in fields.items() if k in required},
        optional={k: v for k, v in fields.items() if k not in required},
    )


class Fuzzed:
    """A client session on a blocking portal, so that hypothesis (synchronous) can drive it."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Client, db: str) -> None:
        self.portal, self.client, self.db = portal, client, db
        self.tools: dict[str, Tool] = {t.name: t for t in portal.call(client.list_tools).tools}
        self.valid = {name: arguments(tool.input_schema) for name, tool in self.tools.items()}
        self.note_ids: list[str] = []
        self.event_ids: list[str] = []
        for text in SEEDS:
            self.seed(text)
        first = self.call(
            "correct", {"note_id": self.note_ids[0], "text": "The service listens on 9090", "reason": "moved"}
        )
        self.note_ids.append(first.structured_content["note"]["id"])  # type: ignore[index]
        self.event_ids.append(first.structured_content["event"]["id"])  # type: ignore[index]

    def seed(self, text: str) -> None:
        result = self.call("remember", {"text": text})
        assert not result.is_error
        self.note_ids.append(result.structured_content["note"]["id"])  # type: ignore[index]

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return self.portal.call(self.client.call_tool, tool, arguments)

    def snapshot(self) -> Any:
        """What a refused call must not change: row counts, and what recall delivers."""
        recalled = self.call("recall_chains", {"query": "service port deploy database", "budget_tokens": 100_000})
        assert not recalled.is_error
        return Tables(self.db).search.count(), recalled.structured_content["chains"]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder) -> Iterator[Fuzzed]:
    db = str(tmp_path_factory.mktemp("fuzz") / "store")
    server = build_server(Settings(db=db), lambda s: Memory(s.db, embedder))
    with anyio.from_thread.start_blocking_portal() as portal:
        client = portal.wrap_async_context_manager(Client(server, raise_exceptions=True))
        with client as session:
            yield Fuzzed(portal, session, db)


def with_real_ids(data: st.DataObject, fuzzed: Fuzzed, arguments: dict[str, Any]) -> dict[str, Any]:
    """Mostly, an id (alone or in a list) is one the store has, so the call gets past the id checks."""

    def real(field: str, value: Any) -> Any:
        if isinstance(value, list):
            return [real(field, item) for item in value]
        if not (isinstance(value, str) and ID.fullmatch(value)):
            return value
        if not data.draw(st.sampled_from([True, True, True, False]), label=f"real {field}"):
            return value
        pool = fuzzed.note_ids + (fuzzed.event_ids if field == "target_id" else [])
        return data.draw(st.sampled_from(pool), label=field)

    return {field: real(field, value) for field, value in arguments.items()}


def broken(data: st.DataObject, tool: Tool, valid: dict[str, Any]) -> dict[str, Any]:
    """Arguments made wrong in one way: a required field dropped, a field of another JSON type, or a
    name the schema does not have."""
    properties: dict[str, Any] = tool.input_schema["properties"]
    required: list[str] = tool.input_schema.get("required", [])
    ways = ["drop"] * bool(required) + ["retype"] * bool(properties) + ["unknown"]  # `scopes` takes nothing
    how = data.draw(st.sampled_from(ways))
    arguments = dict(valid)
    if how == "drop":
        arguments.pop(data.draw(st.sampled_from(required), label="dropped"), None)
    elif how == "retype":
        arguments[data.draw(st.sampled_from(sorted(properties)), label="retyped")] = data.draw(ANY_JSON)
    else:
        arguments[data.draw(st.text(min_size=1, max_size=12).filter(lambda k: k not in properties))] = data.draw(
            ANY_JSON
        )
    return arguments


def check(fuzzed: Fuzzed, tool: Tool, arguments: dict[str, Any]) -> None:
    before = fuzzed.snapshot()
    result = fuzzed.call(tool.name, arguments)
    if not result.is_error:
        assert result.structured_content is not None, tool.name
        if tool.name == "forget":  # keep real ids around for the calls that follow
            fuzzed.note_ids.remove(arguments["note_id"])
            fuzzed.seed(SEEDS[len(fuzzed.note_ids) % len(SEEDS)])
        return
    text: str = result.content[0].text
    assert "\n" not in text and "errors.pydantic.dev" not in text, text
    assert "failed inside the store" not in text, (tool.name, arguments, text)
    fields = tool.input_schema["properties"]
    assert any(field in text for field in fields) or ID.search(text), (tool.name, arguments, text)
    assert fuzzed.snapshot() == before, (tool.name, arguments, text)


TOOLS = [
    "remember", "correct", "revoke", "reinstate", "recall_chains", "why_excluded", "history", "link", "forget",
    "scopes", "list_notes", "changes", "declare_subject", "confirm",
]  # fmt: skip
FUZZ = settings(
    max_examples=10, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip


@pytest.mark.parametrize("name", TOOLS)
@pytest.mark.parametrize("mode", ["valid per the schema", "broken in one way"])
@FUZZ
@given(data=st.data())
def test_fuzzed_arguments_are_served_or_refused_by_name(
    fuzzed: Fuzzed, name: str, mode: str, data: st.DataObject
) -> None:
    tool = fuzzed.tools[name]
    drawn = data.draw(fuzzed.valid[name], label="arguments")
    assert Draft202012Validator(tool.input_schema).is_valid(drawn)
    arguments = with_real_ids(data, fuzzed, drawn)
    check(fuzzed, tool, arguments if mode == "valid per the schema" else broken(data, tool, arguments))


def test_every_tool_is_fuzzed(fuzzed: Fuzzed) -> None:
    assert set(TOOLS) == set(fuzzed.tools)
    assert fuzzed.portal.call(fuzzed.client.list_tools).tools  # the session survived it all
