"""The core's side of the adapter port: what an adapter is told about people, chats and commands."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from adapters.terminal import TerminalChat
from adapters.web import WebChatAdapter
from halo.commands.builtin import Command, CommandRegistry
from halo.port import Adapter, AdminRoutes, Envelope, PresenceCheck


def test_speakers_and_scopes_come_from_the_live_family(halo: Any):
    inbound = halo.inbound
    mom = inbound.speaker("telegram", "1002", display_name="Mom S")
    assert mom.member is not None and mom.member.id == "mom" and mom.display_name == "Mom S"
    assert inbound.speaker("telegram", "1002", is_bot=True).member is None  # a bot is never a member
    assert inbound.speaker("telegram", "4242").member is None
    assert inbound.speaker("discord", "2001").member.id == "priya"
    group = inbound.scope("telegram", "-1001234")
    assert (group.id, group.type) == ("telegram:-1001234", "parents_group")
    assert not inbound.answers_everything(group)
    assert inbound.scope("telegram", "1003").type == "dm"


def test_web_callers_are_a_member_by_their_own_token_never_by_being_local(halo: Any):
    def caller(headers: dict[str, str]) -> Any:
        return halo.inbound.http_speaker(make_mocked_request("POST", "/api/chat", headers=headers))

    assert caller({"Authorization": "Bearer aarav-token"}).member.id == "aarav"
    assert caller({"Authorization": "Bearer wrong"}) is None
    assert caller({}) is None  # a family computer is shared: no credential, nobody


def test_the_command_menu_is_the_composed_set_in_order(halo: Any):
    names = [name for name, _, _ in halo.inbound.commands()]
    assert names[:3] == ["help", "whoami", "new"]
    assert {"remember", "forget", "memory", "share", "recall"} <= set(names)
    with pytest.raises(ValueError, match="/help"):
        CommandRegistry([*halo.commands, next(iter(halo.commands))])
    assert isinstance(next(iter(halo.commands)), Command)


async def test_handle_returns_the_reply_and_refusals_say_why(halo: Any):
    inbound = halo.inbound
    speaker = inbound.speaker("web", "mom")
    outcome = await inbound.handle(Envelope("web", inbound.scope("web", "mom"), speaker, "/whoami"))
    assert outcome.kind == "command" and "You are Mom" in (outcome.text or "")
    stranger = inbound.speaker("telegram", "4242")
    group = inbound.scope("telegram", "-1001234")
    refused = await inbound.handle(Envelope("telegram", group, stranger, "hi", addressed=True))
    assert refused.text is None and refused.kind == "silent"


def test_adapters_meet_the_port_protocols(halo: Any):
    web = next(a for a in halo.adapters if a.platform == "web")
    assert isinstance(web, WebChatAdapter) and isinstance(web, Adapter) and isinstance(web, AdminRoutes)
    assert not isinstance(web, PresenceCheck)
    terminal = TerminalChat(halo.inbound, halo.inbound.speaker("cli", "mom"))
    assert isinstance(terminal, Adapter) and terminal.scope.id == "cli:mom"
