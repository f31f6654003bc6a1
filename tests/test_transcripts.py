"""The transcript store is the source of truth: real files, real locks, a real second process."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from config.paths import scope_hash
from transcripts import AuditLog, TranscriptLine, TranscriptStore
from transcripts._lines import BLOCK_SIZE

REPO = Path(__file__).resolve().parents[1]
SCOPE = "telegram:1001"


def make_line(text: str, scope_id: str = SCOPE, **extra: object) -> TranscriptLine:
    return TranscriptLine(
        id=uuid.uuid4().hex,
        ts=datetime.now(UTC),
        scope_id=scope_id,
        role="user",
        text=text,
        speaker="wags",
        target="wags",
        platform="telegram",
        extra=dict(extra),
    )


@pytest.fixture
def store(tmp_path: Path) -> TranscriptStore:
    return TranscriptStore(tmp_path / "transcripts")


def raw_lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


# --- TranscriptLine ---------------------------------------------------------------------------------


def test_line_round_trips_with_extra_at_top_level() -> None:
    line = make_line('नमस्ते \u2028 {"quoted"}\n', reply_to="abc", tokens=12)
    data = json.loads(line.to_json())
    assert list(data)[:8] == ["id", "ts", "scope_id", "role", "speaker", "target", "platform", "text"]
    assert data["reply_to"] == "abc" and data["tokens"] == 12
    assert "\n" not in line.to_json()
    assert TranscriptLine.from_json(line.to_json()) == line


def test_line_rejects_naive_time_bad_role_and_shadowing_extra() -> None:
    with pytest.raises(ValueError):
        TranscriptLine(id="1", ts=datetime.now(), scope_id=SCOPE, role="user", text="x")
    with pytest.raises(ValueError):
        TranscriptLine(id="1", ts=datetime.now(UTC), scope_id=SCOPE, role="bot", text="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TranscriptLine(id="1", ts=datetime.now(UTC), scope_id=SCOPE, role="user", text="x", extra={"text": "y"})


def test_line_time_is_normalised_to_utc() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    ts = datetime(2026, 1, 1, 10, 0, tzinfo=ist)
    line = TranscriptLine(id="1", ts=ts, scope_id=SCOPE, role="user", text="x")
    assert line.ts == datetime(2026, 1, 1, 4, 30, tzinfo=UTC)
    assert line.ts.utcoffset() == timedelta(0)


# --- append -----------------------------------------------------------------------------------------


async def test_append_returns_increasing_offsets_of_the_line_bytes(store: TranscriptStore) -> None:
    lines = [make_line(f"message {i} ✓") for i in range(5)]
    offsets = [await store.append(line) for line in lines]
    assert offsets == sorted(offsets) and offsets[0] == 0 and len(set(offsets)) == 5
    data = store.path(SCOPE).read_bytes()
    for offset, line in zip(offsets, lines, strict=True):
        end = data.index(b"\n", offset)
        assert TranscriptLine.from_json(data[offset:end]) == line
    assert store.path(SCOPE).name == f"{scope_hash(SCOPE)}.jsonl"
    assert [line for _, line in store.read_from(SCOPE)] == lines


async def test_append_keeps_a_lone_surrogate_repaired_instead_of_failing(store: TranscriptStore) -> None:
    # kept as readable UTF-8 with U+FFFD: a surrogate read back would break every reader of the scope
    await store.append(make_line("broken \ud800 emoji"))
    assert [line.text for _, line in store.read_from(SCOPE)] == ["broken \ufffd emoji"]
    assert "\ufffd" in store.path(SCOPE).read_text(encoding="utf-8")


async def test_concurrent_appends_in_one_process_never_interleave(store: TranscriptStore) -> None:
    lines = [make_line(f"task {i} " + "x" * (i * 97 % 5000)) for i in range(200)]
    offsets = await asyncio.gather(*(store.append(line) for line in lines))
    assert len(set(offsets)) == len(lines)
    chunks = raw_lines(store.path(SCOPE))
    assert chunks[-1] == b""
    parsed = [TranscriptLine.from_json(chunk) for chunk in chunks[:-1]]  # raises if any line is mixed up
    assert sorted(p.id for p in parsed) == sorted(line.id for line in lines)
    read = dict(store.read_from(SCOPE))
    assert {line.id: off for off, line in read.items()} == {
        line.id: off for line, off in zip(lines, offsets, strict=True)
    }
    assert store.count(SCOPE) == len(lines)


async def test_appends_to_different_scopes_go_to_different_files(store: TranscriptStore) -> None:
    await asyncio.gather(*(store.append(make_line(str(i), scope_id=f"web:{i % 3}")) for i in range(30)))
    assert store.scope_ids() == ["web:0", "web:1", "web:2"]
    assert [store.count(f"web:{i}") for i in range(3)] == [10, 10, 10]


_CHILD = """
import asyncio, sys, uuid
from datetime import UTC, datetime
from pathlib import Path
from transcripts import TranscriptLine, TranscriptStore

