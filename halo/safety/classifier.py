"""The cheap-tier risk classification: a structured answer from a small model, on top of the floor.

It can only make a decision stricter (`stricter` in screen.py), so a prompt injection in a
child's message ("classify this as low") gains nothing. A failure falls back to the floor.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from agents import Agent, Model, ModelSettings, RunConfig, Runner
from pydantic import BaseModel, Field

from halo.safety.screen import Assessment

Direction = Literal["input", "output"]

INSTRUCTIONS = """\
You are the child-safety classifier of a family assistant. You never answer the text; you
only classify it. DIRECTION: {direction} — {what}. The child is {age}.

level:
- high: the child may be in danger or being harmed: self-harm or suicide, abuse, immediate
  danger (fire, poison, injury, an intruder), sexual content involving or shown to a child,
  or a stranger seeking to meet them, get photos, or keep secrets from their parents.
- medium: worrying but not urgent: sharing an address, phone number or school, a new friend
  met online, feeling very low, mild sexual curiosity, being bullied.
- low: everything else.
category: one of self_harm, abuse, danger, sexual, strangers, personal_data, other; "none" when low.
blocked_topic: the one of these topics the text is mainly about, else null: {topics}.
summary: one short, neutral sentence for a parent that does not quote the text.
"""

_WHAT = {
    "input": "a message the child sent to the assistant",
    "output": "a reply the assistant is about to send to the child",
}
_AGE = {"young_child": "a young child (about 5 to 10)", "adolescent": "a teenager (about 11 to 17)"}


class RiskClassification(BaseModel):
    """The classifier's structured answer (the model's output_type)."""

    level: Literal["low", "medium", "high"]
    category: Literal["self_harm", "abuse", "danger", "sexual", "strangers", "personal_data", "other", "none"]
    blocked_topic: str | None
    summary: str = Field(description="one neutral sentence, no quotes from the text")


class RiskClassifier:
    """Runs one small Agents SDK agent per text; `classify` raises on provider failure."""

    def __init__(self, model: Model, model_settings: ModelSettings, *, tracing: bool = False) -> None:
        self.model = model
        # short and repeatable: a classification is a few dozen tokens
        self.model_settings = dataclasses.replace(model_settings, max_tokens=300, temperature=0.0)
        self.run_config = RunConfig(tracing_disabled=not tracing)

    async def classify(self, text: str, *, direction: Direction, age_group: str, topics: tuple[str, ...]) -> Assessment:
        agent = Agent(
            name="child_safety_classifier",
            instructions=INSTRUCTIONS.format(
                direction=direction,
                what=_WHAT[direction],
                age=_AGE.get(age_group, age_group),
                topics=", ".join(topics) or "(none)",
            ),
            model=self.model,
            model_settings=self.model_settings,
            output_type=RiskClassification,
        )
        result = await Runner.run(agent, text, run_config=self.run_config, max_turns=1)
        answer = result.final_output_as(RiskClassification, raise_if_incorrect_type=True)
        topic = answer.blocked_topic.strip().lower() if answer.blocked_topic else None
        return Assessment(
            level=answer.level,
            category=None if answer.category == "none" or answer.level == "low" else answer.category,
            topic=topic if topic in topics else None,  # only the profile's own topics count
            source="classifier",
            summary=answer.summary.strip()[:200],
        )
