"""The MCP App of `recall_chains` and `history` (extension `io.modelcontextprotocol/ui`).

Hosts that render MCP Apps (Claude, ChatGPT, VS Code, Goose, Postman: the extension's README) read the tool's
`_meta.ui.resourceUri`, fetch that `ui://` resource with `resources/read` and show it in a sandboxed
iframe in the conversation, sending it the tool's result; it draws the chains from the result's
structured content (NOW, NEEDS, HISTORY with who, when and why). Other clients ignore the `_meta`
and read the text content, which the app changes in nothing.

Where the host passes the app's tool calls on (`hostCapabilities.serverTools`), the person answers in
the view: a chain marked POSSIBLY OUTDATED has two buttons (`link` newer → older, `supersedes` or
`distinct`), a current note "Still true" (`confirm`); each is one `tools/call`, recorded as the session's
actor like any call of the client, and the view is redrawn from its result. `link` and `confirm` carry
no `_meta.ui.visibility`, so they keep the extension's default, callable by the model and the app.

The page (`ui_static/chains-app.html`) loads and fetches nothing, so it declares no CSP domains:
the host then applies the extension's default policy, which allows no network.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from mcp.server.apps import APP_MIME_TYPE, Apps
from mcp.server.mcpserver.resources import TextResource
from mcp_types import Icon

CHAINS_URI = "ui://corrigenda/chains.html"
PAGE = Path(__file__).with_name("ui_static") / "chains-app.html"
ICON = Path(__file__).with_name("ui_static") / "favicon.svg"
ICON_PNG = Path(__file__).with_name("ui_static") / "icon.png"  # drawn from the SVG by bench/icon_png.py
ICON_PNG_SIZE = "64x64"


def icons() -> list[Icon]:
    """corrigenda's icon, as clients show it beside the server, its tools, resources and prompts: the web
    view's own (a check mark), inline as `data:` URIs so that showing it needs no network. A client that
    shows icons must support PNG and JPEG and only should support SVG (the spec's icons, 2025-11-25): the
    PNG comes first, then the SVG for any size, a plain one of two shapes with no script or link a client
    would have to guard against."""
    png = base64.b64encode(ICON_PNG.read_bytes()).decode("ascii")
    svg = base64.b64encode(ICON.read_bytes()).decode("ascii")
    return [
        Icon(src=f"data:image/png;base64,{png}", mime_type="image/png", sizes=[ICON_PNG_SIZE]),
        Icon(src=f"data:image/svg+xml;base64,{svg}", mime_type="image/svg+xml", sizes=["any"]),
    ]


# `_meta` of a tool the app renders. The flat "ui/resourceUri" key is the extension's deprecated
# alias, still read by hosts built before `ui.resourceUri`; the extension's own server helper
# (`registerAppTool`, @modelcontextprotocol/ext-apps 2.0) writes both, and so does this.
CHAINS_TOOL_META: dict[str, Any] = {"ui": {"resourceUri": CHAINS_URI}, "ui/resourceUri": CHAINS_URI}


def sizes() -> dict[str, int]:
    """The size in bytes of each resource the extension serves, for `resources/list` (the SDK lists none)."""
    return {CHAINS_URI: len(PAGE.read_text(encoding="utf-8").encode())}


def extension() -> Apps:
    """The Apps extension with the chains page: passed to the server, it serves the page and
    advertises `io.modelcontextprotocol/ui` under the server's `capabilities.extensions`. Built as the
    SDK's `add_html_resource` builds it, with the icon that helper takes no argument for."""
    apps = Apps()
    apps.add_resource(
        TextResource(
            uri=CHAINS_URI,
            name="chains",
            title="Memory chains",
            description="Draws a recall_chains or history result: each chain's current notes, what they rest on, "
            "and what they replaced, with who, when and why; the person can answer a POSSIBLY OUTDATED mark and "
            "confirm a note still holds.",
            mime_type=APP_MIME_TYPE,
            icons=icons(),
            meta={"ui": {"prefersBorder": True}},
            text=PAGE.read_text(encoding="utf-8"),
        )
    )
    return apps
