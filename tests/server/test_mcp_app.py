"""The MCP App of `recall_chains` and `history` (server/mcp_app.py, extension `io.modelcontextprotocol/ui`).

Over the protocol, in memory: the two tools point at the `ui://` page, no other tool does, the page reads
back as the extension's HTML, and the text content stays the text rendering.

In Chromium (browser tier): a host page plays the part the extension gives a host. It is written here to
the extension's specification (ext-apps `specification/2026-01-26/apps.mdx`), not with the SDK's
`AppBridge`: `@modelcontextprotocol/ext-apps` 2.0.4 ships that as ES modules importing
`@modelcontextprotocol/client`, `@modelcontextprotocol/core` and `zod` by bare name, which needs a bundler.
The host serves the page from another origin into an `allow-scripts` sandboxed iframe under the
extension's default CSP (no network), answers `ui/initialize`, waits for `ui/notifications/initialized`,
then sends `tool-input` and `tool-result` with a result the server really returned, and fits the iframe
to `ui/notifications/size-changed`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from html import escape
from typing import Any

import pytest
from corrigenda.server import render
from corrigenda.server.mcp_app import CHAINS_URI
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from corrigenda.store.views import RecallResult
from mcp import Client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from ..conftest import call
from .test_tools import TOOLS
from .test_ui import BEFORE, CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.anyio

HOST = "http://host.test"
SANDBOX = "http://sandbox.test"
# The policy the extension tells a host to apply to a View that declares no CSP domains.
DEFAULT_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; media-src 'self' data:; connect-src 'none'; frame-src 'none'; object-src 'none'; "
    "base-uri 'self'"
)

# The host: one View, as a desktop host shows it. `window.seen` keeps every message the View sent.
HOST_PAGE = """<!DOCTYPE html><html><body>
<script>
const call = JSON.parse(document.currentScript.dataset.call);
window.seen = [];
const frame = document.createElement("iframe");
frame.id = "view";
frame.setAttribute("sandbox", "allow-scripts");
frame.style.cssText = "width: 640px; height: 40px; border: 0";
const send = (message) => frame.contentWindow.postMessage({ jsonrpc: "2.0", ...message }, "*");
window.addEventListener("message", (event) => {
  if (event.source !== frame.contentWindow) return;
  const m = event.data;
  window.seen.push(m);
  if (m.method === "ui/initialize") {
    send({ id: m.id, result: {
      protocolVersion: "2026-01-26", hostInfo: { name: "test-host", version: "1" },
      hostCapabilities: call.capabilities,
      hostContext: { toolInfo: { tool: call.tool }, theme: "light", displayMode: "inline",
                     containerDimensions: { width: 640, maxHeight: 4000 } } } });
  } else if (m.method === "ui/notifications/initialized") {
    send({ method: "ui/notifications/tool-input", params: { arguments: call.arguments } });
    send({ method: "ui/notifications/tool-result", params: call.result });
  } else if (m.method === "ui/notifications/size-changed") {
    frame.style.height = m.params.height + "px";
  } else if (m.method === "tools/call" && call.capabilities.serverTools) {  // to the server, over MCP
    window.callTool(m.params.name, m.params.arguments).then((result) => send({ id: m.id, result }),
      (error) => send({ id: m.id, error: { code: -32603, message: String(error) } }));
  } else if (m.id !== undefined && m.method !== undefined) {
    send({ id: m.id, error: { code: -32601, message: "not offered by this host" } });
  }
});
frame.src = "SANDBOX/view.html";
document.body.append(frame);
</script></body></html>"""


async def test_recall_chains_and_history_name_the_app_and_no_other_tool_does(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for name in ("recall_chains", "history"):
        meta = tools[name].meta or {}
        assert meta["ui"] == {"resourceUri": CHAINS_URI}, name
        assert meta["ui/resourceUri"] == CHAINS_URI, name  # the extension's deprecated alias, for older hosts
    assert [name for name, t in tools.items() if t.meta and "ui" in t.meta] == ["recall_chains", "history"]
    assert client.server_capabilities.extensions == {EXTENSION_ID: {}}


async def test_the_app_reads_back_as_html_for_the_extension_that_loads_nothing(client: Client) -> None:
    listed = {r.uri: r for r in (await client.list_resources()).resources}
    assert listed[CHAINS_URI].mime_type == APP_MIME_TYPE
    (content,) = (await client.read_resource(CHAINS_URI)).contents
    assert content.uri == CHAINS_URI and content.mime_type == "text/html;profile=mcp-app"
    html: str = content.text  # type: ignore[union-attr]
    assert html.startswith("<!DOCTYPE html>") and "ui/initialize" in html
    # Its only calls to the server are the person's answers, through the host, when the host offers them.
    assert re.findall(r'act\("(\w+)"', html) == ["link", "confirm"] and "hostCapabilities.serverTools" in html
    # No script, style sheet or frame from anywhere, and no CSP domain asked for: the host's default
    # policy, which allows no network, is the one it runs under.
    assert "src=" not in html and "<link" not in html and "innerHTML" not in html
    assert content.meta == {"ui": {"prefersBorder": True}}


async def test_recall_chains_text_is_still_the_text_rendering(client: Client) -> None:
    old = (await call(client, "remember", text="The nightly backup runs at 02:00", scope="ops"))["note"]
    await call(client, "correct", note_id=old["id"], text="The nightly backup runs at 03:00", reason="moved")
    result = await client.call_tool("recall_chains", {"query": "when does the backup run?", "scope": "ops"})
    block, *links = result.content
    assert [link.type for link in links] == ["resource_link", "resource_link"]  # the chain, its current note
    assert block.text == render.recall(RecallResult.model_validate(result.structured_content))  # type: ignore[union-attr]
    assert "NOW" in block.text and "HISTORY" in block.text  # type: ignore[union-attr]


async def show_in_a_host(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    checks: Any,
    picture: str | None = None,
    calls_tools: bool = False,
) -> list[dict[str, Any]]:
    """Call `tool` over MCP, show its result in the app inside the host page in Chromium, run `checks`
    on the app's frame (then take a `picture` of the page, if asked); return what the app sent the
    host. A host that `calls_tools` says so (`serverTools`) and passes the app's `tools/call` on to the
    server through `client`. Fails on any console error (a CSP refusal or a script error)."""
    from playwright.async_api import Route, async_playwright

    result = await client.call_tool(tool, arguments)
    assert not result.is_error
    definition = next(t for t in (await client.list_tools()).tools if t.name == tool)
    (content,) = (await client.read_resource(CHAINS_URI)).contents
    handed = {
        "tool": definition.model_dump(mode="json", by_alias=True, exclude_none=True),
        "arguments": arguments,
        "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
        "capabilities": {"serverTools": {}} if calls_tools else {},
    }
    host_page = HOST_PAGE.replace("SANDBOX", SANDBOX).replace(
        "<script>", f'<script data-call="{escape(json.dumps(handed))}">', 1
    )

    async def serve(route: Route) -> None:
        if route.request.url == f"{HOST}/":
            await route.fulfill(status=200, content_type="text/html", body=host_page)
        elif route.request.url == f"{SANDBOX}/view.html":
            await route.fulfill(
                status=200,
                content_type="text/html",
                body=content.text,  # type: ignore[union-attr]
                headers={"Content-Security-Policy": DEFAULT_CSP},
            )
        else:
            await route.abort()

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context()
            await context.route("**/*", serve)
            page = await context.new_page()

            async def call_tool(name: str, given: dict[str, Any]) -> dict[str, Any]:
                answer = await client.call_tool(name, given)
                return answer.model_dump(mode="json", by_alias=True, exclude_none=True)

            if calls_tools:
                await page.expose_function("callTool", call_tool)
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            await page.goto(f"{HOST}/")
            await checks(page.frame_locator("#view"))
            if picture is not None:
                await page.set_viewport_size({"width": 672, "height": 600})
                await page.screenshot(path=picture, full_page=True)
            seen: list[dict[str, Any]] = await page.evaluate("window.seen")
            height = await page.evaluate("document.getElementById('view').getBoundingClientRect().height")
        finally:
            await browser.close()
    assert errors == []
    sizes = [m["params"]["height"] for m in seen if m.get("method") == "ui/notifications/size-changed"]
    assert sizes and height == sizes[-1] > 100  # the host fitted the iframe to what the View reported
    return seen


@pytest.mark.browser
async def test_a_host_shows_the_current_note_under_now_and_the_old_one_as_history(client: Client) -> None:
    old = (
        await call(
            client,
            "remember",
            text="The payments service listens on port 8080",
            subject="payments.port",
            kind="fact",
            tags=["payments", "network"],
            scope="ops",
        )
    )["note"]
    corrected = await call(
        client,
        "correct",
        note_id=old["id"],
        text="The payments service listens on port 9090",
        reason="moved behind the new proxy",
    )
    new = corrected["note"]
    actor = corrected["chain"]["history"][0]["actor"]

    async def checks(view: Any) -> None:
        from playwright.async_api import expect

        chain = view.locator("section.chain")
        await expect(chain).to_have_count(1)
        await expect(chain.locator("h2 .title")).to_have_text("payments.port")  # titled by its subject
        await expect(chain.locator("h2 .status")).to_have_text("CURRENT")
        now = chain.locator("li.now")
        await expect(now).to_have_count(1)  # the old note is not shown as current
        await expect(now.locator(".text")).to_have_text("The payments service listens on port 9090")
        await expect(now.locator(".meta")).to_contain_text("fact · subject payments.port")
        await expect(now.locator(".tag")).to_have_text(["payments", "network"])
        history = chain.locator("li.history")
        await expect(history).to_have_count(1)
        await expect(history.locator(".label")).to_have_text("HISTORY")
        await expect(history.locator(".text")).to_have_text("The payments service listens on port 8080")
        why = history.locator(".why")
        await expect(why).to_contain_text(f"superseded by {new['id']}")
        await expect(why).to_contain_text("because “moved behind the new proxy”")
        if actor:
            await expect(why).to_contain_text(f"({actor})")
        await expect(view.locator(".summary")).to_contain_text(
            "1 chain(s) for “which port does payments use?” in scope ops"
        )

    seen = await show_in_a_host(
        client, "recall_chains", {"query": "which port does payments use?", "scope": "ops"}, checks
    )
    methods = [m.get("method") for m in seen]
    assert methods[:2] == ["ui/initialize", "ui/notifications/initialized"]  # the handshake, in order
    assert seen[0]["params"]["protocolVersion"] == "2026-01-26" and seen[0]["params"]["appInfo"]["name"]


@pytest.mark.browser
async def test_a_host_shows_a_history_result_with_markup_in_notes_as_plain_text(client: Client) -> None:
    text = "Embed charts with <img src=x onerror=\"document.title='pwned'\"> tags"
    old = (await call(client, "remember", text=text, scope="web"))["note"]
    new = (
        await call(
            client,
            "correct",
            note_id=old["id"],
            text="Embed charts as <svg> files",
            reason="<b>img</b> tags broke the feed",
        )
    )["note"]

    async def checks(view: Any) -> None:
        from playwright.async_api import expect

        await expect(view.locator(".summary")).to_have_text(f"Note {old['id']} is superseded. Its chain:")
        await expect(view.locator("li.now .text")).to_have_text("Embed charts as <svg> files")
        await expect(view.locator("li.history .text")).to_have_text(text)
        await expect(view.locator("li.history .why")).to_contain_text("because “<b>img</b> tags broke the feed”")
        await expect(view.locator("h2 .title")).to_have_text("Embed charts as <svg> files")  # first words: no subject
        row = view.locator("table.events tbody tr")
        await expect(row).to_have_count(1)
        await expect(row.locator("td")).to_have_text(
            [
                re.compile("."),
                "supersedes",
                f"{new['id']} → {old['id']}",
                re.compile("."),
                "<b>img</b> tags broke the feed",
                "yes",
            ]
        )
        await expect(view.locator("img, svg, b")).to_have_count(0)  # nothing in the notes became markup

    await show_in_a_host(client, "history", {"note_id": old["id"]}, checks)


OFFICE = "When does the office open?"


async def office_hours(client: Client) -> tuple[str, str]:
    """Two notes of one subject, the newer stating another value, nothing linking them: recall marks the
    older POSSIBLY OUTDATED. Their ids, older first."""
    old = await call(
        client, "remember", text="The office opens at 8:00 on weekdays.", subject="office.hours", scope="ops"
    )
    new = await call(
        client, "remember", text="The office opens at 9:00 on weekdays.", subject="office.hours", scope="ops"
    )
    return old["note"]["id"], new["note"]["id"]


async def test_a_recall_with_a_possibly_outdated_mark_says_in_one_line_where_the_person_answers(
    client: Client,
) -> None:
    await office_hours(client)
    marked = (await client.call_tool("recall_chains", {"query": OFFICE, "scope": "ops"})).content[0].text  # type: ignore[union-attr]
    assert "POSSIBLY OUTDATED" in marked
    assert marked.splitlines().count(render.WHERE_TO_ANSWER) == 1  # once, however many chains are marked
    assert "corrigenda ui" in render.WHERE_TO_ANSWER and "MCP Apps" in render.WHERE_TO_ANSWER
    plain = await client.call_tool("recall_chains", {"query": "weekend opening", "scope": "elsewhere"})
    assert render.WHERE_TO_ANSWER not in plain.content[0].text  # type: ignore[union-attr]


def tool_calls(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"] for m in seen if m.get("method") == "tools/call"]


@pytest.mark.browser
@pytest.mark.parametrize(
    ("answer", "kind"), [("The newer note replaces it", "supersedes"), ("They are different facts", "distinct")]
)
async def test_a_person_settles_a_possibly_outdated_mark_with_its_buttons_through_the_host(
    client: Client, answer: str, kind: str
) -> None:
    old, new = await office_hours(client)

    async def checks(view: Any) -> None:
        from playwright.async_api import expect

        mark = view.locator(".suspect")
        await expect(mark).to_have_count(1)
        await expect(mark).to_contain_text(
            "POSSIBLY OUTDATED by the newer note “The office opens at 9:00 on weekdays.”"
        )
        await expect(view.locator(f"section.chain:has(.suspect) li.now[data-note='{old}']")).to_have_count(1)
        await mark.locator("input.reason").fill("the sign on the door says 9:00")
        await mark.locator("button", has_text=answer).click()
        await expect(view.locator(".notice")).to_contain_text("Recorded:")
        await expect(view.locator(".suspect")).to_have_count(0)  # settled: the mark is gone
        if kind == "supersedes":  # one chain now: the newer note current, the older its history
            await expect(view.locator("section.chain")).to_have_count(1)
            await expect(view.locator("li.now .text")).to_have_text("The office opens at 9:00 on weekdays.")
            await expect(view.locator("li.history .text")).to_have_text("The office opens at 8:00 on weekdays.")
            await expect(view.locator("li.history .why")).to_contain_text("because “the sign on the door says 9:00”")
        else:  # both current, in their places
            await expect(view.locator("li.now")).to_have_count(2)
            await expect(view.locator("li.history")).to_have_count(0)

    seen = await show_in_a_host(client, "recall_chains", {"query": OFFICE, "scope": "ops"}, checks, calls_tools=True)
    reason = "the sign on the door says 9:00"
    link = {"src_id": new, "dst_id": old, "kind": kind, "reason": reason}
    assert tool_calls(seen) == [{"name": "link", "arguments": link}]  # one call, newer → older
    [event] = (await call(client, "history", note_id=old))["events"]
    assert (event["kind"], event["src"], event["reason"]) == (kind, new, reason)
    state = (await call(client, "history", note_id=old))["note"]["state"]
    assert state == ("superseded" if kind == "supersedes" else "active")


@pytest.mark.browser
@pytest.mark.parametrize("host", ["no tool calls", "a view of the past"])
async def test_where_the_app_cannot_answer_it_shows_the_mark_and_where_to_answer_with_no_button(
    client: Client, host: str
) -> None:
    """A host that does not proxy tool calls (or a recall as of a past time) gets the mark, and where the
    person answers it, and no button that would fail or change the past."""
    old, _ = await office_hours(client)
    arguments: dict[str, Any] = {"query": OFFICE, "scope": "ops"}
    if host == "a view of the past":
        arguments["as_of"] = datetime.now(UTC).isoformat()

    async def checks(view: Any) -> None:
        from playwright.async_api import expect

        await expect(view.locator(".suspect")).to_contain_text("POSSIBLY OUTDATED")
        await expect(view.locator(".suspect")).to_contain_text("Answer it in the web view (corrigenda ui)")
        await expect(view.locator("li.now")).to_have_count(2)
        await expect(view.locator("button, input")).to_have_count(0)

    seen = await show_in_a_host(client, "recall_chains", arguments, checks, calls_tools=host != "no tool calls")
    assert tool_calls(seen) == [] and (await call(client, "history", note_id=old))["events"] == []


@pytest.mark.browser
async def test_still_true_in_the_app_confirms_a_note_marked_unchecked_and_the_mark_goes(
    client: Client, db: str, embedder: SentenceTransformerEmbedder
) -> None:
    beside = Memory(db, embedder)  # what the agent cannot do over MCP: a back-dated note, the scope's setting
    note = beside.remember(Draft(text="The payments service listens on port 9090", at=BEFORE), scope="ops").note
    beside.check_every(7, scope="ops", reason="ports move", actor="person:Ada")

    async def checks(view: Any) -> None:
        from playwright.async_api import expect

        now = view.locator("li.now")
        await expect(now.locator(".unchecked")).to_have_text("UNCHECKED since 2026-11-02 09:00 UTC")
        await expect(now.locator(".checked")).to_have_count(0)
        await now.locator("button", has_text="Still true").click()
        await now.locator("input.reason").fill("curl payments:9090 answered")
        await now.locator("button", has_text="Confirm").click()
        await expect(view.locator(".notice")).to_have_text(
            "Confirmed: the note still holds. It now shows when it was checked."
        )
        await expect(now.locator(".unchecked")).to_have_count(0)  # checked now: the mark is gone
        await expect(now.locator(".checked")).to_contain_text(": “curl payments:9090 answered”")
        await expect(view.locator("table.events tbody tr")).to_have_count(1)  # the confirmation, listed

    seen = await show_in_a_host(client, "history", {"note_id": note.id}, checks, calls_tools=True)
    assert tool_calls(seen) == [
        {"name": "confirm", "arguments": {"note_id": note.id, "reason": "curl payments:9090 answered"}}
    ]
    check = (await call(client, "history", note_id=note.id))["note"]["last_checked"]
    assert check["reason"] == "curl payments:9090 answered" and check["actor"]


@pytest.mark.browser
async def test_still_true_on_a_note_replaced_since_the_view_was_drawn_shows_the_stores_refusal(
    client: Client,
) -> None:
    note = (await call(client, "remember", text="The nightly backup runs at 02:00", scope="ops"))["note"]

    async def checks(view: Any) -> None:
        from playwright.async_api import expect

        now = view.locator("li.now")
        await expect(now).to_have_count(1)
        await call(client, "correct", note_id=note["id"], text="The nightly backup runs at 03:00", reason="moved")
        await now.locator("button", has_text="Still true").click()
        await now.locator("button", has_text="Confirm").click()
        refused = view.locator(".notice.error")
        await expect(refused).to_contain_text(f"{note['id']} is not current (superseded by")
        await expect(view.locator("li.now .text")).to_have_text("The nightly backup runs at 02:00")  # as drawn

    seen = await show_in_a_host(client, "history", {"note_id": note["id"]}, checks, calls_tools=True)
    said = "checked by the person in the chain view"  # none typed: the client is the actor, this says who clicked
    assert tool_calls(seen) == [{"name": "confirm", "arguments": {"note_id": note["id"], "reason": said}}]
    assert (await call(client, "history", note_id=note["id"]))["note"]["last_checked"] is None
