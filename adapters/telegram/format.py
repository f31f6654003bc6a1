"""Replies as Telegram messages: cut to its length limit, formatted so text cannot break it.

Telegram refuses a message over 4096 characters (counted in UTF-16 units, after entity
parsing), so a long reply is cut at paragraph breaks, else line breaks, else spaces.

Formatting uses HTML mode because its escaping is complete and simple: `&`, `<` and `>`
escaped make any text inert, whoever wrote it. (MarkdownV2 needs eighteen characters
escaped in context-dependent ways, and one miss makes Telegram refuse the message.) Only
whole pairs of ``` , ` and ** in the model's text become tags, so tags always balance.
"""

from __future__ import annotations

import html
import re

TELEGRAM_LIMIT = 4096


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _fitting(text: str, limit: int) -> int:
    """How many characters of `text` fit in `limit` UTF-16 units."""
    if utf16_len(text) <= limit:
        return len(text)
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > limit:
            return index
    return len(text)


def split_message(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Non-empty pieces of at most `limit` UTF-16 units that together hold all of `text`
    (whitespace at a cut is dropped)."""
    rest = text.strip()
    pieces: list[str] = []
    while utf16_len(rest) > limit:
        fits = _fitting(rest, limit)
        for separator in ("\n\n", "\n", " "):
            cut = rest.rfind(separator, 1, fits + len(separator))  # the piece before it fits
            if cut > 0 and rest[:cut].strip():
                piece, rest = rest[:cut], rest[cut + len(separator) :]
                break
        else:
            piece, rest = rest[:fits], rest[fits:]
        pieces.append(piece.rstrip())
        rest = rest.lstrip()
    if rest:
        pieces.append(rest)
    return [p for p in pieces if p]


_FENCE = re.compile(r"```([\w+-]*)\n?(.*?)```", re.S)
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def to_html(text: str) -> str:
    """Markdown-ish text → Telegram HTML. Everything outside the tags made here is escaped."""
    out: list[str] = []
    position = 0
    for match in _FENCE.finditer(text):
        out.append(_inline(text[position : match.start()]))
        out.append(f"<pre>{html.escape(match.group(2).strip(chr(10)), quote=False)}</pre>")
        position = match.end()
    out.append(_inline(text[position:]))
    return "".join(out)


def _inline(text: str) -> str:
    out: list[str] = []
    position = 0
    for match in _CODE.finditer(text):
        out.append(_prose(text[position : match.start()]))
        out.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        position = match.end()
    out.append(_prose(text[position:]))
    return "".join(out)


def _prose(text: str) -> str:
    escaped = html.escape(text, quote=False)
    escaped = _HEADING.sub(r"<b>\1</b>", escaped)
    return _BOLD.sub(r"<b>\1</b>", escaped)
