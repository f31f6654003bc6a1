"""Splitting a reply into Discord messages (2,000 characters each) without breaking a word
or a code block: a block cut in two is closed at the end of one part and reopened, with
its language, at the start of the next."""

from __future__ import annotations

import re

LIMIT = 2000
_FENCE = re.compile(r"^[ \t]*```([^\s`]*)", re.M)
_CLOSE = "\n```"


def open_fence(text: str) -> str | None:
    """The language tag of a code block left open at the end of `text` ("" for none), or
    None when every block is closed."""
    language: str | None = None
    for found in _FENCE.finditer(text):
        language = found.group(1) if language is None else None
    return language


def _cut(text: str, room: int) -> int:
    """Where to end a part of at most `room` characters: a paragraph or line break in its
    second half, else the last space, else the last line break; a hard cut only for a
    "word" longer than a whole part."""
    window = text[: room + 1]  # a separator right at the limit still counts
    for separator, floor in (("\n\n", room // 2), ("\n", room // 2), (" ", 1), ("\n", 1)):
        at = window.rfind(separator, 0, room + 1)
        if at >= floor:
            return at
    return room


def split_message(text: str, limit: int = LIMIT) -> list[str]:
    """Parts of at most `limit` characters that read, joined, as the original text."""
    text = text.strip()
    parts: list[str] = []
    prefix = ""
    while text:
        if len(prefix) + len(text) <= limit:
            parts.append(prefix + text)
            break
        room = limit - len(prefix) - len(_CLOSE)
        at = _cut(text, room)
        piece = (prefix + text[:at]).rstrip()
        text = text[at:]
        text = text[1:] if text[:1] in ("\n", " ") else text
        language = open_fence(piece)
        if language is not None:
            piece += _CLOSE
            prefix = f"```{language}\n"
            text = text.lstrip("\n")
        else:
            prefix = ""
            text = text.lstrip()
        if piece.strip():
            parts.append(piece)
    return parts
