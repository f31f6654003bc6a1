"""Delivering queued messages: in order per chat, retried until Telegram takes them.

A 429 waits as long as Telegram says; a network error backs off and tries again a few
times; a message that still has not gone out stays queued and a background loop tries
it again later (with growing pauses), also after a restart. Only a refusal that no retry
can fix (the user blocked the bot, the chat is gone) marks a message failed — kept, shown
in /status and audited, never silently lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from telegram import Bot, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from adapters.telegram.format import to_html
from adapters.telegram.store import Queued, TelegramStore
from transcripts import AuditLog

log = logging.getLogger(__name__)

MAX_INLINE_WAIT = 30.0  # a longer 429 pause is waited out by the background loop instead
MAX_PAUSE = 300.0


class Outbox:
    def __init__(
        self,
        store: TelegramStore,
        bot: Bot,
        audit: AuditLog,
        *,
        retries: int,
        backoff: float,
        describe: Callable[[BaseException], str],
    ) -> None:
        self.store = store
        self.bot = bot
        self.audit = audit
        self.retries = retries
        self.backoff = backoff
        self.describe = describe  # error text without secrets
        self.counts = {"pending": 0, "failed": 0}
        self._locks: dict[int, asyncio.Lock] = {}
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._flushes: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Retry in the background from now on (including whatever a previous run left queued)."""
        if self._loop is None:
            self._loop = asyncio.create_task(self._retry_loop(), name="telegram-outbox")

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    def flush_soon(self, chat_id: int) -> None:
        task = asyncio.create_task(self.flush(chat_id))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def flush(self, chat_id: int) -> None:
        """Send the chat's due messages, oldest first, stopping at one that has to wait."""
        lock = self._locks.setdefault(chat_id, asyncio.Lock())
        async with lock:
            while (message := await self.store.next_for(chat_id, time.time())) is not None:
                if not await self._deliver(message):
                    self._wake.set()
                    break
        self.counts = await self.store.counts()

    async def _deliver(self, message: Queued) -> bool:
        """Send one message. False when it has to wait (it stays queued, due later)."""
        attempt = 0
        while True:
            try:
                await self._send(message)
            except RetryAfter as exc:
                pause = _retry_after(exc)
                if pause > MAX_INLINE_WAIT or attempt >= self.retries:
                    later = time.time() + max(pause, self.backoff)
                    await self.store.retry_later(message.id, self.describe(exc), later)
                    return False
                log.info("Telegram asks to wait %.0fs before sending to %s", pause, message.chat_id)
                await asyncio.sleep(pause)
            except ChatMigrated as exc:  # a group became a supergroup: same chat, new id
                await self.store.change(message.id, chat_id=exc.new_chat_id)
                message = replace(message, chat_id=exc.new_chat_id)
            except BadRequest as exc:
                if not message.plain and "parse entities" in exc.message.lower():
                    await self.store.change(message.id, plain=True)
                    message = replace(message, plain=True)
                    continue
                await self._give_up(message, exc)
                return True
            except Forbidden as exc:
                await self._give_up(message, exc)
                return True
            except (NetworkError, InvalidToken, TelegramError) as exc:
                if attempt >= self.retries:
                    pause = min(self.backoff * 2 ** (message.attempts + attempt), MAX_PAUSE)
                    log.warning(
                        "sending to %s failed, retrying in %.0fs: %s", message.chat_id, pause, self.describe(exc)
                    )
                    await self.store.retry_later(message.id, self.describe(exc), time.time() + pause)
                    return False
                await asyncio.sleep(self.backoff * 2**attempt)
            else:
                await self.store.delivered(message.id)
                return True
            attempt += 1

    async def _send(self, message: Queued) -> None:
        await self.bot.send_message(
            chat_id=message.chat_id,
            text=message.text if message.plain else to_html(message.text),
            parse_mode=None if message.plain else ParseMode.HTML,
            reply_parameters=(
                ReplyParameters(message.reply_to, allow_sending_without_reply=True) if message.reply_to else None
            ),
        )

    async def _give_up(self, message: Queued, exc: TelegramError) -> None:
        error = self.describe(exc)
        await self.store.failed(message.id, error)
        log.warning("Telegram refused a message to %s, kept as failed: %s", message.chat_id, error)
        self.audit.write("telegram_delivery_failed", chat_id=message.chat_id, outbox_id=message.id, error=error)

    async def _retry_loop(self) -> None:
        while True:
            self._wake.clear()
            chats, due = await self.store.waiting()
            self.counts = await self.store.counts()
            now = time.time()
            if due is not None and due <= now:
                for chat_id in chats:
                    await self.flush(chat_id)  # leaves only messages due later
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), None if due is None else due - now)


def _retry_after(exc: RetryAfter) -> float:
    """Seconds to wait, whether this PTB version gives an int or a timedelta."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)  # the int form is deprecated, not wrong
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
