"""What Telegram tests share: halo.yaml for the Bot API stand-in, and a starter that runs halo
against it and waits until the adapter polls (fixtures `tg` and `start_telegram` in conftest)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, Protocol

from adapters.telegram import TelegramAdapter
from config.loader import load_settings
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import TOKEN, FakeTelegram

COMMENTED_FAMILY = "# the Sharmas — edited by hand\n" + FAMILY_YAML


def telegram_yaml(base_url: str, **extra: Any) -> str:
    fields = {
        "token": TOKEN,
        "base_url": base_url,
        "poll_timeout_seconds": 1,
        "retry_backoff_seconds": 0.05,
        **extra,
    }
    return "telegram:\n" + "".join(
        f"  {k}: {v!r}\n" if isinstance(v, str) else f"  {k}: {v}\n" for k, v in fields.items()
    )


def tiny_backoff(halo: Halo) -> Halo:
    """Outbox retries in milliseconds (Telegram's retry_after capped too): tests never wait on the clock."""
    halo.delivery.base_delay = 0.01
    halo.delivery.max_delay = 0.05
    return halo


def adapter_of(halo: Halo) -> TelegramAdapter:
    return next(a for a in halo.adapters if isinstance(a, TelegramAdapter))


class StartTelegram(Protocol):
    def __call__(
        self,
        extra_yaml: str = "",
        *,
        llm: str | None = None,
        family: str = COMMENTED_FAMILY,
        background: bool = False,
        connect: bool = True,
    ) -> Awaitable[Halo]: ...


async def telegram_starter(home: Path, fake_llm: FakeOpenAI, tg: FakeTelegram) -> AsyncIterator[StartTelegram]:
    """Starts halo (llm: the fake model unless given; `background`: the outbox, schedules and
    timers too) with its Telegram adapter on the stand-in; closes every halo it started."""
    running: list[Halo] = []

    async def start(
        extra_yaml: str = "",
        *,
        llm: str | None = None,
        family: str = COMMENTED_FAMILY,
        background: bool = False,
        connect: bool = True,
    ) -> Halo:
        llm = llm_yaml(fake_llm) if llm is None else llm
        write_home(home, llm + extra_yaml + telegram_yaml(tg.base_url), family=family)
        halo = tiny_backoff(build_halo(load_settings(home)))
        running.append(halo)
        if background:
            await halo.start_background()
        await halo.start_adapters()
        if connect:
            adapter = adapter_of(halo)
            await tg.wait_for(lambda: adapter.status()["connected"], what="polling")
        return halo

    yield start
    for halo in running:
        await halo.close()
