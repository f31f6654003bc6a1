"""The core's side of the adapter port: what an adapter is told about people, chats and commands."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from adapters.terminal import TerminalChat
from adapters.web import WebChatAdapter
from halo.commands.builtin import Command, CommandRegistry
from halo.port import Adapter, AdminRoutes, Incoming, PresenceCheck, Sender


def incoming(platform: Any, chat: str, sender: Sender, text: str, kind: Any = "private", **more: Any) -> Incoming:
    return Incoming(platform=platform, chat_id=chat, chat_kind=kind, sender=sender, text=text, **more)


def test_speakers_scopes_and_being_addressed_come_from_the_live_family(halo: Any):
    """halo, not the adapter, works out who wrote what where, and whether it is for halo."""
    inbound = halo.inbound
    envelope, unused = inbound.envelope(incoming("telegram", "1002", Sender("1002", name="Mom S"), "hi"))
    mom = envelope.speaker
    assert mom.member is not None and mom.member.id == "mom" and mom.display_name == "Mom S"
    assert (envelope.scope.id, envelope.scope.type, envelope.addressed, unused) == ("telegram:1002", "dm", True, False)
    bot, _ = inbound.envelope(incoming("telegram", "1002", Sender("1002", is_bot=True), "hi"))
    assert bot.speaker.member is None  # a bot is never a member
    priya, _ = inbound.envelope(incoming("discord", "2001", Sender("2001"), "hi"))
    assert priya.speaker.member.id == "priya"
    said, unused = inbound.envelope(incoming("telegram", "-1001234", Sender("4242"), "hi all", "group"))
    assert (said.scope.id, said.scope.type, said.addressed, unused) == (
        "telegram:-1001234",
        "parents_group",
        False,
        False,
    )
    assert said.speaker.member is None
    other_channel, unused = inbound.envelope(incoming("discord", "777", Sender("2001"), "hi", "group", addressed=True))
    assert other_channel.addressed and unused, "a Discord channel halo does not work in is never a DM"
    assert inbound.scope("telegram", "1003").type == "dm"


def test_web_callers_are_a_member_by_their_own_token_never_by_being_local(halo: Any):
    def caller(headers: dict[str, str]) -> Any:
        return halo.inbound.web_member(make_mocked_request("POST", "/api/chat", headers=headers))

    assert caller({"Authorization": "Bearer aarav-token"}).id == "aarav"
    assert caller({"Authorization": "Bearer wrong"}) is None
    assert caller({}) is None  # a family computer is shared: no credential, nobody


def test_the_command_menu_is_the_composed_set_in_order(halo: Any):
    names = [name for name, _, _ in halo.inbound.commands()]
    assert names[:3] == ["help", "whoami", "new"]
    assert {"remember", "forget", "memory", "share", "recall"} <= set(names)
    with pytest.raises(ValueError, match="/help"):
        CommandRegistry([*halo.commands, next(iter(halo.commands))])
    assert isinstance(next(iter(halo.commands)), Command)


async def test_one_call_per_message_returns_the_reply_and_refusals_say_why(halo: Any):
    inbound = halo.inbound
    outcome = await inbound.receive(incoming("web", "mom", Sender("mom"), "/whoami"))
    assert outcome.kind == "command" and "You are Mom" in (outcome.text or "")
    refused = await inbound.receive(incoming("telegram", "-1001234", Sender("4242"), "hi", "group", addressed=True))
    assert refused.text is None and refused.kind == "silent"


def test_adapters_meet_the_port_protocols(halo: Any):
    web = next(a for a in halo.adapters if a.platform == "web")
    assert isinstance(web, WebChatAdapter) and isinstance(web, Adapter) and isinstance(web, AdminRoutes)
    assert not isinstance(web, PresenceCheck)
    terminal = TerminalChat(halo.inbound, Sender("mom", name="Mom"))
    assert isinstance(terminal, Adapter) and terminal.scope_id == "cli:mom"
