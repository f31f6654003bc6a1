"""Backups (issue 15): the whole workspace in one archive while halo runs, restored elsewhere;
damaged and foreign archives refused; --force; the schedule and what it keeps."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.loader import load_settings
from halo.runtime.app import build_halo
from halo.workspace.backups import (
    BackupError,
    BackupSchedule,
    export_workspace,
    import_workspace,
    list_archives,
    prune,
)
from tests.conftest import llm_yaml, write_home
from tests.test_serve_cli import halo


async def running_family(home: Path, fake_llm, serve_halo):
    running = await serve_halo(load_settings(write_home(home, llm_yaml(fake_llm))))
    fake_llm.reply("Noted, the dentist is on Friday.")
    assert (await running.chat("The dentist is on Friday.", token="mom-token"))[0] == 200
    assert (await running.chat("/remember Aarav's football boots are size 5", token="mom-token"))[0] == 200
    return running


@pytest.mark.own_store  # the embedded workspace's files; an archive of PostgreSQL's: test_storage_move
async def test_round_trip_from_a_running_halo(tmp_path: Path, fake_llm, serve_halo):
    running = await running_family(tmp_path / "home", fake_llm, serve_halo)
    counts = await running.halo.sessions.item_counts()
    archive = tmp_path / "family.tar.gz"
    seen: list[tuple[int, int]] = []
    info = export_workspace(running.halo.paths.home, archive, progress=lambda d, t, _: seen.append((d, t)))
    assert info.files == len(seen) and seen[-1][0] == seen[-1][1]
    assert oct(archive.stat().st_mode & 0o777) == "0o600"

    restored = tmp_path / "restored"
    import_workspace(archive, restored)
    again = build_halo(load_settings(restored))
    try:
        lines = [(line.role, line.text) for line in again.transcripts.tail("web:mom", 10)]
        assert ("user", "The dentist is on Friday.") in lines
        assert ("assistant", "Noted, the dentist is on Friday.") in lines
        assert "football boots are size 5" in again.memory.read("web:mom")
        assert counts and await again.sessions.item_counts() == counts  # sessions: from transcripts
    finally:
        await again.close()
    assert (restored / "halo.db").exists() and (restored / "logs" / "events.jsonl").exists()


def tiny_home(home: Path) -> Path:
    write_home(home)
    (home / "transcripts").mkdir()
    (home / "transcripts" / "abc.jsonl").write_text('{"text": "hello"}\n')
    return home


def rewrite(archive: Path, change) -> None:
    """Rebuild `archive` with `change(name, data)` → (name, data) or None to drop a member."""
    with tarfile.open(archive, "r:gz") as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members:
            changed = change(name, data)
            if changed is None:
                continue
            info = tarfile.TarInfo(changed[0])
            info.size = len(changed[1])
            tar.addfile(info, io.BytesIO(changed[1]))


@pytest.mark.parametrize(
    "damage, says",
    [
        (lambda n, d: (n, d.replace(b"hello", b"HELLO")) if n.endswith(".jsonl") else (n, d), "damaged"),
        (lambda n, d: None if n == "MANIFEST.json" else (n, d), "MANIFEST"),
        (lambda n, d: None if n.endswith(".jsonl") else (n, d), "lacks"),
        (lambda n, d: ("workspace/../../escape.txt", d) if n.endswith(".jsonl") else (n, d), "outside"),
        (lambda n, d: ("/etc/escape", d) if n.endswith(".jsonl") else (n, d), "outside"),
        (
            lambda n, d: (
                (n, json.dumps({"format": "someone-else/1", "files": {}}).encode()) if n == "MANIFEST.json" else (n, d)
            ),
            "not a halo archive",
        ),
    ],
)
def test_a_damaged_or_foreign_archive_is_refused(tmp_path: Path, damage, says: str):
    archive = tmp_path / "a.tar.gz"
    export_workspace(tiny_home(tmp_path / "home"), archive)
    rewrite(archive, damage)
    target = tmp_path / "target"
    with pytest.raises(BackupError, match=says):
        import_workspace(archive, target)
    assert not target.exists()
    assert not (tmp_path / "escape.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if "import" in p.name] == []  # no staging left behind


def test_garbage_is_refused(tmp_path: Path):
    for name, data in (("a.tar.gz", b"not an archive"), ("b.tar.gz", gzip.compress(b"x" * 100))):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(BackupError):
            import_workspace(tmp_path / name, tmp_path / "target")


def test_force_replaces_and_keeps_the_old_workspace_aside(tmp_path: Path):
    archive = tmp_path / "a.tar.gz"
    export_workspace(tiny_home(tmp_path / "home"), archive)
    current = write_home(tmp_path / "current", "admin: {port: 9999}\n")
    before = (current / "halo.yaml").read_text()
    with pytest.raises(BackupError, match="--force"):
        import_workspace(archive, current)
    assert (current / "halo.yaml").read_text() == before and not (current / "transcripts").exists()
    import_workspace(archive, current, force=True)
    assert (current / "transcripts" / "abc.jsonl").read_text() == '{"text": "hello"}\n'
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("current.before-import-")]
    assert (aside / "halo.yaml").read_text() == before


async def test_the_schedule_fires_at_the_family_time_and_keeps_the_newest(tmp_path: Path):
    home = tiny_home(tmp_path / "home")
    schedule = BackupSchedule(home, home / "backups", "daily 03:30", keep=2, timezone="Europe/London")
    london = ZoneInfo("Europe/London")
    now = datetime(2026, 7, 1, 3, 29, tzinfo=london)  # summer time: 02:30 UTC
    assert schedule.next_run(now) == datetime(2026, 7, 1, 3, 30, tzinfo=london)
    assert schedule.next_run(now + timedelta(minutes=2)) == datetime(2026, 7, 2, 3, 30, tzinfo=london)
    made = [await schedule.run() for _ in range(1)]
    assert made[0] is not None and list_archives(home / "backups") == [made[0].path]
    for day in range(3, 7):  # older archives, as earlier nights left them
        (home / "backups" / f"halo-2026060{day}T023000Z.tar.gz").write_bytes(b"old")
    prune(home / "backups", keep=2)
    assert [p.name for p in list_archives(home / "backups")] == ["halo-20260606T023000Z.tar.gz", made[0].path.name]
    assert schedule.runs == 1 and schedule.last_error is None
    with pytest.raises(BackupError):
        BackupSchedule(home, home / "backups", "hourly", keep=2, timezone="UTC")


def test_the_cli_exports_and_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    home = tiny_home(tmp_path / "home")
    archive = tmp_path / "out.tar.gz"
    code, out, err = halo("export", str(archive), home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert "exported" in out and archive.exists()
    code, out, err = halo("import", str(archive), home=home, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2 and "--force" in err and "Traceback" not in err
    fresh = tmp_path / "fresh"
    code, out, err = halo("import", str(archive), home=fresh, capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, err
    assert (fresh / "transcripts" / "abc.jsonl").read_text() == '{"text": "hello"}\n'
