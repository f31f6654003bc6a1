"""The family's halo.yaml in PostgreSQL (#31): a valid edit through any process is stored as
the next version and every process of the family runs it; an invalid one changes nothing
anywhere and says why; each process keeps its own `storage` and `admin` keys."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from config.loader import load_settings
from config.settings import Settings
from halo.core.live_settings import LiveSettings
from halo.storage import HaloDB
from halo.storage.config_rows import ConfigRows
from halo.storage.db import Fence
from halo.workspace.config_reload import ConfigReload
from tests.conftest import write_home
from tests.fakes.llm_server import FakeOpenAI, Reply
from tests.storage_support import fresh_database
from tests.test_session_durability import Serve, family_yaml
from tests.waiting import eventually

pytestmark = pytest.mark.postgres

NEW_MEMBER = "  - {id: nani, name: Nani, role: parent, web_token: nani-token}\n"


@pytest.fixture(autouse=True)
def _storage_as_each_test_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        yield url


class Process:
    """One process's config reload on a real HALO_HOME and the real database; `applied` is
    what it handed on (halo's own `apply` sets the family and the home rules from it)."""

    def __init__(self, home: Path, url: str, *, family_yaml: str, own: str = "", standby: bool = False) -> None:
        write_home(home, own, family=family_yaml)
        self.settings = load_settings(home, storage={"url": url, "family_id": "sharma"})
        self.db = HaloDB(home / "halo.db", url, family_id="sharma")
        if standby:  # fenced, and not holding the family: as a second `halo serve` is
            self.db.fence = Fence()
        self.applied: list[Settings] = []
        self.config = ConfigReload(LiveSettings(self.settings), self._apply, record=ConfigRows(self.db))

    async def _apply(self, new: Settings) -> None:
        self.applied.append(new)

    @property
    def members(self) -> list[str]:
        return [m.id for m in self.config.current.members]

    def edit(self, change: str) -> None:
        path = self.settings.paths.config_file
        path.write_text(path.read_text().replace("owner: wags\n", change + "owner: wags\n"))


async def test_an_edit_on_one_process_is_stored_and_run_by_the_other_an_invalid_one_by_neither(
    database: str, tmp_path: Path
) -> None:
    from tests.conftest import FAMILY_YAML

    a = Process(tmp_path / "a", database, family_yaml=FAMILY_YAML, own="admin: {port: 8801}\n")
    b = Process(tmp_path / "b", database, family_yaml=FAMILY_YAML, own="admin: {port: 8802}\n")
    await a.config.join()  # the first process: its halo.yaml becomes version 1
    await b.config.join()  # the same family text: version 1 as well, nothing stored
    assert (a.config.version, b.config.version) == (1, 1)

    a.edit(members_line := NEW_MEMBER)
    assert await a.config.reload("signal")
    assert a.config.version == 2 and "nani" in a.members
    await b.config.poll()
    assert b.config.version == 2 and "nani" in b.members
    b_file = b.settings.paths.config_file.read_text()
    assert members_line.strip() in b_file and "port: 8802" in b_file and "8801" not in b_file  # b keeps its own

    b.edit("  - {id: broken, role: nobody}\n")  # invalid: no name, no such role
    assert not await b.config.reload("api")
    assert b.config.error is not None and "members" in b.config.error
    await a.config.poll()
    assert a.config.version == b.config.version == 2
    assert "broken" not in a.settings.paths.config_file.read_text()
    assert [v for (v,) in await _rows(database, "SELECT version FROM family_config ORDER BY version")] == [1, 2]
    for process in (a, b):
        await process.db.close()


async def test_a_file_edited_while_halo_was_stopped_is_stored_and_one_merely_behind_follows(
    database: str, tmp_path: Path
) -> None:
    from tests.conftest import FAMILY_YAML

    a = Process(tmp_path / "a", database, family_yaml=FAMILY_YAML)
    await a.config.join()
    edited = FAMILY_YAML.replace("owner: wags\n", NEW_MEMBER + "owner: wags\n")
    behind = Process(tmp_path / "behind", database, family_yaml=FAMILY_YAML)
    offline_edit = Process(tmp_path / "edited", database, family_yaml=edited)
    await offline_edit.config.join()  # a text no version has: an edit, stored as version 2
    assert offline_edit.config.version == 2
    await behind.config.join()  # version 1's text: behind, so it follows version 2
    assert behind.config.version == 2 and "nani" in behind.members
    for process in (a, behind, offline_edit):
        await process.db.close()


async def test_an_edit_through_a_standby_is_stored_and_run_by_the_active_process(database: str, tmp_path: Path) -> None:
    """The config is the family's, not the active process's: any process may store a valid
    edit (versions are ordered by their own key, not by the family's epoch)."""
    from tests.conftest import FAMILY_YAML

    active = Process(tmp_path / "active", database, family_yaml=FAMILY_YAML)
    standby = Process(tmp_path / "standby", database, family_yaml=FAMILY_YAML, standby=True)
    await standby.config.join()  # the first to start, while it holds nothing: version 1 all the same
    await active.config.join()
    assert (standby.config.version, active.config.version) == (1, 1)
    standby.edit(NEW_MEMBER)
    assert await standby.config.reload("api"), standby.config.error
    await active.config.poll()
    assert active.config.version == 2 and "nani" in active.members
    for process in (active, standby):
        await process.db.close()


async def test_a_poll_with_no_new_version_reads_the_version_number_only(database: str, tmp_path: Path) -> None:
    """Every process looks twice a second: an unchanged poll is one small indexed SELECT of the
    newest version's number, and the stored text is read only once there is a new version."""
    from tests.conftest import FAMILY_YAML

    a = Process(tmp_path / "a", database, family_yaml=FAMILY_YAML)
    b = Process(tmp_path / "b", database, family_yaml=FAMILY_YAML)
    await a.config.join()
    await b.config.join()
    sent: list[str] = []
    unwatch = b.db.watch(sent.append)
    for _ in range(3):
        await b.config.poll()
    assert len(sent) == 3, sent  # one statement a poll
    assert all("family_config.text" not in sql and "sha256" not in sql for sql in sent), sent

    a.edit(NEW_MEMBER)
    assert await a.config.reload("api"), a.config.error
    sent.clear()
    await b.config.poll()  # a new version: its number, then its row
    unwatch()
    assert b.config.version == 2 and "nani" in b.members
    assert [("family_config.text" in sql) for sql in sent] == [False, True], sent
    for process in (a, b):
        await process.db.close()


async def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn.execute("SET halo.family_id = 'sharma'")
        return [tuple(r) for r in await conn.fetch(query)]
    finally:
        await conn.close()


# --- two real processes --------------------------------------------------------------------


@pytest.fixture
def model() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI(responder=lambda body: Reply(text="noted")).start_in_thread()
    yield fake  # type: ignore[misc]
    fake.stop()


async def _status(http: aiohttp.ClientSession, serve: Serve) -> dict[str, Any] | None:
    try:
        async with http.get(f"{serve.url}/status", headers={"Authorization": "Bearer token-0"}) as r:
            return dict(await r.json()) if r.status == 200 else None
    except (TimeoutError, aiohttp.ClientError):
        return None


@pytest.mark.slow  # `halo` as a process
async def test_two_halo_processes_run_the_same_config_version_after_an_edit_through_one(
    tmp_path: Path, model: FakeOpenAI, database: str
) -> None:
    serves = []
    for name in ("a", "b"):
        home = tmp_path / name
        home.mkdir()
        (home / "halo.yaml").write_text(family_yaml(model))
        serves.append(Serve(home, {"HALO_STORAGE__URL": database, "HALO_MEMORY__SEMANTIC__EMBEDDER": "none"}))
    a, b = serves
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        for serve in serves:
            await serve.start(http)

        async def version(serve: Serve) -> int | None:
            status = await _status(http, serve)
            return status["config_reload"]["version"] if status else None

        async def versions(expected: int) -> bool:
            return [await version(a), await version(b)] == [expected, expected]

        await eventually(lambda: versions(1), within=180, what="both processes on version 1")
        path = a.home / "halo.yaml"
        path.write_text(
            path.read_text().replace(
                "memory:\n", "  - {id: nani, name: Nani, role: parent, web_token: nani-token}\nmemory:\n"
            )
        )
        edited = time.time()
        await eventually(lambda: versions(2), within=30, what="both processes on version 2 after a's edit")
        applied = [(await _status(http, serve) or {})["config_reload"]["last_applied_at"] for serve in serves]
        print(f"version 2 applied {applied[0] - edited:.2f} s (a) and {applied[1] - edited:.2f} s (b) after the edit")

        async def b_knows_nani() -> bool:
            async with http.post(
                f"{b.url}/api/chat", json={"text": "hello"}, headers={"Authorization": "Bearer nani-token"}
            ) as r:
                return r.status == 200

        assert await b_knows_nani()  # the member added on a is a member on b
        status = await _status(http, b)
        assert status is not None and status["config_reload"]["error"] is None
        for serve in serves:
            assert serve.proc is not None
            serve.proc.terminate()
            await serve.proc.wait()


async def test_an_edit_that_would_change_the_family_id_is_refused(database: str, tmp_path: Path) -> None:
    """A new family.name without storage.family_id would change the id the rows are read by."""
    from tests.conftest import FAMILY_YAML

    a = Process(tmp_path / "a", database, family_yaml=FAMILY_YAML)
    await a.config.join()
    path = a.settings.paths.config_file
    path.write_text(path.read_text().replace("{name: Sharma}", "{name: The Sharmas}"))
    assert not await a.config.reload("api")
    assert a.config.error is not None and "storage.family_id: sharma" in a.config.error
    assert a.config.version == 1
    await a.db.close()
