"""Secrets never reach a memory file: the redaction table, and what it leaves alone."""

from __future__ import annotations

import pytest

from memory.redact import only_redacted, redact

REDACTIONS = [
    ("my password is hunter2", "my password is [redacted]"),
    ("wifi password: abc123", "wifi password: [redacted]"),
    ("pin 4821", "pin [redacted]"),
    ("card 4111 1111 1111 1111 expires", "card [redacted] expires"),
    ("IBAN DE89 3704 0044 0532 0130 00", "IBAN [redacted]"),
    ("ssn 123-45-6789", "ssn [redacted]"),
    ("account number 12345678", "account number [redacted]"),
    ("key sk-abcdefghijklmnopqrstuvwx here", "key [redacted] here"),
    ("https://bob:s3cret@example.com/x", "https://[redacted]@example.com/x"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[redacted]"),
    # ordinary words survive
    ("pin the poster on the wall", "pin the poster on the wall"),
    ("the secret garden", "the secret garden"),
    ("my shoe size is 38", "my shoe size is 38"),
    ("call 555-1234", "call 555-1234"),
]


@pytest.mark.parametrize(("text", "expected"), REDACTIONS, ids=[t[:30] for t, _ in REDACTIONS])
def test_redaction_table(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_only_redacted_means_nothing_worth_keeping() -> None:
    assert only_redacted("[redacted].") and not only_redacted("the alarm code is [redacted]")
