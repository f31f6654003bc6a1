"""Issue 22 under fire, against a real `halo serve` process: hostile PDFs from two members over
Telegram, gzip bombs and a header trickle on the HTTP port, all at once, while a third member
chats on the web. Every chat is answered by the model within the reply deadline, halo's memory
stays bounded, and SIGTERM stops it within `admin.shutdown_seconds`, reader processes and all.
And the hard deadline itself: a turn stuck on a model that never answers does not hold up a
stop, and the message it was answering is caught up on the next start.

The figures (chat latencies, peak RSS, shutdown time) are printed: run with `-s` to see them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.document_support import alive, children_of, hostile_pdf
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.http_attack_support import HeaderTrickle, gzip_bomb, raw_exchange, request_head
from tests.telegram_support import telegram_yaml
from tests.test_session_durability import Serve
from tests.transcript_support import recorded_tail
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # halo serve as a process, under attack

WAGS, MOM, AARAV = 1001, 1002, 1003
MIB = 1024**2

# halo's own deadlines, short so the attack is over in seconds
READ_SECONDS = 3  # memory.document_read_seconds: each hostile PDF's reader (a busy core) is killed at this
REPLY_DEADLINE = 60  # llm.reply_deadline_seconds: generous, the machine may have 2 busy cores and a hog
SHUTDOWN_SECONDS = 10  # admin.shutdown_seconds
READER_MB = 256  # memory.document_reader_mb: the OS limit on each reader's address space
READING_AT_ONCE = 2  # memory.max_documents_reading (the default)
CHAOS_ENV = {
    "HALO_MEMORY__DOCUMENT_READ_SECONDS": str(READ_SECONDS),
    "HALO_MEMORY__DOCUMENT_READER_MB": str(READER_MB),
    "HALO_MEMORY__MAX_DOCUMENTS_READING": str(READING_AT_ONCE),
    "HALO_MEMORY__DISTILLATION_ENABLED": "false",
    "HALO_MEMORY__SEMANTIC__EMBEDDER": "none",
    "HALO_ADMIN__HEADER_TIMEOUT_SECONDS": "2",
    "HALO_ADMIN__SHUTDOWN_SECONDS": str(SHUTDOWN_SECONDS),
    "HALO_LLM__REPLY_DEADLINE_SECONDS": str(REPLY_DEADLINE),
}
STOP_MARGIN = 60.0  # a hang's deadline on top of halo's own: the exit code says which stop it was

DOCS_EACH = 2  # hostile PDFs from each of two members; the second of each waits for the first
BOMBS = 8
TRICKLERS = 100
TRICKLE_WAVES = 20  # a new wave once the last is cut, while the documents are read
# The trickle comes from another address of this machine's loopback: the per-address cap keeps
# it to its own slots. From the chatting member's own address, a burst of trickled connections
# accepted before halo has read a waiting chat's head can displace that chat (connections.py's
# known limit), which is a different finding from the one this test measures.
ATTACKER = "127.0.0.2"
MIN_CHATS, MAX_CHATS = 10, 200
CHAT_PACE = 0.2  # the chatting member's own pace between messages, not a synchronisation


def hostile_reply(text: str) -> bool:
    """halo's refusal of a document it could not read in time, or within its memory."""
    return text.startswith("I couldn't read hostile-") or "is too big for me" in text


