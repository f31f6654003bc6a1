"""What a parent and a young child read: a child's /whoami in plain words, the embedder's
trouble said once in words on /status, counts that read right."""

from __future__ import annotations

from pathlib import Path

from config.loader import load_settings
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI
from tests.test_web_fetch import FAMILY_WITH_TARA_ON_WEB

POLICY_WORDS = (
    "converse",
    "read_memory",
    "write_memory",
    "use_tool",
    "admin",
    "young_child",
    "web:tara",
    "policy",
    " dm",
)


async def test_a_young_childs_whoami_is_in_plain_words(home: Path, fake_llm: FakeOpenAI, serve_halo) -> None:
    write_home(home, llm_yaml(fake_llm), family=FAMILY_WITH_TARA_ON_WEB)
    running = await serve_halo(load_settings(home))
    status, body = await running.chat("/whoami", token="tara-token")
    assert status == 200
    reply = body["reply"]
    assert reply.startswith("Hi Tara!")
    assert "You can talk to me here." in reply
    assert "I tell your parents" in reply
    assert "Wags and Mom can read what we say to each other." in reply
    assert not [word for word in POLICY_WORDS if word in reply], reply
    _, mom = await running.chat("/whoami", token="mom-token")
    assert "converse: yes" in mom["reply"]  # a parent still gets the decisions and their reasons
    assert fake_llm.model_requests == []


async def test_an_embedder_that_cannot_load_is_one_problem_in_words(admin, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    harness = await admin(memory={"semantic": {"embedder": "model2vec", "model": str(missing)}})
    await harness.seed()  # syncs the index: the embedder is tried, and cannot load
    status = (await harness.local.call("GET", "/status")).body
    assert status["semantic"]["embedder"]["state"] == "unavailable"
    error = status["semantic"]["embedder"]["error"]
    problems = status["problems"]
    said = [p for p in problems if "meaning" in p]
    assert len(said) == 1 and "finds memories by their words only" in said[0]
    assert not [p for p in problems if error in p or "could not be loaded (" in p], problems
