"""Per-scope conversation state: the Agents SDK's SQLAlchemySession, cut to a token budget.

The session is derived state. The transcript is the source of truth, so clearing or
compacting a session never touches it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.items import TResponseInputItem
from agents.memory import SessionABC
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from transcripts.text import clean_value

log = logging.getLogger(__name__)

Summariser = Callable[[list[TResponseInputItem]], Awaitable[str]]
QUERY_CACHE_SIZE = 8192
SUMMARY_PREFIX = "Summary of the earlier conversation in this chat:"


def estimate_tokens(item: Any) -> int:
    """About four characters a token: cheap, provider-neutral, good enough for a budget."""
    return max(1, len(json.dumps(item, ensure_ascii=False, default=str)) // 4)


def _starts_turn(item: TResponseInputItem) -> bool:
    return isinstance(item, dict) and item.get("role") in ("user", "system")


def fit_to_budget(items: list[TResponseInputItem], budget: int) -> list[TResponseInputItem]:
    """The newest items that fit in `budget` tokens, starting on a turn boundary so that
    a tool call is never separated from its output."""
    total, start = 0, len(items)
    for i in range(len(items) - 1, -1, -1):
        total += estimate_tokens(items[i])
        if total > budget:
            break
        start = i
    while start < len(items) and not _starts_turn(items[start]):
        start += 1
    return items[start:]


class BudgetedSession(SessionABC):
    """Hands the model only the history that fits the budget; everything stays stored.

    Each scope has exactly one writer (one gateway process per scope), so the items are
    cached after the first load and new items are written behind in one batch per turn
    (`flush`), off the reply path. A crash can lose only unflushed derived state; the
    fsync'd transcript keeps every message.
    """

    def __init__(self, inner: SQLAlchemySession, budget: int) -> None:
        self.session_id = inner.session_id
        self.session_settings = inner.session_settings
        self.inner = inner
        self.budget = budget
        self.over_budget = False  # seen when history was last loaded; compaction reads it
        self._items: list[TResponseInputItem] | None = None
        self._pending: list[TResponseInputItem] = []
        self._flush_lock = asyncio.Lock()

    async def _loaded(self) -> list[TResponseInputItem]:
        if self._items is None:
            self._items = await self.inner.get_items()
        return self._items

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = await self._loaded()
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        fitted = fit_to_budget(items, self.budget)
        self.over_budget = len(fitted) < len(items)
        return list(fitted)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        # a lone surrogate (a user's or the model's) would fail every later flush and model call
        items = clean_value(items)
        (await self._loaded()).extend(items)
        self._pending.extend(items)

    async def flush(self) -> None:
        """Write pending items in one transaction, in order."""
        async with self._flush_lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, []
            try:
                await self.inner.add_items(batch)
            except Exception:
                self._pending[:0] = batch  # keep them for the next flush
                raise

    async def pop_item(self) -> TResponseInputItem | None:
        await self.flush()
        item = await self.inner.pop_item()
        if item is not None and self._items:
            self._items.pop()
        return item

    async def clear_session(self) -> None:
        async with self._flush_lock:
            self._pending = []
            self._items = []
            await self.inner.clear_session()

    async def all_items(self) -> list[TResponseInputItem]:
        return list(await self._loaded())


def _sqlite_derived_state_pragmas(dbapi_connection: Any, _: Any) -> None:
    """Sessions are derived state: the fsync'd transcript is the truth. In WAL mode,
    synchronous=NORMAL keeps the database consistent after a crash and skips an fsync per
    commit (2.4 ms → 0.3 ms a write here); at worst the last items are rebuilt from it."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
    finally:
        cursor.close()


class SessionStore:
    """One engine for all scopes; one budgeted session per scope id."""

    def __init__(self, url: str | None, sqlite_path: Path, history_budget: int) -> None:
        if url is None:
            sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite+aiosqlite:///{sqlite_path}"
        self.url = url
        # Each SQLAlchemySession builds its own Table objects, so compiled statements are
        # cached per scope: size the cache for many active scopes (~5 statements each).
        self.engine: AsyncEngine = create_async_engine(url, query_cache_size=QUERY_CACHE_SIZE)
        # SQLite has one writer at a time: concurrent flushes would meet "database is locked"
        # and the SDK's sleep-and-retry. Taking turns in-process is far cheaper.
        self._write_turns: asyncio.Lock | None = None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine.sync_engine, "connect", _sqlite_derived_state_pragmas)
            self._write_turns = asyncio.Lock()
        self.budget = history_budget
        self._sessions: dict[str, BudgetedSession] = {}

    def get(self, scope_id: str) -> BudgetedSession:
        session = self._sessions.get(scope_id)
        if session is None:
            inner = SQLAlchemySession(scope_id, engine=self.engine, create_tables=True, ensure_ascii=False)
            session = self._sessions[scope_id] = BudgetedSession(inner, self.budget)
        return session

    async def clear(self, scope_id: str) -> None:
        await self.get(scope_id).clear_session()

    async def all_items(self, scope_id: str) -> list[TResponseInputItem]:
        return await self.get(scope_id).all_items()

    async def flush(self, scope_id: str | None = None) -> None:
        """Write behind: one scope's pending items, or every scope's (shutdown)."""
        targets = [self._sessions[scope_id]] if scope_id in self._sessions else []
        if scope_id is None:
            targets = list(self._sessions.values())
        for session in targets:
            if self._write_turns is None:
                await session.flush()
            else:
                async with self._write_turns:
                    await session.flush()

    async def item_counts(self) -> dict[str, int]:
        """Stored items per scope id (every scope that has a session)."""
        await self.flush()
        await self.get("__init__").inner._ensure_tables()  # tables exist before the first chat
        async with self.engine.connect() as conn:
            rows = await conn.execute(text("SELECT session_id, COUNT(*) FROM agent_messages GROUP BY session_id"))
            return {sid: n for sid, n in rows if sid != "__init__"}

    async def compact(self, scope_id: str, summarise: Summariser | None) -> bool:
        """When stored history outgrows the budget, fold the older part into one summary
        item (model configured) or drop it oldest-first. Returns whether anything changed."""
        items = await self.all_items(scope_id)
        if sum(estimate_tokens(i) for i in items) <= self.budget:
            return False
        keep = fit_to_budget(items, self.budget // 2)
        older = items[: len(items) - len(keep)]
        replacement = list(keep)
        if summarise is not None and older:
            try:
                summary = (await summarise(older)).strip()
            except Exception:  # a failed summary must not lose the chat: fall back to dropping
                log.warning("summarising %s failed; dropping oldest items instead", scope_id, exc_info=True)
                summary = ""
            if summary:
                replacement.insert(0, {"role": "system", "content": f"{SUMMARY_PREFIX}\n{summary}"})
        session = self.get(scope_id)
        await session.clear_session()
        if replacement:
            await session.add_items(replacement)
        return True

    async def close(self) -> None:
        await self.flush()
        await self.engine.dispose()
