"""The labelled routing corpus (tests/data/routing_corpus.jsonl) and envelopes for it.

Each line is a family message with the least level that answers it well (`level`, L0–L3,
labelled by hand), its `kind` (acknowledgement, greeting, command, small_talk, logistics,
homework, planning, document, status, memory), the scope type it was sent in and who sent it.
L0 means code answers it completely: a command, a canned reply to thanks or a greeting, or a
deterministic handler (issue 25: the task list's answer to a status question; a reminder with
a clear time, a list change, "remember that …", each done as its command would do it).
tests/test_plain_words.py and tests/test_routing.py check those answers are the real thing.
Used by tests/test_routing_corpus.py (the rules, in CI) and bench/routing.py (the real pipeline).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from config.family import Family
from halo.core.envelope import Envelope, Speaker
from halo.core.scopes import resolve_scope
from halo.routing.levels import Level
from tests.conftest import FAMILY_YAML

CORPUS = Path(__file__).parent / "data" / "routing_corpus.jsonl"
FAMILY_GROUP_CHAT = -1005678
# the test family, with a whole-family group, and routing on
CORPUS_FAMILY = (
    FAMILY_YAML.replace("routing: {enabled: false}", "routing: {enabled: true}")
    .replace("work:", f"family_group: {{telegram_chat_id: {FAMILY_GROUP_CHAT}}}\nwork:")
    .replace("telegram_user_id: 1001,", "telegram_user_id: 1001, discord_user_id: 2002,")
)


@dataclass(frozen=True, slots=True)
class Labelled:
    text: str
    kind: str
    level: Level
    scope: str  # dm, parents_group, family_group, work_channel
    speaker: str  # a member id of the test family


def load_corpus() -> list[Labelled]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Labelled(r["text"], r["kind"], Level[r["level"]], r["scope"], r["speaker"]) for r in rows]


def corpus_envelope(family: Family, message: Labelled, ts: datetime | None = None) -> Envelope:
    """The message as its platform's adapter would make it: addressed to halo, in its scope
    (sent now, or at `ts`)."""
    member = family.member(message.speaker)
    assert member is not None, message.speaker
    if message.scope == "work_channel":
        assert member.discord_user_id is not None
        user_id, platform, chat = str(member.discord_user_id), "discord", "discord:3001"
    else:
        assert member.telegram_user_id is not None
        user_id, platform = str(member.telegram_user_id), "telegram"
        chat = {
            "dm": f"telegram:{user_id}",
            "parents_group": "telegram:-1001234",
            "family_group": f"telegram:{FAMILY_GROUP_CHAT}",
        }[message.scope]
    scope = resolve_scope(family, chat)
    assert scope.type == message.scope, (chat, scope.type)
    when = {} if ts is None else {"ts": ts}
    return Envelope(platform, scope, Speaker(user_id, member=member), message.text, addressed=True, **when)
