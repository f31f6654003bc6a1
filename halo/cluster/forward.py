"""Any process answers: an HTTP request that reaches a standby goes on to the active process.

The request is sent on to the active one's `cluster.advertise_url` as it came (method, path,
query, headers, body), on a kept connection, and its answer streamed back chunk by chunk, so the
web chat's streamed reply stays streamed; an answer of known small length (a JSON reply) goes
back in one write, headers and body together. Two headers go with it: `X-Halo-Forwarded` (a forwarded request is never
forwarded again: two processes that disagree for a moment answer 503 instead of bouncing it)
and `X-Halo-Forwarded-Peer`, the client's address, which the active process uses only to take
trust away (halo/access.py: a remote client is not "this machine" because a standby on it
passed the request on). With no active process, or one that does not answer, the client gets
a JSON 503 with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from halo.access import FORWARDED_PEER

log = logging.getLogger(__name__)

FORWARDED = "X-Halo-Forwarded"
RETRY_AFTER_SECONDS = 2
WHOLE_UP_TO = 256 * 1024  # bytes: an answer of known length up to this is passed on in one write
WATCH_EVERY = 0.25  # seconds: how often a forwarded request asks whether its target still serves
# hop-by-hop headers (RFC 9110 §7.6.1) and the ones aiohttp sets from the body it sends
_NOT_PASSED = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Content-Length",
        FORWARDED,
        FORWARDED_PEER,
    )
)


def unavailable(why: str, retry_after: float = RETRY_AFTER_SECONDS) -> web.Response:
    """A JSON 503 saying why, and when to try again."""
    response = web.json_response({"error": why}, status=503)
    response.headers["Retry-After"] = str(max(1, round(retry_after)))
    return response


class Forwarder:
    """One HTTP client, kept open, for the requests this standby passes on."""

    def __init__(self) -> None:
        self._http: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=3),
                auto_decompress=False,  # bytes pass through as the active process sent them
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._http

    async def forward(
        self, request: web.Request, address: str, still_active: Callable[[], bool] = lambda: True
    ) -> web.StreamResponse:
        """Pass `request` on to `address`. Until its answer begins, `still_active()` is asked a few
        times a second: once that process no longer holds the family (frozen, cut off, replaced),
        the client gets a 503 to send again, not a wait for a process that may never answer (a
        frozen one that wakes finds its writes refused, so nothing of the first try is kept)."""
        task = asyncio.current_task()
        assert task is not None
        answering = asyncio.Event()
        gone = False
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None

        def look() -> None:  # a timer, not a second task and a wait around it for every request
            nonlocal gone, timer
            if answering.is_set():
                return
            if still_active():
                timer = loop.call_later(WATCH_EVERY, look)
                return
            gone = True
            task.cancel()

        timer = loop.call_later(WATCH_EVERY, look)
        try:
            return await self._pass_on(request, address, answering)
        except asyncio.CancelledError:
            if not gone:
                raise  # the client went away, or halo is stopping
            task.uncancel()
            log.warning("%s %s: %s no longer serves the family", request.method, request.path, address)
            return unavailable("the process serving this family changed; send it again", retry_after=1)
        finally:
            timer.cancel()

    async def _pass_on(self, request: web.Request, address: str, answering: asyncio.Event) -> web.StreamResponse:
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _NOT_PASSED)
        headers[FORWARDED] = "1"
        headers[FORWARDED_PEER] = request.remote or ""
        body = await request.read() if request.can_read_body else None
        url = address.rstrip("/") + request.rel_url.path_qs
        response: web.StreamResponse | None = None
        try:
            async with self._client().request(
                request.method, url, headers=headers, data=body, allow_redirects=False
            ) as upstream:
                answering.set()
                passed = CIMultiDict((k, v) for k, v in upstream.headers.items() if k.lower() not in _NOT_PASSED)
                length = upstream.content_length
                if length is not None and length <= WHOLE_UP_TO and request.method != "HEAD":
                    # an answer of known, small length (a JSON reply): on as one write, headers and
                    # body together, not as headers, a chunk and a last chunk (three sends)
                    body = await upstream.read()
                    return web.Response(status=upstream.status, reason=upstream.reason, body=body, headers=passed)
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=passed)
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientConnectionError, TimeoutError) as exc:
            if response is not None and response.prepared:
                raise  # the answer had begun: the client sees a cut-off response, as from the active itself
            log.warning("forwarding %s %s to the active process %s failed: %s", request.method, request.path, url, exc)
            return unavailable("the process serving this family did not answer; try again in a moment")

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
