"""The transcript store is the source of truth: real files, real locks, a real second process."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from config.paths import scope_hash
from tests import processes
from tests.waiting import eventually
from transcripts import AuditLog, TranscriptLine, TranscriptStore
from transcripts._lines import BLOCK_SIZE
from transcripts.lines import Message

REPO = Path(__file__).resolve().parents[1]
SCOPE = "telegram:1001"


def make_line(text: str, scope_id: str = SCOPE, **extra: object) -> TranscriptLine:
    return Message(
        id=uuid.uuid4().hex,
        ts=datetime.now(UTC),
        scope_id=scope_id,
        text=text,
        speaker="wags",
        target="wags",
        platform="telegram",
        **extra,
    )


@pytest.fixture
def store(tmp_path: Path) -> TranscriptStore:
    return TranscriptStore(tmp_path / "transcripts")


def raw_lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def assert_at_offsets(path: Path, appended: list[tuple[int, TranscriptLine]]) -> None:
    """Each line is whole in the file, at the offset its append returned."""
    data = path.read_bytes()
    for offset, line in appended:
        assert offset == 0 or data[offset - 1 : offset] == b"\n"
        assert data[offset : data.index(b"\n", offset)] == line.to_json().encode()


def held_open(root: Path) -> list[str]:
    """The files under `root` this process has a descriptor on (an unlinked one ends in " (deleted)")."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor os.listdir itself used, closed by now
            continue
        if target.startswith(f"{root}/"):
            held.append(target)
    return sorted(held)


# --- TranscriptLine ---------------------------------------------------------------------------------


def test_line_round_trips_with_unknown_keys_at_top_level() -> None:
    line = make_line('नमस्ते \u2028 {"quoted"}\n', unknown={"reply_to": "abc", "tokens": 12})
    data = json.loads(line.to_json())
    assert list(data)[:8] == ["id", "ts", "scope_id", "role", "speaker", "target", "platform", "text"]
    assert data["reply_to"] == "abc" and data["tokens"] == 12
    assert "\n" not in line.to_json()
    assert TranscriptLine.from_json(line.to_json()) == line


def test_line_rejects_naive_time_bad_role_and_shadowing_unknown_keys() -> None:
    with pytest.raises(ValueError):
        Message(id="1", ts=datetime.now(), scope_id=SCOPE, text="x")
    with pytest.raises(ValueError):
        TranscriptLine.from_dict(
            {"id": "1", "ts": datetime.now(UTC).isoformat(), "scope_id": SCOPE, "role": "bot", "text": "x"}
        )
    with pytest.raises(ValueError):
        Message(id="1", ts=datetime.now(UTC), scope_id=SCOPE, text="x", unknown={"text": "y"})


def test_line_time_is_normalised_to_utc() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    ts = datetime(2026, 1, 1, 10, 0, tzinfo=ist)
    line = Message(id="1", ts=ts, scope_id=SCOPE, text="x")
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
from transcripts.lines import Reply
from transcripts import TranscriptStore

async def main() -> None:
    root, scope_id, stop = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    store = TranscriptStore(root)
    i = 0
    while not stop.exists():
        await store.append(Reply(id=uuid.uuid4().hex, ts=datetime.now(UTC), scope_id=scope_id,
                                 text=f"child {i} " + "y" * (i * 131 % 7000)))
        i += 1
        if i == 1:
            print("ready", flush=True)
    print(i, flush=True)

asyncio.run(main())
"""


@pytest.mark.slow  # starts a process
async def test_a_second_process_appending_concurrently_never_interleaves(
    store: TranscriptStore, tmp_path: Path
) -> None:
    # The child appends until told to stop, so every append of ours races one of its appends.
    stop = tmp_path / "stop"
    child = await processes.start(
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
    appended = []
    for i in range(ours):
        line = make_line(f"parent {i} " + "z" * (i * 113 % 6000))
        appended.append((await store.append(line), line))
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
    assert_at_offsets(store.path(SCOPE), appended)  # the other process never wrote between our size and our write


_HOLD_FLOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
os.write(fd, sys.argv[2].encode() + b"\\n")
fcntl.flock(fd, fcntl.LOCK_UN)
"""


