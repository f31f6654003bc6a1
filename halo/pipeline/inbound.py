"""The core's side of the adapter port (`halo.port.Inbound`): how a chat message gets in.

Speakers and scopes are resolved from the live family (a member approved a moment ago is
known at once); joins and leaves feed the group guard; `handle` runs the gateway, queues
its reply in the outbox (`Delivery`, which hands it back to the adapter's `send`) and turns
it into the port's `TurnOutcome`. Adapters see only this object, never the gateway
or the services behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from config.family import Family
from halo.commands.builtin import CommandRegistry
from halo.core.envelope import Envelope, Platform, Scope, Speaker
from halo.core.scopes import resolve_scope
from halo.family.groups import GroupGuard
from halo.outbound.delivery import Delivery
from halo.pipeline.gateway import Gateway, Reply
from halo.port import Progress, TurnOutcome
from halo.web_auth import member_of

if TYPE_CHECKING:
    from aiohttp import web


class FamilyDirectory:
    """The family half of `Inbound`: who a platform user is, which scope a chat is. `family` is
    a callable because the family changes while halo runs (pairing approvals rebuild it)."""

    def __init__(self, family: Callable[[], Family], admin_token: str | None = None) -> None:
        self._family = family
        self._admin_token = admin_token  # the admin token speaks for nobody in a chat

    def speaker(
        self,
        platform: Platform,
        user_id: str,
        *,
        display_name: str | None = None,
        username: str | None = None,
        is_bot: bool = False,
    ) -> Speaker:
        member = None if is_bot else self._member_by_platform_id(platform, user_id)
        return Speaker(platform_user_id=user_id, member=member, display_name=display_name, username=username)

    def _member_by_platform_id(self, platform: Platform, user_id: str):  # type: ignore[no-untyped-def]
        family = self._family()
        if platform in ("web", "cli"):
            return family.member(user_id)
        if not user_id.lstrip("-").isdigit():
            return None
        if platform == "telegram":
            return family.by_telegram(int(user_id))
        if platform == "discord":
            return family.by_discord(int(user_id))
        return None

    def scope(self, platform: Platform, chat_id: str) -> Scope:
        return resolve_scope(self._family(), f"{platform}:{chat_id}")

    def answers_everything(self, scope: Scope) -> bool:
        return scope.type == "parents_group" and self._family().parents_group.respond_to_all

    def http_speaker(self, request: web.BaseRequest) -> Speaker | None:
        member = member_of(request, self._family(), self._admin_token)
        if member is None:
            return None
        return Speaker(platform_user_id=member.id, member=member, display_name=member.name)


class GatewayInbound(FamilyDirectory):
    """`halo.port.Inbound` over the gateway: messages in, joins and leaves to the group guard."""

    def __init__(
        self,
        gateway: Gateway,
        groups: GroupGuard,
        commands: CommandRegistry,
        family: Callable[[], Family],
        delivery: Delivery,
        admin_token: str | None = None,
    ) -> None:
        super().__init__(family, admin_token)
        self._gateway = gateway
        self._delivery = delivery
        self._groups = groups
        self._commands = commands

    def commands(self) -> Sequence[tuple[str, str, str]]:
        return [(c.name, c.usage, c.summary) for c in self._commands if c.in_menu]

    async def handle(self, envelope: Envelope, progress: Progress | None = None) -> TurnOutcome:
        reply = await self._gateway.handle(
            envelope,
            on_delta=progress.delta if progress is not None else None,
            on_model_start=progress.model_started if progress is not None else None,
        )
        return await self._queue(envelope, reply)

    async def answer_again(self, envelope: Envelope) -> TurnOutcome:
        """A message a crash left unanswered (halo/pipeline/missed.py): answered now, once."""
        return await self._queue(envelope, await self._gateway.answer_again(envelope))

    async def _queue(self, envelope: Envelope, reply: Reply) -> TurnOutcome:
        reason = reply.decision.reason if reply.decision is not None and not reply.decision.allowed else None
        outbox_id = None
        if reply.text:
            # in a group the reply quotes the message it answers; in a DM it plainly follows it
            quote = envelope.platform_message_id if envelope.scope.type != "dm" else None
            outbox_id = await self._delivery.send(
                envelope.scope.id, reply.text, kind="reply", reply_to=quote, in_reply_to_envelope=envelope.id
            )
        return TurnOutcome(reply.text, reply.kind, outbox_id=outbox_id, reason=reason)

    async def joined(self, scope_id: str, speaker: Speaker) -> None:
        scope = resolve_scope(self._family(), scope_id)
        await self._groups.seen(scope, speaker, "joined it")

    async def left(self, scope_id: str, platform_user_id: str) -> None:
        await self._groups.left(scope_id, platform_user_id)

    async def reconnected(self, platform: Platform) -> None:
        await self._delivery.retry_now(platform)

    async def notice(self, scope_id: str, text: str, *, reply_to: str | None = None) -> None:
        await self._delivery.send(scope_id, text, kind="notice", reply_to=reply_to)
