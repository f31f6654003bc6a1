"""Pending pairing requests (unknown people asking to join), approved or denied by a parent.

The requests live in `services.pairing` (halo/family/pairing.py), which also audits each decision
with who made it: the admin's actor name.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from admin_api.base import ApiError, halo_of
from admin_api.guards import actor
from admin_api.routes import Route
from config.family import AgeGroup, Member, Role
from halo.family.pairing import AGE_GROUPS, ROLES, PairingError, PairingRequest, UnknownCode
from halo.http_body import read_json

CODE_PATTERN = "[A-Za-z0-9-]{4,32}"  # said once for the handler and the OpenAPI document
CODE = re.compile(CODE_PATTERN)
MAX_NAME = 64


def request_json(request: PairingRequest) -> dict[str, Any]:
    return {
        "code": request.code,
        "platform": request.platform,
        "userId": request.platform_user_id,
        "displayName": request.display_name,
        "username": request.username,
        "requestedAt": request.created_at.isoformat(),
        "expiresAt": request.expires_at.isoformat(),
    }


def member_json(member: Member) -> dict[str, Any]:
    """A member as /policy/status lists them."""
    return {"id": member.id, "name": member.name, "role": member.role, "ageGroup": member.age_group}


def _code(request: web.Request) -> str:
    code = request.match_info["code"]
    if not CODE.fullmatch(code):
        raise ApiError(400, "a pairing code is 4 to 32 letters, digits or dashes")
    return code


async def _approval(request: web.Request) -> tuple[Role, str, AgeGroup | None]:
    """The body's role, name and age group, checked as JSON fields (the store checks them again)."""
    body = await read_json(request, '{"role": "child", "name": "Aarav"}')
    if not isinstance(body, dict):
        raise ApiError(400, 'the body must be a JSON object like {"role": "child", "name": "Aarav"}')
    role, name, age_group = body.get("role"), body.get("name"), body.get("ageGroup")
    if role not in ROLES:
        raise ApiError(400, f"role must be one of {', '.join(ROLES)}")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise ApiError(400, f"name must be a non-empty string of at most {MAX_NAME} characters")
    if age_group is not None and (role != "child" or age_group not in AGE_GROUPS):
        raise ApiError(400, f"ageGroup is for a child only: one of {', '.join(AGE_GROUPS)}")
    return role, name.strip(), age_group


def _refused(exc: PairingError) -> ApiError:
    """An unknown or expired code is 404; anything else the store refuses is the client's 400."""
    return ApiError(404 if isinstance(exc, UnknownCode) else 400, str(exc))


async def pending(request: web.Request) -> web.Response:
    requests = await halo_of(request).services.pairing.list_pending()
    return web.json_response([request_json(r) for r in requests])


async def approve(request: web.Request) -> web.Response:
    code = _code(request)
    role, name, age_group = await _approval(request)
    pairing = halo_of(request).services.pairing
    try:
        member = await pairing.approve(code, role=role, name=name, age_group=age_group, by=actor(request))
    except PairingError as exc:
        raise _refused(exc) from None
    return web.json_response({"code": code, "approved": True, "member": member_json(member)})


async def deny(request: web.Request) -> web.Response:
    code = _code(request)
    pairing = halo_of(request).services.pairing
    try:
        await pairing.deny(code, by=actor(request))
    except PairingError as exc:
        raise _refused(exc) from None
    return web.json_response({"code": code, "denied": True})


ROUTES = [
    Route("GET", "/pairing/requests", pending, "token"),
    Route("POST", "/pairing/requests/{code}/approve", approve, "token"),
    Route("POST", "/pairing/requests/{code}/deny", deny, "token"),
]
