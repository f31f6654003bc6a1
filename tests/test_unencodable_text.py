"""Text that cannot be encoded (a lone UTF-16 surrogate) is repaired at the boundary and in
every store: one odd message never breaks a scope or an admin route."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from transcripts import TranscriptStore

ADMIN = "admin-token-for-surrogates-0123456789"
PROBE = '{"text":"hi \\ud800 there"}'  # JSON's own escape: what the probe sent
ADMIN_ROUTES = [
    "/sessions",
    "/sessions-with-counts",
    "/scopes",
    "/events/tail?lines=20",
    "/transcripts/tail?scopeId=web:aarav&lines=20",
]


async def admin_statuses(running) -> dict[str, int]:
    statuses = {}
    for path in ADMIN_ROUTES:
        async with running.http.get(running.url(path), headers={"Authorization": f"Bearer {ADMIN}"}) as resp:
            await resp.read()
            statuses[path] = resp.status
    return statuses


async def test_a_lone_surrogate_from_the_web_chat_breaks_nothing(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm) + f"admin: {{token: {ADMIN}}}\n"))
    fake_llm.reply("Hello Aarav.")
    headers = {"Authorization": "Bearer aarav-token", "Content-Type": "application/json"}
    async with running.http.post(running.url("/api/chat"), data=PROBE, headers=headers) as resp:
        assert resp.status == 200
        assert (await resp.json())["reply"] == "Hello Aarav."
    assert "hi \ufffd there" in fake_llm.last_prompt_text()

    fake_llm.reply("Still here.")
    code, body = await running.chat("and now?", token="aarav-token")
    assert (code, body["reply"]) == (200, "Still here.")
    assert set((await admin_statuses(running)).values()) == {200}
    store = running.halo.transcripts
    texts = [line.text for _, line in store.read_from("web:aarav")]
    assert texts[0] == "hi \ufffd there" and "and now?" in texts


def write_as_an_old_halo_did(path: Path, text: str) -> None:
    """A transcript line as earlier versions wrote a lone surrogate: JSON's ASCII escape."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = {"id": "old-1", "ts": "2026-01-01T10:00:00+00:00", "scope_id": "web:aarav", "role": "user"}
    path.write_text(json.dumps({**old, "speaker": "aarav", "platform": "web", "text": text}) + "\n")


@pytest.mark.own_store  # it writes the old line into the transcript file itself
async def test_an_old_transcript_line_with_a_surrogate_does_not_break_reads(
    fake_llm: FakeOpenAI, settings_for, serve_halo
):
    settings = settings_for(llm_yaml(fake_llm) + f"admin: {{token: {ADMIN}}}\n")
    store = TranscriptStore(settings.paths.transcripts)
    write_as_an_old_halo_did(store.path("web:aarav"), "bad \ud800 line")

    running = await serve_halo(settings)
    fake_llm.reply("Fine.")
    code, body = await running.chat("hello", token="aarav-token")
    assert (code, body["reply"]) == (200, "Fine.")
    assert set((await admin_statuses(running)).values()) == {200}
    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with running.http.get(running.url(ADMIN_ROUTES[-1]), headers=headers) as resp:
        assert (await resp.json())[0]["text"] == "bad \ufffd line"


async def test_a_lone_surrogate_from_the_model_is_repaired(fake_llm: FakeOpenAI, settings_for, serve_halo):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    fake_llm.reply("odd \udc00 answer")
    code, body = await running.chat("hello", token="mom-token")
    assert (code, body["reply"]) == (200, "odd \ufffd answer")
    headers = {"Accept": "text/event-stream", "Authorization": "Bearer mom-token"}
    fake_llm.reply("streamed \udc00 too")
    async with running.http.post(running.url("/api/chat"), json={"text": "more"}, headers=headers) as resp:
        raw = (await resp.read()).decode()
    assert "streamed \ufffd too" in raw
    fake_llm.reply("Fine again.")
    code, body = await running.chat("and now?", token="mom-token")
    assert (code, body["reply"]) == (200, "Fine again.")
