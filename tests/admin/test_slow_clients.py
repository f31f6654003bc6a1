"""Finding 6 of issue 15: connections that never finish their request are closed after the read
timeout, and past the connection cap new ones are turned away, with real sockets."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from tests.admin.conftest import ADMIN_TOKEN
from tests.http_attack_support import closed_by_server
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # slow clients on real sockets: seconds of waiting by design

HEADERS_ONLY_HALF = b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
HALF_A_BODY = (
    b"POST /pairing/requests/ABCD/approve HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Authorization: Bearer " + ADMIN_TOKEN.encode() + b"\r\n"
    b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"role": '
)


@pytest.fixture
async def guarded(admin):
    harness = await admin()
    limits = ConnectionLimits(max_connections=6, read_timeout=1.0, check_every=0.2)
    site = GuardedSite(harness.runner, "127.0.0.1", 0, limits=limits)
    await site.start()
    return harness, site, limits


async def test_half_sent_requests_are_closed(guarded):
    harness, site, limits = guarded
    conns = []
    for i in range(4):
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(HEADERS_ONLY_HALF if i % 2 else HALF_A_BODY)
        await writer.drain()
        conns.append((reader, writer))
    await eventually(lambda: limits.active == 4, what="four connections held")
    for reader, _ in conns:
        await eventually(lambda r=reader: closed_by_server(r), within=15, what="a half-sent request closed")
    await eventually(lambda: limits.active == 0, what="every slot given back")
    for _, writer in conns:
        writer.close()
    # A well-behaved client still gets its answer on the same server.
    async with harness.http.get(f"http://127.0.0.1:{site.port}/healthz") as resp:
        assert resp.status == 200


async def test_past_the_cap_the_longest_waiting_connection_makes_room(guarded):
    """Issue 22, finding 4: at the cap, a newcomer displaces the connection that has waited
    longest for a request head, so a flood of unfinished heads cannot shut anyone out."""
    harness, site, limits = guarded
    held = []
    for _ in range(limits.max_connections):
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(HEADERS_ONLY_HALF)
        await writer.drain()
        held.append((reader, writer))
        count = len(held)
        await eventually(lambda n=count: limits.active == n, what="each connection counted in turn")
    async with harness.http.get(f"http://127.0.0.1:{site.port}/healthz") as resp:
        assert resp.status == 200  # served past the cap
    first_reader = held[0][0]
    await eventually(lambda: closed_by_server(first_reader), what="the longest-waiting one closed")
    assert limits.evicted >= 1 and limits.refused == 0
    for _, w in held:
        w.close()
    await eventually(lambda: limits.active <= 1, what="slots given back when clients leave")


async def test_when_every_slot_serves_a_request_a_newcomer_gets_a_json_503():
    """Connections serving whole requests are never displaced: past the cap, the newcomer is told."""
    release = asyncio.Event()
    serving = 0

    async def slow(request: web.Request) -> web.Response:
        nonlocal serving
        serving += 1
        await release.wait()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    limits = ConnectionLimits(max_connections=3, check_every=0.2)
    site = GuardedSite(runner, "127.0.0.1", 0, limits=limits)
    await site.start()
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{site.port}/slow"
            busy = [asyncio.create_task(http.get(url)) for _ in range(3)]
            await eventually(lambda: serving == 3, what="every slot serving a request")
            reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
            answer = await asyncio.wait_for(reader.read(), 20)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 503") and b'{"error": ' in answer, answer
            assert limits.refused == 1
            release.set()
            for task in busy:
                (await task).release()
    finally:
        await runner.cleanup()


async def test_a_slow_answer_to_a_complete_request_is_not_cut():
    """The read timeout is about the client: a handler still working on a whole request is left alone."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        body = await request.json()
        started.set()
        await release.wait()
        return web.json_response({"done": body})

    app = web.Application()
    app.router.add_post("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    limits = ConnectionLimits(max_connections=6, read_timeout=1.0, check_every=0.2)
    site = GuardedSite(runner, "127.0.0.1", 0, limits=limits)
    await site.start()
    try:
        async with aiohttp.ClientSession() as http:
            task = asyncio.create_task(http.post(f"http://127.0.0.1:{site.port}/slow", json={"a": 1}))
            await started.wait()
            before = limits.checks
            await eventually(lambda: limits.checks >= before + 10, what="the watchdog ran past the read timeout")
            release.set()
            resp = await task
            assert resp.status == 200 and await resp.json() == {"done": {"a": 1}}
            resp.release()
    finally:
        await runner.cleanup()
