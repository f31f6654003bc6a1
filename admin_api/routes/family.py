"""What one member may see, with their own web_token, decided by the policy (access "member").

The admin endpoints answer the household's admin token and this machine. A parent reading a
young child's chat from a phone uses their own `web_token` here instead, and the policy's
`read_transcript` rules decide: a young child's DM yes, an adolescent's only with
`parental_visibility`, another parent's never. Every read, allowed or refused, is audited
with who read what. An existing and a missing scope are refused alike, so a refusal says
nothing about what halo holds.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from pydantic import Field

from admin_api.base import ApiError, family_desk, lines_param
from admin_api.models import ApiModel, Timestamp, TranscriptLine, reply
from admin_api.routes import BAD_LINES, LINES, SCOPE_QUERY, Reply, Route
from config.family import Member
from halo.core.envelope import Scope
from halo.core.scopes import UnknownScopeError, member_scopes
from halo.family.scope_admin import parse_scope_id
from halo.web_auth import member_of as web_member
from transcripts.lines import TranscriptLine as StoredLine

NO_MEMBER = "send Authorization: Bearer <your web_token> (or sign in to the dashboard)"


class ReadableTranscripts(ApiModel):
    member: str
    scopes: list[str]


class FamilyTranscript(ApiModel):
    scopeId: str
    owner: str | None
    lines: list[TranscriptLine]


class Notification(ApiModel):
    id: str
    ts: Timestamp
    kind: str
    about: str | None
    text: str
    deliveredVia: list[str] = Field(description="adapters that delivered it; it is in the web inbox either way")


class Notifications(ApiModel):
    member: str
    notifications: list[Notification]


def member_of(request: web.Request) -> Member:
    """The member whose web_token is the Bearer token; for the dashboard's session, the local owner."""
    halo = family_desk(request)
    admin_token = halo.settings.admin.token
    member = web_member(request, halo.family, admin_token.get_secret_value() if admin_token else None)
    if member is None:
        raise ApiError(401, NO_MEMBER)
    return member


def _home(member: Member) -> Scope:
    """Where a web request is made from: the member's own web DM."""
    return Scope(f"web:{member.id}", "dm", owner_id=member.id)


async def readable_transcripts(request: web.Request) -> web.Response:
    """The DM transcripts this member may read (probes: nothing is read, so nothing is audited)."""
    member = member_of(request)
    services = family_desk(request)
    scopes = [
        s.id
        for s in member_scopes(services.family)
        if s.type == "dm"
        and services.policy.decide(
            "read_transcript", principal=member, resource=s, from_scope=_home(member), audit=False
        ).allowed
    ]
    return reply(ReadableTranscripts(member=member.id, scopes=scopes))


async def read_transcript(request: web.Request) -> web.Response:
    member = member_of(request)
    lines = lines_param(request)
    services = family_desk(request)
    try:
        scope = parse_scope_id(services.family, request.query.get("scopeId", ""))
    except UnknownScopeError as exc:
        raise ApiError(400, str(exc)) from None
    decision = services.policy.decide("read_transcript", principal=member, resource=scope, from_scope=_home(member))
    read: list[StoredLine] = []
    if decision.allowed:
        await services.transcripts.ready(scope.id)  # PostgreSQL: the scope's lines held here
        read = await asyncio.to_thread(services.transcripts.tail, scope.id, lines)
    services.audit.write(
        "transcript_read",
        reader=member.id,
        scope_id=scope.id,
        owner=scope.owner_id,
        allowed=decision.allowed,
        lines=len(read),
        policy_ids=list(decision.policy_ids),
        via="family_api",
    )
    if not decision.allowed:
        raise ApiError(403, decision.reason)
    lines_read = [TranscriptLine.model_validate(x.to_dict()) for x in read]
    return reply(FamilyTranscript(scopeId=scope.id, owner=scope.owner_id, lines=lines_read))


async def notifications(request: web.Request) -> web.Response:
    """The member's own notifications (safety alerts), delivered by an adapter or not."""
    member = member_of(request)
    lines = lines_param(request)
    notes = await family_desk(request).notifier.for_member(member.id, lines)
    return reply(
        Notifications(
            member=member.id,
            notifications=[
                Notification(
                    id=n.id, ts=n.ts.isoformat(), kind=n.kind, about=n.about, text=n.inbox, deliveredVia=n.delivered_via
                )
                for n in notes
            ],
        )
    )


ROUTES = [
    Route(
        "GET",
        "/family/transcripts",
        readable_transcripts,
        "member",
        summary="The DM transcripts this member may read",
        responses={200: Reply("scope ids", ReadableTranscripts)},
        tag="family",
    ),
    Route(
        "GET",
        "/family/transcript",
        read_transcript,
        "member",
        summary="A DM transcript, as the read_transcript policy allows this member (audited)",
        description="A parent reads a young child's DM, an adolescent's only with parental_visibility, never "
        "another parent's. A scope halo holds nothing of is refused or empty, never a 404.",
        responses={
            200: Reply("oldest first", FamilyTranscript),
            400: BAD_LINES,
            403: "The policy does not let this member read that transcript (the refusal is audited)",
        },
        parameters=[SCOPE_QUERY, LINES],
        tag="family",
    ),
    Route(
        "GET",
        "/family/notifications",
        notifications,
        "member",
        summary="This member's notifications (safety alerts), delivered by an adapter or not",
        responses={200: Reply("oldest first", Notifications), 400: BAD_LINES},
        parameters=[LINES],
        tag="family",
    ),
]
