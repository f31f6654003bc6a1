"""The index stays in step with markdown files and the transcript, embedding only what changed."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from config.paths import HaloPaths
from config.settings import SemanticSettings
from memory.semantic import SemanticMemory, chunk_markdown, chunk_transcript
from memory.semantic.chunking import NumberedLine
from memory.semantic.embedders import EmbedderIdentity, Model2VecEmbedder
from memory.semantic.index import ScopeIndex
from memory.semantic.search import searched_words
from tests.semantic_helpers import CountingEmbedder, concept_model
from transcripts import TranscriptStore
from transcripts.lines import Closing, Message, Reply

SCOPE = "web:mom"
T0 = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def paths(tmp_path: Path) -> HaloPaths:
    paths = HaloPaths(tmp_path / "home")
    paths.ensure()
    return paths


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


def service(paths: HaloPaths, embedder: object | None, **settings: object) -> SemanticMemory:
    async def load() -> object | None:
        return embedder

    return SemanticMemory(paths, SemanticSettings(**settings), embedder_loader=load)  # type: ignore[arg-type]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    stat = path.stat()  # mtime must move even when two writes land in the same tick
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


async def say(store: TranscriptStore, role: str, text: str, ts: datetime, speaker: str = "mom") -> None:
    await store.append(
        (Message if role == "user" else Reply)(
            os.urandom(6).hex(),
            ts,
            SCOPE,
            text,
            speaker=speaker if role == "user" else "halo",
        )
    )


def test_markdown_chunks_follow_headings_lines_and_overlap() -> None:
    body = "\n".join(f"line {n} about the garden and the tomatoes we grow" for n in range(1, 80))
    facts = "\n".join(f"- fact {n}: Aarav's dentist is Dr. Patel, the van needs tyres" for n in range(10))
    text = f"# Durable facts\n{facts}\n\n## Garden\n{body}\n"
    chunks = chunk_markdown("MEMORY.md", text)
    assert len(chunks) >= 3
    assert chunks[0].start_line == 1 and "Dr. Patel" in chunks[0].text
    assert chunks[1].text.startswith("## Garden"), "a heading starts a new chunk once the last has substance"
    assert chunks[1].start_line == chunks[0].end_line + 1, "no overlap across a heading"
    assert all(len(c.text) <= 400 * 4 for c in chunks)
    second, third = chunks[1], chunks[2]
    assert third.start_line <= second.end_line, "consecutive chunks overlap"
    assert all(c.ts is None for c in chunks), "MEMORY.md is not dated"
    daily = chunk_markdown("daily/2026-10-03.md", "- booked the piano recital\n")[0]
    assert daily.ts is not None and "October" in daily.keywords and "2026-10-03" in daily.keywords


def test_transcript_chunks_are_turn_pairs_without_commands() -> None:
    lines = [
        Message("1", T0, SCOPE, "The dentist is on Friday", speaker="mom"),
        Reply("2", T0, SCOPE, "Noted."),
        Message("3", T0, SCOPE, "/recall dentist", speaker="mom"),
        Reply("4", T0, SCOPE, "Found 1: The dentist is on Friday"),
        Closing("5", T0, SCOPE, "model unavailable"),
        Message("6", T0, SCOPE, "Soccer at 5", speaker="mom"),
    ]
    chunks = list(chunk_transcript(NumberedLine(n, line) for n, line in enumerate(lines, start=1)))
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 2), (6, 6)]
    assert "mom: The dentist is on Friday\nhalo: Noted." in chunks[0].text
    assert all("/recall" not in c.text for c in chunks)


async def test_edit_add_delete_and_append_embed_only_what_changed(paths, embedder) -> None:
    semantic = service(paths, embedder)
    scope_dir = paths.scope_dir(SCOPE)
    store = TranscriptStore(paths.transcripts)
    write(scope_dir / "MEMORY.md", "# Facts\nAarav's dentist is Dr. Patel.\n\n## Car\nThe van needs new tyres.\n")
    write(scope_dir / "daily" / "2026-09-01.md", "- piano recital moved to Sunday\n")
    await say(store, "user", "Book the dentist cleaning for Aarav", T0)
    await say(store, "assistant", "I'll remind you.", T0)

    first = await semantic.sync_scope(SCOPE)
    assert first is not None
    assert sorted(first.files_changed) == ["MEMORY.md", "daily/2026-09-01.md"]
    assert first.transcript_chunks == 1
    embedded_first = len(embedder.texts)
    assert embedded_first == first.embedded >= 3

    embedder.reset()
    nothing = await semantic.sync_scope(SCOPE)
    assert nothing is not None and nothing.files_changed == [] and nothing.transcript_chunks == 0
    assert embedder.texts == [], "an unchanged scope embeds nothing"

    # edit one file, add one, delete one, append a turn
    long_memory = "# Facts\nAarav's dentist is Dr. Patel.\n\n## Car\nThe van needs new tyres.\n\n" + "\n".join(
        f"## Note {n}\n" + "The garden needs watering and compost for the tomatoes. " * 8 for n in range(6)
    )
    write(scope_dir / "MEMORY.md", long_memory)
    write(scope_dir / "daily" / "2026-09-02.md", "- vet visit for the puppy\n")
    (scope_dir / "daily" / "2026-09-01.md").unlink()
    await say(store, "user", "Where is the passport for the Lisbon trip?", T0 + timedelta(days=1))
    await say(store, "assistant", "In the desk drawer.", T0 + timedelta(days=1))
    embedder.reset()
    report = await semantic.sync_scope(SCOPE)
    assert report is not None
    assert sorted(report.files_changed) == ["MEMORY.md", "daily/2026-09-02.md"]
    assert report.files_removed == ["daily/2026-09-01.md"]
    assert report.transcript_chunks == 1

    index = ScopeIndex(semantic.index_path(SCOPE), SCOPE)
    new_memory_chunks = chunk_markdown("MEMORY.md", long_memory)
    old_texts = {
        c.text
        for c in chunk_markdown(
            "MEMORY.md", "# Facts\nAarav's dentist is Dr. Patel.\n\n## Car\nThe van needs new tyres.\n"
        )
    }
    expected = {c.text for c in new_memory_chunks} - old_texts
    expected |= {"- vet visit for the puppy"}
    expected |= {t for t in embedder.texts if "passport" in t}
    assert set(embedder.texts) == expected, "only new or changed chunks are embedded"
    assert len(embedder.texts) == len(set(embedder.texts)), "each distinct text once"
    assert any("passport" in t for t in embedder.texts)
    stats = index.stats()
    assert stats["pending_embeddings"] == 0
    assert stats["files"] == 2
    with index.transaction() as db:
        sources = {r[0] for r in db.execute("select distinct source from chunks")}
        orphans = db.execute(
            "select count(*) from embeddings e where not exists (select 1 from chunks c where c.embedding_id = e.id)"
        ).fetchone()[0]
    assert sources == {"MEMORY.md", "daily/2026-09-02.md", "transcript"}
    assert orphans == 0, "vectors of deleted chunks are collected"
    index.close()
    await semantic.close()


async def test_a_moved_text_is_not_embedded_again(paths, embedder) -> None:
    semantic = service(paths, embedder)
    scope_dir = paths.scope_dir(SCOPE)
    write(scope_dir / "daily" / "2026-09-01.md", "- the orthodontist said braces in spring\n")
    await semantic.sync_scope(SCOPE)
    embedder.reset()
    (scope_dir / "daily" / "2026-09-01.md").rename(scope_dir / "NOTES.md")
    report = await semantic.sync_scope(SCOPE)
    assert report is not None and report.files_changed == ["NOTES.md"]
    assert embedder.texts == [], "the (model, hash) cache answers for a text seen before"
    await semantic.close()


async def test_transcript_watermark_holds_a_turn_awaiting_its_reply(paths, embedder) -> None:
    semantic = service(paths, embedder)
    store = TranscriptStore(paths.transcripts)
    now = datetime.now(UTC)
    await say(store, "user", "Remind me about the vaccine appointment", now)
    report = await semantic.sync_scope(SCOPE)
    assert report is not None and report.transcript_chunks == 0, "the reply may still come"
    await say(store, "assistant", "I will.", now)
    report = await semantic.sync_scope(SCOPE)
    assert report is not None and report.transcript_chunks == 1
    hits = await semantic.search([SCOPE], "vaccine")
    assert len(hits) == 1 and "I will." in hits[0].text and (hits[0].start_line, hits[0].end_line) == (1, 2)
    # a torn line (crash mid-write) is skipped and the line numbers still match the file
    with store.path(SCOPE).open("ab") as fh:
        fh.write(b'{"id": "torn", "role": "us')
    await say(store, "user", "The flu shot is done", now - timedelta(hours=1))
    await say(store, "assistant", "Good.", now)
    await semantic.sync_scope(SCOPE)
    hits = await semantic.search([SCOPE], "flu shot", params=semantic.params(window_turns=0))
    assert hits and (hits[0].start_line, hits[0].end_line) == (4, 5)
    lines = store.path(SCOPE).read_text().splitlines()
    assert "flu shot" in lines[3]
    await semantic.close()


async def test_a_new_embedder_rebuilds_vectors_never_mixes_them(paths, embedder, caplog) -> None:
    scope_dir = paths.scope_dir(SCOPE)
    write(scope_dir / "MEMORY.md", "# Facts\nAarav's dentist is Dr. Patel.\n\n## Pets\nThe puppy sees the vet.\n")
    semantic = service(paths, embedder)
    await semantic.sync_scope(SCOPE)
    await semantic.close()

    other = CountingEmbedder(Model2VecEmbedder(concept_model(dim=24, seed=3), "other-model"))
    semantic = service(paths, other)
    report = await semantic.sync_scope(SCOPE)
    assert report is not None and report.rebuilt
    index = ScopeIndex(semantic.index_path(SCOPE), SCOPE)
    assert index.vector_identity() == EmbedderIdentity("model2vec", "other-model", 24)
    assert index.stats()["pending_embeddings"] == 0
    with index.transaction() as db:
        models = {r[0] for r in db.execute("select distinct model from embeddings")}
    assert models == {"model2vec/other-model/24"}
    assert len(other.texts) == index.stats()["chunks"], "every chunk embedded again with the new model"
    assert "embedder changed" in caplog.text
    hits = await semantic.search([SCOPE], "teeth doctor")
    assert hits and "Patel" in hits[0].text
    index.close()
    await semantic.close()


async def test_a_chunking_change_rebuilds_chunks(paths, embedder, monkeypatch) -> None:
    write(paths.scope_dir(SCOPE) / "MEMORY.md", "# Facts\nThe van needs new tyres.\n")
    semantic = service(paths, embedder)
    await semantic.sync_scope(SCOPE)
    index = ScopeIndex(semantic.index_path(SCOPE), SCOPE)
    index.set_meta("chunking", "an-older-cut")
    index.close()
    embedder.reset()
    report = await semantic.sync_scope(SCOPE)
    assert report is not None and report.rebuilt and report.files_changed == ["MEMORY.md"]
    assert embedder.texts == [], "same texts, same model: the vectors are reused"
    await semantic.close()


async def test_a_scope_without_memory_gets_no_index(paths, embedder) -> None:
    semantic = service(paths, embedder)
    assert await semantic.sync_scope("web:wags") is not None
    assert not semantic.index_path("web:wags").exists()
    assert await semantic.search(["web:wags"], "anything at all") == []
    await semantic.close()


async def test_scheduled_runs_find_changes_no_turn_announced(paths, embedder) -> None:
    """A group message halo was not addressed in, or a parent's hand edit, still gets indexed."""
    semantic = service(paths, embedder)
    store = TranscriptStore(paths.transcripts)
    write(paths.scope_dir(SCOPE) / "MEMORY.md", "# Facts\nThe van needs new tyres.\n")
    await say(store, "user", "First words", T0)
    assert semantic.due_scopes() == [SCOPE], "a scope with material and no index yet"
    await semantic.sync_all(semantic.due_scopes())
    assert semantic.due_scopes() == []

    await say(store, "user", "An aside nobody addressed to halo", T0)
    assert semantic.due_scopes() == [SCOPE], "the transcript grew past the watermark"
    await semantic.sync_scope(SCOPE)
    write(paths.scope_dir(SCOPE) / "MEMORY.md", "# Facts\nThe van needs new brakes.\n")
    assert semantic.due_scopes() == [SCOPE], "a markdown file changed"
    await semantic.sync_scope(SCOPE)
    (paths.scope_dir(SCOPE) / "daily").mkdir()
    write(paths.scope_dir(SCOPE) / "daily" / "2026-09-03.md", "- new note\n")
    assert semantic.due_scopes() == [SCOPE], "a markdown file appeared"
    await semantic.sync_scope(SCOPE)
    assert semantic.due_scopes() == []

    other = Message("o1", T0, "web:wags", "Hello from another scope", speaker="wags")
    await store.append(other)
    assert semantic.due_scopes() == ["web:wags"]
    await semantic.close()