def vm_rss(pid: int) -> int:
    """A process's resident memory now (bytes), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else 0


@dataclass
class MemoryWatch:
    """Samples halo's RSS and its children's (the document readers) until told to stop."""

    pid: int
    peak_halo: int = 0
    peak_total: int = 0
    readers: set[int] = field(default_factory=set)

    def sample(self) -> None:
        children = children_of(self.pid)
        self.readers.update(children)
        own = vm_rss(self.pid)
        self.peak_halo = max(self.peak_halo, own)
        self.peak_total = max(self.peak_total, own + sum(vm_rss(child) for child in children))

    async def run(self, done: asyncio.Event) -> None:
        for _ in range(10_000):  # bounded: 10 000 samples is minutes, the attack is seconds
            self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.02)  # the sampling rate, not a synchronisation
            if done.is_set():
                return


def answer_questions(body: dict[str, Any]) -> str:
    """The stand-in model's answer names the newest question in its prompt: a reply that says
    "Answer 7." reached the model with question 7."""
    asked = [int(n) for n in re.findall(r"question (\d+)", json.dumps(body))]
    return f"Answer {max(asked)}." if asked else "Hello from the fake model"


async def chat(http: aiohttp.ClientSession, url: str, text: str) -> tuple[float, int, Any]:
    """Wags asks on the web chat: (seconds until the reply, status, body)."""
    started = time.monotonic()
    async with http.post(f"{url}/api/chat", json={"text": text}, headers={"Authorization": "Bearer wags-token"}) as r:
        body = await r.json()
    return time.monotonic() - started, r.status, body


async def trickle_waves(port: int, over: asyncio.Event) -> tuple[int, int]:
    """Waves of `TRICKLERS` trickled request heads until `over`: (connections made, closed by halo)."""
    made = cut = 0
    for _ in range(TRICKLE_WAVES):
        trickle = await HeaderTrickle(port, count=TRICKLERS, every=0.5, local_host=ATTACKER).start()
        try:
            await eventually(
                lambda t=trickle: t.closed == len(t.tricklers), within=60, what="a trickle wave cut by halo"
            )
            made += len(trickle.tricklers)
            cut += trickle.closed
        finally:
            await trickle.stop()
        if over.is_set():
            break
    return made, cut


async def bomb(port: int, method: str, path: str) -> int:
    """1 GiB of zeros gzipped into ~1 MB, sent without a credential: the status halo answered."""
    body = gzip_bomb()
    head = request_head(
        method, path, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, body_length=len(body)
    )
    reply = await raw_exchange(port, head, body)
    assert reply.is_json_error, reply
    return reply.status


def chaos_home(home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram) -> None:
    write_home(home, llm_yaml(fake_llm) + telegram_yaml(tg.base_url), family=FAMILY_YAML)


async def stop(serve: Serve) -> float:
    """SIGTERM; the seconds until the process has exited."""
    assert serve.proc is not None
    asked = time.monotonic()
    serve.proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(serve.proc.wait(), timeout=120)
    return time.monotonic() - asked


def serve_log(serve: Serve) -> str:
    return (serve.home / f"serve-{serve.starts}.log").read_text()


async def test_chaos_hostile_documents_bombs_and_a_trickle_while_a_member_chats(
    tmp_path: Path, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    home = tmp_path / "home"
    chaos_home(home, fake_llm, tg)
    fake_llm.responder = answer_questions
    serve = Serve(home, CHAOS_ENV)
    timeout = aiohttp.ClientTimeout(total=REPLY_DEADLINE + 60)  # the assertion is on the latency, not here
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(force_close=True)) as http:
        await serve.start(http)
        assert serve.proc is not None
        pid = serve.proc.pid
        warm = await chat(http, serve.url, "question 0")  # waits for halo to be built; the model's first call
        assert warm[1:] == (200, {"reply": "Answer 0.", "scope_id": "web:wags"}), (warm, serve_log(serve)[-3000:])
        await tg.wait_for(lambda: tg.calls_to("getUpdates"), within=60, what="the Telegram adapter polling")
        before = vm_rss(pid)

        hostile = hostile_pdf(pages=200, stream_mb=2)  # minutes of parsing in a few kilobytes
        watch, over = MemoryWatch(pid), asyncio.Event()
        watching = asyncio.create_task(watch.run(over))
        for n in range(DOCS_EACH):  # the attack, all at once
            for member in (MOM, AARAV):
                tg.document(member, member, hostile, f"hostile-{n}.pdf", "application/pdf")
        bombs = [
            asyncio.create_task(bomb(serve.port, *(("GET", "/healthz") if i % 2 else ("POST", "/logout"))))
            for i in range(BOMBS)
        ]
        trickling = asyncio.create_task(trickle_waves(serve.port, over))

        def attack_over() -> bool:
            return all(sum(map(hostile_reply, tg.texts(member))) == DOCS_EACH for member in (MOM, AARAV))

        latencies: list[float] = []
        for n in range(1, MAX_CHATS + 1):
            took, status, body = await chat(http, serve.url, f"question {n}")
            assert (status, body) == (200, {"reply": f"Answer {n}.", "scope_id": "web:wags"}), (n, took, body)
            latencies.append(took)
            if n >= MIN_CHATS and attack_over():
                break
            await asyncio.sleep(CHAT_PACE)
        assert attack_over(), f"the hostile documents were not all refused: {tg.texts(MOM)} {tg.texts(AARAV)}"
        over.set()
        statuses = await asyncio.gather(*bombs)
        made, cut = await trickling
        assert statuses == [413] * BOMBS
        assert made >= TRICKLERS and cut == made, (made, cut)

        # SIGTERM with a hostile PDF being read and a trickle wave on the port
        tg.document(MOM, MOM, hostile, "hostile-last.pdf", "application/pdf")
        await eventually(lambda: children_of(pid), within=60, what="the last hostile PDF being read")
        watch.sample()
        last = await HeaderTrickle(serve.port, count=TRICKLERS, every=0.5, local_host=ATTACKER).start()
        try:
            stopped_in = await stop(serve)
        finally:
            await last.stop()
        await watching

    log = serve_log(serve)
    p50, worst = statistics.median(latencies), max(latencies)
    print(
        f"\nchaos: {len(latencies)} chats under attack: p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms"
        f" (deadline {REPLY_DEADLINE} s); {2 * DOCS_EACH} hostile PDFs refused, {BOMBS} gzip bombs refused,"
        f" {made} trickled connections cut\n"
        f"chaos: RSS halo {before / MIB:.0f} MB before, peak {watch.peak_halo / MIB:.0f} MB;"
        f" with its readers peak {watch.peak_total / MIB:.0f} MB ({len(watch.readers)} readers seen)\n"
        f"chaos: stopped {stopped_in:.2f} s after SIGTERM (shutdown_seconds {SHUTDOWN_SECONDS})"
    )
    # each chat got its own answer (asserted above), so within halo's reply deadline; how fast is bench/'s
    # halo's own memory: the bombs are refused unread and a trickled head holds a few bytes, so
    # the attack must not even double it. Each reader is held to READER_MB by the kernel, and at
    # most READING_AT_ONCE run: that is all the documents may add.
    assert watch.peak_halo < 2 * before
    assert watch.peak_total < 2 * before + READING_AT_ONCE * READER_MB * MIB
    assert watch.readers, "the hostile PDFs were read in child processes"
    assert stopped_in < SHUTDOWN_SECONDS + STOP_MARGIN
    assert serve.proc.returncode == 0 and "halo: stopped" in log, log[-2000:]
    assert [r for r in watch.readers if alive(r)] == [], "a reader outlived halo"


async def test_a_turn_stuck_on_the_model_does_not_hold_up_a_stop_and_is_caught_up(
    tmp_path: Path, fake_llm: FakeOpenAI, tg: FakeTelegram
) -> None:
    """The model never answers (its reply deadline is 45 s; aiohttp would wait 60 s for requests
    in flight): halo still exits `admin.shutdown_seconds` after SIGTERM, and the message, already
    in its transcript, is answered by the catch-up on the next start."""
    home = tmp_path / "home"
    chaos_home(home, fake_llm, tg)
    shutdown = 3
    serve = Serve(home, {"HALO_ADMIN__SHUTDOWN_SECONDS": str(shutdown), "HALO_MEMORY__SEMANTIC__EMBEDDER": "none"})
    async with aiohttp.ClientSession() as http:
        await serve.start(http)
        await tg.wait_for(lambda: tg.calls_to("getUpdates"), within=120, what="the Telegram adapter polling")
        fake_llm.hang()
        fake_llm.reply("Sorry for the wait: yes, dinner is at seven.")
        tg.message(WAGS, WAGS, "is dinner at seven?")
        await eventually(lambda: fake_llm.model_requests, within=60, what="the turn waiting on the model")

        stopped_in = await stop(serve)
        log = serve_log(serve)
        print(f"\nhard deadline: stopped {stopped_in:.2f} s after SIGTERM (shutdown_seconds {shutdown})")
        assert stopped_in < shutdown + STOP_MARGIN, log[-2000:]
        assert serve.proc is not None and serve.proc.returncode == 1
        assert f"still stopping after {shutdown}s; exiting now" in log
        assert tg.texts(WAGS) == []

        await serve.start(http)
        assert await tg.wait_sent(WAGS, within=120) == ["Sorry for the wait: yes, dinner is at seven."]
        assert len(fake_llm.model_requests) == 2
        await stop(serve)
    lines = [(line.role, line.text) for line in await recorded_tail(home, f"telegram:{WAGS}")]
    assert lines == [("user", "is dinner at seven?"), ("assistant", "Sorry for the wait: yes, dinner is at seven.")]
    assert tg.texts(WAGS) == ["Sorry for the wait: yes, dinner is at seven."]
