"""Text that every store can encode: one repair, used at every boundary and in every store.

A Python `str` may hold a lone UTF-16 surrogate (JSON's `"\\ud800"` decodes to one), which
no UTF-8 writer, SQLite or HTTP client can encode. Left in, one such message breaks every
later read of its scope. It is replaced with U+FFFD, the usual "unreadable character" mark,
so the rest of the message is kept.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a fast no-op for ordinary text)."""
    if text.isascii() or _SURROGATES.search(text) is None:
        return text
    # a split pair (two surrogates that belong together) becomes its one character again
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_value(value: Any) -> Any:
    """`clean_text` through a JSON-like value (dict keys and values, lists), e.g. a record read back."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value
