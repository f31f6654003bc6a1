"""What a Telegram chat shows while halo works on a message: 👀 on it, "typing…", and in a
private chat the reply streaming into a draft (`sendMessageDraft`).

All of it is chrome, never the reply: the reply is a message halo's outbox sends, and the
draft is only its preview. The draft is updated at most every `telegram.draft_interval_ms`,
and only when the text grew. A draft Telegram refuses (an older client, a rate limit) falls
back to "typing…"; nothing of the reply is lost, since the message carries it whole. Groups
get "typing…" and whole messages. halo streams no guarded (child's) turn: its reply is
checked whole before anything of it is shown (halo/pipeline/gateway.py), so no draft ever
shows words the check would stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from telegram import ReactionTypeEmoji
from telegram.constants import ChatAction, ParseMode
from telegram.error import TelegramError

from adapters.telegram.format import split_message, to_html

if TYPE_CHECKING:
    from telegram import Bot

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0  # Telegram shows "typing…" for about five seconds per action
SEEN = "👀"


class ChatProgress:
    """`halo.port.Progress` for one Telegram message. `finish(text)` when the reply goes (the
    adapter's `send`), `stop()` when halo is done with the message."""

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        private: bool,
        message_id: int | None,
        draft_every: float | None,
        react: bool,
    ) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.message_id = message_id
        self.draft_every = draft_every if private else None  # drafts exist in private chats only
        self.react = react and private and message_id is not None
        self.draft_id = (message_id or 0) % 2**31 or 1  # non-zero; one draft per message answered
        self.streamed = ""  # the reply's text as the model wrote it so far
        self.drafted = ""  # what the last draft showed
        self.drafts_failed = False
        self._grew = asyncio.Event()
        self._typing: asyncio.Task[None] | None = None
        self._drafting: asyncio.Task[None] | None = None
        self._reacted = False

    # --- 👀 --------------------------------------------------------------------------------

    async def received(self) -> None:
        """halo starts working on the message."""
        if self.react and self.message_id is not None:
            with contextlib.suppress(TelegramError):  # chrome: never retried, never fatal
                await self.bot.set_message_reaction(self.chat_id, self.message_id, ReactionTypeEmoji(SEEN))
                self._reacted = True

    async def _unreact(self) -> None:
        if self._reacted and self.message_id is not None:
            self._reacted = False
            with contextlib.suppress(TelegramError):
                await self.bot.set_message_reaction(self.chat_id, self.message_id, None)

    # --- Progress ----------------------------------------------------------------------

    async def model_started(self) -> None:
        if self._typing is None and self._drafting is None:
            self._typing = asyncio.create_task(self._type())

    async def delta(self, text: str) -> None:
        if self.draft_every is None or self.drafts_failed:
            return
        self.streamed += text
        self._grew.set()
        if self._drafting is None:
            self._drafting = asyncio.create_task(self._draft())

    # --- the end -----------------------------------------------------------------------

    async def finish(self, text: str) -> None:
        """The reply is about to go as a message: the draft shows all of it first, so what
        streamed and what stays are the same text."""
        await self._stop_tasks()
        if self._drafting_shown() and text.strip() != self.drafted:
            await self._send_draft(text.strip())
        self.streamed = self.drafted = ""

    async def replied(self) -> None:
        """The reply went: 👀 is taken off."""
        await self._unreact()

    async def stop(self) -> None:
        await self._stop_tasks()
        await self._unreact()

    # --- inside ------------------------------------------------------------------------

    def _drafting_shown(self) -> bool:
        return bool(self.drafted) and not self.drafts_failed

    async def _stop_tasks(self) -> None:
        for task in (self._typing, self._drafting):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._typing = self._drafting = None

    async def _type(self) -> None:
        while True:
            with contextlib.suppress(TelegramError):
                await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING)
            await asyncio.sleep(TYPING_EVERY)

    async def _draft(self) -> None:
        """Shows the streamed text as it grows, at most once per interval."""
        assert self.draft_every is not None
        if self._typing is not None:  # the draft shows halo is writing from here on
            self._typing.cancel()
            self._typing = None
        while True:
            await self._grew.wait()
            self._grew.clear()
            text = self.streamed.strip()
            if len(text) > len(self.drafted):
                started = time.monotonic()
                if not await self._send_draft(text):
                    self._typing = asyncio.create_task(self._type())  # the fallback: "typing…" as before
                    return
                await asyncio.sleep(max(0.0, self.draft_every - (time.monotonic() - started)))

    async def _send_draft(self, text: str) -> bool:
        shown = (split_message(text) or [""])[0]  # a draft holds one message's worth
        try:
            await self.bot.send_message_draft(self.chat_id, self.draft_id, to_html(shown), parse_mode=ParseMode.HTML)
        except TelegramError as exc:
            log.info("Telegram refused a draft in %s, showing typing instead: %s", self.chat_id, exc)
            self.drafts_failed = True
            return False
        self.drafted = text
        return True
