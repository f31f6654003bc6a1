"""The HALO_HOME layout: every path halo writes is derived here, in one place."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path


def scope_hash(scope_id: str) -> str:
    """The only form of a scope id used in file paths: 16 hex chars of sha256."""
    return hashlib.sha256(scope_id.encode("utf-8")).hexdigest()[:16]


def default_home() -> Path:
    return Path(os.environ.get("HALO_HOME") or Path.home() / ".halo").expanduser()


@dataclass(frozen=True, slots=True)
class HaloPaths:
    home: Path

    @property
    def config_file(self) -> Path:
        return self.home / "halo.yaml"

    @property
    def soul(self) -> Path:
        return self.home / "SOUL.md"

    @property
    def policies(self) -> Path:
        return self.home / "policies"

    @property
    def transcripts(self) -> Path:
        return self.home / "transcripts"

    @property
    def halo_db(self) -> Path:
        return self.home / "halo.db"

    @property
    def events_log(self) -> Path:
        return self.home / "logs" / "events.jsonl"

    @property
    def logins(self) -> Path:
        """One-time dashboard login links (halo/web_auth.py)."""
        return self.home / "logins"

    @property
    def backups(self) -> Path:
        return self.home / "backups"

    @property
    def members(self) -> Path:
        return self.home / "members"

    def user_file(self, member_id: str) -> Path:
        return self.members / member_id / "USER.md"

    @property
    def scopes(self) -> Path:
        return self.home / "memory" / "scopes"

    def scope_dir(self, scope_id: str) -> Path:
        return self.scopes / scope_hash(scope_id)

    def memory_file(self, scope_id: str) -> Path:
        return self.scope_dir(scope_id) / "MEMORY.md"

    def memory_meta(self, scope_id: str) -> Path:
        """The sidecar keeping what MEMORY.md's rendering leaves out (confidence, evidence, source)."""
        return self.scope_dir(scope_id) / "MEMORY.meta.json"

    def daily_file(self, scope_id: str, day: date) -> Path:
        return self.scope_dir(scope_id) / "daily" / f"{day.isoformat()}.md"

    def scope_json(self, scope_id: str) -> Path:
        return self.scope_dir(scope_id) / "scope.json"

    def transcript(self, scope_id: str) -> Path:
        return self.transcripts / f"{scope_hash(scope_id)}.jsonl"

    def ensure(self) -> None:
        """Create the folders halo writes into (first start, idempotent), 0700."""
        for folder in (
            self.home,
            self.transcripts,
            self.events_log.parent,
            self.members,
            self.scopes,
            self.policies,
        ):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
