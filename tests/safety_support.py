"""Test helpers for the child guardrails: the fake model as classifier and responder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.loader import load_settings
from config.settings import Settings
from tests.conftest import FAMILY_YAML, write_home

# the shared family, with a web token for the young child so she can use the web chat
SAFETY_FAMILY = FAMILY_YAML.replace("telegram_user_id: 1004}", "telegram_user_id: 1004, web_token: tara-token}")
assert SAFETY_FAMILY != FAMILY_YAML


def family_settings(home: Path, extra_yaml: str = "", family: str = SAFETY_FAMILY) -> Settings:
    write_home(home, extra_yaml, family=family)
    return load_settings(home)


Verdict = tuple[str, str, str | None]  # level, category ("none" when low), blocked topic


@dataclass
class SafetyScript:
    """A fake model's responder: requests carrying the classifier's instructions are the risk
    classifier, the rest the assistant. The classifier answers from `verdicts` (first key found in the text),
    else "low"; `summary` is what it says to parents."""

    reply: str = "Hello from the fake model"
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    summary: str = "A neutral one-line summary."
    classified: list[tuple[str, str]] = field(default_factory=list)  # (direction, text)
    answered: list[str] = field(default_factory=list)  # the assistant's prompts' last user text

    def __call__(self, body: dict[str, Any]) -> str:
        # chat completions and Anthropic send "messages", the Responses API "input"
        messages = body.get("messages") or body.get("input") or []
        last = messages[-1] if isinstance(messages, list) and messages else {}
        content = last.get("content", "") if isinstance(last, dict) else ""
        text = (
            content
            if isinstance(content, str)
            else " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        )
        wire = json.dumps(body)
        if "child-safety classifier" in wire:
            direction = "output" if "DIRECTION: output" in wire else "input"
            self.classified.append((direction, text))
            level, category, topic = next((v for key, v in self.verdicts.items() if key in text), ("low", "none", None))
            return json.dumps({"level": level, "category": category, "blocked_topic": topic, "summary": self.summary})
        self.answered.append(text)
        return self.reply


def transcript(halo: Any, scope_id: str) -> list[tuple[str, str]]:
    store = halo.transcripts
    return [(line.role, line.text) for _, line in store.read_from(scope_id)]


async def alerts(halo: Any, member_id: str) -> list[str]:
    """The safety alerts in a member's web inbox (the fuller text, quoting only when allowed),
    as the web chat page fetches them."""
    from adapters.web import WebChatAdapter, inbox_table, metadata

    web = next(a for a in halo.adapters if isinstance(a, WebChatAdapter))
    async with web.tables.read(metadata) as conn:
        rows = (await conn.execute(inbox_table.select().order_by(inbox_table.c.seq))).all()
    return [r.text for r in rows if r.scope_id == f"web:{member_id}" and r.kind == "alert"]


async def pushed_alerts(halo: Any, member_id: str) -> list[str]:
    """The safety alerts queued for the member's chat apps (never the child's words)."""
    member = halo.policy.family.member(member_id)
    rows = await halo.delivery.store.rows(scope_id=f"telegram:{member.telegram_user_id}", kind="alert")
    return [r.message.text for r in rows]


async def safety_events(halo: Any) -> list[dict[str, Any]]:
    return await halo.audit.tail(200, kind="safety")