async def test_a_forgotten_scope_is_not_indexed_again_until_it_is_active(paths, embedder) -> None:
    semantic = service(paths, embedder)
    write(paths.scope_dir(SCOPE) / "MEMORY.md", "# Facts\nThe van needs new tyres.\n")
    await semantic.sync_scope(SCOPE)
    await semantic.forget_scope(SCOPE)  # what purge calls before deleting the folder
    assert await semantic.sync_scope(SCOPE) is None
    assert SCOPE not in semantic.due_scopes()
    semantic.mark_active(SCOPE)  # a new message after the purge
    assert (await semantic.sync_scope(SCOPE)) is not None
    await semantic.close()


def test_chunks_carry_no_secrets() -> None:
    line = Message("1", T0, SCOPE, "the wifi password: hunter2hunter2", speaker="mom")
    (chunk,) = chunk_transcript([NumberedLine(1, line)])
    assert "hunter2" not in chunk.text and "[redacted]" in chunk.text
    (note,) = chunk_markdown("MEMORY.md", "- bank pin: 4321\n- api key = sk-abcdefghijklmnopqrstuv\n")
    assert "4321" not in note.text and "sk-abcdefghijkl" not in note.text


def test_a_day_file_adds_only_its_own_lines() -> None:
    """The day's log and the notes distillation copied from turns are the transcript again: the
    index holds each turn once (from the transcript); a line a person wrote is still found."""
    day = (
        "# 2026-10-03 (Saturday)\n\n<!-- What happened in web:mom on 2026-10-03. You may edit or delete lines. -->\n\n"
        "## Notes\n\n- [09:15] Mom: we went to the zoo\n- the zoo pass is in the blue folder\n\n"
        "## Transcript\n\n- [09:15] [user] Mom: we went to the zoo\n"
    )
    (chunk,) = chunk_markdown("daily/2026-10-03.md", day)
    assert "blue folder" in chunk.text and "went to the zoo" not in chunk.text
    assert chunk_markdown("daily/2026-10-03.md", day.replace("- the zoo pass is in the blue folder\n", "")) == []


