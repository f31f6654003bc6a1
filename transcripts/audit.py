"""The append-only audit log, `logs/events.jsonl`: what was decided, for whom, and why.

Parents read it (admin API `/events/tail`), so it must never hold a secret: keys that look
like credentials are dropped before a line is written, however deep they sit.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

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


class AuditLog:
    """Appends one JSON object a line; never raises, because auditing must not break a conversation."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        """Append `{"ts", "kind", **fields}` (secrets dropped). Safe from threads and the event loop."""
        record: dict[str, Any] = {"ts": datetime.now(UTC).isoformat(), "kind": kind}
        for key, value in drop_secrets(fields).items():
            record.setdefault(key, value)
        text = json.dumps(record, ensure_ascii=False, default=_json_default) + "\n"
        data = clean_text(text).encode("utf-8")  # a lone surrogate must not cost the event
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                append_line(self.path, data)
        except OSError:
            logger.exception("audit log %s: could not write a %r event", self.path, kind)

    def tail(
        self,
        lines: int,
        scope_id: str | None = None,
        kind: str | None = None,
        match: Callable[[dict[str, Any]], bool] | None = None,
    ) -> list[dict[str, Any]]:
        """The last `lines` events (oldest first) matching the filters, read from the end of the file.
        `match` is for filters the keyword arguments cannot say (an event *about* a scope)."""
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
