"""FakeTelegram keeps to the Bot API as python-telegram-bot reads it: the real client, the fake server.

If the fake drifts from what the real Bot API answers, the adapter tests built on it prove
nothing; these pin the shapes the adapter relies on.
"""

from __future__ import annotations

import pytest
from telegram import Bot
from telegram.error import BadRequest, RetryAfter

from tests.fakes.telegram_server import TOKEN, FakeTelegram


async def test_the_real_client_reads_the_fakes_answers() -> None:
    async with FakeTelegram() as tg:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            me = await bot.get_me()
            assert me.is_bot and me.username
            sent = await bot.send_message(1001, "hello")
            assert sent.chat.id == 1001 and sent.text == "hello" and sent.message_id > 0
            tg.message(1001, 1001, "hi bot")
            updates = await bot.get_updates(timeout=0)
            assert [u.message.text for u in updates if u.message] == ["hi bot"]
        assert tg.texts(1001) == ["hello"]


async def test_failures_surface_as_the_clients_own_errors() -> None:
    async with FakeTelegram() as tg:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            tg.fail("sendMessage", 400, "Bad Request: chat not found")
            with pytest.raises(BadRequest, match="Chat not found"):
                await bot.send_message(1001, "to nowhere")
            tg.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
            with pytest.raises(RetryAfter):
                await bot.send_message(1001, "too soon")
        assert tg.texts(1001) == []
