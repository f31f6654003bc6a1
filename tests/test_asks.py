"""The record of decisions asked as buttons (halo/outbound/asks.py) on both stores: a press
is the presser's only when they may decide, counts once, and not after the ask lapsed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from config.settings import Settings
from halo.outbound.asks import ALREADY, GONE, NOT_YOURS, PARENTS, UNKNOWN, Asks, Option
from halo.outbound.delivery import Delivery
from halo.storage import HaloDB
from transcripts import TranscriptStore

pytestmark = pytest.mark.usefixtures("on_both_stores")


@pytest.fixture
def asks(
    halo_db: HaloDB, settings_for: Callable[..., Settings], tmp_path: Path
) -> tuple[Asks, Settings, list[datetime]]:
    settings = settings_for()
    family = settings.family_view()
    now = [datetime.now(UTC)]
    delivery = Delivery(halo_db, TranscriptStore(tmp_path / "transcripts"), lambda: family)
    return Asks(halo_db, delivery, lambda: family, clock=lambda: now[0]), settings, now


OPTIONS = [Option("Approve", "yes 3"), Option("Deny", "no 3")]


async def test_a_parents_press_counts_once_and_a_childs_not_at_all(asks) -> None:
    record, settings, _ = asks
    family = settings.family_view()
    mom, aarav = family.member("mom"), family.member("aarav")
    approve, deny = await record.record(OPTIONS, who=PARENTS, ttl=timedelta(minutes=30))
    assert len(approve.id.encode()) <= 64 and "yes" not in approve.id

    refused = await record.claim(approve.id, aarav)
    assert (refused.refusal, refused.refused) == (NOT_YOURS, True)
    taken = await record.claim(deny.id, mom)
    assert (taken.command, taken.label, taken.refusal) == ("no 3", "Deny", None)
    again = await record.claim(approve.id, family.member("wags"))
    assert (again.refusal, again.command) == (ALREADY, None)


async def test_a_press_after_the_ask_lapsed_changes_nothing(asks) -> None:
    record, settings, now = asks
    mom = settings.family_view().member("mom")
    approve, _ = await record.record(OPTIONS, who="mom", ttl=timedelta(minutes=30))
    now[0] += timedelta(minutes=31)
    late = await record.claim(approve.id, mom)
    assert (late.refusal, late.command) == (GONE, None)


@pytest.mark.parametrize("choice_id", ["", "yes 3", "0123456789abcdef.9", "0123456789abcdef.0", "x" * 500])
async def test_an_id_halo_never_gave_is_unknown(asks, choice_id: str) -> None:
    record, settings, _ = asks
    await record.record(OPTIONS, who=PARENTS, ttl=timedelta(minutes=30))
    claim = await record.claim(choice_id, settings.family_view().member("mom"))
    assert (claim.refusal, claim.command) == (UNKNOWN, None)