async def test_a_recalled_turn_comes_with_its_neighbours_once(paths, embedder) -> None:
    semantic = service(paths, None)
    store = TranscriptStore(paths.transcripts)
    start = datetime(2026, 10, 3, 9, tzinfo=UTC)
    said = [
        "How was the weekend?",
        "We drove to the lake.",
        "Which lake was it?",
        "Lake Tahoe, the kids swam in the lake all day.",
        "Sounds lovely!",
        "The dentist moved Aarav's appointment.",
        "To when?",
        "Next Friday at nine.",
    ]
    for n, text in enumerate(said):
        await say(store, "user", text, start + timedelta(minutes=n), speaker="mom" if n % 2 else "wags")
    await semantic.sync_scope(SCOPE)
    hits = await semantic.search([SCOPE], "Tahoe lake swam", params=semantic.params(limit=5, window_turns=1))
    texts = [h.text for h in hits]
    first = texts[0].splitlines()
    assert len(first) == 3 and "Which lake" in first[0] and "Tahoe" in first[1] and "Sounds lovely" in first[2]
    assert sum(t.count("Tahoe") for t in texts) == 1, "a turn inside an earlier hit's window is not repeated"
    assert (hits[0].start_line, hits[0].end_line) == (3, 5), "the location says the window's lines"
    alone = await semantic.search([SCOPE], "Tahoe lake swam", params=semantic.params(limit=5, window_turns=0))
    assert alone[0].text.count("\n") == 0
    await semantic.close()


