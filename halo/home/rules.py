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


def _same(value: Any, expected: Any) -> bool:
    """Equal, or equal as text when the types differ ("on" vs on, "true" vs true)."""
    if value == expected and type(value) is type(expected):
        return True
    if isinstance(value, bool) or isinstance(expected, bool):
        return str(value).lower() == str(expected).lower()
    if isinstance(value, int | float) and isinstance(expected, int | float):
        return value == expected
    return str(value).strip().lower() == str(expected).strip().lower()


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
