"""The append-only transcript store and the audit log: what was said, and what was decided.

The names load on first use (PEP 562), so `transcripts.text` — the text cleaning every
boundary shares — costs a CLI command nothing of the store's file locking.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transcripts.audit import AuditLog
    from transcripts.store import TranscriptLine, TranscriptReader, TranscriptStore

__all__ = ["AuditLog", "TranscriptLine", "TranscriptReader", "TranscriptStore"]


def __getattr__(name: str) -> Any:
    if name == "AuditLog":
        from transcripts.audit import AuditLog

        return AuditLog
    if name in ("TranscriptLine", "TranscriptReader", "TranscriptStore"):
        from transcripts import store

        return getattr(store, name)
    raise AttributeError(f"module 'transcripts' has no attribute {name!r}")