async def test_a_run_of_matching_turns_is_one_passage_dated_once(paths) -> None:
    semantic = service(paths, None)
    store = TranscriptStore(paths.transcripts)
    start = datetime(2026, 10, 3, 21, tzinfo=UTC)
    said = [
        "How was the weekend?",
        "We watched the meteor shower from the lake.",
        "What was the meteor shower like?",
        "I felt tiny and in awe of it all.",
        "Sounds lovely!",
        "The dentist moved Aarav's appointment.",
        "To when?",
        "Next Friday at nine.",
    ]
    for n, text in enumerate(said):
        await say(store, "user", text, start + timedelta(minutes=n), speaker="mom" if n % 2 else "wags")
    await semantic.sync_scope(SCOPE)
    hits = await semantic.search([SCOPE], "meteor shower", params=semantic.params(limit=5, window_turns=1))
    first = hits[0].text
    assert "weekend" in first and "felt tiny" in first, "the second match stretches the window to its answer"
    assert sum(h.text.count("meteor shower") for h in hits) == 2, "no turn is repeated"
    assert (hits[0].start_line, hits[0].end_line) == (1, 4)
    assert first.count("[2026-10-03") == 1 and first.splitlines()[1].startswith("mom: "), "the day is said once"
    await semantic.close()


async def test_a_turn_from_the_day_that_talked_about_it_ranks_first(paths) -> None:
    semantic = service(paths, None)
    store = TranscriptStore(paths.transcripts)
    busy, quiet = datetime(2026, 3, 2, 9, tzinfo=UTC), datetime(2026, 6, 9, 9, tzinfo=UTC)
    await say(store, "user", "The piano teacher called about something.", quiet)
    for n, text in enumerate(["Grade two piano exam is in June.", "Her piano scales need work.", "Bought music."]):
        await say(store, "user", text, busy + timedelta(minutes=n))
    await say(store, "user", "The piano teacher called about something.", busy + timedelta(minutes=9))
    for n, text in enumerate(
        ["Soccer moved to Thursday.", "The van needs tyres.", "Dinner at grandma's on Sunday."] * 3
    ):
        await say(store, "user", text, quiet + timedelta(days=1 + n))
    await semantic.sync_scope(SCOPE)
    params = semantic.params(limit=5, window_turns=0, now=(quiet + timedelta(days=400)).timestamp())
    hits = [
        h
        for h in await semantic.search([SCOPE], "what did the piano teacher say", params=params)
        if "teacher" in h.text
    ]
    assert [h.text[:11] for h in hits] == ["[2026-03-02", "[2026-06-09"], (
        "the same words: the busier day, not the newer, first"
    )
    assert hits[0].relevance == hits[1].relevance
    await semantic.close()


async def test_a_name_in_every_turn_is_not_searched_when_the_question_says_more(paths) -> None:
    semantic = service(paths, None)
    store = TranscriptStore(paths.transcripts)
    for n, text in enumerate(["Soccer moved to Thursday.", "The van needs tyres.", "Piano lessons start in June."] * 4):
        await say(store, "user", text, T0 + timedelta(minutes=n), speaker="john")
    await semantic.sync_scope(SCOPE)
    index = semantic._index(SCOPE, create=False)
    assert index is not None
    assert '"john"' not in searched_words(index, "when do john's piano lessons start this june?")
    assert '"john"' in searched_words(index, "what is john's status?"), "too little else to search on"
    hits = await semantic.search([SCOPE], "when do john's piano lessons start this june?")
    assert hits and "Piano lessons" in hits[0].text
    await semantic.close()
