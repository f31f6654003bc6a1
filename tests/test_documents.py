"""Documents (issue 16): a PDF or text file a member sends is read (pypdf for PDFs), saved as text
in the scope's files/, indexed for recall, listed with /files and removed with /files rm N.
Telegram and Discord end to end, through the platform stand-ins and the real SDKs; what the
model was sent is read from the fake OpenAI server."""

from __future__ import annotations

import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.inventory import Halo
from halo.media.document_text import extract
from memory.store import DiskMemory
from tests.conftest import FAMILY_YAML, llm_yaml, write_home
from tests.document_support import SCANNED, SCHOOL_LETTER, pdf
from tests.fakes.llm_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.memory_files import memory_names, read_memory
from tests.telegram_support import StartTelegram
from tests.transcript_support import raw_lines
from tests.waiting import eventually

MOM = 1002
DM = f"telegram:{MOM}"
FULL_TEXT = "memory:\n  semantic: {embedder: none}\n"  # recall by words: no model to load


@pytest.fixture
def start(start_telegram: StartTelegram) -> Callable[..., Awaitable[Halo]]:
    return lambda extra=FULL_TEXT, llm=None: start_telegram(extra, llm=llm)


def transcript(halo: Halo, scope_id: str) -> list[dict]:
    return raw_lines(halo, scope_id)


async def files_of(halo: Halo, scope_id: str) -> list[str]:
    """The scope's document files, by name, as the halo keeps them (files, or rows on PostgreSQL)."""
    return await memory_names(halo, halo.settings.paths.scope_dir(scope_id) / "files")


async def file_text(halo: Halo, scope_id: str, name: str) -> str:
    return await read_memory(halo, halo.settings.paths.scope_dir(scope_id) / "files" / name)


async def document_hits(halo: Halo, scope_id: str, query: str) -> list[str]:
    hits = await halo.semantic.search([scope_id], query)
    return [h.source for h in hits if h.source.startswith("files/")]


def test_the_test_letter_is_a_real_pdf() -> None:
    found = extract(SCHOOL_LETTER, "pdf", max_pages=10)
    assert found.pages == 2
    assert "Science Museum is on Friday 14 March" in found.text and "## Page 2" in found.text


