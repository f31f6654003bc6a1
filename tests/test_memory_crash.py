"""Crash safety and failure handling: a killed or failing distillation never leaves a half-written
MEMORY.md, the next run completes from the watermark, and failures back off per scope."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from config.settings import MemorySettings
from memory.scope_files import ScopeFiles
from memory.service import DistillationDisabled, MemoryService
from memory.state import backoff_seconds
from tests import processes
from tests.memory_support import MemoryKit, names

pytestmark = pytest.mark.slow  # an interpreter killed mid-write

SCOPE = "web:mom"
ROOT = Path(__file__).resolve().parent.parent

KILL_MID_WRITE = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.memory_support import MemoryKit

    real_replace = os.replace
    def die_before_rename(src, dst):
        if str(dst).endswith("MEMORY.md"):
            os.kill(os.getpid(), signal.SIGKILL)  # the new text is in the temp file, not yet renamed
        real_replace(src, dst)
    os.replace = die_before_rename
    MemoryKit(Path({home!r})).distiller.run({scope!r})
""")


async def test_killed_mid_write_leaves_the_old_file_and_the_next_run_completes(tmp_path: Path) -> None:
    kit = MemoryKit(tmp_path / "home")
    await kit.exchange(SCOPE, "remember my shoe size is 37")
    first = kit.distiller.run(SCOPE)
    before = kit.memory(SCOPE)
    await kit.exchange(SCOPE, "my shoe size is 38")
    await kit.exchange(SCOPE, "remember the bins go out on Monday")

    script = KILL_MID_WRITE.format(root=str(ROOT), home=str(kit.home), scope=SCOPE)
    proc = await processes.start(sys.executable, "-c", script, cwd=ROOT, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)

    assert proc.returncode == -signal.SIGKILL, stderr.decode()
    folder = kit.paths.scope_dir(SCOPE)
    assert list(folder.glob(".MEMORY.md.*.tmp")), "the process died with its temp file unrenamed"
    assert kit.memory(SCOPE) == before  # whole, and the old version
    assert kit.state.get(SCOPE, "distill").offset == first.to_offset  # the watermark did not move

    result = MemoryKit(kit.home).distiller.run(SCOPE)  # "restart" and run again

    assert result.from_offset == first.to_offset and result.items == 4
    text = kit.memory(SCOPE)
    assert text.count("Mom's shoe size: 38") == 1 and text.count("bins go out") == 1
    assert "~~Mom's shoe size: 37~~" in text
    assert not list(folder.glob(".*.tmp")), "leftovers of the crash are cleaned up"


async def test_failure_between_files_then_rerun_adds_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = MemoryKit(tmp_path / "home")
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    await kit.exchange(SCOPE, "we went to the lake", "Lovely!")

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(ScopeFiles, "add_daily", disk_full)
        with pytest.raises(OSError):
            kit.distiller.run(SCOPE)
    assert "Mom's shoe size: 38" in kit.memory(SCOPE)  # MEMORY.md was written …
    assert kit.state.get(SCOPE, "distill").offset == 0  # … but the batch is not done

    result = kit.distiller.run(SCOPE)

    assert result.facts_added == 0 and result.notes_added == 2
    assert kit.memory(SCOPE).count("Mom's shoe size: 38") == 1
    assert kit.state.get(SCOPE, "distill").offset == result.to_offset


def _service(kit: MemoryKit, **settings: object) -> MemoryService:
    return MemoryService(
        MemorySettings(**settings),
        kit.files,
        kit.transcripts,
        kit.state,  # type: ignore[arg-type]
        names=names,
        may_write=kit.may_write,
        clock=kit.clock,
    )


async def test_failures_back_off_per_scope_and_show_in_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kit = MemoryKit(tmp_path / "home")
    service = _service(kit, distillation_every_n_items=1)
    attempts: list[str] = []

    def broken(scope_id: str) -> None:
        attempts.append(scope_id)
        raise PermissionError("memory folder is read-only")

    monkeypatch.setattr(service.distiller, "run", broken)
    start = kit.clock_value
    await kit.exchange(SCOPE, "hello")
    await service.after_turn(SCOPE, "hello")  # must not raise: the chat never sees it

    state = kit.state.get(SCOPE, "distill")
    assert (len(attempts), state.failures, state.next_retry) == (1, 1, start + 30)
    assert "read-only" in (state.last_error or "")

    await service.after_turn(SCOPE, "hello again")  # still backing off: no attempt
    assert len(attempts) == 1

    kit.clock_value = start + 31
    await service.after_turn(SCOPE, "and again")
    state = kit.state.get(SCOPE, "distill")
    assert (len(attempts), state.failures, state.next_retry) == (2, 2, kit.clock_value + 60)
    assert [backoff_seconds(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]

    # another scope is not held back by this one
    await kit.exchange("web:wags", "hi", speaker="wags")
    await service.after_turn("web:wags", "hi")
    assert attempts[-1] == "web:wags"

    status = await service.status()
    assert status["enabled"] is True and status["failing"] == [SCOPE, "web:wags"]
    scope_status = status["scopes"][SCOPE]["distill"]
    assert scope_status["failures"] == 2 and scope_status["next_retry"].startswith("2026-")
    assert scope_status["last_error"] == "PermissionError: memory folder is read-only"

    monkeypatch.undo()  # fixed: a manual run ignores the backoff, succeeds and clears the failure
    result = await service.distill(SCOPE)
    assert result.items == 2  # the one exchange, distilled once at last
    state = kit.state.get(SCOPE, "distill")
    assert (state.failures, state.next_retry, state.last_error) == (0, None, None)
    await service.close()


async def test_disabled_distillation_says_so(tmp_path: Path) -> None:
    kit = MemoryKit(tmp_path / "home")
    service = _service(kit, distillation_enabled=False)
    with pytest.raises(DistillationDisabled, match="disabled"):
        await service.distill(SCOPE)
    await kit.exchange(SCOPE, "remember my shoe size is 38")
    await service.after_turn(SCOPE, "remember my shoe size is 38")
    assert kit.memory(SCOPE) == ""
    assert (await service.status())["enabled"] is False
    await service.close()


def test_this_test_file_really_kills(tmp_path: Path) -> None:
    """Guard: SIGKILL exists here, so the kill test above is not silently a no-op."""
    assert hasattr(signal, "SIGKILL") and os.name == "posix"
