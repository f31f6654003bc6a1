"""CLI commands on PostgreSQL act as the one process serving the family, or not at all.

A terminal chat beside `halo serve` once acted alone: unfenced, with its own held copy of the
family's memory and transcripts, so the two split the family's chats. Now `halo chat` takes the
family lease as `halo serve` does: while another process holds the family (here halo's own lease
held from this test, as a process on another machine would) it says where the family is served
and writes nothing; alone, it holds the family (its turns fenced) and a `halo serve` started
meanwhile waits as a standby, then serves once the terminal chat ends. `halo distill` with no
halo on its own home's port does the same (beside one, it asks that one: test_memory_postgres).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

from config.loader import load_settings
from halo.cluster.cluster import Cluster
from halo.cluster.family_lease import Node
from halo.runtime.cli import main
from halo.storage import HaloDB
from memory.store import scope_folder
from tests.conftest import free_port, llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.storage_support import fresh_database
from tests.test_memory_postgres import rows
from tests.test_serve_cli import OWNER, halo_cmd, wait_healthy
from tests.waiting import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # halo serve and halo chat processes


@pytest.fixture(autouse=True)
def _storage_as_each_test_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HALO_STORAGE__URL", raising=False)


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with fresh_database(migrated=True) as made:
        yield made


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    model = FakeOpenAI(default_reply="Noted.").start_in_thread()
    yield model
    model.stop()


async def lines_saying(url: str, words: str) -> list[str]:
    """The scopes whose recorded transcript lines contain `words`, straight from PostgreSQL."""
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        found = await conn.fetch("SELECT scope_id FROM transcript_lines WHERE line LIKE $1", f"%{words}%")
    finally:
        await conn.close()
    return [r["scope_id"] for r in found]


ELSEWHERE = "http://the-other-machine:8787"


@asynccontextmanager
async def family_served_elsewhere(home: Path, url: str) -> AsyncIterator[None]:
    """The family's lease held by a process on another machine (halo's own lease, from here)."""
    db = HaloDB(home.parent / "elsewhere.db", url, family_id=load_settings(home).family_id, idle_seconds=30)
    await db.prepare()
    cluster = Cluster(db, Node("elsewhere", "the-other-machine", ELSEWHERE), 30)

    async def nothing() -> None:
        return None

    try:
        await cluster.start(nothing, nothing)
        assert cluster.active
        yield
    finally:
        await cluster.stop()
        await db.close()


def run_cli(argv: list[str], *, home: Path, url: str, stdin: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """`halo <argv>` in this process (a worker thread: the CLI runs its own event loop)."""
    monkeypatch.setenv("HALO_HOME", str(home))
    monkeypatch.setenv("HALO_STORAGE__URL", url)
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    return main(argv)


def web_chat_status(port: int) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/chat",
        data=json.dumps({"text": "anyone there?"}).encode(),
        headers={"Content-Type": "application/json", **OWNER},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_halo_chat_while_another_process_serves_the_family_says_where_and_writes_nothing(
    tmp_path: Path, url: str, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = write_home(tmp_path / "home", llm_yaml(fake))
    async with family_served_elsewhere(home, url):
        code = await asyncio.to_thread(
            run_cli, ["chat"], home=home, url=url, stdin="the bins go out on Tuesday\n/quit\n", monkeypatch=monkeypatch
        )
    out, err = capsys.readouterr()

    assert code == 2, (out, err)
    assert f"another halo serves this family at {ELSEWHERE} (its web chat: {ELSEWHERE}/chat)" in err
    assert "halo chat as" not in out, "no conversation was started"
    assert not await lines_saying(url, "bins go out"), "nothing of the terminal's message was recorded"
    assert "bins go out" not in fake.all_prompt_text()


async def test_halo_chat_alone_holds_the_family_and_a_serve_started_meanwhile_takes_over_when_it_ends(
    tmp_path: Path, url: str, fake: FakeOpenAI
) -> None:
    home = write_home(tmp_path / "home", llm_yaml(fake))
    port = free_port()
    env = {**os.environ, "HALO_STORAGE__URL": url}
    chat = halo_cmd("chat", home=home, port=port, env=env, stdin=subprocess.PIPE)
    serve = None
    try:
        assert chat.stdin is not None
        chat.stdin.write("the bins go out on Tuesday\n")
        chat.stdin.flush()
        await eventually(lambda: "bins go out" in fake.all_prompt_text(), what="the terminal's turn at the model")
        assert await eventually(lambda: lines_saying(url, "bins go out"), what="its turn recorded") == ["cli:wags"]
        chat.stdin.write("/remember the recycling bin is green\n")  # a command: no model, a memory write
        chat.stdin.flush()

        async def remembered() -> bool:
            return "recycling bin is green" in str(await rows(url, f"{scope_folder('cli:wags')}%"))

        await eventually(remembered, what="the command's memory written under the terminal's epoch")

        serve = halo_cmd("serve", home=home, port=port, env=env)
        await asyncio.to_thread(wait_healthy, port, serve)
        assert await asyncio.to_thread(web_chat_status, port) == 503, "a standby while the terminal holds the family"

        out, err = await asyncio.to_thread(chat.communicate, "/quit\n", 120)
        assert chat.returncode == 0, err
        assert "halo chat as" in out

        async def web_chat_answers() -> bool:
            return await asyncio.to_thread(web_chat_status, port) == 200

        await eventually(web_chat_answers, what="halo serve serving the family once the terminal chat ended")
    finally:
        if chat.poll() is None:
            chat.kill()
            await asyncio.to_thread(chat.communicate, None, 120)
        if serve is not None:
            serve.terminate()
            await asyncio.to_thread(serve.communicate, None, 120)


async def test_halo_distill_while_a_process_elsewhere_serves_the_family_names_it_and_changes_nothing(
    tmp_path: Path, url: str, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = write_home(tmp_path / "home", llm_yaml(fake))
    monkeypatch.setenv("HALO_ADMIN__PORT", str(free_port()))  # no halo answers on this home's own port
    async with family_served_elsewhere(home, url):
        code = await asyncio.to_thread(
            run_cli, ["distill", "web:wags"], home=home, url=url, stdin="", monkeypatch=monkeypatch
        )
    out, err = capsys.readouterr()

    assert code == 2, (out, err)
    assert f"another halo serves this family at {ELSEWHERE}" in err
    assert f"POST {ELSEWHERE}/sessions/web%3Awags/distill" in err
    assert await rows(url) == {}, "no memory row written beside the serving process"
