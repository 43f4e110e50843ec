"""What clients show besides tools: resources, prompts, logging/setLevel, and a tools/list kept small."""

from __future__ import annotations

import base64
import json
import logging
import re
import struct
import zlib
from pathlib import Path
from urllib.parse import quote

import httpx2
import jsonschema
import pytest
from corrigenda.server.config import Settings
from corrigenda.server.grants import digest
from corrigenda.store import Draft, Memory
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Icon

from ..conftest import call, call_error
from .test_http_security import serving
from .test_processes import _free_port

pytestmark = pytest.mark.anyio

TOOLS_LIST_LIMIT = 25_000  # bytes, icons aside; the full schemas made it 72 KB
ICON_LIMIT = 1_100  # bytes a tool's icons (PNG and SVG) add to tools/list (a client shows them; no model reads them)


async def test_tools_list_is_small_and_every_result_matches_its_outline(client: Client) -> None:
    tools = (await client.list_tools()).tools
    listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    icons = [len(json.dumps({"icons": t.pop("icons")})) for t in listed]
    size = len(json.dumps({"tools": listed}))
    assert size < TOOLS_LIST_LIMIT, size
    assert max(icons) < ICON_LIMIT, icons
    schemas = {t.name: t.output_schema for t in tools}
    old = await call(client, "remember", text="The nightly backup runs at 02:00", scope="ops")
    results = {
        "remember": old,
        "correct": await call(
            client, "correct", note_id=old["note"]["id"], text="Backups run at 03:00", reason="moved"
        ),
        "recall_chains": await call(client, "recall_chains", query="when do backups run?", scope="ops"),
        "history": await call(client, "history", note_id=old["note"]["id"]),
        "scopes": await call(client, "scopes"),
    }
    for name, result in results.items():
        jsonschema.validate(result, schemas[name])  # type: ignore[arg-type]
    assert schemas["recall_chains"]["properties"]["chains"] == {"type": "array", "items": {"type": "object"}}  # type: ignore[index]


async def test_resources_read_a_note_its_chain_and_a_scopes_recent_notes(client: Client) -> None:
    old = (await call(client, "remember", text="The wifi password is on the fridge", scope="My Project"))["note"]
    new = await call(client, "correct", note_id=old["id"], text="The wifi password is in 1Password", reason="moved")
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates == {"corrigenda://notes/{note_id}", "corrigenda://chains/{note_id}", "corrigenda://scopes/{scope}/recent"}  # fmt: skip

    async def text(uri: str) -> str:
        contents = (await client.read_resource(uri)).contents
        return contents[0].text  # type: ignore[union-attr]

    note = await text(f"corrigenda://notes/{old['id']}")
    assert "superseded" in note and "moved" in note and new["note"]["id"] in note
    chain = await text(f"corrigenda://chains/{old['id']}")
    assert chain.splitlines()[1].startswith(f"    NOW {new['note']['id']}") and "HISTORY" in chain
    recent = await text(f"corrigenda://scopes/{quote('My Project')}/recent")
    assert recent.index(new["note"]["id"]) < recent.index(old["id"])  # newest first
    assert recent.startswith("Scope My Project: 1 active, 1 superseded.")  # the counts by state head the page
    with pytest.raises(MCPError, match="n_00000000000000000000000000"):
        await client.read_resource("corrigenda://notes/n_00000000000000000000000000")


