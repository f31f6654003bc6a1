"""Hostile documents (issue 22): a few kilobytes of PDF built to make a reader parse one shared
content stream on every page. It is read in a child process that the deadline kills, so the
sender gets a clear reply in time, nothing keeps running after it, other members' chats go on,
one member's documents wait their turn, and `halo serve` stops at once on SIGTERM. Through the
real Telegram adapter (against the Bot API stand-in), gateway and Agents SDK."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from halo.inventory import Halo
from halo.media.reading_turns import YOURS_NEXT
from tests import processes
from tests.conftest import FAMILY_YAML, free_port, llm_yaml, write_home
from tests.document_support import SCHOOL_LETTER, alive, children_of, hostile_pdf
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import StartTelegram, telegram_yaml
from tests.transcript_support import raw_lines
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # document readers are processes; one test runs halo serve

WAGS, MOM, AARAV = 1001, 1002, 1003
GROUP = -1001234
ROOT = Path(__file__).resolve().parent.parent
HOSTILE = {
    "shared-stream": hostile_pdf(pages=200, stream_mb=2),
    "deflated": hostile_pdf(pages=200, stream_mb=10, compress=True),
}


def reading(seconds: float) -> str:
    return f"memory:\n  semantic: {{embedder: none}}\n  document_read_seconds: {seconds}\n"


@pytest.fixture
def start(start_telegram: StartTelegram) -> Callable[..., Awaitable[Halo]]:
    family = FAMILY_YAML.replace("{telegram_chat_id: -1001234}", "{telegram_chat_id: -1001234, respond_to_all: true}")
    return lambda seconds: start_telegram(reading(seconds), family=family)


def readers(halo: Halo) -> list[int]:
    assert halo.documents is not None
    return [child.pid for child in halo.documents.reader.running]


def user_lines(halo: Halo, scope_id: str) -> list[dict]:
    return [r for r in raw_lines(halo, scope_id) if r["role"] == "user"]


def parsing_here() -> list[str]:
    """Threads of this process that are inside pypdf right now."""
    return [
        name
        for frame in sys._current_frames().values()
        for name in [f.f_code.co_filename for f in _stack(frame)]
        if f"{os.sep}pypdf{os.sep}" in name
    ]


def _stack(frame):  # type: ignore[no-untyped-def]
    while frame is not None:
        yield frame
        frame = frame.f_back


@pytest.mark.parametrize("variant", HOSTILE)
async def test_a_hostile_pdf_is_refused_in_time_and_its_reader_is_gone(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI, variant: str
) -> None:
    halo = await start(seconds=2)
    tg.document(MOM, MOM, HOSTILE[variant], "homework.pdf", "application/pdf", caption="can you check this?")

    [pid] = await eventually(lambda: readers(halo), what="a reader process")
    assert pid in children_of(os.getpid()), "read in a child process, not a thread of halo's"
    [reply] = await tg.wait_sent(MOM)
    assert reply.startswith("I couldn't read homework.pdf in time (I give a document 2 seconds).")
    assert "Your message is kept." in reply
    assert not alive(pid), "the reader was killed and reaped, not left running"
    assert readers(halo) == [] and pid not in children_of(os.getpid())
    [line] = user_lines(halo, f"telegram:{MOM}")
    assert line["text"] == "(document: homework.pdf) can you check this?" and line["document"] == "not read"
    assert fake_llm.model_requests == []


async def test_a_reader_past_its_memory_limit_is_refused_as_too_big(
    start_telegram: StartTelegram, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start_telegram(reading(60) + "  document_reader_mb: 160\n")
    tg.document(MOM, MOM, HOSTILE["deflated"], "big.pdf", "application/pdf")

    [reply] = await tg.wait_sent(MOM, within=60)
    assert reply.startswith("big.pdf is too big for me (it needs more than 160 MB of memory to read).")
    assert readers(halo) == [] and fake_llm.model_requests == []


async def test_other_members_chat_while_two_members_send_hostile_pdfs(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start(seconds=120)  # they are still being read when the third member's reply comes
    tg.document(MOM, MOM, HOSTILE["shared-stream"], "a.pdf", "application/pdf")
    tg.document(AARAV, AARAV, HOSTILE["deflated"], "b.pdf", "application/pdf")
    hostile = await eventually(lambda: len(readers(halo)) == 2 and readers(halo), what="two readers running")

    fake_llm.reply("Dinner is at seven.")
    tg.message(WAGS, WAGS, "when is dinner?")
    assert await tg.wait_sent(WAGS) == ["Dinner is at seven."]
    assert readers(halo) == hostile, "answered while both hostile documents were still being read"
    assert parsing_here() == [], "no thread of halo's parses a document"
    assert tg.texts(MOM) == [] and tg.texts(AARAV) == []


async def test_a_members_second_document_waits_its_turn_and_they_are_told(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start(seconds=8)
    tg.document(MOM, MOM, HOSTILE["shared-stream"], "first.pdf", "application/pdf")
    [first] = await eventually(lambda: readers(halo), what="the first document being read")
    fake_llm.reply("It's the school trip letter.")
    tg.document(GROUP, MOM, SCHOOL_LETTER, "letter.pdf", "application/pdf")

    assert await tg.wait_sent(GROUP) == [YOURS_NEXT], "told at once, while the first is still read"
    assert readers(halo) == [first], "and not read alongside it"
    [refused] = await tg.wait_sent(MOM)
    assert refused.startswith("I couldn't read first.pdf in time")
    assert (await tg.wait_sent(GROUP, 2))[-1] == "It's the school trip letter."
    assert "Science Museum" in fake_llm.prompt_text(fake_llm.model_requests[-1])


async def test_serve_stops_at_once_on_sigterm_while_a_hostile_pdf_is_read(
    home: Path, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    port = free_port()
    write_home(home, llm_yaml(fake_llm) + reading(120) + telegram_yaml(tg.base_url))
    env = {**os.environ, "HALO_HOME": str(home), "HALO_ADMIN__PORT": str(port), "PYTHONUNBUFFERED": "1"}
    serve = await processes.start(
        sys.executable, "-m", "halo.runtime.cli", "serve", cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
    )
    try:
        async with aiohttp.ClientSession() as http:
            await eventually(lambda: _healthy(http, port), within=120, what="halo serve answering /healthz")
        tg.document(MOM, MOM, HOSTILE["shared-stream"], "homework.pdf", "application/pdf")
        [reader] = await eventually(lambda: children_of(serve.pid), within=60, what="a reader process")

        asked = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        # a hang's deadline, well short of the reader's 120 s: a stop that waited for the reader fails
        out, _ = await asyncio.wait_for(serve.communicate(), timeout=60)
        took = time.monotonic() - asked
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
    print(f"halo serve stopped {took:.2f} s after SIGTERM with a hostile PDF being read")
    assert serve.returncode == 0 and b"halo: stopped" in out
    assert not alive(reader)
    assert tg.texts(MOM) == [
        "I was restarting and couldn't finish reading homework.pdf. Could you send it again in a minute? "
        "Your message is kept."
    ]


async def _healthy(http: aiohttp.ClientSession, port: int) -> bool:
    try:
        async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            return resp.status == 200
    except aiohttp.ClientError:
        return False
