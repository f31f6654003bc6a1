"""Redaction of obvious secrets before text is written anywhere a person or a model reads it.

Used on error messages, memory files (MEMORY.md, daily notes, the sidecar) and shared
text. It errs on the side of redacting: a wrongly hidden number costs less than a leaked
password in a file the whole family can read.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"

# Words that name a secret. After "is", "=" or ":" any value counts; after a bare space only
# one that looks like a secret (has a digit or symbol, or is long), so "pin the poster" survives.
_SECRET_WORDS = (
    r"pass(?:word|code|phrase)?|passwd|pwd|pin|api[ _-]?key|secret|token|bearer|cvv|cvc|"
    r"security code|account (?:number|no\.?)|routing (?:number|no\.?)|sort code|"
    r"ssn|social security number|tax id|login code|verification code|otp|"
    r"(?:alarm|door|gate|garage|safe|lock|entry|access|wifi) code"
)

_PATTERNS: tuple[re.Pattern[str], ...] = (
    # PEM private keys, whole block
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
    # credentials inside a URL: scheme://user:password@host
    re.compile(r"(?<=://)[^\s/:@]+:[^\s/@]+(?=@)"),
    # provider keys and tokens: sk-…, sk-ant-…, ghp_…, xoxb-…, AKIA…, Telegram bot tokens
    re.compile(r"\b(?:sk|pk|rk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b\d{8,10}:[A-Za-z0-9_-]{35}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\b"),  # JWT
    # "password: hunter2", "api key = abc", "my pin is 1234"
    re.compile(rf"(?i)\b({_SECRET_WORDS})(\s*(?:is|=|:)\s*)(\S{{3,}})"),
    # "password hunter2", "pin 4821": a bare space, and a value that looks like a secret
    re.compile(rf"(?i)\b({_SECRET_WORDS})(\s+)((?=[^\s.,;!?]*[^A-Za-z\s.,;!?])[^\s.,;!?]{{3,}}|[A-Za-z]{{16,}})"),
    # IBANs, payment cards (13–19 digits, spaces or dashes allowed), US SSNs
    re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){3,7}(?:[ ]?[A-Z0-9]{1,3})?\b"),
    re.compile(r"\b(?:\d[ -]?){12,18}\d\b"),
    re.compile(r"\b\d{3}-\d{2}-\d{4}\b"),
)


def redact(text: str) -> str:
    """Replace secrets with a marker; keep the word that named a secret ("password: [redacted]")."""
    for pattern in _PATTERNS:
        if pattern.groups >= 3:
            text = pattern.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def only_redacted(text: str) -> bool:
    """True when nothing but the marker (and punctuation) is left: not worth remembering."""
    return not re.sub(r"[\W_]+", "", text.replace(REDACTED, ""))
