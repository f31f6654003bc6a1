"""Any process answers: an HTTP request that reaches a standby goes on to the active process.

The request is sent on to the active one's `cluster.advertise_url` as it came (method, path,
query, headers, body), and its answer streamed back chunk by chunk, so the web chat's streamed
reply stays streamed. Two headers go with it: `X-Halo-Forwarded` (a forwarded request is never
forwarded again: two processes that disagree for a moment answer 503 instead of bouncing it)
and `X-Halo-Forwarded-Peer`, the client's address, which the active process uses only to take
trust away (halo/access.py: a remote client is not "this machine" because a standby on it
passed the request on). With no active process, or one that does not answer, the client gets
a JSON 503 with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from halo.access import FORWARDED_PEER

log = logging.getLogger(__name__)

FORWARDED = "X-Halo-Forwarded"
RETRY_AFTER_SECONDS = 2
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
        answering = asyncio.Event()
        passing = asyncio.ensure_future(self._pass_on(request, address, answering))
        while not passing.done():
            await asyncio.wait({passing}, timeout=WATCH_EVERY)
            if passing.done() or answering.is_set() or still_active():
                continue
            passing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await passing
            log.warning("%s %s: %s no longer serves the family", request.method, request.path, address)
            return unavailable("the process serving this family changed; send it again", retry_after=1)
        return passing.result()

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
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for key, value in upstream.headers.items():
                    if key.lower() not in _NOT_PASSED:
                        response.headers.add(key, value)
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
