"""aiohttp's per-connection handler, set up so that hostile bytes cost the server nothing (issue 22).

- No decompression in the parser (`auto_decompress=False`): aiohttp would otherwise inflate a
  gzip body on the event loop as its bytes arrive, before any route or credential is known, so
  1 MB of gzip became 1 GB of zeros for an anonymous `GET /healthz`. Bodies reach a handler as
  sent; the one reader of JSON bodies (halo.http_body) refuses a `Content-Encoding`.
- No lingering: a body a handler did not read is never drained after the answer; the connection
  is closed instead.
- Errors aiohttp writes itself (a request it cannot parse, a handler that raised past the
  middleware) are `{"error": …}` like every other answer, never plain text.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, BadStatusLine, InvalidHeader, LineTooLong, PayloadEncodingError
from aiohttp.web_request import BaseRequest

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 8190  # aiohttp's default for the request line and each header


def parse_error_message(exc: BaseException | None) -> str:
    """What a client is told about a request aiohttp could not parse (never its own bytes back)."""
    if isinstance(exc, LineTooLong):
        return f"the request line or a header is longer than {MAX_LINE_BYTES} bytes"
    if isinstance(exc, BadStatusLine):
        return "the request line is malformed: send METHOD /path HTTP/1.1"
    if isinstance(exc, InvalidHeader):
        return "a request header is malformed"
    if isinstance(exc, PayloadEncodingError):
        return "the body's framing (Content-Length or Transfer-Encoding) is malformed"
    if isinstance(exc, BadHttpMessage):
        return "the request is malformed"
    return "bad request"


class JsonErrorsRequestHandler(web.RequestHandler):
    """aiohttp's RequestHandler, answering its own errors in JSON (see the module docstring)."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            log.error("error handling %s %s", request.method, request.path, exc_info=exc)
            text = "internal error (see the server log)" if status == 500 else "the request took too long"
        else:
            log.debug("unparsable request from %s: %s", request.remote, exc)
            text = parse_error_message(exc)
        if request.writer.output_size > 0:  # an answer is already on its way: the stream is broken
            raise ConnectionError("an answer was already started; cannot send an error after it")
        response = web.json_response({"error": text}, status=status)
        response.force_close()
        return response


def request_handler(server: web.Server, **options: Any) -> JsonErrorsRequestHandler:
    """A handler for one new connection of `server` (an AppRunner's `runner.server`)."""
    return JsonErrorsRequestHandler(
        server,
        loop=asyncio.get_running_loop(),
        auto_decompress=False,
        lingering_time=0,
        max_line_size=MAX_LINE_BYTES,
        max_field_size=MAX_LINE_BYTES,
        **options,
    )
