"""Finding 6 of issue 15: connections that never finish their request are closed after the read
timeout, and past the connection cap new ones are turned away, with real sockets."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from admin_api.connections import ConnectionLimits, GuardedSite
from tests.admin.conftest import ADMIN_TOKEN
from tests.waiting import eventually

HEADERS_ONLY_HALF = b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
HALF_A_BODY = (
    b"POST /pairing/requests/ABCD/approve HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Authorization: Bearer " + ADMIN_TOKEN.encode() + b"\r\n"
    b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"role": '
)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (whatever it said before)."""
    try:
        await asyncio.wait_for(reader.read(65536), 0.05)
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return reader.at_eof()


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


async def test_past_the_cap_new_connections_are_turned_away(guarded):
    harness, site, limits = guarded
    held = []
    for _ in range(limits.max_connections):
        reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
        writer.write(HEADERS_ONLY_HALF)
        await writer.drain()
        held.append((reader, writer))
    await eventually(lambda: limits.active == limits.max_connections, what="the cap reached")
    reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
    await eventually(lambda: closed_by_server(reader), what="one past the cap closed at once")
    assert limits.refused >= 1
    writer.close()
    for _, w in held:
        w.close()
    await eventually(lambda: limits.active == 0, what="slots given back when clients leave")
    async with harness.http.get(f"http://127.0.0.1:{site.port}/healthz") as resp:
        assert resp.status == 200


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
