"""Pending pairing requests (unknown people asking to join), approved or denied by a parent.

The requests live in `services.pairing` (halo/family/pairing.py), which also audits each decision
with who made it: the admin's actor name.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from admin_api.base import ApiError, family_desk
from admin_api.guards import actor
from admin_api.models import ApiModel, Member, Timestamp, reply
from admin_api.routes import Reply, Route, param
from config.family import AgeGroup, Role
from halo.family import pairing as store
from halo.family.pairing import AGE_GROUPS, ROLES, PairingError, UnknownCode
from halo.http_body import read_json

CODE_PATTERN = "[A-Za-z0-9-]{4,32}"  # said once for the handler and the OpenAPI document
CODE = re.compile(CODE_PATTERN)
MAX_NAME = 64

# What a wrong approval body is told, by the field that is wrong (the first of these that is).
REFUSALS = {
    "role": f"role must be one of {', '.join(ROLES)}",
    "name": f"name must be a non-empty string of at most {MAX_NAME} characters",
    "ageGroup": f"ageGroup is for a child only: one of {', '.join(AGE_GROUPS)}",
}
Name = Annotated[str, Field(max_length=MAX_NAME, pattern=r"\S")]


class PairingRequest(ApiModel):
    code: str = Field(description="what the newcomer was told; approve or deny with it")
    platform: str = Field(examples=["telegram"])
    userId: str = Field(description="the newcomer's account id on that platform")
    displayName: str | None
    username: str | None
    requestedAt: Timestamp
    expiresAt: Timestamp = Field(description="an hour after requestedAt")

    @classmethod
    def of(cls, request: store.PairingRequest) -> PairingRequest:
        return cls(
            code=request.code,
            platform=request.platform,
            userId=request.platform_user_id,
            displayName=request.display_name,
            username=request.username,
            requestedAt=request.created_at.isoformat(),
            expiresAt=request.expires_at.isoformat(),
        )


class ChildApproval(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")  # `\S` as str.strip() sees whitespace

    role: Literal["child"]
    name: Name
    ageGroup: AgeGroup | None = Field(None, description="young_child when left out")


class AdultApproval(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")

    role: Literal["parent", "colleague"]
    name: Name
    ageGroup: None = None


class Approval(RootModel[Annotated[ChildApproval | AdultApproval, Field(discriminator="role")]]):
    """Who the newcomer is; an age group only for a child. Other keys are ignored."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"role": "child", "name": "Meera", "ageGroup": "adolescent"}]}
    )


class Approved(ApiModel):
    code: str
    approved: bool
    member: Member


class Denied(ApiModel):
    code: str
    denied: bool


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
    try:
        approval = Approval.model_validate(body).root
    except ValidationError as exc:
        # a wrong role is the union's tag, at (); a wrong field is at (role, field)
        wrong = {str(e["loc"][1]) if len(e["loc"]) > 1 else "role" for e in exc.errors()}
        raise ApiError(400, next((text for field, text in REFUSALS.items() if field in wrong), str(exc))) from None
    return approval.role, approval.name.strip(), approval.ageGroup


def _refused(exc: PairingError) -> ApiError:
    """An unknown or expired code is 404; anything else the store refuses is the client's 400."""
    return ApiError(404 if isinstance(exc, UnknownCode) else 400, str(exc))


async def pending(request: web.Request) -> web.Response:
    requests = await family_desk(request).pairing.list_pending()
    return reply([PairingRequest.of(r) for r in requests])


async def approve(request: web.Request) -> web.Response:
    code = _code(request)
    role, name, age_group = await _approval(request)
    pairing = family_desk(request).pairing
    try:
        member = await pairing.approve(code, role=role, name=name, age_group=age_group, by=actor(request))
    except PairingError as exc:
        raise _refused(exc) from None
    return reply(Approved(code=code, approved=True, member=Member.of(member)))


async def deny(request: web.Request) -> web.Response:
    code = _code(request)
    pairing = family_desk(request).pairing
    try:
        await pairing.deny(code, by=actor(request))
    except PairingError as exc:
        raise _refused(exc) from None
    return reply(Denied(code=code, denied=True))


CODE_PATH = param(
    "code",
    "path",
    {"type": "string", "pattern": f"^{CODE_PATTERN}$"},
    "the pairing code the newcomer was given",
    example="K7PQ2MZX",
)
PAIRING_REFUSED = "The code is malformed, or the body is not a valid approval"
NO_REQUEST = "No open request has that code: never made, already decided, or expired"

ROUTES = [
    Route(
        "GET",
        "/pairing/requests",
        pending,
        "token",
        summary="Pending pairing requests, oldest first (expired ones are not listed)",
        responses={200: Reply("pending requests", list[PairingRequest])},
        tag="pairing",
    ),
    Route(
        "POST",
        "/pairing/requests/{code}/approve",
        approve,
        "token",
        summary="Approve a newcomer as a member",
        description="Adds them to halo.yaml (the previous file is kept as halo.yaml.bak), welcomes them, "
        "and audits `pairing_approved` with who approved.",
        responses={
            200: Reply("approved", Approved),
            400: PAIRING_REFUSED,
            404: NO_REQUEST,
            415: "The body is not declared application/json",
        },
        parameters=[CODE_PATH],
        body=Approval,
        tag="pairing",
    ),
    Route(
        "POST",
        "/pairing/requests/{code}/deny",
        deny,
        "token",
        summary="Deny a pairing request",
        description="The sender is not told and gets no further replies. An expired request can still be "
        "denied. Audited as `pairing_denied`.",
        responses={200: Reply("denied", Denied), 400: PAIRING_REFUSED, 404: NO_REQUEST},
        parameters=[CODE_PATH],
        tag="pairing",
    ),
]