def waiting_for_flock(inode: int) -> bool:
    """True once this process waits for a flock on the file with `inode`: in /proc/locks a waiter
    reads `1: -> FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`."""
    waiters = (entry.split() for entry in Path("/proc/locks").read_text().splitlines())
    return any(w[1:3] == ["->", "FLOCK"] and w[5] == str(os.getpid()) and w[6].endswith(f":{inode}") for w in waiters)


@pytest.mark.slow  # starts a process
async def test_an_append_waits_while_another_process_holds_the_transcripts_flock(store: TranscriptStore) -> None:
    # An older process, or a CLI import, locks the transcript itself; our append goes after its line.
    first = make_line("first")
    await store.append(first)
    theirs = make_line("theirs")
    path = store.path(SCOPE)
    child = await processes.start(
        sys.executable,
        "-c",
        _HOLD_FLOCK,
        str(path),
        theirs.to_json(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    assert await asyncio.wait_for(child.stdout.readline(), 60) == b"locked\n"
    ours = make_line("ours")
    appending = asyncio.create_task(store.append(ours))
    await eventually(lambda: waiting_for_flock(path.stat().st_ino), what="our append waiting on the child's flock")
    assert not appending.done()
    child.stdin.write(b"go\n")
    await child.stdin.drain()
    assert await asyncio.wait_for(child.wait(), 60) == 0
    offset = await appending
    assert [line for _, line in store.read_from(SCOPE)] == [first, theirs, ours]
    assert_at_offsets(path, [(offset, ours)])


async def test_two_stores_appending_to_one_scope_keep_offsets_right(tmp_path: Path) -> None:
    # Each store holds its own descriptor, as another process would: only the flock orders them.
    ours, theirs = TranscriptStore(tmp_path / "t"), TranscriptStore(tmp_path / "t")
    appended = []
    for i in range(20):  # one after the other: each store's cached descriptor sees the other's lines
        for store in (ours, theirs) if i % 2 else (theirs, ours):
            line = make_line(f"turn {i} " + "w" * (i * 211 % 3000))
            appended.append((await store.append(line), line))
    together = [make_line(f"at once {i} " + "v" * (i * 89 % 4000)) for i in range(100)]
    offsets = await asyncio.gather(*((ours if i % 2 else theirs).append(line) for i, line in enumerate(together)))
    appended += zip(offsets, together, strict=True)

    assert_at_offsets(ours.path(SCOPE), appended)
    assert len({offset for offset, _ in appended}) == len(appended)
    assert [line for _, line in ours.read_from(SCOPE)] == [line for _, line in sorted(appended, key=lambda a: a[0])]
    assert ours.count(SCOPE) == theirs.count(SCOPE) == len(appended)
    ours.close()
    theirs.close()


# --- descriptors kept open ------------------------------------------------------------------------------


async def test_the_descriptor_stays_open_between_appends_until_close(store: TranscriptStore) -> None:
    await store.append(make_line("one"))
    await store.append(make_line("two"))
    assert held_open(store.root) == [str(store.path(SCOPE))]
    assert sorted(p.name for p in store.root.iterdir()) == [store.path(SCOPE).name]  # no .lock file beside it
    store.close()
    assert held_open(store.root) == []
    await store.append(make_line("late"))  # an append after close still lands
    assert [line.text for _, line in store.read_from(SCOPE)] == ["one", "two", "late"]
    store.close()


async def test_at_most_max_open_files_stay_open_least_recently_used_closed_first(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path / "t", max_open_files=4)
    scopes = [f"web:{i}" for i in range(10)]
    for scope_id in scopes:
        await store.append(make_line("hello", scope_id=scope_id))
    assert held_open(store.root) == sorted(str(store.path(s)) for s in scopes[-4:])
    await store.append(make_line("again", scope_id="web:0"))  # closed a while ago: opened again
    assert held_open(store.root) == sorted(str(store.path(s)) for s in ["web:0", *scopes[-3:]])

    await asyncio.gather(*(store.append(make_line("at once", scope_id=s)) for s in scopes * 3))
    assert len(held_open(store.root)) <= 4
    assert [store.count(s) for s in scopes] == [5] + [4] * 9
    store.close()
    assert held_open(store.root) == []


async def test_a_new_transcript_is_private_whatever_the_umask(store: TranscriptStore) -> None:
    umask = os.umask(0o022)
    try:
        await store.append(make_line("family business"))
    finally:
        os.umask(umask)
    assert store.path(SCOPE).stat().st_mode & 0o777 == 0o600
    store.close()


async def test_an_append_after_someone_else_unlinked_the_file_lands_at_the_path(store: TranscriptStore) -> None:
    await store.append(make_line("before"))
    store.path(SCOPE).unlink()  # another process purged the scope while our descriptor was open
    after = make_line("after")
    assert await store.append(after) == 0
    assert [line for _, line in store.read_from(SCOPE)] == [after]
    assert held_open(store.root) == [str(store.path(SCOPE))]  # the unlinked file's descriptor is closed
    store.close()


async def test_an_append_after_the_file_was_replaced_lands_in_the_replacement(store: TranscriptStore) -> None:
    await store.append(make_line("before"))
    restored = make_line("restored from a backup")
    staged = store.root / "staged.tmp"
    staged.write_bytes(restored.to_json().encode() + b"\n")
    os.replace(staged, store.path(SCOPE))
    after = make_line("after")
    offset = await store.append(after)
    assert offset == len(restored.to_json().encode()) + 1
    assert [line for _, line in store.read_from(SCOPE)] == [restored, after]
    assert store.count(SCOPE) == 2
    store.close()


async def test_a_purge_by_another_store_is_noticed_by_an_open_descriptor(tmp_path: Path) -> None:
    ours, theirs = TranscriptStore(tmp_path / "t"), TranscriptStore(tmp_path / "t")
    await ours.append(make_line("before"))
    assert await theirs.purge(SCOPE) is True
    after = make_line("after")
    assert await ours.append(after) == 0
    assert [line for _, line in theirs.read_from(SCOPE)] == [after]
    ours.close()
    theirs.close()


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


async def test_purge_removes_the_transcript_and_an_old_lock_file(store: TranscriptStore) -> None:
    await store.append(make_line("secret family plans"))
    await store.append(make_line("other scope", scope_id="web:mom"))
    old_lock = store.path(SCOPE).with_name(store.path(SCOPE).name + ".lock")
    old_lock.touch()  # left by a halo from before the transcript itself was locked
    assert store.exists(SCOPE) and store.count(SCOPE) == 1
    assert await store.purge(SCOPE) is True
    assert not store.exists(SCOPE)
    assert not old_lock.exists()
    assert held_open(store.root) == [str(store.path("web:mom"))]  # the purged file's descriptor is closed
    assert store.count(SCOPE) == 0 and store.tail(SCOPE, 5) == []
    assert store.scope_ids() == ["web:mom"]
    assert await store.purge(SCOPE) is False

    fresh = make_line("a new start")
    assert await store.append(fresh) == 0
    assert store.count(SCOPE) == 1 and store.tail(SCOPE, 5) == [fresh]
    store.close()


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


async def test_audit_tail_filters_by_scope_and_kind(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "events.jsonl")
    assert await log.tail(5) == []
    for i in range(2000):
        log.write("reply" if i % 2 else "policy.deny", scope_id=f"web:{i % 4}", n=i, pad="p" * 50)
    assert [e["n"] for e in await log.tail(3)] == [1997, 1998, 1999]
    assert [e["n"] for e in await log.tail(3, scope_id="web:1")] == [1989, 1993, 1997]
    assert [e["n"] for e in await log.tail(2, kind="policy.deny")] == [1996, 1998]
    assert [e["n"] for e in await log.tail(2, scope_id="web:2", kind="policy.deny")] == [1994, 1998]
    assert await log.tail(2, scope_id="web:2", kind="reply") == []
    assert await log.tail(0) == []


async def test_audit_log_drops_secret_looking_keys(tmp_path: Path) -> None:
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
    event = (await log.tail(1))[0]
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
