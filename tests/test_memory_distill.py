"""Deterministic distillation: transcript → MEMORY.md and daily notes, from a watermark, redacted,
idempotent, and respectful of a parent's hand edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import daily
from memory.files import ConcurrentEditError, update_text
from memory.when import hhmm
from tests.memory_support import T0, MemoryKit

SCOPE = "web:mom"


@pytest.fixture
def kit(tmp_path: Path) -> MemoryKit:
    return MemoryKit(tmp_path / "home")


def facts_of(kit: MemoryKit, scope: str = SCOPE) -> list[str]:
    return [line for line in kit.memory(scope).split("\n") if line.startswith("- ")]


def notes_of(kit: MemoryKit, scope: str = SCOPE) -> list[str]:
    text = kit.day_file(scope).read_text()
    return (daily.section_body(text, daily.NOTES) or "").split("\n")


def at(minute: int) -> str:
    from datetime import timedelta

    return hhmm(T0 + timedelta(minutes=minute))


async def test_conversation_distils_into_facts_and_notes(kit: MemoryKit) -> None:
    await kit.exchange(SCOPE, "remember my shoe size is 37", "Got it.")  # 1, 2
    await kit.exchange(SCOPE, "The dentist moved to tomorrow at 3", "Noted. Anything else?")  # 3, 4
    await kit.exchange(SCOPE, "my shoe size is 38", "Updated.")  # 5, 6
    await kit.exchange(SCOPE, "Priya is my manager", "Okay.")  # 7, 8
    await kit.exchange(SCOPE, "the wifi password is hunter2", "Your key is sk-abcdefghijklmnopqrstuv ok")  # 9, 10
    await kit.exchange(SCOPE, "remember the alarm code is 4821", "Okay.")  # 11, 12
    await kit.exchange(SCOPE, "/remember commands act at once and are skipped", "Remembered: …")  # 13, 14
    await kit.exchange(SCOPE, "forget my manager", "Done.")  # 15, 16
    await kit.say(SCOPE, "model unavailable", role="event")  # 17 (ignored)

    result = kit.distiller.run(SCOPE)

    assert (result.items, result.facts_added, result.facts_superseded, result.facts_forgotten) == (17, 4, 1, 1)
    assert facts_of(kit) == [
        "- ~~Mom's shoe size: 37~~ _(Mom, 2026-02-13; superseded 2026-02-13)_",
        "- Mom's shoe size: 38 _(Mom, 2026-02-13)_",
        "- The alarm code is [redacted] _(Mom, 2026-02-13)_",
    ]
    assert notes_of(kit) == [
        f"- [{at(3)}] Mom: The dentist moved to 2026-02-14 at 3",
        f"- [{at(4)}] halo: Noted.",
        f"- [{at(9)}] Mom: the wifi password is [redacted]",
        f"- [{at(10)}] halo: Your key is [redacted] ok",
    ]
    assert result.notes_added == 4
    assert "hunter2" not in kit.day_file(SCOPE).read_text() + kit.memory(SCOPE)
    assert "4821" not in kit.memory(SCOPE)


async def test_rerun_changes_nothing_and_a_lost_watermark_is_harmless(kit: MemoryKit) -> None:
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    await kit.exchange(SCOPE, "we went to the lake")
    kit.distiller.run(SCOPE)
    memory, notes = kit.memory(SCOPE), kit.day_file(SCOPE).read_text()

    again = kit.distiller.run(SCOPE)
    assert again.items == 0

    # a crash after the files were written but before the watermark moved: the run repeats
    state = kit.state.get(SCOPE, "distill")
    kit.state.put(state.succeeded(0, 0, 0))
    repeat = kit.distiller.run(SCOPE)
    assert repeat.items == 4 and repeat.facts_added == 0
    assert kit.memory(SCOPE) == memory
    assert kit.day_file(SCOPE).read_text() == notes


async def test_watermark_survives_a_restart(kit: MemoryKit, tmp_path: Path) -> None:
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    first = kit.distiller.run(SCOPE)
    await kit.exchange(SCOPE, "remember the bins go out on Monday")

    restarted = MemoryKit(kit.home)  # a new process: new stores over the same halo.db and files
    second = restarted.distiller.run(SCOPE)

    assert second.from_offset == first.to_offset and second.items == 2
    assert facts_of(restarted) == [
        "- Mom's shoe size: 38 _(Mom, 2026-02-13)_",
        "- The bins go out on Monday _(Mom, 2026-02-13)_",
    ]


async def test_policy_keeps_a_speaker_out_of_memory(kit: MemoryKit) -> None:
    kit.denied.add("aarav")
    await kit.exchange(SCOPE, "remember my shoe size is 33", speaker="aarav")
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    result = kit.distiller.run(SCOPE)
    assert result.skipped == 1
    assert facts_of(kit) == ["- Mom's shoe size: 38 _(Mom, 2026-02-13)_"]
    assert not kit.day_file(SCOPE).exists()  # nothing of Aarav's, and Mom's line was a fact


async def test_hand_edits_are_kept_and_deleted_facts_stay_deleted(kit: MemoryKit) -> None:
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    await kit.exchange(SCOPE, "remember the cat is called Miso")
    kit.distiller.run(SCOPE)
    path = kit.paths.memory_file(SCOPE)
    edited = path.read_text().replace("- The cat is called Miso _(Mom, 2026-02-13)_\n", "")
    edited += "\nA note Mom typed herself.\n"
    path.write_text(edited)

    await kit.exchange(SCOPE, "remember the car is blue")
    kit.distiller.run(SCOPE)

    text = path.read_text()
    assert "A note Mom typed herself." in text
    assert "Miso" not in text  # deleted by hand, and that part of the transcript is not re-read
    assert "- The car is blue _(Mom, 2026-02-13)_" in text


def test_an_edit_during_a_write_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("- one\n")
    calls = []

    def change(text: str) -> str:
        calls.append(text)
        if len(calls) == 1:  # a parent saves the file while we are working on the old copy
            path.write_text("- one\n- typed by a parent\n")
        return text + "- two\n"

    update_text(path, change)

    assert path.read_text() == "- one\n- typed by a parent\n- two\n"
    assert calls == ["- one\n", "- one\n- typed by a parent\n"]


def test_a_file_that_never_stops_changing_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("0")

    def change(text: str) -> str:
        path.write_text(str(int(path.read_text()) + 1))
        return "ours"

    with pytest.raises(ConcurrentEditError):
        update_text(path, change)
    assert path.read_text() != "ours"


async def test_forget_reaches_notes_and_the_daily_transcript(kit: MemoryKit) -> None:
    await kit.exchange(SCOPE, "we booked the dentist for Friday")
    kit.distiller.run(SCOPE)
    assert any("dentist" in line for line in notes_of(kit))
    await kit.exchange(SCOPE, "forget the dentist")
    result = kit.distiller.run(SCOPE)
    assert result.notes_added == 0
    assert "dentist" not in kit.day_file(SCOPE).read_text()


async def test_scope_json_names_the_folder(kit: MemoryKit) -> None:
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    kit.distiller.run(SCOPE)
    import json

    info = json.loads(kit.paths.scope_json(SCOPE).read_text())
    assert info == {
        "scope_id": SCOPE,
        "scope_type": "dm",
        "owner": "mom",
        "members": ["mom"],
        "description": "Mom's DM",
    }


def test_writers_of_one_scope_take_turns(kit: MemoryKit) -> None:
    import threading

    def add(tag: str) -> None:
        for i in range(40):
            with kit.files.lock(SCOPE):
                kit.files.update_memory(SCOPE, lambda text, i=i: text + f"- {tag} {i}\n")

    threads = [threading.Thread(target=add, args=(tag,)) for tag in ("a", "b", "c")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(facts_of(kit)) == 120  # no update lost between worker threads


async def test_purge_removes_memory_files_and_progress(kit: MemoryKit) -> None:
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    kit.distiller.run(SCOPE)
    folder = kit.paths.scope_dir(SCOPE)
    (folder / "semantic.db").write_text("not ours")

    assert kit.files.purge(SCOPE) is True
    kit.state.delete_scope(SCOPE)

    assert sorted(p.name for p in folder.iterdir()) == ["semantic.db"]  # the index's owner deletes it
    assert kit.state.get(SCOPE, "distill").offset == 0
    assert kit.files.purge("web:nobody") is False


async def test_remember_said_to_the_others_in_a_group_is_a_note(kit: MemoryKit) -> None:
    """'Remember, just do it' to a friend is not an instruction to halo; 'my X is Y' is a fact either way."""
    import uuid

    from transcripts.lines import Message

    for text in ["Remember, just do it!", "My favourite colour is green."]:
        await kit.transcripts.append(Message(uuid.uuid4().hex, T0, "web:mom", text, speaker="mom", unaddressed=True))
    await kit.say("web:mom", "remember the spare key is under the blue pot")
    kit.distiller.run("web:mom")
    memory = kit.memory("web:mom")
    assert "spare key is under the blue pot" in memory, "said to halo: a fact"
    assert "favourite colour: green" in memory
    assert "do it" not in memory
    assert "Remember, just do it!" in kit.day_file("web:mom").read_text()
