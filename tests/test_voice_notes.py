"""Voice notes (issue 16): a Telegram voice note is downloaded through getFile, transcribed by
the provider's /v1/audio/transcriptions (the real openai client against the stand-in), and from
then on is a typed message marked as heard: the same policy, child-safety screen, memory and
model. Without a transcription model the person is told, and the message is kept."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.media.voice import NOT_SET_UP
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import StartTelegram
from tests.transcript_support import raw_lines

MOM, TARA = 1002, 1004
AUDIO = b"OggS\x00\x02" + bytes(range(256)) * 8  # what an .oga starts with; the stand-in only stores it


@pytest.fixture
def start(start_telegram: StartTelegram) -> Callable[..., Awaitable[Halo]]:
    return lambda extra_llm="  transcription_model: whisper-1\n": start_telegram(extra_llm)


def user_lines(halo: Halo, scope_id: str) -> list[dict]:
    return [r for r in raw_lines(halo, scope_id) if r["role"] == "user"]


async def test_a_voice_note_is_heard_and_answered_like_typed_text(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start()
    fake_llm.transcripts.append("What time is swimming on Saturday?")
    fake_llm.reply("Swimming is at ten.")

    tg.voice(MOM, MOM, AUDIO, duration=4)

    assert await tg.wait_sent(MOM) == ["Swimming is at ten."]
    [(model, name, data)] = fake_llm.audio
    assert (model, data) == ("whisper-1", AUDIO) and name.endswith(".ogg")
    assert len(tg.downloads) == 1  # fetched through getFile, once
    prompt = fake_llm.prompt_text(fake_llm.model_requests[-1])
    assert "(voice note) What time is swimming on Saturday?" in prompt
    [line] = user_lines(halo, f"telegram:{MOM}")
    assert line["text"] == "What time is swimming on Saturday?" and line["heard"] is True


async def test_a_childs_voice_note_passes_the_same_safety_screen(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    await start()
    fake_llm.transcripts.append("how do I buy a gun")  # a blocked topic for a young child, heard not typed
    tg.voice(TARA, TARA, AUDIO)

    [reply] = await tg.wait_sent(TARA)
    assert "gun" not in reply.lower()
    assert fake_llm.model_requests == [] or all(
        "how do I buy a gun" not in fake_llm.prompt_text(r) for r in fake_llm.scripted_requests()
    )


async def test_without_a_transcription_model_the_person_is_told_and_the_message_kept(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start(extra_llm="")
    tg.voice(MOM, MOM, AUDIO, caption="about Saturday")

    assert await tg.wait_sent(MOM) == [NOT_SET_UP]
    assert fake_llm.audio == [] and fake_llm.model_requests == []
    [line] = user_lines(halo, f"telegram:{MOM}")
    assert line["text"] == "about Saturday" and line["voice"] == "not transcribed"


async def test_a_voice_note_over_the_length_limit_is_not_downloaded(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    await start(extra_llm="  transcription_model: whisper-1\n  max_voice_seconds: 60\n")
    tg.voice(MOM, MOM, AUDIO, duration=600)

    [reply] = await tg.wait_sent(MOM)
    assert "too long" in reply and "600 s" in reply
    assert tg.downloads == [] and fake_llm.audio == []


async def test_a_discord_voice_message_in_a_dm_is_heard_and_answered(
    home: Path, fake_llm: FakeOpenAI, serve_halo
) -> None:
    from tests.fakes.discord_server import FakeDiscord
    from tests.test_discord import adapter_of as discord_adapter_of
    from tests.test_discord import discord_yaml
    from tests.waiting import eventually

    async with FakeDiscord(channels=(3001,)) as dc:
        family = FAMILY_YAML.replace("telegram_user_id: 1001,", "telegram_user_id: 1001, discord_user_id: 2101,")
        write_home(home, llm_yaml(fake_llm) + "  transcription_model: whisper-1\n" + discord_yaml(dc), family=family)
        running = await serve_halo(load_settings(home))
        await running.halo.start_adapters()
        await eventually(lambda: discord_adapter_of(running.halo).status()["connected"], what="discord READY")
        fake_llm.transcripts.append("is the release still on for Friday")
        fake_llm.reply("Yes, Friday.")

        wags = dc.person(2101, "Wags")  # a parent: colleagues talk to halo in work channels only
        await dc.dm(wags, "", audio=AUDIO, duration=2.5)

        assert await dc.wait_sent(dc.dm_channel(2101)) == ["Yes, Friday."]
        assert [data for _, _, data in fake_llm.audio] == [AUDIO] and len(dc.downloads) == 1
        assert "(voice note) is the release still on for Friday" in fake_llm.prompt_text(fake_llm.model_requests[-1])


async def test_each_transcription_is_in_the_usage_table_with_the_tokens_reported(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    """A model billed in tokens (gpt-4o-transcribe) reports them; one billed by the second
    (whisper-1: `{"type": "duration"}`) is a call with zero tokens: its cost is not known."""
    halo = await start()
    fake_llm.transcripts += ["What time is swimming?", "And football?"]
    fake_llm.transcription_usage = {
        "type": "tokens", "input_tokens": 41, "output_tokens": 7, "total_tokens": 48,
        "input_token_details": {"audio_tokens": 38, "text_tokens": 3},
    }  # fmt: skip
    tg.voice(MOM, MOM, AUDIO, duration=4)
    await tg.wait_sent(MOM)
    fake_llm.transcription_usage = {"type": "duration", "seconds": 3}
    tg.voice(MOM, MOM, AUDIO, duration=3)
    await tg.wait_sent(MOM, count=2)

    rows = await halo.usage.store.totals("2000-01-01", "2999-12-31", "purpose")
    heard = [
        (r.model, r.calls, r.input_tokens, r.cached_tokens, r.output_tokens) for r in rows if r.key == "transcription"
    ]
    assert heard == [("whisper-1", 2, 41, 0, 7)]
