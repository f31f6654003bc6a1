"""Matching a home rule against an observation, and saying it: pure functions, no I/O."""

from __future__ import annotations

import re
from typing import Any

from config.home import When

_MISSING = object()
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.\-]+)\}")


def topic_matches(pattern: str, topic: str) -> bool:
    """MQTT wildcards: `+` is one level, `#` (last) is any number of levels, including none."""
    want, have = pattern.split("/"), topic.split("/")
    for i, level in enumerate(want):
        if level == "#":
            return True
        if i >= len(have) or (level != "+" and level != have[i]):
            return False
    return len(want) == len(have)


def field_value(payload: dict[str, Any], path: str) -> Any:
    """A dotted path into the payload; `_MISSING` when any step is absent."""
    node: Any = payload
    for step in path.split("."):
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
            node = node[int(step)]
        else:
            return _MISSING
    return node


def _json_type(value: Any) -> str:
    """The JSON type of a parsed value; bool first, since Python's bool is an int."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _same(value: Any, expected: Any) -> bool:
    """Equal as JSON: never across types, so `equals: false` is not "false", 0 or [], and
    `equals: 1` is not true. Text compares without case or surrounding blanks ("ON" is "on");
    a rule for a device that sends strings says so: `equals: "false"`."""
    kind = _json_type(value)
    if kind != _json_type(expected):
        return False
    if kind == "string":
        return bool(value.strip().lower() == expected.strip().lower())
    if kind == "array":
        return len(value) == len(expected) and all(_same(v, e) for v, e in zip(value, expected, strict=True))
    if kind == "object":
        return value.keys() == expected.keys() and all(_same(value[k], expected[k]) for k in value)
    return bool(value == expected)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def condition_holds(when: When, payload: dict[str, Any]) -> bool:
    value = field_value(payload, when.field)
    if value is _MISSING:
        return False
    if when.comparison == "in":
        return any(_same(value, option) for option in when.in_ or [])
    if when.comparison == "range":
        number = _number(value)
        if number is None:
            return False
        return (when.above is None or number > when.above) and (when.below is None or number < when.below)
    return _same(value, when.equals)


def render(template: str, payload: dict[str, Any], **extra: Any) -> str:
    """`say` with `{dotted.fields}` from the payload (and `{entity}`, `{topic}`); a field the
    payload lacks stays as written, so the message still makes sense."""

    def fill(match: re.Match[str]) -> str:
        name = match[1]
        value = field_value(payload, name)
        if value is _MISSING:
            value = extra.get(name, match[0])
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return str(value)

    return _PLACEHOLDER.sub(fill, template)
