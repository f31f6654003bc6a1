"""One scope's memory: MEMORY.md and daily notes (through the `MemoryStore`), and scope.json.

`memory/scopes/<scope hash>/` is named by a hash, so `scope.json` (a file in HALO_HOME on
either store, rewritten from the config) says whose folder it is. All writes of a scope
happen under its lock; these methods block and are meant to run in a worker thread.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

from config.paths import HaloPaths
from memory import daily, facts
from memory.files import Transform, atomic_write, read_text, remove_stale_temps
from memory.markdown import append_to_section
from memory.store import DiskMemory, MemoryStore, daily_md, memory_md, scope_folder

MAX_LOG_ENDS = 4096


@dataclass(frozen=True, slots=True)
class ScopeInfo:
    """What scope.json says: which chat this folder belongs to, and who talks there."""

    scope_id: str
    scope_type: str = "unknown"
    owner: str | None = None
    members: list[str] = field(default_factory=list)
    description: str = "this chat"

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2) + "\n"


Describe = Callable[[str], ScopeInfo]


class ScopeFiles:
    """`store`: where the memory is kept (files by default; rows on PostgreSQL)."""

    def __init__(self, paths: HaloPaths, describe: Describe | None = None, store: MemoryStore | None = None) -> None:
        self.paths = paths
        self.store: MemoryStore = store if store is not None else DiskMemory(paths.home)
        self.describe = describe or (lambda scope_id: ScopeInfo(scope_id))
        self._ready: set[str] = set()
        self._info: dict[str, ScopeInfo] = {}
        self._log_ends: dict[str, int] = {}  # daily file -> its size after our last log append

    def lock(self, scope_id: str) -> AbstractContextManager[object]:
        return self.store.lock(scope_id)

    def info(self, scope_id: str) -> ScopeInfo:
        """What the scope is, asked once per process (it asks the policy about every member)."""
        if (info := self._info.get(scope_id)) is None:
            info = self._info[scope_id] = self.describe(scope_id)
        return info

    def ensure(self, scope_id: str) -> None:
        """Once per process and scope (under its lock): scope.json up to date, crash leftovers gone."""
        if scope_id in self._ready:
            return
        folder = self.paths.scope_dir(scope_id)
        remove_stale_temps(folder)
        path = self.paths.scope_json(scope_id)
        text = self.info(scope_id).to_json()
        if read_text(path) != text:
            atomic_write(path, text, durable=False)  # rewritten from the config whenever it differs
        self._ready.add(scope_id)

    def purge(self, scope_id: str) -> bool:
        """Delete what memory keeps of a scope (MEMORY.md, its sidecar, daily notes, documents,
        scope.json); other files in the folder (the semantic index) belong to their owners.
        True if any existed."""
        folder = self.paths.scope_dir(scope_id)
        existed = folder.exists()  # before the lock: a file lock makes the folder
        with self.lock(scope_id):
            existed = self.store.delete_under(scope_folder(scope_id)) > 0 or existed  # the rows too, held or not
            if folder.exists():
                self.paths.scope_json(scope_id).unlink(missing_ok=True)
                shutil.rmtree(folder / "daily", ignore_errors=True)
                remove_stale_temps(folder)
        if folder.exists():
            (folder / ".lock").unlink(missing_ok=True)
            if not any(folder.iterdir()):
                folder.rmdir()
        self.forget_scope(scope_id)
        return existed

    def refreshed(self, scope_id: str) -> None:
        """Its files were loaded again from the store of record: what this process remembered
        of them (scope.json written, the daily logs' ends) no longer holds."""
        prefix = scope_folder(scope_id)
        self._ready.discard(scope_id)
        for relative in list(self._log_ends):  # a copy: other scopes' writers add to it meanwhile
            if relative.startswith(prefix):
                self._log_ends.pop(relative, None)

    def forget_scope(self, scope_id: str) -> None:
        """After a purge, or when the family changed: describe the scope afresh next time."""
        self._ready.discard(scope_id)
        self._info.pop(scope_id, None)

    # --- MEMORY.md -------------------------------------------------------------------

    def memory_path(self, scope_id: str) -> str:
        """MEMORY.md's path relative to HALO_HOME (`store.where` says where a person finds it)."""
        return memory_md(scope_id)

    def memory_text(self, scope_id: str) -> str:
        return self.store.text(memory_md(scope_id)) or ""

    def memory_header(self, scope_id: str) -> str:
        return facts.memory_header(scope_id, self.info(scope_id).description)

    def update_memory(self, scope_id: str, transform: Transform) -> tuple[str, str]:
        return self.store.update(memory_md(scope_id), transform)

    # --- daily notes -----------------------------------------------------------------

    def daily_path(self, scope_id: str, day: date) -> str:
        return daily_md(scope_id, day)

    def add_daily(
        self,
        scope_id: str,
        day: date,
        section: str,
        lines: list[str],
        dedupe: bool,
        durable: bool = True,
    ) -> None:
        """Append lines to a section of that day's file; `dedupe` skips lines already there."""
        header = daily.daily_header(day, scope_id)

        def change(text: str) -> str:
            if dedupe:
                return daily.add_lines(text, section, lines, header)
            return append_to_section(text, section, lines, header)

        self.store.update(daily_md(scope_id, day), change, durable=durable)

    def log_daily(self, scope_id: str, day: date, lines: list[str]) -> None:
        """The `[user]`/`[halo]` lines: a plain append when the file ends in its Transcript section
        (the usual case; unread when only our own appends came since), else a rewrite that puts
        them there."""
        path = daily_md(scope_id, day)
        block = "\n".join(lines) + "\n"
        ends = self._log_ends.pop(path, None)
        stamp = self.store.stamp(path) if ends is not None else None
        if stamp is not None and stamp.size == ends:  # nothing but our own appends since: no need to read it
            self._remember_log_end(path, self.store.append(path, block))
            return
        text = self.store.text(path) or ""
        if text.endswith("\n") and daily.ends_in_section(text, daily.TRANSCRIPT):
            self._remember_log_end(path, self.store.append(path, block))
        else:
            self.add_daily(scope_id, day, daily.TRANSCRIPT, lines, dedupe=False, durable=False)

    def _remember_log_end(self, path: str, size: int) -> None:
        if len(self._log_ends) >= MAX_LOG_ENDS:  # yesterday's files and quiet scopes: read once more
            self._log_ends.clear()
        self._log_ends[path] = size

    def forget_in_daily(self, scope_id: str, query: str, only_of: str | None) -> int:
        """ "Forget" reaches the daily files too: matching note and log lines are removed."""
        removed = 0
        for path in self.store.names(scope_folder(scope_id) + "daily/"):
            before, after = self.store.update(path, lambda text: daily.forget(text, query, only_of)[0])
            removed += before.count("\n") - after.count("\n")
        return removed


def scope_ids_on_disk(scopes_root: Path) -> set[str]:
    """The scopes that have a memory folder here; each folder's `scope.json` names its scope
    (docs/ARCHITECTURE.md, "HALO_HOME")."""
    found: set[str] = set()
    if not scopes_root.is_dir():
        return found
    for folder in scopes_root.iterdir():
        try:
            data = json.loads((folder / "scope.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        scope_id = data.get("scope_id") or data.get("id")
        if isinstance(scope_id, str):
            found.add(scope_id)
    return found
