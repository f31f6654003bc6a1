"""The append-only audit log: what was decided, for whom, and why.

Parents read it (admin API `/events/tail`), so it must never hold a secret: keys that look
like credentials are dropped before a line is written, however deep they sit.

It is kept in one place: the file `logs/events.jsonl` in HALO_HOME (the embedded store), or
an `AuditRecord` (PostgreSQL, halo/storage/audit_rows.py: every process's events together,
written behind), and then no file is written at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Protocol

from transcripts._lines import complete_lines_reversed
from transcripts.jsonl import append_line
from transcripts.text import clean_text, clean_value

logger = logging.getLogger(__name__)

_SECRET_KEY = re.compile(
    r"(?:^|_)(?:token|api_?key|password|passwd|passphrase|secret|authorization|credentials?|cookie)(?:_|$)"
)


def is_secret_key(key: str) -> bool:
    """`token`, `bot_token`, `apiKey`, `x-api-key`, `client_secret`… but not `prompt_tokens`."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()
    return bool(_SECRET_KEY.search(re.sub(r"[^a-z0-9]+", "_", snake)))


def drop_secrets(value: Any) -> Any:
    """A copy of `value` with every secret-looking key removed, in nested mappings and lists too."""
    if isinstance(value, Mapping):
        return {k: drop_secrets(v) for k, v in value.items() if not is_secret_key(str(k))}
    if isinstance(value, list | tuple):
        return [drop_secrets(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


EventFilter = Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One event as a store of record keeps it: `json` is the log's line (secrets dropped), no newline."""

    ts: datetime
    kind: str
    scope_id: str | None
    json: str


class AuditRecord(Protocol):
    """Where the events of every process are kept together."""

    def add(self, event: AuditEvent) -> None:
        """Keep `event`, written behind (soon, with others): cheap, from any thread, never raises."""
        ...

    async def tail(
        self, lines: int, scope_id: str | None = None, kind: str | None = None, match: EventFilter | None = None
    ) -> list[dict[str, Any]]:
        """The last `lines` events matching the filters, oldest first, this process's waiting ones included."""
        ...

    async def close(self) -> None:
        """Write what waits."""
        ...


class AuditLog:
    """Appends one JSON object a line to `path`, or hands it to `record` (one of the two);
    never raises, because auditing must not break a conversation."""

    def __init__(self, path: Path | None = None, *, record: AuditRecord | None = None) -> None:
        if (path is None) == (record is None):
            raise ValueError("AuditLog: a file or a record, one of the two")
        self.path = path
        self.record = record
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        """Append `{"ts", "kind", **fields}` (secrets dropped). Safe from threads and the event loop."""
        now = datetime.now(UTC)
        record: dict[str, Any] = {"ts": now.isoformat(), "kind": kind}
        for key, value in drop_secrets(fields).items():
            record.setdefault(key, value)
        # a lone surrogate must not cost the event
        text = clean_text(json.dumps(record, ensure_ascii=False, default=_json_default))
        if self.record is not None:
            scope_id = record.get("scope_id")
            self.record.add(AuditEvent(now, kind, scope_id if isinstance(scope_id, str) else None, text))
            return
        assert self.path is not None
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                append_line(self.path, text.encode("utf-8") + b"\n")
        except OSError:
            logger.exception("audit log %s: could not write a %r event", self.path, kind)

    async def tail(
        self, lines: int, scope_id: str | None = None, kind: str | None = None, match: EventFilter | None = None
    ) -> list[dict[str, Any]]:
        """The last `lines` events (oldest first) matching the filters: with a record, every
        process's (this one's still waiting included); else read from the end of the file.
        `match` is for filters the keyword arguments cannot say (an event *about* a scope)."""
        if self.record is not None:
            return [clean_value(event) for event in await self.record.tail(lines, scope_id, kind, match)]
        return await asyncio.to_thread(self._file_tail, lines, scope_id, kind, match)

    async def close(self) -> None:
        """Write what waits for the record."""
        if self.record is not None:
            await self.record.close()

    def _file_tail(
        self, lines: int, scope_id: str | None, kind: str | None, match: EventFilter | None
    ) -> list[dict[str, Any]]:
        assert self.path is not None
        if lines <= 0 or not self.path.exists():
            return []
        events: list[dict[str, Any]] = []
        for raw in complete_lines_reversed(self.path):
            try:
                event = json.loads(raw)
            except ValueError:
                if raw.strip():
                    logger.warning("audit log %s: skipping a corrupt line", self.path)
                continue
            if not isinstance(event, dict):
                continue
            event = clean_value(event)  # a line an older halo wrote may hold what JSON responses cannot encode
            if scope_id is not None and event.get("scope_id") != scope_id:
                continue
            if kind is not None and event.get("kind") != kind:
                continue
            if match is not None and not match(event):
                continue
            events.append(event)
            if len(events) == lines:
                break
        events.reverse()
        return events
