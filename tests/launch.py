"""Launch a server process as an MCP host does, and talk to it over stdio with the SDK's client."""

from __future__ import annotations

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from .conftest import call

# Tests do not reach the network: the model comes inside a package, so these change nothing
# unless something tries to download.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "CORRIGENDA_ENGINE": "off"}  # conftest.py


async def serve_and_ask(params: StdioServerParameters, scope: str | None = None, story: bool = False) -> set[str]:
    """initialize and tools/list; with `scope`, that the session's default scope is this one; with
    `story`, a remember that recall_chains finds. Returns the names of the tools listed."""
    async with Client(params) as client:
        assert client.server_info is not None and client.server_info.name == "corrigenda"
        tools = {t.name for t in (await client.list_tools()).tools}
        if scope is not None:  # a write: a read of a store not made yet says there is none
            got = (await call(client, "remember", text="This session writes to its project's scope"))["note"]["scope"]
            assert got == scope, (got, scope)
        if story:
            note = (await call(client, "remember", text="The nightly backup runs at 02:30 UTC"))["note"]
            chains = (await call(client, "recall_chains", query="when does the nightly backup run?"))["chains"]
            assert chains and chains[0]["heads"][0]["id"] == note["id"], chains
    return tools
