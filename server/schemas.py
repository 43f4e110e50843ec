"""What `tools/list` says of each tool's result, kept small.

The SDK derives a full JSON Schema from each result model: 59 KB of the 72 KB `tools/list`, sent
to every client and often into the model's context, while each result's text content already
says what matters. Clients get an outline instead: the result's top-level fields with their
types, nested objects as objects (docs/reference.md, "Tool results, resources and prompts").
"""

from __future__ import annotations

from typing import Any

_KEEP = ("type", "enum", "format")


def outline(schema: dict[str, Any]) -> dict[str, Any]:
    """The top level of `schema`, each field's nested structure reduced to its JSON type."""
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def shallow(node: dict[str, Any], depth: int) -> dict[str, Any]:
        node = resolve(node)
        if "anyOf" in node:
            return {"anyOf": [shallow(option, depth) for option in node["anyOf"]]}
        if node.get("type") == "object" or "properties" in node:
            return {"type": "object"}
        if node.get("type") == "array" and depth == 0:
            return {"type": "array", "items": shallow(node.get("items", {}), depth + 1)}
        return {key: node[key] for key in _KEEP if key in node}

    top = resolve(schema)
    return {
        "type": "object",
        "properties": {name: shallow(field, 0) for name, field in top.get("properties", {}).items()},
        "required": top.get("required", []),
    }


def untitled(schema: Any) -> Any:
    """An input schema without pydantic's generated `title` on every field (the name says it)."""
    if isinstance(schema, dict):
        return {k: untitled(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [untitled(v) for v in schema]
    return schema
