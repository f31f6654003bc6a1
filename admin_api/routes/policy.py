"""`/policy/status`: what the policy allows, per configured scope, member and action, and why."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from admin_api.base import halo_of
from admin_api.routes import Route
from halo.family.policy_table import MEMBER_ACTIONS, SYSTEM_ACTIONS, policy_table
from halo.safety.profiles import effective_profile
from policy.engine import POLICY_DIR


async def policy_status(request: web.Request) -> web.Response:
    services = halo_of(request).services
    family = services.family
    rows = await asyncio.to_thread(policy_table, services.policy, family)  # cheap once memoised
    body: dict[str, Any] = {
        "actions": [*MEMBER_ACTIONS, *SYSTEM_ACTIONS],
        "members": [
            {
                "id": m.id,
                "name": m.name,
                "role": m.role,
                "ageGroup": m.age_group,
                "safety": effective_profile(services.policy, m, services.settings.llm),
            }
            for m in family.members
        ],
        "scopes": [
            {
                "scopeId": row.scope.id,
                "type": row.scope.type,
                "ownerId": row.scope.owner_id,
                "decisions": [
                    {
                        "principal": cell.principal,
                        "action": cell.action,
                        "allowed": cell.allowed,
                        "policyIds": list(cell.policy_ids),
                        "reason": cell.reason,
                        "fromScope": cell.from_scope,
                    }
                    for cell in row.cells
                ],
            }
            for row in rows
        ],
        "policies": [
            {
                "id": info.id,
                "effect": info.effect,
                "reason": info.reason,
                "source": f"policy/{info.path.name}" if info.path.parent == POLICY_DIR else str(info.path),
                "line": info.line,
            }
            for info in services.policy.policies
        ],
    }
    return web.json_response(body)


ROUTES = [Route("GET", "/policy/status", policy_status, "token")]
