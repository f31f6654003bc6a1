"""Commands in the menu (issue 35): Telegram's "/" shows, in each kind of chat, the commands
that chat supports (setMyCommands per scope), with their descriptions."""

from __future__ import annotations

from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import COMMENTED_FAMILY, StartTelegram

FAMILY_GROUP = -1005555
WITH_FAMILY_GROUP = COMMENTED_FAMILY + f"family_group: {{telegram_chat_id: {FAMILY_GROUP}}}\n"


async def test_each_kind_of_chat_gets_its_own_command_list(start_telegram: StartTelegram, tg: FakeTelegram) -> None:
    await start_telegram(family=WITH_FAMILY_GROUP)
    await tg.wait_for(lambda: len(tg.commands) == 3, what="three menus")

    dms = tg.menu({"type": "all_private_chats"})
    parents = tg.menu({"type": "chat", "chat_id": -1001234})
    family = tg.menu({"type": "chat", "chat_id": FAMILY_GROUP})

    assert {"help", "whoami", "new", "remind", "reminders", "approve", "deny", "resume", "mute"} <= set(dms)
    assert {"approve", "deny", "resume", "help"} <= set(parents)
    assert {"help", "remind", "new"} <= set(family)
    assert not {"approve", "deny", "resume", "mute", "usage"} & set(family)  # a family group decides nothing
    assert not {"task", "tasks"} & (set(dms) | set(parents) | set(family))  # Discord's work channels only
    assert "remind!" not in dms  # a name Telegram refuses
    described = {c["command"]: c["description"] for c in tg.calls_to("setMyCommands")[0].params["commands"]}
    assert described["approve"] == "Let someone who asked to join talk to me"
