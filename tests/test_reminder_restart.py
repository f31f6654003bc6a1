"""kill -9 between setting a reminder and its time: `halo serve` (a real process) sends it once
after the restart, marked late, and a second kill and start never send it again."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import telegram_yaml
from tests.test_session_durability import Serve
from tests.waiting import eventually

# halo serve as a process, restarted; it reads halo.db's reminders with sqlite3
pytestmark = [pytest.mark.slow, pytest.mark.own_store]


def move_due(home: Path, reminder_id: int, seconds_ago: float) -> None:
    """The clock passing while halo is down: the reminder's time is now `seconds_ago` past."""
    with sqlite3.connect(home / "halo.db") as db:
        due = float(int(time.time() - seconds_ago))
        db.execute("UPDATE reminders SET due_at = ?, occurrence_at = ? WHERE id = ?", (due, due, reminder_id))


def outbox_states(home: Path) -> list[str]:
    with sqlite3.connect(home / "halo.db") as db:
        return [r[0] for r in db.execute("SELECT state FROM outbox WHERE scope_id = 'telegram:1003'")]


def add_marker(home: Path) -> None:
    """A reminder for Wags that was due a minute ago: once it arrives, the start's pass has run."""
    with sqlite3.connect(home / "halo.db") as db:
        due = float(int(time.time() - 60))
        db.execute(
            "INSERT INTO reminders (family_id, set_by, target, text, scope_id, created_at, due_at, occurrence_at,"
            " urgent, held, state, fired) VALUES ('sharma', 'wags', 'wags', 'marker', 'web:wags', ?, ?, ?, 0, 0,"
            " 'pending', 0)",
            (due, due, due),
        )


async def test_a_reminder_survives_kill_9_and_is_sent_once(
    tmp_path: Path, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url))
    serve = Serve(home)
    async with aiohttp.ClientSession() as http:
        await serve.start(http)
        headers = {"Authorization": "Bearer mom-token"}
        async with http.post(
            f"{serve.url}/api/chat", json={"text": "/remind aarav in 2h pack your kit"}, headers=headers
        ) as r:
            assert r.status == 200 and (await r.json())["reply"].startswith("OK, I'll remind Aarav")
        await serve.kill()
        move_due(home, 1, seconds_ago=10 * 60)  # within reminders.catch_up_minutes (60)
        await serve.start(http)
        (text,) = await tg.wait_sent(1003, within=120)
        assert text.startswith("Mom asked me to remind you: pack your kit\n(Late: it was due ")
        # the outbox's own window (a message handed to Telegram, killed before its row says so)
        # is the outbox's at-least-once, not the reminder's: kill once the row is marked sent
        await eventually(lambda: outbox_states(home) == ["sent"], within=60, what="the outbox row marked sent")
        await serve.kill()
        add_marker(home)
        await serve.start(http)
        await tg.wait_sent(1001, within=120)  # the marker: the pass after this start has run
        assert tg.texts(1003) == [text]  # never twice
        await serve.kill()
    with sqlite3.connect(home / "halo.db") as db:
        rows = db.execute("SELECT state, fired FROM reminders WHERE id = 1").fetchall()
        sent = db.execute("SELECT count(*) FROM outbox WHERE scope_id = 'telegram:1003'").fetchone()
    assert rows == [("done", 1)] and sent == (1,)
    assert fake_llm.model_requests == []
