"""The model's session for a scope, read from the scope's transcript: no second store.

The Agents SDK's `Session` protocol over `TranscriptStore`. Every item the model sees is a
transcript line of its own kind (transcripts/lines.py), so what survives a crash is exactly
what was fsync'd:

- a `Message` is the person's message (`model_input` when the model is shown something
  else, e.g. `[Mom] …` in a group);
- a `Reply` is the reply the person got; `reply` `command` or `no_model` marks halo's own
  answers, kept out of the model's history with the message they answer; a `Closing` with
  `reply` `silent` closes a message that needed no answer (thanks, "ok" in a group) and
  takes it out of the history the same way; a `Notice` (the outbox's) is said by halo too;
- a `ModelItem` holds one model item: a tool call, its output, reasoning;
- a `SessionStart` starts the session again: `/new` and clear write one, compaction writes
  one with `summary` and `keep_from` (the byte offset of the first line it keeps);
- a `Pop` takes the last item back (`pop_item`).

Other lines (alerts, notes, closings with a reply left in) are not items.

The gateway appends the user's line (fsync'd) before the model is asked, sends the model
`get_items` (which leaves that line out) plus the message, and hands the run's new items to
`add_run`. (Handed to `Runner.run` as its `session`, the SDK does the same, step by step,
at about twice the cost of the run itself.) A user message handed back is recognised rather
than written twice. The model's final message is held in memory until the gateway appends
the reply line that replaces it, so a turn costs two fsyncs, plus one for its tool items.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from transcripts.lines import Closing, Message, ModelItem, Notice, Pop, Reply, SessionStart, TranscriptLine
from transcripts.store import TranscriptStore, _parse
from transcripts.tokens import estimate_tokens, fit_count

log = logging.getLogger(__name__)

OFF_THE_RECORD = frozenset({"command", "no_model", "silent"})  # halo's own answers, or none: not history
SUMMARY_PREFIX = "Summary of the earlier conversation in this chat:"
DEFAULT_CACHED_SCOPES = 256


@dataclass(slots=True)
class _Entry:
    offset: int  # of the line the item was read from
    item: dict[str, Any]
    tokens: int
    user_line: bool = False  # a person's message (a command reply takes it back out)
    summary: bool = False  # a compaction summary: never kept by a later compaction's range
    ts: datetime | None = None  # when the line was written


@dataclass(frozen=True, slots=True)
class SentHistory:
    """What the model was last sent of a scope's history: every line from `since` on, and, when
    `whole`, every line of the session (nothing cut for the budget, no summary standing in)."""

    since: datetime
    whole: bool


@dataclass(slots=True)
class _History:
    entries: list[_Entry]
    end: int  # the file size these entries account for
    over_budget: bool = False  # seen when the model last read it; compaction reads it
    sent: SentHistory | None = None  # what `get_items` last handed the model


def line_item(line: TranscriptLine) -> dict[str, Any] | None:
    """The model item a transcript line stands for, or None when it is not one."""
    if isinstance(line, Message):
        return {"role": "user", "content": line.model_input if line.model_input is not None else line.text}
    if isinstance(line, Reply):
        return None if line.reply in OFF_THE_RECORD else {"role": "assistant", "content": line.text}
    if isinstance(line, Notice):  # what the outbox sent on its own
        return {"role": "assistant", "content": line.text}
    return line.item if isinstance(line, ModelItem) else None


def summary_item(summary: str) -> dict[str, Any]:
    return {"role": "system", "content": f"{SUMMARY_PREFIX}\n{summary}"}


def _apply(history: _History, offset: int, line: TranscriptLine) -> None:
    """Fold one line into the history, the same way whether it was just appended or read back."""
    if isinstance(line, SessionStart):
        keep_from = line.keep_from
        kept = [e for e in history.entries if not e.summary and e.offset >= keep_from] if keep_from is not None else []
        if line.summary:
            item = summary_item(line.summary)
            kept.insert(0, _Entry(offset, item, estimate_tokens(item), summary=True))
        history.entries = kept
        return
    if isinstance(line, Pop):
        if history.entries:
            history.entries.pop()
        return
    if isinstance(line, Reply | Closing) and line.reply in OFF_THE_RECORD:
        if history.entries and history.entries[-1].user_line:
            history.entries.pop()  # the command and its answer both stay out
        return
    model_item = line_item(line)
    if model_item is not None:
        history.entries.append(
            _Entry(offset, model_item, estimate_tokens(model_item), user_line=isinstance(line, Message), ts=line.ts)
        )


def complete_tool_calls(items: list[Any]) -> list[Any]:
    """`items` without a tool call that has no output, or an output without its call: a run cut
    short (a crash, an error between the two) leaves one, and the model's API refuses it. A
    reasoning item goes with the call it led to."""
    calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
    outputs = {i.get("call_id") for i in items if i.get("type") == "function_call_output"}
    if calls == outputs:
        return items
    kept: list[Any] = []
    for item in items:
        kind = item.get("type")
        if (kind == "function_call" and item.get("call_id") not in outputs) or (
            kind == "function_call_output" and item.get("call_id") not in calls
        ):
            if kept and kept[-1].get("type") == "reasoning":
                kept.pop()
            continue
        kept.append(item)
    return kept


def _is_assistant_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("role") == "assistant" and item.get("type", "message") == "message"


def _describe(item: dict[str, Any]) -> str:
    """A short human line for a model item; the item itself is in the line's `item`."""
    kind = str(item.get("type") or item.get("role") or "item")
    name = item.get("name")
    return f"model {kind}: {name}" if name else f"model {kind}"


