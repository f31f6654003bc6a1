"""The family's own endpoints: what one member may see, with their own web_token, policy-checked.

The admin endpoints (ARCHITECTURE §7) answer the household's admin token and loopback. A
parent reading a young child's chat from a phone uses their own `web_token` here instead,
and the policy's `read_transcript` rules decide: a young child's DM yes, an adolescent's only
with `parental_visibility`, another parent's never. Every read, allowed or refused, is
audited with who read what.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from config.family import Member
from halo.access import bearer_token, peer_is_loopback
from halo.app import Halo
from halo.safety.profiles import effective_profile
from halo.scopes import UnknownScopeError, member_scopes, resolve_scope

MAX_LINES = 1000


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _member(request: web.Request, halo: Halo) -> Member | None:
    """The member whose web_token is the Bearer token; from loopback with no token, the local owner."""
    family = halo.services.family
    token = bearer_token(request)
    if token:
        return family.by_web_token(token)
    return family.local_owner if peer_is_loopback(request) else None


def _lines(request: web.Request) -> int | None:
    try:
        lines = int(request.query.get("lines", "50"))
    except ValueError:
        return None
    return lines if 1 <= lines <= MAX_LINES else None


class FamilyRoutes:
    """Thin handlers over the policy engine, the transcript store and the notifier's outbox."""

    def __init__(self, halo: Halo) -> None:
        self.halo = halo

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/family/transcripts", self.readable)
        app.router.add_get("/family/transcript", self.transcript)
        app.router.add_get("/family/notifications", self.notifications)
        app.router.add_get("/family/profiles", self.profiles)

    def _who(self, request: web.Request) -> Member | web.Response:
        member = _member(request, self.halo)
        if member is None:
            return _error(401, "send Authorization: Bearer <your web_token>")
        return member

    async def readable(self, request: web.Request) -> web.Response:
        """The DM transcripts this member may read (a probe: nothing is read, nothing audited)."""
        member = self._who(request)
        if isinstance(member, web.Response):
            return member
        services = self.halo.services
        origin = resolve_scope(services.family, f"web:{member.id}")
        scopes = [
            s.id for s in member_scopes(services.family)
            if s.type == "dm" and services.policy.decide(
                "read_transcript", principal=member, resource=s, from_scope=origin, audit=False).allowed
        ]
        return web.json_response({"member": member.id, "scopes": scopes})

    async def transcript(self, request: web.Request) -> web.Response:
        member = self._who(request)
        if isinstance(member, web.Response):
            return member
        lines = _lines(request)
        if lines is None:
            return _error(400, f"lines must be a whole number from 1 to {MAX_LINES}")
        services = self.halo.services
        scope_id = request.query.get("scopeId", "")
        try:
            scope = resolve_scope(services.family, scope_id)
        except UnknownScopeError as exc:
            return _error(400, str(exc))
        decision = services.policy.decide(
            "read_transcript", principal=member, resource=scope,
            from_scope=resolve_scope(services.family, f"web:{member.id}"),
        )
        read = services.transcripts.tail(scope.id, lines) if decision.allowed else []
        services.audit.write(
            "transcript_read", reader=member.id, scope_id=scope.id, owner=scope.owner_id,
            allowed=decision.allowed, lines=len(read), policy_ids=list(decision.policy_ids), via="family_api",
        )
        if not decision.allowed:
            return _error(403, decision.reason)
        return web.json_response({"scopeId": scope.id, "owner": scope.owner_id,
                                  "lines": [line.to_dict() for line in read]})

    async def notifications(self, request: web.Request) -> web.Response:
        """The member's own notifications (safety alerts), whether or not an adapter delivered them."""
        member = self._who(request)
        if isinstance(member, web.Response):
            return member
        lines = _lines(request)
        if lines is None:
            return _error(400, f"lines must be a whole number from 1 to {MAX_LINES}")
        notifier = self.halo.services.notifier
        notes = notifier.outbox.for_member(member.id, lines) if notifier else []
        return web.json_response({"member": member.id, "notifications": [
            {"id": n.id, "ts": n.ts.isoformat(), "kind": n.kind, "about": n.about, "text": n.text,
             "delivered_via": sorted(notifier.outbox.delivered_via(n.id)) if notifier else []}
            for n in notes
        ]})

    async def profiles(self, request: web.Request) -> web.Response:
        """Every member's effective safety profile, for a parent (the `admin` action decides)."""
        member = self._who(request)
        if isinstance(member, web.Response):
            return member
        services = self.halo.services
        origin = resolve_scope(services.family, f"web:{member.id}")
        decision = services.policy.decide("admin", principal=member, resource=origin, from_scope=origin)
        if not decision.allowed:
            return _error(403, decision.reason)
        llm = services.settings.llm
        found: list[dict[str, Any]] = [effective_profile(services.policy, m, llm) for m in services.family.members]
        return web.json_response({"profiles": found})
