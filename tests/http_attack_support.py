"""Hostile HTTP clients for tests, on raw sockets: what aiohttp's own client would never send.

- `gzip_bomb()`: ~1 MB of gzip that inflates to 1 GiB of zeros (built in well under a second);
- `raw_exchange()`: send exact bytes, read the server's whole answer (JSON parsed when it is);
- `HeaderTrickle`: many connections that each send one header line every so often, never
  finishing their request head (the slow-loris attack of issue 22, finding 4).

Reusable by any test that throws these at halo's server (the admin API and the web chat).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import resource
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30
_CHUNK = 1 << 20


@functools.cache
def gzip_bomb(inflated: int = GIB) -> bytes:
    """A gzip body of `inflated` zero bytes (a multiple of 1 MiB), about inflated/1000 long.

    Each 1 MiB of zeros is deflated once and ended by a full flush, which byte-aligns the output
    and forgets the history, so every further MiB deflates to the very same bytes: the stream is
    that block repeated, then the final empty block and gzip's CRC-32 and length."""
    assert inflated % _CHUNK == 0
    zeros = bytes(_CHUNK)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert block == again, "a full flush no longer makes each block's output the same"
    end = deflate.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(inflated // _CHUNK):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, no time, unknown OS
    trailer = struct.pack("<II", crc, inflated & 0xFFFFFFFF)
    return header + block * (inflated // _CHUNK) + end + trailer


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class RawReply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def is_json_error(self) -> bool:
        """`{"error": "..."}` declared as JSON: the shape of every error halo's server gives."""
        if not self.headers.get("content-type", "").startswith("application/json"):
            return False
        try:
            body = self.json
        except ValueError:
            return False
        return isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], str) and bool(body)


def request_head(method: str, path: str, headers: dict[str, str] | None = None, *, body_length: int = 0) -> bytes:
    """An HTTP/1.1 request head (header values are encoded as UTF-8, whatever they hold)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body_length:
        lines.append(f"Content-Length: {body_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


def parse_reply(raw: bytes) -> RawReply:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return RawReply(int(status_line.split(" ")[1]), headers, body)


async def raw_exchange(
    port: int, data: bytes, body: bytes = b"", *, host: str = "127.0.0.1", local_host: str | None = None
) -> RawReply:
    """Send `data` (then `body`, in the background: the server may answer before reading it)
    and read the answer until the server closes the connection."""
    local = (local_host, 0) if local_host else None
    reader, writer = await asyncio.open_connection(host, port, local_addr=local)
    writer.write(data)

    async def send_body() -> None:
        with contextlib.suppress(ConnectionError, OSError):
            for start in range(0, len(body), 65536):
                writer.write(body[start : start + 65536])
                await writer.drain()

    sender = asyncio.create_task(send_body())
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = await reader.read(65536)
            except ConnectionError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if _complete(b"".join(chunks)):
                break
    finally:
        sender.cancel()
        writer.close()
    raw = b"".join(chunks)
    assert raw, "the server closed the connection without an answer"
    return parse_reply(raw)


def _complete(raw: bytes) -> bool:
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (whatever it said before)."""
    try:
        await asyncio.wait_for(reader.read(65536), 0.05)
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return reader.at_eof()


@dataclass
class Trickler:
    """One connection sending a request head a line at a time; what the server said, if anything."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    answer: bytes = b""
    closed: bool = False


@dataclass
class HeaderTrickle:
    """`count` connections to `port` that each send a request line, then one header line every
    `every` seconds, and never end the head. `closed` counts those the server has closed."""

    port: int
    count: int
    every: float
    host: str = "127.0.0.1"
    local_host: str | None = None
    path: str = "/healthz"
    tricklers: list[Trickler] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> HeaderTrickle:
        local = (self.local_host, 0) if self.local_host else None
        for _ in range(self.count):
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port, local_addr=local)
            except OSError:
                continue  # refused or reset at once: the server is protecting itself
            trickler = Trickler(reader, writer)
            self.tricklers.append(trickler)
            self._tasks.append(asyncio.create_task(self._read(trickler)))
            self._tasks.append(asyncio.create_task(self._trickle(trickler)))
        return self

    async def _trickle(self, t: Trickler) -> None:
        try:
            t.writer.write(f"GET {self.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
            n = 0
            while not t.closed:
                await asyncio.sleep(self.every)  # the attack's own pace, not a test's synchronisation
                n += 1
                t.writer.write(f"X-Trickle-{n}: {'a' * 10}\r\n".encode())
                await t.writer.drain()
        except (ConnectionError, OSError):
            t.closed = True

    async def _read(self, t: Trickler) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await t.reader.read(65536):
                t.answer += chunk
        t.closed = True

    @property
    def closed(self) -> int:
        return sum(t.closed for t in self.tricklers)

    def answers(self) -> list[RawReply]:
        """The answers the server gave before closing (a closed idle connection gives none)."""
        return [parse_reply(t.answer) for t in self.tricklers if t.answer]

    async def stop(self) -> None:
        for t in self.tricklers:
            t.closed = True
            t.writer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
