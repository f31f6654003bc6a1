"""Redaction of obvious secrets before text is written anywhere a person or a model reads it."""

from __future__ import annotations

import re

REDACTED = "[redacted]"

_PATTERNS: tuple[re.Pattern[str], ...] = (
    # provider keys and tokens: sk-…, sk-ant-…, ghp_…, xoxb-…, AKIA…, Telegram bot tokens
    re.compile(r"\b(?:sk|pk|rk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b\d{8,10}:[A-Za-z0-9_-]{35}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"),  # JWT
    # "password: hunter2", "api key = abc", "token is xyz"
    re.compile(
        r"(?i)\b(pass(?:word|code|phrase)?|pwd|pin|api[ _-]?key|secret|token|bearer)\b"
        r"(\s*(?:is|=|:)\s*|\s+)(\S{3,})"
    ),
    # payment cards (13–19 digits, spaces or dashes allowed) and IBANs
    re.compile(r"\b(?:\d[ -]?){12,18}\d\b"),
    re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){3,7}(?:[ ]?[A-Z0-9]{1,3})?\b"),
)


def redact(text: str) -> str:
    """Replace secrets with a marker; keep the word that named a secret ("password: [redacted]")."""
    for pattern in _PATTERNS:
        if pattern.groups >= 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text
