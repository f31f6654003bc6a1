"""Pending pairing requests (unknown people asking to join), approved or denied by a parent.

The requests live in `services.pairing` (the Telegram adapter's pairing store). Until one is
plugged in, the list is empty and approve/deny answer 501.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from admin_api import seams
from admin_api.base import ApiError, halo_of, maybe_await
from admin_api.guards import actor
from admin_api.routes import Route

CODE_PATTERN = "[A-Za-z0-9-]{4,32}"  # said once for the handler and the OpenAPI document
CODE = re.compile(CODE_PATTERN)
ROLES = ("parent", "child", "colleague")
AGE_GROUPS = ("young_child", "adolescent")
NOT_AVAILABLE = "pairing is not available in this build yet (no pairing service: it comes with the Telegram adapter)"


def _pairing(request: web.Request) -> seams.PairingSeam:
    found = seams.pairing(halo_of(request).services)
    if found is None:
        raise ApiError(501, NOT_AVAILABLE)
    return found


def _code(request: web.Request) -> str:
    code = request.match_info["code"]
    if not CODE.fullmatch(code):
        raise ApiError(400, "a pairing code is 4 to 32 letters, digits or dashes")
    return code


async def _call(call: Any) -> Any:
    """A seam's answer, with its refusals as the right status."""
    try:
        return await maybe_await(call)
    except LookupError as exc:
        raise ApiError(404, str(exc).strip("'\"") or "no pending request with that code") from None
    except PermissionError as exc:
        raise ApiError(403, str(exc) or "not allowed") from None
    except ValueError as exc:
        raise ApiError(400, str(exc) or "bad request") from None


async def pending(request: web.Request) -> web.Response:
    service = seams.pairing(halo_of(request).services)
    items = list(await _call(service.pending())) if service else []
    shaped = [row for item in items if (row := seams.pairing_request(item)) is not None]
    return web.json_response(shaped)


async def _approval(request: web.Request) -> tuple[str, str, str | None]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, 'the body must be JSON like {"role": "child", "name": "Aarav"}') from None
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be a JSON object like {"role": "child", "name": "Aarav"}')
    role, name, age_group = body.get("role"), body.get("name"), body.get("ageGroup")
    if role not in ROLES:
        raise ApiError(400, f"role must be one of {', '.join(ROLES)}")
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise ApiError(400, "name must be a non-empty string of at most 64 characters")
    if age_group is not None and (role != "child" or age_group not in AGE_GROUPS):
        raise ApiError(400, f"ageGroup is for a child only: one of {', '.join(AGE_GROUPS)}")
    return role, name.strip(), age_group


async def approve(request: web.Request) -> web.Response:
    service = _pairing(request)
    code = _code(request)
    role, name, age_group = await _approval(request)
    who = actor(request)
    result = await _call(service.approve(code, role=role, name=name, age_group=age_group, approved_by=who))
    halo_of(request).services.audit.write("admin_pairing_approve", code=code, role=role, name=name, actor=who)
    return web.json_response({"code": code, "approved": True, "member": seams.jsonable(result)})


async def deny(request: web.Request) -> web.Response:
    service = _pairing(request)
    code = _code(request)
    who = actor(request)
    await _call(service.deny(code, denied_by=who))
    halo_of(request).services.audit.write("admin_pairing_deny", code=code, actor=who)
    return web.json_response({"code": code, "denied": True})


ROUTES = [
    Route("GET", "/pairing/requests", pending, "token"),
    Route("POST", "/pairing/requests/{code}/approve", approve, "token"),
    Route("POST", "/pairing/requests/{code}/deny", deny, "token"),
]
