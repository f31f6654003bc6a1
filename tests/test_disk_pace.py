"""Appends wait for a quick disk on the event loop, and for a slow one in worker threads
(transcripts/disk_pace.py); an append never waits on the loop for another one's lock."""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

from transcripts import TranscriptLine, TranscriptStore
from transcripts.disk_pace import BACK_OFF_SECONDS, SLOW_SECONDS, DiskPace
from transcripts.lines import Message

SCOPE = "web:mom"


def line(text: str) -> TranscriptLine:
    return Message(f"id-{text}", datetime.now(UTC), SCOPE, text, platform="web")


def test_one_slow_append_sends_appends_to_threads_for_a_while() -> None:
    now = [100.0]
    pace = DiskPace(clock=lambda: now[0])
    pace.took(SLOW_SECONDS / 10)
    assert pace.quick()
    pace.took(SLOW_SECONDS * 4)  # a busy SD card
    assert not pace.quick()
    now[0] += BACK_OFF_SECONDS - 1
    assert not pace.quick()
    now[0] += 1
    assert pace.quick()  # tried on the loop again


async def test_a_quick_disk_is_waited_for_on_the_loop(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path)
    threads: set[str] = set()
    real_append = store._files.append

    def spy(path: Path, data: bytes, *, wait: bool = True):  # type: ignore[no-untyped-def]
        threads.add(threading.current_thread().name)
        return real_append(path, data, wait=wait)

    store._files.append = spy  # type: ignore[method-assign]
    for text in ("one", "two"):
        store.pace = DiskPace()  # the disk counts as quick, whatever a busy machine's last fsync took
        await store.append(line(text))
    assert threads == {threading.main_thread().name}
    store.pace.took(SLOW_SECONDS * 2)
    await store.append(line("three"))
    assert any(name.startswith("transcript-append") for name in threads)  # a slow disk: a worker waits
    assert [entry.text for _, entry in store.read_from(SCOPE)] == ["one", "two", "three"]
    store.close()


async def test_an_append_never_waits_on_the_loop_for_another_process_lock(tmp_path: Path) -> None:
    store = TranscriptStore(tmp_path)
    await store.append(line("first"))
    locked, release = threading.Event(), threading.Event()

    def other_process() -> None:  # its own descriptor, its own flock; let go when told (or a blocked loop)
        fd = os.open(store.path(SCOPE), os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        locked.set()
        release.wait(timeout=10)
        os.close(fd)

    holder = threading.Thread(target=other_process)
    holder.start()
    assert await asyncio.to_thread(locked.wait, 10)
    appending = asyncio.create_task(store.append(line("second")))
    for _ in range(20):  # the loop keeps running while the append waits (had it waited on the loop,
        await asyncio.sleep(0)  # the holder's timeout would free it and it would be done by now)
    assert not appending.done()
    release.set()
    await appending
    await asyncio.to_thread(holder.join)
    assert [entry.text for _, entry in store.read_from(SCOPE)] == ["first", "second"]
    store.close()
