"""Reading a JSON request body, the one way every route does it (issue 15, finding 4; issue 22).

Whatever a client sends, the answer is a clear 4xx and never a 500: a body that is not
declared JSON is 415 (it is not guessed at), and one that cannot be decoded (bytes that are
not UTF-8, nesting deep enough to exhaust the parser, an integer too long to convert) is 400.

A compressed body is refused (415) without being read: the server never inflates one (a 1 MB
gzip body can be 1 GB of zeros), and no client of a family server needs to compress what it
sends. Only a handler marked `takes_body` may receive a body at all; every other route refuses
one unread (admin_api.base).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

JSON_TYPES = ("application/json",)
_TAKES_BODY = "halo_takes_body"
H = TypeVar("H", bound=Callable[..., Any])


def takes_body(handler: H) -> H:
    """Mark a route handler that reads a request body; every other route refuses one unread."""
    setattr(handler, _TAKES_BODY, True)
    return handler


def wants_body(handler: object) -> bool:
    return bool(getattr(handler, _TAKES_BODY, False))


class BadBody(Exception):
    """The body cannot be used; `status` and `message` are for the client."""

    def __init__(self, status: int, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close  # the connection's byte stream is broken: answer, then close it

    def response(self) -> web.Response:
        response = web.json_response({"error": self.message}, status=self.status)
        if self.close:
            response.force_close()
        return response


def _is_json_type(content_type: str) -> bool:
    return content_type in JSON_TYPES or (content_type.startswith("application/") and content_type.endswith("+json"))


async def read_json(request: web.Request, example: str) -> Any:
    """The body as JSON; `example` shows the client what a good body looks like."""
    if not request.headers.get("Content-Type") or not _is_json_type(request.content_type):
        raise BadBody(415, f"send the body as Content-Type: application/json, like {example}")
    if request.headers.get("Content-Encoding", "identity").strip().lower() != "identity":
        raise BadBody(415, "send the body uncompressed: a Content-Encoding is not accepted", close=True)
    try:
        raw = await request.read()
    except web.HTTPException:
        raise  # 413 from client_max_size says it best
    except (RequestPayloadError, HttpProcessingError, zlib.error, ValueError, OSError):
        # aiohttp would try to drain the rest after the answer, hit the same error and drop the
        # connection with no answer sent: there is nothing more to read, so say so.
        request.content.feed_eof()
        raise BadBody(400, "the body could not be decoded as its Content-Encoding says", close=True) from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadBody(400, "the body must be UTF-8 JSON") from None
    except RecursionError:
        raise BadBody(400, "the body is nested too deeply") from None
    except ValueError:  # JSONDecodeError, and an integer too long to convert
        raise BadBody(400, f"the body must be JSON like {example}") from None
