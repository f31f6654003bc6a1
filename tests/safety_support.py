"""Test helpers for the child guardrails: the fake model as classifier and responder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.loader import load_settings
from config.settings import Settings
from tests.conftest import FAMILY_YAML, write_home
from transcripts import TranscriptStore

# the shared family, with a web token for the young child so she can use the web chat
SAFETY_FAMILY = FAMILY_YAML.replace("telegram_user_id: 1004}", "telegram_user_id: 1004, web_token: tara-token}")
assert SAFETY_FAMILY != FAMILY_YAML


def family_settings(home: Path, extra_yaml: str = "", family: str = SAFETY_FAMILY) -> Settings:
    write_home(home, extra_yaml, family=family)
    return load_settings(home)

Verdict = tuple[str, str, str | None]  # level, category ("none" when low), blocked topic


@dataclass
class SafetyScript:
    """A FakeOpenAI responder: requests with a `response_format` are the risk classifier, the
    rest the assistant. The classifier answers from `verdicts` (first key found in the text),
    else "low"; `summary` is what it says to parents."""

    reply: str = "Hello from the fake model"
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    summary: str = "A neutral one-line summary."
    classified: list[tuple[str, str]] = field(default_factory=list)  # (direction, text)
    answered: list[str] = field(default_factory=list)  # the assistant's prompts' last user text

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body.get("messages") or []
        text = str(messages[-1].get("content", "")) if messages else ""
        if body.get("response_format"):
            system = str(messages[0].get("content", "")) if messages else ""
            direction = "output" if "DIRECTION: output" in system else "input"
            self.classified.append((direction, text))
            level, category, topic = next(
                (v for key, v in self.verdicts.items() if key in text), ("low", "none", None)
            )
            return json.dumps({"level": level, "category": category, "blocked_topic": topic,
                               "summary": self.summary})
        self.answered.append(text)
        return self.reply


def transcript(halo: Any, scope_id: str) -> list[tuple[str, str]]:
    store = TranscriptStore(halo.settings.paths.transcripts)
    return [(line.role, line.text) for _, line in store.read_from(scope_id)]


def alerts(halo: Any, member_id: str) -> list[str]:
    """The safety alerts a member was sent (the notifier's outbox)."""
    notifier = halo.services.notifier
    return [n.text for n in notifier.outbox.for_member(member_id) if n.kind == "safety_alert"]


def safety_events(halo: Any) -> list[dict[str, Any]]:
    return halo.services.audit.tail(200, kind="safety")
