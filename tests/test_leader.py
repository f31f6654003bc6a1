"""The singletons run on one process at a time: two halos on one PostgreSQL database, each with
its own HALO_HOME and the same Telegram bot (the Bot API stand-in). Only the leader polls
Telegram; a message there is answered once; when the leader stops, the other starts polling
and answers the next message, once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.storage_support import fresh_database
from tests.telegram_support import adapter_of, telegram_yaml, tiny_backoff
from tests.waiting import eventually

pytestmark = pytest.mark.postgres

LEASE = 6.0  # a beat every 2 s: a loaded machine's stall of a few seconds does not move the leader mid-test
MOM = 1002


@pytest.fixture
async def two(
    tmp_path: Path, fake_llm: FakeOpenAI, tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[Halo]]:
    async with fresh_database(migrated=True) as url:
        monkeypatch.setenv("HALO_STORAGE__URL", url)
        monkeypatch.setenv("HALO_STORAGE__LEASE_SECONDS", str(LEASE))
        halos = []
        for name in ("a", "b"):
            home = write_home(tmp_path / name, llm_yaml(fake_llm) + telegram_yaml(tg.base_url), family=FAMILY_YAML)
            halos.append(tiny_backoff(build_halo(load_settings(home))))
        for halo in halos:
            await halo.start()
        yield halos
        for halo in halos:
            await halo.close()


def polling(halo: Halo) -> bool:
    return bool(adapter_of(halo).status()["connected"])


async def test_only_the_leader_polls_telegram_and_the_other_takes_over_when_it_stops(
    two: list[Halo], tg: FakeTelegram
) -> None:
    leader = await eventually(lambda: next((h for h in two if polling(h)), None), what="one halo polling")
    other = next(h for h in two if h is not leader)
    assert other.cluster is not None and not other.cluster.status()["leader"]
    assert not polling(other)

    tg.message(MOM, MOM, "first")
    assert await tg.wait_sent(MOM) == ["Hello from the fake model"]

    await leader.close()  # a clean stop gives the leader lease back at once
    two.remove(leader)
    await eventually(lambda: polling(other), within=60, what="the other halo polling")
    tg.message(MOM, MOM, "second")
    assert await tg.wait_sent(MOM, 2) == ["Hello from the fake model"] * 2
    assert len(tg.sent(MOM)) == 2  # each answered once
