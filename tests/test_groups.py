"""The parents group guard through the real gateway and policy: someone who may not be there
stops the group; only a parent's /resume, once they have left, restarts it."""

from __future__ import annotations

import pytest

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.inventory import Halo
from halo.runtime.app import build_halo
from policy import SYSTEM
from tests.conftest import llm_yaml

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

GROUP = "telegram:-1001234"


def speaker(halo: Halo, user_id: int, name: str = "Stranger") -> Speaker:
    member = halo.family.by_telegram(user_id)
    return Speaker(str(user_id), member, display_name=member.name if member else name)


async def say(halo: Halo, user_id: int, text: str, addressed: bool = True):
    envelope = Envelope(
        platform="telegram",
        scope=resolve_scope(halo.family, GROUP),
        speaker=speaker(halo, user_id),
        text=text,
        addressed=addressed,
    )
    return await halo.gateway.handle(envelope)


async def test_a_childs_message_stops_the_group_until_a_parent_resumes(halo, outbox, fake_llm):
    fake_llm.reply("Pasta.")
    assert (await say(halo, 1002, "what's for dinner?")).text == "Pasta."

    refused = await say(halo, 1003, "hi mum")

    assert refused.kind == "silent" and refused.text is None
    for parent_dm in ("telegram:1001", "telegram:1002"):
        [notice] = outbox.to(parent_dm)
        assert "stopped using the parents group: Aarav (child) wrote there" in notice and "/resume" in notice
    [event] = await halo.audit.tail(5, kind="group_suspended")
    assert (event["scope_id"], event["speaker"]) == (GROUP, "aarav")

    requests = len(fake_llm.model_requests)
    parent = await say(halo, 1002, "are you there?")
    assert parent.kind == "silent" and "group-suspended" in (parent.decision.policy_ids if parent.decision else ())
    assert len(fake_llm.model_requests) == requests
    scope = resolve_scope(halo.family, GROUP)
    suspended = (await halo.groups.current(Envelope("telegram", scope, speaker(halo, 1001), ""))).scope
    assert not halo.policy.decide("receive_proactive", principal=SYSTEM, resource=suspended).allowed

    # /resume from the group while nobody has been seen leaving: refused (no platform can vouch)
    still = await say(halo, 1001, "/resume")
    assert "Aarav (child) is still in the group" in (still.text or "")
    assert (await say(halo, 1003, "/resume")).text is None  # a child's /resume is just another intrusion

    await halo.groups.left(GROUP, "1003")
    resumed = await say(halo, 1001, "/resume")
    assert resumed.text == "Resumed: I'm back in the parents group."
    assert (await halo.audit.tail(1, kind="group_resumed"))[0]["by"] == "wags"
    fake_llm.reply("Welcome back.")
    assert (await say(halo, 1002, "hello again")).text == "Welcome back."


async def test_resume_from_a_dm_needs_a_parent(halo, outbox):
    await say(halo, 4242, "who is here?")  # a stranger in the parents group
    await halo.groups.left(GROUP, "4242")

    child = await halo.gateway.handle(
        Envelope("telegram", resolve_scope(halo.family, "telegram:1003"), speaker(halo, 1003), "/resume")
    )
    assert "only parents can resume" in (child.text or "")
    parent = await halo.gateway.handle(
        Envelope("telegram", resolve_scope(halo.family, "telegram:1001"), speaker(halo, 1001), "/resume")
    )
    assert parent.text == "Resumed: I'm back in the parents group."
    assert "someone I don't know (Stranger, id 4242) wrote there" in outbox.to("telegram:1002")[0]


async def test_suspension_survives_a_restart(fake_llm, settings_for):
    settings = settings_for(llm_yaml(fake_llm))
    first = build_halo(settings)
    await say(first, 1003, "hi")
    await first.close()

    second = build_halo(settings)
    try:
        await second.groups.left(GROUP, "1003")  # left while halo was down …
        assert (await say(second, 1001, "hello")).kind == "silent"  # … still needs a /resume
        assert await second.groups.suspended_scopes() == [GROUP]
    finally:
        await second.close()


async def test_a_platform_that_vouches_someone_left_lets_resume_work(halo, outbox):
    await say(halo, 1004, "hello")  # Tara, a young child
    asked: list[tuple[str, str]] = []

    async def gone(scope_id: str, user_id: str) -> bool:
        asked.append((scope_id, user_id))
        return False

    halo.groups.register_presence("telegram", gone)
    assert (await say(halo, 1002, "/resume")).text == "Resumed: I'm back in the parents group."
    assert asked == [(GROUP, "1004")]


async def test_unaddressed_group_messages_become_context(halo, outbox, fake_llm):
    kept = await say(halo, 1001, "We're out of milk.", addressed=False)
    assert (kept.kind, kept.text) == ("kept", None) and fake_llm.model_requests == []
    await say(halo, 1002, "what do we need from the shop?")
    prompt = fake_llm.last_prompt_text()
    assert "[Wags] We're out of milk." in prompt and "[Mom] what do we need from the shop?" in prompt
