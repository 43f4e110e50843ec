"""The links a tool's result carries for a client to open: the resources (app.py) of the notes and chains
it shows, each a `resource_link` after the text."""

from __future__ import annotations

from collections.abc import Sequence

from corrigenda.store.views import Chain
from mcp_types import CallToolResult, ContentBlock, ResourceLink

NOTE_URI = "corrigenda://notes/{note_id}"
CHAIN_URI = "corrigenda://chains/{note_id}"
LINK_TITLE = 80  # characters of a note's text a link's title quotes


def linked(result: CallToolResult, chains: Sequence[Chain], chain_of: str | None = None) -> CallToolResult:
    """The result with a `resource_link` to each chain it shows (read through `chain_of`, else through the
    chain's first current note, else its newest history entry) and to each of the chain's current
    notes, after the text: a client lists them and opens one with `resources/read`."""
    links: list[ContentBlock] = []
    for c in chains:
        lead = c.heads[0] if c.heads else c.history[0].note if c.history else None
        if lead is None:
            continue
        links.append(
            ResourceLink(
                uri=CHAIN_URI.format(note_id=chain_of or lead.id), name=f"chain {c.chain_id}",
                title=f"Chain ({c.status.value}): {_short(lead.text)}", mime_type="text/plain",
                description="The chain as recall delivers it: NOW, NEEDS, HISTORY.",
            )
        )  # fmt: skip
        links += [
            ResourceLink(
                uri=NOTE_URI.format(note_id=n.id), name=f"note {n.id}", title=f"NOW: {_short(n.text)}",
                mime_type="text/plain", description="The note with its chain and every lifecycle event.",
            )
            for n in c.heads
        ]  # fmt: skip
    return result.model_copy(update={"content": [*result.content, *links]})


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= LINK_TITLE else text[: LINK_TITLE - 1] + "…"