class TranscriptSessions:
    """Every scope's session, read from the transcript store, with a bounded cache of hot scopes.

    Registered as an observer of the store, so each append updates a cached history in
    memory: a turn normally reads no transcript bytes, only checks the file's size (another
    process — an import, an old gateway — may have appended; then the history is read again).
    """

    def __init__(
        self,
        transcripts: TranscriptStore,
        history_budget: int,
        cached_scopes: int = DEFAULT_CACHED_SCOPES,
        max_items: int | None = None,
    ) -> None:
        self.transcripts = transcripts
        self.budget = history_budget
        self.max_items = max_items  # the SDK's work per run grows with the items it is handed
        self.cached_scopes = cached_scopes
        self._cache: OrderedDict[str, _History] = OrderedDict()
        self._awaiting: dict[str, int] = {}  # scope -> offset of a user line no model run has taken yet
        self._held: dict[str, list[dict[str, Any]]] = {}  # the model's reply, until the reply line replaces it
        transcripts.observers.append(self)

    def get(self, scope_id: str) -> TranscriptSession:
        return TranscriptSession(self, scope_id)

    # -- kept current by the store ---------------------------------------------------

    def appended(self, scope_id: str, lines: list[tuple[int, TranscriptLine]], end_before: int, end: int) -> None:
        for offset, line in lines:
            if line.role == "user":
                self._awaiting[scope_id] = offset
            elif line.role == "assistant":
                self._awaiting.pop(scope_id, None)
                self._held.pop(scope_id, None)  # the reply the person got stands for the model's message
        history = self._cache.get(scope_id)
        if history is None:
            if end_before != 0:
                return  # read from the file when next asked
            history = self._cache[scope_id] = _History([], 0)  # a new transcript: these lines are all of it
            self._trim_cache()
        if history.end != end_before:  # bytes we have not seen: read it again when next asked
            del self._cache[scope_id]
            return
        for offset, line in lines:
            _apply(history, offset, line)
        history.end = end

    def purged(self, scope_id: str) -> None:
        self._cache.pop(scope_id, None)
        self._awaiting.pop(scope_id, None)
        self._held.pop(scope_id, None)

    # -- reading ---------------------------------------------------------------------

    async def _history(self, scope_id: str) -> _History:
        size = self.transcripts.size(scope_id)
        history = self._cache.get(scope_id)
        if history is not None and history.end == size:
            self._cache.move_to_end(scope_id)
            return history
        history = await asyncio.to_thread(self._load, scope_id) if size else _History([], 0)
        self._cache[scope_id] = history
        self._cache.move_to_end(scope_id)
        self._trim_cache()
        return history

    def _trim_cache(self) -> None:
        while len(self._cache) > self.cached_scopes:
            self._cache.popitem(last=False)

    def _load(self, scope_id: str) -> _History:
        """Read back from the end to the latest session start, or until well past the budget
        (an old transcript without markers: compaction writes one after the next turn)."""
        path, size = self.transcripts.path(scope_id), self.transcripts.size(scope_id)
        if not size:
            return _History([], 0)
        newest: list[tuple[int, TranscriptLine]] = []
        start: tuple[int, SessionStart] | None = None
        tokens, cap = 0, 2 * self.budget
        for offset, raw in self.transcripts.raw_reversed(scope_id):
            if offset >= size:
                continue  # appended since the size was taken: the next read sees it
            line = _parse(path, raw, offset)
            if line is None:
                continue
            if isinstance(line, SessionStart):
                start = (offset, line)
                break
            newest.append((offset, line))
            if (item := line_item(line)) is not None:
                tokens += estimate_tokens(item)
                if tokens > cap:
                    break
        history = _History([], size)
        if start is not None:
            start_offset, start_line = start
            _apply(history, start_offset, start_line)
            keep_from = start_line.keep_from
            if keep_from is not None and keep_from < start_offset:
                reader = self.transcripts.read_from(scope_id, keep_from)
                for offset, line in reader:
                    if offset >= start_offset:
                        break
                    if not isinstance(line, SessionStart):
                        _apply(history, offset, line)
                reader.close()
        for offset, line in reversed(newest):
            _apply(history, offset, line)
        return history

    async def get_items(self, scope_id: str, limit: int | None = None) -> list[TResponseInputItem]:
        """What the model is sent: the newest items that fit the budget. A user line no run has
        taken yet is left out: the SDK adds it as the turn's input."""
        history = await self._history(scope_id)
        entries = history.entries
        if entries and entries[-1].user_line and self._awaiting.get(scope_id) == entries[-1].offset:
            entries = entries[:-1]
        held = self._held.get(scope_id, [])
        items: list[Any] = [e.item for e in entries] + held
        costs = [e.tokens for e in entries] + [estimate_tokens(i) for i in held]
        total = len(items)
        if limit is not None:
            items, costs = (items[-limit:], costs[-limit:]) if limit > 0 else ([], [])
        n = fit_count(items, self.budget, costs)
        history.over_budget = n < len(items)  # compaction is about tokens; the item cap only trims what is sent
        if self.max_items is not None and n > self.max_items:
            n = fit_count(items[-self.max_items :], self.budget, costs[-self.max_items :])  # from a turn's start
        sent = complete_tool_calls(items[len(items) - n :])
        first = total - n  # the first entry sent: what is sent is always the newest n
        oldest = next((e.ts for e in entries[first:] if not e.summary and e.ts is not None), None)
        whole = first == 0 and not any(e.summary for e in entries)
        history.sent = SentHistory(oldest, whole) if oldest is not None else None
        return [cast(TResponseInputItem, dict(i)) for i in sent]  # copies: not the cache

    def sent_history(self, scope_id: str) -> SentHistory | None:
        """What the last `get_items` for the scope handed the model (None: no history), so the
        context need not repeat it (halo/context/memory.py leaves those daily notes out)."""
        history = self._cache.get(scope_id)
        return history.sent if history is not None else None

    async def take_up_last_message(self, scope_id: str) -> bool:
        """After a restart: the scope's last item is a person's message no run answered. The next
        run takes it as its input again instead of seeing it twice (halo/pipeline/missed.py)."""
        history = await self._history(scope_id)
        if history.entries and history.entries[-1].user_line:
            self._awaiting[scope_id] = history.entries[-1].offset
            return True
        return False

    async def all_items(self, scope_id: str) -> list[TResponseInputItem]:
        """Every item of the current session, budget or not."""
        history = await self._history(scope_id)
        items = [*(e.item for e in history.entries), *self._held.get(scope_id, [])]
        return [cast(TResponseInputItem, dict(i)) for i in items]

    def over_budget(self, scope_id: str) -> bool:
        history = self._cache.get(scope_id)
        return history is not None and history.over_budget

    async def item_counts(self) -> dict[str, int]:
        """Items in each scope's current session (every scope with a transcript)."""
        scope_ids = await asyncio.to_thread(self.transcripts.scope_ids)
        counts: dict[str, int] = {}
        for scope_id in scope_ids:
            history = self._cache.get(scope_id)
            if history is None:  # read it, but a listing does not push hot scopes out of the cache
                history = await asyncio.to_thread(self._load, scope_id)
            counts[scope_id] = len(history.entries)
        return counts

    # -- writing ---------------------------------------------------------------------

    async def add_items(self, scope_id: str, items: list[TResponseInputItem]) -> None:
        items = list(items)
        if items and self._is_awaited_input(scope_id, items[0]):
            del self._awaiting[scope_id]  # already in the transcript: the gateway wrote it first
            items = items[1:]
        if not items:
            return
        batch = self._held.pop(scope_id, []) + [dict(i) for i in items]
        if all(_is_assistant_message(i) for i in batch):
            self._held[scope_id] = batch  # the reply line will stand for it
            return
        await self._write_items(scope_id, batch)

    async def add_run(self, scope_id: str, items: list[TResponseInputItem]) -> None:
        """A whole run's new items (the gateway's): its tool calls, their outputs and reasoning
        are written in one append; its closing message is held for the reply line."""
        closing = len(items)
        while closing and _is_assistant_message(items[closing - 1]):
            closing -= 1
        await self.add_items(scope_id, items[:closing])
        await self.add_items(scope_id, items[closing:])

    def _is_awaited_input(self, scope_id: str, item: Any) -> bool:
        offset = self._awaiting.get(scope_id)
        history = self._cache.get(scope_id)
        if offset is None or history is None or not isinstance(item, dict) or item.get("role") != "user":
            return False
        last = history.entries[-1] if history.entries else None
        # the same message, though the run may show it differently: with a photo as image input
        # (halo/media/images.py), or rebuilt from its line after a crash (halo/pipeline/missed.py)
        return last is not None and last.offset == offset

    async def _write_items(self, scope_id: str, items: list[dict[str, Any]]) -> None:
        now = datetime.now(UTC)
        await self.transcripts.append_many(
            [
                ModelItem(
                    *_halo(scope_id, now, _describe(item)), speaker="halo", platform=_platform(scope_id), item=item
                )
                for item in items
            ]
        )

    async def settle(self, scope_id: str) -> None:
        """End of a turn: a model message no reply line replaced (there should be none) is written."""
        if held := self._held.pop(scope_id, None):
            await self._write_items(scope_id, held)

    async def pop_item(self, scope_id: str) -> TResponseInputItem | None:
        if held := self._held.get(scope_id):
            item = held.pop()
            if not held:
                del self._held[scope_id]
            return item  # type: ignore[return-value]
        history = await self._history(scope_id)
        if not history.entries:
            return None
        item = dict(history.entries[-1].item)
        taken_back = Pop(
            *_halo(scope_id, datetime.now(UTC), "session: last item taken back"),
            speaker="halo",
            platform=_platform(scope_id),
        )
        await self.transcripts.append(taken_back)
        return item  # type: ignore[return-value]

    async def clear(self, scope_id: str, *, why: str = "session cleared") -> None:
        """Start the session again (`/new`, admin clear); the transcript keeps everything."""
        self._held.pop(scope_id, None)
        await self.transcripts.append(
            SessionStart(*_halo(scope_id, datetime.now(UTC), why), speaker="halo", platform=_platform(scope_id))
        )

    async def compact(self, scope_id: str, summarise: Any | None) -> bool:
        """When the session outgrows the budget, start it again from its newer half, with a
        summary of the older part (model configured) or without. Returns whether it did."""
        history = await self._history(scope_id)
        entries = list(history.entries)
        if sum(e.tokens for e in entries) <= self.budget:
            return False
        keep = fit_count([e.item for e in entries], self.budget // 2, [e.tokens for e in entries])
        older = [e.item for e in entries[: len(entries) - keep]]
        summary = ""
        if summarise is not None and older:
            try:
                summary = (await summarise(older)).strip()
            except Exception:  # a failed summary must not lose the chat: fall back to dropping
                log.warning("summarising %s failed; dropping oldest items instead", scope_id, exc_info=True)
        text = "session compacted" + (" with a summary" if summary else "")
        start = SessionStart(
            *_halo(scope_id, datetime.now(UTC), text),
            speaker="halo",
            platform=_platform(scope_id),
            keep_from=entries[len(entries) - keep].offset if keep else None,
            summary=summary or None,
        )
        await self.transcripts.append(start)
        return True


def _platform(scope_id: str) -> str | None:
    return scope_id.split(":", 1)[0] if ":" in scope_id else None


def _halo(scope_id: str, ts: datetime, text: str) -> tuple[str, datetime, str, str]:
    """A new line of halo's own in the scope: its id, time, scope and text."""
    return uuid.uuid4().hex, ts, scope_id, text


class TranscriptSession:
    """One scope's session as the Agents SDK sees it (its `Session` protocol)."""

    session_settings: SessionSettings | None = None

    def __init__(self, sessions: TranscriptSessions, scope_id: str) -> None:
        self.sessions = sessions
        self.session_id = scope_id

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.sessions.get_items(self.session_id, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await self.sessions.add_items(self.session_id, items)

    async def pop_item(self) -> TResponseInputItem | None:
        return await self.sessions.pop_item(self.session_id)

    async def clear_session(self) -> None:
        await self.sessions.clear(self.session_id)

    @property
    def over_budget(self) -> bool:
        return self.sessions.over_budget(self.session_id)
