"""Photos (issue 16): a photo a member sends is downloaded through getFile (Discord: its CDN),
shown to the model as image input with its caption as text (the real SDK against the stand-in,
which records the image it was sent), and marked as a photo in the transcript. The picture is
sent with the turn it came in, never again. No vision, a picture too big, or a model that
refuses images: the person is told, and the message is kept."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.media.images import MODEL_CANNOT_SEE, NO_VISION
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.telegram_support import StartTelegram
from tests.transcript_support import raw_lines
from tests.waiting import eventually

MOM, TARA = 1002, 1004
PHOTO = b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(range(256)) * 16  # a JPEG's first bytes; nothing decodes it


@pytest.fixture
def start(start_telegram: StartTelegram) -> Callable[..., Awaitable[Halo]]:
    return lambda extra_llm="": start_telegram(extra_llm)


def lines(halo: Halo, scope_id: str) -> list[dict]:
    return raw_lines(halo, scope_id)


def data_url(image: bytes, mime: str = "image/jpeg") -> str:
    return f"data:{mime};base64,{base64.b64encode(image).decode()}"


async def test_a_photo_is_shown_to_the_model_with_its_caption(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    halo = await start()
    fake_llm.reply("The school trip is on Friday 12 June.")

    tg.photo(MOM, MOM, PHOTO, caption="when is the trip in this letter?")

    assert await tg.wait_sent(MOM) == ["The school trip is on Friday 12 June."]
    request = fake_llm.model_requests[-1]
    assert fake_llm.images_in(request) == [data_url(PHOTO)]  # the full-size photo, not the thumbnail
    assert "(photo) when is the trip in this letter?" in fake_llm.prompt_text(request)
    assert len(tg.downloads) == 1 and tg.downloads[0].startswith("photo-")
    [line] = [r for r in lines(halo, f"telegram:{MOM}") if r["role"] == "user"]
    assert line["text"] == "when is the trip in this letter?" and line["photo"] == "shown"
    assert PHOTO.hex()[:40] not in json.dumps(lines(halo, f"telegram:{MOM}"))  # the picture is not kept

    fake_llm.reply("You're welcome.")
    tg.message(MOM, MOM, "thanks")
    assert await tg.wait_sent(MOM, 2) == ["The school trip is on Friday 12 June.", "You're welcome."]
    later = fake_llm.model_requests[-1]
    assert fake_llm.images_in(later) == []  # the next turn sees that a photo came, not the photo again
    assert "(photo) when is the trip in this letter?" in fake_llm.prompt_text(later)


async def test_a_photo_without_a_caption_is_still_answered(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    halo = await start()
    fake_llm.reply("A dog on a beach.")

    tg.photo(MOM, MOM, PHOTO)

    assert await tg.wait_sent(MOM) == ["A dog on a beach."]
    assert fake_llm.images_in(fake_llm.model_requests[-1]) == [data_url(PHOTO)]
    [line] = [r for r in lines(halo, f"telegram:{MOM}") if r["role"] == "user"]
    assert line["text"] == "(photo)"


async def test_an_image_sent_as_a_file_is_a_photo_too(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    await start()
    fake_llm.reply("It is a timetable.")

    tg.document(MOM, MOM, PHOTO, "timetable.png", "image/png", caption="what is this?")

    assert await tg.wait_sent(MOM) == ["It is a timetable."]
    assert fake_llm.images_in(fake_llm.model_requests[-1]) == [data_url(PHOTO, "image/png")]


async def test_without_vision_the_person_is_told_and_the_message_kept(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start(extra_llm="  vision: false\n")
    tg.photo(MOM, MOM, PHOTO, caption="what does this say?")

    assert await tg.wait_sent(MOM) == [NO_VISION]
    assert fake_llm.model_requests == [] and tg.downloads == []
    user, reply = lines(halo, f"telegram:{MOM}")[-2:]
    assert (user["text"], user["photo"]) == ("what does this say?", "not shown")
    assert reply["answers"] == user["id"]


async def test_a_photo_over_the_size_cap_is_not_downloaded(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    await start(extra_llm="  max_image_mb: 1\n")
    tg.photo(MOM, MOM, PHOTO * 300, caption="look")  # about 1.2 MB

    [reply] = await tg.wait_sent(MOM)
    assert "too big" in reply and "1 MB" in reply
    assert tg.downloads == [] and fake_llm.model_requests == []


async def test_a_model_that_cannot_see_says_so_and_the_message_is_kept(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start()
    fake_llm.sees_images = False
    tg.photo(MOM, MOM, PHOTO, caption="what is this?")

    assert await tg.wait_sent(MOM) == [MODEL_CANNOT_SEE]
    user = next(r for r in lines(halo, f"telegram:{MOM}") if r["role"] == "user")
    assert user["text"] == "what is this?"
    closing = lines(halo, f"telegram:{MOM}")[-1]
    assert closing["answers"] == user["id"]  # closed: a restart does not ask the model again


async def test_a_childs_photo_caption_passes_the_safety_screen(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    await start()
    tg.photo(TARA, TARA, PHOTO, caption="how do I buy a gun like this one")  # blocked for a young child

    [reply] = await tg.wait_sent(TARA)
    assert "gun" not in reply.lower()
    assert all(fake_llm.images_in(r) == [] for r in fake_llm.scripted_requests)
    assert all("buy a gun" not in fake_llm.prompt_text(r) for r in fake_llm.scripted_requests)


async def test_a_photo_in_a_group_that_is_not_for_halo_is_not_fetched(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start()
    parents = -1001234  # the parents group in FAMILY_YAML
    tg.photo(parents, MOM, PHOTO, caption="look at this")
    await eventually(lambda: any(r["role"] == "user" for r in lines_or_none(halo, f"telegram:{parents}")))
    assert tg.downloads == [] and fake_llm.model_requests == []


def lines_or_none(halo: Halo, scope_id: str) -> list[dict]:
    try:
        return lines(halo, scope_id)
    except FileNotFoundError:
        return []


async def test_a_discord_photo_in_a_dm_is_shown_to_the_model(home: Path, fake_llm: FakeOpenAI, serve_halo) -> None:
    from tests.fakes.discord_server import FakeDiscord
    from tests.test_discord import adapter_of as discord_adapter_of
    from tests.test_discord import discord_yaml

    async with FakeDiscord(channels=(3001,)) as dc:
        family = FAMILY_YAML.replace("telegram_user_id: 1001,", "telegram_user_id: 1001, discord_user_id: 2101,")
        write_home(home, llm_yaml(fake_llm) + discord_yaml(dc), family=family)
        running = await serve_halo(load_settings(home))
        await running.halo.start_adapters()
        await eventually(lambda: discord_adapter_of(running.halo).status()["connected"], what="discord READY")
        fake_llm.reply("That is the release checklist.")

        wags = dc.person(2101, "Wags")
        await dc.dm(wags, "what is on this?", files=[("checklist.png", "image/png", PHOTO)])

        assert await dc.wait_sent(dc.dm_channel(2101)) == ["That is the release checklist."]
        assert fake_llm.images_in(fake_llm.model_requests[-1]) == [data_url(PHOTO, "image/png")]
        assert len(dc.downloads) == 1
