"""`halo doctor` says what is wrong, and only what is: each check against a real stand-in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from admin_api.starting import StartingFront
from halo.runtime.doctor import check_admin_port, check_discord, check_model, cmd_doctor
from halo.workspace.private_files import make_private
from tests.conftest import free_port, write_home
from tests.fakes.discord_server import TOKEN, FakeDiscord


def test_an_unreachable_embedder_is_a_warning_while_full_text_recall_works(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default embedder is downloaded on first use; offline, recall still works on words."""
    write_home(
        home,
        f"admin: {{port: {free_port()}}}\nmemory:\n  semantic: {{model: '{tmp_path / 'not-downloaded'}'}}\n",
    )
    make_private(home)
    monkeypatch.setenv("HALO_HOME", str(home))
    code = cmd_doctor(None)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert code == 0, out
    [line] = [x for x in out.splitlines() if "semantic recall" in x]
    assert line.startswith("! semantic recall: full-text only:")
    assert "fix: point memory.semantic.model" in out
    assert "✗" not in out


async def test_a_discord_token_is_checked(settings_for) -> None:
    async with FakeDiscord() as fake:
        good = await check_discord(
            settings_for(f"discord: {{token: {TOKEN!r}, api_base_url: {fake.api_base_url!r}}}\n")
        )
        bad = await check_discord(settings_for(f"discord: {{token: wrong, api_base_url: {fake.api_base_url!r}}}\n"))
        assert [(c.path, c.status) for c in fake.calls] == [("/api/v10/users/@me", 200), ("/api/v10/users/@me", 401)]
    assert good is not None and good.ok and good.detail == "bot token accepted"
    assert bad is not None and not bad.ok and "refused the bot token (401)" in bad.detail
    assert "discord.token" in bad.fix
    gone = await check_discord(
        settings_for(f"discord: {{token: {TOKEN!r}, api_base_url: 'http://127.0.0.1:{free_port()}/api/v10'}}\n")
    )
    assert gone is not None and not gone.ok and "unreachable" in gone.detail
    assert await check_discord(settings_for()) is None, "no token: nothing to check"


@pytest.fixture
async def halo_on_port(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    """A halo's front door (the one `halo serve` opens first) serving its own HALO_HOME."""
    served = tmp_path / "served-home"
    write_home(served)
    runner = web.AppRunner(StartingFront(served).front)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    yield port, served
    await runner.cleanup()


async def test_the_admin_port_says_whether_this_halo_or_another_holds_it(halo_on_port, tmp_path: Path) -> None:
    from config.loader import load_settings

    port, served = halo_on_port
    same = await check_admin_port(load_settings(served, admin={"port": port}))
    assert same.ok and same.detail == f"this halo already answers on http://127.0.0.1:{port}/"
    other_home = write_home(tmp_path / "other-home")
    other = await check_admin_port(load_settings(other_home, admin={"port": port}))
    assert not other.ok and other.detail == f"another halo (a different HALO_HOME) holds port {port}"
    assert "admin.port" in other.fix


async def test_openai_without_a_key_says_so(settings_for, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HALO_LLM__API_KEY", raising=False)
    nowhere = f"http://127.0.0.1:{free_port()}/v1"  # were it asked, it would be "unreachable"
    check = await check_model(settings_for(f"llm: {{provider: openai, base_url: {nowhere!r}}}\n"))
    assert not check.ok and check.detail == "no API key for openai"
    assert "HALO_LLM__API_KEY" in check.fix and "OPENAI_API_KEY" in check.fix
