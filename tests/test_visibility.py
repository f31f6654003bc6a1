"""Parental visibility over HTTP: a parent reads a young child's DM, an adolescent's only with
parental_visibility, never another parent's; every read, allowed or refused, is audited."""

from __future__ import annotations

from typing import Any

import pytest

from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from tests.conftest import OWNER_AUTH
from tests.safety_support import SAFETY_FAMILY, family_settings

VISIBLE = SAFETY_FAMILY.replace("age_group: adolescent,", "age_group: adolescent, parental_visibility: true,")


async def say(running: Any, member_id: str, scope_id: str, text: str) -> None:
    """A line in a scope's transcript, said through the gateway (commands need no model)."""
    family = running.halo.family
    member = family.member(member_id)
    await running.halo.gateway.handle(
        Envelope(
            platform=scope_id.split(":")[0],
            scope=resolve_scope(family, scope_id),  # type: ignore[arg-type]
            speaker=Speaker(member_id, member),
            text=text,
        )
    )


async def read(running: Any, token: str | None, scope_id: str, lines: int = 20) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = running.url(f"/family/transcript?scopeId={scope_id}&lines={lines}")
    async with running.http.get(url, headers=headers) as resp:
        return resp.status, await resp.json()


READS = [
    # (family, reader token, scope, allowed, deciding policy)
    (SAFETY_FAMILY, "wags-token", "telegram:1004", True, "parent-reads-child-transcript"),  # young child
    (SAFETY_FAMILY, "mom-token", "web:tara", True, "parent-reads-child-transcript"),
    (SAFETY_FAMILY, "wags-token", "web:aarav", False, "child-transcript-private"),  # adolescent, private
    (VISIBLE, "wags-token", "web:aarav", True, "parent-reads-child-transcript"),  # visibility on
    (SAFETY_FAMILY, "mom-token", "web:wags", False, "parent-transcript-private"),  # another parent
    (VISIBLE, "mom-token", "telegram:1001", False, "parent-transcript-private"),
    (SAFETY_FAMILY, "aarav-token", "web:tara", False, "child-transcript-private"),  # a sibling
    (SAFETY_FAMILY, "aarav-token", "web:aarav", True, "transcript-owner"),
    (SAFETY_FAMILY, "wags-token", "telegram:-1001234", False, None),  # the parents group is no DM
]


@pytest.mark.parametrize(
    ("family", "token", "scope_id", "allowed", "policy_id"),
    READS,
    ids=[f"{r[1].split('-')[0]}-{r[2]}{'-visible' if r[0] is VISIBLE else ''}" for r in READS],
)
async def test_transcript_reads_follow_the_policy_and_are_audited(
    family: str,
    token: str,
    scope_id: str,
    allowed: bool,
    policy_id: str | None,
    home,
    serve_halo,
) -> None:
    running = await serve_halo(family_settings(home, "llm: {provider: none}\n", family=family))
    scope = resolve_scope(running.halo.family, scope_id)
    if scope.owner_id:
        await say(running, scope.owner_id, scope_id, "/help")
    await running.halo.gateway.drain()

    status, body = await read(running, token, scope_id)

    reader = token.removesuffix("-token")
    if allowed:
        assert status == 200, body
        assert [line["role"] for line in body["lines"]] == ["user", "assistant"]
        assert body["lines"][0]["text"] == "/help"
    else:
        assert status == 403 and "error" in body
    (event,) = await running.halo.audit.tail(5, kind="transcript_read")
    assert (event["reader"], event["scope_id"], event["allowed"]) == (reader, scope_id, allowed)
    assert event["lines"] == (2 if allowed else 0)
    if policy_id:
        assert policy_id in event["policy_ids"]


async def test_bad_requests(home, serve_halo) -> None:
    running = await serve_halo(family_settings(home, "llm: {provider: none}\n"))
    assert (await read(running, "nobody-token", "web:tara"))[0] == 401
    assert (await read(running, "wags-token", "not-a-scope"))[0] == 400
    assert (await read(running, "wags-token", "web:tara", lines=0))[0] == 400
    assert await running.halo.audit.tail(5, kind="transcript_read") == []


async def test_a_parent_lists_what_they_may_read(home, serve_halo) -> None:
    running = await serve_halo(family_settings(home, "llm: {provider: none}\n"))
    headers = {"Authorization": "Bearer wags-token"}
    async with running.http.get(running.url("/family/transcripts"), headers=headers) as resp:
        scopes = set((await resp.json())["scopes"])
    assert {"web:tara", "telegram:1004", "web:wags", "telegram:1001"} <= scopes
    assert not scopes & {"web:aarav", "telegram:1003", "web:mom", "telegram:1002"}


async def test_policy_status_shows_each_members_safety_profile(home, serve_halo) -> None:
    running = await serve_halo(family_settings(home, "llm: {provider: none}\n"))
    async with running.http.get(running.url("/policy/status"), headers=OWNER_AUTH) as r:  # a parent
        assert r.status == 200
        profiles = {m["id"]: m["safety"] for m in (await r.json())["members"]}
    assert profiles["tara"]["guarded"] and profiles["tara"]["parents_who_may_read_transcript"] == ["wags", "mom"]
    assert profiles["aarav"]["parents_who_may_read_transcript"] == []
    assert "outward" in profiles["aarav"]["tool_classes"] and "outward" not in profiles["tara"]["tool_classes"]
    assert profiles["tara"]["max_reply_chars"] == 600 and profiles["tara"]["notify_parents_on_medium"]
    assert profiles["wags"] == {"member": "wags", "role": "parent", "guarded": False}
