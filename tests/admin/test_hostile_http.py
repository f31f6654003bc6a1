"""Issue 22's HTTP findings, replayed as written against the server `halo serve` runs (GuardedSite,
halo's request handler, the real app) on 127.0.0.1, with raw sockets where aiohttp's client
would not send the hostile bytes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

from tests.admin.conftest import ADMIN_TOKEN, AdminHarness
from tests.conftest import OWNER_TOKEN
from tests.http_attack_support import (
    HeaderTrickle,
    RawReply,
    gzip_bomb,
    peak_rss_bytes,
    raw_exchange,
    request_head,
)
from tests.waiting import eventually

GZIP_JSON = {"Content-Type": "application/json", "Content-Encoding": "gzip"}


async def fresh_get(harness: AdminHarness, path: str, token: str | None = None, **kwargs: Any) -> int:
    """A well-behaved client on a connection of its own: the status it got."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"http://127.0.0.1:{harness.port}{path}"
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http,
        http.get(url, headers=headers, **kwargs) as resp,
    ):
        return resp.status


async def fresh_chat(harness: AdminHarness, text: str = "/whoami") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {OWNER_TOKEN}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        url = f"http://127.0.0.1:{harness.port}/api/chat"
        async with http.post(url, json={"text": text}, headers=headers) as resp:
            return resp.status, await resp.json()


# --- finding 3: anonymous compressed bodies stalled the event loop --------------------------------


async def test_gzip_bombs_are_refused_unread_and_healthz_keeps_answering(admin):
    harness = await admin()
    bomb = gzip_bomb()  # 1 GiB of zeros in about 1 MB
    assert len(bomb) < 2 * 1024**2
    cpu, rss = time.process_time(), peak_rss_bytes()

    def fire(method: str, path: str, headers: dict[str, str]) -> asyncio.Task[RawReply]:
        head = request_head(method, path, {**GZIP_JSON, **headers}, body_length=len(bomb))
        return asyncio.create_task(raw_exchange(harness.port, head, bomb))

    anonymous = [fire("GET", "/healthz", {}) if i % 2 else fire("POST", "/logout", {}) for i in range(8)]
    parent = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    clear = fire("POST", "/sessions/web:mom/clear", parent)
    chat = fire("POST", "/api/chat", {"Authorization": f"Bearer {OWNER_TOKEN}"})
    unknown = fire("POST", "/no/such/route", {})
    assert await fresh_get(harness, "/healthz") == 200  # from a concurrent client, while they land

    for reply in await asyncio.gather(*anonymous, clear):
        assert reply.status == 413 and reply.is_json_error, reply  # a route that takes no body
    chatted = await chat
    assert chatted.status == 415 and "uncompressed" in chatted.json["error"]  # a JSON route: not inflated
    missing = await unknown
    assert missing.status == 404 and missing.is_json_error
    # Inflating these eleven would be 11 GiB of zeros: tens of CPU-seconds on the loop.
    assert time.process_time() - cpu < 5.0
    assert peak_rss_bytes() - rss < 256 * 1024**2
    assert await fresh_get(harness, "/healthz") == 200
    assert harness.services.transcripts.count("web:wags") == 0


async def test_a_json_route_still_takes_a_plain_body(admin):
    harness = await admin()
    status, answer = await fresh_chat(harness)
    assert status == 200 and answer["reply"], answer


# --- finding 4: a trickle of headers held every connection ----------------------------------------

SHORT_DEADLINES = (
    f"admin: {{token: {ADMIN_TOKEN}, header_timeout_seconds: 1.5, body_timeout_seconds: 1.5,"
    " max_connections: 48, max_connections_per_address: 16}\n"
)


@pytest.fixture
async def deadlines(admin) -> AdminHarness:
    harness = await admin(SHORT_DEADLINES)
    harness.limits.check_every = 0.05
    return harness


async def test_a_trickle_past_the_header_deadline_is_closed(deadlines):
    harness = deadlines
    trickle = await HeaderTrickle(harness.port, count=5, every=0.1).start()
    try:
        await eventually(lambda: trickle.closed == 5, what="every trickled head cut at its deadline")
        answers = trickle.answers()
        assert len(answers) == 5 and all(a.status == 408 and a.is_json_error for a in answers), answers
        assert harness.limits.timed_out >= 5
        await eventually(lambda: harness.limits.active == 0, what="their slots given back")
    finally:
        await trickle.stop()


