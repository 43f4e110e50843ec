"""JSON with comments (VS Code's JSONC: `//` and `/* */` comments, trailing commas), for `corrigenda
install` (install.py): read to where each value sits in the text (Reader), and edited as text (`put`), so
that an edit replaces or inserts one value and leaves comments, trailing commas, numbers, key order and
layout as written; and JSON written as people write these files (`json_text`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


def json_text(value: Any, pad: str = "", unit: str = "  ") -> str:
    """JSON indented by `unit` from `pad`, a list of plain values on one line, as people write these files."""
    if isinstance(value, dict) and value:
        items = [
            f"{pad}{unit}{json.dumps(k, ensure_ascii=False)}: {json_text(v, pad + unit, unit)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        return "[\n" + ",\n".join(f"{pad}{unit}{json_text(v, pad + unit, unit)}" for v in value) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# Reading: parsed to where each value sits in the text, so that an edit replaces or inserts text and
# touches nothing else.

MAX_DEPTH = 256  # nesting a configuration never reaches; deeper is refused rather than a RecursionError
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_LITERALS = {"true": True, "false": False, "null": None}
_NOT_JSON = ("NaN", "Infinity", "-Infinity")  # Python's json writes them; clients refuse the whole file


@dataclass
class Node:
    """A value and where it sits in the text: [start, end). An object's members in order (key, node)."""

    start: int
    end: int
    value: Any = None  # strings, true/false/null; a number's literal text
    members: list[tuple[str, Node]] | None = None  # an object
    items: list[Node] | None = None  # an array

    def get(self, key: str) -> Node | None:
        """The member named `key` (the last one, as JSON.parse reads duplicates)."""
        found = [node for name, node in self.members or [] if name == key]
        return found[-1] if found else None

    def plain(self) -> Any:
        if self.members is not None:
            return {name: node.plain() for name, node in self.members}
        if self.items is not None:
            return [node.plain() for node in self.items]
        return self.value


class Unreadable(Exception):
    def __init__(self, message: str, at: int) -> None:
        super().__init__(message)
        self.at = at


class Reader:
    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def blank(self) -> None:
        """Past whitespace and comments."""
        text = self.text
        while self.at < len(text):
            if text[self.at] in " \t\r\n":
                self.at += 1
            elif text.startswith("//", self.at):
                end = text.find("\n", self.at)
                self.at = len(text) if end < 0 else end
            elif text.startswith("/*", self.at):
                end = text.find("*/", self.at + 2)
                if end < 0:
                    raise Unreadable("a /* comment that is never closed", self.at)
                self.at = end + 2
            else:
                return

    def document(self) -> Node | None:
        """The file's value; None for a file with nothing but blanks and comments."""
        self.blank()
        if self.at == len(self.text):
            return None
        node = self.value(0)
        self.blank()
        if self.at < len(self.text):
            raise Unreadable(f"{self.text[self.at]!r} after the end of the JSON value", self.at)
        return node

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise Unreadable(f"values nested deeper than {MAX_DEPTH} levels", self.at)
        text, start = self.text, self.at
        if start >= len(text):
            raise Unreadable("the file ends inside a value", start)
        if text[start] in "{[":
            return self.container(depth)
        if text[start] == '"':
            return self.string()
        found = _NUMBER.match(text, start)
        if found:
            self.at = found.end()
            return Node(start, self.at, found.group())
        for word, value in _LITERALS.items():
            if text.startswith(word, start):
                self.at = start + len(word)
                return Node(start, self.at, value)
        for word in _NOT_JSON:
            if text.startswith(word, start):
                raise Unreadable(f"{word} is not a JSON value (clients refuse the file); write a number or null", start)
        raise Unreadable(f"unexpected {text[start]!r}", start)

    def string(self) -> Node:
        found = _STRING.match(self.text, self.at)
        if not found:
            raise Unreadable("a string that is not closed, or holds a control character or a bad escape", self.at)
        self.at = found.end()
        return Node(found.start(), self.at, json.loads(found.group()))

    def container(self, depth: int) -> Node:
        text, start = self.text, self.at
        is_object, close = text[start] == "{", "}" if text[start] == "{" else "]"
        node = Node(start, start, members=[] if is_object else None, items=None if is_object else [])
        self.at += 1
        while True:
            self.blank()
            if self.at < len(text) and text[self.at] == close:
                break
            if is_object:
                if self.at >= len(text) or text[self.at] != '"':
                    raise Unreadable("expected a member name in double quotes", self.at)
                key = self.string().value
                self.blank()
                if self.at >= len(text) or text[self.at] != ":":
                    raise Unreadable("expected ':' after a member name", self.at)
                self.at += 1
                self.blank()
                assert node.members is not None
                node.members.append((key, self.value(depth + 1)))
            else:
                assert node.items is not None
                node.items.append(self.value(depth + 1))
            self.blank()
            if self.at < len(text) and text[self.at] == ",":
                self.at += 1  # a trailing comma before the close is JSONC
            elif self.at >= len(text) or text[self.at] != close:
                raise Unreadable(f"expected ',' or {close!r}", self.at)
        self.at += 1
        node.end = self.at
        return node


