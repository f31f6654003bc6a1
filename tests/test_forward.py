"""A standby passes a request on to the active process (halo/cluster/forward.py): real aiohttp
servers on 127.0.0.1, the "active process" a small app that shows what reached it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web

from halo.cluster.forward import FORWARDED, Forwarder
from tests.conftest import free_port


@dataclass
class Upstream:
    url: str
    second_part: asyncio.Event = field(default_factory=asyncio.Event)


async def _serve(app: web.Application) -> tuple[str, web.AppRunner]:
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return f"http://127.0.0.1:{port}", runner


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    found = Upstream("")

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        seen = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", FORWARDED.lower())}
        return web.json_response(
            {"path": request.path_qs, "method": request.method, "body": body.decode(), "headers": seen},
            status=201,
            headers={"X-Answer": "yes"},
        )

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b"data: first\n\n")
        await found.second_part.wait()
        await response.write(b"data: second\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/stream", stream)
    app.router.add_route("*", "/{tail:.*}", echo)
    found.url, runner = await _serve(app)
    yield found
    await runner.cleanup()


@pytest.fixture
async def standby(upstream: Upstream) -> AsyncIterator[str]:
    forwarder = Forwarder()

    async def forward(request: web.Request) -> web.StreamResponse:
        return await forwarder.forward(request, upstream.url)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    url, runner = await _serve(app)
    yield url
    await runner.cleanup()
    await forwarder.close()


async def test_a_request_and_its_answer_pass_through_whole(standby: str) -> None:
    async with aiohttp.ClientSession() as http:
        for n in range(3):  # the kept connection to the active process serves the next ones
            async with http.post(
                f"{standby}/api/chat?x={n}", data=b'{"text": "hi"}', headers={"Authorization": "Bearer t"}
            ) as r:
                assert r.status == 201 and r.headers["X-Answer"] == "yes"
                # an answer of known length goes on as one: its length said, not chunked
                assert "Transfer-Encoding" not in r.headers and r.content_length is not None
                seen = json.loads(await r.read())
            assert seen["path"] == f"/api/chat?x={n}" and seen["method"] == "POST"
            assert seen["body"] == '{"text": "hi"}'
            assert seen["headers"] == {"Authorization": "Bearer t", FORWARDED: "1"}


async def test_a_streamed_answer_stays_streamed(standby: str, upstream: Upstream) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{standby}/stream") as r:
        assert r.status == 200 and r.headers["Content-Type"] == "text/event-stream"
        first = await asyncio.wait_for(r.content.readuntil(b"\n\n"), timeout=10)
        assert first == b"data: first\n\n"  # here before the active process sent the rest
        upstream.second_part.set()
        assert await r.read() == b"data: second\n\n"


async def test_an_active_process_that_does_not_answer_gives_a_503() -> None:
    forwarder = Forwarder()
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    async def forward(request: web.Request) -> web.StreamResponse:
        return await forwarder.forward(request, closed)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    url, runner = await _serve(app)
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/api/chat/inbox") as r:
            assert r.status == 503 and "Retry-After" in r.headers
    finally:
        await runner.cleanup()
        await forwarder.close()


async def test_a_request_to_a_process_that_stops_serving_before_it_answers_gets_a_503() -> None:
    """Frozen, cut off, replaced: the client is told to send it again, not left waiting."""
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:  # an active process that never answers
        await never.wait()
        return web.Response()

    frozen_app = web.Application()
    frozen_app.router.add_route("*", "/{tail:.*}", hang)
    frozen_url, frozen = await _serve(frozen_app)
    forwarder = Forwarder()
    serving = True
    asked = asyncio.Event()

    def still_active() -> bool:
        asked.set()
        return serving

    async def forward(request: web.Request) -> web.StreamResponse:
        return await forwarder.forward(request, frozen_url, still_active)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    url, runner = await _serve(app)
    try:
        async with aiohttp.ClientSession() as http:
            sent = asyncio.ensure_future(http.post(f"{url}/api/chat", json={"text": "hi"}))
            await asyncio.wait_for(asked.wait(), timeout=10)  # the forwarder looks while it waits
            assert not sent.done()
            serving = False
            async with await asyncio.wait_for(sent, timeout=10) as r:
                assert r.status == 503 and r.headers["Retry-After"] == "1"
                assert "send it again" in (await r.json())["error"]
    finally:
        never.set()
        await runner.cleanup()
        await frozen.cleanup()
        await forwarder.close()
