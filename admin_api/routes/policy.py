"""`/policy/status`: what the policy allows, per configured scope, member and action, and why."""

from __future__ import annotations

import asyncio
from typing import Literal, cast

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from admin_api.base import family_desk
from admin_api.models import ApiModel, Member, reply
from admin_api.needs import FamilyDesk
from admin_api.routes import Reply, Route
from halo.core.envelope import Envelope, Platform, Scope, Speaker
from halo.core.turn import Turn
from halo.family.policy_table import MEMBER_ACTIONS, SYSTEM_ACTIONS, policy_table
from halo.safety.profiles import effective_profile
from policy.engine import POLICY_DIR


class SafetyProfile(BaseModel):
    """A member's effective age profile (halo.yaml safety.profiles); only children are guarded,
    and an unguarded member's profile has only `member`, `role` and `guarded`."""

    model_config = ConfigDict(extra="forbid")

    member: str
    role: str
    guarded: bool
    age_group: str | None = None
    model_key: str | None = None
    model: str | None = None
    tool_classes: list[str] | None = None
    max_reply_chars: int | None = None
    blocked_topics: list[str] | None = None
    tone: str | None = None
    notify_parents_on_medium: bool | None = None
    notify_parents_on_high: bool | None = None
    parental_visibility: bool | None = None
    parents_who_may_read_transcript: list[str] | None = None

    @model_serializer(mode="wrap")
    def _only_what_applies(self, handler: SerializerFunctionWrapHandler):
        # no return annotation: pydantic would take it for the schema
        return {key: value for key, value in handler(self).items() if key in self.model_fields_set}


class PolicyMember(Member):
    safety: SafetyProfile


class Decision(ApiModel):
    principal: str = Field(description="member id, or system:home")
    action: str
    allowed: bool
    policyIds: list[str]
    reason: str
    fromScope: str | None


class ScopeDecisions(ApiModel):
    scopeId: str
    type: str
    ownerId: str | None
    decisions: list[Decision]
    toolsOffered: dict[str, list[str]] = Field(
        description="member id → the tools the model is offered when that member talks here (members who may)"
    )


class PolicyInfo(ApiModel):
    id: str
    effect: Literal["permit", "forbid"]
    reason: str | None
    source: str
    line: int


class PolicyStatus(ApiModel):
    actions: list[str]
    members: list[PolicyMember]
    scopes: list[ScopeDecisions]
    policies: list[PolicyInfo]


def tools_offered(halo: FamilyDesk, scope: Scope) -> dict[str, list[str]]:
    """The same decision that builds the tool list a turn's model is sent (TurnAgents.offered_tools)."""
    offered: dict[str, list[str]] = {}
    policy = halo.policy
    for member in policy.family.members:
        envelope = Envelope(cast(Platform, scope.platform), scope, Speaker(member.id, member), "")
        turn = Turn(envelope, policy)
        if turn.decide("converse", audit=False).allowed:
            offered[member.id] = [tool.name for tool in halo.agents.offered_tools(turn)]
    return offered


async def policy_status(request: web.Request) -> web.Response:
    halo = family_desk(request)
    services = halo
    family = services.family
    rows = await asyncio.to_thread(policy_table, services.policy, family)  # cheap once memoised
    members = [
        PolicyMember(
            id=m.id,
            name=m.name,
            role=m.role,
            ageGroup=m.age_group,
            safety=SafetyProfile.model_validate(effective_profile(services.policy, m, services.settings.llm)),
        )
        for m in family.members
    ]
    scopes = [
        ScopeDecisions(
            scopeId=row.scope.id,
            type=row.scope.type,
            ownerId=row.scope.owner_id,
            decisions=[
                Decision(
                    principal=cell.principal,
                    action=cell.action,
                    allowed=cell.allowed,
                    policyIds=list(cell.policy_ids),
                    reason=cell.reason,
                    fromScope=cell.from_scope,
                )
                for cell in row.cells
            ],
            toolsOffered=tools_offered(halo, row.scope),
        )
        for row in rows
    ]
    policies = [
        PolicyInfo(
            id=info.id,
            effect=info.effect,
            reason=info.reason,
            source=f"policy/{info.path.name}" if info.path.parent == POLICY_DIR else str(info.path),
            line=info.line,
        )
        for info in services.policy.policies
    ]
    return reply(
        PolicyStatus(actions=[*MEMBER_ACTIONS, *SYSTEM_ACTIONS], members=members, scopes=scopes, policies=policies)
    )


ROUTES = [
    Route(
        "GET",
        "/policy/status",
        policy_status,
        "token",
        summary="Every configured scope: each member's decision for each action, with policy ids and reason",
        responses={200: Reply("the table", PolicyStatus)},
        tag="policy",
    )
]
