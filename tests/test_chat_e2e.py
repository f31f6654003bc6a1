"""The whole message path over HTTP: web chat → policy → transcript → real Agents SDK → fake model."""

from __future__ import annotations

import json

import pytest

from halo.pipeline.turn_agents import NOTE_HEADER
from tests.conftest import llm_yaml
from tests.fakes.llm_server import FakeOpenAI


def transcript(halo, scope_id: str) -> list[tuple[str, str]]:
    store = halo.transcripts
    return [(line.role, line.text) for _, line in store.read_from(scope_id)]


async def test_json_chat_reply_and_both_transcript_lines(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("Soccer practice is at 5pm.")

    status, body = await running.chat("When is soccer practice?", token="mom-token")

    assert status == 200
    assert body == {"reply": "Soccer practice is at 5pm.", "scope_id": "web:mom"}
    assert transcript(running.halo, "web:mom") == [
        ("user", "When is soccer practice?"),
        ("assistant", "Soccer practice is at 5pm."),
    ]
    prompt = fake_llm.last_prompt_text()
    assert "When is soccer practice?" in prompt
    assert "Mom" in prompt  # the model is told who is speaking


async def test_sse_chat_streams_deltas_then_done(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("One two three four")
    headers = {"Accept": "text/event-stream", "Authorization": "Bearer wags-token"}

    async with running.http.post(running.url("/api/chat"), json={"text": "count"}, headers=headers) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = (await resp.read()).decode()

    events = [
        (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1].removeprefix("data: ")))
        for block in raw.strip().split("\n\n")
    ]
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) > 1, "the reply should arrive in pieces"
    assert "".join(deltas) == "One two three four"
    assert events[-1] == ("done", {"reply": "One two three four", "scope_id": "web:wags"})
    assert fake_llm.chat_requests[-1].json["stream"] is True


async def test_loopback_without_a_credential_is_nobody(fake_llm, settings_for, serve_halo):
    """The family computer is shared: on it without a web_token (or the dashboard's cookie), no chat."""
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    status, body = await running.chat("/whoami", token=None)
    assert status == 401 and "web_token" in body["error"]
    assert transcript(running.halo, "web:wags") == []


async def test_the_dashboard_session_chats_as_the_local_owner(fake_llm, settings_for, serve_halo):
    from halo.web_auth import SESSION_COOKIE, DashboardLogin

    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    link = DashboardLogin(running.halo.paths.logins).issue_link_token()
    async with running.http.get(running.url(f"/login?token={link}"), allow_redirects=False) as resp:
        session = resp.cookies[SESSION_COOKIE].value
    cookie = {"Cookie": f"{SESSION_COOKIE}={session}"}
    async with running.http.post(running.url("/api/chat"), json={"text": "/whoami"}, headers=cookie) as resp:
        status, body = resp.status, await resp.json()
    assert status == 200
    assert body["scope_id"] == "web:wags"
    assert "You are Wags" in body["reply"]
    assert fake_llm.model_requests == []  # a command never reaches the model


async def test_denied_member_gets_403_and_nothing_reaches_the_model(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))

    status, body = await running.chat("What is the family up to?", token="priya-token")

    assert status == 403
    assert "colleague" in body["error"].lower() or "work" in body["error"].lower()
    assert fake_llm.model_requests == []
    assert transcript(running.halo, "web:priya") == []
    events = await running.halo.audit.tail(10, kind="policy")
    assert any(e["principal"] == "priya" and e["allowed"] is False for e in events)


async def test_wrong_token_and_bad_bodies(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    assert (await running.chat("hi", token="nope"))[0] == 401
    owner = {"Authorization": "Bearer wags-token"}
    async with running.http.post(running.url("/api/chat"), data=b"not json", headers=owner) as resp:
        assert resp.status in (400, 415)
        assert "error" in await resp.json()
    async with running.http.post(running.url("/api/chat"), json={"text": "  "}, headers=owner) as resp:
        assert resp.status == 400
    status, body = await running.chat("x" * 9000)
    assert status == 413
    assert "limit" in body["error"]
    assert fake_llm.model_requests == []


async def test_history_reaches_the_model_on_the_next_turn(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("Noted.")
    await running.chat("The dentist is on Friday.", token="mom-token")
    fake_llm.reply("Friday.")
    await running.chat("When is the dentist?", token="mom-token")
    prompt = fake_llm.last_prompt_text()
    assert "The dentist is on Friday." in prompt and "Noted." in prompt


async def test_scopes_do_not_share_history(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await running.chat("My surprise party plan is the lake house.", token="mom-token")
    before = len(fake_llm.model_requests)
    await running.chat("What are we doing this weekend?", token="aarav-token")
    # a child's turn makes several model calls (risk classification, then the reply): check them all
    aarav_prompts = [fake_llm.prompt_text(r) for r in fake_llm.model_requests[before:]]
    assert any("What are we doing this weekend?" in p for p in aarav_prompts)
    assert not any("lake house" in p for p in aarav_prompts)


async def test_the_model_sees_the_conversation_once_and_no_commands(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await running.chat("I parked the blue car outside.", token="mom-token")
    await running.chat("/whoami", token="mom-token")
    await running.chat("Where is the car?", token="mom-token")
    sent = fake_llm.model_requests[-1].json["messages"]
    said = [(m["role"], m["content"]) for m in sent if m["role"] in ("user", "assistant")]
    note = said.pop(-2)  # halo's note for this turn (the time), just before the message: never history
    assert note[0] == "user" and note[1].startswith(NOTE_HEADER)
    assert said == [
        ("user", "I parked the blue car outside."),
        ("assistant", "Hello from the fake model"),
        ("user", "Where is the car?"),
    ]


async def test_new_clears_session_but_keeps_transcript(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    # Not "Remember …": that is a durable fact, which /new rightly keeps (tests/test_memory_e2e.py).
    await running.chat("I parked the blue car outside.", token="mom-token")
    _, body = await running.chat("/new", token="mom-token")
    assert "cleared" in body["reply"]
    await running.chat("What car?", token="mom-token")
    assert "blue car" not in fake_llm.last_prompt_text()
    roles = [role for role, _ in transcript(running.halo, "web:mom")]
    assert roles.count("user") == 3


async def test_no_model_configured_commands_work_and_free_text_explains(settings_for, serve_halo):
    running = await serve_halo(settings_for("llm: {provider: none}\n"))
    status, body = await running.chat("/help")
    assert status == 200 and "/whoami" in body["reply"]
    status, body = await running.chat("hello?")
    assert status == 200
    assert "No language model is configured" in body["reply"]
    assert "llm.provider" in body["reply"]
    assert "Noted" not in body["reply"]
    _, body = await running.chat("remember my shoe size is 38")
    assert body["reply"].startswith("Noted") and "No language model is configured" in body["reply"]
    await running.halo.gateway.drain()
    _, body = await running.chat("/memory")
    assert "shoe size: 38" in body["reply"]


@pytest.mark.own_store  # a torn line in the embedded store's file (PostgreSQL has no file)
async def test_torn_transcript_line_is_survived(fake_llm, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    await running.chat("first", token="mom-token")
    path = running.halo.transcripts.path("web:mom")
    with path.open("ab") as fh:
        fh.write(b'{"id": "torn", "role": "user", "te')  # a crash mid-write
    fake_llm.reply("still here")
    status, body = await running.chat("second", token="mom-token")
    assert (status, body["reply"]) == (200, "still here")
    assert [text for _, text in transcript(running.halo, "web:mom")] == [
        "first",
        "Hello from the fake model",
        "second",
        "still here",
    ]