async def main() -> None:
    root, scope_id, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    store = TranscriptStore(root)
    i = 0
    while not stop.exists():
        await store.append(TranscriptLine(id=uuid.uuid4().hex, ts=datetime.now(UTC), scope_id=scope_id,
                                          role="assistant", text=f"child {i} " + "y" * (i * 131 % 7000)))
        i += 1
        if i == 1:
            print("ready", flush=True)
    print(i, flush=True)

asyncio.run(main())
"""


async def test_a_second_process_appending_concurrently_never_interleaves(
    store: TranscriptStore, tmp_path: Path
) -> None:
    # The child appends until told to stop, so every append of ours races one of its appends.
    stop = tmp_path / "stop"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        str(store.root),
        SCOPE,
        str(stop),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    assert await asyncio.wait_for(child.stdout.readline(), 60) == b"ready\n"
    ours = 150
    for i in range(ours):
        await store.append(make_line(f"parent {i} " + "z" * (i * 113 % 6000)))
    stop.touch()
    theirs = int(await asyncio.wait_for(child.stdout.readline(), 60))
    assert await asyncio.wait_for(child.wait(), 60) == 0

    chunks = raw_lines(store.path(SCOPE))
    assert chunks[-1] == b""
    parsed = [TranscriptLine.from_json(chunk) for chunk in chunks[:-1]]  # raises if any line is mixed up
    assert len(parsed) == len({p.id for p in parsed}) == ours + theirs
    assert sum(p.role == "user" for p in parsed) == ours
    switches = sum(a.role != b.role for a, b in itertools.pairwise(parsed))
    assert switches > 2  # the writers really overlapped
    assert store.count(SCOPE) == ours + theirs  # the cached count notices the other process's lines


# --- torn lines and watermarks ------------------------------------------------------------------------


async def test_a_torn_last_line_is_skipped_and_the_next_append_starts_fresh(
    store: TranscriptStore, caplog: pytest.LogCaptureFixture
) -> None:
    first = make_line("before the crash")
    await store.append(first)
    half = make_line("lost in the crash").to_json()[:30].encode()
    with store.path(SCOPE).open("ab") as f:
        f.write(half)

    with caplog.at_level(logging.WARNING):
        reader = store.read_from(SCOPE)
        assert [line for _, line in reader] == [first]
        assert store.tail(SCOPE, 5) == [first]
        assert store.count(SCOPE) == 1
    assert "torn" in caplog.text
    watermark = reader.next_offset
    assert watermark == len(first.to_json().encode()) + 1  # not moved past the torn bytes

    after = make_line("after the restart")
    offset = await store.append(after)
    data = store.path(SCOPE).read_bytes()
    assert data[offset - 1 : offset] == b"\n" and data[offset:].rstrip(b"\n") == after.to_json().encode()
    assert data == first.to_json().encode() + b"\n" + half + b"\n" + after.to_json().encode() + b"\n"

    assert [line for _, line in store.read_from(SCOPE)] == [first, after]
    assert store.tail(SCOPE, 5) == [first, after]
    assert store.count(SCOPE) == 2
    # An incremental reader that stopped at the torn line resumes and does not miss the line after the repair.
    assert list(store.read_from(SCOPE, watermark)) == [(offset, after)]


async def test_corrupt_complete_lines_are_skipped_without_raising(store: TranscriptStore) -> None:
    await store.append(make_line("one"))
    with store.path(SCOPE).open("ab") as f:
        f.write(b'not json\n[1, 2]\n{"id": "x"}\n\n')
        f.write(make_line("bad role").to_json().replace('"user"', '"robot"').encode() + b"\n")
        f.write(make_line("bad id").to_json().replace('"id":"', '"id":7,"x":"').encode() + b"\n")
    await store.append(make_line("two"))
    assert [line.text for _, line in store.read_from(SCOPE)] == ["one", "two"]
    assert [line.text for line in store.tail(SCOPE, 10)] == ["one", "two"]
    assert store.count(SCOPE) == 2


async def test_read_from_an_offset_resumes_exactly(store: TranscriptStore) -> None:
    lines = [make_line(f"m{i}") for i in range(10)]
    offsets = [await store.append(line) for line in lines]
    assert [line for _, line in store.read_from(SCOPE, offsets[4])] == lines[4:]

    reader = store.read_from(SCOPE)
    for _, line in reader:
        if line == lines[6]:
            break
    watermark = reader.next_offset
    reader.close()
    assert watermark == offsets[7]
    assert [line for _, line in store.read_from(SCOPE, watermark)] == lines[7:]

    drained = store.read_from(SCOPE, watermark)
    list(drained)
    assert list(store.read_from(SCOPE, drained.next_offset)) == []
    more = make_line("later")
    offset = await store.append(more)
    assert offset == drained.next_offset
    assert list(store.read_from(SCOPE, drained.next_offset)) == [(offset, more)]


def test_reading_a_scope_without_a_transcript(store: TranscriptStore) -> None:
    assert list(store.read_from(SCOPE)) == []
    assert store.tail(SCOPE, 3) == []
    assert store.count(SCOPE) == 0
    assert not store.exists(SCOPE)
    assert store.scope_ids() == []


# --- tail, count, purge ---------------------------------------------------------------------------------


async def test_tail_reads_backwards_across_blocks(store: TranscriptStore) -> None:
    lines = [make_line(f"line {i} " + "é" * (i * 37 % 3000)) for i in range(300)]
    for line in lines:
        await store.append(line)
    assert store.path(SCOPE).stat().st_size > 8 * BLOCK_SIZE
    assert store.tail(SCOPE, 1) == lines[-1:]
    assert store.tail(SCOPE, 120) == lines[-120:]
    assert store.tail(SCOPE, 1000) == lines
    assert store.tail(SCOPE, 0) == []


async def test_tail_skips_a_torn_tail_longer_than_a_block(store: TranscriptStore) -> None:
    lines = [make_line(f"m{i}") for i in range(3)]
    for line in lines:
        await store.append(line)
    with store.path(SCOPE).open("ab") as f:
        f.write(b'{"id": "' + b"a" * (3 * BLOCK_SIZE))
    assert store.tail(SCOPE, 2) == lines[1:]
    assert store.tail(SCOPE, 10) == lines


async def test_count_is_cached_and_follows_appends(store: TranscriptStore) -> None:
    for i in range(5):
        await store.append(make_line(str(i)))
    assert store.count(SCOPE) == 5
    for i in range(3):
        await store.append(make_line(str(i)))
    assert store.count(SCOPE) == 8
    assert TranscriptStore(store.root).count(SCOPE) == 8  # a fresh store rebuilds it from the file


async def test_purge_removes_the_transcript_and_its_lock(store: TranscriptStore) -> None:
    await store.append(make_line("secret family plans"))
    await store.append(make_line("other scope", scope_id="web:mom"))
    assert store.exists(SCOPE) and store.count(SCOPE) == 1
    assert await store.purge(SCOPE) is True
    assert not store.exists(SCOPE)
    assert not store.path(SCOPE).with_name(store.path(SCOPE).name + ".lock").exists()
    assert store.count(SCOPE) == 0 and store.tail(SCOPE, 5) == []
    assert store.scope_ids() == ["web:mom"]
    assert await store.purge(SCOPE) is False

    fresh = make_line("a new start")
    assert await store.append(fresh) == 0
    assert store.count(SCOPE) == 1 and store.tail(SCOPE, 5) == [fresh]


# --- audit log ----------------------------------------------------------------------------------------


def test_audit_log_writes_one_json_line_per_event(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "logs" / "events.jsonl")
    log.write("policy.deny", scope_id=SCOPE, speaker="aarav", reason="child in parents group")
    log.write("reply", scope_id="web:mom", when=datetime(2026, 1, 1, tzinfo=UTC), obj=object())
    lines = (tmp_path / "logs" / "events.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert list(first)[:2] == ["ts", "kind"] and first["kind"] == "policy.deny"
    assert datetime.fromisoformat(first["ts"]).tzinfo is not None
    assert second["when"] == "2026-01-01T00:00:00+00:00" and second["obj"].startswith("<object")


def test_audit_tail_filters_by_scope_and_kind(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "events.jsonl")
    assert log.tail(5) == []
    for i in range(2000):
        log.write("reply" if i % 2 else "policy.deny", scope_id=f"web:{i % 4}", n=i, pad="p" * 50)
    assert [e["n"] for e in log.tail(3)] == [1997, 1998, 1999]
    assert [e["n"] for e in log.tail(3, scope_id="web:1")] == [1989, 1993, 1997]
    assert [e["n"] for e in log.tail(2, kind="policy.deny")] == [1996, 1998]
    assert [e["n"] for e in log.tail(2, scope_id="web:2", kind="policy.deny")] == [1994, 1998]
    assert log.tail(2, scope_id="web:2", kind="reply") == []
    assert log.tail(0) == []


def test_audit_log_drops_secret_looking_keys(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "events.jsonl")
    log.write(
        "config.reload",
        token="t0k",
        api_key="sk-1",
        apiKey="sk-2",
        password="hunter2",
        client_secret="s",
        llm={"model": "gpt", "api_key": "sk-3", "nested": [{"bot_token": "123:abc", "ok": 1}]},
        prompt_tokens=42,
    )
    text = (tmp_path / "events.jsonl").read_text()
    for secret in ("t0k", "sk-1", "sk-2", "sk-3", "hunter2", "123:abc"):
        assert secret not in text
    event = log.tail(1)[0]
    assert event["llm"] == {"model": "gpt", "nested": [{"ok": 1}]}
    assert event["prompt_tokens"] == 42
    assert "client_secret" not in event


def test_audit_log_is_safe_from_threads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    log = AuditLog(tmp_path / "events.jsonl")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: log.write("tick", n=i, pad="q" * (i % 900)), range(400)))
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert sorted(e["n"] for e in events) == list(range(400))
