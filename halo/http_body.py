"""Reading a JSON request body, the one way every route does it (issue 15, finding 4).

Whatever a client sends, the answer is a clear 4xx and never a 500: a body that is not
declared JSON is 415 (it is not guessed at), and one that cannot be decoded (a lying
Content-Encoding, bytes that are not UTF-8, nesting deep enough to exhaust the parser, an
integer too long to convert) is 400.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

JSON_TYPES = ("application/json",)


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