# Editing: put one value at a path of object keys, as text.


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _line_indent(text: str, at: int) -> str:
    """The blanks that begin the line `at` is on."""
    start = _line_start(text, at)
    line = text[start:at]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_unit(text: str) -> str:
    found = re.search(r"\n([ \t]+)\S", text)
    return found.group(1) if found else "  "


def put(text: str, keys: tuple[str, ...], value: Any) -> str:
    """`text` with `value` at `keys` (each an object member; all but the last there already): the value
    replaced in place, or a member added after the last one, indented as the file is."""
    node = Reader(text).document()
    for key in keys[:-1]:
        assert node is not None
        node = node.get(key)
    assert node is not None and node.members is not None
    unit, newline = _indent_unit(text), "\r\n" if "\r\n" in text else "\n"
    old = node.get(keys[-1])
    if old is not None and "\n" in text[node.start : node.end]:
        rendered = json_text(value, _line_indent(text, old.start), unit).replace("\n", newline)
        return text[: old.start] + rendered + text[old.end :]
    # An object written on one line stays on one line, spaced as it is; an empty one opens up, unless
    # the whole file is one line.
    one_line = "\n" not in text[node.start : node.end] and (bool(node.members) or "\n" not in text.strip())
    spaced = '": ' in text[node.start : node.end] or not node.members
    separators = (", ", ": ") if spaced else (",", ":")
    if old is not None:
        return text[: old.start] + json.dumps(value, ensure_ascii=False, separators=separators) + text[old.end :]
    outer = _line_indent(text, node.start)
    pad = outer + unit
    close = node.end - 1
    if node.members:
        last = node.members[-1][1]
        if _line_start(text, last.start) > node.start:  # members on lines of their own: indented as the last
            pad = _line_indent(text, last.start)
        after = Reader(text)
        after.at = last.end
        after.blank()
        if text[after.at] != ",":  # a comma after the last value, unless it has one already (trailing)
            text, close = text[: last.end] + "," + text[last.end :], close + 1
    if one_line:
        member = json.dumps({keys[-1]: value}, ensure_ascii=False, separators=separators)[1:-1]
        space = " " if spaced and node.members and text[close - 1] != " " else ""
        return text[:close] + space + member + text[close:]
    member = f"{pad}{json.dumps(keys[-1], ensure_ascii=False)}: {json_text(value, pad, unit)}".replace("\n", newline)
    if not text[_line_start(text, close) : close].strip(" \t"):  # the close on a line of its own
        at = _line_start(text, close)
        return text[:at] + member + newline + text[at:]
    return text[:close] + newline + member + newline + outer + text[close:]
