"""Isolation of documents: a document sent in one scope is indexed in that scope only, and reaches
another conversation's prompt only when the policy lets that conversation read the scope it was
sent in (`read_memory`, as for every other memory). Through the real gateway, context builder,
semantic index and Agents SDK; the platform's download is the only stand-in."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from config.loader import load_settings
from halo.core.envelope import Attachment, Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.core.turn import Turn
from halo.inventory import Halo
from halo.runtime.app import build_halo
from tests.conftest import llm_yaml, write_home
from tests.fakes.llm_server import FakeOpenAI

TAG = re.compile(r"\bzq[a-z]+doc\b")
# (sender, where, platform user id): a DM of a parent, a teen, a young child; the parents group; work
SENT = [
    ("mom", "telegram:1002", "1002"),
    ("aarav", "telegram:1003", "1003"),
    ("tara", "telegram:1004", "1004"),
    ("wags", "telegram:-1001234", "1001"),
    ("priya", "discord:3001", "2001"),
]
ASKING = [
    ("wags", "telegram:1001", "1001"),
    ("mom", "telegram:1002", "1002"),
    ("mom", "web:mom", "mom"),
    ("aarav", "telegram:1003", "1003"),
    ("tara", "telegram:1004", "1004"),
    ("mom", "telegram:-1001234", "1002"),
    ("priya", "discord:3001", "2001"),
]


def tag(scope_id: str) -> str:
    """A word only the document sent in `scope_id` contains."""
    return "zq" + "".join("abcdefghij"[int(c)] for c in re.sub(r"\D", "", scope_id)) + "doc"


def envelope(halo: Halo, member_id: str, scope_id: str, user_id: str, text: str, **kw: object) -> Envelope:
    family = halo.family
    member = family.member(member_id)
    platform = scope_id.split(":", 1)[0]
    speaker = Speaker(user_id, member=member)
    return Envelope(platform, resolve_scope(family, scope_id), speaker, text, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def halo(home: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Halo]:
    write_home(home, llm_yaml(fake_llm) + "memory:\n  semantic: {embedder: none}\n")
    running = build_halo(load_settings(home))
    yield running
    await running.close()


async def test_a_document_reaches_only_the_conversations_the_policy_lets_read_its_scope(
    halo: Halo, fake_llm: FakeOpenAI
) -> None:
    for member_id, scope_id, user_id in SENT:
        letter = f"Picnic notice. The picnic code word is {tag(scope_id)}. Bring a blanket.\n".encode()

        async def read(data: bytes = letter) -> bytes:  # the platform's download
            return data

        document = Attachment(read, "document", "text/plain", "picnic.txt", len(letter))
        reply = await halo.gateway.handle(envelope(halo, member_id, scope_id, user_id, "", attachment=document))
        assert reply.kind == "model", (scope_id, reply)
    await halo.gateway.drain()
    semantic = halo.semantic
    await semantic.sync_all([scope_id for _, scope_id, _ in SENT])

    for _, scope_id, _ in SENT:  # each index holds its own document, and no one else's
        hits = await semantic.search([scope_id], "picnic code word blanket")
        found = {t for h in hits if h.source.startswith("files/") for t in TAG.findall(h.text)}
        assert found == {tag(scope_id)}, scope_id

    for member_id, scope_id, user_id in ASKING:
        env = envelope(halo, member_id, scope_id, user_id, "what is the picnic code word?")
        turn = Turn(env, halo.policy)
        before = len(fake_llm.scripted_requests)
        await halo.gateway.handle(env)
        assert len(fake_llm.scripted_requests) == before + 1, scope_id
        prompt = fake_llm.last_prompt_text()
        may_read = {
            tag(sent)
            for _, sent, _ in SENT
            if sent == scope_id or turn.decide("read_memory", resolve_scope(turn.family, sent), audit=False).allowed
        }
        seen = set(TAG.findall(prompt))
        assert seen <= may_read, f"{member_id} in {scope_id} saw {sorted(seen - may_read)}"
        if any(sent == scope_id for _, sent, _ in SENT):
            assert tag(scope_id) in seen, f"{scope_id}'s own document is missing: the check would be vacuous"
    await halo.gateway.drain()
