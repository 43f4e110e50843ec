"""Tool arguments the server refuses before the store sees them: each refusal is one line that names
the field and says what would be accepted."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from ..conftest import call, call_error

pytestmark = pytest.mark.anyio


def assert_one_line_naming(error: str, field: str, *words: str) -> None:
    assert "\n" not in error, error
    assert "errors.pydantic.dev" not in error and "http" not in error, error
    assert field in error, error
    for word in words:
        assert word in error, error


async def stored(client: Client) -> Any:
    """What a refused call must leave as it was: every chain a broad recall returns."""
    return (await call(client, "recall_chains", query="deploy window release date", budget_tokens=100_000))["chains"]


@pytest.mark.parametrize(
    ("tool", "field", "value"),
    [
        ("remember", "valid_until", "9999-12-31T23:59:59-05:00"),  # year 10000 in UTC
        ("remember", "valid_from", "0001-01-01T00:00:00+01:00"),  # year 0 in UTC
        ("remember", "valid_until", "9999-12-31T23:59:59.999999Z"),  # rounds to year 10000 on disk
        ("correct", "valid_until", "9999-12-31T23:59:59-05:00"),
        ("recall_chains", "as_of", "9999-12-31T23:59:59-05:00"),
        ("why_excluded", "as_of", "0001-01-01T00:00:00+01:00"),
        ("history", "as_of", "9999-12-31T23:59:59-05:00"),
    ],
)
async def test_a_date_outside_the_supported_range_is_refused_naming_the_field(
    client: Client, tool: str, field: str, value: str
) -> None:
    note = (await call(client, "remember", text="The deploy window is Tuesday"))["note"]
    before = await stored(client)
    required: dict[str, dict[str, Any]] = {
        "remember": {"text": "The release date is in the far future"},
        "correct": {"note_id": note["id"], "text": "The deploy window is Thursday", "reason": "moved"},
        "recall_chains": {"query": "deploy window"},
        "why_excluded": {"note_id": note["id"]},
        "history": {"note_id": note["id"]},
    }
    error = await call_error(client, tool, **required[tool], **{field: value})
    assert_one_line_naming(error, field, value, "outside the supported range")
    assert await stored(client) == before  # nothing was written, and the store still reads


async def test_the_edges_of_the_supported_range_are_stored_and_read_back(client: Client) -> None:
    note = (
        await call(
            client,
            "remember",
            text="The release date is fixed for good",
            valid_from="0001-01-01T00:00:00Z",
            valid_until="9999-12-31T23:59:59Z",
        )
    )["note"]
    assert note["valid_until"].startswith("9999-12-31T23:59:59")
    assert note["valid_from"].startswith("0001-01-01T00:00:00")
    chains = (await call(client, "recall_chains", query="release date", as_of="9999-12-30T18:00:00-05:00"))["chains"]
    assert chains[0]["heads"][0]["id"] == note["id"]


@pytest.mark.parametrize("value", [1, 1.5, True, "1", "1700000000", ["2026-11-01"], "tomorrow"])
async def test_a_date_must_be_an_iso_8601_string(client: Client, value: Any) -> None:
    before = await stored(client)
    error = await call_error(client, "remember", text="The deploy window is Friday", valid_until=value)
    assert_one_line_naming(error, "valid_until", "ISO 8601")
    error = await call_error(client, "recall_chains", query="deploy window", as_of=value)
    assert_one_line_naming(error, "as_of", "ISO 8601")
    assert await stored(client) == before


async def test_iso_8601_dates_with_offsets_and_without_are_accepted(client: Client) -> None:
    for value in ("2030-01-01T00:00:00Z", "2030-01-01T09:30:00+05:30", "2030-01-01", "2030-01-01T00:00:00"):
        note = (await call(client, "remember", text=f"The freeze ends {value}", valid_until=value))["note"]
        assert note["valid_until"].startswith("2030-01-01") or note["valid_until"].startswith("2029-12-31")


async def test_schema_errors_read_as_one_line_naming_each_field(client: Client) -> None:
    error = await call_error(client, "remember")
    assert_one_line_naming(error, "text", "required")
    error = await call_error(client, "remember", text=5, tags="a")
    assert_one_line_naming(error, "text", "tags", "string", "list")
    error = await call_error(client, "history", note_id="zz")
    assert_one_line_naming(error, "note_id", "'zz' is not a note id this server issued")
    error = await call_error(client, "reinstate", target_id="n_" + "u" * 26, reason="typo")  # 'u' is not in ids
    assert_one_line_naming(error, "target_id", "is not a note or event id this server issued")
    error = await call_error(client, "link", src_id="n_" + "0" * 26, dst_id="n_" + "1" * 26, kind="likes")
    assert_one_line_naming(error, "kind", "depends_on")
