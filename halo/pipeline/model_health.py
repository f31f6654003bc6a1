"""The model's last failure, until a call succeeds: what `/status` names as a problem.

The audit log keeps every failure; this keeps only whether the model works now, so a parent
sees "the model is failing" on the dashboard without reading the log.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class ModelHealth:
    last_error: str | None = None  # redacted, as the audit log has it
    last_error_at: float | None = None  # time.time()

    def failed(self, error: str) -> None:
        self.last_error, self.last_error_at = error, time.time()

    def succeeded(self) -> None:
        self.last_error = self.last_error_at = None
