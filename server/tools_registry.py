"""How a tool is declared (`tool`) and kept (`TOOLS`) until app.py registers it with the server: its
function, whose docstring is the description the model reads, and the title and annotations a client
shows. The tools themselves are in tools.py and tools_truth.py."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp_types import ToolAnnotations

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Tool:
    """A tool as registered: its function (whose name is the tool's), annotations, title and `_meta`."""

    fn: Callable[..., Any]
    annotations: ToolAnnotations
    title: str
    meta: dict[str, Any] | None = None

    @property
    def description(self) -> str:
        """The docstring as the model reads it: paragraphs, without the source's line breaks."""
        paragraphs = inspect.cleandoc(self.fn.__doc__ or "").split("\n\n")
        return "\n\n".join(" ".join(p.split()) for p in paragraphs)


TOOLS: dict[str, Tool] = {}  # by name, in the order tools.py then tools_truth.py define them; app.py registers them all


def tool(annotations: ToolAnnotations, title: str, meta: dict[str, Any] | None = None) -> Callable[[F], F]:
    """Declare a tool: its docstring is the description the model reads, its title the name a client
    shows a person, `meta` its `_meta` (the app that draws its result)."""

    def declare(fn: F) -> F:
        TOOLS[fn.__name__] = Tool(fn, annotations, title, meta)
        return fn

    return declare