async def test_prompts_teach_recall_first_and_how_to_record_a_correction(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == {"recall_before_answering", "record_correction"}
    assert all(p.title and p.description for p in prompts.values())
    recall = await client.get_prompt("recall_before_answering", {"question": "Which port does the API use?"})
    said = recall.messages[0].content.text  # type: ignore[union-attr]
    assert "`recall_chains`" in said and "Which port does the API use?" in said and "'default'" in said
    fix = await client.get_prompt(
        "record_correction", {"wrong": "port 8080", "right": "port 9090", "reason": "moved", "scope": "api"}
    )
    said = fix.messages[0].content.text  # type: ignore[union-attr]
    assert "`correct`" in said and "port 9090" in said and "'api'" in said


READER = "reader-token-for-tests-0123456789ab"


async def test_a_clients_log_level_leaves_the_servers_own_logs_and_the_audit_log_alone(
    db: str, memory: Memory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`logging/setLevel` is answered and declared, but the level is the client's: it would filter the log
    notifications sent to that client (this server sends none), never what the server logs. A credential
    that may only read sets `emergency`, and its reads are still in the audit log."""
    grants = tmp_path / "grants.toml"
    grants.write_text(f'[[credentials]]\nname = "reader"\ntoken_sha256 = "{digest(READER)}"\nread = ["team-*"]\n')
    caplog.set_level(logging.INFO)  # as `serve --log-level INFO`: the root at INFO, corrigenda's loggers unset
    settings = Settings(db=db, transport="http", port=_free_port(), grants=str(grants))
    memory.remember(Draft(text="The team deploys on Tuesdays"), scope="team-ops")  # a store to read
    try:
        with serving(settings, memory) as url:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {READER}"}, trust_env=False, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
            ):
                assert client.server_capabilities is not None and client.server_capabilities.logging is not None
                await client.set_logging_level("emergency")  # an error would raise
                await call(client, "list_notes", scope="team-ops")
        audit = [r.getMessage() for r in caplog.records if r.name == "corrigenda.audit"]
        assert "reader read team-ops (list_notes)" in audit, audit
        assert logging.getLogger("corrigenda").level == logging.NOTSET
    finally:
        logging.getLogger("corrigenda").setLevel(logging.NOTSET)  # what the old handler set, for the next tests


async def test_each_tool_call_is_logged_with_how_it_ended_and_its_time(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """At INFO, one line a call: the tool, how it ended, its milliseconds (README, *Command line*)."""
    caplog.set_level(logging.INFO, logger="corrigenda.server.app")
    await call(client, "remember", text="The deploy window opens at 09:00")
    await call_error(client, "history", note_id="n_00000000000000000000000000")
    await call_error(client, "remember", text=["not", "a", "string"])
    lines = [r.getMessage() for r in caplog.records if r.name == "corrigenda.server.app"]
    assert [re.sub(r" in \d+ ms$", " in N ms", line) for line in lines if re.search(r" in \d+ ms$", line)] == [
        "remember answered in N ms",
        "history answered with an error in N ms",
        "remember refused its arguments in N ms",
    ]


def png_size(data: bytes) -> tuple[int, int]:
    """The width and height of a whole PNG: its signature, its IHDR first, every chunk's CRC right, and
    its image data inflating to as many bytes as the header says (a filter byte a row, no interlace)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        assert struct.unpack(">I", data[at + 8 + length : at + 12 + length]) == (zlib.crc32(kind + body),), kind
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND", [k for k, _ in chunks]
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert interlace == 0 and len(pixels) == height * (1 + -(-width * channels * depth // 8))
    return width, height


async def test_the_server_its_tools_resources_and_prompts_carry_an_icon_a_client_can_show(client: Client) -> None:
    """The spec's `icons`: on the server's implementation info, each tool, resource, resource template and
    prompt; `data:` URIs, so that a client shows them with no network. A PNG first, which every client
    that shows icons must support (the spec's icons, 2025-11-25), of the size it states; then the SVG."""
    info = client.server_info
    assert info is not None and info.icons and info.title == "corrigenda" and info.description
    icons: list[list[Icon] | None] = [info.icons]
    icons += [t.icons for t in (await client.list_tools()).tools]
    icons += [r.icons for r in (await client.list_resources()).resources]
    icons += [t.icons for t in (await client.list_resource_templates()).resource_templates]
    icons += [p.icons for p in (await client.list_prompts()).prompts]
    assert all(icons), icons
    assert len({json.dumps([i.model_dump() for i in listed or []]) for listed in icons}) == 1  # one set everywhere
    png, svg = info.icons
    assert png.src.startswith("data:image/png;base64,") and png.mime_type == "image/png"
    width, height = png_size(base64.b64decode(png.src.split(",", 1)[1], validate=True))
    assert png.sizes == [f"{width}x{height}"] and width == height >= 64, (png.sizes, width, height)
    assert svg.src.startswith("data:image/svg+xml;base64,") and svg.mime_type == "image/svg+xml"
    text = base64.b64decode(svg.src.split(",", 1)[1]).decode()
    assert text.startswith("<svg") and "<script" not in text and svg.sizes == ["any"]


async def test_listed_resources_have_titles_and_the_apps_page_its_size(client: Client) -> None:
    resources = (await client.list_resources()).resources
    templates = (await client.list_resource_templates()).resource_templates
    assert all(r.title for r in [*resources, *templates])
    for resource in resources:
        (content,) = (await client.read_resource(resource.uri)).contents
        assert resource.size == len(content.text.encode()), resource.uri  # type: ignore[union-attr]


async def test_recall_and_history_link_the_notes_and_chains_they_show(client: Client) -> None:
    """A `resource_link` per chain and per current note, which a client opens with `resources/read`."""
    old = (await call(client, "remember", text="The nightly backup runs at 02:00", scope="ops"))["note"]
    new = await call(client, "correct", note_id=old["id"], text="The nightly backup runs at 03:00", reason="moved")
    result = await client.call_tool("recall_chains", {"query": "when does the backup run?", "scope": "ops"})
    links = [c for c in result.content if c.type == "resource_link"]
    head = new["note"]["id"]
    assert [link.uri for link in links] == [f"corrigenda://chains/{head}", f"corrigenda://notes/{head}"]
    assert all(link.title and link.mime_type == "text/plain" for link in links)
    assert "03:00" in links[1].title  # type: ignore[operator]
    for link in links:
        (content,) = (await client.read_resource(link.uri)).contents
        assert head in content.text  # type: ignore[union-attr]
    shown = await client.call_tool("history", {"note_id": old["id"]})
    assert [c.uri for c in shown.content if c.type == "resource_link"] == [
        f"corrigenda://chains/{old['id']}",
        f"corrigenda://notes/{head}",
    ]
