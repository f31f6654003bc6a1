"""The core's side of the adapter port (`halo.port.Inbound` and `Directory`): how a chat message gets in.

An adapter hands over what the platform said (`Incoming`); here it becomes an envelope: the
speaker and the scope are resolved from the live family (a member approved a moment ago is
known at once), and whether the message is for halo is decided. Joins and leaves feed the
group guard; a group halo is not configured for is told once how to set it up. `receive`
runs the gateway, queues its reply in the outbox (`Delivery`, which hands it back to the
adapter's `send`) and turns it into the port's `TurnOutcome`. Adapters see only this
object, never the gateway or the services behind it.

With several processes on PostgreSQL, only the active one takes messages: a standby forwards
HTTP requests to it (halo/cluster/forward.py) and runs no chat app, so nothing here asks who
serves the family.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from config.family import Family, Member
from halo.commands.builtin import CommandRegistry
from halo.core.envelope import Envelope, Platform, Scope, ScopeType, Speaker
from halo.core.options import Option
from halo.core.scopes import resolve_scope
from halo.family.groups import GroupGuard
from halo.outbound.asks import MEMBERS, Asks
from halo.outbound.delivery import Delivery
from halo.pipeline.gateway import Gateway, Reply
from halo.pipeline.unconfigured import UnconfiguredChats
from halo.port import Audit, ChatMembership, Incoming, Menu, Press, Pressed, Progress, Sender, TurnOutcome
from halo.web_auth import member_of
from halo.work.suggestions import TaskSuggestions

OFFER_LASTS = timedelta(days=7)  # a reply's buttons (a task's status); the typed command works any time

if TYPE_CHECKING:
    from aiohttp import web


class FamilyDirectory:
    """The family half of the port (`halo.port.Directory`): who a platform user is, which scope
    a chat is. `family` is a callable because the family changes while halo runs (pairing
    approvals rebuild it)."""

    def __init__(
        self,
        family: Callable[[], Family],
        commands: CommandRegistry | None = None,
        admin_token: str | None = None,
        suggestions: TaskSuggestions | None = None,
    ) -> None:
        self._suggestions = suggestions  # autocomplete for the work channels' slash commands
        self._family = family
        self._commands = commands
        self._admin_token = admin_token  # the admin token speaks for nobody in a chat

    def speaker(self, platform: Platform, sender: Sender) -> Speaker:
        """A member when the family config names this platform id (and it is no bot), else unknown."""
        member = None if sender.is_bot else self._member_by_platform_id(platform, sender.id)
        return Speaker(platform_user_id=sender.id, member=member, display_name=sender.name, username=sender.username)

    def _member_by_platform_id(self, platform: Platform, user_id: str) -> Member | None:
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
        """True when halo answers every message in this group, not only when addressed."""
        return scope.type == "parents_group" and self._family().parents_group.respond_to_all

    def commands(self, scope_type: ScopeType | None = None) -> Sequence[tuple[str, str, str]]:
        return [
            (c.name, c.usage, c.summary)
            for c in self._commands or ()
            if (c.in_menu if scope_type is None else c.offered_in(scope_type))
        ]

    def menus(self, platform: Platform) -> Sequence[Menu]:
        family = self._family()
        groups: list[tuple[ScopeType, int | None]] = []
        if platform == "telegram":
            groups = [
                ("parents_group", family.parents_group.telegram_chat_id),
                ("family_group", family.family_group.telegram_chat_id),
            ]
        elif platform == "discord":
            groups = [("work_channel", channel) for channel in family.work.discord_channel_ids]
        menus = [Menu("dm", None, tuple(self.commands("dm")))]
        menus += [Menu(kind, str(chat), tuple(self.commands(kind))) for kind, chat in groups if chat is not None]
        return menus

    async def suggest(
        self, platform: Platform, chat_id: str, what: Literal["project", "task"], typed: str
    ) -> Sequence[tuple[str, str]]:
        scope = self.scope(platform, chat_id)
        if self._suggestions is None or scope.type != "work_channel":
            return []
        return await self._suggestions(scope.id, what, typed)

    def web_member(self, request: web.BaseRequest) -> Sender | None:
        member = member_of(request, self._family(), self._admin_token)
        return None if member is None else Sender(member.id, name=member.name)

    def envelope(self, message: Incoming) -> tuple[Envelope, bool]:
        """The message as an envelope, and whether its chat is a group halo does not use (not
        configured, or no scope at all: a Discord channel that is not a work channel)."""
        scope = self.scope(message.platform, message.chat_id)
        private = message.chat_kind == "private"
        addressed = private or message.addressed or self.answers_everything(scope)
        envelope = Envelope(
            platform=message.platform,
            scope=scope,
            speaker=self.speaker(message.platform, message.sender),
            text=message.text.strip(),
            addressed=addressed,
            platform_message_id=message.message_id,
            reply_to=message.reply_to,
            voice=message.voice,
            attachment=message.attachment,
            ts=message.ts or datetime.now(UTC),
            id=message.id,
        )
        return envelope, not private and (scope.type == "dm" or not scope.configured)


class GatewayInbound(FamilyDirectory):
    """`halo.port.Inbound` over the gateway: messages in, joins and leaves to the group guard."""

    def __init__(
        self,
        gateway: Gateway,
        groups: GroupGuard,
        commands: CommandRegistry,
        family: Callable[[], Family],
        delivery: Delivery,
        unconfigured: UnconfiguredChats,
        asks: Asks,
        audit: Audit,
        admin_token: str | None = None,
        suggestions: TaskSuggestions | None = None,
    ) -> None:
        super().__init__(family, commands, admin_token, suggestions)
        self._asks = asks
        self._audit = audit
        self._gateway = gateway
        self._delivery = delivery
        self._groups = groups
        self._unconfigured = unconfigured

    async def receive(self, message: Incoming, progress: Progress | None = None) -> TurnOutcome:
        envelope, unused_group = self.envelope(message)
        if unused_group:
            if message.addressed:
                await self._unconfigured.tell_once(envelope.scope, reply_to=message.message_id)
            if envelope.scope.type == "dm":  # a group chat that is no scope: never handled as someone's DM
                return TurnOutcome(None, "silent")
        if not envelope.text and envelope.voice is None and envelope.attachment is None:
            return TurnOutcome(None, "silent")  # a bare mention: nothing to answer
        reply = await self._gateway.handle(
            envelope,
            on_delta=progress.delta if progress is not None else None,
            on_model_start=progress.model_started if progress is not None else None,
        )
        return await self._queue(envelope, reply)

    async def press(self, press: Press) -> Pressed:
        """A button: the presser may decide the ask, once, and the decision runs as the typed
        command it stands for, through `receive` (its scope's order, the policy, the transcript)."""
        speaker = self.speaker(press.platform, press.sender)
        claim = await self._asks.claim(press.choice_id, speaker.member)
        if claim.refused:
            self._audit.write(
                "button_refused",
                choice_id=press.choice_id[:64],
                platform=press.platform,
                chat_id=press.chat_id,
                platform_user_id=press.sender.id,
                member=speaker.member.id if speaker.member else None,
            )
        if claim.refusal is not None:
            return Pressed(claim.refusal, closed=not claim.refused)
        if claim.command is not None:
            typed = Incoming(
                press.platform, press.chat_id, press.chat_kind, press.sender, claim.command, addressed=True
            )
            await self.receive(typed)
        return Pressed(f"{claim.label} ✓", closed=True)

    async def answer_again(self, envelope: Envelope) -> TurnOutcome:
        """A message a crash left unanswered (halo/pipeline/missed.py): answered now, once."""
        return await self._queue(envelope, await self._gateway.answer_again(envelope))

    async def _queue(self, envelope: Envelope, reply: Reply) -> TurnOutcome:
        outbox_id = await self._send_reply(envelope, reply.text, reply.offered) if reply.text else None
        return TurnOutcome(reply.text, reply.kind, outbox_id=outbox_id, reason=_refusal(reply))

    async def _send_reply(self, envelope: Envelope, text: str, offered: tuple[Option, ...] = ()) -> str:
        # in a group the reply quotes the message it answers; in a DM it plainly follows it
        quote = envelope.platform_message_id if envelope.scope.type != "dm" else None
        choices = await self._asks.record(list(offered), who=MEMBERS, ttl=OFFER_LASTS) if offered else ()
        return await self._delivery.send(
            envelope.scope.id, text, kind="reply", reply_to=quote, in_reply_to_envelope=envelope.id, choices=choices
        )

    async def membership(self, change: ChatMembership) -> None:
        scope = self.scope(change.platform, change.chat_id)
        if change.halo_itself:
            if change.joined and (scope.type == "dm" or not scope.configured):
                await self._unconfigured.tell_once(scope)
            return
        if change.joined:
            await self._groups.seen(scope, self.speaker(change.platform, change.who), "joined it")
        else:
            await self._groups.left(scope.id, change.who.id)

    async def reconnected(self, platform: Platform) -> None:
        await self._delivery.retry_now(platform)


def _refusal(reply: Reply) -> str | None:
    """Why the message was refused, when it was."""
    return reply.decision.reason if reply.decision is not None and not reply.decision.allowed else None
