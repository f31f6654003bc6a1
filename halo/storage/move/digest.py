"""Counts and checksums that say two copies of a family's data hold the same records.

A record is made canonical first (`canonical`): the same row read from SQLite and from
PostgreSQL gives the same bytes, whatever each driver hands back (a naive SQLite datetime
is UTC, as halo writes it; a PostgreSQL one carries its zone). Then a `Digest` sums them:
ordered (a transcript, where order is the data) or as a multiset (a table's rows, whose
order on disk means nothing), in one pass and constant memory.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

MODULUS = 1 << 256


def canonical_value(value: Any) -> Any:
    """A value as the same JSON-able thing on every backend."""
    if isinstance(value, datetime):
        aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return aware.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, Decimal):
        return str(value)
    return value


def canonical(values: Iterable[Any]) -> bytes:
    """A record's fields, in a fixed order, as compact JSON."""
    return json.dumps(
        [canonical_value(v) for v in values], ensure_ascii=False, separators=(",", ":"), allow_nan=True
    ).encode()


class Digest:
    """sha256 over records: `ordered`, a chain (order matters); otherwise the sum of each
    record's sha256 modulo 2^256 (order does not, duplicates still count)."""

    def __init__(self, *, ordered: bool) -> None:
        self.ordered = ordered
        self.count = 0
        self._chain = hashlib.sha256()
        self._sum = 0

    def add(self, record: bytes) -> None:
        self.count += 1
        if self.ordered:
            self._chain.update(len(record).to_bytes(8, "big"))
            self._chain.update(record)
        else:
            self._sum = (self._sum + int.from_bytes(hashlib.sha256(record).digest(), "big")) % MODULUS

    def hexdigest(self) -> str:
        if self.ordered:
            return self._chain.hexdigest()
        return self._sum.to_bytes(32, "big").hex()