async def test_300_trickled_connections_from_one_address_leave_healthz_and_chat_served(deadlines):
    harness = deadlines
    limits = harness.limits
    trickle = await HeaderTrickle(harness.port, count=300, every=0.2).start()
    try:
        assert limits.from_address("127.0.0.1") <= limits.max_per_address
        for _ in range(5):  # the flood keeps coming: each new attacker displaces its own oldest
            assert await fresh_get(harness, "/healthz") == 200
            status, answer = await fresh_chat(harness)
            assert status == 200 and answer["scope_id"] == "web:wags", answer
            assert limits.from_address("127.0.0.1") <= limits.max_per_address
        assert limits.evicted >= 300 - limits.max_per_address
        await eventually(lambda: trickle.closed == len(trickle.tricklers), what="every trickler closed")
    finally:
        await trickle.stop()
    await eventually(lambda: limits.active == 0, what="every slot given back")


async def test_a_flood_from_one_address_never_displaces_another_address(deadlines):
    """The attacker's connections only ever displace each other: a slow but honest client on
    another address (127.0.0.2, still this machine's loopback) keeps its slot and is answered."""
    harness = deadlines
    reader, writer = await asyncio.open_connection("127.0.0.1", harness.port, local_addr=("127.0.0.2", 0))
    writer.write(f"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n".encode())
    await writer.drain()
    await eventually(lambda: harness.limits.from_address("127.0.0.2") == 1, what="the honest client counted")
    trickle = await HeaderTrickle(harness.port, count=200, every=0.2).start()
    try:
        assert harness.limits.evicted >= 200 - harness.limits.max_per_address
        writer.write(b"Connection: close\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 20)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    finally:
        writer.close()
        await trickle.stop()


# --- finding 5: a non-ASCII byte in a bearer token was a 500 --------------------------------------

NON_ASCII_TOKENS = {"utf-8": "tökén".encode(), "latin-1": "tökén".encode("latin-1")}
MEMBER_ROUTES = [
    ("GET", "/status", b""),
    ("GET", "/events/tail", b""),
    ("POST", "/api/chat", b'{"text": "hello"}'),
    ("GET", "/api/chat/inbox", b""),
    ("GET", "/family/transcripts", b""),
]


def _head(method: str, path: str, extra: bytes, body: bytes) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".encode()
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n".encode()
    return head + extra + b"\r\n"


@pytest.mark.parametrize("encoding", sorted(NON_ASCII_TOKENS))
async def test_a_non_ascii_bearer_token_is_a_wrong_token(admin, encoding: str):
    harness = await admin()
    cookie = await harness.sign_in()
    valid_cookie = "; ".join(f"{k}={v}" for k, v in cookie.items()).encode()
    token = NON_ASCII_TOKENS[encoding]
    for method, path, body in MEMBER_ROUTES:
        for extra in (
            b"Authorization: Bearer " + token + b"\r\n",
            b"Authorization: Bearer " + token + b"\r\nCookie: " + valid_cookie + b"\r\n",  # a wrong token wins
            b"Cookie: halo_session=" + token + b"\r\n",
        ):
            reply = await raw_exchange(harness.port, _head(method, path, extra, body) + body)
            assert reply.status == 401 and reply.is_json_error, (path, extra, reply)
    assert harness.services.transcripts.count("web:wags") == 0


# --- finding 7: errors aiohttp wrote itself were plain text ---------------------------------------


@pytest.mark.parametrize(
    "case, data, status",
    [
        (
            "a 100 KB Authorization header",
            _head("GET", "/status", b"Authorization: Bearer " + b"a" * 100_000, b""),
            400,
        ),
        (
            "Content-Encoding: br on a JSON route",
            _head(
                "POST",
                "/api/chat",
                f"Authorization: Bearer {OWNER_TOKEN}\r\nContent-Encoding: br\r\n".encode(),
                b'{"text": "hello"}',
            )
            + b'{"text": "hello"}',
            415,
        ),
        ("a malformed request line", b"GET\x00 / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
        ("not HTTP at all", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
        ("a request line of 100 KB", b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (
            "a broken chunked body",
            _head(
                "POST",
                "/api/chat",
                f"Authorization: Bearer {OWNER_TOKEN}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n".encode(),
                b"",
            )
            + b"zz\r\n",
            400,
        ),
    ],
)
async def test_every_error_is_json(admin, case: str, data: bytes, status: int):
    harness = await admin()
    reply = await raw_exchange(harness.port, data)
    assert reply.status == status and reply.is_json_error, (case, reply)
    assert await fresh_get(harness, "/healthz") == 200
