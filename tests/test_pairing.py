"""Pairing through the real gateway: strangers get one code, parents decide, nobody else can.

What halo sends through `Delivery` is recorded by the `outbox` fixture (tests/conftest.py);
tests/test_telegram.py runs the same flow through the real Telegram adapter.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.family.pairing import CODE_ALPHABET, CODE_LENGTH, MAX_PENDING, PairingError, UnknownCode
from halo.inventory import Halo

pytestmark = pytest.mark.usefixtures("on_both_stores")  # halo.db on SQLite, then on PostgreSQL

CODE = re.compile(rf"\b[{CODE_ALPHABET}]{{{CODE_LENGTH}}}\b")


async def dm(halo: Halo, user_id: int, text: str, name: str = "Kiran Shah", username: str | None = "kiran"):
    family = halo.family
    envelope = Envelope(
        platform="telegram",
        scope=resolve_scope(family, f"telegram:{user_id}"),
        speaker=Speaker(str(user_id), family.by_telegram(user_id), display_name=name, username=username),
        text=text,
    )
    return await halo.gateway.handle(envelope)


async def test_a_stranger_gets_one_code_and_nothing_reaches_the_model(halo, outbox, fake_llm):
    first = await dm(halo, 5555, "hi, can I talk to you?")
    again = [await dm(halo, 5555, "hello??") for _ in range(3)]

    assert first.kind == "denied" and CODE.search(first.text or "")
    code = CODE.search(first.text or "").group()
    assert not set(code) & set("0O1IL")
    assert [r.text for r in again] == [None, None, None]  # no amplification
    assert fake_llm.model_requests == []
    assert not halo.transcripts.exists("telegram:5555")
    for parent_dm in ("telegram:1001", "telegram:1002"):
        [notice] = outbox.to(parent_dm)
        assert "Someone (Kiran Shah, @kiran" in notice
        assert f"/approve {code} child Kiran" in notice and f"/deny {code}" in notice
    assert outbox.to("telegram:1003") == []  # children are not asked
    [pending] = await halo.pairing.list_pending()
    assert (pending.code, pending.platform_user_id, pending.username) == (code, "5555", "kiran")
    events = await halo.audit.tail(20, kind="pairing_requested")
    assert [e["platform_user_id"] for e in events] == ["5555"]


async def test_a_parent_approves_and_the_newcomer_is_answered(halo, outbox, fake_llm):
    code = CODE.search((await dm(halo, 5555, "hi")).text or "").group()

    reply = await dm(halo, 1002, f"/approve {code.lower()} child Kiran adolescent")

    assert reply.kind == "command" and "Approved: Kiran (child, adolescent, id kiran)" in (reply.text or "")
    kiran = halo.family.member("kiran")
    assert kiran is not None and kiran.telegram_user_id == 5555 and kiran.age_group == "adolescent"
    assert "telegram_user_id: 5555" in halo.settings.paths.config_file.read_text()
    assert (halo.settings.paths.home / "halo.yaml.bak").exists()
    assert outbox.to("telegram:5555") == ["Welcome, Kiran! A parent let you in — talk to me any time."]
    fake_llm.reply("Hi Kiran!")
    answer = await dm(halo, 5555, "hello again")
    assert (answer.kind, answer.text) == ("model", "Hi Kiran!")
    assert "Kiran" in fake_llm.last_prompt_text()
    [event] = await halo.audit.tail(5, kind="pairing_approved")
    assert (event["by"], event["member_id"], event["code"]) == ("mom", "kiran", code)
    assert await halo.pairing.list_pending() == []


async def test_a_child_cannot_approve(halo, outbox):
    code = CODE.search((await dm(halo, 5555, "hi")).text or "").group()

    reply = await dm(halo, 1003, f"/approve {code} parent Kiran")

    assert "only parents can approve" in (reply.text or "")
    assert halo.family.by_telegram(5555) is None
    assert not (halo.settings.paths.home / "halo.yaml.bak").exists()
    assert [r.code for r in await halo.pairing.list_pending()] == [code]
    denied = await halo.audit.tail(5, kind="policy")
    assert any(e["principal"] == "aarav" and e["action"] == "admin" and not e["allowed"] for e in denied)


async def test_denied_senders_hear_nothing_more(halo, outbox):
    code = CODE.search((await dm(halo, 6666, "hi")).text or "").group()
    reply = await dm(halo, 1001, f"/deny {code}")
    assert "Denied: Kiran Shah, @kiran" in (reply.text or "")
    assert (await dm(halo, 6666, "please?")).text is None
    halo.pairing.clock = lambda: 10**12  # long after: a denial does not expire
    assert (await dm(halo, 6666, "please??")).text is None
    assert (await halo.audit.tail(1, kind="pairing_denied"))[0]["by"] == "wags"


async def test_at_most_three_pending_and_codes_expire(halo, outbox):
    replies = [await dm(halo, 7000 + n, "hi", name=f"Person {n}") for n in range(MAX_PENDING + 1)]
    assert all(CODE.search(r.text or "") for r in replies[:MAX_PENDING])
    assert "can't take more join requests" in (replies[-1].text or "") and not CODE.search(replies[-1].text or "")
    assert len(outbox.to("telegram:1001")) == MAX_PENDING  # the overflow does not reach parents
    assert (await dm(halo, 7000 + MAX_PENDING, "hi?")).text is None  # and is said once

    code = CODE.search(replies[0].text or "").group()
    pairing = halo.pairing
    real_clock = pairing.clock
    pairing.clock = lambda: real_clock() + 3601
    with pytest.raises(UnknownCode, match="expired"):
        await pairing.approve(code, role="child", name="Late", by="wags")
    assert await pairing.list_pending() == []
    fresh = await dm(halo, 7000, "hi again")  # an expired request may be made again
    assert CODE.search(fresh.text or "") and CODE.search(fresh.text or "").group() != code


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ("", "Usage: /approve CODE ROLE NAME"),
        ("ABCDEFGH child", "Usage"),
        ("ABCDEFGH boss Kiran", "'boss' is not a role"),
        ("ABCDEFGH child Kiran", "no open request with code ABCDEFGH"),
    ],
)
async def test_approve_explains_what_is_wrong(halo, outbox, args: str, error: str):
    reply = await dm(halo, 1001, f"/approve {args}".strip())
    assert error in (reply.text or "")


async def test_approve_refuses_an_age_group_for_adults(halo: Halo, outbox: Any):
    code = CODE.search((await dm(halo, 5555, "hi")).text or "").group()
    with pytest.raises(PairingError, match="age group is for children"):
        await halo.pairing.approve(code, role="parent", name="Kiran", age_group="adolescent", by="wags")
