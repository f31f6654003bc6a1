"""Finding 5 of issue 15: HALO_HOME is 0700 and everything in it 0600, for a fresh home and an
existing one, whatever the umask halo was started with; `halo doctor` says when it is not."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.runtime.doctor import check_private_files
from tests.conftest import llm_yaml, write_home


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """What most desktops start processes with: files 0644, folders 0755."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def loose_modes(home: Path) -> list[str]:
    found = [] if stat.S_IMODE(home.stat().st_mode) == 0o700 else [f"{home} {oct(home.stat().st_mode)}"]
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            path = Path(root) / name
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode != (0o700 if path.is_dir() else 0o600):
                found.append(f"{path.relative_to(home)} {oct(mode)}")
    return found


def written_tops(home: Path) -> set[str]:
    return {p.relative_to(home).parts[0] for p in home.rglob("*") if p.is_file()}


async def test_every_file_halo_writes_is_private(loose_umask, home: Path, fake_llm, serve_halo):
    write_home(home, llm_yaml(fake_llm))
    old_user_file = home / "members" / "mom" / "USER.md"  # an existing install, written 0644
    old_user_file.parent.mkdir(parents=True)
    old_user_file.write_text("# Mom\n")
    assert loose_modes(home), "the test starts from loose modes"

    running = await serve_halo(load_settings(home))
    assert (await running.chat("remember my shoe size is 38", token="mom-token"))[0] == 200
    assert (await running.chat("The dentist is on Friday.", token="mom-token"))[0] == 200
    services = running.halo
    await services.memory.remember("web:mom", "Dentist: Friday", by="Mom", when=datetime.now(UTC))
    await services.memory.distill("web:mom")
    services.audit.write("test_event", scope_id="web:mom")

    embedded = {"halo.db", "transcripts", "SOUL.md", "members", "logs"}  # on PostgreSQL: rows there
    assert written_tops(home) >= {"halo.yaml", "memory", *(embedded if running.halo.db.backend == "sqlite" else ())}
    assert loose_modes(home) == []


def test_doctor_names_a_loose_file(tmp_path: Path):
    home = write_home(tmp_path / "home")
    os.chmod(home, 0o700)
    os.chmod(home / "halo.yaml", 0o600)
    settings = load_settings(home)
    assert check_private_files(settings).ok
    os.chmod(home / "halo.yaml", 0o644)
    check = check_private_files(settings)
    assert not check.ok and "halo.yaml" in check.detail and "chmod" in check.fix
