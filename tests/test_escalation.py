"""Escalation end to end over the web chat: the child's reply, every parent told (in their
web inbox, and on Telegram — the real adapter against the fake Bot API), nothing dropped,
and the child's words shown only where their profile lets parents read them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from halo.runtime.app import build_halo
from tests.conftest import OWNER_AUTH, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.safety_support import (
    SAFETY_FAMILY,
    SafetyScript,
    alerts,
    family_settings,
    pushed_alerts,
    transcript,
)
from tests.telegram_support import adapter_of, telegram_yaml, tiny_backoff

STRANGER = "a guy I met online wants to meet me alone and says not to tell my parents"


async def with_telegram(running: Any, tg: FakeTelegram) -> Any:
    """Start the Telegram adapter (configured against the fake) and wait until it is connected."""
    await running.halo.start_adapters()
    adapter = adapter_of(running.halo)
    await tg.wait_for(lambda: adapter.status()["connected"], what="polling")
    return running


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


async def get_json(running: Any, path: str, token: str | None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with running.http.get(running.url(path), headers=headers) as resp:
        return resp.status, await resp.json()


async def test_adolescent_without_visibility_parents_get_the_category_only(home, tg, serve_halo) -> None:
    async with FakeOpenAI(responder=SafetyScript(summary="Aarav is being groomed by a stranger.")) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake) + telegram_yaml(tg.base_url)))
        await with_telegram(running, tg)
        status, body = await running.chat(STRANGER, token="aarav-token")
        await running.halo.gateway.drain()
        dms = {parent_id: await tg.wait_sent(parent_id) for parent_id in (1001, 1002)}

    assert status == 200
    assert "Thank you for telling me" in body["reply"] and "Wags or Mom" in body["reply"]
    assert "emergency" in body["reply"]  # contact with a stranger is about safety
    # each parent: a Telegram DM and an alert in their web inbox, the same words here
    for parent, token in (("wags", "wags-token"), ("mom", "mom-token")):
        (alert,) = await alerts(running.halo, parent)
        assert "Aarav" in alert and "contact with a stranger" in alert and "high" in alert
        for fragment in ("met online", "not to tell", "groomed", STRANGER):
            assert fragment not in alert
        assert ("event", alert) in transcript(running.halo, f"web:{parent}")
        telegram_id = {"wags": 1001, "mom": 1002}[parent]
        assert dms[telegram_id] == [alert]  # an adolescent without visibility: nothing more to quote
        assert ("event", alert) in transcript(running.halo, f"telegram:{telegram_id}")
        status, notes = await get_json(running, "/family/notifications", token)
        assert status == 200 and notes["notifications"][-1]["text"] == alert
        assert notes["notifications"][-1]["deliveredVia"] == ["telegram"]
    # the child's own transcript says what happened, for whoever may read it
    roles = [role for role, _ in transcript(running.halo, "web:aarav")]
    assert roles == ["user", "event", "assistant"]
    # the alert text was never in the parents' prompts or anyone's model call
    assert not any(
        STRANGER in fake.prompt_text(r) for r in fake.model_requests if "DIRECTION" not in fake.prompt_text(r)
    )


async def test_adolescent_with_visibility_parents_see_the_words(home, serve_halo) -> None:
    family = SAFETY_FAMILY.replace("age_group: adolescent,", "age_group: adolescent, parental_visibility: true,")
    text = "Sam from the game says he'll buy me a phone if I visit him on Saturday"  # only the model sees it
    script = SafetyScript(
        verdicts={"buy me a phone": ("high", "strangers", None)},
        summary="An adult from a game is offering gifts to meet Aarav.",
    )
    async with FakeOpenAI(responder=script) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake), family=family))
        _, body = await running.chat(text, token="aarav-token")
        await running.halo.gateway.drain()
    assert "Thank you for telling me" in body["reply"]
    for parent in ("wags", "mom"):
        (alert,) = await alerts(running.halo, parent)
        assert f'"{text}"' in alert and "An adult from a game is offering gifts" in alert
        (pushed,) = await pushed_alerts(running.halo, parent)
        assert "buy me a phone" not in pushed and "offering gifts" not in pushed
    # deciding to quote the child is a read of their words: audited per parent
    reads = [e for e in await running.halo.audit.tail(50, kind="policy") if e["action"] == "read_transcript"]
    assert {e["principal"] for e in reads} == {"wags", "mom"} and all(e["allowed"] for e in reads)


@pytest.mark.parametrize("provider", ["fake-model", "none"])
async def test_escalation_without_any_adapter_is_kept_and_delivered_later(provider, home, tg, serve_halo) -> None:
    async with FakeOpenAI(responder=SafetyScript()) as fake:
        yaml = llm_yaml(fake) if provider != "none" else "llm: {provider: none}\n"
        running = await serve_halo(family_settings(home, yaml + telegram_yaml(tg.base_url)))
        tiny_backoff(running.halo)
        tg.fail("sendMessage", 502, "Bad Gateway", times=2)  # Telegram down at first: both parents' DMs fail once
        status, body = await running.chat("I want to hurt myself", token="tara-token")
        assert status == 200 and "Thank you for telling me" in body["reply"]
        await running.halo.gateway.drain()
        assert fake.model_requests == []  # the floor decided: no model, not even the classifier
        assert len(await alerts(running.halo, "wags")) == 1  # in the web inbox already
        async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
            status_now = await resp.json()
        # seen once under load as a /status without "queues": say what came back if it happens again
        assert resp.status == 200 and "queues" in status_now, (resp.status, status_now)
        assert status_now["queues"]["outbox_pending"] == 2  # the Telegram DMs wait

        await with_telegram(running, tg)  # the adapter connects later: what waited goes now
        sent = {parent_id: await tg.wait_sent(parent_id) for parent_id in (1001, 1002)}
        await running.halo.delivery.drain()
        async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as resp:
            assert (await resp.json())["queues"]["outbox_pending"] == 0
        # a young child: the words are in each parent's web inbox, never in what a chat app carries
        assert all(len(texts) == 1 and "hurt myself" not in texts[0] and "inbox" in texts[0] for texts in sent.values())
        assert all('"I want to hurt myself"' in alert for alert in await alerts(running.halo, "wags"))
        assert any('"I want to hurt myself"' in text for _, text in transcript(running.halo, "web:wags"))
        assert all("hurt myself" not in text for _, text in transcript(running.halo, "telegram:1001"))


async def test_medium_risk_tells_parents_per_profile(home, serve_halo) -> None:
    text = "my address is 12 Oak Street"
    async with FakeOpenAI(responder=SafetyScript(reply="Thanks! Keep your address for people you know.")) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake)))
        _, young = await running.chat(text, token="tara-token")
        _, teen = await running.chat(text, token="aarav-token")
        await running.halo.gateway.drain()
    assert young["reply"] == teen["reply"] == "Thanks! Keep your address for people you know."
    (alert,) = await alerts(running.halo, "mom")  # tara's only: an adolescent's medium risk is audited, not told
    assert "Tara" in alert and "medium" in alert and "personal details" in alert
    events = await running.halo.audit.tail(20, kind="safety")
    assert {(e["member"], e["level"], e["category"]) for e in events} == {
        ("tara", "medium", "personal_data"),
        ("aarav", "medium", "personal_data"),
    }


async def test_a_notifier_failure_never_costs_the_child_their_reply(home, serve_halo, monkeypatch) -> None:
    async with FakeOpenAI(responder=SafetyScript()) as fake:
        running = await serve_halo(family_settings(home, llm_yaml(fake)))

        async def broken(*args: Any, **kwargs: Any) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(running.halo.notifier, "notify", broken)
        status, body = await running.chat("I want to hurt myself", token="tara-token")
    assert status == 200 and "Thank you for telling me" in body["reply"]
    failed = await running.halo.audit.tail(10, kind="notification_failed")
    assert {e["member"] for e in failed} == {"wags", "mom"}


async def test_undelivered_alerts_survive_a_restart(home, tg) -> None:
    """The outbox is on disk: an alert no adapter could take is delivered after a restart."""
    first = build_halo(family_settings(home, "llm: {provider: none}\n"))  # no Telegram adapter at all
    notes = await first.notifier.notify_parents("test alert", kind="safety_alert", about="tara")
    assert len(notes) == 2 and first.delivery.counts["pending"] == 2  # the DMs wait in halo.db
    await first.close()

    second = tiny_backoff(build_halo(family_settings(home, "llm: {provider: none}\n" + telegram_yaml(tg.base_url))))
    try:
        await second.start()
        assert await tg.wait_sent(1001) == ["test alert"] and await tg.wait_sent(1002) == ["test alert"]
    finally:
        await second.close()
