"""A parent edits the markdown memory through the admin API (#31): the only way to on PostgreSQL,
where no file is kept, and the same on the embedded store. The edit is in the store of record when
the API answers, the next prompt carries it, and every read and edit is audited."""

from __future__ import annotations

from typing import Any

from tests.audit_support import audit_events
from tests.conftest import OWNER_AUTH, llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.memory_files import read_memory

DM = "web:mom"


async def put(running: Any, path: str, body: Any) -> tuple[int, Any]:
    async with running.http.put(running.url(path), json=body, headers=OWNER_AUTH) as r:
        return r.status, await r.json()


async def get(running: Any, path: str) -> tuple[int, Any]:
    async with running.http.get(running.url(path), headers=OWNER_AUTH) as r:
        return r.status, await r.json()


async def test_a_parents_edit_of_memory_profile_and_persona_reaches_the_next_prompt(
    fake_llm: FakeOpenAI, settings_for: Any, serve_halo: Any
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    halo = running.halo
    await running.chat("/remember the spare key is under the blue pot", token="mom-token")

    memory = (await get(running, f"/scopes/{DM}/memory"))[1]["text"]
    status, body = await put(running, f"/scopes/{DM}/memory", {"text": memory.replace("blue pot", "red pot")})
    assert status == 200 and "red pot" in body["text"] and body["exists"]
    assert "red pot" in await read_memory(halo, halo.paths.memory_file(DM)), "stored when it answered"

    status, body = await put(running, "/members/mom/profile", {"text": "# Mom\n\n- Allergic to cats\n"})
    assert status == 200 and body == {
        "path": "members/mom/USER.md",
        "exists": True,
        "text": "# Mom\n\n- Allergic to cats\n",
    }
    assert (await get(running, "/members/mom/profile"))[1]["text"] == "# Mom\n\n- Allergic to cats\n"
    status, _ = await put(running, "/soul", {"text": "# SOUL\n\nYou are Juniper.\n"})
    assert status == 200

    fake_llm.reply("Under the red pot.")
    status, _ = await running.chat("Where is the spare key?", token="mom-token")
    assert status == 200
    prompt = fake_llm.last_prompt_text()
    assert "under the red pot" in prompt and "blue pot" not in prompt
    assert "Allergic to cats" in prompt and "You are Juniper." in prompt

    edits = await audit_events(halo, kind="admin_edit_memory")
    assert [(e.get("scope_id"), e.get("file")) for e in edits] == [
        (DM, None),
        (None, "members/mom/USER.md"),
        (None, "SOUL.md"),
    ]
    assert {e["actor"] for e in edits} == {"parent:wags"}, "the owner's own credential, named"


async def test_an_edit_that_is_not_one_changes_nothing_and_says_why(
    fake_llm: FakeOpenAI, settings_for: Any, serve_halo: Any
) -> None:
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await running.chat("/remember the bins go out on Tuesday", token="mom-token")
    before = (await get(running, f"/scopes/{DM}/memory"))[1]["text"]

    status, body = await put(running, f"/scopes/{DM}/memory", {"txt": "oops"})
    assert status == 400 and "text" in body["error"]
    status, body = await put(running, f"/scopes/{DM}/memory", {"text": "x" * (600 * 1024)})
    assert status == 400 and "longer than" in body["error"]
    status, body = await put(running, "/members/nobody/profile", {"text": "hi"})
    assert status == 404 and "nobody" in body["error"]
    assert (await get(running, f"/scopes/{DM}/memory"))[1]["text"] == before
    assert (await get(running, "/members/nobody/profile"))[0] == 404
