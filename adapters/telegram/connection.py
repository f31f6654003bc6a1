"""The plumbing under the adapter: connection health, per-chat ordering, a token-free log.

- `TrackedRequest` records whether the last Bot API call got through, so /status can say
  "unreachable since …" without a probe of its own.
- `PerChatOrder` lets python-telegram-bot handle different chats concurrently while each
  chat's updates run one at a time in arrival order (replies go out in order too).
- The bot token is part of every Bot API URL; `hide_token_in_logs` keeps it out of log
  lines written by httpx and python-telegram-bot, at any level.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from telegram import Update
from telegram.error import NetworkError, TelegramError
from telegram.ext import BaseUpdateProcessor
from telegram.request import HTTPXRequest

from memory.redact import redact

TOKEN_MARK = "<bot-token>"


@dataclass(slots=True)
class Health:
    connected: bool = False
    last_ok_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    on_back: Callable[[], None] | None = None  # called when Telegram answers again after an error

    def ok(self) -> None:
        back = not self.connected and self.last_error is not None
        self.connected = True
        self.last_ok_at = time.time()
        if back and self.on_back is not None:
            self.on_back()

    def failed(self, error: str) -> None:
        self.connected = False
        self.last_error = error
        self.last_error_at = time.time()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for the process: httpx loads the CA bundle for each client it makes
    (~60 ms), and the adapter makes two (getUpdates and the rest), again after each restart of it."""
    return httpx.create_ssl_context()


class TrackedRequest(HTTPXRequest):
    """HTTPXRequest that tells `Health` whether each call reached Telegram."""

    def __init__(self, health: Health, describe: Any, **kwargs: Any) -> None:
        kwargs["httpx_kwargs"] = {"verify": _tls_context(), **(kwargs.get("httpx_kwargs") or {})}
        super().__init__(**kwargs)
        self._health = health
        self._describe = describe

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        try:
            result = await super().do_request(*args, **kwargs)
        except TelegramError as exc:
            self._health.failed(self._describe(exc))
            raise
        self._health.ok()
        return result


class PollingRequest(TrackedRequest):
    """The getUpdates request, asked only while `may_poll()` says this process serves the family:
    one thawed after a long pause must not take updates beside the process that took over."""

    def __init__(self, health: Health, describe: Any, may_poll: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(health, describe, **kwargs)
        self._may_poll = may_poll

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        if not self._may_poll():
            raise NetworkError("not polling: this process does not hold its family now")
        return await super().do_request(*args, **kwargs)


class PerChatOrder(BaseUpdateProcessor):
    """Concurrent across chats, sequential within one: an update waits for the previous
    update of its chat. Locks are taken in arrival order, and asyncio locks are fair."""

    def __init__(self, max_concurrent_updates: int) -> None:
        super().__init__(max_concurrent_updates)
        self._locks: dict[int, asyncio.Lock] = {}
        self._users: dict[int, int] = {}

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is None:
            await coroutine
            return
        lock = self._locks.setdefault(chat.id, asyncio.Lock())
        self._users[chat.id] = self._users.get(chat.id, 0) + 1
        try:
            async with lock:
                await coroutine
        finally:
            self._users[chat.id] -= 1
            if not self._users[chat.id]:  # nobody waiting: do not keep a lock per chat forever
                del self._users[chat.id], self._locks[chat.id]

    async def initialize(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None


class _HideToken(logging.Filter):
    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = message.replace(self.token, TOKEN_MARK), None
        if record.exc_info and record.exc_info[1] is not None and self.token in str(record.exc_info[1]):
            record.msg = f"{record.msg} ({type(record.exc_info[1]).__name__}, details hidden: they name the token)"
            record.exc_info, record.exc_text = None, None
        return True


def hide_token_in_logs(token: str) -> None:
    """Filter every httpx, httpcore, python-telegram-bot and adapter logger (a filter acts
    on the logger a record is made by), and keep httpx's per-request INFO line, which
    carries the URL, out of the log unless someone asks for it."""
    names = ["httpx", "httpcore", "telegram"] + [
        name
        for name in logging.root.manager.loggerDict
        if name.startswith(("telegram.", "httpcore.", "httpx.", "adapters.telegram"))
    ]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _HideToken) and f.token == token for f in logger.filters):
            logger.addFilter(_HideToken(token))
    httpx_logger = logging.getLogger("httpx")
    if httpx_logger.level == logging.NOTSET:
        httpx_logger.setLevel(logging.WARNING)


def describer(token: str) -> Any:
    """An error as text for /status and the audit log: no token, no other obvious secret."""

    def describe(exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}".replace(token, TOKEN_MARK)
        return redact(text)[:300]

    return describe
