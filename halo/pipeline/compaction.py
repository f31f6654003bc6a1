"""Keeping a scope's session inside its budget after a turn, off the reply path.

Compaction writes a `session.start` line to the transcript with a summary of the older
part and the offset the session now starts from (transcripts/session.py); nothing is
rewritten or removed.
"""

from __future__ import annotations

from agents import Agent, Model, RunConfig, Runner
from agents.items import TResponseInputItem

from transcripts.session import TranscriptSessions

SUMMARY_INSTRUCTIONS = (
    "Summarise this earlier part of a chat for your own later use: keep names, dates, "
    "decisions, open questions and promises; drop greetings. At most 200 words."
)


def model_summariser(model: Model, tracing: bool = False):  # type: ignore[no-untyped-def]
    async def summarise(items: list[TResponseInputItem]) -> str:
        agent = Agent(name="summariser", instructions=SUMMARY_INSTRUCTIONS, model=model)
        transcript = "\n".join(_item_text(i) for i in items)
        result = await Runner.run(agent, transcript, run_config=RunConfig(tracing_disabled=not tracing))
        return str(result.final_output or "")

    return summarise


def _item_text(item: TResponseInputItem) -> str:
    if isinstance(item, dict):
        role = item.get("role") or item.get("type", "item")
        content = item.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return f"{role}: {content if content is not None else item.get('output', '')}"
    return str(item)


async def compact_if_needed(sessions: TranscriptSessions, scope_id: str, model: Model | None, tracing: bool) -> bool:
    """Compact only when the model's last history read saw more than the budget (no extra reads)."""
    if not sessions.over_budget(scope_id):
        return False
    summarise = model_summariser(model, tracing) if model is not None else None
    return await sessions.compact(scope_id, summarise)
