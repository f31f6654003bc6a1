"""PostgreSQL going away and coming back (#31, item 7), with no restart.

halo reaches the real PostgreSQL through a small TCP proxy on loopback that the test can cut
(the listening socket closed, every connection through it dropped: connections are refused)
and restore: a fake network, not a fake of halo. While it is cut, a member's message gets a
JSON 503 with Retry-After saying halo can't reach its storage and the message was not saved;
`/livez` and `/status` answer from memory and name the problem; the active process gives
its family up once it could not renew for `lease_seconds`. Once the network is back, halo
takes its family again by itself and answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from admin_api.server import create_app
from config.loader import load_settings
from halo.runtime.app import build_halo
from tests.conftest import OWNER_AUTH, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import fresh_database
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.own_store]  # its own database, behind the proxy it cuts

LEASE = 2.0


class CuttableProxy:
    """TCP from 127.0.0.1:<port> to PostgreSQL, which `cut()` breaks and `restore()` mends."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def restore(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        for writer in list(self._pipes):
            writer.transport.abort()
        self._pipes.clear()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._pipes.update((writer, up_writer))

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
        self._pipes.difference_update((writer, up_writer))


@pytest.fixture
async def proxied_database() -> AsyncIterator[tuple[str, CuttableProxy]]:
    async with fresh_database(migrated=True) as url:
        proxy = CuttableProxy(("127.0.0.1", 5432))
        await proxy.restore()
        yield url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/"), proxy
        with contextlib.suppress(Exception):
            await proxy.cut()


async def test_halo_says_it_cannot_reach_its_storage_and_recovers_by_itself(
    tmp_path: Path, fake_llm: FakeOpenAI, proxied_database: tuple[str, CuttableProxy]
) -> None:
    url, proxy = proxied_database
    home = tmp_path / "home"
    write_home(home, llm_yaml(fake_llm))
    settings = load_settings(home, storage={"url": url, "lease_seconds": LEASE})
    halo = build_halo(settings)
    await halo.start()
    server = TestServer(create_app(halo), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as http:

            async def say(text: str) -> tuple[int, dict[str, object], str | None]:
                async with http.post(server.make_url("/api/chat"), json={"text": text}, headers=OWNER_AUTH) as r:
                    return r.status, await r.json(), r.headers.get("Retry-After")

            async def get(path: str) -> tuple[int, dict[str, object]]:
                async with http.get(server.make_url(path), headers=OWNER_AUTH) as r:
                    return r.status, await r.json()

            await eventually(lambda: halo.cluster is not None and halo.cluster.active, what="halo active")
            fake_llm.reply("Soccer is at 5pm.")
            status, body, _ = await say("When is soccer practice?")
            assert (status, body.get("reply")) == (200, "Soccer is at 5pm."), body

            await proxy.cut()
            status, body, retry_after = await say("Is the pool open today?")
            assert status == 503, body
            assert retry_after is not None and int(retry_after) >= 1
            assert "can't reach its storage" in str(body["error"]) and "not saved" in str(body["error"])

            async def livez_names_it() -> bool:
                status, body = await get("/livez")
                return status == 200 and "storage" in str(body.get("problem"))

            await eventually(livez_names_it, what="/livez naming the storage problem")
            status, snapshot = await get("/status")
            assert status == 200
            assert any("storage" in p for p in snapshot["problems"])  # type: ignore[union-attr]
            await eventually(lambda: not halo.cluster.active, what="the family given up after lease_seconds")  # type: ignore[union-attr]
            status, body = await get("/readyz")
            assert status == 503

            await proxy.restore()
            back = time.monotonic()

            async def answers_again() -> bool:
                fake_llm.reply("The pool opens at 9.")
                status, body, _ = await say("Is the pool open today?")
                return status == 200 and body.get("reply") == "The pool opens at 9."

            await eventually(answers_again, within=60, every=0.2, what="halo answering once PostgreSQL is back")
            print(f"\nrecovered {time.monotonic() - back:.1f}s after PostgreSQL came back")
            status, body = await get("/livez")
            assert body["role"] == "active" and body["problem"] is None
    finally:
        await server.close()
        await halo.close()