async def test_a_forwarded_pdf_is_kept_listed_recalled_and_removed(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    halo = await start()
    fake_llm.reply("It's a letter from Greenfield Primary about the Year 4 trip.")

    tg.document(MOM, MOM, SCHOOL_LETTER, "School trip letter.pdf", "application/pdf")

    assert await tg.wait_sent(MOM) == ["It's a letter from Greenfield Primary about the Year 4 trip."]
    prompt = fake_llm.prompt_text(fake_llm.model_requests[-1])
    assert "(document: School trip letter.pdf)" in prompt, "the model is told what came"
    assert "The coach leaves at 8:45 from the school gate." in prompt, "and reads its beginning at once"
    assert "file 1 of this chat" in prompt
    [saved] = await files_of(halo, DM)
    assert saved == "001-School trip letter.pdf.md"
    text = await file_text(halo, DM, saved)
    assert text.startswith("# School trip letter.pdf\n") and "- sent by: Mom" in text and "- pages: 2" in text
    assert "Please bring a packed lunch and a waterproof coat." in text
    on_disk = halo.settings.paths.scope_dir(DM) / "files" / saved
    if isinstance(halo.memory.files.store, DiskMemory):  # embedded: a private file (on PostgreSQL a row)
        assert stat.S_IMODE(on_disk.stat().st_mode) == 0o600 and stat.S_IMODE(on_disk.parent.stat().st_mode) == 0o700
    else:
        assert not on_disk.exists()
    [line] = [r for r in transcript(halo, DM) if r["role"] == "user"]
    assert line["text"] == "(document: School trip letter.pdf)"
    assert len(tg.downloads) == 1

    tg.message(MOM, MOM, "/files")
    listing = (await tg.wait_sent(MOM, 2))[-1]
    assert "1. School trip letter.pdf — 2 pages" in listing and "from Mom" in listing

    await eventually(lambda: document_hits(halo, DM, "school trip museum"), what="the letter in the index")
    fake_llm.reply("The trip is on Friday 14 March.")
    tg.message(MOM, MOM, "when is the school trip?")
    assert (await tg.wait_sent(MOM, 3))[-1] == "The trip is on Friday 14 March."
    prompt = fake_llm.prompt_text(fake_llm.model_requests[-1])
    assert "[this chat · document file 1 “School trip letter.pdf”" in prompt, "recalled, labelled by its name"
    assert "Science Museum is on Friday 14 March" in prompt

    tg.message(MOM, MOM, "/files rm 1")
    assert (await tg.wait_sent(MOM, 4))[-1].startswith("Removed file 1, School trip letter.pdf")
    assert await files_of(halo, DM) == []
    assert await document_hits(halo, DM, "school trip museum") == []
    fake_llm.reply("I don't know.")
    tg.message(MOM, MOM, "when is the school trip?")
    await tg.wait_sent(MOM, 5)
    prompt = fake_llm.prompt_text(fake_llm.model_requests[-1])
    assert "Science Museum" not in prompt and "8:45" not in prompt, "gone from recall and from the context"
    events = [e["kind"] for e in await halo.audit.tail(200)]
    assert "document_added" in events and "document_removed" in events


async def test_a_caption_is_the_question_about_the_document(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    halo = await start()
    fake_llm.reply("Friday 14 March.")
    tg.document(MOM, MOM, SCHOOL_LETTER, "letter.pdf", "application/pdf", caption="when is the trip?")

    assert await tg.wait_sent(MOM) == ["Friday 14 March."]
    prompt = fake_llm.prompt_text(fake_llm.model_requests[-1])
    assert "(document: letter.pdf) when is the trip?" in prompt and "Friday 14 March" in prompt
    [line] = [r for r in transcript(halo, DM) if r["role"] == "user"]
    assert line["text"] == "(document: letter.pdf) when is the trip?"


@pytest.mark.parametrize(
    ("data", "name", "mime", "extra", "said", "downloaded"),
    [
        (b"PK\x03\x04 a zip", "report.docx", "application/vnd.openxmlformats", "", "I can read PDF, text", False),
        (b"x" * 1_500_000, "big.txt", "text/plain", "  max_document_mb: 1\n", "too big for me (1.5 MB", False),
        (SCANNED, "scan.pdf", "application/pdf", "", "looks like a scan", True),
        (pdf([["a"]] * 3), "long.pdf", "application/pdf", "  max_document_pages: 2\n", "(3 pages; the limit", True),
        (b"%PDF-1.4 not really", "broken.pdf", "application/pdf", "", "I couldn't open broken.pdf", True),
    ],
    ids=["unsupported", "over-size", "scanned", "too-many-pages", "damaged"],
)
async def test_a_document_that_cannot_be_read_gets_a_clear_reply_and_the_message_is_kept(
    start, tg: FakeTelegram, fake_llm: FakeOpenAI, data, name, mime, extra, said, downloaded
) -> None:
    halo = await start(FULL_TEXT.replace("memory:\n", "memory:\n" + extra))
    tg.document(MOM, MOM, data, name, mime, caption="for the weekend")

    [reply] = await tg.wait_sent(MOM)
    assert said in reply and "Your message is kept." in reply
    assert bool(tg.downloads) is downloaded, "a size or type refusal downloads nothing"
    assert fake_llm.model_requests == [] and await files_of(halo, DM) == []
    [line] = [r for r in transcript(halo, DM) if r["role"] == "user"]
    assert line["text"] == f"(document: {name}) for the weekend" and line["document"] == "not read"


async def test_without_a_model_the_document_is_still_kept(start, tg: FakeTelegram, fake_llm: FakeOpenAI) -> None:
    halo = await start(llm="llm: {provider: none}\n")
    assert halo.agents.model is None
    tg.document(MOM, MOM, b"Swimming moves to 10:30 on Saturdays.\n", "swimming.txt", "text/plain")

    assert await tg.wait_sent(MOM) == ["I kept swimming.txt as file 1 of this chat (/files lists them)."]
    assert len(await files_of(halo, DM)) == 1


async def test_a_text_file_in_a_discord_dm_is_read(home: Path, fake_llm: FakeOpenAI, serve_halo) -> None:
    from tests.fakes.discord_server import FakeDiscord
    from tests.test_discord import adapter_of as discord_adapter_of
    from tests.test_discord import discord_yaml

    async with FakeDiscord(channels=(3001,)) as dc:
        family = FAMILY_YAML.replace("telegram_user_id: 1001,", "telegram_user_id: 1001, discord_user_id: 2101,")
        write_home(home, llm_yaml(fake_llm) + FULL_TEXT + discord_yaml(dc), family=family)
        running = await serve_halo(load_settings(home))
        halo = running.halo
        await halo.start_adapters()
        await eventually(lambda: discord_adapter_of(halo).status()["connected"], what="discord READY")
        fake_llm.reply("Noted: the release checklist.")

        wags = dc.person(2101, "Wags")
        notes = "# Release checklist\n\n- tag v2.3 on Thursday\n- Priya signs off the changelog\n"
        await dc.dm(wags, "", files=[("checklist.md", "text/markdown", notes.encode())])

        assert await dc.wait_sent(dc.dm_channel(2101)) == ["Noted: the release checklist."]
        prompt = fake_llm.prompt_text(fake_llm.model_requests[-1])
        assert "(document: checklist.md)" in prompt and "Priya signs off the changelog" in prompt
        scope_id = "discord:2101"  # a DM is named by the person (halo/core/scopes.py)
        [saved] = await files_of(halo, scope_id)
        assert "- tag v2.3 on Thursday" in await file_text(halo, scope_id, saved) and len(dc.downloads) == 1


def test_a_documents_file_name_stays_in_its_folder_and_numbers_do_not_shift(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from config.paths import HaloPaths
    from memory.documents import ScopeDocuments
    from memory.scope_files import ScopeFiles

    store = ScopeDocuments(ScopeFiles(HaloPaths(tmp_path)))

    def add(name: str) -> int:
        when = datetime.now(UTC)
        return store.add(DM, name=name, text="text", by="Mom", when=when, pages=None, size=4, mime="text/plain").number

    assert [add("../../halo.yaml"), add(".hidden"), add("a/b\\c:d*?.txt")] == [1, 2, 3]
    folder = tmp_path / store.folder(DM)
    assert sorted(p.name for p in folder.iterdir()) == ["001-halo.yaml.md", "002-hidden.md", "003-c_d_.txt.md"]
    assert [d.name for d in store.list(DM)] == ["../../halo.yaml", ".hidden", "a/b\\c:d*?.txt"], "shown as sent"
    assert store.remove(DM, 2) is not None and store.remove(DM, 2) is None
    assert [d.number for d in store.list(DM)] == [1, 3] and add("next.txt") == 4
    (folder / "010-by hand.md").write_text("Notes a parent copied in.\n")  # no header: all of it is text
    [by_hand] = [d for d in store.list(DM) if d.number == 10]
    read = store.read(DM, 10)
    assert by_hand.name == "by hand" and read is not None and read[1] == "Notes a parent copied in."
