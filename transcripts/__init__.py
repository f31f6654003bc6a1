"""The append-only transcript store and the audit log: what was said, and what was decided."""

from transcripts.audit import AuditLog
from transcripts.store import TranscriptLine, TranscriptReader, TranscriptStore

__all__ = ["AuditLog", "TranscriptLine", "TranscriptReader", "TranscriptStore"]
