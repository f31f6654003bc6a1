"""Transcripts written before typed lines read as before (issue 34, item 4).

tests/fixtures/transcript_v1/ holds transcript files as halo wrote them at commit d3b5b1c (one of
each line kind, through halo's own paths: make.py there), and what that halo read from them
(expected.json). Here the code of now reads the same bytes, from HALO_HOME's files and through
PostgreSQL as the store of record, and must see the same: every line's fields, the model's
history of each scope, the web chat, what memory may keep, and the message a restart would find.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from halo.pipeline.resends import open_message
from tests.fixtures.transcript_v1.make import read_back, write
from transcripts import TranscriptLine, TranscriptStore

FIXTURE = Path(__file__).parent / "fixtures" / "transcript_v1"
FILES = sorted(FIXTURE.glob("*.jsonl"))
EXPECTED: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text())


def raw_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_the_fixture_has_every_kind_of_line() -> None:
    """What the fixture must hold for the tests below to mean anything."""
    records = [json.loads(raw) for path in FILES for raw in raw_lines(path)]
    kinds = {(r["role"], r.get("kind"), r.get("reply")) for r in records}
    assert {
        ("user", None, None),
        ("assistant", None, "model"),
        ("assistant", None, "command"),
        ("assistant", "notice", None),
        ("event", "alert", None),
        ("event", "session.item", None),
        ("event", "session.start", None),
        ("event", "session.pop", None),
        ("event", None, "silent"),
        ("event", None, None),
    } <= kinds
    keys = {key for r in records for key in r}
    assert {"model_input", "unaddressed", "message_id", "photo", "risk", "not_for_memory"} <= keys
    assert {"keep_from", "summary", "item", "outbox_id", "answers", "restart", "safety_action"} <= keys


def test_every_line_reads_back_with_the_fields_it_was_written_with() -> None:
    """What the admin API shows of a line (`to_dict`) is the line as stored, key for key; a line
    written again is the same JSON."""
    for path in FILES:
        for raw in raw_lines(path):
            line = TranscriptLine.from_json(raw)
            assert line.to_dict() == json.loads(raw)
            assert json.loads(line.to_json()) == json.loads(raw)


async def test_the_files_read_as_they_did() -> None:
    assert await read_back(FIXTURE) == EXPECTED


def shapes(path: Path) -> list[list[str]]:
    """Each line's keys, in the order written."""
    return [list(json.loads(raw)) for raw in raw_lines(path)]


@pytest.mark.own_store  # the embedded store's files; PostgreSQL's rows are read back below
async def test_the_code_of_now_writes_the_same_lines(tmp_path: Path) -> None:
    """The same conversation through halo now writes, line for line, the keys the fixture holds,
    in the same order: the format did not change."""
    await write(tmp_path / "home")
    written = sorted((tmp_path / "home" / "transcripts").glob("*.jsonl"))
    assert [p.name for p in written] == [p.name for p in FILES]
    for now, then in zip(written, FILES, strict=True):
        assert shapes(now) == shapes(then), now.name


@pytest.fixture
async def postgres() -> AsyncIterator[str]:
    from tests.storage_support import fresh_database

    async with fresh_database(migrated=True) as url:
        yield url


@pytest.mark.postgres
async def test_the_lines_read_as_they_did_through_postgresql(postgres: str, tmp_path: Path) -> None:
    """The lines as PostgreSQL's rows (the store of record) taken by a process on an empty
    HALO_HOME: it holds the files' very bytes, reads them as the files did, and writes no file."""
    from halo.storage import HaloDB
    from halo.storage.transcript_rows import TranscriptRows
    from transcripts.recorded import RecordedTranscripts
    from transcripts.records import RecordedLine

    db = HaloDB(tmp_path / "unused.db", postgres, family_id="sharma")
    try:
        rows = TranscriptRows(db)
        for path in FILES:
            raws = raw_lines(path)
            scope_id = json.loads(raws[0])["scope_id"]
            recorded = [
                RecordedLine(seq, TranscriptLine.from_json(raw).ts, raw.decode("utf-8")) for seq, raw in enumerate(raws)
            ]
            await rows.append(scope_id, recorded)
        home = tmp_path / "home" / "transcripts"
        store = RecordedTranscripts(rows, home)
        for scope_id in EXPECTED:
            await store.ready(scope_id)
        for path in FILES:
            scope_id = json.loads(raw_lines(path)[0])["scope_id"]
            held = b"".join(raw + b"\n" for _, raw in reversed(list(store.raw_reversed(scope_id))))
            assert held == path.read_bytes()
        assert await read_back(store) == EXPECTED
    finally:
        await db.close()
    assert not home.exists() or not list(home.iterdir())


async def test_a_crash_after_an_old_message_is_found_open(tmp_path: Path) -> None:
    """The restart's catch-up finds a person's message with nothing after it, in a transcript
    of old lines, and not one an old reply closed."""
    copy = tmp_path / "transcripts"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("*.json", "*.py", "__pycache__"))
    store = TranscriptStore(copy)
    tail = store.tail("telegram:1002", 20)
    assert open_message(tail) is None  # answered, every one
    asked = next(line for line in reversed(tail) if line.role == "user")
    assert open_message(tail[: tail.index(asked) + 1]) == asked
    store.close()
