"""The audit log kept in one place: `logs/events.jsonl` in HALO_HOME when embedded, the rows of
`audit_events` on PostgreSQL, where no file is written. While PostgreSQL refuses connections
the events wait (at most `keep`, the oldest dropped and said) and land once it is back; a
process that lost its family drops them instead. Real PostgreSQL, a real halo, the network cut
by a real TCP proxy (tests/test_storage_outage.py's), no fake of halo's own code."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from halo.storage import HaloDB
from halo.storage.audit_rows import AuditRows
from tests.audit_support import audit_events
from tests.conftest import OWNER_AUTH, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import fresh_database
from tests.test_family_lease import Process
from tests.test_storage_outage import CuttableProxy, proxied_database  # noqa: F401 (a fixture)
from tests.test_transcript_records import rows
from tests.waiting import eventually
from transcripts import AuditLog


@pytest.fixture
async def postgres() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as url:
        yield url


async def status_of(running: Any) -> dict[str, Any]:
    async with running.http.get(running.url("/status"), headers=OWNER_AUTH) as response:
        assert response.status == 200
        return await response.json()  # type: ignore[no-any-return]


@pytest.mark.postgres
@pytest.mark.own_store  # its own database, which the test reads itself
async def test_a_halo_on_postgresql_keeps_its_events_in_rows_and_writes_no_events_file(
    postgres: str, fake_llm: FakeOpenAI, settings_for: Callable[..., Settings], serve_halo: Any
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm), storage={"url": postgres}))
    fake_llm.reply("Hello!")
    assert (await running.chat("Hi"))[1]["reply"] == "Hello!"
    running.halo.audit.write("admin_clear", scope_id="web:wags", actor="mom")

    assert "admin_clear" in {e["kind"] for e in await audit_events(running.halo)}  # the waiting one too

    async def in_postgresql() -> bool:
        return bool(await rows(postgres, "SELECT 1 FROM audit_events WHERE kind = 'admin_clear'"))

    await eventually(in_postgresql, what="the event written behind to audit_events")
    home = running.halo.settings.paths.home
    assert not running.halo.settings.paths.events_log.exists()
    assert list(home.rglob("events.jsonl")) == []
    assert (await status_of(running))["halo_home"]["events_log"] == "PostgreSQL table audit_events"


@pytest.mark.own_store  # the embedded store, whatever HALO_TEST_STORAGE says
async def test_an_embedded_halo_keeps_its_events_in_the_file(
    fake_llm: FakeOpenAI, settings_for: Callable[..., Settings], serve_halo: Any
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    assert running.halo.db.backend == "sqlite"
    running.halo.audit.write("admin_clear", scope_id="web:wags", actor="mom")
    path = running.halo.settings.paths.events_log
    assert '"kind": "admin_clear"' in path.read_text()  # written at once, no waiting
    assert (await audit_events(running.halo, kind="admin_clear"))[0]["actor"] == "mom"
    assert (await status_of(running))["halo_home"]["events_log"] == str(path)


async def _through_an_outage(
    url: str, proxy: CuttableProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture, keep: int, written: int
) -> list[int]:
    """One event written, PostgreSQL cut off, `written` more while it refuses connections, then
    back: the `n` of every event in PostgreSQL, in order."""
    direct = url.replace(f"127.0.0.1:{proxy.port}/", "127.0.0.1:5432/")  # the test's own look, past the proxy
    db = HaloDB(tmp_path / "unused.db", url, family_id="sharma")
    record = AuditRows(db, every=0.05, keep=keep)
    audit = AuditLog(record=record)
    caplog.set_level(logging.WARNING, logger="transcripts.write_behind")
    try:

        async def stored(count: int) -> bool:
            return len(await rows(direct, "SELECT 1 FROM audit_events")) == count

        audit.write("policy", n=0)
        await eventually(lambda: stored(1), what="the first event in PostgreSQL")

        await proxy.cut()
        for n in range(1, written + 1):
            audit.write("policy", n=n)
        await eventually(lambda: "could not write" in caplog.text, what="a write refused while cut off")
        await eventually(lambda: record.waiting == min(written, keep), what="the events kept to try again")
        assert await stored(1)

        await proxy.restore()
        again = f"wrote {min(written, keep)} audit events again"
        await eventually(lambda: again in caplog.text, what="the kept events written once PostgreSQL is back")
        assert record.waiting == 0
        found = await rows(direct, "SELECT event FROM audit_events ORDER BY id")
        return [int(r["event"].split('"n": ')[1].rstrip("}")) for r in found]
    finally:
        await audit.close()
        await db.close()


@pytest.mark.postgres
@pytest.mark.own_store  # its own database, behind the proxy it cuts
async def test_events_wait_while_postgresql_refuses_connections_and_land_once_it_is_back(
    proxied_database: tuple[str, CuttableProxy],  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, proxy = proxied_database
    assert await _through_an_outage(url, proxy, tmp_path, caplog, keep=100, written=5) == [0, 1, 2, 3, 4, 5]
    assert "dropped" not in caplog.text


@pytest.mark.postgres
@pytest.mark.own_store
async def test_past_the_cap_the_oldest_waiting_events_are_dropped_and_said_once(
    proxied_database: tuple[str, CuttableProxy],  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, proxy = proxied_database
    assert await _through_an_outage(url, proxy, tmp_path, caplog, keep=3, written=5) == [0, 3, 4, 5]
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped == ["dropped the oldest 2 audit events: more than 3 waited while they could not be written"]


@pytest.mark.postgres
async def test_a_process_that_lost_its_family_drops_its_events_and_never_tries_them_again(
    tmp_path: Path, postgres: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The old holder still believes it is active (its epoch 1); the family is at epoch 2, and
    PostgreSQL's fence trigger refuses its INSERT: the batch is dropped, not kept."""
    a, b = Process(tmp_path, postgres, "a", 600), Process(tmp_path, postgres, "b", 600)
    try:
        await a.start()
        await eventually(lambda: a.serving, what="a active")
        await b.start()
        stale = AuditRows(a.db, every=3600)
        AuditLog(record=stale).write("policy", n="before")
        await stale.flush()

        pid = (await rows(postgres, "SELECT holder_pid FROM family_leases WHERE family_id = 'fam'"))[0]["holder_pid"]
        a.cluster._stopped.set()  # a beats no more (as if frozen): it still believes it holds epoch 1
        await rows(postgres, "SELECT pg_terminate_backend($1)", pid)
        await eventually(lambda: b.serving, what="b takes the family once a's session is gone")

        AuditLog(record=stale).write("policy", n="stale")
        await stale.flush()
        assert stale.waiting == 0  # dropped, not kept to try again
        assert "could not write 1 audit events" in caplog.text and "does not hold family" in caplog.text
        holder = AuditRows(b.db, every=3600)
        AuditLog(record=holder).write("policy", n="after")
        await holder.flush()
    finally:
        await b.close()
        await a.close()
    found = await rows(postgres, "SELECT event FROM audit_events ORDER BY id")
    assert ['"before"' in r["event"] for r in found] == [True, False]
    assert '"after"' in found[1]["event"] and not any('"stale"' in r["event"] for r in found)
