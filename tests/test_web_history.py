"""The web chat reopened shows the conversation so far, read back from the member's transcript:
the newest page first, older pages before a cursor, and what halo sent on its own once."""

from __future__ import annotations

from typing import Any

from tests.conftest import llm_yaml
from tests.fakes.llm_server import FakeOpenAI
from tests.waiting import eventually


async def history(running: Any, token: str, query: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with running.http.get(running.url("/api/chat/history" + query), headers=headers) as resp:
        return resp.status, await resp.json()


async def test_reopening_the_chat_shows_the_newest_messages_and_pages_back(
    fake_llm: FakeOpenAI, settings_for, serve_halo
):
    running = await serve_halo(settings_for(llm_yaml(fake_llm)))
    for n in range(1, 21):
        fake_llm.reply(f"answer {n}")
        status, _ = await running.chat(f"question {n}", token="mom-token")
        assert status == 200
    await running.halo.delivery.send("web:mom", "The garage door is open.", kind="proactive")

    async def garage_read_back() -> Any:
        status, page = await history(running, "mom-token", "?limit=11")
        assert status == 200 and page["messages"][-1]["text"] == "The garage door is open."
        return page

    page = await eventually(garage_read_back, what="the home alert in Mom's conversation")
    assert page["scope_id"] == "web:mom" and page["more"] is True
    texts = [(m["role"], m["text"]) for m in page["messages"]]
    assert texts[-1] == ("assistant", "The garage door is open.")
    assert texts[:3] == [("user", "question 16"), ("assistant", "answer 16"), ("user", "question 17")]
    garage = page["messages"][-1]
    assert garage["kind"] == "proactive" and garage["id"]
    assert all(", " in m["when"] and "T" not in m["when"] for m in page["messages"])  # "Sat 28 Nov, 17:00"

    status, earlier = await history(running, "mom-token", f"?limit=10&before={page['messages'][0]['cursor']}")
    assert [m["text"] for m in earlier["messages"]] == [
        *(t for n in range(11, 16) for t in (f"question {n}", f"answer {n}"))
    ]
    assert earlier["more"] is True

    status, first = await history(running, "mom-token", f"?limit=50&before={earlier['messages'][0]['cursor']}")
    assert [m["text"] for m in first["messages"]][:2] == ["question 1", "answer 1"] and first["more"] is False

    # Each member reads only their own conversation; a wrong query is a clear 400.
    status, theirs = await history(running, "wags-token")
    assert status == 200 and theirs["messages"] == []
    assert (await history(running, "mom-token", "?before=x"))[0] == 400
    assert (await history(running, "mom-token", "?limit=0"))[0] == 400
    async with running.http.get(running.url("/api/chat/history")) as resp:
        assert resp.status == 401
