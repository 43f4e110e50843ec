"""The MCP App of `recall_chains` and `history` (extension `io.modelcontextprotocol/ui`).

Hosts that render MCP Apps (Claude, ChatGPT, VS Code, Goose, Postman: the extension's README) read the tool's
`_meta.ui.resourceUri`, fetch that `ui://` resource with `resources/read` and show it in a sandboxed
iframe in the conversation, sending it the tool's result; it draws the chains from the result's
structured content (NOW, NEEDS, HISTORY with who, when and why). Other clients ignore the `_meta`
and read the text content, which the app changes in nothing.

The page (`ui_static/chains-app.html`) loads and fetches nothing, so it declares no CSP domains:
the host then applies the extension's default policy, which allows no network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.apps import Apps

CHAINS_URI = "ui://corrigenda/chains.html"
PAGE = Path(__file__).with_name("ui_static") / "chains-app.html"

# `_meta` of a tool the app renders. The flat "ui/resourceUri" key is the extension's deprecated
# alias, still read by hosts built before `ui.resourceUri`; the extension's own server helper
# (`registerAppTool`, @modelcontextprotocol/ext-apps 2.0) writes both, and so does this.
CHAINS_TOOL_META: dict[str, Any] = {"ui": {"resourceUri": CHAINS_URI}, "ui/resourceUri": CHAINS_URI}


def extension() -> Apps:
    """The Apps extension with the chains page: passed to the server, it serves the page and
    advertises `io.modelcontextprotocol/ui` under the server's `capabilities.extensions`."""
    apps = Apps()
    apps.add_html_resource(
        CHAINS_URI,
        PAGE.read_text(encoding="utf-8"),
        name="chains",
        title="Memory chains",
        description="Draws a recall_chains or history result: each chain's current notes, what they rest on, "
        "and what they replaced, with who, when and why.",
        prefers_border=True,
    )
    return apps
